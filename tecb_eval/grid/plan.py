"""The grid's plan: what is to be computed, checked once.

:func:`check_options` checks every option of a run before any work (protocol, seeds, splits,
metrics, models' options, configurations); :class:`Plan` holds what the checked options name: the
datasets (a build given twice counted once), the models, the configurations, the seeds and each
dataset's units, and says which cells a model still lacks in the results store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from tecb_data.errors import UserError
from tecb_data.seeding import DEFAULT_SEED
from tecb_eval.benchmark import load_dataset
from tecb_eval.clustering import algorithms as algo
from tecb_eval.clustering.cluster_counts import parse_setting, setting_name
from tecb_eval.clustering.criteria import needing
from tecb_eval.clustering.profiles import DEFAULT_PROFILE, get_profile
from tecb_eval.clustering.registry import ALGORITHMS_REGISTRY
from tecb_eval.clustering.settings import DEFAULT_TIME_LIMIT  # noqa: F401 (re-exported)
from tecb_eval.clustering.stability import (DEFAULT_FRACTION, UNLABELLED_RUNS, check_fraction, check_runs,
                                            subsample_size)
from tecb_eval.grid import extra, protocols
from tecb_eval.grid.seeds import check_seed, check_seeds
from tecb_eval.grid.store import cell_key, seed_set_name
from tecb_eval.grid.work import Cell, WorkUnit
from tecb_eval.models import encoders
from tecb_eval.models.spec import ModelSpec, known_identity, model_spec


@dataclass(frozen=True)
class Options:
    """A run's options once checked: what :class:`Plan` and the executor are built from."""

    protocol: str
    seeds: tuple[int, ...]
    limit_splits: int | None
    metrics: tuple[str, ...]
    models: tuple[ModelSpec, ...]
    configurations: list
    skipped: list


