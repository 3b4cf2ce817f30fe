"""One unit of grid work, as a worker process runs it: a reduction and every algorithm on it.

A unit is (model, dataset, base set of texts, reduction, seed): the base set's embeddings are
reduced once and each pending cell (split or bootstrap sample x algorithm) is clustered from the
result. Everything a worker needs travels in :class:`WorkUnit` and the input matrix; what comes
back is plain numbers. The coordinator alone writes the results store and the caches.

Every unit runs with one BLAS/OpenMP/numba thread, wherever it runs (in the coordinator with
``jobs=1``, in a local worker process, on a Dask worker): N workers then use N cores without
oversubscribing them, and a score does not depend on how many threads summed its floats, so it
is the same bit for bit for any ``jobs``, any cluster and any completion order. Every random draw
in a unit comes from the unit's seed, UMAP's spectral start included: on degenerate inputs (many
duplicate vectors) ARPACK asks it for restart vectors, which UMAP alone would leave to the
operating system's entropy (see ``estimators._seeded_spectral_umap``).
"""

from __future__ import annotations

import os
import resource
import sys
import time
from dataclasses import dataclass

import numpy as np

from tecb_eval.clustering import algorithms as algo
from tecb_eval.clustering.cluster_counts import Setting, setting_name
from tecb_eval.clustering import consensus, spectrum
from tecb_eval.clustering.label_free import label_free_scores
from tecb_eval.clustering.profiles import get_profile
from tecb_eval.clustering.stability import DEFAULT_FRACTION, stability, subsample_size
from tecb_eval.clustering.registry import algorithm as algorithm_entry, reduction as reduction_entry, ward_matrix_bytes
from tecb_eval.grid.extra import extra_scores, label_codes

# Bytes a worker process holds before any unit (numpy, scikit-learn, UMAP, numba, hdbscan loaded);
# counted once per worker against the memory budget.
WORKER_BASELINE_BYTES = 450 * 2**20  # measured: 420-440 MiB RSS


@dataclass(frozen=True)
class Cell:
    split: str  # the results store's "split" (a split or a bootstrap sample)
    rows: np.ndarray | None  # rows of the base set it clusters; None = all, in order
    labels: tuple[str, ...]
    k: int
    algorithm: str
    # The label hierarchy's levels to score this cell's algorithm on (tecb_eval.grid.extra); () for none.
    levels: tuple = ()
    # A point of a range of cluster counts (k = 10, min_cluster_size = 15); None for the algorithm's own.
    setting: Setting | None = None


@dataclass(frozen=True)
class WorkUnit:
    key: str  # unique and stable within a run; names the unit in messages and Dask keys
    label: str  # for people: "model / dataset / split / reduction / seed"
    dataset: str  # dataset name, for the per-dataset time summary
    reduction: str
    seed: int
    protocol: str
    profile: str
    cells: tuple[Cell, ...]
    n: int  # rows of the base set
    dim: int  # embedding dimensions
    # Bytes Ward's n x n matrix may take beside the rest of the unit; the planner sets it from the
    # memory budget (scheduling.fit_or_skip). None: no limit, Ward on the matrix wherever the profile
    # and the dimensions call for it (see ward_path).
    ward_budget: int | None = None
    # Reruns of each cell's clustering for its stability (tecb_eval.clustering.stability; 0: none)
    # and the share of the texts each clusters.
    stability: int = 0
    stability_fraction: float = DEFAULT_FRACTION
    # The label-free criteria on the vectors (silhouette, Calinski-Harabasz, Davies-Bouldin, size
    # balance, the spectrum's k, DBCV): they cost more than the clustering, so a labelled run, which
    # ranks by V-measure, computes them only when asked (Plan.label_free_for).
    label_free: bool = True
    # DBCV of a density clustering: with the criteria above, or alone where --metrics dbcv asks for it.
    dbcv: bool = True
    # The cluster assignment kept in the row (for consensus and the topic words): with the criteria
    # above, or where only the topic words are asked for.
    assignment: bool = True

    def ward_path(self, m: int) -> str:
        return ward_path(m, _reduced_dim(self), self.profile, self.ward_budget, self.n * self.dim)

    @property
    def memory(self) -> int:
        return estimate_memory(self)

    @property
    def cost(self) -> float:
        return estimate_cost(self)


@dataclass
class UnitResult:
    metrics: list[dict]  # per cell, in the unit's order: clustering_metrics + cluster_s + params
    reduced: np.ndarray | None  # the reduction, for the coordinator's cache (None: came from it)
    reduce_s: float
    pid: int
    max_rss: int  # bytes, peak of the process that ran the unit
    cpu_s: float = 0.0  # CPU seconds the unit took in its process (a busy machine inflates them less than wall time)
    worker: str = ""  # the Dask worker's address that ran it; "" off a cluster (then ``pid`` says where)


