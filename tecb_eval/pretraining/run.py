"""``pretrain``: continued pre-training of a transformers checkpoint on the benchmark's own texts
(the transductive setting), with V-measure tracked during training.

One run per dataset by default, as the paper: each dataset's model trains on that dataset's unique
texts and is evaluated on it. ``pool=True`` trains one model on the union of the datasets instead.

Output folder, per dataset (default)::

    OUT/summary.md, summary.csv   Table 5: one column (md) / rows (csv) per dataset, and their average
    OUT/figure.png                Figure 2: one panel per dataset
    OUT/evaluations.csv           every dataset's evaluations together
    OUT/run.json                  profile, settings, versions, each run's schedule and best checkpoints
    OUT/<dataset>/                one run: evaluations.csv, evaluations_splits.csv, losses.csv,
                                  figure.png, summary.md, summary.csv, run.json, timings.json,
                                  seed-<seed>/best/ (the seed's best checkpoint: a sentence-transformers
                                  folder when the model is one, else a transformers checkpoint)

Pooled (``pool=True``), the one run's files are OUT's own (OUT/seed-<seed>/best/, ...).
"""

from __future__ import annotations

import gc
import json
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable

from tecb_data.errors import UserError
from tecb_data.outputs import inside, name_problem, refuse_nested, refuse_overlap, staged_output
from tecb_eval.models.devices import check_device
from tecb_eval.clustering.evaluation import unique_texts
from tecb_eval.pretraining.loop import Schedule, train_seed
from tecb_eval.pretraining.report import (POOLED, RunRows, plot_curves, summarize, summary_markdown,
                                          write_summary_csv)
from tecb_eval.pretraining.settings import PretrainSettings, as_dict, settings_for
from tecb_eval.pretraining.truncate import check_truncation, truncate_checkpoint
from tecb_eval.clustering.profiles import Profile, get_profile
from tecb_eval.grid.seeds import PAPER_SEEDS, check_seed, check_seeds
from tecb_eval.training.checkpoints import library_versions
from tecb_eval.training.data import load_benchmarks
from tecb_eval.training.device import autocast_factory, deterministic, resolve_device
from tecb_eval.training.encoding import HIDDEN, LOGITS, MODULES, describe, grid_encoder
from tecb_eval.training.errors import NonFiniteVectors, TrainingDiverged
from tecb_eval.training.model import ModelSource, model_source
from tecb_eval.training.tracking import EVALUATIONS_CSV, LiveLogitsPoolingEncoder, Tracker, dataset_means, read_csv

DEFAULT_SEEDS = PAPER_SEEDS
COMMAND = "tecb-eval pretrain"  # the marker in its output folders names it
FIGURE = "figure.png"
SUMMARY_CSV = "summary.csv"
SUMMARY_MD = "summary.md"
RUN_JSON = "run.json"
TIMINGS_JSON = "timings.json"


@dataclass(frozen=True)
class PretrainRun:
    """One run: a model per seed, trained on one dataset (or on the pooled datasets) and evaluated on it."""

    name: str  # the dataset's name, or "pooled"
    datasets: tuple  # the names of the datasets it trained on and was evaluated on
    output_dir: Path  # its folder: OUT/<dataset>/, or OUT/ when pooled
    n_texts: int  # unique texts trained on
    baseline: dict  # dataset -> V-measure of the model without pre-training
    evaluations: list  # the rows of its evaluations.csv
    best: dict  # seed -> {"step", "epoch", "v_measure", "datasets", "path"}
    summary: list  # the rows of its summary.csv
    figure: Path
    schedule: dict  # steps_per_epoch, total_steps, warmup_steps
    timings: dict  # train_seconds_per_epoch (seed -> seconds), evaluations


