"""Scores of a clustering that need no labels: what a corpus without labels can be judged by, and
what the calibration (:mod:`tecb_eval.reports.calibration`) checks against V-measure on labelled data.

Each is scikit-learn's, on the vectors the algorithm clustered (the reduction's output), over the
texts it assigned to a cluster (noise, label -1, belongs to none):

- ``silhouette``: the mean silhouette with cosine distance (-1..1, higher is better): scikit-learn's
  ``silhouette_score(metric="cosine")``, computed in whole-array steps (:func:`cosine_silhouette`).
  Above :data:`SILHOUETTE_MAX_POINTS` texts it is computed on a seeded uniform sample of that many,
  scikit-learn's own draw (``sample_size``); the row records the sample's size
  (``silhouette_points``) and the seed it was drawn with (``silhouette_seed``).
- ``calinski_harabasz``: between- over within-cluster dispersion (0.., higher is better).
- ``davies_bouldin``: the mean similarity of each cluster to its most similar one (0.., lower is
  better). scikit-learn's definition, computed in whole-array steps (:func:`davies_bouldin`):
  scikit-learn's own loops over the clusters, a call with its checks per cluster, which cost a
  third of a small grid cell's time; the two agree to 1e-9 (tests/test_label_free_scores.py).
- ``size_balance``: the entropy of the cluster sizes over its maximum, log(clusters) (0..1; 1: all
  clusters the same size). A clustering with one giant cluster scores near 0.

The number of clusters and the noise fraction are in every row already (``n_clusters_found``,
``noise_fraction``); DBCV, for the density clusterings, in :mod:`tecb_eval.clustering.validity`;
stability (ARI and AMI between reruns), where the run asked for it, in
:mod:`tecb_eval.clustering.stability`.
Where a score is undefined (fewer than two clusters, or as many clusters as texts) it is None,
with the reason in ``label_free_note``: never 0, which would read as a bad clustering.
"""

from __future__ import annotations

import math

import numpy as np

from tecb_data import seeding
from tecb_eval.clustering.criteria import CRITERIA, CRITERION_NAMES  # noqa: F401 (re-exported)

SILHOUETTE_MAX_POINTS = 2000
LABEL_FREE_FIELDS = ("silhouette", "silhouette_points", "silhouette_seed", "calinski_harabasz", "davies_bouldin",
                     "size_balance", "label_free_note", "spectral_k", "spectral_k_fit", "assignment")


def _undefined(note: str) -> dict:
    return {"silhouette": None, "silhouette_points": 0, "silhouette_seed": None, "calinski_harabasz": None,
            "davies_bouldin": None, "size_balance": None, "label_free_note": note}


def size_balance(sizes) -> float | None:
    """Normalised entropy of cluster sizes (0..1), None with fewer than two clusters."""
    sizes = np.asarray([s for s in sizes if s > 0], dtype=float)
    if len(sizes) < 2:
        return None
    p = sizes / sizes.sum()
    return float(-(p * np.log(p)).sum() / math.log(len(sizes)))


def davies_bouldin(X: np.ndarray, y: np.ndarray) -> float:
    """scikit-learn's ``davies_bouldin_score`` (Davies and Bouldin 1979, Euclidean distances) of
    labels ``y`` (two or more clusters) on ``X``, in whole-array steps."""
    _, cluster = np.unique(y, return_inverse=True)
    k, sizes = int(cluster.max()) + 1, np.bincount(cluster)
    from scipy import sparse
    from scipy.spatial import distance

    # A sparse one-hot matrix (clusters x texts): each cluster's sum without a k x n array.
    members = sparse.csr_matrix((np.ones(len(cluster)), (cluster, np.arange(len(cluster)))), shape=(k, len(cluster)))
    centroids = np.asarray(members @ X) / sizes[:, None]
    # Each cluster's mean distance of its members to its centroid.
    intra = np.bincount(cluster, weights=np.linalg.norm(X - centroids[cluster], axis=1)) / sizes
    between = distance.cdist(centroids, centroids)
    if np.allclose(intra, 0) or np.allclose(between, 0):
        return 0.0
    between[between == 0] = np.inf
    return float(np.mean(np.max((intra[:, None] + intra[None, :]) / between, axis=1)))


