"""The grid's plan: what is to be computed, checked once.

:class:`GridConfig` is every option of a run, checked once before any work (protocol, seeds,
splits, metrics, models, configurations, ranges, jobs, memory, time limit); :class:`Plan` holds what
it names: the datasets (a build given twice counted once), the models, the configurations, the
seeds and each dataset's units, and says which cells a model still lacks in the results store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from tecb_data.errors import UserError
from tecb_data.seeding import DEFAULT_SEED
from tecb_eval.benchmark import load_dataset
from tecb_eval.clustering import algorithms as algo
from tecb_eval.clustering.cluster_counts import Setting, parse_range, setting_name
from tecb_eval.clustering.criteria import needing
from tecb_eval.clustering.profiles import DEFAULT_PROFILE, get_profile
from tecb_eval.clustering.registry import ALGORITHMS_REGISTRY
from tecb_eval.clustering.settings import DEFAULT_TIME_LIMIT
from tecb_eval.clustering.stability import (DEFAULT_FRACTION, UNLABELLED_RUNS, check_fraction, check_runs,
                                            subsample_size)
from tecb_eval.grid import extra, protocols, scheduling
from tecb_eval.grid.cluster_encode import ENCODE_ON
from tecb_eval.grid.scheduling import DASK_CONNECT_TIMEOUT
from tecb_eval.grid.seeds import check_seed, check_seeds
from tecb_eval.grid.store import cell_key, seed_set_name
from tecb_eval.grid.work import Cell, WorkUnit
from tecb_eval.models import encoders
from tecb_eval.models.spec import ModelSpec, known_identity, model_spec


@dataclass(frozen=True)
class GridConfig:
    """Every option of a grid run, checked once where it is made: by ``tecb-eval run`` from its
    arguments, or by :func:`~tecb_eval.grid.run.run_grid` from its keywords (which document each
    option). One line for the first option that is wrong, before any dataset is read or any work.
    :class:`Plan`, :class:`~tecb_eval.grid.run.Grid` and the work units read it.

    Once made it holds the options checked: ``models`` as :class:`ModelSpec`, ``seeds`` the run's
    seeds (``seed`` folded into them, then None), ``configurations`` the (algorithm, reduction)
    pairs to run and ``skipped`` the pairs the paper left out, ``k`` and ``min_cluster_size`` the
    points of their ranges (``()``: none), ``memory_limit`` in bytes, ``limit_splits`` None for all."""

    models: tuple = ()
    algorithms: Sequence[str] | None = None
    reductions: Sequence[str] = algo.REDUCTIONS
    configurations: Sequence | None = None
    protocol: str = "legacy"
    seed: int | None = None
    seeds: Sequence[int] | None = None
    limit_splits: int | None = None
    profile: str = DEFAULT_PROFILE
    metrics: Sequence[str] = ()
    k: object = None
    min_cluster_size: object = None
    stability: int | None = None
    stability_fraction: float = DEFAULT_FRACTION
    topics: bool | None = None
    label_free: bool | None = None
    time_limit: float | None = DEFAULT_TIME_LIMIT
    cache_dir: str | Path | None = None
    jobs: int | None = None
    scheduler: str | None = None
    memory_limit: int | str | float | None = None
    scheduler_timeout: float = DASK_CONNECT_TIMEOUT
    encode_on: str | None = None
    progress: bool = True
    skipped: tuple = field(default=(), init=False)

    def __post_init__(self):
        for name, value in _checked(self).items():
            object.__setattr__(self, name, value)


def _unset(value) -> bool:
    return value is None or (isinstance(value, tuple) and not value)


def _checked(given: GridConfig) -> dict:
    """The options of ``given`` checked, in the order a user would fix them: one line for the first
    that is wrong."""
    ranges = {"k": "--k", "min_cluster_size": "--min-cluster-size"}
    out = {name: () if _unset(getattr(given, name)) else parse_range(getattr(given, name), option)
           for name, option in ranges.items()}
    protocol, seed, seeds, limit_splits = given.protocol, given.seed, given.seeds, given.limit_splits
    if protocol not in protocols.PROTOCOLS:
        raise UserError(f"unknown protocol {protocol!r}; choose from {', '.join(protocols.PROTOCOLS)}")
    if seeds is not None and seed is not None:
        raise UserError(f"seed={seed!r} and seeds={seeds!r} given together (--seed and --seeds): seeds replaces "
                        "seed, so give one of them")
    out["seeds"] = check_seeds(seeds) if seeds is not None else (check_seed(DEFAULT_SEED if seed is None else seed),)
    out["seed"] = None
    if limit_splits is not None and (isinstance(limit_splits, bool) or not isinstance(limit_splits, (int, np.integer))
                                     or limit_splits < 0):
        raise UserError(f"limit_splits (--limit-splits) must be a number of splits, or 0 for all of them; "
                        f"got {limit_splits!r}")
    out["limit_splits"] = int(limit_splits) if limit_splits else None  # 0: all splits, as `demo` documents
    if protocol == "fast" and out["limit_splits"]:
        raise UserError(f"limit_splits={limit_splits} (--limit-splits) applies to the legacy protocol's splits; the "
                        "fast protocol samples from all of them at once (MTEB v2): leave it out")
    if not given.models:
        raise UserError("no models given")
    out["models"] = tuple(m if isinstance(m, ModelSpec) else model_spec(m) for m in given.models)
    _check_names(out["models"])
    algorithms = given.algorithms
    if algorithms is None:
        algorithms = algo.DEFAULT_ALGORITHMS if protocol == "legacy" else (algo.TABLE2_CONFIGURATION[0],)
    pairs, skipped = algo.configurations(algorithms, given.reductions or algo.REDUCTIONS, given.configurations)
    if not pairs:
        raise UserError("no configuration left to run; name at least one algorithm and reduction")
    out.update(configurations=tuple(pairs), skipped=tuple(skipped), metrics=extra.check_metrics(given.metrics))
    scheduling.check_jobs(given.jobs, given.scheduler)
    if given.encode_on not in ENCODE_ON:
        raise UserError(f"encode_on={given.encode_on!r} (--encode-on): choose from "
                        f"{', '.join(e for e in ENCODE_ON if e)}")
    if given.encode_on == "gpu" and given.scheduler is None:
        raise UserError("--encode-on gpu sends encode tasks to Dask workers with a GPU resource: give --scheduler "
                        "ADDRESS too, or leave it out to encode here")
    out["memory_limit"] = scheduling.parse_memory(given.memory_limit)
    get_profile(given.profile)
    out["stability"] = None if given.stability is None else check_runs(given.stability)
    out["stability_fraction"] = check_fraction(given.stability_fraction)
    if given.time_limit is not None:
        out["time_limit"] = scheduling.check_timeout(given.time_limit, "--time-limit")
    out["cache_dir"] = None if given.cache_dir is None else Path(given.cache_dir)
    return out


def _check_names(specs: Sequence[ModelSpec]) -> None:
    """Within a run a name is one model: two rows of one name would be averaged into one line of
    every table."""
    seen: dict[str, ModelSpec] = {}
    for spec in specs:
        other = seen.setdefault(spec.name, spec)
        if other is not spec and other != spec:
            raise UserError(f"model name {spec.name!r} is given to two different models ({other.spec!r} and "
                            f"{spec.spec!r}); give each its own ,name=NAME")


@dataclass
class Pending:
    """A model's pending cells on one dataset for one seed."""

    bench: object
    encoder: object
    seed: int
    cells: list  # (protocol unit, reduction, algorithm)


