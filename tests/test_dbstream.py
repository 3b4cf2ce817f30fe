"""DBSTREAM as river 0.14.0 ran it (the paper) and as today's river runs it.

The referee for ``cleanup="river-0.14"`` is real river 0.14.0: tests/data/dbstream_river014.json
holds its labels on two small 2-D sets, written by tools/river014_reference.py in a Python 3.10
environment with river==0.14.0 (see that script). The referee for ``cleanup="river"`` is today's
river, called directly here.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone

from tecb_data.errors import UserError
from tecb_eval.clustering.algorithms import ALGORITHMS, DBSTREAMClusterer, make_algorithm
from tecb_eval.clustering.profiles import get_profile

FIXTURE = Path(__file__).parent / "data" / "dbstream_river014.json"


def reference():
    return json.loads(FIXTURE.read_text())


def todays_river_labels(X, **params) -> list[int]:
    from river.cluster import DBSTREAM

    model = DBSTREAM(**params)
    rows = [dict(enumerate(row)) for row in X.tolist()]
    for row in rows:
        model.learn_one(row)
    return [model.predict_one(row) for row in rows]


@pytest.mark.parametrize("name", ["blobs", "umap_like"])
def test_river_014_cleanup_gives_real_river_014s_labels(name):
    document = reference()
    assert document["river"] == "0.14.0"
    data = document["datasets"][name]
    X = np.array(data["X"])
    assert DBSTREAMClusterer(cleanup="river-0.14").fit(X).labels_.tolist() == data["labels"]


@pytest.mark.parametrize("name", ["blobs", "umap_like"])
def test_river_cleanup_is_todays_river_and_not_0_14(name):
    data = reference()["datasets"][name]
    X = np.array(data["X"])
    labels = DBSTREAMClusterer().fit(X).labels_.tolist()
    assert labels == todays_river_labels(X)
    assert labels != data["labels"]
    # Most rows move, not a boundary point or two: the two are different clusterings.
    assert sum(a != b for a, b in zip(labels, data["labels"])) > len(labels) // 2


def test_only_river_014_moves_micro_clusters_while_predicting():
    # river 0.14 merges macro-clusters into their own first micro-cluster on every predict_one
    # (https://github.com/online-ml/river/issues/1265), so predicting changes the model and the
    # clustering drifts row by row.
    from river.cluster import DBSTREAM

    from tecb_eval.clustering.algorithms import River014DBSTREAM

    rows = [dict(enumerate(row)) for row in reference()["datasets"]["blobs"]["X"]]
    for model_class, drifts in ((River014DBSTREAM, True), (DBSTREAM, False)):
        model = model_class()
        for row in rows:
            model.learn_one(row)
        weights, n_clusters = [], []
        for row in rows[:5]:
            weights.append(sum(mc.weight for mc in model.micro_clusters.values()))
            model.predict_one(row)
            n_clusters.append(model._n_clusters)
        assert (len(set(weights)) > 1) is drifts and (len(set(n_clusters)) > 1) is drifts, model_class
        if drifts:  # ... towards every micro-cluster being a cluster of its own, as the issue says
            assert n_clusters == sorted(n_clusters) and n_clusters[-1] == len(model.micro_clusters)


def test_cleanup_is_a_parameter_that_river_never_sees():
    X = np.array(reference()["datasets"]["blobs"]["X"])[:60]
    adapter = DBSTREAMClusterer(clustering_threshold=1.5, cleanup="river-0.14")
    assert adapter.get_params()["cleanup"] == "river-0.14"
    assert clone(adapter).get_params() == adapter.get_params()
    fitted = adapter.fit(X)
    assert fitted.model_.clustering_threshold == 1.5 and not hasattr(fitted.model_, "cleanup")
    restored = pickle.loads(pickle.dumps(fitted))
    assert type(restored.model_).__name__ == "River014DBSTREAM"
    today = DBSTREAMClusterer(clustering_threshold=1.5).fit(X)
    assert type(today.model_).__module__.startswith("river.")
    assert today.labels_.tolist() == todays_river_labels(X, clustering_threshold=1.5)
    with pytest.raises(UserError, match=r"unknown DBSTREAM cleanup 'river-0.13'; choose from river, river-0.14"):
        DBSTREAMClusterer(cleanup="river-0.13").fit(X)


def test_make_algorithm_takes_dbstreams_cleanup_from_the_profile():
    assert make_algorithm("dbstream", 4, 0).get_params()["cleanup"] == "river"
    assert make_algorithm("dbstream", 4, 0, "legacy").get_params()["cleanup"] == "river"
    assert make_algorithm("dbstream", 4, 0, "fast", profile="current").get_params()["cleanup"] == "river"
    assert make_algorithm("dbstream", 4, 0, profile="paper").get_params()["cleanup"] == "river-0.14"
    assert make_algorithm("dbstream", 4, 0, profile=get_profile("paper")).get_params()["cleanup"] == "river-0.14"
    for name in ALGORITHMS:
        current = make_algorithm(name, 4, 0, "legacy", profile="current").get_params()
        paper = make_algorithm(name, 4, 0, "legacy", profile="paper").get_params()
        assert {k: v for k, v in current.items() if k != "cleanup"} == \
               {k: v for k, v in paper.items() if k != "cleanup"}, name
    with pytest.raises(UserError, match="unknown profile 'papers'"):
        make_algorithm("minibatch_kmeans", 4, 0, profile="papers")
