"""DBCV of the density clusterings: refereed by hdbscan's own validity_index, null with a reason
where it is not defined, a seeded stratified subsample above MAX_POINTS, and on every HDBSCAN and
DBSTREAM row of a grid run (none on the k-based algorithms' rows)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hdbscan.validity import validity_index as hdbscan_validity_index
from sklearn.datasets import make_blobs

import hdbscan
from tecb_data import seeding
from tecb_eval.clustering import validity
from tecb_eval.grid.run import run_grid


def _blobs(n: int, seed: int = 0):
    X, _ = make_blobs(n, centers=12, n_features=2, random_state=seed, cluster_std=0.8, center_box=(-20, 20))
    return X, hdbscan.HDBSCAN().fit_predict(X)


def test_dbcv_is_hdbscans_validity_index_on_the_same_points_and_labels():
    X, labels = _blobs(600)
    assert (labels == -1).any() and len(set(labels) - {-1}) > 2  # noise is present, as it is counted
    ours = validity.dbcv(X.astype(np.float32), labels, 42, "split", "hdbscan")
    theirs = hdbscan_validity_index(X.astype(np.float32).astype(np.float64), labels)
    assert ours["dbcv_note"] is None and ours["dbcv_points"] == 600
    assert abs(ours["dbcv"] - theirs) <= 1e-9
    assert -1 <= ours["dbcv"] <= 1


@pytest.mark.parametrize("centers, gap", [(3, False), (40, False), (40, True)])
@pytest.mark.slow
def test_our_pass_over_cluster_pairs_gives_hdbscans_value_bit_for_bit(centers, gap):
    # Many clusters (where hdbscan's pair loop is slow), and cluster ids with holes (a DBSTREAM
    # micro-cluster that lost its points): hdbscan skips an id no point has.
    X, _ = make_blobs(1500, centers=centers, n_features=2, random_state=3, cluster_std=0.5, center_box=(-40, 40))
    labels = hdbscan.HDBSCAN().fit_predict(X)
    if gap:
        labels = np.where(labels >= 0, 2 * labels + 1, -1)
    assert len(set(labels) - {-1}) >= min(centers, 3)
    assert validity.validity_index(X, labels) == hdbscan_validity_index(X, labels)


def test_above_max_points_a_seeded_stratified_subsample_is_refereed_on_its_own_points():
    X, labels = _blobs(900)
    ours = validity.dbcv(X, labels, 7, "coarse-01", "hdbscan", max_points=300)
    rows = validity.subsample(labels, 300, seeding.rng(7, "dbcv", "coarse-01", "hdbscan"))
    assert ours["dbcv_points"] == len(rows) and abs(len(rows) - 300) <= len(set(labels))
    assert "subsample" in ours["dbcv_note"] and "900" in ours["dbcv_note"]
    assert abs(ours["dbcv"] - hdbscan_validity_index(X[rows], labels[rows])) <= 1e-9
    # Every cluster keeps at least two points (hdbscan's tree needs them) and its share.
    for label in set(labels) - {-1}:
        assert np.sum(labels[rows] == label) >= min(2, np.sum(labels == label))
    # The same seed and cell give the same subsample; another cell another one.
    assert validity.dbcv(X, labels, 7, "coarse-01", "hdbscan", max_points=300) == ours
    other = validity.subsample(labels, 300, seeding.rng(7, "dbcv", "coarse-02", "hdbscan"))
    assert not np.array_equal(rows, other)


@pytest.mark.parametrize("labels, reason", [
    ([-1] * 10, "every point is noise"),
    ([0] * 8 + [-1] * 2, "one cluster"),
    ([0] * 5 + [1] + [2] * 4, "single point"),
    ([], "no points"),
])
def test_undefined_dbcv_is_null_with_a_reason_never_zero(labels, reason):
    X = np.random.default_rng(0).normal(size=(len(labels), 2))
    found = validity.dbcv(X, np.array(labels, dtype=int), 42, "s", "dbstream")
    assert found["dbcv"] is None and reason in found["dbcv_note"]


@pytest.mark.slow
def test_hdbscan_and_dbstream_rows_carry_dbcv_and_k_based_rows_do_not(demo_datasets):
    frame = run_grid([demo_datasets / "blurbs-clustering-s2s"], ["tfidf-lsa"],
                     configurations=["hdbscan:pca", "dbstream:pca", "minibatch_kmeans:pca"], limit_splits=2,
                     jobs=1, progress=False, label_free=True)  # on labelled data DBCV is asked for
    density = frame[frame.algorithm.isin(["hdbscan", "dbstream"])]
    assert len(density) == 4
    for row in density.to_dict("records"):
        value, note = row["dbcv"], row["dbcv_note"]
        if value is None or (isinstance(value, float) and math.isnan(value)):
            assert isinstance(note, str) and note  # null, with its reason
        else:
            assert -1 <= value <= 1 and row["dbcv_points"] == row["n_samples"]
    kmeans = frame[frame.algorithm == "minibatch_kmeans"]
    assert kmeans.dbcv.isna().all() and kmeans.dbcv_note.isna().all()


@pytest.mark.parametrize("edit, problem", [
    ({"dbcv": 1.5}, "dbcv 1.5 is not a number from -1 to 1"),
    ({"dbcv": "0.3"}, "is not a number from -1 to 1"),
    ({"levels": [{"level": 0, "v_measure": "x", "ami": 0.1}]}, "is not a list of per-level scores"),
])
def test_an_edited_dbcv_or_level_is_a_row_unlike_the_grids(edit, problem):
    from tecb_eval.grid.store import row_problem

    row = {"mteb_name": "D", "v_measure": 0.5, "seed": 42, "dbcv": None, "dbcv_note": "one cluster",
           "levels": [{"level": 0, "v_measure": 0.2, "ami": 0.1}]}
    assert row_problem(row) is None
    assert problem in row_problem({**row, **edit})
