"""Scores of a cell beyond the flat ones: per-level scores on a label hierarchy, and DBCV.

Per level (the Blurbs genre path: level 0 the top-level genre, level 1 the second-level one):
the texts of the cell that carry that level are clustered again with k = the number of labels at
that level (the legacy protocol: the split's texts; the fast one: MTEB v2's own draw for that
level, see :func:`tecb_eval.mteb.levels.fast_levels`) and scored against that level with
V-measure and AMI, as MTEB's ``AbsTaskClustering`` scores hierarchical labels. Where a level's
rows and k are the cell's own, the cell's clustering is that level's (the same estimator on the
same data), so it is not run twice. HDBSCAN and DBSTREAM take no k: they are run on the level's
rows alone.

DBCV: :mod:`tecb_eval.clustering.validity`, for the density clusterings only.
"""

from __future__ import annotations

import time

import numpy as np

from tecb_eval.clustering import algorithms as algo
from tecb_eval.clustering.registry import NOISE_ALGORITHMS
from tecb_eval.clustering.validity import dbcv

# What extra_scores adds to a cell's scores, and the grid to its results row.
EXTRA_FIELDS = ("levels", "levels_s", "dbcv", "dbcv_note", "dbcv_points", "dbcv_s")


# What `tecb-eval run --metrics` may ask to fill in on rows of an existing store.
BACKFILL_METRICS = ("level", "dbcv")


def check_metrics(metrics) -> tuple[str, ...]:
    from tecb_data.errors import UserError

    metrics = tuple(m.strip() for m in (metrics or ()) if m.strip())
    unknown = sorted(set(metrics) - set(BACKFILL_METRICS))
    if unknown:
        raise UserError(f"--metrics {','.join(unknown)}: unknown; choose from {','.join(BACKFILL_METRICS)}")
    return metrics


def missing(row: dict, unit, algorithm: str, metrics) -> bool:
    """Whether a stored row lacks a score of ``metrics`` that its cell has today: per-level scores
    where the unit has levels (a row written before them), DBCV on a density clustering's row."""
    if "level" in metrics and getattr(unit, "levels", ()) and not isinstance(row.get("levels"), list):
        return True
    return "dbcv" in metrics and algorithm in NOISE_ALGORITHMS and "dbcv" not in row and "dbcv_note" not in row


def label_codes(labels) -> np.ndarray:
    """``labels`` as integer codes in the sorted order of the labels: the contingency table scikit-learn
    builds from them is the one it builds from the labels themselves (same classes, same order), so
    every score is the same bit for bit, and no metric sorts thousands of strings again
    (docs/benchmarks.md, "Gold labels as codes")."""
    return np.unique(np.asarray(labels), return_inverse=True)[1].reshape(-1)


def _same_rows(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and bool(np.array_equal(a, b))


def level_scores(unit, cell, reduced: np.ndarray, predicted: np.ndarray) -> list[dict]:
    """``[{"level", "v_measure", "ami", "n_samples", "n_labels"}, ...]`` for the cell's levels."""
    from sklearn import metrics  # here: the grid's caller on a Dask cluster scores nothing

    out = []
    for level in getattr(cell, "levels", ()):
        data = reduced if level.rows is None else reduced[level.rows]
        k = min(level.k, data.shape[0])
        if _same_rows(level.rows, cell.rows) and (k == min(cell.k, data.shape[0])
                                                  or cell.algorithm in NOISE_ALGORITHMS):
            found = predicted
        else:
            estimator = algo.make_algorithm(cell.algorithm, k, unit.seed, unit.protocol, profile=unit.profile,
                                            ward_path=unit.ward_path(data.shape[0]))
            found = algo.cluster(estimator, data)
        gold = label_codes(level.labels)
        out.append({
            "level": level.level,
            "v_measure": float(metrics.v_measure_score(gold, found)),
            "ami": float(metrics.adjusted_mutual_info_score(gold, found)),
            "n_samples": int(data.shape[0]),
            "n_labels": int(level.k),
        })
    return out


def extra_scores(unit, cell, reduced: np.ndarray, data: np.ndarray, predicted: np.ndarray) -> dict:
    """The per-level scores (``levels``, ``levels_s``) where the cell has levels, and DBCV
    (``dbcv``, ``dbcv_note``, ``dbcv_points``, ``dbcv_s``) where it is a density clustering and
    the unit asks for it (a label-free criterion: a labelled run computes it only when asked)."""
    out = {}
    if getattr(cell, "levels", ()):
        started = time.perf_counter()
        out["levels"] = level_scores(unit, cell, reduced, predicted)
        out["levels_s"] = time.perf_counter() - started
    if cell.algorithm in NOISE_ALGORITHMS and getattr(unit, "dbcv", True):
        started = time.perf_counter()
        out.update(dbcv(data, predicted, unit.seed, cell.split, cell.algorithm))
        out["dbcv_s"] = time.perf_counter() - started
    return out
