"""The estimators the registry builds that scikit-learn and its neighbours do not ship as they are.

Everything has scikit-learn's face: parameters in ``__init__``, work in ``fit`` /
``fit_predict`` / ``fit_transform``, results in ``labels_``. River's streaming DBSTREAM gets a
small adapter with that face (and river 0.14.0's, which the paper ran); Ward on the vectors for
what does not fit a distance matrix; UMAP that copes with tiny splits and starts from a seeded
spectral layout; PCA then UMAP, the paper's ``pca+umap``.
"""

from __future__ import annotations

import functools
import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.utils.validation import check_is_fitted

from tecb_data.errors import UserError
from tecb_eval.clustering.profiles import DBSTREAM_CLEANUPS
from tecb_eval.clustering.settings import PCA_PRE_COMPONENTS, UMAP_NEIGHBOURS

try:  # public since scikit-learn 1.6; the estimator's own method before
    from sklearn.utils.validation import validate_data as _validate_data
except ImportError:  # pragma: no cover - scikit-learn < 1.6
    def _validate_data(estimator, X, **kwargs):
        return estimator._validate_data(X, **kwargs)


@functools.cache
def _river_014_dbstream():
    """river 0.14.0's DBSTREAM, as a subclass of today's river that redoes what 0.14 did differently.

    The paper's authors ran river 0.14.0 (their ``requirements.txt``). Its DBSTREAM differs from
    today's in more than the clean-up. Checked against real river 0.14.0
    (``tools/river014_reference.py``); the rows of the fixture's 300 blobs whose label changes
    when only that part is today's are in brackets:

    - re-clustering merged each macro-cluster into its first micro-cluster itself, not a copy, and
      ``predict_one`` re-clustered every time, so each prediction moved that micro-cluster and added
      its partners' weight to it again, until every micro-cluster is a cluster of its own (on the
      blobs: 11 clusters at the first prediction, all 25 from the fifth on). online-ml/river#1265,
      the paper's footnote; a copy since 0.19, re-clustering once since 0.20 [223];
    - the clean-up grew weights by their age instead of fading them (``2 ** (+fading * age)``), so
      it never removed a micro-cluster (online-ml/river#1324, fixed in 0.20) [247];
    - labelling followed shared-density edges one hop only (PR 1339, fixed in 0.20) [29];
    - a pair's shared density started at 0, stamped at time 0, not at 1 as now (0.20, 0.22) [21];
    - edges between micro-clusters of weight exactly ``minimum_weight`` were kept (``>=``, now
      ``>``), and distances were Python's ``sqrt`` of a sum of squares (today's kernel differs in
      the last bit now and then): neither changed a label in our checks; kept so ties go as in 0.14.

    Built lazily so that importing this module does not import river; reachable as
    ``tecb_eval.clustering.algorithms.River014DBSTREAM`` (module ``__getattr__``), so a fitted model pickles.
    """
    import math

    from river.cluster import DBSTREAM
    from river.cluster.dbstream import DBSTREAMMicroCluster

    class River014DBSTREAM(DBSTREAM):
        @staticmethod
        def _distance(point_a, point_b):
            # Same summation order as 0.14 (over the set of both key sets), so ties break alike.
            return math.sqrt(sum((point_a.get(k, 0.0) - point_b.get(k, 0.0)) ** 2
                                 for k in {*point_a.keys(), *point_b.keys()}))

        def _update(self, x):
            t = self._time_stamp
            fading = self.fading_factor
            neighbours = list(self._find_fixed_radius_nn(x))
            if not neighbours:
                # 0.14 numbered a new micro-cluster by the count of live ones; its clean-up never
                # removes one (below), so that count is also the next unused number.
                self._micro_clusters[len(self._micro_clusters)] = DBSTREAMMicroCluster(x=x, last_update=t, weight=1)
            else:
                before = {}
                for i in neighbours:
                    mc = self._micro_clusters[i]
                    before[i] = mc.center
                    mc.weight = mc.weight * 2 ** (-fading * (t - mc.last_update)) + 1
                    pull = self._gaussian_neighborhood(x, mc.center)
                    mc.center = {k: c + pull * (x[k] - c) for k, c in mc.center.items() if k in x}
                    mc.last_update = t
                    for j in neighbours:
                        if j <= i:
                            continue
                        density, stamps = self.s.setdefault(i, {}), self.s_t.setdefault(i, {})
                        if j in density:
                            density[j] = density[j] * 2 ** (-fading * (t - stamps[j])) + 1
                            stamps[j] = t
                        else:
                            # The pair's first shared point is not counted, and its age runs from 0.
                            density[j], stamps[j] = 0, 0
                # Keep micro-clusters from collapsing onto each other: undo both moves.
                for a, i in enumerate(neighbours):
                    for j in neighbours[a + 1:]:
                        mc_i, mc_j = self._micro_clusters[i], self._micro_clusters[j]
                        if self._distance(mc_i.center, mc_j.center) < self.clustering_threshold:
                            mc_i.center, mc_j.center = before[i], before[j]
            self._time_stamp = t + 1

        def _cleanup(self):
            # 0.14's sign: the weight is grown by its age, not faded, so (weights being >= 1 and the
            # threshold < 1) nothing is ever removed. Kept as 0.14 computed it rather than skipped.
            t = self._time_stamp
            weak = 2 ** (-self.fading_factor * self.cleanup_interval)
            for i, mc in list(self._micro_clusters.items()):
                try:
                    grown = 2 ** (self.fading_factor * (t - mc.last_update))
                except OverflowError:
                    continue
                if mc.weight * grown < weak:
                    del self._micro_clusters[i]
            for i, density in self.s.items():
                for j in density:
                    try:
                        grown = 2 ** (self.fading_factor * (t - self.s_t[i][j]))
                    except OverflowError:
                        continue
                    if density[j] * grown < self.intersection_factor * weak:
                        density[j], self.s_t[i][j] = 0, 0

        def _generate_weighted_adjacency_matrix(self):
            graph = {}
            for i, density in self.s.items():
                for j, shared in density.items():
                    w_i, w_j = self._micro_clusters[i].weight, self._micro_clusters[j].weight
                    if w_i >= self.minimum_weight and w_j >= self.minimum_weight:
                        value = shared / ((w_i + w_j) / 2)
                        if value > self.intersection_factor:
                            graph.setdefault(i, {})[j] = value
            return graph

        def _generate_labels(self, weighted_adjacency_list):
            # 0.14 queued a neighbour's neighbours only when they already had a label, so they were
            # dropped at once: a label reaches the direct (higher-numbered) neighbours and no further.
            labels = dict.fromkeys(self._micro_clusters)
            label = -1
            for index in labels:
                if labels[index] is not None:
                    continue
                label += 1
                labels[index] = label
                for j in weighted_adjacency_list.get(index, ()):
                    if labels[j] is None:
                        labels[j] = label
            return labels

        def _generate_clusters_from_labels(self, cluster_labels):
            # Labels are 0, 1, ... in order of first appearance, so this visits them as 0.14 did,
            # and each label's members in 0.14's merge order.
            members = {}
            for i, label in cluster_labels.items():
                members.setdefault(label, []).append(self._micro_clusters[i])
            clusters = {}
            for label, (macro, *others) in members.items():
                # online-ml/river#1265: the macro-cluster is the first micro-cluster itself, merged in place.
                for other in others:
                    macro.merge(other)
                clusters[label] = macro
            return len(clusters), clusters

        def predict_one(self, x, w=None):
            # 0.14 re-clustered on every call, each time merging into (moving) the micro-clusters.
            self.clustering_is_up_to_date = False
            return super().predict_one(x, w)

    River014DBSTREAM.__module__, River014DBSTREAM.__qualname__ = __name__, "River014DBSTREAM"
    return River014DBSTREAM