def check_options(models, *, protocol: str, seed, seeds, limit_splits, metrics, algorithms, reductions,
                  configurations) -> Options:
    """Every option of a run checked before any work: one line for the first that is wrong."""
    if protocol not in protocols.PROTOCOLS:
        raise UserError(f"unknown protocol {protocol!r}; choose from {', '.join(protocols.PROTOCOLS)}")
    if seeds is not None and seed is not None:
        raise UserError(f"seed={seed!r} and seeds={seeds!r} given together (--seed and --seeds): seeds replaces "
                        "seed, so give one of them")
    seeds = check_seeds(seeds) if seeds is not None else (check_seed(DEFAULT_SEED if seed is None else seed),)
    if limit_splits is not None and (isinstance(limit_splits, bool) or not isinstance(limit_splits, (int, np.integer))
                                     or limit_splits < 0):
        raise UserError(f"limit_splits (--limit-splits) must be a number of splits, or 0 for all of them; "
                        f"got {limit_splits!r}")
    limit_splits = int(limit_splits) if limit_splits else None  # 0: all splits, as `demo` documents
    if protocol == "fast" and limit_splits:
        raise UserError(f"limit_splits={limit_splits} (--limit-splits) applies to the legacy protocol's splits; the "
                        "fast protocol samples from all of them at once (MTEB v2): leave it out")
    if not models:
        raise UserError("no models given")
    specs = tuple(model_spec(item) for item in models)
    _check_names(specs)
    if algorithms is None:
        algorithms = algo.DEFAULT_ALGORITHMS if protocol == "legacy" else (algo.TABLE2_CONFIGURATION[0],)
    pairs, skipped = algo.configurations(algorithms, reductions, configurations)
    if not pairs:
        raise UserError("no configuration left to run; name at least one algorithm and reduction")
    return Options(protocol, tuple(seeds), limit_splits, tuple(extra.check_metrics(metrics)), specs, pairs, skipped)


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

    def __init__(self, datasets, models, *, configurations, protocol, seeds: Sequence[int], limit_splits=None,
                 profile=DEFAULT_PROFILE, samples=None, log: Callable[[str], None] = print,
                 k: Sequence[int] | None = None, min_cluster_size: Sequence[int] | None = None,
                 stability: int | None = None, stability_fraction: float = DEFAULT_FRACTION,
                 topics: bool | None = None, label_free: bool | None = None, metrics: Sequence[str] = ()):
        self.benchmarks = []
        for bench in map(load_dataset, datasets):
            # The same build given twice (a path and its copy, or twice in the list) is one dataset:
            # twice its rows would count it double in every table.
            twin = next((b for b in self.benchmarks if b.fingerprint == bench.fingerprint), None)
            if twin is not None:
                log(f"note: {bench.location} is the same dataset build as {twin.location}; evaluated once")
                continue
            self.benchmarks.append(bench)
        # run_grid hands the specs check_options made: each model goes through model_spec once per run.
        self.models = [m if isinstance(m, ModelSpec) else model_spec(m) for m in models]
        self.configurations = configurations
        self.protocol = protocol
        # Several seeds: every reduction, clustering and fast-protocol sample varies with the seed;
        # encoding happens once, seeded (for encoders that take a seed) by the smallest. A seed set is
        # a set: sorted here, so the order it was asked in changes no row, identity or cache key.
        self.seeds = tuple(sorted(int(s) for s in seeds))
        self.seed = self.seeds[0]
        self.seed_set = seed_set_name(self.seeds)
        self.profile = get_profile(profile)
        # Ranges of cluster counts (tecb_eval.clustering.cluster_counts): every point is a cell of its own.
        self.ranges = {"k": tuple(k or ()), "min_cluster_size": tuple(min_cluster_size or ())}
        self.units = {
            (b.fingerprint, s): protocols.units_for(b, protocol, s, limit_splits=limit_splits, samples=samples)
            for b in self.benchmarks for s in self.seeds
        }
        # Reruns per cell for its stability (tecb_eval.clustering.stability): None is the default,
        # on a corpus without labels for the pipelines ``stability_on`` names once the grid has
        # ranked them (run_grid's second pass), off for labelled data.
        self.stability = None if stability is None else check_runs(stability)
        # (dataset fingerprint, model, reduction, algorithm, setting) of the pipelines whose cells
        # the default reruns; None: the first pass, which reruns none.
        self.stability_on: frozenset | None = None
        self.stability_fraction = check_fraction(stability_fraction)
        # The criteria that need the texts (tecb_eval.clustering.topics): None is the default, on for
        # a corpus without labels (what recommend ranks by), off for labelled data (a labelled run
        # ranks by V-measure; calibration asks for them with --topics).
        self.topics = topics
        # Every label-free criterion of the registry that a run computes (the vectors', the topic
        # words', the kept assignment for consensus): None is the default, on for a corpus without
        # labels, off on labelled data, where they cost more than the clustering and a labelled run
        # ranks by V-measure (``tecb-eval calibrate`` asks for them with --label-free).
        self.label_free = label_free
        # --metrics: DBCV asked for by name is computed whatever --label-free says.
        self.metrics = tuple(metrics)
        self._check_ranges()
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

    def settings(self, algorithm: str) -> tuple[str, ...]:
        """The cluster settings ``algorithm`` runs at: each point of its range, or ``""``, its own."""
        parameter = algo.algorithm_entry(algorithm).ranged
        values = self.ranges.get(parameter, ()) if parameter else ()
        return tuple(setting_name(parameter, v) for v in values) or ("",)

    def _check_ranges(self) -> None:
        """Before any encoding: a range no split can take, or a k-taking algorithm on a corpus
        without labels and without --k, is one line."""
        option = {"k": "--k", "min_cluster_size": "--min-cluster-size"}
        for parameter, values in self.ranges.items():
            if values and not any(algo.algorithm_entry(a).ranged == parameter for a, _ in self.configurations):
                raise UserError(f"{option[parameter]} is given but no algorithm of this run takes it "
                                f"({', '.join(sorted({a for a, _ in self.configurations}))}); add one that does")
        for bench in self.benchmarks:
            units = self.units[(bench.fingerprint, self.seed)]
            if not getattr(bench, "labelled", True) and not self.ranges["k"]:
                needing = sorted({a for a, _ in self.configurations if algo.algorithm_entry(a).ranged == "k"})
                if needing:
                    raise UserError(f"{bench.location}: a corpus without labels gives {', '.join(needing)} no k; give "
                                    "--k (a range such as 5:60 or a list such as 5,10,20), or run only hdbscan/dbstream")
            for unit in units:
                n = len(unit.texts)
                if n < 2:
                    raise UserError(f"{bench.location}: split {unit.name!r} holds {n} text; clustering needs two or more")
                for parameter, values in self.ranges.items():
                    if values and max(values) > n:
                        raise UserError(f"{option[parameter]} up to {max(values)}: larger than the {n:,} texts of "
                                        f"split {unit.name!r} of {bench.name}; give a range up to {n}")

    def key(self, name: str, identity: str, bench, unit, reduction: str, algorithm: str, seed: int,
            setting: str = "") -> tuple:
        return cell_key({
            "protocol": self.protocol, "profile": self.profile.name, "seeds": self.seed_set, "seed": seed,
            "model": name, "model_identity": identity, "dataset_fingerprint": bench.fingerprint,
            "reduction": reduction, "algorithm": algorithm, "split": unit.name, "setting": setting,
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
                points = [parse_setting(s) for s in plan.settings(algorithm)]
                ks = [p[1] if p and p[0] == "k" else (unit.k or 2) for p in points]
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
    return tuple(Cell(u.name, u.rows, u.labels, u.k, a, u.levels, setting[0] if setting else "")
                 for u, a, *setting in grouped)


def preflight(specs: Sequence[ModelSpec], *, here: bool = True) -> None:
    """Options, model folders, mteb: names, backends, prompt names: one line each, before any encoding.
    ``here=False``: what needs torch or transformers is left to the Dask worker that opens the model."""
    for spec in specs:
        encoders.preflight(spec.spec, here=here, **spec.options)


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