class Plan:
    """What a run computes: datasets x models x configurations x seeds, by units of the protocol."""

    def __init__(self, datasets, config: GridConfig, *, samples=None, log: Callable[[str], None] = print):
        self.config = config
        self.benchmarks = []
        for bench in map(load_dataset, datasets):
            # The same build given twice (a path and its copy, or twice in the list) is one dataset:
            # twice its rows would count it double in every table.
            twin = next((b for b in self.benchmarks if b.fingerprint == bench.fingerprint), None)
            if twin is not None:
                log(f"note: {bench.location} is the same dataset build as {twin.location}; evaluated once")
                continue
            self.benchmarks.append(bench)
        self.models = list(config.models)
        self.configurations = config.configurations
        self.protocol = config.protocol
        # Several seeds: every reduction, clustering and fast-protocol sample varies with the seed;
        # encoding happens once, seeded (for encoders that take a seed) by the smallest. A seed set is
        # a set: sorted here, so the order it was asked in changes no row, identity or cache key.
        self.seeds = tuple(sorted(config.seeds))
        self.seed = self.seeds[0]
        self.seed_set = seed_set_name(self.seeds)
        self.profile = get_profile(config.profile)
        # Ranges of cluster counts (tecb_eval.clustering.cluster_counts): every point is a cell of its own.
        self.ranges = {"k": config.k, "min_cluster_size": config.min_cluster_size}
        self.units = {
            (b.fingerprint, s): protocols.units_for(b, self.protocol, s, limit_splits=config.limit_splits,
                                                    samples=samples)
            for b in self.benchmarks for s in self.seeds
        }
        # Reruns per cell for its stability (tecb_eval.clustering.stability): None is the default,
        # on a corpus without labels for the pipelines ``stability_on`` names once the grid has
        # ranked them (run_grid's second pass), off for labelled data.
        self.stability = config.stability
        # (dataset fingerprint, model, reduction, algorithm, setting) of the pipelines whose cells
        # the default reruns; None: the first pass, which reruns none.
        self.stability_on: frozenset | None = None
        self.stability_fraction = config.stability_fraction
        # The criteria that need the texts (tecb_eval.clustering.topics): None is the default, on for
        # a corpus without labels (what recommend ranks by), off for labelled data (a labelled run
        # ranks by V-measure; calibration asks for them with --topics).
        self.topics = config.topics
        # Every label-free criterion of the registry that a run computes (the vectors', the topic
        # words', the kept assignment for consensus): None is the default, on for a corpus without
        # labels, off on labelled data, where they cost more than the clustering and a labelled run
        # ranks by V-measure (``tecb-eval calibrate`` asks for them with --label-free).
        self.label_free = config.label_free
        # --metrics: DBCV asked for by name is computed whatever --label-free says.
        self.metrics = config.metrics
        check_ranges(self)
        check_stability(self)

    def stability_runs(self, bench) -> int:
        """How many times each cell of ``bench`` handed to the executor reruns its clustering for
        its stability: ``--stability N``, else on a corpus without labels the default's reruns in
        the pass over the chosen pipelines (whose cells are the only ones pending then)."""
        if self.stability is not None:
            return self.stability
        return UNLABELLED_RUNS if self.stability_on is not None and not getattr(bench, "labelled", True) else 0

    def label_free_for(self, bench) -> bool:
        """Whether the cells of ``bench`` get the label-free criteria on the vectors (and DBCV) and
        keep their assignment: as ``--label-free`` asks, else without labels, or where the registry
        says a labelled run needs them."""
        if self.label_free is not None:
            return self.label_free
        return not getattr(bench, "labelled", True) or any(c.labelled_default for c in needing("vectors"))

    def dbcv_for(self, bench) -> bool:
        return self.label_free_for(bench) or "dbcv" in self.metrics

    def topics_for(self, bench) -> bool:
        """Whether the cells of ``bench`` get topic words, their coherence and diversity: as
        ``--topics`` asks, else as ``--label-free`` asks, else without labels, or where the registry
        says a labelled run needs them."""
        if self.topics is not None:
            return self.topics
        if self.label_free is not None:
            return self.label_free
        return not getattr(bench, "labelled", True) or any(c.labelled_default for c in needing("texts"))

    def unit_options(self, bench) -> dict:
        """What every work unit on ``bench`` is told of the run's options (the fields of
        :class:`~tecb_eval.grid.work.WorkUnit` beside its cells): read from the config here, once."""
        return dict(protocol=self.protocol, profile=self.profile.name, stability=self.stability_runs(bench),
                    stability_fraction=self.stability_fraction, label_free=self.label_free_for(bench),
                    dbcv=self.dbcv_for(bench), assignment=self.label_free_for(bench) or self.topics_for(bench))

    def label_free_missing(self, row: dict, bench, algorithm: str) -> bool:
        """Whether a stored row lacks label-free scores this run asks for by name (``--label-free``,
        ``--topics``): its cell is run again from the caches. The defaults never rerun a stored row,
        as neither the option nor its default is part of a cell's key."""
        if self.label_free and ("silhouette" not in row
                                or extra.missing(row, None, algorithm, ("dbcv",))):
            return True
        return bool(self.topics or (self.topics is None and self.label_free)) and "npmi" not in row

    def stability_missing(self, row: dict, bench) -> bool:
        """Whether a stored row lacks the stability this run asks for: ``--stability N`` on every
        cell (another N or share, or none), or the default's on a chosen pipeline (none measured).
        Its cell is run again from the caches; every other stored row is kept as it is."""
        if self.stability is None:
            if self.stability_on is None or getattr(bench, "labelled", True) or row.get("stability_runs"):
                return False
            return (bench.fingerprint, row.get("model"), row.get("reduction"), row.get("algorithm"),
                    row.get("setting") or "") in self.stability_on
        if not self.stability:
            return False
        return row.get("stability_runs") != self.stability or row.get("stability_fraction") != self.stability_fraction

    def settings(self, algorithm: str) -> tuple[Setting | None, ...]:
        """The cluster settings ``algorithm`` runs at: each point of its range, or None, its own."""
        parameter = algo.algorithm_entry(algorithm).ranged
        values = self.ranges.get(parameter, ()) if parameter else ()
        return tuple(Setting(parameter, int(v)) for v in values) or (None,)

    def key(self, name: str, identity: str, bench, unit, reduction: str, algorithm: str, seed: int,
            setting: Setting | None = None) -> tuple:
        return cell_key({
            "protocol": self.protocol, "profile": self.profile.name, "seeds": self.seed_set, "seed": seed,
            "model": name, "model_identity": identity, "dataset_fingerprint": bench.fingerprint,
            "reduction": reduction, "algorithm": algorithm, "split": unit.name, "setting": setting_name(setting),
        })

    def total_cells(self) -> int:
        return len(self.models) * sum(len(u) for u in self.units.values()) * sum(
            len(self.settings(a)) for a, _ in self.configurations)

    def dataset_splits(self, bench, seed: int) -> int:
        """How many splits (legacy) or bootstrap draws (fast) the dataset has, whatever this run
        limited itself to: what a table needs to tell a complete result from a partial one."""
        return len(bench.splits) if self.protocol == "legacy" else len(self.units[(bench.fingerprint, seed)])

    def units_side_by_side(self) -> int:
        """The most units one model's pass hands the executor at once: one per dataset, seed, base
        set (a split, or the fast protocol's pooled sample) and reduction."""
        return max(1, sum(len(by_base((u, r, a) for u in units for a, r in self.configurations))
                          for units in self.units.values()))

    def estimated_work(self, dim: int = 384) -> float:
        """Rough seconds of reduction and clustering the grid hands its executor over every model
        (:func:`work.estimate_cost`, ``dim``-d embeddings, every cell counted as pending): what
        decides whether worker processes pay for their start."""
        per_model = 0.0
        for (_, seed), units in self.units.items():
            cells = [(u, r, a, st) for u in units for a, r in self.configurations for st in self.settings(a)]
            for (base_name, reduction), grouped in by_base(cells).items():
                per_model += WorkUnit(key=base_name, label=base_name, dataset="", reduction=reduction, seed=seed,
                                      protocol=self.protocol, profile=self.profile.name, n=len(grouped[0][0].base_texts),
                                      dim=dim, cells=work_cells(grouped)).cost
        return per_model * len(self.models)

    def pending(self, spec: ModelSpec, encoder_for, store, metrics, found) -> list[Pending]:
        """The cells ``spec`` still lacks, per dataset and seed; ``found(bench, row)`` takes each
        cell the store holds. ``--metrics``: a stored row without a score it asks for is run again
        (no assignments are stored), from the caches; its new row replaces the old."""
        work: list[Pending] = []
        for bench in self.benchmarks:
            encoder = encoder_for(bench)
            for seed in self.seeds:
                cells = []
                for unit in self.units[(bench.fingerprint, seed)]:
                    for algorithm, reduction in self.configurations:
                        for setting in self.settings(algorithm):
                            row = store.get(self.key(spec.name, encoder.identity, bench, unit, reduction, algorithm,
                                                     seed, setting))
                            if (row is None or (metrics and extra.missing(row, unit, algorithm, metrics))
                                    or self.stability_missing(row, bench)
                                    or self.label_free_missing(row, bench, algorithm)):
                                cells.append((unit, reduction, algorithm, setting))
                            else:
                                found(bench, row)
                if cells:
                    work.append(Pending(bench, encoder, seed, cells))
        return work