def __getattr__(name):
    if name == "River014DBSTREAM":
        return _river_014_dbstream()
    if name == "SeededSpectralUMAP":
        return _seeded_spectral_umap()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class DBSTREAMClusterer(ClusterMixin, BaseEstimator):
    """river's DBSTREAM with its defaults, scikit-learn style.

    ``fit`` streams the rows in order through ``learn_one``; ``labels_`` are then river's own
    ``predict_one`` for every row against the final clustering, as the paper's scripts did.
    ``cleanup`` picks the DBSTREAM: ``"river"`` is today's river as it is; ``"river-0.14"`` is
    river 0.14.0's, which the paper ran (its clean-up and re-clustering bugs included; see
    :func:`_river_014_dbstream`). It is a parameter, so results rows name it.
    """

    def __init__(self, clustering_threshold=1.0, fading_factor=0.01, cleanup_interval=2,
                 intersection_factor=0.3, minimum_weight=1.0, cleanup="river"):
        self.clustering_threshold = clustering_threshold
        self.fading_factor = fading_factor
        self.cleanup_interval = cleanup_interval
        self.intersection_factor = intersection_factor
        self.minimum_weight = minimum_weight
        self.cleanup = cleanup

    @staticmethod
    def _rows(X):
        # river consumes dicts of feature -> value; position indices are the feature names.
        for row in X:
            yield dict(enumerate(row.tolist()))

    def _checked(self, X, reset: bool):
        # scikit-learn's own input checks (tests/test_estimators.py runs its check_estimator): dense,
        # 2-D, finite, non-empty, float64 (what river gets as Python floats), and n_features_in_.
        return _validate_data(self, X, reset=reset, dtype=np.float64)

    def _make_model(self):
        params = self.get_params()
        cleanup = params.pop("cleanup")
        if cleanup == "river":
            from river.cluster import DBSTREAM

            return DBSTREAM(**params)
        if cleanup == "river-0.14":
            return _river_014_dbstream()(**params)
        raise UserError(f"unknown DBSTREAM cleanup {cleanup!r}; choose from {', '.join(DBSTREAM_CLEANUPS)}")

    def fit(self, X, y=None):
        X = self._checked(X, reset=True)
        self.model_ = self._make_model()
        rows = list(self._rows(X))
        for row in rows:
            self.model_.learn_one(row)
        self.labels_ = np.array([self.model_.predict_one(row) for row in rows], dtype=int)
        return self

    def predict(self, X):
        check_is_fitted(self, "model_")
        X = self._checked(X, reset=False)
        return np.array([self.model_.predict_one(row) for row in self._rows(X)], dtype=int)


