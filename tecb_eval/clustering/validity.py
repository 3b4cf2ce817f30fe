"""DBCV (Moulavi et al. 2014), the density-based clustering validity of HDBSCAN's and DBSTREAM's labels.

V-measure against gold labels says how close a density clustering comes to the genres; DBCV says
how good it is as a density clustering (dense, well separated clusters: near 1; clusters that
cross low-density gaps: below 0). It is hdbscan's ``hdbscan.validity.validity_index`` on the
space that was clustered (the reduction's output), with its own treatment of noise: noise points
belong to no cluster but count in the denominator, so a clustering that calls most points noise
scores near 0 whatever its clusters are.

Where hdbscan's function gives no meaningful number the value is None with a reason, never 0:
every point noise (hdbscan returns 0), one cluster (there is no separation: hdbscan returns nan),
a cluster of a single point (hdbscan's minimum spanning tree has no edge and it raises).

Cost. hdbscan computes all pairwise distances within each cluster (several n_c x n_c arrays, and
a Python loop over each cluster's minimum spanning tree) and compares every pair of clusters in a
Python loop. Measured on this project's 2-core machine with hdbscan's own function: 15,000 blob
points in 72 clusters took 7.7 s against HDBSCAN's 0.7 s, one cluster of 14,444 points 189 s. So
(1) the pairs of clusters are compared in one pass per cluster (:func:`validity_index`, hdbscan's
value bit for bit), and (2) above :data:`MAX_POINTS` points the index is computed on a seeded
subsample of about :data:`MAX_POINTS` points, stratified by predicted label (every cluster keeps
its share, and at least 2 points, so that no cluster vanishes or breaks the tree; with hundreds
of small clusters the subsample is a little larger), and the row says how many points it used.
``bench/bench_metrics.py``: on 15,000 points drawn from the dev set's reduced vectors HDBSCAN
found 550 clusters in 0.63 s and DBCV on its 2,345-point subsample took 0.61 s. The subsample's
index is hdbscan's on those points exactly; it estimates the full one, it is not equal to it:
DBCV's core distances depend on how densely a cluster is sampled (on blobs of 15,000 points: full
0.474, subsamples of 2,000 0.58-0.63). 2,000 keeps every split of the GermEval dev set whole (the
largest has 1,802 texts); there DBCV costs more than HDBSCAN's own fit in 2-d (0.56 s against
0.04 s on the largest split), still little beside the UMAP reduction it is computed on.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from tecb_data import seeding

MAX_POINTS = 2000
DBCV_FIELDS = ("dbcv", "dbcv_note", "dbcv_points")


def subsample(predicted: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted row indices of a subsample of about ``size`` rows, stratified by ``predicted``: each
    label (noise included) keeps its share, rounded, and every cluster at least 2 points."""
    predicted = np.asarray(predicted)
    share = size / len(predicted)
    chosen = []
    for label in np.unique(predicted):  # sorted: the draws do not depend on the order labels appear in
        rows = np.flatnonzero(predicted == label)
        take = int(round(len(rows) * share))
        if label != -1:
            take = max(take, min(len(rows), 2))
        chosen.append(rng.choice(rows, size=min(take, len(rows)), replace=False))
    return np.sort(np.concatenate(chosen))


def why_undefined(predicted: np.ndarray) -> str | None:
    """Why DBCV cannot be computed for these labels, or None."""
    predicted = np.asarray(predicted)
    clusters = np.unique(predicted[predicted != -1])
    if len(predicted) == 0:
        return "no points"
    if len(clusters) == 0:
        return "every point is noise"
    if len(clusters) == 1:
        return "one cluster: DBCV needs two to measure their separation"
    sizes = np.array([np.sum(predicted == c) for c in clusters])
    if sizes.min() < 2:
        return f"{int(np.sum(sizes < 2))} cluster(s) of a single point, for which DBCV is not defined"
    return None