# The dimensions a cell on unreduced embeddings is estimated with before any model is opened: the
# fewest of the built-in models (tfidf-lsa's 256), so that a refusal never rests on a guess too high.
ESTIMATE_DIM = 256


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def skipped_note(skipped) -> str:
    """The line naming the configurations the paper left out and a grid skips unless named."""
    return ("skipping " + ", ".join(f"{a} on {r}" for a, r in skipped) + " (unreduced embeddings, as in the "
            "paper); ask for them explicitly with configurations=[...] / --config ALGORITHM:none")


def check_time(plan: Plan, limit: float | None, memory_budget: int | None) -> None:
    """Before any work: a configuration whose cells on one split (every point of its range) are
    estimated to take longer than ``limit`` seconds on one core (the registry's ``cost``, fitted to
    the benches' measurements) is one line with its estimate, as a unit that cannot fit the memory
    budget is; None: no limit. Ward's path is the one the memory planner would take
    (``memory_budget``: bytes for a unit; None: the default share of this machine's memory)."""
    from tecb_eval.grid.scheduling import DEFAULT_MEMORY_SHARE, check_timeout, machine_memory
    from tecb_eval.grid.work import WORKER_BASELINE_BYTES, ward_path

    if limit is None:
        return
    limit = check_timeout(limit, "--time-limit")
    memory_budget = memory_budget or int(DEFAULT_MEMORY_SHARE * machine_memory())
    for bench in plan.benchmarks:
        for unit in plan.units[(bench.fingerprint, plan.seed)]:
            n = len(unit.texts)
            for algorithm, reduction in plan.configurations:
                entry = algo.algorithm_entry(algorithm)
                dim = algo.reduction_entry(reduction).reduced_dim(ESTIMATE_DIM)
                ks = [p.value if p and p.parameter == "k" else (unit.k or 2) for p in plan.settings(algorithm)]
                path = ward_path(n, dim, plan.profile, max(0, memory_budget - WORKER_BASELINE_BYTES),
                                 len(unit.base_texts) * dim)

                def seconds(candidate) -> float:
                    return sum(candidate.cost(n, dim, k, path) for k in ks)

                if seconds(entry) > limit:
                    faster = [a.name for a in ALGORITHMS_REGISTRY.values()
                              if a.ranged == entry.ranged and a.name != algorithm and seconds(a) <= limit]
                    cells = f"its {len(ks)} cells" if len(ks) > 1 else "its cell"
                    raise UserError(
                        f"{algorithm}:{reduction} on the {n:,} texts of split {unit.name!r} of {bench.name}: about "
                        f"{_duration(seconds(entry))} on one core for {cells} (estimated for {dim}-d vectors), more "
                        f"than --time-limit {_duration(limit)}; "
                        + (f"use {' or '.join(faster)}, " if faster else "")
                        + "a reduction, fewer texts (--sample when building), or a larger --time-limit")


