"""The model x dataset x reduction x algorithm grid: plan, encode once, reduce once, cluster, store.

Per model: every text that any remaining cell needs and the embedding cache lacks is encoded in
one pass (chunks saved as they finish), in this process. The rest is split into units, one per
(dataset, split or sample set, reduction, seed): the reduction is computed once (or read from the
reduction cache) and every algorithm clusters it. Units run here (``jobs=1``), in local worker
processes (``jobs=N``) or on a Dask cluster (``scheduler=``), with the same scores bit for bit
(:mod:`tecb_eval.grid.work`). Only this process writes: every finished cell is one fsynced line in the
results store; a rerun skips the cells the store already holds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import unicodedata
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from tecb_data.demo import is_demo_manifest
from tecb_data.errors import UserError
from tecb_data.heartbeat import Heartbeat
from tecb_data.progress import Progress
from tecb_eval.clustering import algorithms as algo
from tecb_eval.grid import executors, protocols, scheduling, work as work_module
from tecb_eval.models import encoders
from tecb_eval.clustering.profiles import DEFAULT_PROFILE, get_profile
from tecb_eval.grid.seeds import DEFAULT_SEED, check_seed, check_seeds
from tecb_eval.benchmark import load_dataset
from tecb_eval.files import short_hash
from tecb_eval.grid.cache import EmbeddingStore, ReductionCache
from tecb_eval.grid.samples import SampleCache
from tecb_eval.grid.work import UnitResult, WorkUnit
from tecb_eval.grid import extra
from tecb_eval.grid.extra import EXTRA_FIELDS
from tecb_eval.grid.store import ResultsStore, cell_key, check_results, rows_frame, seed_set_name



@dataclass(frozen=True)
class ModelSpec:
    """One grid row: what to encode with, and under which name tables show it."""

    spec: object  # built-in name, folder, Hub id, or an encoder object
    name: str
    options: dict = field(default_factory=dict)  # layer, max_length, batch_size, device, ...


def model_spec(item) -> ModelSpec:
    """Accepts a spec, (name, spec), a dict {spec, name, layer, ...} or a ModelSpec; a name with a
    control character (a newline would split a table's row or a snippet's line) is refused."""
    spec = _named(item)
    if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in spec.name):
        raise UserError(f"model name {spec.name!r}: holds a control character (a newline, a tab); give the model "
                        "a plain name with ,name=NAME (a folder: rename it, or name it so)")
    return spec


def _named(item) -> ModelSpec:
    if isinstance(item, ModelSpec):
        return item
    if isinstance(item, tuple) and len(item) == 2:
        return ModelSpec(item[1], str(item[0]))
    if isinstance(item, dict):
        options = {k: v for k, v in item.items() if k not in ("spec", "name")}
        name = item.get("name") or encoders.display_name(item["spec"])
        if "layer" in options and "name" not in item:
            name = f"{name}-layer{options['layer']}"
        if "name" not in item:
            name += encoders.name_suffix(options)  # a prompt, backend or dtype: its own row in the tables
        return ModelSpec(item["spec"], name, options)
    return ModelSpec(item, encoders.display_name(item))


def encoder_for_dataset(encoder, bench, protocol: str = "legacy"):
    """The encoder itself, or for one fitted per dataset (tfidf-lsa), its fit on all the
    dataset's unique texts, or for one that encodes per MTEB task (prompts, MTEB models), the
    encoder bound to the dataset's task under ``protocol`` (legacy: ``BlurbsClusteringS2S``,
    fast: ``BlurbsClusteringS2S.v2``), whose prompt MTEB chooses as on its leaderboard."""
    if getattr(encoder, "per_task", False):
        from tecb_eval.mteb.tasks import mteb_language, task_class

        version = "v2" if protocol == "fast" else "legacy"
        return encoder.for_task(task_class(bench.mteb_name, version, mteb_language(bench)).metadata)
    if not getattr(encoder, "per_dataset", False):
        return encoder
    return encoder.fit_corpus(sorted({t for s in bench.splits for t in s.texts}))


clustering_metrics = work_module.clustering_metrics  # re-exported: tests and benches use it


@dataclass
class _ModelRun:
    """One model's encoders and embeddings (per-dataset encoders get one per dataset)."""

    spec: ModelSpec
    encoder: object
    dataset_encoders: dict = field(default_factory=dict)  # dataset fingerprint -> fitted encoder


