"""``pretrain``: continued pre-training of a transformers checkpoint on the benchmark's own texts
(the transductive setting), with V-measure tracked during training."""

from __future__ import annotations

import gc
import json
import shutil
from dataclasses import dataclass, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Iterable

from tecb_data.errors import UserError
from tecb_eval.evaluation import unique_texts
from tecb_eval.pretraining.loop import Schedule, autocast_factory, deterministic, resolve_device, train_seed
from tecb_eval.pretraining.report import plot_curves, summarize, summary_markdown, write_summary_csv
from tecb_eval.pretraining.settings import PretrainSettings, as_dict, settings_for
from tecb_eval.pretraining.tracking import EVALUATIONS_CSV, LiveMeanPoolingEncoder, Tracker, read_csv, replace_folder

DEFAULT_SEEDS = (42, 1, 2)
FIGURE = "figure.png"
SUMMARY_CSV = "summary.csv"
SUMMARY_MD = "summary.md"
RUN_JSON = "run.json"
TIMINGS_JSON = "timings.json"


@dataclass(frozen=True)
class PretrainResult:
    output_dir: Path
    method: str
    settings: PretrainSettings
    n_texts: int
    baseline: dict  # dataset -> V-measure of the model without pre-training
    evaluations: list  # the rows of evaluations.csv
    best: dict  # seed -> {"step", "epoch", "v_measure", "datasets", "path"}
    summary: list  # the rows of summary.csv
    figure: Path
    timings: dict


def _objective(method: str):
    if method == "wwm":
        from tecb_eval.pretraining.wwm import WholeWordMasking

        return WholeWordMasking
    from tecb_eval.pretraining.tsdae import Tsdae

    return Tsdae


def load_benchmarks(datasets) -> list:
    """Benchmarks from folders / repo ids (anything ``tecb_data.load`` takes) or loaded benchmarks."""
    import tecb_data

    if isinstance(datasets, (str, Path)) or hasattr(datasets, "splits"):
        datasets = [datasets]
    benchmarks = [d if hasattr(d, "splits") else tecb_data.load(d) for d in datasets]
    if not benchmarks:
        raise UserError("no datasets given: pass at least one dataset folder")
    names = [b.name for b in benchmarks]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise UserError(f"dataset {duplicated[0]} is given twice; pass each dataset once")
    # By name: the outputs do not depend on the order the datasets were given in.
    return sorted(benchmarks, key=lambda b: b.name)


def model_folder(model) -> tuple[Path, str]:
    """The folder of the transformers checkpoint to train, and a name for it."""
    from tecb_eval.encoders import minilm_folder, resolve_model

    if str(model) == "minilm-l6":
        folder, model_id = minilm_folder(), "minilm-l6"
    else:
        folder, model_id = resolve_model(str(model))
    if not (folder / "config.json").is_file():
        modules = folder / "modules.json"
        if modules.is_file():
            # A sentence-transformers folder keeps its transformer in the first module's folder.
            first = json.loads(modules.read_text(encoding="utf-8"))[0].get("path", "")
            if (folder / first / "config.json").is_file():
                return folder / first, model_id
        raise UserError(f"{folder}: no config.json; pass the folder of a transformers checkpoint")
    return folder, model_id


def _seeds(seeds: Iterable[int]) -> tuple[int, ...]:
    seeds = tuple(int(s) for s in seeds)
    if not seeds or any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise UserError(f"seeds must be distinct non-negative integers, got {', '.join(map(str, seeds)) or 'none'}")
    return seeds


def _prepare_output(output_dir: Path, overwrite: bool) -> Path:
    if output_dir.exists() and (not output_dir.is_dir() or any(output_dir.iterdir())) and not overwrite:
        raise UserError(f"{output_dir}: already exists and is not empty; choose another output folder or pass --overwrite")
    work = output_dir.with_name(output_dir.name + ".partial")
    if work.exists():  # left by an interrupted run
        shutil.rmtree(work)
    work.mkdir(parents=True)
    return work


def _versions() -> dict:
    found = {}
    for dist in ("torch", "transformers", "sentence-transformers", "scikit-learn", "tecb"):
        try:
            found[dist] = version(dist)
        except PackageNotFoundError:
            found[dist] = "unknown"
    return found


def _clip_max_length(settings: PretrainSettings, folder: Path) -> PretrainSettings:
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(folder))
    limit = getattr(config, "max_position_embeddings", None)
    if limit and getattr(config, "model_type", "") in ("roberta", "xlm-roberta", "camembert"):
        limit -= 2  # these count two position slots for padding
    return replace(settings, max_length=min(settings.max_length, limit)) if limit else settings