def stored_cells(plan: Plan, spec: ModelSpec, store, metrics, found) -> bool:
    """Whether the store holds every cell of ``spec`` under the identity its files give without
    loading it (:func:`~tecb_eval.models.spec.known_identity`); if so, ``found(bench, row)`` takes
    each, and a rerun that computes nothing opens no model. False where a cell is pending or only
    loading tells the identity (nothing is taken then)."""
    from types import SimpleNamespace

    identity = known_identity(spec)
    if identity is None:
        return False
    unopened = SimpleNamespace(identity=identity)
    held: list = []
    if plan.pending(spec, lambda bench: unopened, store, metrics, lambda bench, row: held.append((bench, row))):
        return False
    for bench, row in held:
        found(bench, row)
    return True


def check_backfill(plan: Plan, store, metrics) -> None:
    """``--metrics`` fills in rows the store holds: a store whose rows of a dataset are all of
    another build (its fingerprint differs) has nothing to fill in, and would silently get a full
    new grid instead. One line, before any work."""
    if not metrics:
        return
    for bench in plan.benchmarks:
        builds = {row.get("dataset_fingerprint") for row in store.rows if row.get("dataset") == bench.name}
        if builds and bench.fingerprint not in builds:
            other = sorted(str(b)[:12] for b in builds)
            raise UserError(f"--metrics {','.join(metrics)}: the results store holds {bench.name} only from another "
                            f"build (dataset fingerprint {', '.join(other)}; {bench.location} is "
                            f"{bench.fingerprint[:12]}), so there is nothing to fill in: give that build's folder, "
                            "or leave out --metrics to run this build's grid")


