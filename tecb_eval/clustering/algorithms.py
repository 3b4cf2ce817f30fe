"""Clustering algorithms and dimensionality reductions with the paper's defaults: what the grid
calls to build, run and describe them.

Each name is an entry of :mod:`tecb_eval.clustering.registry`; the estimators that are ours live in
:mod:`tecb_eval.clustering.estimators` (re-exported here). The reference table's spellings
(``-``, ``pca+umap``) map onto the names in :data:`REFERENCE_REDUCTIONS`.
"""

from __future__ import annotations

import numpy as np

from tecb_data.errors import UserError
from tecb_eval.clustering.profiles import get_profile
# The names, the paper's settings and what the grid skips live in the registry (the planner reads
# TABLE2_CONFIGURATION through this module).
from tecb_eval.clustering.registry import (  # noqa: F401
    ALGORITHMS, DEFAULT_ALGORITHMS, FAST_KMEANS_BATCH_SIZE, KMEANS_BATCH_SIZE, PCA_PRE_COMPONENTS, REDUCTIONS, REFERENCE_REDUCTIONS,
    SKIPPED_BY_DEFAULT, TABLE2_CONFIGURATION, Build, algorithm as algorithm_entry, reduction as reduction_entry,
)


def __getattr__(name):
    # Our estimators are imported on first use: they import scikit-learn (river, umap), which the
    # grid's caller on a Dask cluster, which only plans and writes, does without (2.7 s of imports).
    if name in ("DBSTREAMClusterer", "KnnWard", "PcaUmap", "Umap", "WardVectors", "River014DBSTREAM", "SeededSpectralUMAP"):
        from tecb_eval.clustering import estimators

        return getattr(estimators, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_reduction(name: str, seed: int, n_components: int = 2):
    """The reducer for ``name`` (None for ``none``), seeded."""
    return reduction_entry(name).build(seed, n_components)


def reduce(name: str, X: np.ndarray, seed: int) -> np.ndarray:
    entry = reduction_entry(name)
    reducer = entry.build(seed, 2)
    # Fewer rows than PCA components cannot be reduced to 2-D; keep them (V-measure is still defined).
    if reducer is None or min(X.shape) < entry.keeps_below:
        return X
    return np.asarray(reducer.fit_transform(X))


def make_algorithm(name: str, n_clusters: int, seed: int, protocol: str = "legacy", profile=None,
                   ward_path: str = "matrix", min_cluster_size: int | None = None):
    """The clusterer for ``name``: k = ``n_clusters`` for the algorithms that take a k.

    ``profile`` (a name or :class:`~tecb_eval.clustering.profiles.Profile`; ``None``: the default) picks
    DBSTREAM's ``cleanup`` and whether Ward may run on the vectors; ``ward_path`` (``"matrix"`` or
    ``"vector"``, the memory planner's choice: ``tecb_eval.grid.work.ward_path``) picks Ward's
    implementation where the profile allows both. Every other algorithm is the same in every profile.
    ``min_cluster_size``: HDBSCAN's, at a point of a range (None: its default).
    """
    profile = get_profile(profile)
    if ward_path not in ("matrix", "vector"):
        raise ValueError(f"ward_path must be 'matrix' or 'vector', got {ward_path!r}")
    return algorithm_entry(name).build(Build(n_clusters, seed, protocol, profile, ward_path, min_cluster_size))


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


def configurations(algorithms=DEFAULT_ALGORITHMS, reductions=REDUCTIONS, explicit=None):
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


def params_json(estimator) -> str:
    """An estimator's (or reducer's) own parameters as canonical JSON; ``{}`` for None."""
    import json

    if estimator is None:
        return "{}"
    params = estimator.get_params(deep=False)
    return json.dumps({k: v if isinstance(v, (int, float, str, bool, type(None))) else repr(v)
                       for k, v in sorted(params.items())}, sort_keys=True)
