"""``finetune``: train an embedding model on a clustering metric (COB) and its baselines, per fold
of a leak-free protocol, and score the published splits each fold holds out.

Output folder (written as ``OUT.partial``, renamed when complete; a rerun with the same model, data
and settings resumes there, keeping every finished unit)::

    OUT/summary.md, summary.csv    the table (no training, triplet, contrastive, COB, ablations) with intervals
    OUT/comparisons.csv            paired differences against no training and against triplet
    OUT/scores.csv                 every score: method, fold, train seed, split, seed, configuration, metrics
    OUT/evaluations.csv            validation ARI and scored V-measure during training, every unit
    OUT/figure.png                 those curves
    OUT/run.json                   model, protocol, methods, seeds, settings, folds (held-out genre, excluded ids' digest), versions
    OUT/<method>/<fold>/seed-<seed>/   one unit: evaluations.csv, losses.csv, scores.csv, unit.json, best/ (the
                                   checkpoint chosen by validation ARI: a sentence-transformers folder)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tecb_data.demo import is_demo_manifest
from tecb_data.errors import UserError
from tecb_data.outputs import refuse_nested, refuse_overlap, staged_output
from tecb_data.seeding import DEFAULT_SEED
from tecb_eval.files import csv_value, write_rows_csv
from tecb_eval.finetuning import protocols, report
from tecb_eval.finetuning.instances import check_pool
from tecb_eval.finetuning.loop import check_trainable, train_unit
from tecb_eval.finetuning.scoring import score_splits
from tecb_eval.finetuning.settings import BASELINE, METHODS, as_dict, for_method, settings_for
from tecb_eval.grid.seeds import PAPER_SEEDS, check_seeds
from tecb_eval.reports.compare import DEFAULT_RESAMPLES
from tecb_eval.reports.tables import csv_safe
from tecb_eval.training.checkpoints import library_versions
from tecb_eval.training.data import load_benchmarks
from tecb_eval.training.device import resolve_device
from tecb_eval.training.errors import write_failure
from tecb_eval.training.model import describe_model, load_sentence_model
from tecb_eval.training.tracking import LiveSentenceTransformerEncoder

COMMAND = "tecb-eval finetune"
DEFAULT_SEEDS = (DEFAULT_SEED,)  # training seeds
SCORE_SEEDS = PAPER_SEEDS  # the grid's seeds for k-means
SCORE_FIELDS = ("model", "fold", "train_seed", "dataset", "mteb_name", "split", "seed", "algorithm", "reduction",
                "v_measure", "ari", "nmi", "ri")


@dataclass(frozen=True)
class FinetuneResult:
    output_dir: Path
    protocol: str
    methods: tuple
    folds: list  # per fold: id, fold, held-out genre, validation genre, sizes, excluded ids' digest
    scores: pd.DataFrame  # scores.csv
    summary: list
    comparisons: list
    best: dict  # (method, fold id, seed) -> {"step", "validation_ari", "path", ...}
    timings: dict  # (method, fold id, seed) -> training seconds per epoch
    figure: Path


def _methods(method) -> tuple[str, ...]:
    chosen = (method,) if isinstance(method, str) else tuple(method)
    unknown = [m for m in chosen if m not in METHODS]
    if unknown or not chosen:
        raise UserError(f"unknown fine-tuning method {unknown[0] if unknown else '(none)'!r}; choose from "
                        f"{', '.join(METHODS)}")
    return tuple(m for m in METHODS if m in chosen)


def build_folds(benchmarks, protocol: str) -> list:
    if protocol not in protocols.PROTOCOLS:
        raise UserError(f"unknown protocol {protocol!r}; choose {' or '.join(protocols.PROTOCOLS)}")
    with_genres = [b for b in benchmarks if any(s.name.startswith(protocols.WITHIN) for s in b.splits)]
    if protocol == "leave-one-genre-out":
        if len(benchmarks) != 1:
            raise UserError(f"leave-one-genre-out trains and scores one Blurbs dataset; {len(benchmarks)} given "
                            f"({', '.join(b.name for b in benchmarks)}): pass one")
        return protocols.leave_one_genre_out(benchmarks[0])
    if len(with_genres) != 1:
        raise UserError("--protocol transfer trains on one Blurbs dataset (with within-genre splits and genre paths); "
                        f"{len(with_genres)} given: pass exactly one, plus the datasets to score")
    return protocols.transfer(with_genres[0], [b for b in benchmarks if b is not with_genres[0]])


def _write_json(path: Path, data) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(temporary, path)


def _rows(rows, *, model: str, fold: str, train_seed) -> list[dict]:
    return [{"model": model, "fold": fold, "train_seed": train_seed, **r} for r in rows]


def _read_scores(path: Path) -> list[dict]:
    rows = pd.read_csv(path, keep_default_na=True).to_dict("records")
    return [{k: csv_value(v) for k, v in row.items()} for row in rows]


def _write_scores(rows: list[dict], path: Path) -> None:
    temporary = path.with_name(path.name + ".tmp")
    # A model name holding a formula must not run in a spreadsheet; _read_scores gives it back as it was.
    csv_safe(pd.DataFrame(rows, columns=list(SCORE_FIELDS))).to_csv(temporary, index=False, lineterminator="\n")
    os.replace(temporary, path)


def finetune(model, data, method=METHODS, protocol: str = "leave-one-genre-out", *, seeds=DEFAULT_SEEDS,
             score_seeds=SCORE_SEEDS, folds: int | None = None, output_dir, overwrite: bool = False,
             progress: bool = True, resamples: int = DEFAULT_RESAMPLES, **settings) -> FinetuneResult:
    """Fine-tune ``model`` with each of ``method`` (``cob``, ``cob-r0``, ``reg-only``, ``triplet``,
    ``contrastive``; default all) per fold of ``protocol`` and training seed, choose each unit's
    checkpoint by validation ARI, and score the fold's held-out published splits with k-means
    V-measure (``score_seeds``) and HAC average linkage with the true k (ARI, NMI, RI), beside the
    model without training. ``folds=N`` runs the first N folds only; any field of
    :class:`~tecb_eval.finetuning.settings.FinetuneSettings` is a keyword (``lambda_``, ``reg``,
    ``max_steps``, ...). The output layout is in this module's docstring.

    Args:
        model (str | Path): A sentence-transformers or transformers model folder, a Hub id, or
            ``minilm-l6``.
        data (str | Path | Sequence): The dataset(s) to train and score on: folders, repo ids or
            loaded benchmarks (Blurbs for the leave-one-genre-out protocol).
        method (str | Sequence[str]): ``cob``, ``cob-r0``, ``reg-only``, ``triplet``, ``contrastive``;
            default all five.
        protocol (str): How training and held-out splits are divided: ``"leave-one-genre-out"`` or
            the other protocols of ``tecb_eval.finetuning.protocols``.
        seeds (Iterable[int]): Training seeds, one unit each; default 42.
        score_seeds (Iterable[int]): Seeds of the k-means scoring; default 42, 1, 2 (the grid's).
        folds (int | None): Run only the first N folds; None: all.
        output_dir (str | Path): The run's folder (keyword, required); written as
            ``<output_dir>.partial`` and renamed when complete.
        overwrite (bool): Replace an earlier run's output in ``output_dir``.
        progress (bool): Show progress bars on a terminal.
        resamples (int): Bootstrap and sign-flip resamples of the summary's comparisons.
        **settings (Any): Any field of ``FinetuneSettings`` by name (``lambda_``, ``reg``, ``max_steps``, ...).

    Returns:
        FinetuneResult: The scores per method, fold and seed, beside the untrained model's, and
            the output folder.

    Raises:
        UserError: An unknown method, protocol or setting, bad seeds or folds, a model that cannot be
            trained, a fold whose training and held-out data overlap, or an output folder that is
            not ours to write.
    """
    s = settings_for(**settings)
    methods = _methods(method)
    seeds = check_seeds(int(x) for x in seeds)
    score_seeds = check_seeds(int(x) for x in score_seeds)
    if folds is not None and (isinstance(folds, bool) or not isinstance(folds, int) or folds < 1):
        raise UserError(f"folds must be a positive integer, got {folds!r} (--folds)")
    refuse_nested(output_dir, command=COMMAND)  # never inside a dataset or another command's output
    benchmarks = load_benchmarks(data)
    all_folds = build_folds(benchmarks, protocol)
    chosen = all_folds[:folds] if folds else all_folds
    for fold in all_folds:
        protocols.check_no_leak(fold)
    for fold in chosen:
        check_pool(fold.train, fold.name, s.instance_size)
        for method_name in methods:  # a method with nothing to train on is one line before any work
            for seed in seeds:
                check_trainable(fold, for_method(s, method_name), seed, method_name)
    described = describe_model(model)
    refuse_overlap(output_dir, [Path(b.location) for b in benchmarks if Path(b.location).is_dir()]
                   + [Path(described["folder"])])
    device = resolve_device(s.device)
    fold_info = [{"id": f"fold-{i + 1:02d}", **f.manifest()} for i, f in enumerate(chosen)]
    key = {"model": described, "data": [{"name": b.name, "fingerprint": b.fingerprint} for b in benchmarks],
           "protocol": protocol, "methods": list(methods), "seeds": list(seeds), "score_seeds": list(score_seeds),
           "settings": as_dict(s), "folds": fold_info}
    output_dir = Path(output_dir)
    # An interrupted run's OUT.partial begun for the same key (model, data, protocol, settings) is
    # resumed; whatever stops the run keeps it, so its finished units are not lost. Published with
    # the marker listing every file: what a later --overwrite may remove, and nothing else.
    try:
        with staged_output(output_dir, COMMAND, overwrite=overwrite, resume=key,
                           keep_partial=(BaseException,)) as stage:
            result = _run(model, methods, chosen, fold_info, s, seeds, score_seeds, stage.work, device=device,
                          progress=progress, described=described, protocol=protocol, resamples=resamples,
                          resumed=stage.resumed, key=key,
                          demo=any(is_demo_manifest(getattr(b, "manifest", None)) for b in benchmarks))
    except Exception as exc:
        failure = write_failure(f"--out {output_dir}", exc)
        if failure is not None:
            raise failure from None  # a log or score file on a full disk: one line, the finished units kept
        raise
    return FinetuneResult(output_dir, protocol, methods, fold_info, result["scores"], result["summary"],
                          result["comparisons"], {k: {**v, "path": output_dir / v["path"] if v.get("path") else None}
                                                  for k, v in result["best"].items()},
                          result["timings"], output_dir / "figure.png")


def _baseline(model, chosen, fold_info, score_seeds, seeds, work: Path, s) -> list[dict]:
    from tecb_eval.models.encoders import get_encoder

    path = work / BASELINE / "scores.csv"
    if path.is_file():
        return _read_scores(path)
    encoder = get_encoder(str(model), batch_size=s.eval_batch_size)
    rows = []
    for fold, info in zip(chosen, fold_info):
        scored = score_splits(encoder, fold.scored, score_seeds)
        for seed in seeds:  # repeated per training seed: every trained row has a partner
            rows += _rows(scored, model=BASELINE, fold=info["id"], train_seed=seed)
    path.parent.mkdir(exist_ok=True)
    _write_scores(rows, path)
    return rows


def _unit(model, method, fold, info, s, seed, score_seeds, unit_dir: Path, *, device, progress, described) -> dict:
    """Train and score one unit, or read it back when an earlier (interrupted) run finished it."""
    from tecb_eval.models.encoders import get_encoder

    done = unit_dir / "unit.json"
    if done.is_file():
        return json.loads(done.read_text(encoding="utf-8"))
    if unit_dir.exists():
        import shutil

        shutil.rmtree(unit_dir)  # an unfinished unit starts again
    unit_dir.mkdir(parents=True)
    ms = for_method(s, method)
    st = load_sentence_model(model, device=device, max_length=ms.max_length)
    info_json = {"base_model": described, "method": method, "fold": info, "settings": as_dict(ms)}
    outcome = train_unit(st, method, fold, ms, seed, unit_dir, device=device, progress=progress, info=info_json)
    if outcome.best.get("path"):
        # Scored as the grid scores the folder: an ordinary model, reloaded from disk.
        del st
        encoder = get_encoder(str(unit_dir / outcome.best["path"]), batch_size=s.eval_batch_size)
    else:
        encoder = LiveSentenceTransformerEncoder(st, batch_size=s.eval_batch_size)
    rows = _rows(score_splits(encoder, fold.scored, score_seeds), model=method, fold=info["id"], train_seed=seed)
    _write_scores(rows, unit_dir / "scores.csv")
    record = {"method": method, "fold": info["id"], "seed": seed, "steps": outcome.steps,
              "epoch_seconds": outcome.epoch_seconds, "dropped_instances": outcome.dropped_instances,
              "best": {**outcome.best, "path": str((unit_dir / outcome.best["path"]).relative_to(unit_dir.parents[2]))
                       if outcome.best.get("path") else None}}
    _write_json(done, record)
    return record


def _run(model, methods, chosen, fold_info, s, seeds, score_seeds, work: Path, *, device, progress, described,
         protocol, resamples, resumed, key, demo: bool = False) -> dict:
    rows = _baseline(model, chosen, fold_info, score_seeds, seeds, work, s)
    best, timings, evaluations = {}, {}, []
    for method in methods:
        for fold, info in zip(chosen, fold_info):
            for seed in seeds:
                unit_dir = work / method / info["id"] / f"seed-{seed}"
                record = _unit(model, method, fold, info, s, seed, score_seeds, unit_dir, device=device,
                               progress=progress, described=described)
                rows += _read_scores(unit_dir / "scores.csv")
                evaluations.append(pd.read_csv(unit_dir / "evaluations.csv").map(csv_value))
                best[(method, info["id"], seed)] = record["best"]
                timings[(method, info["id"], seed)] = record["epoch_seconds"]
    scores = pd.DataFrame(rows, columns=list(SCORE_FIELDS))
    _write_scores(rows, work / "scores.csv")
    # compare pairs by (split, seed): a trained row's seed is its training seed and scoring seed together.
    frame = scores.assign(seed=scores.train_seed.astype(str) + "/" + scores.seed.astype(str))
    summary = report.summarize(frame, methods, resamples=resamples)
    compared = report.comparisons(frame, methods, resamples=resamples)
    write_rows_csv(summary, report.SUMMARY_FIELDS, work / "summary.csv")
    write_rows_csv(compared, report.COMPARISON_FIELDS, work / "comparisons.csv")
    from tecb_eval.models.encoders import display_name

    from tecb_eval.reports.tables import DEMO_NOTE, DEMO_TITLE

    shown = display_name(model)
    # A method whose every unit kept step 0 scored the untrained model: the summary says so.
    untrained = [m for m in methods if all(b.get("step") == 0 for (method, _, _), b in best.items() if method == m)]
    (work / "summary.md").write_text(report.markdown(summary, compared, model=shown, protocol=protocol,
                                                     folds=fold_info, settings=as_dict(s), seeds=seeds,
                                                     score_seeds=score_seeds, untrained=untrained,
                                                     demo_note=DEMO_NOTE if demo else None), encoding="utf-8")
    curves = pd.concat(evaluations, ignore_index=True)
    csv_safe(curves).to_csv(work / "evaluations.csv", index=False, lineterminator="\n")
    title = f"fine-tuning {shown} ({protocol}, {len(chosen)} fold(s))" + (f"\n{DEMO_TITLE}" if demo else "")
    report.plot(curves, title, work / "figure.png", kmeans_seed=s.kmeans_seed)
    _write_json(work / "run.json", {**key, "versions": library_versions(), "resumed": resumed,
                                    "units": {"/".join(map(str, k)): {"best": v, "epoch_seconds": timings[k]}
                                              for k, v in best.items()}})
    return {"scores": scores, "summary": summary, "comparisons": compared, "best": best, "timings": timings}