def by_base(cells) -> dict[tuple, list]:
    """(protocol unit, reduction, algorithm) cells grouped by what one work unit reduces once:
    (base set name, reduction) -> [(protocol unit, algorithm)]."""
    grouped: dict[tuple, list] = {}
    for unit, reduction, algorithm, *setting in cells:
        grouped.setdefault((unit.base_name, reduction), []).append((unit, algorithm, *setting))
    return grouped


def work_cells(grouped) -> tuple:
    """The work cells of grouped (protocol unit, algorithm[, setting]) pairs; a cell's k stays the
    labels' count (its row's n_labels), a setting's k replaces it where the cell runs."""
    return tuple(Cell(u.name, u.rows, u.labels, u.k, a, u.levels, setting[0] if setting else None)
                 for u, a, *setting in grouped)


def preflight(specs: Sequence[ModelSpec], *, here: bool = True) -> None:
    """Options, model folders, mteb: names, backends, prompt names: one line each, before any encoding.
    ``here=False``: what needs torch or transformers is left to the Dask worker that opens the model."""
    for spec in specs:
        encoders.preflight(spec.spec, here=here, **spec.options)


def check_ranges(plan: Plan) -> None:
    """Before any encoding: a range no split can take, or a k-taking algorithm on a corpus
    without labels and without --k, is one line."""
    option = {"k": "--k", "min_cluster_size": "--min-cluster-size"}
    for parameter, values in plan.ranges.items():
        if values and not any(algo.algorithm_entry(a).ranged == parameter for a, _ in plan.configurations):
            raise UserError(f"{option[parameter]} is given but no algorithm of this run takes it "
                            f"({', '.join(sorted({a for a, _ in plan.configurations}))}); add one that does")
    for bench in plan.benchmarks:
        units = plan.units[(bench.fingerprint, plan.seed)]
        if not getattr(bench, "labelled", True) and not plan.ranges["k"]:
            needing = sorted({a for a, _ in plan.configurations if algo.algorithm_entry(a).ranged == "k"})
            if needing:
                raise UserError(f"{bench.location}: a corpus without labels gives {', '.join(needing)} no k; give "
                                "--k (a range such as 5:60 or a list such as 5,10,20), or run only hdbscan/dbstream")
        for unit in units:
            n = len(unit.texts)
            if n < 2:
                raise UserError(f"{bench.location}: split {unit.name!r} holds {n} text; clustering needs two or more")
            for parameter, values in plan.ranges.items():
                if values and max(values) > n:
                    raise UserError(f"{option[parameter]} up to {max(values)}: larger than the {n:,} texts of "
                                    f"split {unit.name!r} of {bench.name}; give a range up to {n}")


