"""The model x dataset x reduction x algorithm grid: plan, encode once, reduce once, cluster, store.

Three rooms, one run: the plan (:mod:`tecb_eval.grid.plan`: what is to be computed, the options
checked once), the encoding (:mod:`tecb_eval.grid.encoding`: per model, every text a remaining cell
needs and the embedding cache lacks, in one pass) and the execution (:mod:`tecb_eval.grid.execution`:
units, one per (dataset, split or sample set, reduction, seed), on an executor; each reduction
computed once or read from the reduction cache, and every algorithm clusters it). Units run here
(``jobs=1``), in local worker processes (``jobs=N``) or on a Dask cluster (``scheduler=``), with
the same scores bit for bit (:mod:`tecb_eval.grid.work`). Only this process writes: each finished
cell is one fsynced line in the results store; a rerun skips the cells it holds.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd

from tecb_data.errors import UserError
from tecb_data.heartbeat import Heartbeat
from tecb_data.outputs import removed_if_unused
from tecb_data.progress import Progress
from tecb_eval.benchmark import load_dataset
from tecb_eval.clustering import algorithms as algo
from tecb_eval.clustering.profiles import DEFAULT_PROFILE
from tecb_eval.clustering.stability import DEFAULT_FRACTION
from tecb_eval.grid import executors, scheduling
from tecb_eval.grid.cache import ReductionCache, check_cache_folder
from tecb_eval.grid.cluster_encode import ClusterEncoder, on_cluster, opens_on_a_worker
from tecb_eval.grid.encoding import Encoding
from tecb_eval.grid.execution import Execution, Interruptible
from tecb_eval.grid.ledger import Ledger
from tecb_eval.clustering.settings import DEFAULT_TIME_LIMIT
from tecb_eval.grid.plan import (GridConfig, Plan, check_backfill, check_time, preflight, skipped_note,
                                 stored_cells)
from tecb_eval.grid.samples import SampleCache
from tecb_eval.grid.stability_pass import stability_pass
from tecb_eval.grid.store import ResultsStore, check_results, rows_frame
from tecb_eval.models.spec import ModelRun, ModelSpec, find_model, open_model


class Grid:
    """One run of the grid over an open results store: its plan, its encoding and its execution,
    as ``config`` (:class:`~tecb_eval.grid.plan.GridConfig`, checked where it was made) asks.

    ``samples``: a sample cache that may be drawing ahead (else one of the cache folder is made);
    ``opened``: a model already opened (run_grid's first, loaded while MTEB drew)."""

    def __init__(self, datasets, config: GridConfig, *, store, log: Callable[[str], None] | None = None,
                 samples: SampleCache | None = None, opened: ModelRun | None = None):
        self.config = config
        self.log = log or (lambda message: print(message, file=sys.stderr))
        self.cache_dir = config.cache_dir
        # The fast protocol's samples: MTEB's draws, cached per dataset, seed and MTEB version.
        self.samples = samples if samples is not None else SampleCache(self.cache_dir)
        self.plan = Plan(datasets, config, samples=self.samples, log=self.log)
        # Cells past the time limit: one line, before any work.
        check_time(self.plan, config.time_limit, config.memory_limit)
        self.store = store
        self.metrics = config.metrics
        check_backfill(self.plan, store, self.metrics)
        self.progress = config.progress
        self.ledger = Ledger({bench.name: bench.mteb_name for bench in self.plan.benchmarks})
        # On a Dask cluster the encode tasks go there too; "gpu": only to workers with Dask's GPU resource.
        self.encode_resources = {"GPU": 1} if config.encode_on == "gpu" else None
        self.rows: list[dict] = []
        self.reductions = ReductionCache(self.cache_dir)
        self.encoding = Encoding(cache_dir=self.cache_dir, protocol=config.protocol, seed=self.plan.seed,
                                 ledger=self.ledger, progress=self.progress, log=self.log, opened=opened)
        self.execution = Execution(self.plan, store=store, reductions=self.reductions, ledger=self.ledger,
                                   rows=self.rows)

    # What benches and tests read of a run.
    units_side_by_side = property(lambda self: self.plan.units_side_by_side)
    estimated_work = property(lambda self: self.plan.estimated_work)
    total_cells = property(lambda self: self.plan.total_cells)
    encode_seconds = property(lambda self: self.ledger.encode_seconds)
    encoded_texts = property(lambda self: self.ledger.encoded_texts)
    wall_seconds = property(lambda self: self.ledger.wall_seconds)
    worker_rss = property(lambda self: self.ledger.worker_rss)

    def time_summary(self) -> list[str]:
        """What each model encoded, where this run's time went per dataset, and its wall clock."""
        return self.ledger.summary()

    def _open_model(self, spec: ModelSpec) -> ModelRun:
        return self.encoding.open(spec)

    def run(self, executor=None) -> pd.DataFrame:
        """Run every pending cell; ``executor``: one already open (see :func:`executors.open_executor`)."""
        with contextlib.ExitStack() as stack:
            interrupt = stack.enter_context(Interruptible())
            if executor is None:
                config = self.config
                executor = stack.enter_context(executors.open_executor(
                    jobs=config.jobs or 1, scheduler=config.scheduler, memory_limit=config.memory_limit,
                    timeout=config.scheduler_timeout, log=self.log))
            if getattr(executor, "client", None) is not None:
                self.encoding.cluster = ClusterEncoder(executor.client, self.log, self.encode_resources)
                # The summary says where each model encoded and where the units ran.
                self.ledger.scheduler, self.ledger.shards_on = self.encoding.cluster.address, self.encoding.cluster.shards
                on_workers = [spec for spec in self.plan.models if opens_on_a_worker(spec)]
                if on_workers:
                    self.encoding.cluster.wait_for_resources(executor.timeout, executor.address)
                self.encoding.cluster.preflight(on_workers)
                stack.callback(self.encoding.cancel_started)  # shards started ahead of an interrupted run
            bar = stack.enter_context(Progress(total=self.plan.total_cells(), desc="grid cells", unit="cells",
                                               enabled=self.progress))
            # Loading (an ONNX export), one long encoding batch, one long unit: a line every 30 s still.
            stack.enter_context(Heartbeat(bar))
            models = list(self.plan.models)
            ahead = None  # on a cluster: the next model, described and its shards started
            for index, spec in enumerate(models):
                following = models[index + 1] if index + 1 < len(models) else None
                ahead = self._run_model(ahead or self._prepare(spec, bar), following, executor, bar, interrupt)
        return rows_frame(self.rows)

    def _run_model(self, prepared, following: ModelSpec | None, executor, bar, interrupt):
        """Encode and cluster one prepared model. On a cluster, ``following`` (the next model) is
        prepared and its shards started before this model's units run; returned for its turn.
        (A method of its own: the model opened here is freed before the next one is opened.)"""
        run, work = prepared
        ahead = None
        if work:
            # Encoding feeds the cells but finishes none: the bar says so, and keeps it out of its ETA.
            bar.status(f"encoding with {run.spec.name}{on_cluster(run.encoder)}", working=False)
            embeddings = self.encoding.encode_pending(run, work)
        if self.encoding.cluster is not None and following is not None:
            # The next model's shards run on the workers this model's units leave free.
            ahead = self._prepare(following, bar)
            self.encoding.prefetch(*ahead)
        if work:
            bar.status(f"reducing and clustering ({run.spec.name})")
            started = time.perf_counter()
            self.execution.run(executor, run, work, embeddings, bar, interrupt)
            self.ledger.add_wall("reduce+cluster", time.perf_counter() - started)
        return ahead

    def _prepare(self, spec: ModelSpec, bar) -> tuple[ModelRun, list]:
        """``spec`` opened (on a cluster: described by a worker) and its pending cells; stored ones kept."""
        def found(bench, row) -> None:
            self.ledger.of(bench.name)["stored"] += 1
            self.rows.append(row)
            bar.update(1, timed=False)  # from the store: no time spent, no ETA from it

        if stored_cells(self.plan, spec, self.store, self.metrics, found):  # nothing to encode: nothing to load
            return ModelRun(spec, None), []
        worker = self.encoding.cluster is not None and opens_on_a_worker(spec)
        bar.status(f"loading {spec.name}" + (" on a Dask worker" if worker else ""), working=False)
        run = self._open_model(spec)
        work = self.plan.pending(spec, lambda bench: self.encoding.encoder_for(run, bench), self.store,
                                 self.metrics, found)
        return run, work


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
    encode_on: str | None = None,
    k=None, min_cluster_size=None,
    stability: int | None = None,
    stability_fraction: float = DEFAULT_FRACTION, topics: bool | None = None, label_free: bool | None = None,
    stability_ranking: Callable[[pd.DataFrame], set | None] | None = None, time_limit: float | None = DEFAULT_TIME_LIMIT,
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

    With ``scheduler``, a sentence-transformers model named by text is encoded on the cluster too,
    in shards of its missing texts (:mod:`tecb_eval.grid.cluster_encode`); ``encode_on="gpu"``
    (``--encode-on gpu``) sends those shards only to workers started with ``--resources GPU=1``.

    Args:
        datasets (Sequence[str | Path | Benchmark]): Folders, ``repo_id@revision`` strings, benchmarks.
        models (Sequence): Built-in names, model folders, Hub ids, encoder objects, ``(name, spec)``
            pairs or dicts ``{"spec": ..., "name": ..., "layer": k, "max_length": n}``.
        algorithms (Sequence[str] | None): Names of the clustering registry; None: all four under
            the legacy protocol, k-means under the fast one.
        reductions (Sequence[str]): Names of the reduction registry; default all four.
        configurations (Sequence | None): ``(algorithm, reduction)`` pairs or ``"algorithm:reduction"``
            strings run instead of the algorithms x reductions product.
        protocol (str): ``"legacy"`` (per split, MTEB v1) or ``"fast"`` (MTEB v2's bootstrapped k-means).
        seed (int | None): Seed of every reduction and clustering; None: 42.
        seeds (Sequence[int] | None): Run every cell once per seed (instead of ``seed``), encoding once.
        cache_dir (str | Path | None): Keeps embeddings and reductions across runs; None: no cache.
        results (str | Path | None): The JSONL results store that makes the run resumable; None:
            rows are only returned.
        limit_splits (int | None): Only the first N splits of each dataset (legacy protocol; 0 or
            None: all).
        profile (str): ``"current"`` (today's libraries) or ``"paper"`` (what the authors ran).
        jobs (int | None): Local worker processes; None: ``$TECB_JOBS``, else every core (or this
            process for a tiny grid); 1: this process.
        scheduler (str | None): Address of a Dask distributed scheduler (``tcp://host:8786``) to run
            the units on instead.
        memory_limit (int | str | None): Budget for units side by side, in bytes, ``"8GB"`` or a share
            of RAM like ``0.5``; None: 70 % of RAM (of each worker's limit on a cluster).
        scheduler_timeout (float): Seconds to wait for the Dask scheduler to answer.
        progress (bool): Show progress bars on a terminal.
        metrics (Sequence[str]): ``"level"`` and/or ``"dbcv"``: fill these scores in on rows of
            ``results`` written before them (new rows always get them).
        log (Callable[[str], None] | None): Receives each line the run says; None: standard error.
        encode_on (str | None): With ``scheduler``: ``"gpu"`` encodes only on workers started with
            ``--resources GPU=1``; None or ``"any"``: any worker.
        k (str | Sequence[int] | None): Cluster counts (``--k``: ``"5:60"``, ``"5,10,20"`` or ints), a row
            per point on the same embeddings and reductions; None: the number of labels.
        min_cluster_size (str | Sequence[int] | None): HDBSCAN's, as ``k``; None: the registry's default.
        stability (int | None): Reruns of every cell (``--stability N``); 0: none. None: none on
            labelled data, on a corpus without labels 5 of the pipelines ``stability_ranking`` picks.
        stability_fraction (float): The share of the texts each rerun clusters (above 0, at most 1).
        topics (bool | None): Topic words, NPMI and diversity (``--topics``); None: as ``label_free``.
        label_free (bool | None): Every label-free criterion of the registry (``--label-free``): the
            scores on the vectors, DBCV, the spectrum's k, the kept assignment and, unless ``topics``
            says otherwise, the topic words. None: on a corpus without labels, off on labelled data.
        stability_ranking (Callable | None): The grid's rows -> the pipelines to rerun (see
            :func:`tecb_eval.reports.unlabelled.stability_pipelines`, which ``tecb-eval run`` gives).
        time_limit (float | None): Seconds one configuration's cells on one split may be estimated
            to take on one core, else refused before any work (``--time-limit``); None: no limit.

    Returns:
        pandas.DataFrame: One row per cell, the fields of the results-store row below.

    Raises:
        UserError: An unknown model, algorithm, reduction, protocol or profile, ``seed`` beside
            ``seeds``, a dataset that fails verification, a results store of another grid, or a
            scheduler that does not answer within ``scheduler_timeout``; checked before any work.
    """
    config = GridConfig(
        models=models, algorithms=algorithms, reductions=reductions, configurations=configurations, protocol=protocol,
        seed=seed, seeds=seeds, limit_splits=limit_splits, profile=profile, metrics=metrics, k=k,
        min_cluster_size=min_cluster_size, stability=stability, stability_fraction=stability_fraction, topics=topics,
        label_free=label_free, time_limit=time_limit, cache_dir=cache_dir, jobs=jobs, scheduler=scheduler,
        memory_limit=memory_limit, scheduler_timeout=scheduler_timeout, encode_on=encode_on, progress=progress)
    return run_config(datasets, config, results=results, log=log, stability_ranking=stability_ranking)


def run_config(datasets, config: GridConfig, *, results: str | Path | None = None,
               log: Callable[[str], None] | None = None,
               stability_ranking: Callable[[pd.DataFrame], set | None] | None = None) -> pd.DataFrame:
    """:func:`run_grid` with its options checked once into ``config`` (as ``tecb-eval run`` makes it).

    Args:
        datasets (Sequence[str | Path | Benchmark]): Folders, ``repo_id@revision`` strings, benchmarks.
        config (GridConfig): Every other option of :func:`run_grid`, checked when it was made.
        results (str | Path | None): The JSONL results store; None: rows are only returned.
        log (Callable[[str], None] | None): Receives each line the run says; None: standard error.
        stability_ranking (Callable | None): The grid's rows -> the pipelines to rerun.

    Returns:
        pandas.DataFrame: One row per cell, as :func:`run_grid` returns them.

    Raises:
        UserError: As :func:`run_grid`: a dataset or model that cannot be used, before any work.
    """
    say = log or (lambda message: print(message, file=sys.stderr))
    jobs_chosen = config.jobs is not None or bool(os.environ.get("TECB_JOBS", "").strip())
    jobs = scheduling.check_jobs(config.jobs, config.scheduler)
    scheduler, cache_dir = config.scheduler, config.cache_dir
    if not datasets:
        raise UserError("no datasets given")
    # Every dataset loaded and every model found before the first text is encoded: a typo in the
    # last --data or a model missing offline ends the run before any work.
    sources = list(datasets)
    datasets = [load_dataset(item) for item in sources]
    with contextlib.ExitStack() as stack:
        if cache_dir is not None:
            stack.enter_context(removed_if_unused(cache_dir))  # exits last: after the caches have closed
        samples = stack.enter_context(SampleCache(cache_dir))
        # MTEB's draws that are not stored start now in a child process (tecb_eval.grid.samples),
        # while this process checks the models (the child writes nothing) ...
        drawing = config.protocol == "fast" and samples.draw_ahead(datasets, config.seeds) > 0
        # A bad option fails now, not after the models before it have run. On a cluster the workers
        # open the sentence-transformers models and check their device and files (Grid.run): this
        # process, which only plans and writes, never imports torch for them.
        preflight(config.models, here=scheduler is None)
        if results is not None:
            # Before any work: a store that cannot be kept there is found now, not after the encoding.
            check_results(results, inputs=[d for d in sources if isinstance(d, (str, Path)) and Path(d).exists()])
        if cache_dir is not None:
            check_cache_folder(cache_dir, [*(d for d in sources if isinstance(d, (str, Path)) and Path(d).exists()),
                                           *(s.spec for s in config.models if isinstance(s.spec, (str, Path))
                                             and Path(s.spec).is_dir())])
        for spec in config.models:
            find_model(spec.spec)
        if scheduler is not None:
            preflight([spec for spec in config.models if not opens_on_a_worker(spec)])  # the rest open here
        if config.skipped:
            say(skipped_note(config.skipped))
        # ... while this process loads the first model (on a cluster, the workers load it).
        opened = open_model(config.models[0], min(config.seeds)) if drawing and scheduler is None else None
        open_here = dict(memory_limit=config.memory_limit, timeout=config.scheduler_timeout, log=say)
        if scheduler is not None:
            # The cluster reached and its workers checked before the store opens: no trace if unusable.
            executor = stack.enter_context(executors.open_executor(jobs=jobs, scheduler=scheduler, **open_here))
        store = stack.enter_context(ResultsStore(results, lock=True))  # another run on this store waits for the lock
        grid = Grid(datasets, config, store=store, log=say, samples=samples, opened=opened)
        if scheduler is None:
            # The cores a grid run in this process leaves idle run a unit's cells side by side.
            cores = jobs
            jobs = scheduling.local_jobs(jobs, chosen=jobs_chosen, side_by_side=grid.units_side_by_side(),
                                         work_seconds=grid.estimated_work())
            executor = stack.enter_context(executors.open_executor(
                jobs=jobs, scheduler=None, threads=cores if jobs == 1 else 1, **open_here))
        frame = grid.run(executor)
        frame = stability_pass(grid, executor, frame, stability_ranking, say)
    for line in grid.time_summary():
        say(line)
    return frame