def validity_index(X: np.ndarray, predicted: np.ndarray) -> float:
    """hdbscan's ``validity_index`` on ``X`` (as float64, euclidean, as HDBSCAN and DBSTREAM cluster),
    with the pairs of clusters compared in one pass per cluster instead of one per pair.

    hdbscan compares every pair of clusters in a Python loop, masking all points twice per pair:
    on 15,000 points HDBSCAN finds hundreds of clusters (550 on the dev set's vectors in 2-d) and
    that loop took 17 s against HDBSCAN's 0.5 s (``bench/bench_metrics.py``). Here each cluster's
    own part is hdbscan's functions (``distances_between_points``: the mutual reachability
    distances and all-points core distances; ``internal_minimum_spanning_tree``: the internal nodes
    and the density sparseness), and the density separation of a cluster from every other one is
    the minimum over the same mutual reachability values, computed from the same scipy ``cdist``
    (each distance on its own, whatever the shape of the matrix), with the clusters summed in
    hdbscan's order: the value is hdbscan's bit for bit (tested to 1e-9 against it). Its runtime
    warnings (a zero distance) are kept out of the user's terminal."""
    from hdbscan.validity import distances_between_points, internal_minimum_spanning_tree
    from scipy.spatial.distance import cdist

    X = np.asarray(X, dtype=np.float64)
    labels = np.asarray(predicted, dtype=np.intp)
    clusters = [c for c in range(int(labels.max()) + 1) if np.any(labels == c)]
    nodes, cores, sparseness, sizes = {}, {}, {}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for c in clusters:
            mr, core = distances_between_points(X, labels, c, "euclidean", None)
            internal, edges = internal_minimum_spanning_tree(mr)
            members = X[labels == c]
            nodes[c] = members[internal]
            cores[c] = core[internal]
            sparseness[c] = edges.T[2].max()
            sizes[c] = np.sum(labels == c)
        # Every cluster's internal nodes side by side, to reach all other clusters in one cdist.
        all_nodes = np.concatenate([nodes[c] for c in clusters])
        all_cores = np.concatenate([cores[c] for c in clusters])
        owner = np.concatenate([np.full(len(nodes[c]), i) for i, c in enumerate(clusters)])
        starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
        n_samples = float(X.shape[0])
        result = 0
        for i, c in enumerate(clusters):
            mr = np.maximum(np.maximum(cdist(nodes[c], all_nodes, "euclidean"), cores[c][:, None]), all_cores[None, :])
            separation = np.minimum.reduceat(mr.min(axis=0), starts)
            separation[i] = np.inf  # hdbscan's matrix keeps inf on its diagonal
            min_separation = separation.min()
            index = (min_separation - sparseness[c]) / max(min_separation, sparseness[c])
            result += (sizes[c] / n_samples) * index
    return float(result)


def dbcv(X: np.ndarray, predicted: np.ndarray, seed: int, *names: str, max_points: int = MAX_POINTS) -> dict:
    """``{"dbcv": value or None, "dbcv_note": why None or how it was sampled, "dbcv_points": points used}``.

    ``seed`` and ``names`` (the cell's split and algorithm) seed the subsample, one stream per cell
    (:func:`tecb_data.seeding.rng`), so it is the same wherever and in whatever order cells run."""
    predicted = np.asarray(predicted)
    reason = why_undefined(predicted)
    if reason is not None:
        return {"dbcv": None, "dbcv_note": reason, "dbcv_points": 0}
    note = None
    total = len(predicted)
    if total > max_points:
        rows = subsample(predicted, max_points, seeding.rng(seed, "dbcv", *names))
        X, predicted = np.asarray(X)[rows], predicted[rows]
        note = f"seeded subsample of {len(rows):,} of {total:,} points, stratified by cluster"
    try:
        value = validity_index(X, predicted)
    except (ValueError, AssertionError, FloatingPointError, ZeroDivisionError) as exc:
        return {"dbcv": None, "dbcv_note": f"hdbscan's validity_index failed: {exc}", "dbcv_points": len(predicted)}
    if not math.isfinite(value):
        return {"dbcv": None, "dbcv_note": "not a finite number (zero distances within a cluster?)",
                "dbcv_points": len(predicted)}
    return {"dbcv": value, "dbcv_note": note, "dbcv_points": len(predicted)}
