"""UMAP's exact nearest neighbours of a small input, from one compiled loop.

On fewer than 4,096 rows umap-learn computes every distance with scikit-learn's
``pairwise_distances`` and its own numba metric. scikit-learn calls a callable metric once per pair
from Python, and that loop is most of a UMAP fit on a few thousand texts (docs/benchmarks.md,
"UMAP's exact neighbours"). Here the same numba metric runs over the same pairs in one compiled
loop. It fills the same matrix: float32 as umap-learn's input, the diagonal included, and distances
from the metric's disconnection distance on set to infinity. umap-learn's own ``nearest_neighbors``
then picks the neighbours from that matrix. UMAP receives them through its public
``precomputed_knn`` parameter and builds the same graph from them, so the embedding keeps its bits
(tests/test_umap_neighbours.py checks the matrix against scikit-learn's loop and the embedding
against umap-learn's own path).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from umap.distances import cosine, euclidean

# umap-learn's bound for the exact path (``UMAP.fit``): from it on, it searches with NN-descent.
EXACT_BELOW = 4096


# One loop per metric, each calling umap-learn's own numba function by name: module-level compiled
# functions that numba keeps on disk with UMAP's (tecb_eval.clustering.numba_cache).
@njit
def _cosine_matrix(X, out):
    n = X.shape[0]
    for i in range(n):
        for j in range(i + 1, n):
            d = cosine(X[i], X[j])
            out[i, j] = d
            out[j, i] = d
        out[i, i] = cosine(X[i], X[i])


@njit
def _euclidean_matrix(X, out):
    n = X.shape[0]
    for i in range(n):
        for j in range(i + 1, n):
            d = euclidean(X[i], X[j])
            out[i, j] = d
            out[j, i] = d
        out[i, i] = euclidean(X[i], X[i])


_MATRICES = {"cosine": _cosine_matrix, "euclidean": _euclidean_matrix}


def takes(X, metric, metric_kwds=None) -> bool:
    """Whether UMAP would compute every distance of ``X`` and this module has the loop for its metric."""
    from scipy.sparse import issparse

    return (isinstance(metric, str) and metric in _MATRICES and not metric_kwds and not issparse(X)
            and np.ndim(X) == 2 and X.shape[0] < EXACT_BELOW)


def distance_matrix(X, metric: str) -> np.ndarray:
    """Every distance between the rows of ``X`` as umap-learn computes them on a small input."""
    from sklearn.utils import check_array

    X = check_array(X, dtype=np.float32, order="C")  # what UMAP.fit hands on
    out = np.zeros((X.shape[0], X.shape[0]), dtype=np.float32)
    _MATRICES[metric](X, out)
    return out


def exact_neighbours(X, metric: str, n_neighbors: int) -> tuple[np.ndarray, np.ndarray]:
    """``(knn_indices, knn_dists)`` for UMAP's ``precomputed_knn``: the neighbours umap-learn's own
    exact path finds, a missing one (beyond the disconnection distance) as index -1."""
    from umap.umap_ import DISCONNECTION_DISTANCES, nearest_neighbors

    dmat = distance_matrix(X, metric)
    dmat[dmat >= DISCONNECTION_DISTANCES.get(metric, np.inf)] = np.inf
    indices, dists, _ = nearest_neighbors(dmat, n_neighbors, "precomputed", {}, False, None)
    return indices, dists