@dataclass
class _Pending:
    """A model's pending cells on one dataset for one seed."""

    bench: object
    encoder: object
    seed: int
    cells: list  # (protocol unit, reduction, algorithm)


def _open_model(spec: ModelSpec, seed: int) -> _ModelRun:
    """``spec``'s encoder, seeded by ``seed`` (a grid's smallest seed) where it takes one."""
    return _ModelRun(spec, encoders.get_encoder(spec.spec, **{"seed": seed, **spec.options}))


class Grid:
    def __init__(self, datasets, models, *, configurations, protocol, seed: int | None = None,
                 seeds: Sequence[int] | None = None, cache_dir, store, limit_splits=None,
                 profile=DEFAULT_PROFILE, progress=True, log: Callable[[str], None] | None = None,
                 jobs: int = 1, scheduler: str | None = None, memory_limit: int | None = None,
                 scheduler_timeout: float = scheduling.DASK_CONNECT_TIMEOUT, metrics: Sequence[str] = (),
                 samples: SampleCache | None = None, opened: _ModelRun | None = None):
        """``samples``: a sample cache that may be drawing ahead (else one of ``cache_dir`` is made);
        ``opened``: a model already opened (run_grid's first, loaded while MTEB drew)."""
        self.log = log or (lambda message: print(message, file=sys.stderr))
        self.benchmarks = []
        for bench in map(load_dataset, datasets):
            # The same build given twice (a path and its copy, or twice in the list) is one dataset:
            # twice its rows would count it double in every table.
            twin = next((b for b in self.benchmarks if b.fingerprint == bench.fingerprint), None)
            if twin is not None:
                self.log(f"note: {bench.location} is the same dataset build as {twin.location}; evaluated once")
                continue
            self.benchmarks.append(bench)
        self.models = [model_spec(m) for m in models]
        self.configurations = configurations
        self.protocol = protocol
        # Several seeds: every reduction, clustering and fast-protocol sample varies with the seed;
        # encoding happens once, seeded (for encoders that take a seed) by the smallest. A seed set is
        # a set: sorted here, so the order it was asked in changes no row, identity or cache key.
        self.seeds = tuple(sorted(int(s) for s in seeds)) if seeds else (DEFAULT_SEED if seed is None else int(seed),)
        self.seed = self.seeds[0]
        self.seed_set = seed_set_name(self.seeds)
        self.profile = get_profile(profile)
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self.store = store
        self.metrics = extra.check_metrics(metrics)
        self.progress = progress
        self.executor_options = dict(jobs=jobs, scheduler=scheduler, memory_limit=memory_limit,
                                     timeout=scheduler_timeout)
        # The fast protocol's samples: drawn by MTEB once per dataset, seed and MTEB version, then read
        # from the cache folder (tecb_eval.grid.samples).
        self.samples = samples if samples is not None else SampleCache(self.cache_dir)
        self._opened = opened
        self.units = {
            (b.fingerprint, s): protocols.units_for(b, protocol, s, limit_splits=limit_splits, samples=self.samples)
            for b in self.benchmarks for s in self.seeds
        }
        self.reductions = ReductionCache(self.cache_dir)
        self.encode_seconds: dict[str, float] = {}
        self.encoded_texts: dict[str, int] = {}
        self.rows: list[dict] = []
        self.new_rows: list[dict] = []  # the cells this run computed (the rest came from the store)
        self.wall_seconds: dict[str, float] = {}  # phase -> wall-clock seconds of this run
        self.worker_rss: dict[int, int] = {}  # worker pid -> its peak RSS in bytes
        self.worker_cpu: dict[int, float] = {}  # worker pid -> CPU seconds its units took
        # Per dataset, what this run spent and what it found done (the summary lines say both).
        self.spent: dict[str, dict] = {}

    # -- planning ---------------------------------------------------------------------------
    def _key(self, name: str, identity: str, bench, unit, reduction: str, algorithm: str, seed: int) -> tuple:
        return cell_key({
            "protocol": self.protocol, "profile": self.profile.name, "seeds": self.seed_set, "seed": seed,
            "model": name, "model_identity": identity, "dataset_fingerprint": bench.fingerprint,
            "reduction": reduction, "algorithm": algorithm, "split": unit.name,
        })

    def total_cells(self) -> int:
        return len(self.models) * sum(len(u) for u in self.units.values()) * len(self.configurations)

    def units_side_by_side(self) -> int:
        """The most units one model's pass hands the executor at once: one per dataset, seed, base
        set (a split, or the fast protocol's pooled sample) and reduction."""
        return max(1, sum(len(_by_base((u, r, a) for u in units for a, r in self.configurations))
                          for units in self.units.values()))

    def estimated_work(self, dim: int = 384) -> float:
        """Rough seconds of reduction and clustering the grid hands its executor over every model
        (:func:`work.estimate_cost`, ``dim``-d embeddings, every cell counted as pending): what
        decides whether worker processes pay for their start."""
        per_model = 0.0
        for (_, seed), units in self.units.items():
            cells = [(u, r, a) for u in units for a, r in self.configurations]
            for (base_name, reduction), grouped in _by_base(cells).items():
                per_model += WorkUnit(key=base_name, label=base_name, dataset="", reduction=reduction, seed=seed,
                                      protocol=self.protocol, profile=self.profile.name, n=len(grouped[0][0].base_texts),
                                      dim=dim, cells=_work_cells(grouped)).cost
        return per_model * len(self.models)

    # -- encoding ---------------------------------------------------------------------------
    def _open_model(self, spec: ModelSpec) -> _ModelRun:
        opened, self._opened = self._opened, None
        if opened is not None and opened.spec == spec:
            return opened
        return _open_model(spec, self.seed)

    def _encoder_for(self, run: _ModelRun, bench):
        if bench.fingerprint not in run.dataset_encoders:
            run.dataset_encoders[bench.fingerprint] = encoder_for_dataset(run.encoder, bench, self.protocol)
        return run.dataset_encoders[bench.fingerprint]

    def _embedding_store(self, encoder) -> EmbeddingStore:
        persistent = getattr(encoder, "persistent", True)
        return EmbeddingStore(self.cache_dir if persistent else None, encoder.identity)

    def _encode(self, run: _ModelRun, encoder, texts: list[str], store: EmbeddingStore) -> None:
        todo = store.missing(texts)
        if not todo:
            return
        started = time.perf_counter()
        counted = getattr(encoder, "truncated", None)
        before = dict(counted) if isinstance(counted, dict) else None
        with Progress(total=len(todo), desc=f"encoding with {run.spec.name}", unit="texts",
                      enabled=self.progress) as bar:
            store.encode_missing(todo, encoder.encode, progress=bar.update)
        if before is not None and counted["texts"] > before["texts"]:
            # Text past the model's max_length is not encoded: said, never silent.
            prompt = " with its prompt" if getattr(encoder, "prompt", None) else ""
            self.log(f"note: {run.spec.name}: {counted['texts'] - before['texts']:,} of {len(todo):,} texts were "
                     f"longer{prompt} than the model's max_length and were cut ({counted['tokens'] - before['tokens']:,} "
                     "tokens not encoded)")
        seconds = time.perf_counter() - started
        self.encode_seconds[run.spec.name] = self.encode_seconds.get(run.spec.name, 0.0) + seconds
        self.encoded_texts[run.spec.name] = self.encoded_texts.get(run.spec.name, 0) + len(todo)

    # -- running ----------------------------------------------------------------------------
    def run(self, executor=None) -> pd.DataFrame:
        """Run every pending cell; ``executor``: one already open (see :func:`executors.open_executor`)."""
        with contextlib.ExitStack() as stack:
            interrupt = stack.enter_context(_Interruptible())
            if executor is None:
                executor = stack.enter_context(executors.open_executor(log=self.log, **self.executor_options))
            bar = stack.enter_context(Progress(total=self.total_cells(), desc="grid cells", unit="cells",
                                               enabled=self.progress))
            # Loading (an ONNX export), one long encoding batch, one long unit: a line every 30 s still.
            stack.enter_context(Heartbeat(bar))
            for spec in self.models:
                self._run_model(spec, executor, bar, interrupt)
        return rows_frame(self.rows)

    def _run_model(self, spec: ModelSpec, executor, bar, interrupt) -> None:
        bar.status(f"loading {spec.name}", working=False)
        run = self._open_model(spec)
        work: list[_Pending] = []
        for bench in self.benchmarks:
            encoder = self._encoder_for(run, bench)
            for seed in self.seeds:
                pending = []
                for unit in self.units[(bench.fingerprint, seed)]:
                    for algorithm, reduction in self.configurations:
                        row = self.store.get(self._key(spec.name, encoder.identity, bench, unit, reduction, algorithm, seed))
                        # --metrics: a stored row without a score it asks for is run again (no
                        # assignments are stored), from the caches; its new row replaces the old.
                        if row is None or (self.metrics and extra.missing(row, unit, algorithm, self.metrics)):
                            pending.append((unit, reduction, algorithm))
                        else:
                            self._spent(bench.name)["stored"] += 1
                            self.rows.append(row)
                            bar.update(1, timed=False)  # from the store: no time spent, no ETA from it
                if pending:
                    work.append(_Pending(bench, encoder, seed, pending))
        if not work:
            return
        # One encoding pass per encoder over every text a pending cell needs, across datasets and seeds.
        stores: dict[str, EmbeddingStore] = {}
        needed: dict[str, list[str]] = {}
        for item in work:
            if item.encoder.identity not in stores:
                stores[item.encoder.identity] = self._embedding_store(item.encoder)
            needed.setdefault(item.encoder.identity, []).extend(t for unit, _, _ in item.cells for t in unit.base_texts)
        # Which of each dataset's texts this run encodes and which the cache holds (the summary says both).
        missing_before: dict[str, set] = {}
        wanted: dict[str, set] = {}
        for item in work:
            texts = {t for unit, _, _ in item.cells for t in unit.base_texts}
            wanted.setdefault(item.bench.name, set()).update(texts)
            missing_before.setdefault(item.bench.name, set()).update(stores[item.encoder.identity].missing(texts))
        for name, texts in wanted.items():
            self._spent(name)["texts"] += len(texts)  # this model's; each model encodes its own
        started = time.perf_counter()
        # Encoding feeds the cells but finishes none: the bar says so, and keeps it out of its ETA.
        bar.status(f"encoding with {spec.name}", working=False)
        for item in work:
            if item.encoder.identity in needed:
                self._encode(run, item.encoder, needed.pop(item.encoder.identity), stores[item.encoder.identity])
        self._add_wall("encode", time.perf_counter() - started)
        for name, todo in missing_before.items():
            self._spent(name)["encoded"] += len(todo)
        bar.status(f"reducing and clustering ({spec.name})")
        embeddings = {identity: store.embeddings() for identity, store in stores.items()}
        tasks, inputs, context = self._tasks(run, work, embeddings)

        def finished(unit: WorkUnit, result: UnitResult) -> None:
            self._finish(context[unit.key], unit, result, bar)
            interrupt.check()

        started = time.perf_counter()
        executor.run(tasks, lambda key: inputs[key](), finished)
        self._add_wall("reduce+cluster", time.perf_counter() - started)

    def _spent(self, dataset: str) -> dict:
        return self.spent.setdefault(dataset, {"stored": 0, "texts": 0, "encoded": 0,
                                               "reduced": 0, "reduce_cached": 0})

    def _add_wall(self, phase: str, seconds: float) -> None:
        self.wall_seconds[phase] = self.wall_seconds.get(phase, 0.0) + seconds

    def _tasks(self, run: _ModelRun, work: list[_Pending], embeddings: dict) -> tuple[list, dict, dict]:
        """One task per (dataset, base set, reduction, seed). Its input is the base set's
        embeddings, or the cached reduction where there is one."""
        seconds_per_text = (
            self.encode_seconds.get(run.spec.name, 0.0) / self.encoded_texts[run.spec.name]
            if self.encoded_texts.get(run.spec.name) else 0.0
        )
        tasks, inputs, context = [], {}, {}
        for item in work:
            vectors = embeddings[item.encoder.identity]
            for (base_name, reduction), cells in _by_base(item.cells).items():
                base_texts = cells[0][0].base_texts
                fingerprint = vectors.fingerprint(base_texts)
                reduced = None if not algo.reduction_entry(reduction).reduces else self.reductions.lookup(fingerprint, reduction, item.seed)
                key = short_hash(run.spec.name, item.encoder.identity, item.bench.fingerprint, base_name, reduction,
                                 str(item.seed))
                if reduced is not None:
                    input_key = "reduced-" + key
                    inputs[input_key] = lambda value=reduced: value
                else:
                    # Shared by the base set's reductions: on a cluster it travels once.
                    input_key = "base-" + fingerprint
                    inputs[input_key] = lambda texts=base_texts, v=vectors: v.rows(texts)
                unit = WorkUnit(
                    key=key, label=f"{run.spec.name} / {item.bench.name} / {base_name} / {reduction} / seed {item.seed}",
                    dataset=item.bench.name, reduction=reduction, seed=item.seed, protocol=self.protocol,
                    profile=self.profile.name, n=len(base_texts), dim=int(vectors.matrix.shape[1]),
                    cells=_work_cells(cells),
                )
                tasks.append(scheduling.Task(unit, input_key, reduced is not None))
                context[key] = dict(run=run, bench=item.bench, fingerprint=fingerprint, cached=reduced is not None,
                                    encoding=encoders.encoding_fields(item.encoder),
                                    identity=vectors.identity, encode_s=seconds_per_text * len(set(base_texts)))
        return tasks, inputs, context

    def _finish(self, ctx: dict, unit: WorkUnit, result: UnitResult, bar) -> None:
        """Store a finished unit's rows; only this process writes the store and the caches."""
        if result.reduced is not None:
            self.reductions.put(ctx["fingerprint"], unit.reduction, unit.seed, result.reduced)
        self.worker_rss[result.pid] = max(self.worker_rss.get(result.pid, 0), result.max_rss)
        self.worker_cpu[result.pid] = self.worker_cpu.get(result.pid, 0.0) + result.cpu_s
        bench = ctx["bench"]
        reduction_params = algo.params_json(algo.make_reduction(unit.reduction, unit.seed))
        reduce_cached = ctx["cached"]
        if algo.reduction_entry(unit.reduction).reduces:
            self._spent(bench.name)["reduce_cached" if reduce_cached else "reduced"] += 1
        # How many splits (legacy) or bootstrap draws (fast) the dataset has, whatever this run limited
        # itself to: what a table needs to tell a complete result from a partial one.
        dataset_splits = len(bench.splits) if self.protocol == "legacy" else len(self.units[(bench.fingerprint, unit.seed)])
        for cell, scores in zip(unit.cells, result.metrics):
            row = {
                "model": ctx["run"].spec.name,
                "model_identity": ctx["identity"],
                **ctx["encoding"],  # the prompt, backend and dtype it was encoded with
                "dataset": bench.name,
                "mteb_name": bench.mteb_name,
                "language": bench.manifest.get("language", "de"),
                "dataset_fingerprint": bench.fingerprint,
                "dataset_location": bench.location,
                # Built from the embedded demo sample: every table of these rows says it is synthetic.
                "synthetic": is_demo_manifest(bench.manifest),
                "protocol": self.protocol,
                "profile": self.profile.name,
                "seeds": self.seed_set,
                "seed": unit.seed,
                "split": cell.split,
                "dataset_splits": dataset_splits,
                "n_samples": scores["n_samples"],
                "n_labels": int(cell.k),
                "reduction": unit.reduction,
                "algorithm": cell.algorithm,
                **{k: scores[k] for k in work_module.METRIC_FIELDS},
                "algorithm_params": scores["algorithm_params"],
                "reduction_params": reduction_params,
                # Encoding is shared by every cell of a text; each cell carries its split's share.
                "encode_s": ctx["encode_s"],
                # The reduction's time is counted once, with the first algorithm that used it.
                "reduce_s": 0.0 if reduce_cached else result.reduce_s,
                "reduce_cached": bool(reduce_cached),
                "cluster_s": scores["cluster_s"],
                # Per-level scores (label hierarchies) and DBCV (density clusterings), where they apply:
                # a row without them, or written before them, reads as "not measured" (tecb_eval.grid.extra).
                **{k: scores[k] for k in EXTRA_FIELDS if k in scores},
            }
            reduce_cached = True
            self.store.append(row)
            self.rows.append(row)
            self.new_rows.append(row)
            bar.update(1)

    def time_summary(self) -> list[str]:
        """Where this run's time went, per dataset (encoding, reductions, clustering), and its wall clock."""
        if not self.spent:
            return []
        frame = pd.DataFrame(self.new_rows, columns=["dataset", "reduce_s", "cluster_s", "levels_s", "dbcv_s"])
        lines = []
        # Each figure is what this run spent; what it found done (results store, caches) is counted
        # beside it, so a resumed or cached run does not look slow or free.
        for dataset, spent in sorted(self.spent.items()):
            part = frame[frame.dataset == dataset]
            if part.empty:
                lines.append(f"{dataset}: all {spent['stored']:,} cells from the results store; nothing computed")
                continue
            # The encoding time is the model's pass over every dataset's texts together (the line
            # per model above); split by dataset it would be a guess, so the count stands here.
            cached = spent["texts"] - spent["encoded"]
            encode = (f"encoded {spent['encoded']:,} texts" + (f" ({cached:,} from the embedding cache)" if cached else "")
                      if spent["encoded"] else f"all {spent['texts']:,} texts from the embedding cache")
            reductions = spent["reduced"] + spent["reduce_cached"]
            reduce = (f"{spent['reduced']:,} of {reductions:,} reductions computed in {part.reduce_s.sum():.1f} s"
                      + (f" ({spent['reduce_cached']:,} from the cache)" if spent["reduce_cached"] else "")
                      if reductions else "no reductions")
            # Whether the clause is said follows from what was computed, never from how long it took.
            scored = part.levels_s.notna().any() or part.dbcv_s.notna().any()
            scoring = float(part.levels_s.fillna(0).sum() + part.dbcv_s.fillna(0).sum())
            lines.append(f"{dataset}: {len(part):,} cell{'s' if len(part) != 1 else ''} computed" +
                         (f", {spent['stored']:,} from the results store" if spent["stored"] else "") +
                         f"; {encode}; {reduce}; clustering {part.cluster_s.sum():.1f} s" +
                         # Per-level scores cluster again per level (as MTEB does); DBCV takes distances.
                         (f", per-level scores and DBCV {scoring:.1f} s" if scored else "") +
                         " (summed over workers)")
        if self.wall_seconds:
            lines.append("wall clock of this run: " + ", ".join(f"{phase} {s:.1f} s"
                                                                for phase, s in self.wall_seconds.items()))
        if self.worker_rss:
            peaks = ", ".join(f"{rss / 2**20:,.0f}" for _, rss in sorted(self.worker_rss.items()))
            lines.append(f"peak RSS per worker process (MiB): {peaks}")
            # Summed over workers and set beside the wall clock: work a worker redid (numba code that
            # cannot be cached compiles again in each process) shows here, not in the scores.
            cpu = ", ".join(f"{s:,.1f}" for _, s in sorted(self.worker_cpu.items()))
            lines.append(f"CPU seconds in units per worker process: {cpu}")
        return lines


