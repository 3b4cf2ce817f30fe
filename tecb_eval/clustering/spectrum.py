"""A number of clusters from the data: the eigengap of the normalised Laplacian of a cosine k-NN graph.

The graph joins each text to its :data:`NEIGHBOURS` nearest by cosine (scikit-learn's
``kneighbors_graph``), made symmetric (an edge where either is among the other's neighbours); its
normalised Laplacian (scipy's ``csgraph.laplacian(normed=True)``) has eigenvalues 0 <= l1 <= l2 ...;
a graph of k well-separated groups has k eigenvalues near 0 and then a jump. The estimate is the k
(from 2 to :data:`MAX_K`) after which the jump l(k+1) - l(k) is largest (von Luxburg 2007, section 8.3).
Above :data:`MAX_POINTS` texts the graph is built on a seeded uniform sample of that many, as the
silhouette is. The eigenvalues come from ARPACK (scipy's ``eigsh``) with a seeded start vector, on
one thread: the same bytes everywhere.
"""

from __future__ import annotations

import math

import numpy as np

from tecb_data import seeding

NEIGHBOURS = 15
MAX_K = 60
MAX_POINTS = 2000
# Fewer texts than this: no graph worth an eigengap (each text's neighbours are most of the corpus).
MIN_POINTS = 3 * NEIGHBOURS
# A component this small is solved densely (every eigenvalue, exactly).
DENSE_NODES = 200


def laplacian_spectrum(X: np.ndarray, count: int, seed: int, *names: str, neighbours: int = NEIGHBOURS) -> np.ndarray:
    """The ``count`` smallest eigenvalues (ascending) of the normalised Laplacian of the symmetric
    cosine ``neighbours``-NN graph of the rows of ``X``."""
    from scipy import linalg
    from scipy.sparse import csgraph, identity
    from scipy.sparse.linalg import eigsh
    from sklearn.neighbors import kneighbors_graph

    graph = kneighbors_graph(X, neighbours, mode="connectivity", metric="cosine", include_self=False)
    graph = graph.maximum(graph.T).astype(np.float64).tocsr()
    count = min(count, graph.shape[0])
    # The spectrum of a graph is the union of its connected components' spectra. Each component is
    # solved on its own: Lanczos finds one vector per eigenvalue, so the k zero eigenvalues of k
    # components at once would come out as fewer.
    parts, component = csgraph.connected_components(graph, directed=False)
    values = []
    for part in range(parts):
        nodes = np.flatnonzero(component == part)
        laplacian = csgraph.laplacian(graph[nodes][:, nodes], normed=True)
        n = len(nodes)
        if n <= DENSE_NODES:
            values.append(linalg.eigh(laplacian.toarray(), eigvals_only=True))
            continue
        # The largest eigenvalues of I - L (Lanczos finds the ends of the spectrum fast) are 1
        # minus the smallest of L.
        start = seeding.rng(seed, "spectrum", *names, str(part)).uniform(0.5, 1.5, size=n)
        found = eigsh(identity(n, format="csr") - laplacian, k=min(count, n - 1), which="LA", v0=start,
                      return_eigenvectors=False, tol=1e-10)
        values.append(1.0 - found)
    return np.sort(np.clip(np.concatenate(values), 0.0, 2.0))[:count]


def eigengap_k(values: np.ndarray, max_k: int = MAX_K) -> int:
    """The k from 2 to ``max_k`` whose gap to the next eigenvalue is largest (``values`` ascending)."""
    gaps = np.diff(values[:max_k + 1])  # gaps[i] = l(i+2) - l(i+1): the gap after k = i + 1
    return int(np.argmax(gaps[1:]) + 2)


def spectral_k(data: np.ndarray, predicted: np.ndarray | None, seed: int, *names: str) -> int | None:
    """The eigengap's number of clusters of ``data`` (the vectors one split clustered), None where
    there are too few texts (or non-zero vectors) for the graph. ``seed`` and ``names`` seed the sample."""
    X = np.asarray(data, dtype=np.float64)
    X = X[np.linalg.norm(X, axis=1) > 0]  # cosine is undefined for a zero vector (an empty TF-IDF row)
    if len(X) < MIN_POINTS:
        return None
    if len(X) > MAX_POINTS:
        rows = np.sort(seeding.rng(seed, "spectrum-sample", *names).choice(len(X), MAX_POINTS, replace=False))
        X = X[rows]
    values = laplacian_spectrum(X, MAX_K + 2, seed, *names)
    return eigengap_k(values, min(MAX_K, len(values) - 1))


def fit_to(n_clusters: int, k: int | None) -> float | None:
    """How close a clustering's number of clusters is to the spectrum's: -|log(found / k)| (0 at equal,
    -log 2 at half or double), None where either is missing."""
    if k is None or n_clusters < 1:
        return None
    return -abs(math.log(n_clusters / k))