class WardVectors(ClusterMixin, BaseEstimator):
    """Exact Ward on the vectors: fastcluster's nearest-neighbour chain in O(n d) memory instead of
    scikit-learn's n x n distance matrix (about 11 n^2 bytes at peak, 440 GB at 200k texts).

    The merges are read as scikit-learn reads SciPy's (the linkage's first two columns) and cut into
    ``n_clusters`` by scikit-learn's own cut, so where the two chains merge alike the labels are the
    same numbers, not just the same partition: they did on minilm-l6's vectors of the dev set under
    every reduction (``tests/test_ward_vector.py``). Where distances tie exactly (duplicate rows,
    points on a lattice) the merge heights, computed from centroids here and by the Lance-Williams
    update there, differ in the last bits, the chains pick different tied pairs and the trees part.
    The memory planner therefore runs this only where the matrix does not fit (``grid.work.ward_path``),
    and profile ``paper`` never.
    """

    def __init__(self, n_clusters=2):
        self.n_clusters = n_clusters

    def fit(self, X, y=None):
        import fastcluster
        from sklearn.cluster._agglomerative import _hc_cut

        # AgglomerativeClustering's own checks (at least 2 rows); float64, as SciPy's pdist on its path.
        X = _validate_data(self, X, ensure_min_samples=2, dtype=np.float64, order="C")
        n = X.shape[0]
        if not 1 <= self.n_clusters <= n:
            raise ValueError(f"n_clusters should be between 1 and {n}, got {self.n_clusters}")
        linkage = fastcluster.linkage_vector(X, method="ward")
        self.children_ = linkage[:, :2].astype(np.intp)
        self.labels_ = _hc_cut(self.n_clusters, self.children_, n)
        return self