def _by_base(cells) -> dict[tuple, list]:
    """(protocol unit, reduction, algorithm) cells grouped by what one work unit reduces once:
    (base set name, reduction) -> [(protocol unit, algorithm)]."""
    grouped: dict[tuple, list] = {}
    for unit, reduction, algorithm in cells:
        grouped.setdefault((unit.base_name, reduction), []).append((unit, algorithm))
    return grouped


def _work_cells(grouped) -> tuple:
    return tuple(work_module.Cell(u.name, u.rows, u.labels, u.k, a, u.levels) for u, a in grouped)


def _find_model(spec) -> None:
    """Make sure a model named by text is there to load: the built-in one's package, or the Hub
    model in huggingface_hub's cache (downloaded now if the Hub can be reached). Loading the
    weights waits for the model's turn; this only finds them."""
    if not isinstance(spec, (str, Path)):
        return
    text = str(spec)
    if text == "minilm-l6":
        encoders.minilm_folder()
    elif text in encoders.BUILTIN_NAMES or Path(text).expanduser().is_dir() or ":" in text.partition("@")[0]:
        return  # built in, a folder (checked above), or another backend's prefix (``mteb:NAME``), found when opened
    else:
        encoders.resolve_model(text)


class _Interruptible:
    """Ctrl-C stops the grid after the unit at hand even where a library swallows the
    KeyboardInterrupt (numba did, inside UMAP): the signal is remembered and checked after every
    unit, as well as raised."""

    def __init__(self):
        self.seen = False
        self._previous = None

    def _handler(self, signum, frame):
        self.seen = True
        raise KeyboardInterrupt

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def check(self) -> None:
        if self.seen:
            raise KeyboardInterrupt

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        return False