@dataclass(frozen=True)
class PretrainResult:
    """What ``pretrain`` did: its runs by name (each dataset's name, or "pooled") and the summary over them.

    ``result["blurbs-clustering-s2s"].best[42]["path"]`` is that dataset's best checkpoint of seed
    42; ``result.summary`` the rows of OUT/summary.csv (Table 5); ``result.baseline`` the V-measure of
    the model without pre-training per dataset."""

    output_dir: Path
    method: str
    profile: Profile
    pool: bool
    settings: PretrainSettings
    runs: dict  # name -> PretrainRun, in name order
    summary: list  # the rows of OUT/summary.csv: per dataset (and their average), last and best
    figure: Path

    def __getitem__(self, name: str) -> PretrainRun:
        try:
            return self.runs[name]
        except KeyError:
            raise KeyError(f"no run named {name!r}; the runs are {', '.join(self.runs)}") from None

    @property
    def datasets(self) -> list[str]:
        return [d for run in self.runs.values() for d in run.datasets]

    @property
    def baseline(self) -> dict:
        return {d: v for run in self.runs.values() for d, v in run.baseline.items()}

    @property
    def best(self) -> dict:
        """run name -> seed -> the best checkpoint's step, epoch, V-measure and path."""
        return {name: run.best for name, run in self.runs.items()}

    @property
    def evaluations(self) -> list:
        return [row for run in self.runs.values() for row in run.evaluations]


def _objective(method: str):
    if method == "wwm":
        from tecb_eval.pretraining.wwm import WholeWordMasking

        return WholeWordMasking
    from tecb_eval.pretraining.tsdae import Tsdae

    return Tsdae


def _seeds(seeds: Iterable[int]) -> tuple[int, ...]:
    return check_seeds(int(s) for s in seeds)


def _inputs(benchmarks, source: ModelSource) -> list[Path]:
    """The folders this run reads: local dataset folders and the model's."""
    return [Path(b.location) for b in benchmarks if Path(b.location).is_dir()] + [source.sentence_model or source.checkpoint]


def _clip_max_length(settings: PretrainSettings, folder: Path) -> PretrainSettings:
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(folder))
    limit = getattr(config, "max_position_embeddings", None)
    if limit and getattr(config, "model_type", "") in ("roberta", "xlm-roberta", "camembert"):
        limit -= 2  # these count two position slots for padding
    return replace(settings, max_length=min(settings.max_length, limit)) if limit else settings