class KnnWard(ClusterMixin, BaseEstimator):
    """Ward linkage constrained to a k-nearest-neighbour graph: scikit-learn's
    ``AgglomerativeClustering(linkage="ward", connectivity=kneighbors_graph(X, n_neighbors))``.

    Not exact Ward: two clusters merge only where an edge of the graph joins them, so the tree is
    another one, built in O(n x n_neighbors) memory and far less time than exact Ward's
    nearest-neighbour chain over all pairs (hours at 100,000 texts, ``WardVectors``). Where the
    graph falls apart, scikit-learn joins its components (with a warning, which our logger
    keeps quiet) before it merges. How far its partitions follow exact Ward's is measured on
    labelled data by ``bench/bench_knn_ward.py`` (docs/scale.md).
    """

    def __init__(self, n_clusters=2, n_neighbors=UMAP_NEIGHBOURS):
        self.n_clusters = n_clusters
        self.n_neighbors = n_neighbors

    def fit(self, X, y=None):
        from sklearn.cluster import AgglomerativeClustering
        from sklearn.neighbors import kneighbors_graph

        X = _validate_data(self, X, ensure_min_samples=2, dtype=np.float64, order="C")
        n = X.shape[0]
        graph = kneighbors_graph(X, n_neighbors=min(self.n_neighbors, n - 1), include_self=False)
        with warnings.catch_warnings():
            # "the number of connected components of the connectivity matrix is N > 1. Completing it":
            # what scikit-learn does about it is the documented behaviour of this estimator.
            warnings.simplefilter("ignore", UserWarning)
            ward = AgglomerativeClustering(n_clusters=self.n_clusters, linkage="ward", connectivity=graph).fit(X)
        self.children_ = ward.children_
        self.labels_ = ward.labels_
        return self


class PcaUmap(BaseEstimator):
    """PCA to 50 components, then UMAP: the paper's ``pca+umap`` (cheaper neighbours search)."""

    def __init__(self, n_components=2, pre_components=PCA_PRE_COMPONENTS, random_state=None):
        self.n_components = n_components
        self.pre_components = pre_components
        self.random_state = random_state

    def fit(self, X, y=None):
        """Reduce ``X``: ``embedding_`` (scikit-learn's face; there is no ``transform`` of new rows)."""
        from sklearn.decomposition import PCA

        X = _validate_data(self, X, reset=True, dtype=[np.float64, np.float32])
        pre = min(self.pre_components, X.shape[0], X.shape[1])
        reduced = PCA(n_components=pre, random_state=self.random_state).fit_transform(X)
        self.embedding_ = Umap(n_components=self.n_components, random_state=self.random_state).fit_transform(reduced)
        return self

    def fit_transform(self, X, y=None):
        return self.fit(X).embedding_


def _small_umap_fit() -> None:
    points = np.random.default_rng(0).normal(size=(64, 8)).astype(np.float32)
    Umap(n_components=5, random_state=0).fit(points)


def compile_umap() -> None:
    """UMAP's numba code ready in this process: from disk, or compiled by one process on this
    machine while the others wait (:func:`tecb_eval.clustering.numba_cache.compile_umap_once`)."""
    from tecb_eval.clustering.numba_cache import compile_umap_once

    compile_umap_once(_small_umap_fit)


class Umap(BaseEstimator):
    """UMAP (2 components, cosine) that copes with the demo's tiny splits: fewer neighbours than
    rows, and a random start where the spectral one has too few points to work."""

    def __init__(self, n_components=2, metric="cosine", n_neighbors=UMAP_NEIGHBOURS, random_state=None):
        self.n_components = n_components
        self.metric = metric
        self.n_neighbors = n_neighbors
        self.random_state = random_state

    def fit_transform(self, X, y=None):
        return self.fit(X).embedding_

    def fit(self, X, y=None):
        """Reduce ``X``: ``embedding_`` (scikit-learn's face; there is no ``transform`` of new rows)."""
        compile_umap()  # before UMAP's first call in this process: its code from disk, same bits
        import umap

        from tecb_eval.clustering import umap_neighbours

        X = _validate_data(self, X, reset=True, dtype=[np.float64, np.float32])
        n = X.shape[0]
        params = dict(n_components=self.n_components, metric=self.metric, random_state=self.random_state)
        if n <= self.n_neighbors or n <= self.n_components + 1:
            params.update(n_neighbors=max(2, n - 1), init="random")
        else:
            params.update(n_neighbors=self.n_neighbors)
        if umap_neighbours.takes(X, self.metric):
            # UMAP's own exact neighbours, found in a compiled loop instead of one Python call per pair.
            params.update(precomputed_knn=umap_neighbours.exact_neighbours(X, self.metric, params["n_neighbors"]))
        reducer = umap.UMAP if self.random_state is None else _seeded_spectral_umap()
        with warnings.catch_warnings():
            # "n_jobs overridden by random_state": determinism is what we want here.
            warnings.filterwarnings("ignore", message=".*n_jobs.*", category=UserWarning)
            # Neighbours handed over without a search index: nothing here transforms new rows.
            warnings.filterwarnings("ignore", message=r"precomputed_knn\[2\]", category=UserWarning)
            self.embedding_ = reducer(**params).fit_transform(X)
        return self