def check_stability(plan: Plan) -> None:
    """Asked for by name, reruns that could not cluster a split's subsample as its cells do
    (fewer texts than their k) are one line before any work; by default such a cell's row says
    so in its ``stability_note``."""
    if not plan.stability:
        return
    option = f"--stability {plan.stability}"
    for bench in plan.benchmarks:
        for unit in plan.units[(bench.fingerprint, plan.seed)]:
            n = len(unit.texts)
            size = subsample_size(n, plan.stability_fraction)
            needs = [(2, "two texts")]
            for algorithm, _ in plan.configurations:
                parameter = algo.algorithm_entry(algorithm).ranged
                if parameter == "k":
                    most = max(plan.ranges["k"] or (unit.k or 0,))
                    needs.append((most, f"k = {most}"))
                elif parameter == "min_cluster_size" and plan.ranges["min_cluster_size"]:
                    most = max(plan.ranges["min_cluster_size"])
                    needs.append((most, f"min_cluster_size = {most}"))
            most, what = max(needs)
            if size < most:
                raise UserError(f"{option}: each rerun clusters {size} of the {n} texts of split {unit.name!r} of "
                                f"{bench.name} ({plan.stability_fraction:g} of them), fewer than {what} needs; "
                                "give a larger --stability-fraction or smaller k, or leave --stability out")