def pretrain(model, datasets, method: str = "wwm", *, profile: str | Profile | None = None, pool: bool = False,
             epochs: int | None = None, seeds: Iterable[int] = DEFAULT_SEEDS, eval_every: int | None = None,
             output_dir, overwrite: bool = False, progress: bool = True, **settings) -> PretrainResult:
    """Continue pre-training ``model`` with ``method`` ("wwm" or "tsdae"), once per seed and per
    dataset, each dataset's model on that dataset's unique texts (``pool=True``: one model on the
    union of all datasets' unique texts), evaluating V-measure (Minibatch k-Means, every split)
    during training; keeps each seed's best checkpoint per run.

    ``model``: a transformers checkpoint folder, a Hub repo id, or ``minilm-l6``. ``profile``:
    "current" (default, today's libraries) or "paper" (what the authors ran: the classic whole word
    masking, logits pooling in WWM evaluations, 30 TSDAE epochs on sentence-transformers 2.2's
    evaluation schedule); see ``tecb_eval.clustering.profiles``. Any field of :class:`PretrainSettings` can be
    given by name (``learning_rate=...``, ``batch_size=...``, ``precision="bf16"``, ``max_steps=...``);
    the others keep the defaults of ``method`` under ``profile``.

    Every evaluation, the model without pre-training included, encodes the model as ``tecb-eval
    run`` does (``tecb_eval.training.encoding``): a sentence-transformers model through its own
    modules, a plain checkpoint by mean pooling, so its "none" row is the grid's score of the model;
    a kept checkpoint is the same kind of model and scores in the grid what it scored here. Only the
    paper profile's WWM evaluations pool the masked-LM logits, and the summary then gives the grid's
    scores beside them.

    The output layout is in this module's docstring. The whole folder is written to
    ``<output_dir>.partial`` and renamed when complete. The same seeds give the same CSVs, byte
    for byte, and a dataset's run does not depend on which other datasets were given with it.

    A loss, gradient norm or evaluation vector that is NaN or infinite stops the run with
    :class:`tecb_eval.training.errors.TrainingDiverged` (a ``UserError``) naming the step, seed
    and dataset; nothing is published, and ``<output_dir>.partial`` keeps the evaluations so far
    and each seed's best checkpoint until the next run into ``output_dir``.

    Args:
        model (str | Path): A transformers checkpoint folder, a Hub repo id, or ``minilm-l6``.
        datasets (Sequence[str | Path | Benchmark]): Dataset folders, repo ids or loaded benchmarks.
        method (str): ``"wwm"`` (whole-word masking) or ``"tsdae"``.
        profile (str | Profile | None): ``"current"`` or ``"paper"``; None: ``"current"``.
        pool (bool): Train one model on the union of all datasets' unique texts instead of one per dataset.
        epochs (int | None): Training epochs; None: the method's default under the profile.
        seeds (Iterable[int]): Training seeds, one run each; default 42, 1, 2.
        eval_every (int | None): Evaluate every N optimiser steps; None: the method's default.
        output_dir (str | Path): The run's folder (keyword, required); written as
            ``<output_dir>.partial`` and renamed when complete.
        overwrite (bool): Replace an earlier run's output in ``output_dir``.
        progress (bool): Show progress bars on a terminal.
        **settings (Any): Any field of ``PretrainSettings`` by name (``learning_rate``, ``batch_size``,
            ``precision``, ``max_steps``, ...).

    Returns:
        PretrainResult: The evaluations per seed and step, and each seed's best checkpoint
            (``result.best[seed]["path"]``).

    Raises:
        UserError: An unknown method, profile or setting, a bad seed or device, an output folder that
            is not ours to write, or ``TrainingDiverged`` (a NaN or infinite loss, gradient or vector).
    """
    from tecb_eval.models.kinds.common import DEFAULT_BATCH_SIZE

    profile = get_profile(profile)
    if settings.get("eval_batch_size") is None:
        # The grid's batch size: other batches pad differently and change the vectors' last bits,
        # and the model without pre-training is to score here exactly what `tecb-eval run` scores.
        settings["eval_batch_size"] = DEFAULT_BATCH_SIZE
    s = settings_for(method, profile, epochs=epochs, eval_every=eval_every, **settings)
    seeds = _seeds(seeds)
    refuse_nested(output_dir, command=COMMAND)  # never inside a dataset or another command's output
    benchmarks = load_benchmarks(datasets)
    groups = {POOLED: benchmarks} if pool else {b.name: [b] for b in benchmarks}
    if not pool:
        for name in groups:  # each dataset's run is a folder named by it: checked before any work
            inside(output_dir, name, what="a dataset's name")
            problem = name_problem(name)
            if problem is not None:
                raise UserError(f"dataset {name[:60]!r}: its name {problem}, but its run's folder is named by it; "
                                "give it a plain name")
    texts = {name: unique_texts(group) for name, group in groups.items()}
    for name, found in texts.items():
        if not found:
            raise UserError("the datasets hold no texts to train on" if pool else f"{name}: the dataset holds no texts to train on")
    source = model_source(model)
    folder = source.checkpoint
    # An output holding (or inside) a dataset or the model would be replaced by --overwrite.
    refuse_overlap(output_dir, _inputs(benchmarks, source))
    check_device(s.device)
    check_seed(s.kmeans_seed, "kmeans_seed")
    truncation = None
    if s.truncate_at is not None:
        n_layers = check_truncation(folder, s.truncate_at)
        # Written once as an ordinary checkpoint; every seed, objective and evaluation loads it.
        truncation = tempfile.TemporaryDirectory(prefix="tecb-truncated-")
        folder = truncate_checkpoint(folder, s.truncate_at, Path(truncation.name) / "model")
        # A layer of a sentence-transformers model is mean-pooled in the grid (get_encoder's layer=k),
        # so the truncated model is trained, evaluated and kept as a plain checkpoint.
        source = replace(source, checkpoint=folder, sentence_model=None)
    device = resolve_device(s.device)
    autocast = autocast_factory(s.precision, device)
    s = replace(_clip_max_length(s, folder), device=device)
    as_grid = MODULES if source.sentence_model is not None else HIDDEN
    eval_pooling = LOGITS if method == "wwm" and profile.wwm_eval_pooling == LOGITS else as_grid
    shown = Path(str(model)).name if Path(str(model)).is_dir() else str(model)
    if s.truncate_at is not None:
        shown = f"{shown} truncated at layer {s.truncate_at} of {n_layers}"
    common = {
        "model": str(model), "model_id": source.model_id, "method": method, "profile": profile.as_dict(), "pool": pool,
        "seeds": list(seeds), "settings": as_dict(s), "evaluation_pooling": eval_pooling,
    }
    output_dir = Path(output_dir)
    done: dict[str, dict] = {}
    try:
        # Written into OUT.partial, held until published (a second pretrain into the same OUT refuses
        # instead of removing this work), then swapped in with the marker listing every file: what a
        # later --overwrite may remove, and nothing else. After Ctrl-C or a divergence the partial
        # folder stays for inspection (a diverged run's best checkpoint before the divergence is in
        # it, and its message says where); a rerun removes it.
        with staged_output(output_dir, COMMAND, overwrite=overwrite,
                           keep_partial=(KeyboardInterrupt, TrainingDiverged)) as stage:
            work = stage.work
            for name, group in groups.items():
                run_dir = work if pool else inside(work, name, what="a dataset's name")
                run_dir.mkdir(exist_ok=True)
                done[name] = _run(source, s, seeds, group, texts[name], run_dir, name=name, shown=shown, common=common,
                                  profile=profile, eval_pooling=eval_pooling, device=device, autocast=autocast,
                                  progress=progress)
            if pool:
                summary = done[POOLED]["summary"]
            else:
                summary = _write_overview(work, done, shown=shown, common=common, profile=profile)
    finally:
        if truncation is not None:
            truncation.cleanup()

    runs = {}
    for name, d in done.items():
        run_dir = output_dir if pool else output_dir / name
        best = {seed: {**info, "path": run_dir / info["path"] if info["path"] else None}
                for seed, info in d["best"].items()}
        baseline = {r["dataset"]: r["v_measure"] for r in d["rows"] if r["step"] == 0 and r["seed"] == seeds[0]}
        runs[name] = PretrainRun(name, tuple(b.name for b in groups[name]), run_dir, len(texts[name]), baseline,
                                 d["rows"], best, d["summary"], run_dir / FIGURE, d["schedule"], d["timings"])
    return PretrainResult(output_dir, method, profile, pool, s, runs, summary, output_dir / FIGURE)


