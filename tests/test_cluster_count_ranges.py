"""Ranges of cluster counts: `--k` for k-means and agglomerative, `--min-cluster-size` for HDBSCAN,
every point a stored row, all on one encoding and one reduction per base set."""

from __future__ import annotations

import json

import pytest

from helpers import eval_error
from tablefiles import unlabelled_corpus
from tecb_data.errors import UserError
from tecb_eval.clustering.cluster_counts import parse_range


@pytest.mark.parametrize("text, values", [("5:20", (5, 10, 15, 20)), ("5:22", (5, 10, 15, 20)),
                                          ("2:10:4", (2, 6, 10)), ("10,5,20,5", (5, 10, 20)), ("7", (7,))])
def test_a_range_is_read_as_documented(text, values):
    assert parse_range(text, "--k") == values


@pytest.mark.parametrize("text, says", [("20:10", "empty range"), ("1:5", "too small"), ("a:b", "give A:B"),
                                        ("5:10:0", "step"), ("", "empty range")])
def test_a_bad_range_is_one_line(text, says):
    with pytest.raises(UserError, match=says):
        parse_range(text, "--k")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return unlabelled_corpus(tmp_path_factory.mktemp("corpus"))


def test_every_point_is_a_row_on_one_encoding_and_one_reduction(corpus, tmp_path, capsys):
    from tecb_eval.cli import main

    results = tmp_path / "r.jsonl"
    code = main(["run", "--data", str(corpus), "--model", "tfidf-lsa", "--config", "minibatch_kmeans:pca",
                 "--config", "agglomerative:pca", "--config", "hdbscan:pca", "--k", "2:10:4",
                 "--min-cluster-size", "5,10", "--results", str(results), "--cache-dir", str(tmp_path / "c"),
                 "--quiet", "--jobs", "1", "--stability", "0"])  # the points alone: no stability pass
    err = capsys.readouterr().err
    assert code == 0, err
    assert "encoded 120 texts" in err and "1 of 1 reductions computed" in err
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    settings = sorted((r["algorithm"], r["setting"]) for r in rows)
    assert settings == sorted([("minibatch_kmeans", f"k={k}") for k in (2, 6, 10)]
                              + [("agglomerative", f"k={k}") for k in (2, 6, 10)]
                              + [("hdbscan", f"min_cluster_size={m}") for m in (5, 10)])
    for row in rows:
        if row["algorithm"] != "hdbscan":
            assert row["n_clusters_found"] == int(row["setting"].split("=")[1])
        else:
            assert json.loads(row["algorithm_params"])["min_cluster_size"] == int(row["setting"].split("=")[1])
    # A second run with the same ranges finds every point stored.
    assert main(["run", "--data", str(corpus), "--model", "tfidf-lsa", "--config", "minibatch_kmeans:pca",
                 "--k", "2,6,10", "--results", str(results), "--cache-dir", str(tmp_path / "c"), "--quiet",
                 "--stability", "0"]) == 0
    assert len(results.read_text().splitlines()) == len(rows)


@pytest.mark.parametrize("extra, says", [
    (["--k", "5:200"], "larger than the 120 texts"),
    (["--k", "30:20"], "empty range"),
    ([], "gives minibatch_kmeans no k"),
    (["--k", "5", "--min-cluster-size", "5"], "no algorithm of this run takes it"),
])
def test_bad_ranges_fail_before_any_work(corpus, tmp_path, capsys, extra, says):
    line = eval_error(capsys, ["run", "--data", str(corpus), "--model", "tfidf-lsa", "--config",
                               "minibatch_kmeans:none", "--results", str(tmp_path / "r.jsonl"), "--cache-dir",
                               str(tmp_path / "c"), "--quiet", *extra])
    assert says in line
    assert not (tmp_path / "r.jsonl").exists()
