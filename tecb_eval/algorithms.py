"""Clustering algorithms and dimensionality reductions with the paper's defaults.

Everything has scikit-learn's face: parameters in ``__init__``, work in ``fit`` /
``fit_predict`` / ``fit_transform``, results in ``labels_``. River's streaming DBSTREAM gets a
small adapter with that face. The names are the grid's vocabulary; the reference table's
spellings (``-``, ``pca+umap``) map onto them in :data:`REFERENCE_REDUCTIONS`.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.cluster import AgglomerativeClustering, MiniBatchKMeans

from tecb_data.errors import UserError

# MTEB v1's settings, which the paper used for k-means; MTEB v2 (the fast protocol) uses its own.
KMEANS_BATCH_SIZE = 500
FAST_KMEANS_BATCH_SIZE = 512
PCA_PRE_COMPONENTS = 50

ALGORITHMS = ("minibatch_kmeans", "agglomerative", "hdbscan", "dbstream")
REDUCTIONS = ("none", "pca", "umap", "pca50+umap")
# Density-based algorithms on unreduced embeddings: too slow and too poor in the paper's runs, so
# the paper left them out; the grid skips them unless they are asked for by name.
SKIPPED_BY_DEFAULT = (("hdbscan", "none"), ("dbstream", "none"))
REFERENCE_REDUCTIONS = {"-": "none", "pca": "pca", "umap": "umap", "pca+umap": "pca50+umap"}


class DBSTREAMClusterer(ClusterMixin, BaseEstimator):
    """river's DBSTREAM with its defaults, scikit-learn style.

    ``fit`` streams the rows in order through ``learn_one``; ``labels_`` are then river's own
    ``predict_one`` for every row against the final clustering, as the paper's scripts did.
    """

    def __init__(self, clustering_threshold=1.0, fading_factor=0.01, cleanup_interval=2,
                 intersection_factor=0.3, minimum_weight=1.0):
        self.clustering_threshold = clustering_threshold
        self.fading_factor = fading_factor
        self.cleanup_interval = cleanup_interval
        self.intersection_factor = intersection_factor
        self.minimum_weight = minimum_weight

    @staticmethod
    def _rows(X):
        # river consumes dicts of feature -> value; position indices are the feature names.
        for row in np.asarray(X, dtype=float):
            yield dict(enumerate(row.tolist()))

    def fit(self, X, y=None):
        from river.cluster import DBSTREAM

        self.model_ = DBSTREAM(**self.get_params())
        rows = list(self._rows(X))
        for row in rows:
            self.model_.learn_one(row)
        self.labels_ = np.array([self.model_.predict_one(row) for row in rows], dtype=int)
        return self

    def predict(self, X):
        return np.array([self.model_.predict_one(row) for row in self._rows(X)], dtype=int)


class PcaUmap(BaseEstimator):
    """PCA to 50 components, then UMAP: the paper's ``pca+umap`` (cheaper neighbours search)."""

    def __init__(self, n_components=2, pre_components=PCA_PRE_COMPONENTS, random_state=None):
        self.n_components = n_components
        self.pre_components = pre_components
        self.random_state = random_state

    def fit_transform(self, X, y=None):
        from sklearn.decomposition import PCA

        pre = min(self.pre_components, X.shape[0], X.shape[1])
        reduced = PCA(n_components=pre, random_state=self.random_state).fit_transform(X)
        return make_reduction("umap", self.random_state, n_components=self.n_components).fit_transform(reduced)


class _Umap(BaseEstimator):
    """UMAP (2 components, cosine) that copes with the demo's tiny splits: fewer neighbours than
    rows, and a random start where the spectral one has too few points to work."""

    def __init__(self, n_components=2, metric="cosine", n_neighbors=15, random_state=None):
        self.n_components = n_components
        self.metric = metric
        self.n_neighbors = n_neighbors
        self.random_state = random_state

    def fit_transform(self, X, y=None):
        import umap

        n = X.shape[0]
        params = dict(n_components=self.n_components, metric=self.metric, random_state=self.random_state)
        if n <= self.n_neighbors or n <= self.n_components + 1:
            params.update(n_neighbors=max(2, n - 1), init="random")
        else:
            params.update(n_neighbors=self.n_neighbors)
        with warnings.catch_warnings():
            # "n_jobs overridden by random_state": determinism is what we want here.
            warnings.filterwarnings("ignore", message=".*n_jobs.*", category=UserWarning)
            return umap.UMAP(**params).fit_transform(X)