# Where eigsh takes ``rng``, scipy asks that generator for ARPACK's restart vectors. Older releases
# draw them from the Fortran ARPACK's own process-wide seed, which no argument reaches: there a unit
# that needs a restart still depends on what ran before it in the same process.
@functools.cache
def _eigsh_takes_rng() -> bool:
    import inspect

    from scipy.sparse.linalg import eigsh

    return "rng" in inspect.signature(eigsh).parameters


def _connected_spectral_layout(graph, dim, random_state, rng):
    """umap-learn 0.5's ``_spectral_layout`` for one connected graph (``init="random"``, its default
    solver), with ``rng`` handed to ARPACK: the same bits wherever ARPACK needs no restart vector.

    UMAP starts ARPACK from ``v0 = ones``. On a small component of near-duplicate points (a clique of
    equal weights) that vector spans an invariant subspace at once, and ARPACK asks for a fresh
    random start; UMAP passes no generator, so scipy draws it from the operating system's entropy.
    Every other draw here comes from ``random_state`` in UMAP's order, so what UMAP's seed decides
    stays as it was.
    """
    import scipy.sparse
    import scipy.sparse.linalg

    n = graph.shape[0]
    sqrt_deg = np.sqrt(np.asarray(graph.sum(axis=0)).squeeze())
    identity = scipy.sparse.identity(n, dtype=np.float64)
    scale = scipy.sparse.spdiags(1.0 / sqrt_deg, 0, n, n)
    laplacian = identity - scale * graph * scale
    if not scipy.sparse.issparse(laplacian):
        laplacian = np.asarray(laplacian)
    k = dim + 1
    lanczos_vectors = max(2 * k + 1, int(np.sqrt(n)))
    try:
        # Drawn and unused by the eigsh solver, as in UMAP: keeps random_state where UMAP leaves it.
        start = random_state.normal(size=(n, k))
        if n < 2000000:
            extra = {"rng": rng} if _eigsh_takes_rng() else {}
            eigenvalues, eigenvectors = scipy.sparse.linalg.eigsh(
                laplacian, k, which="SM", ncv=lanczos_vectors, tol=1e-4, v0=np.ones(n), maxiter=n * 5, **extra)
        else:
            with warnings.catch_warnings():
                warnings.filterwarnings(category=UserWarning, message=r"(?ms).*not reaching the requested tolerance",
                                        action="error")
                eigenvalues, eigenvectors = scipy.sparse.linalg.lobpcg(
                    laplacian, np.asarray(start), largest=False, tol=1e-4, maxiter=5 * n)
        order = np.argsort(eigenvalues)[1:k]
        return eigenvectors[:, order]
    except (scipy.sparse.linalg.ArpackError, UserWarning):
        warnings.warn("Spectral initialisation failed! The eigenvector solver\n"
                      "failed. This is likely due to too small an eigengap. Consider\n"
                      "adding some noise or jitter to your data.\n\n"
                      "Falling back to random initialisation!")
        return random_state.uniform(low=-10.0, high=10.0, size=(n, dim))