def dask_worker_address() -> str:
    """The address of the Dask worker this runs on, or "" (in this process or a local worker process)."""
    import sys

    if "distributed" not in sys.modules:  # a process that never imported distributed is no Dask worker
        return ""
    from distributed import get_worker

    try:
        return str(get_worker().address)
    except ValueError:  # not inside a worker's task
        return ""


def _reduced_dim(unit: WorkUnit) -> int:
    return reduction_entry(unit.reduction).reduced_dim(unit.dim)


def ward_path(m: int, dim: int, profile, budget: int | None, input_values: int = 0) -> str:
    """``"matrix"`` (scikit-learn's Ward, what runs today) or ``"vector"`` (fastcluster's, O(n d) memory)
    for Ward on ``m`` rows of ``dim`` dimensions: the matrix wherever it fits ``budget`` beside the
    unit's input (``input_values`` numbers, held three times), else the vectors where the profile
    allows them. Not the vectors where the matrix fits, though they are 8x faster in 2-d: on inputs
    with exactly tied distances (duplicate rows, points on a grid) the two chains can pick different
    tied pairs and build another, equally valid, tree (``tests/test_ward_vector.py``), and every
    score that ran before must stay what it was. On real embeddings they agreed everywhere we looked."""
    if budget is None or get_profile(profile).ward == "matrix":
        return "matrix"
    if 3 * input_values * 8 + ward_matrix_bytes(m) <= budget:
        return "matrix"
    return "vector"


def estimate_memory(unit: WorkUnit) -> int:
    """Peak bytes of a unit beyond its worker's baseline, on the safe side: the input held three
    times (its float64 copy, the reducer's working copy), the reduction's buffers, and the largest
    cell's own peak (each algorithm's ``memory`` in the registry; Ward on the matrix dominates)."""
    n, d = unit.n, unit.dim
    peak = 3 * n * d * 8 + reduction_entry(unit.reduction).memory(n, d)
    reduced = _reduced_dim(unit)
    for cell in unit.cells:
        m = n if cell.rows is None else len(cell.rows)
        peak = max(peak, 3 * n * d * 8 + algorithm_entry(cell.algorithm).memory(m, reduced, cell.k, unit.ward_path(m)))
    return int(peak)


def estimate_cost(unit: WorkUnit) -> float:
    """Relative run time, only to start the longest units first (a better spread over workers)."""
    n, d = unit.n, unit.dim
    cost = reduction_entry(unit.reduction).cost(n, d)
    reduced = _reduced_dim(unit)
    for cell in unit.cells:
        m = n if cell.rows is None else len(cell.rows)
        cost += algorithm_entry(cell.algorithm).cost(m, reduced, cell.k, unit.ward_path(m))
        if unit.stability:
            sub = subsample_size(m, unit.stability_fraction)
            cost += unit.stability * algorithm_entry(cell.algorithm).cost(sub, reduced, cell.k, unit.ward_path(sub))
    return cost


METRIC_FIELDS = ("v_measure", "homogeneity", "completeness", "ami", "ari", "noise_fraction", "n_clusters_found")


def clustering_metrics(gold, predicted: np.ndarray) -> dict:
    """The scores against the gold labels, the noise fraction and the clusters found; ``gold`` None
    (a corpus without labels): every score that needs labels is None, never 0."""
    from sklearn import metrics  # here: the grid's caller on a Dask cluster scores nothing

    if gold is None:
        return {"v_measure": None, "homogeneity": None, "completeness": None, "ami": None, "ari": None,
                "noise_fraction": float(np.mean(predicted == -1)) if len(predicted) else 0.0,
                "n_clusters_found": int(len(set(predicted.tolist()) - {-1}))}
    gold = label_codes(gold)
    homogeneity, completeness, v_measure = metrics.homogeneity_completeness_v_measure(gold, predicted)
    return {
        "v_measure": float(v_measure),
        "homogeneity": float(homogeneity),
        "completeness": float(completeness),
        "ami": float(metrics.adjusted_mutual_info_score(gold, predicted)),
        "ari": float(metrics.adjusted_rand_score(gold, predicted)),
        "noise_fraction": float(np.mean(predicted == -1)) if len(predicted) else 0.0,
        "n_clusters_found": int(len(set(predicted.tolist()) - {-1})),
    }