def pretrain(model, datasets, method: str = "wwm", *, epochs: int | None = None, seeds: Iterable[int] = DEFAULT_SEEDS,
             eval_every: int | None = None, output_dir, overwrite: bool = False, progress: bool = True,
             **settings) -> PretrainResult:
    """Continue pre-training ``model`` on the unique texts of ``datasets`` with ``method`` ("wwm" or
    "tsdae"), once per seed, evaluating V-measure (Minibatch k-Means, every split) every
    ``eval_every`` optimizer steps; keeps each seed's best checkpoint.

    ``model``: a transformers checkpoint folder, a Hub repo id, or ``minilm-l6``. Any field of
    :class:`PretrainSettings` can be given by name (``learning_rate=...``, ``batch_size=...``,
    ``precision="bf16"``, ``max_steps=...``); the others keep the paper's defaults for ``method``.

    Writes to ``output_dir``: evaluations.csv (method, seed, epoch, step, dataset, v_measure; a
    dataset's score is the mean over its splits), evaluations_splits.csv, losses.csv,
    seed-<seed>/best/ (checkpoint), figure.png, summary.csv, summary.md, run.json, timings.json.
    The run is written to ``<output_dir>.partial`` and renamed when complete.
    """
    s = settings_for(method, epochs=epochs, eval_every=eval_every, **settings)
    seeds = _seeds(seeds)
    benchmarks = load_benchmarks(datasets)
    texts = unique_texts(benchmarks)
    if not texts:
        raise UserError("the datasets hold no texts to train on")
    folder, model_id = model_folder(model)
    device = resolve_device(s.device)
    autocast = autocast_factory(s.precision, device)
    s = replace(_clip_max_length(s, folder), device=device)
    schedule = Schedule.of(len(texts), s)
    output_dir = Path(output_dir)
    work = _prepare_output(output_dir, overwrite)
    tracker = Tracker(work, benchmarks, method, s.kmeans_seed, s.save_best)
    try:
        outcomes = _train_seeds(folder, s, seeds, texts, schedule, tracker, device=device, autocast=autocast,
                                progress=progress)
    except KeyboardInterrupt:
        raise  # the partial folder stays for inspection; a rerun removes it
    except Exception:
        tracker.close()
        shutil.rmtree(work, ignore_errors=True)
        raise
    finally:
        tracker.close()

    name = Path(str(model)).name if Path(str(model)).is_dir() else str(model)
    rows, summary = _write_reports(work, tracker, name, epochs_done=outcomes[0].steps / schedule.steps_per_epoch)
    run = {
        "model": str(model), "model_id": model_id, "method": method, "seeds": list(seeds),
        "settings": as_dict(s), "texts": len(texts),
        "datasets": [{"name": b.name, "fingerprint": b.fingerprint} for b in benchmarks],
        "schedule": {"steps_per_epoch": schedule.steps_per_epoch, "total_steps": schedule.total_steps,
                     "warmup_steps": schedule.warmup_steps},
        "best": {str(seed): info for seed, info in tracker.best.items()},
        "versions": _versions(),
    }
    (work / RUN_JSON).write_text(json.dumps(run, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    # Wall-clock times differ from run to run, so they live apart from the reproducible outputs.
    timings = {
        "train_seconds_per_epoch": {str(o.seed): o.epoch_seconds for o in outcomes},
        "evaluations": tracker.eval_timings,
    }
    (work / TIMINGS_JSON).write_text(json.dumps(timings, indent=2) + "\n", encoding="utf-8")
    replace_folder(work, output_dir)

    best = {seed: {**info, "path": output_dir / info["path"] if info["path"] else None}
            for seed, info in tracker.best.items()}
    baseline = {r["dataset"]: r["v_measure"] for r in rows if r["step"] == 0 and r["seed"] == seeds[0]}
    return PretrainResult(output_dir, method, s, len(texts), baseline, rows, best, summary,
                          output_dir / FIGURE, timings)


def _train_seeds(folder: Path, s: PretrainSettings, seeds: tuple[int, ...], texts: list[str], schedule: Schedule,
                 tracker: Tracker, *, device: str, autocast, progress: bool) -> list:
    """One training run per seed, each from the original checkpoint."""
    import torch

    objective_class = _objective(s.method)
    baseline_rows = None
    outcomes = []
    for seed in seeds:
        with deterministic(seed, device):
            objective = objective_class(folder, s, seed, device)
            encoder = LiveMeanPoolingEncoder(objective.encoder, objective.tokenizer, max_length=s.max_length,
                                             batch_size=s.eval_batch_size, device=device, autocast=autocast)
            if baseline_rows is None:
                baseline_rows = tracker.baseline(encoder)
            tracker.record(seed, 0, 0.0, baseline_rows, objective)

            def evaluate(step: int, epoch: float, seed=seed, encoder=encoder, objective=objective) -> float:
                return tracker.evaluate(seed, step, epoch, encoder, objective)

            outcomes.append(train_seed(objective, texts, s, seed, schedule, evaluate, tracker,
                                       device=device, autocast=autocast, progress=progress))
        # Free this seed's model (and optimizer state) before the next one is loaded.
        del objective, encoder, evaluate
        gc.collect()
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    return outcomes


def _write_reports(work: Path, tracker: Tracker, name: str, *, epochs_done: float) -> tuple[list, list]:
    """summary.csv, summary.md and figure.png from the evaluations just logged."""
    rows = read_csv(work / EVALUATIONS_CSV)
    summary = summarize(rows, {seed: info["step"] for seed, info in tracker.best.items()})
    write_summary_csv(summary, work / SUMMARY_CSV)
    markdown = summary_markdown(summary, model=name, epochs_done=round(epochs_done, 2))
    (work / SUMMARY_MD).write_text(markdown, encoding="utf-8")
    plot_curves(rows, work / FIGURE, title=f"{tracker.method.upper()} pre-training of {name}")
    return rows, summary
