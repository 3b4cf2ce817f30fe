"""`tecb-eval recommend`: the best pipeline per dataset, its interval, whether its lead holds (the
paired test `compare` uses), its noise fraction and a BERTopic configuration that runs."""

from __future__ import annotations

import json
import math

import pytest

from reportstore import two_model_store


@pytest.fixture(scope="module")
def store(demo_datasets, tmp_path_factory):
    return two_model_store(demo_datasets, tmp_path_factory.mktemp("recommend"))


@pytest.fixture(scope="module")
def kmeans_store(demo_datasets, tmp_path_factory):
    """Only k-means (on the embeddings and on PCA): the recommendation is a k-means pipeline."""
    return two_model_store(demo_datasets, tmp_path_factory.mktemp("recommend-kmeans"),
                           configurations=["minibatch_kmeans:none", "minibatch_kmeans:pca"])


def _json(capsys, *argv) -> dict:
    from tecb_eval.cli import main

    capsys.readouterr()
    assert main(["recommend", *map(str, argv), "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_names_the_best_pipeline_and_its_lead(store, capsys):
    from tecb_eval.reports import compare, tables
    from tecb_eval.reports.versions import read_store

    found = _json(capsys, store)
    assert found["synthetic"] is True and "NOT comparable" in found["note"]
    frame = read_store(store)
    assert [r["dataset"] for r in found["recommendations"]] == ["BlurbsClusteringS2S", "TenKGnadClusteringS2S"]
    for r in found["recommendations"]:
        means = tables.split_means(frame[frame.mteb_name == r["dataset"]]).sort_values("mean", ascending=False)
        best, second = means.iloc[0], means.iloc[1]
        assert (r["model"], r["algorithm"], r["reduction"]) == (best.model, best.algorithm, best.reduction)
        assert r["mean"] == pytest.approx(best["mean"]) and r["low"] <= r["mean"] <= r["high"]
        assert r["runner_up"]["model"] == second.model and r["runner_up"]["mean"] == pytest.approx(second["mean"])
        # The lead is the paired test of `compare`, on the same scores.
        of = frame[frame.mteb_name == r["dataset"]]

        def scores(row):
            rows = of[(of.model == row.model) & (of.algorithm == row.algorithm) & (of.reduction == row.reduction)]
            return rows.set_index(["split", "seed"]).v_measure.sort_index()

        expected = compare.paired_difference(scores(best), scores(second), dataset=r["dataset"],
                                             model_a=r["lead"]["model_a"], model_b=r["lead"]["model_b"])
        assert r["lead"]["difference"] == pytest.approx(expected.difference)
        assert r["lead"]["p_value"] == pytest.approx(expected.p_value) and r["lead"]["holds"] == expected.holds
        assert r["synthetic"] is True and "BERTopic(" in r["bertopic"]
        if r["algorithm"] in ("hdbscan", "dbstream"):
            assert 0 <= r["noise_fraction"] <= 1
        else:
            assert r["noise_fraction"] is None


def test_text_says_synthetic_interval_lead_and_configuration(store, capsys):
    from tecb_eval.cli import main

    assert main(["recommend", str(store), "--data", "TenKGnadClusteringS2S"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Synthetic demo data") and "(synthetic, not comparable)" in out
    assert "BlurbsClusteringS2S" not in out
    assert "best pipeline: tfidf-lsa" in out and "95 % interval" in out
    assert "lead: TenKGnadClusteringS2S:" in out and "ranking" in out
    assert "topic_model = BERTopic(embedding_model=embedding_model, umap_model=umap_model, hdbscan_model=" in out


def test_noise_fraction_of_a_density_pipeline(demo_datasets, tmp_path, capsys):
    """HDBSCAN alone: its noise fraction is the mean over the rows the grid wrote."""
    from tecb_eval.reports.versions import read_store

    only = two_model_store(demo_datasets, tmp_path, configurations=["hdbscan:pca"])
    found = _json(capsys, only, "--data", "BlurbsClusteringS2S")["recommendations"][0]
    frame = read_store(only)
    rows = frame[(frame.model == found["model"]) & (frame.mteb_name == "BlurbsClusteringS2S")]
    assert found["algorithm"] == "hdbscan" and found["noise_fraction"] == pytest.approx(rows.noise_fraction.mean())


def test_unknown_dataset_is_one_line(store, capsys):
    from helpers import one_line_error

    error = one_line_error(capsys, ["recommend", str(store), "--data", "NoSuchClustering"])
    assert "NoSuchClustering" in error and "BlurbsClusteringS2S" in error


def test_the_bertopic_configuration_runs_and_finds_as_many_topics(kmeans_store, demo_datasets, capsys):
    """The printed configuration, run as printed on a demo corpus, gives the k-means its k topics:
    as many clusters as the grid found with the same pipeline."""
    import bertopic  # noqa: F401 - in the [test] extra: a missing one is a broken install, not a skip
    from tecb_eval.benchmark import load_dataset
    from tecb_eval.reports.versions import read_store

    found = _json(capsys, kmeans_store, "--data", "BlurbsClusteringS2S")["recommendations"][0]
    assert found["algorithm"] == "minibatch_kmeans"
    bench = load_dataset(demo_datasets / "blurbs-clustering-s2s")
    frame = read_store(kmeans_store)
    rows = frame[(frame.model == found["model"]) & (frame.algorithm == "minibatch_kmeans")
                 & (frame.reduction == found["reduction"]) & (frame.mteb_name == "BlurbsClusteringS2S")]
    split = sorted(rows.split)[0]
    docs = next(list(s.texts) for s in bench.splits if s.name == split)
    namespace = {"docs": docs}
    exec(compile(found["bertopic"], "recommended-configuration", "exec"), namespace)  # noqa: S102 - our own output
    topics = namespace["topics"]
    k = namespace["hdbscan_model"].n_clusters
    assert len(topics) == len(docs) and len(set(topics)) == k
    assert k == int(rows[rows.split == split].n_clusters_found.iloc[0]) and not math.isnan(found["mean"])