def _run(source: ModelSource, s: PretrainSettings, seeds: tuple[int, ...], benchmarks: list, texts: list[str],
         work: Path, *, name: str, shown: str, common: dict, profile: Profile, eval_pooling: str, device: str, autocast,
         progress: bool) -> dict:
    """One run (every seed) on ``texts``, evaluated on ``benchmarks``; writes its files into ``work``."""
    schedule = Schedule.of(len(texts), s)
    tracker = Tracker(work, benchmarks, s.method, s.kmeans_seed, s.save_best,
                      checkpoint_info={"profile": profile.name, "evaluation_pooling": eval_pooling, "trained_on": name,
                                       **({"truncate_at": s.truncate_at} if s.truncate_at is not None else {})})
    try:
        outcomes, evaluation = _train_seeds(source, s, seeds, texts, schedule, tracker, profile=profile,
                                            eval_pooling=eval_pooling, device=device, autocast=autocast,
                                            progress=progress, label=name, shown=shown)
    finally:
        tracker.close()
    epochs_done = round(outcomes[0].steps / schedule.steps_per_epoch, 2)
    rows = read_csv(work / EVALUATIONS_CSV)
    run_rows = RunRows(name, rows, {seed: info["step"] for seed, info in tracker.best.items()}, epochs_done,
                       evaluation)
    summary = summarize([run_rows], profile=profile.name)
    write_summary_csv(summary, work / SUMMARY_CSV)
    demo = _synthetic(benchmarks)
    markdown = summary_markdown(summary, model=shown, epochs_done={name: epochs_done}, profile=profile,
                                evaluations=[evaluation])
    (work / SUMMARY_MD).write_text(_demo_first(markdown, demo), encoding="utf-8")
    plot_curves(rows, work / FIGURE, title=f"{s.method.upper()} pre-training of {shown} on {name} "
                                           f"(profile {profile.name})" + _demo_title(demo))
    schedule_info = {"steps_per_epoch": schedule.steps_per_epoch, "total_steps": schedule.total_steps,
                     "warmup_steps": schedule.warmup_steps}
    run = {
        **common, "trained_on": name, "texts": len(texts), "evaluation": evaluation,
        "datasets": [{"name": b.name, "fingerprint": b.fingerprint} for b in benchmarks],
        "schedule": schedule_info, "epochs_done": epochs_done,
        "best": {str(seed): info for seed, info in tracker.best.items()},
        "versions": library_versions(),
    }
    (work / RUN_JSON).write_text(json.dumps(run, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    # Wall-clock times differ from run to run, so they live apart from the reproducible outputs.
    timings = {
        "train_seconds_per_epoch": {str(o.seed): o.epoch_seconds for o in outcomes},
        "evaluations": tracker.eval_timings,
    }
    (work / TIMINGS_JSON).write_text(json.dumps(timings, indent=2) + "\n", encoding="utf-8")
    return {"rows": rows, "run_rows": run_rows, "summary": summary, "best": tracker.best, "schedule": schedule_info,
            "timings": timings, "texts": len(texts), "datasets": run["datasets"], "evaluation": evaluation,
            "demo": demo}


def _synthetic(benchmarks) -> bool:
    """Whether any dataset was built from the embedded demo sample: its outputs then say so."""
    from tecb_data.demo import is_demo_manifest

    return any(is_demo_manifest(getattr(b, "manifest", None)) for b in benchmarks)


def _demo_first(markdown: str, demo: bool) -> str:
    from tecb_eval.reports.tables import DEMO_NOTE

    return f"{DEMO_NOTE}\n\n{markdown}" if demo else markdown


def _demo_title(demo: bool) -> str:
    from tecb_eval.reports.tables import DEMO_TITLE

    return f"\n{DEMO_TITLE}" if demo else ""


def _write_overview(work: Path, done: dict[str, dict], *, shown: str, common: dict, profile: Profile) -> list[dict]:
    """OUT's own files over the per-dataset runs: summary, figure, all evaluations, run.json."""
    summary = summarize([d["run_rows"] for d in done.values()], profile=profile.name)
    write_summary_csv(summary, work / SUMMARY_CSV)
    markdown = summary_markdown(summary, model=shown, profile=profile,
                                evaluations=[d["evaluation"] for d in done.values()],
                                epochs_done={name: d["run_rows"].epochs_done for name, d in done.items()})
    demo = any(d.get("demo") for d in done.values())
    (work / SUMMARY_MD).write_text(_demo_first(markdown, demo), encoding="utf-8")
    rows = [row for d in done.values() for row in d["rows"]]
    plot_curves(rows, work / FIGURE, average=False,
                title=f"{common['method'].upper()} pre-training of {shown}, one model per dataset "
                      f"(profile {profile.name})" + _demo_title(demo))
    # The runs' evaluations.csv share a header; joined as they are, so the bytes stay reproducible.
    with open(work / EVALUATIONS_CSV, "w", encoding="utf-8", newline="") as out:
        for i, name in enumerate(done):
            lines = (work / name / EVALUATIONS_CSV).read_text(encoding="utf-8").splitlines(keepends=True)
            out.writelines(lines if i == 0 else lines[1:])
    run = {
        **common,
        "datasets": [ds for d in done.values() for ds in d["datasets"]],
        "runs": {name: {"folder": name, "texts": d["texts"], "schedule": d["schedule"], "evaluation": d["evaluation"],
                        "epochs_done": d["run_rows"].epochs_done,
                        "best": {str(seed): {**info, "path": f"{name}/{info['path']}" if info["path"] else None}
                                 for seed, info in d["best"].items()}}
                 for name, d in done.items()},
        "versions": library_versions(),
    }
    (work / RUN_JSON).write_text(json.dumps(run, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return summary


def _train_seeds(source: ModelSource, s: PretrainSettings, seeds: tuple[int, ...], texts: list[str],
                 schedule: Schedule, tracker: Tracker, *, profile: Profile, eval_pooling: str, device: str, autocast,
                 progress: bool, label: str, shown: str) -> tuple[list, dict]:
    """One training run per seed, each from the original checkpoint. Returns the seeds' outcomes
    and how the model was evaluated (for run.json and the summary): ``pooling``, ``encoding`` (the
    grid's, in words) and, where the evaluations pooled otherwise than the grid (``logits``), the
    grid's scores of the model without pre-training and of each seed's best checkpoint."""
    import torch

    objective_class = _objective(s.method)
    baseline_rows = None
    outcomes = []
    evaluation: dict = {"pooling": eval_pooling}
    for seed in seeds:
        with deterministic(seed, device):
            objective = objective_class(source.checkpoint, s, seed, device, profile,
                                        sentence_model=source.sentence_model)
            as_grid = grid_encoder(objective, batch_size=s.eval_batch_size, device=device)
            evaluation["encoding"] = describe(as_grid)
            if eval_pooling == LOGITS:
                encoder = LiveLogitsPoolingEncoder(objective.module, objective.tokenizer, max_length=s.max_length,
                                                   batch_size=s.eval_batch_size, device=device, autocast=autocast)
            else:
                # fp32 whatever the training precision: the grid encodes a kept checkpoint in fp32.
                encoder = as_grid
            if baseline_rows is None:
                baseline_rows = _baseline(tracker, encoder, shown)
                if eval_pooling == LOGITS:
                    evaluation["grid_baseline"] = dataset_means(_baseline(tracker, as_grid, shown, what="as the grid"))
            tracker.record(seed, 0, 0.0, baseline_rows, objective)

            def evaluate(step: int, epoch: float, seed=seed, encoder=encoder, objective=objective) -> float:
                return tracker.evaluate(seed, step, epoch, encoder, objective)

            outcomes.append(train_seed(objective, texts, s, seed, schedule, evaluate, tracker,
                                       device=device, autocast=autocast, progress=progress, label=label))
        # Free this seed's model (and optimizer state) before the next one is loaded.
        del objective, encoder, as_grid, evaluate
        gc.collect()
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
        if eval_pooling == LOGITS and tracker.best[seed]["path"]:
            from tecb_eval.models.encoders import get_encoder

            # The best checkpoint was chosen on logits; the grid scores it by its own encoding.
            kept = get_encoder(str(tracker.workdir / tracker.best[seed]["path"]), batch_size=s.eval_batch_size,
                               device=device)
            tracker.score_as_the_grid(seed, kept)
            del kept
    if eval_pooling == LOGITS:
        evaluation["grid_best"] = {str(seed): info["grid_datasets"] for seed, info in tracker.best.items()
                                   if "grid_datasets" in info}
    return outcomes, evaluation


def _baseline(tracker: Tracker, encoder, shown: str, what: str = "evaluation") -> list[dict]:
    try:
        return tracker.baseline(encoder, what=what)
    except NonFiniteVectors as exc:
        raise UserError(f"{shown}: the model without pre-training gives vectors that are not finite ({exc}); it "
                        "cannot be evaluated, so there is nothing to pre-train from") from None