def _spectral_layout(data, graph, dim, random_state, metric, metric_kwds, seed: int):
    """umap-learn 0.5's ``spectral_layout`` (its multi-component layout included) with each
    component's ARPACK restarts drawn from a generator of its own, derived from ``seed``."""
    import scipy.sparse.csgraph
    from sklearn.metrics import pairwise_distances
    from umap.spectral import component_layout

    n_components, labels = scipy.sparse.csgraph.connected_components(graph)
    if n_components == 1:
        return _connected_spectral_layout(graph, dim, random_state, np.random.default_rng([seed, 0]))
    result = np.empty((graph.shape[0], dim), dtype=np.float32)
    if n_components > 2 * dim:
        # The centroids' layout, UMAP's own: scikit-learn starts ARPACK from a vector drawn from
        # random_state. Its restarts take no generator either, but in shift-invert mode from a
        # random start none changed a result in our checks (2 to 30 distinct centroids, each repeated).
        meta = component_layout(data, n_components, labels, dim, random_state, metric=metric,
                                metric_kwds=metric_kwds)
    else:
        k = int(np.ceil(n_components / 2.0))
        base = np.hstack([np.eye(k), np.zeros((k, dim - k))])
        meta = np.vstack([base, -base])[:n_components]
    for label in range(n_components):
        members = labels == label
        component = graph.tocsr()[members, :].tocsc()
        component = component[:, members].tocoo()
        distances = pairwise_distances([meta[label]], meta)
        data_range = distances[distances > 0.0].min() / 2.0
        size = component.shape[0]
        if size < 2 * dim or size <= dim + 1:
            result[members] = random_state.uniform(low=-data_range, high=data_range, size=(size, dim)) + meta[label]
        else:
            layout = _connected_spectral_layout(component, dim, random_state,
                                                np.random.default_rng([seed, label + 1]))
            layout *= data_range / np.max(np.abs(layout))
            result[members] = layout + meta[label]
    return result


def _pruned_graph(graph, n_epochs, densmap: bool):
    """The graph ``simplicial_set_embedding`` lays out: edges too weak to be sampled in
    ``n_epochs`` dropped, as UMAP drops them before its spectral start."""
    graph = graph.tocoo(copy=True)
    graph.sum_duplicates()
    default_epochs = (500 if graph.shape[0] <= 10000 else 200) + (200 if densmap else 0)
    if n_epochs is None:
        n_epochs = default_epochs
    most = max(n_epochs) if isinstance(n_epochs, list) else n_epochs
    graph.data[graph.data < graph.data.max() / float(most if most > 10 else default_epochs)] = 0.0
    graph.eliminate_zeros()
    return graph


@functools.cache
def _seeded_spectral_umap():
    """``umap.UMAP`` whose spectral start depends on its seed alone.

    It overrides ``_fit_embed_data``, the hook UMAP keeps for subclasses: the spectral start is
    computed by :func:`_spectral_layout` and scaled with noise as UMAP scales it, drawing from the
    same ``random_state`` in the same order, then handed to UMAP as an initial array. UMAP adds
    nothing to an array start without duplicate rows (the noise makes them distinct), so on inputs
    where ARPACK needs no restart the embedding is UMAP's own, bit for bit. Built lazily (importing
    umap compiles numba code), reachable as ``SeededSpectralUMAP`` on this module for pickling.
    """
    import umap
    from umap.umap_ import noisy_scale_coords

    class SeededSpectralUMAP(umap.UMAP):
        def _fit_embed_data(self, X, n_epochs, init, random_state, **kwargs):
            if isinstance(init, str) and init == "spectral" and isinstance(self.random_state, numbers.Integral):
                graph = _pruned_graph(self.graph_, n_epochs, bool(self.densmap))
                layout = _spectral_layout(X, graph, self.n_components, random_state, self._input_distance_func,
                                          self._metric_kwds, int(self.random_state))
                init = noisy_scale_coords(layout, random_state, max_coord=10, noise=0.0001)
            return super()._fit_embed_data(X, n_epochs, init, random_state, **kwargs)

    SeededSpectralUMAP.__module__, SeededSpectralUMAP.__qualname__ = __name__, "SeededSpectralUMAP"
    return SeededSpectralUMAP