def one_thread():
    """Limit BLAS/OpenMP (threadpoolctl), numba and joblib to one thread for the unit that follows.

    joblib: HDBSCAN computes its core distances with ``joblib.Parallel(n_jobs=4)``, which starts
    a pool of 4 processes in every worker on its first fit and then runs 4 processes per worker
    beside the others, on cores the other workers hold (docs/benchmarks.md, "HDBSCAN's joblib
    pool"). joblib's sequential backend runs them in the unit's own thread: the same core
    distances, the same labels.
    """
    import contextlib

    import joblib
    # threadpoolctl limits the thread pools of the libraries loaded when the limit is set, not of
    # those loaded later: scikit-learn's OpenMP runtime and SciPy's BLAS load with scikit-learn,
    # which a run imports only once its first unit builds an estimator, inside this limit. Loaded
    # here first, they are limited too; unlimited, a small k-means fit would run one OpenMP thread
    # per core, threads that spin against each other on a busy machine (ten times the time).
    import sklearn  # noqa: F401
    from threadpoolctl import threadpool_limits

    # Only where numba is loaded (a unit with UMAP loads it before this, in compile_umap): a
    # k-means unit has no numba code to run, and importing it costs half a second.
    numba = sys.modules.get("numba")
    if numba is not None:
        try:
            numba.set_num_threads(1)
        except ValueError:  # already at its minimum
            pass
    stack = contextlib.ExitStack()
    stack.enter_context(threadpool_limits(limits=1))
    stack.enter_context(joblib.parallel_config(backend="sequential"))
    return stack


def warm_up() -> int:
    """What a new worker process does before its first unit, while the coordinator still loads the
    data and encodes: import what every unit needs (scikit-learn, UMAP, pynndescent, numba: 2.5 s
    of a quiet core) and point UMAP's numba functions at the on-disk cache. Started with the
    workers, it takes that time off the grid's critical path; it computes nothing a unit returns,
    so no score depends on it."""
    from tecb_eval.clustering.estimators import compile_umap

    compile_umap()
    return os.getpid()


def aligned_copy(X: np.ndarray, alignment: int = 64) -> np.ndarray:
    """``X`` copied into memory aligned to ``alignment`` bytes, C-contiguous and writable.

    An array can arrive anywhere in memory: Dask deserialises it as a view into the bytes it
    received, at any offset (a float32 matrix 33 bytes past a 64-byte boundary, not even on a
    float's boundary), and numpy then sums it by another path, so PCA's output differs in the last
    bits and UMAP and HDBSCAN amplify that. Every unit therefore works on a copy placed alike.
    """
    X = np.asarray(X)
    buffer = np.empty(X.nbytes + alignment, dtype=np.uint8)
    start = (-buffer.ctypes.data) % alignment
    out = buffer[start:start + X.nbytes].view(X.dtype).reshape(X.shape)
    out[...] = X
    return out



def _spectra(unit: WorkUnit, reduced: np.ndarray) -> dict:
    """The spectrum's number of clusters of each split the unit clusters (:mod:`tecb_eval.clustering.spectrum`):
    one graph per split, whatever the algorithms on it."""
    out = {}
    if not unit.label_free:
        return out
    for cell in unit.cells:
        if cell.split not in out:
            data = reduced if cell.rows is None else reduced[cell.rows]
            started = time.perf_counter()
            out[cell.split] = (spectrum.spectral_k(data, None, unit.seed, cell.split), time.perf_counter() - started)
    return out


def _run_cell(unit: WorkUnit, cell: Cell, reduced: np.ndarray, spectra: dict) -> dict:
    data = reduced if cell.rows is None else reduced[cell.rows]
    point = cell.setting
    k = min(point.value if point and point.parameter == "k" else cell.k, data.shape[0])
    estimator = algo.make_algorithm(cell.algorithm, k, unit.seed, unit.protocol, profile=unit.profile,
                                    ward_path=unit.ward_path(data.shape[0]),
                                    min_cluster_size=point.value if point and point.parameter == "min_cluster_size" else None)
    started = time.perf_counter()
    predicted = algo.cluster(estimator, data)
    cluster_s = time.perf_counter() - started
    label_free = {}
    if unit.label_free:
        started = time.perf_counter()
        # Seeded by the setting's name, as its row gives it: the draws follow the row's key.
        label_free = label_free_scores(data, predicted, unit.seed, cell.split, cell.algorithm,
                                       setting_name(cell.setting))
        k_hat, spectrum_s = spectra[cell.split]
        label_free["spectral_k"] = k_hat
        label_free["spectral_k_fit"] = spectrum.fit_to(int(len(set(predicted.tolist()) - {-1})), k_hat)
        # The split's graph is counted once per split, with the first cell on it.
        label_free["label_free_s"] = time.perf_counter() - started + spectrum_s
        spectra[cell.split] = (k_hat, 0.0)
    if unit.assignment:
        # The assignment travels back as compact text, kept in the row for criteria across partitions.
        label_free["assignment"] = consensus.encode(predicted)
    if unit.stability:
        started = time.perf_counter()
        label_free.update(_stability(unit, cell, data, predicted, k, point))
        label_free["stability_s"] = time.perf_counter() - started
    return {
        **clustering_metrics(cell.labels, predicted),
        **label_free,
        "n_samples": int(data.shape[0]),
        "cluster_s": cluster_s,
        "algorithm_params": algo.params_json(estimator),
        **extra_scores(unit, cell, reduced, data, predicted),
    }