def run_grid(
    datasets,
    models,
    algorithms: Sequence[str] | None = None,
    reductions: Sequence[str] = algo.REDUCTIONS,
    *,
    configurations: Sequence | None = None,
    protocol: str = "legacy",
    seed: int | None = None,
    seeds: Sequence[int] | None = None,
    cache_dir: str | Path | None = None,
    results: str | Path | None = None,
    limit_splits: int | None = None,
    profile: str = DEFAULT_PROFILE,
    jobs: int | None = None,
    scheduler: str | None = None,
    memory_limit: int | str | None = None,
    scheduler_timeout: float = scheduling.DASK_CONNECT_TIMEOUT,
    progress: bool = True,
    metrics: Sequence[str] = (),
    log: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """Run (or resume) the grid and return one row per (model, dataset, reduction, algorithm, split, seed).

    ``datasets``: folders, ``repo_id@revision`` strings or loaded benchmarks. ``models``: built-in
    names, model folders, Hub ids, encoder objects, ``(name, spec)`` pairs or dicts
    ``{"spec": ..., "name": ..., "layer": k, "max_length": n}``. ``configurations`` (pairs or
    ``"algorithm:reduction"`` strings) overrides the algorithms x reductions product, which skips
    HDBSCAN and DBSTREAM on unreduced embeddings as the paper did. The legacy protocol runs all
    four algorithms by default, the fast one (MTEB v2's bootstrapped k-means) only k-means.
    ``cache_dir`` keeps embeddings and reductions across runs; ``results`` is the JSONL store that
    makes the run resumable. ``profile`` is ``"current"`` (today's libraries) or ``"paper"`` (what
    the authors ran, e.g. river 0.14's DBSTREAM; see :mod:`tecb_eval.clustering.profiles`); every
    row names it.

    ``seed`` (default 42) seeds every reduction and clustering; ``seeds`` (instead of ``seed``, not
    beside it) runs them once per seed, encoding once; the rows name their seed and the run's seed
    set, which is one version of the results. The order of ``seeds`` changes nothing.

    ``jobs``: local worker processes (``None``: ``$TECB_JOBS``, else every core, or this process for a grid
    too small to pay for starting workers; 1: in this process). ``scheduler``: the
    address of a Dask distributed scheduler (``tcp://host:8786``) to run the units on instead.
    ``memory_limit`` (bytes, ``"8GB"`` or a share of RAM like ``0.5``): the budget for units
    running side by side; on a cluster, per worker. Default: 70 % of RAM (of each worker's limit
    on a cluster). Scores are the same bit for bit whatever ``jobs`` or ``scheduler``.

    ``metrics`` (``("level", "dbcv")``, ``--metrics``): cells whose stored row lacks per-level scores
    or DBCV that the cell has today (a row written before them) are run again from the caches and
    their rows replaced; without it such rows are kept as they are ("not measured").
    """
    say = log or (lambda message: print(message, file=sys.stderr))
    if protocol not in protocols.PROTOCOLS:
        raise UserError(f"unknown protocol {protocol!r}; choose from {', '.join(protocols.PROTOCOLS)}")
    if seeds is not None and seed is not None:
        raise UserError(f"seed={seed!r} and seeds={seeds!r} given together (--seed and --seeds): seeds replaces "
                        "seed, so give one of them")
    seeds = check_seeds(seeds) if seeds is not None else (check_seed(DEFAULT_SEED if seed is None else seed),)
    jobs_chosen = jobs is not None or bool(os.environ.get("TECB_JOBS", "").strip())
    jobs = scheduling.check_jobs(jobs, scheduler)
    metrics = extra.check_metrics(metrics)
    memory = scheduling.parse_memory(memory_limit)
    if limit_splits is not None and (isinstance(limit_splits, bool) or not isinstance(limit_splits, (int, np.integer))
                                     or limit_splits < 0):
        raise UserError(f"limit_splits (--limit-splits) must be a number of splits, or 0 for all of them; "
                        f"got {limit_splits!r}")
    limit_splits = int(limit_splits) if limit_splits else None  # 0: all splits, as `demo` documents
    if protocol == "fast" and limit_splits:
        raise UserError(f"limit_splits={limit_splits} (--limit-splits) applies to the legacy protocol's splits; the "
                        "fast protocol samples from all of them at once (MTEB v2): leave it out")
    if not datasets:
        raise UserError("no datasets given")
    if not models:
        raise UserError("no models given")
    # Every dataset is loaded and every model found before the first text is encoded: a typo in
    # the last --data or a model missing from the offline cache ends the run before any work.
    sources = list(datasets)
    datasets = [load_dataset(item) for item in sources]
    with contextlib.ExitStack() as stack:
        samples = stack.enter_context(SampleCache(cache_dir))
        # MTEB's draws that are not stored start now in a child process (tecb_eval.grid.samples),
        # while this process checks the options and models (the child writes nothing) ...
        drawing = protocol == "fast" and samples.draw_ahead(datasets, seeds) > 0
        for item in models:  # a bad option fails now, not after the models before it have run
            spec = model_spec(item)
            # Options, model folders, mteb: names, backends, prompt names: one line each, before any encoding.
            encoders.preflight(spec.spec, **spec.options)
        if results is not None:
            # Before any work: a store that cannot be kept there is found now, not after the encoding.
            check_results(results, inputs=[d for d in sources if isinstance(d, (str, Path)) and Path(d).exists()])
        if cache_dir is not None:
            from tecb_data.outputs import writable_folder

            writable_folder(cache_dir, option="cache folder")
        if algorithms is None:
            algorithms = algo.ALGORITHMS if protocol == "legacy" else ("minibatch_kmeans",)
        pairs, skipped = algo.configurations(algorithms, reductions, configurations)
        if not pairs:
            raise UserError("no configuration left to run; name at least one algorithm and reduction")
        for item in models:
            _find_model(model_spec(item).spec)
        if skipped:
            say("skipping " + ", ".join(f"{a} on {r}" for a, r in skipped)
                + " (unreduced embeddings, as in the paper); ask for them explicitly with "
                + "configurations=[...] / --config ALGORITHM:none")
        # ... while this process loads the first model, which it would load after the draws.
        opened = _open_model(model_spec(models[0]), min(seeds)) if drawing else None
        if scheduler is not None:
            # The cluster is reached (and its workers checked) before the store is opened: a
            # scheduler that cannot be used leaves no trace.
            executor = stack.enter_context(executors.open_executor(
                jobs=jobs, scheduler=scheduler, memory_limit=memory, timeout=scheduler_timeout, log=say))
        store = stack.enter_context(ResultsStore(results, lock=True))  # another run on this store waits for the lock
        grid = Grid(datasets, models, configurations=pairs, protocol=protocol, seeds=seeds,
                    cache_dir=cache_dir, store=store, limit_splits=limit_splits,
                    profile=profile, progress=progress, log=say, metrics=metrics, samples=samples, opened=opened)
        if scheduler is None:
            # The cores a grid run in this process leaves idle run a unit's cells side by side.
            cores = jobs
            jobs = scheduling.local_jobs(jobs, chosen=jobs_chosen, side_by_side=grid.units_side_by_side(),
                                         work_seconds=grid.estimated_work())
            executor = stack.enter_context(executors.open_executor(
                jobs=jobs, scheduler=None, memory_limit=memory, timeout=scheduler_timeout, log=say,
                threads=cores if jobs == 1 else 1))
        frame = grid.run(executor)
    for name, seconds in grid.encode_seconds.items():
        say(f"{name}: encoded {grid.encoded_texts[name]:,} new unique texts in {seconds:.1f} s")
    for line in grid.time_summary():
        say(line)
    return frame