def cosine_silhouette(X: np.ndarray, labels: np.ndarray, sample_size: int | None = None, random_state=None) -> float:
    """scikit-learn's ``silhouette_score(X, labels, metric="cosine", sample_size=..., random_state=...)``
    (Rousseeuw 1987) of non-zero rows ``X``, on the same sample (scikit-learn's draw), to 1e-12
    (tests/test_label_free_scores.py).

    scikit-learn computes the sample's n x n distances (2,000 x 2,000 dot products of d numbers
    per cell); a text's summed cosine distance to a cluster is the cluster's size less the dot
    product of the text's unit vector with the sum of the cluster's unit vectors, so here each
    cluster's sum is taken once and each text needs k dot products: the same sums in another order
    (a silhouette differs from scikit-learn's in the last bits, about 1e-15)."""
    from sklearn.metrics import silhouette_score
    from sklearn.preprocessing import normalize
    from sklearn.utils import check_random_state

    if sample_size is not None:
        chosen = check_random_state(random_state).permutation(len(X))[:sample_size]
        X, labels = X[chosen], labels[chosen]
    _, codes = np.unique(labels, return_inverse=True)
    codes = codes.ravel()
    sizes = np.bincount(codes)
    n = len(codes)
    if not 2 <= len(sizes) <= n - 1:
        return float(silhouette_score(X, labels, metric="cosine"))  # scikit-learn's own error
    from scipy import sparse

    unit = normalize(np.asarray(X, dtype=np.float64))
    members = sparse.csr_matrix((np.ones(n), (codes, np.arange(n))), shape=(len(sizes), n))
    summed = sizes[None, :] - unit @ np.asarray(members @ unit).T  # each text's summed distance to each cluster
    rows = np.arange(n)
    # The text's own cluster: its distance to itself (0 by definition) taken out.
    own = summed[rows, codes] - (1.0 - np.einsum("ij,ij->i", unit, unit))
    with np.errstate(divide="ignore", invalid="ignore"):
        within = own / (sizes[codes] - 1)
        summed[rows, codes] = np.inf
        nearest = (summed / sizes[None, :]).min(axis=1)
        values = (nearest - within) / np.maximum(within, nearest)
    values[sizes[codes] == 1] = 0.0  # a cluster of one text: scikit-learn's 0
    return float(np.mean(np.nan_to_num(values)))


def label_free_scores(data: np.ndarray, predicted: np.ndarray, seed: int, *names: str) -> dict:
    """The label-free scores of ``predicted`` on ``data``; ``seed`` and ``names`` (the split, the
    algorithm, the cluster setting) seed the silhouette's sample, one draw per decision."""
    from sklearn import metrics  # here: the grid's caller on a Dask cluster scores nothing

    predicted = np.asarray(predicted)
    kept = predicted != -1
    X = np.asarray(data, dtype=np.float64)[kept]
    y = predicted[kept]
    clusters, sizes = np.unique(y, return_counts=True)
    if len(clusters) < 2:
        return _undefined("fewer than two clusters" if len(y) else "every text left as noise")
    if len(clusters) >= len(y):
        return _undefined("as many clusters as texts")
    out = {"size_balance": size_balance(sizes), "label_free_note": None}
    out["calinski_harabasz"] = float(metrics.calinski_harabasz_score(X, y))
    out["davies_bouldin"] = davies_bouldin(X, y)
    points = min(len(y), SILHOUETTE_MAX_POINTS)
    draw = int(seeding.rng(seed, "silhouette", *names).integers(2**31 - 1)) if points < len(y) else None
    norms = np.linalg.norm(X, axis=1)
    if not np.all(norms > 0):
        # Cosine distance is undefined for a zero vector (an empty TF-IDF row): scored without them.
        X, y = X[norms > 0], y[norms > 0]
        points = min(len(y), SILHOUETTE_MAX_POINTS)
    if len(np.unique(y)) < 2 or len(np.unique(y)) >= len(y):
        value = None
        out["label_free_note"] = "silhouette undefined on the non-zero vectors"
    else:
        value = cosine_silhouette(X, y, sample_size=points if points < len(y) else None, random_state=draw)
        value = value if math.isfinite(value) else None
    out.update(silhouette=value, silhouette_points=int(points) if value is not None else 0,
               silhouette_seed=draw if value is not None else None)
    for name in ("calinski_harabasz", "davies_bouldin"):
        if out[name] is not None and not math.isfinite(out[name]):
            out[name] = None
    return out