def _stability(unit: WorkUnit, cell: Cell, data: np.ndarray, predicted: np.ndarray, k: int, point) -> dict:
    """The cell's clustering run again ``unit.stability`` times on subsamples of ``data`` (the
    vectors it clustered), each with its own seed, and its agreement with ``predicted``."""
    min_cluster_size = point.value if point and point.parameter == "min_cluster_size" else None
    entry = algorithm_entry(cell.algorithm)

    def fit(rows: np.ndarray, seed: int) -> np.ndarray:
        estimator = algo.make_algorithm(cell.algorithm, k, seed, unit.protocol, profile=unit.profile,
                                        ward_path=unit.ward_path(len(rows)), min_cluster_size=min_cluster_size)
        return algo.cluster(estimator, data[rows])

    return stability(predicted, fit, unit.stability, unit.stability_fraction, unit.seed, cell.split, cell.algorithm,
                     setting_name(cell.setting),
                     too_few=k if entry.ranged == "k" else (min_cluster_size or entry.ranged_default or 0))


def _run_cell_one_thread(unit: WorkUnit, cell: Cell, reduced: np.ndarray, spectra: dict) -> dict:
    # OpenMP's and numba's thread counts are per thread: a new thread starts from the machine's
    # default, not from the limit its parent set, so each cell's thread sets its own.
    with one_thread():
        return _run_cell(unit, cell, reduced, spectra)


def _run_cells(unit: WorkUnit, reduced: np.ndarray, threads: int) -> list[dict]:
    """Every cell's scores, in the unit's order. With ``threads`` > 1 (a unit run in the coordinator
    while no worker process runs beside it), the cells that may run side by side do, one thread
    each: a minibatch k-means fit runs its Cython loops with the GIL released, so the 10 draws of a
    fast-protocol unit and their per-level fits share the cores (bench/bench_vs_mteb.py). Each
    cell is single-threaded and seeded as in a worker process, so its scores are the same bit for bit."""
    # An algorithm runs beside others where its peak is a few copies of the cell's rows (the
    # registry's side_by_side); Ward holds up to an n x n matrix, budgeted one cell at a time.
    side_by_side = [i for i, c in enumerate(unit.cells) if algorithm_entry(c.algorithm).side_by_side]
    spectra = _spectra(unit, reduced)
    if threads <= 1 or len(side_by_side) < 2:
        return [_run_cell(unit, cell, reduced, spectra) for cell in unit.cells]
    from concurrent.futures import ThreadPoolExecutor

    out: list[dict | None] = [None] * len(unit.cells)
    with ThreadPoolExecutor(max_workers=min(threads, len(side_by_side)), thread_name_prefix="tecb-cell") as pool:
        futures = {i: pool.submit(_run_cell_one_thread, unit, unit.cells[i], reduced, spectra) for i in side_by_side}
        for i, future in futures.items():
            out[i] = future.result()
    # The others (Ward) after them, alone: one core each, and one n x n matrix at a time.
    for i, cell in enumerate(unit.cells):
        if out[i] is None:
            out[i] = _run_cell(unit, cell, reduced, spectra)
    return out


def run_unit(unit: WorkUnit, X: np.ndarray, is_reduced: bool, threads: int = 1) -> UnitResult:
    """Reduce ``X`` (the base set's embeddings) unless ``is_reduced``, then run every cell, up to
    ``threads`` of them side by side (see :func:`_run_cells`)."""
    cpu_began = time.process_time()
    X = aligned_copy(X)
    if reduction_entry(unit.reduction).compiles_umap and not is_reduced:
        from tecb_eval.clustering.estimators import compile_umap

        compile_umap()
    with one_thread():
        started = time.perf_counter()
        reduced = X if is_reduced else algo.reduce(unit.reduction, X, unit.seed)
        reduce_s = 0.0 if is_reduced else time.perf_counter() - started
        out = _run_cells(unit, reduced, threads)
    return UnitResult(
        metrics=out,
        reduced=None if is_reduced or not reduction_entry(unit.reduction).reduces else np.asarray(reduced),
        reduce_s=reduce_s,
        pid=os.getpid(),
        max_rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        cpu_s=time.process_time() - cpu_began,
        worker=dask_worker_address(),
    )