def make_reduction(name: str, seed: int, n_components: int = 2):
    """The reducer for ``name`` (None for ``none``), seeded."""
    from sklearn.decomposition import PCA

    if name == "none":
        return None
    if name == "pca":
        return PCA(n_components=n_components, random_state=seed)
    if name == "umap":
        return _Umap(n_components=n_components, random_state=seed)
    if name == "pca50+umap":
        return PcaUmap(n_components=n_components, random_state=seed)
    raise UserError(f"unknown reduction {name!r}; choose from {', '.join(REDUCTIONS)}")


def reduce(name: str, X: np.ndarray, seed: int) -> np.ndarray:
    reducer = make_reduction(name, seed)
    if reducer is None:
        return X
    # Fewer rows than PCA components cannot be reduced to 2-D; keep them (V-measure is still defined).
    if name == "pca" and min(X.shape) < 2:
        return X
    return np.asarray(reducer.fit_transform(X))


def make_algorithm(name: str, n_clusters: int, seed: int, protocol: str = "legacy"):
    """The clusterer for ``name``: k = ``n_clusters`` for the algorithms that take a k."""
    if name == "minibatch_kmeans" and protocol == "fast":
        return MiniBatchKMeans(n_clusters=n_clusters, batch_size=FAST_KMEANS_BATCH_SIZE, init="k-means++",
                               n_init=1, random_state=seed)
    if name == "minibatch_kmeans":
        return MiniBatchKMeans(n_clusters=n_clusters, batch_size=KMEANS_BATCH_SIZE, n_init="auto", random_state=seed)
    if name == "agglomerative":
        return AgglomerativeClustering(n_clusters=n_clusters, linkage="ward")
    if name == "hdbscan":
        import hdbscan

        return hdbscan.HDBSCAN()
    if name == "dbstream":
        return DBSTREAMClusterer()
    raise UserError(f"unknown algorithm {name!r}; choose from {', '.join(ALGORITHMS)}")


def cluster(estimator, X: np.ndarray) -> np.ndarray:
    """Predicted labels; -1 marks noise (HDBSCAN)."""
    if X.shape[0] < 2 and not hasattr(estimator, "n_clusters"):
        return np.full(X.shape[0], -1)
    return np.asarray(estimator.fit_predict(X))


def parse_configuration(text: str) -> tuple[str, str]:
    """``algorithm:reduction`` (or the reference table's spellings) -> a checked pair."""
    algorithm, sep, reduction = text.partition(":")
    reduction = REFERENCE_REDUCTIONS.get(reduction, reduction)
    if not sep or algorithm not in ALGORITHMS or reduction not in REDUCTIONS:
        raise UserError(
            f"{text!r}: a configuration is ALGORITHM:REDUCTION with ALGORITHM one of {', '.join(ALGORITHMS)} "
            f"and REDUCTION one of {', '.join(REDUCTIONS)}"
        )
    return algorithm, reduction


def configurations(algorithms=ALGORITHMS, reductions=REDUCTIONS, explicit=None):
    """The (algorithm, reduction) pairs to run and the ones skipped as in the paper.

    ``explicit`` pairs run exactly as listed (a skipped default can be asked for this way).
    The default product is in the reference table's order: algorithms, then reductions.
    """
    if explicit is not None:
        pairs = [parse_configuration(p) if isinstance(p, str) else parse_configuration(":".join(p)) for p in explicit]
        return list(dict.fromkeys(pairs)), []
    for name in algorithms:
        if name not in ALGORITHMS:
            raise UserError(f"unknown algorithm {name!r}; choose from {', '.join(ALGORITHMS)}")
    for name in reductions:
        if name not in REDUCTIONS:
            raise UserError(f"unknown reduction {name!r}; choose from {', '.join(REDUCTIONS)}")
    pairs = [(a, r) for a in ALGORITHMS if a in algorithms for r in REDUCTIONS if r in reductions]
    skipped = [p for p in pairs if p in SKIPPED_BY_DEFAULT]
    return [p for p in pairs if p not in SKIPPED_BY_DEFAULT], skipped


PAPER_CONFIGURATIONS = configurations()[0]
