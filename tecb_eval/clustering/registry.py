"""The one registry of the grid's clustering algorithms and dimensionality reductions.

Each entry is data (its name, the paper's name, the words tables and pages use, whether it leaves
texts unassigned, where its equivalent lives for a user outside tecb) with small factories: the
estimator the grid runs, the memory and time a unit plans for, and the lines of Python that build
the same thing in BERTopic. ``make_algorithm``, the reductions, the command line's choices, the
leaderboard's wording, the figures' labels and ``recommend``'s snippet all read it, so a new
algorithm is one entry here, as MTEB describes a task by its ``TaskMetadata``.

This module imports nothing heavy (the command line lists the names without importing
scikit-learn); a factory imports its estimator when it is called.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from tecb_data.errors import UserError

from tecb_eval.clustering.settings import (
    FAST_KMEANS_BATCH_SIZE, KMEANS_BATCH_SIZE, PCA_PRE_COMPONENTS, UMAP_NEIGHBOURS,
)


@dataclass(frozen=True)
class Equivalent:
    """Where the same estimator stands outside tecb: ``from module import name``; ``mapping``:
    our parameter -> its parameter where the names differ; ``note``: what differs besides."""

    module: str
    name: str
    mapping: tuple[tuple[str, str], ...] = ()
    note: str = ""

    @property
    def import_line(self) -> str:
        return f"from {self.module} import {self.name}"


@dataclass(frozen=True)
class Build:
    """What an algorithm's factory is told: the k, the seed, the protocol, the profile and the
    memory planner's choice of Ward's implementation."""

    n_clusters: int
    seed: int
    protocol: str = "legacy"
    profile: object = None
    ward_path: str = "matrix"
    min_cluster_size: int | None = None  # HDBSCAN's, where a range sets it; None: its default


@dataclass(frozen=True)
class Algorithm:
    name: str
    paper_name: str  # as the paper's tables and the authors' results file write it
    label: str  # short, for a figure's axis
    description: str  # one line for pages and tables
    labels_noise: bool  # leaves texts unassigned (label -1): a density clustering, scored with DBCV
    takes_k: bool  # asks for the number of clusters (the split's number of labels)
    side_by_side: bool  # its cells may run in threads beside others (one OpenMP/BLAS thread each)
    build: Callable[[Build], object]
    equivalent: Equivalent  # the class a snippet puts where BERTopic takes its clusterer
    memory: Callable[[int, int, int, str], int]  # (rows, dims, k, ward path) -> peak bytes beyond the input
    cost: Callable[[int, int, int, str], float]  # the same -> relative run time, to start long units first
    skipped_with: tuple[str, ...] = ()  # reductions the paper left out with it (run only when named)
    defaults: dict = field(default_factory=dict)  # what the grid sets beside k and the seed
    words: str = ""  # how a page or a table says it in a sentence ("Minibatch k-Means on the embeddings")
    # The parameter a range of cluster counts varies (tecb_eval.clustering.cluster_counts): "k" for
    # the algorithms that take k, "min_cluster_size" for HDBSCAN; None: it takes no such range.
    ranged: str | None = None
    ranged_default: int | None = None  # that parameter's own default, where it is not the labels' count
    # In the grid's default product of algorithms (the paper's); False: run only where named
    # (--algorithm, --config), as an algorithm the paper did not run.
    in_default_grid: bool = True


@dataclass(frozen=True)
class Reduction:
    name: str
    paper_name: str
    label: str
    description: str
    build: Callable[[int, int], object]  # (seed, n_components) -> a reducer with fit_transform, or None
    keeps_below: int  # an input with fewer rows or columns than this stays as it is
    reduced_dim: Callable[[int], int]  # input dims -> output dims
    memory: Callable[[int, int], int]  # (rows, dims) -> peak bytes beyond the input
    cost: Callable[[int, int], float]
    equivalent: Equivalent | None  # None: no reducer (BERTopic's BaseDimensionalityReduction)
    snippet: Callable[[dict], tuple[list[str], str]]  # checked parameters -> (imports, the line for umap_model)
    defaults: dict = field(default_factory=dict)
    words: str = ""  # what the algorithm runs on, in a sentence
    compiles_umap: bool = False  # runs UMAP, whose numba code a process keeps on disk before the first fit
    needs_dims: bool = False  # its snippet reads ``dims``, the embeddings' length, which the snippet sets first

    @property
    def reduces(self) -> bool:
        """False for ``none``: nothing to compute, cache or look up."""
        return self.equivalent is not None


# -- algorithms ----------------------------------------------------------------------------------
def _kmeans(b: Build):
    from sklearn.cluster import MiniBatchKMeans

    if b.protocol == "fast":
        return MiniBatchKMeans(n_clusters=b.n_clusters, batch_size=FAST_KMEANS_BATCH_SIZE, init="k-means++",
                               n_init=1, random_state=b.seed)
    return MiniBatchKMeans(n_clusters=b.n_clusters, batch_size=KMEANS_BATCH_SIZE, n_init="auto", random_state=b.seed)


def _ward(b: Build):
    from tecb_eval.clustering.profiles import get_profile

    if b.ward_path == "vector" and get_profile(b.profile).ward != "matrix":
        from tecb_eval.clustering.estimators import WardVectors

        return WardVectors(n_clusters=b.n_clusters)
    from sklearn.cluster import AgglomerativeClustering

    return AgglomerativeClustering(n_clusters=b.n_clusters, linkage="ward")


def _hdbscan(b: Build):
    import hdbscan

    if b.min_cluster_size is not None:
        return hdbscan.HDBSCAN(min_cluster_size=b.min_cluster_size)
    return hdbscan.HDBSCAN()


def _dbstream(b: Build):
    from tecb_eval.clustering.estimators import DBSTREAMClusterer
    from tecb_eval.clustering.profiles import get_profile

    return DBSTREAMClusterer(cleanup=get_profile(b.profile).dbstream_cleanup)


def ward_matrix_bytes(m: int) -> int:
    """Ward on the n x n matrix: scipy condenses the distances into n(n-1)/2 doubles and its
    nearest-neighbour chain works on a copy (8 n^2 bytes), and the allocator holds more: 11 n^2
    bytes (bench/bench_scale.py measures the peak; docs/benchmarks.md)."""
    return 11 * m * m + 64 * m


def ward_vector_bytes(m: int, dim: int) -> int:
    """Ward on the vectors: fastcluster's float64 copy of the rows, its working copy of the cluster
    centres and the linkage (4 doubles per merge); bench/bench_scale200k.py measures it."""
    return 2 * m * dim * 8 + 96 * m


def _labels_memory(m: int, dim: int, k: int, path: str) -> int:
    return 16 * m * max(dim, k) * 8


def _ward_memory(m: int, dim: int, k: int, path: str) -> int:
    return ward_matrix_bytes(m) if path == "matrix" else ward_vector_bytes(m, dim)


def _ward_cost(m: int, dim: int, k: int, path: str) -> float:
    # CPU seconds of one quiet core, fitted to bench/bench_scale200k.py's runs (docs/benchmarks.md):
    # on the vectors 21 s at 100k in 2-d and 1,122 s at 50k in 384-d (the chain recomputes centroid
    # distances); on the matrix 31 s at 25k in 2-d and 122 s in 384-d.
    if path == "vector":
        return m * m * (dim + 1) * 1.2e-9
    return m * m * (5e-8 + dim * 3.8e-10)


def _knn_ward(b: Build):
    from tecb_eval.clustering.estimators import KnnWard

    return KnnWard(n_clusters=b.n_clusters)


def _knn_ward_memory(m: int, dim: int, k: int, path: str) -> int:
    # The float64 copy, the graph and scikit-learn's heap of candidate merges (Python tuples, one
    # per edge, ~100 bytes each): bench/bench_knn_ward.py measures the peak.
    return 2 * m * dim * 8 + m * UMAP_NEIGHBOURS * 2 * 120


def _knn_ward_cost(m: int, dim: int, k: int, path: str) -> float:
    # CPU seconds of one core: the neighbours (a tree in few dimensions; brute force, m^2 d, beyond)
    # and the merges along the graph's edges; 2.1 s at 10k in 2-d, 9.9 s at 10k in 384-d (2026-11-29).
    neighbours = m * m * dim * 2e-10 if dim > 15 else m * math.log2(max(m, 2)) * 2e-6
    return neighbours + m * UMAP_NEIGHBOURS * 1.4e-5


def _centroid_cost(m: int, dim: int, k: int, path: str) -> float:
    return m * dim * k * 2e-8 + m * 1e-5


ALGORITHMS_REGISTRY: dict[str, Algorithm] = {a.name: a for a in (
    Algorithm("minibatch_kmeans", "kmeans", "k-means", "mini-batch k-means with k = the number of labels",
              labels_noise=False, takes_k=True, side_by_side=True, build=_kmeans,
              equivalent=Equivalent("sklearn.cluster", "MiniBatchKMeans"),
              memory=_labels_memory, cost=_centroid_cost,
              defaults={"batch_size": KMEANS_BATCH_SIZE, "n_init": "auto"}, words="Minibatch k-Means", ranged="k"),
    Algorithm("agglomerative", "agglomerative", "agglom.", "agglomerative clustering, Ward linkage, k = the number of labels",
              labels_noise=False, takes_k=True, side_by_side=False, build=_ward,
              equivalent=Equivalent("sklearn.cluster", "AgglomerativeClustering"),
              memory=_ward_memory, cost=_ward_cost, defaults={"linkage": "ward"}, words="Ward agglomerative clustering",
              ranged="k"),
    Algorithm("agglomerative_knn", "agglomerative-knn", "agglom. k-NN",
              "Ward agglomerative clustering on a 15-nearest-neighbour graph (connectivity-constrained, not exact Ward)",
              labels_noise=False, takes_k=True, side_by_side=True, build=_knn_ward,
              equivalent=Equivalent("tecb_eval.clustering.estimators", "KnnWard",
                                    note="scikit-learn's AgglomerativeClustering(linkage='ward', "
                                         "connectivity=kneighbors_graph(X, 15))"),
              memory=_knn_ward_memory, cost=_knn_ward_cost, defaults={"linkage": "ward", "n_neighbors": UMAP_NEIGHBOURS},
              words="Ward agglomerative clustering on a k-NN graph", ranged="k", in_default_grid=False),
    Algorithm("hdbscan", "hdbscan", "HDBSCAN", "HDBSCAN with its defaults (finds its own number of clusters; noise)",
              labels_noise=True, takes_k=False, side_by_side=True, build=_hdbscan,
              equivalent=Equivalent("hdbscan", "HDBSCAN"), memory=_labels_memory, cost=_centroid_cost,
              skipped_with=("none",), words="HDBSCAN", ranged="min_cluster_size", ranged_default=5),
    Algorithm("dbstream", "dbstream", "DBSTREAM", "river's streaming DBSTREAM with its defaults (noise)",
              labels_noise=True, takes_k=False, side_by_side=True, build=_dbstream,
              equivalent=Equivalent("tecb_eval.clustering.estimators", "DBSTREAMClusterer",
                                    note="river's DBSTREAM with scikit-learn's face"),
              memory=_labels_memory, cost=lambda m, dim, k, path: m * 4e-4, skipped_with=("none",), words="DBSTREAM"),
)}


# -- reductions ----------------------------------------------------------------------------------
def _no_reducer(seed: int, n_components: int):
    return None


def _pca(seed: int, n_components: int):
    from sklearn.decomposition import PCA

    return PCA(n_components=n_components, random_state=seed)


def _umap(seed: int, n_components: int):
    from tecb_eval.clustering.estimators import Umap

    return Umap(n_components=n_components, random_state=seed)


def _pca_umap(seed: int, n_components: int):
    from tecb_eval.clustering.estimators import PcaUmap

    return PcaUmap(n_components=n_components, random_state=seed)


def _umap_memory(n: int, d: int) -> int:
    return n * UMAP_NEIGHBOURS * 8 * 12 + n * min(d, PCA_PRE_COMPONENTS) * 8 * 4


def _umap_line(p: dict) -> str:
    # The grid lets UMAP see fewer neighbours than texts on a tiny corpus; so does the snippet.
    return (f"UMAP(n_components={p['n_components']!r}, n_neighbors=min({p['n_neighbors']!r}, len(docs) - 1), "
            f"metric={p['metric']!r}, random_state={p['random_state']!r})")


def _snippet_none(p: dict) -> tuple[list[str], str]:
    return (["from bertopic.dimensionality import BaseDimensionalityReduction"],
            "umap_model = BaseDimensionalityReduction()  # no reduction: cluster the embeddings")


def _snippet_pca(p: dict) -> tuple[list[str], str]:
    return (["from sklearn.decomposition import PCA"],
            f"umap_model = PCA(n_components={p['n_components']!r}, random_state={p['random_state']!r})")


def _snippet_umap(p: dict) -> tuple[list[str], str]:
    return ["from umap import UMAP"], f"umap_model = {_umap_line(p)}"


def _snippet_pca_umap(p: dict) -> tuple[list[str], str]:
    # As the grid clips (PcaUmap: at most as many components as texts and dimensions): n centred texts
    # span at most n - 1 directions, so the grid's n-th component is zero and UMAP's cosine distances
    # are the same without it; n - 1 also fits tfidf-lsa, whose LSA keeps at most n - 1 dimensions.
    # ``dims`` bounds it by the embeddings' length (a 16-dimensional LSA on 100 texts).
    return (["from sklearn.decomposition import PCA", "from sklearn.pipeline import make_pipeline",
             "from umap import UMAP"],
            f"umap_model = make_pipeline(PCA(n_components=min({p['pre_components']!r}, len(docs) - 1, dims), "
            f"random_state={p['random_state']!r}),\n"
            f"                           {_umap_line(p)})")


_UMAP_DEFAULTS = {"n_components": 2, "n_neighbors": UMAP_NEIGHBOURS, "metric": "cosine"}

REDUCTIONS_REGISTRY: dict[str, Reduction] = {r.name: r for r in (
    Reduction("none", "-", "none", "no reduction: the embeddings as the model gives them", build=_no_reducer,
              keeps_below=0, reduced_dim=lambda d: d, memory=lambda n, d: 0, cost=lambda n, d: 0.0,
              equivalent=None, snippet=_snippet_none, words="the embeddings"),
    Reduction("pca", "pca", "PCA", "PCA to 2 components", build=_pca, keeps_below=2, reduced_dim=lambda d: 2,
              memory=lambda n, d: 0, cost=lambda n, d: n * d * 1e-7,
              equivalent=Equivalent("sklearn.decomposition", "PCA"), snippet=_snippet_pca,
              defaults={"n_components": 2}, words="PCA of the embeddings"),
    Reduction("umap", "umap", "UMAP", "UMAP to 2 components, cosine, 15 neighbours", build=_umap, keeps_below=0,
              reduced_dim=lambda d: 2, memory=_umap_memory, cost=lambda n, d: n * 2e-3,
              equivalent=Equivalent("umap", "UMAP"), snippet=_snippet_umap, defaults=_UMAP_DEFAULTS,
              compiles_umap=True, words="UMAP of the embeddings"),
    Reduction("pca50+umap", "pca+umap", "PCA+UMAP", "PCA to 50 components, then UMAP to 2", build=_pca_umap,
              keeps_below=0, reduced_dim=lambda d: 2, memory=_umap_memory, cost=lambda n, d: n * 2e-3,
              equivalent=Equivalent("umap", "UMAP", note="after sklearn.decomposition.PCA(n_components=50)"),
              snippet=_snippet_pca_umap, defaults={**_UMAP_DEFAULTS, "pre_components": PCA_PRE_COMPONENTS},
              compiles_umap=True, needs_dims=True, words="PCA+UMAP of the embeddings"),
)}

ALGORITHMS = tuple(ALGORITHMS_REGISTRY)
# What the grid runs when no algorithm is named: the paper's.
DEFAULT_ALGORITHMS = tuple(a.name for a in ALGORITHMS_REGISTRY.values() if a.in_default_grid)
REDUCTIONS = tuple(REDUCTIONS_REGISTRY)
# The reference table's spellings of the reductions ("-", "pca+umap") -> ours.
REFERENCE_REDUCTIONS = {r.paper_name: r.name for r in REDUCTIONS_REGISTRY.values()}
# Density-based algorithms on unreduced embeddings: too slow and too poor in the paper's runs, so
# the paper left them out; the grid skips them unless they are asked for by name.
SKIPPED_BY_DEFAULT = tuple((a.name, r) for a in ALGORITHMS_REGISTRY.values() for r in a.skipped_with)
# The paper's Table 2 ranks models by k-means on the raw embeddings.
TABLE2_CONFIGURATION = ("minibatch_kmeans", "none")
NOISE_ALGORITHMS = tuple(a.name for a in ALGORITHMS_REGISTRY.values() if a.labels_noise)

# The noise floor of a configuration: how far a score (0..1) moves, on average over a dataset's
# splits, when every component of the vectors moves by up to 1e-7 (float32 rounding of the same
# model served elsewhere). bench/bench_reduction_noise_floor.py measures it (the largest of 3 nudges,
# MiniLM on 5 Blurbs S2S dev splits; docs/benchmarks.md): on the embeddings and through PCA nothing
# moves; through UMAP the layout does, and with it every score. A difference between two models
# no larger than this is what nudging one model's vectors gives: `compare` never calls it a win.
# A configuration not named here moved by 0.
NOISE_FLOORS = {
    ("agglomerative", "pca50+umap"): {"v_measure": 0.0071, "ami": 0.0086, "ari": 0.0061},
    ("agglomerative", "umap"): {"v_measure": 0.0079, "ami": 0.0100, "ari": 0.0055},
    ("dbstream", "pca50+umap"): {"v_measure": 0.0180, "ami": 0.0130, "ari": 0.0100},
    ("dbstream", "umap"): {"v_measure": 0.0265, "ami": 0.0170, "ari": 0.0142},
    ("hdbscan", "pca50+umap"): {"v_measure": 0.0711, "ami": 0.0124, "ari": 0.0160},
    ("hdbscan", "umap"): {"v_measure": 0.0527, "ami": 0.0171, "ari": 0.0214},
    ("minibatch_kmeans", "pca50+umap"): {"v_measure": 0.0123, "ami": 0.0139, "ari": 0.0032},
    ("minibatch_kmeans", "umap"): {"v_measure": 0.0076, "ami": 0.0102, "ari": 0.0054},
}


def noise_floor(algorithm: str, reduction: str, metric: str = "v_measure") -> float:
    """The noise floor (0..1) of ``metric`` for the configuration (:data:`NOISE_FLOORS`; 0 where
    nothing moved, or a score the bench does not measure)."""
    return NOISE_FLOORS.get((algorithm, reduction), {}).get(metric, 0.0)


def table2_rows(frame):
    """The rows of ``frame`` (results rows: ``algorithm`` and ``reduction`` columns) in Table 2's
    configuration: what MTEB's clustering, the paper's Table 2 and the leaderboard rank by."""
    algorithm, reduction = TABLE2_CONFIGURATION
    return frame[(frame.algorithm == algorithm) & (frame.reduction == reduction)]


def algorithm(name: str) -> Algorithm:
    """The entry of ``name``, or one clear error listing the known ones."""
    try:
        return ALGORITHMS_REGISTRY[name]
    except (KeyError, TypeError):
        raise UserError(f"unknown algorithm {name!r}; choose from {', '.join(ALGORITHMS)}") from None


def reduction(name: str) -> Reduction:
    try:
        return REDUCTIONS_REGISTRY[name]
    except (KeyError, TypeError):
        raise UserError(f"unknown reduction {name!r}; choose from {', '.join(REDUCTIONS)}") from None


def in_words(algorithm_name: str, reduction_name: str) -> str:
    """A configuration as a page says it: "Minibatch k-Means on the embeddings"."""
    return f"{algorithm(algorithm_name).words} on {reduction(reduction_name).words}"
