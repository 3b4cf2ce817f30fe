"""Label-free scores in every row of a corpus without labels, and in a labelled run's rows only when
asked (--label-free): scikit-learn's silhouette (cosine, sampled above a size with a recorded
seed), Calinski-Harabasz, Davies-Bouldin and the size balance on the vectors the algorithm
clustered; on a corpus without labels no score that needs labels is stored or printed."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn import metrics
from sklearn.datasets import make_blobs

from helpers import eval_error
from tablefiles import unlabelled_corpus
from tecb_eval.clustering.label_free import SILHOUETTE_MAX_POINTS, label_free_scores


def test_scores_are_scikit_learns_on_the_clustered_points_without_noise():
    X, y = make_blobs(300, centers=4, n_features=5, random_state=0)
    y = y.copy()
    y[:30] = -1  # noise belongs to no cluster
    scores = label_free_scores(X, y, 42, "split", "hdbscan", "")
    kept = y != -1
    assert scores["silhouette"] == pytest.approx(metrics.silhouette_score(X[kept], y[kept], metric="cosine"))
    assert scores["calinski_harabasz"] == pytest.approx(metrics.calinski_harabasz_score(X[kept], y[kept]))
    assert scores["davies_bouldin"] == pytest.approx(metrics.davies_bouldin_score(X[kept], y[kept]))
    assert scores["silhouette_points"] == int(kept.sum()) and scores["silhouette_seed"] is None
    assert 0.9 < scores["size_balance"] <= 1.0


@pytest.mark.parametrize("points, clusters, dimensions", [(40, 2, 3), (500, 37, 384), (300, 12, 50)])
def test_davies_bouldin_is_scikit_learns(points, clusters, dimensions):
    """The referee: scikit-learn's own function, on blobs, random labels (clusters of very unequal
    sizes, one of a single point) and a clustering with two identical centroids."""
    from tecb_eval.clustering.label_free import davies_bouldin

    X, y = make_blobs(points, centers=clusters, n_features=dimensions, random_state=clusters)
    rng = np.random.default_rng(points)
    random = rng.integers(0, clusters, points)
    random[0] = clusters  # a cluster of one text
    same = np.tile(X[:2], (points // 2, 1)), np.tile([0, 1], points // 2)
    for data, labels in ((X, y), (X.astype(np.float32).astype(np.float64), random), same):
        # abs: where every cluster is one point repeated, scikit-learn's distances (by the dot
        # product) leave float noise of 1e-9 around the exact 0.
        assert davies_bouldin(data, labels) == pytest.approx(metrics.davies_bouldin_score(data, labels),
                                                             rel=1e-9, abs=1e-7)


def test_a_large_clustering_is_sampled_with_a_recorded_seed():
    X, y = make_blobs(SILHOUETTE_MAX_POINTS + 500, centers=3, n_features=4, random_state=1)
    first = label_free_scores(X, y, 42, "all", "minibatch_kmeans", "k=3")
    again = label_free_scores(X, y, 42, "all", "minibatch_kmeans", "k=3")
    assert first == again
    assert first["silhouette_points"] == SILHOUETTE_MAX_POINTS and isinstance(first["silhouette_seed"], int)
    assert first["silhouette"] == pytest.approx(metrics.silhouette_score(
        X, y, metric="cosine", sample_size=SILHOUETTE_MAX_POINTS, random_state=first["silhouette_seed"]), abs=1e-12)


@pytest.mark.parametrize("points, clusters, dimensions, sample", [(2600, 7, 384, SILHOUETTE_MAX_POINTS),
                                                                    (2600, 40, 2, SILHOUETTE_MAX_POINTS),
                                                                    (300, 12, 50, None)])
def test_the_cosine_silhouette_is_scikit_learns(points, clusters, dimensions, sample):
    """The referee: scikit-learn's silhouette_score (cosine; its own sample where one is drawn) on
    blobs, on random labels with a cluster of one text (scored 0), and on two clusters of one
    point repeated (distances of 0 within them)."""
    from tecb_eval.clustering.label_free import cosine_silhouette

    X, y = make_blobs(points, centers=clusters, n_features=dimensions, random_state=points + dimensions)
    random = np.random.default_rng(points).integers(0, clusters, points)
    random[0] = clusters
    same = np.tile(X[:2], (points // 2, 1)), np.tile([0, 1], points // 2)
    for data, labels in ((X, y), (X, random), same):
        for seed in (3, 4):
            assert cosine_silhouette(data, labels, sample, seed) == pytest.approx(
                metrics.silhouette_score(data, labels, metric="cosine", sample_size=sample, random_state=seed),
                abs=1e-12)


@pytest.mark.parametrize("labels, note", [(np.zeros(50, int), "fewer than two clusters"),
                                          (np.full(50, -1), "every text left as noise")])
def test_an_undefined_score_is_none_with_its_reason(labels, note):
    scores = label_free_scores(np.random.default_rng(0).normal(size=(50, 3)), labels, 42, "s", "hdbscan", "")
    assert scores["silhouette"] is None and scores["calinski_harabasz"] is None and scores["label_free_note"] == note


def test_labelled_rows_carry_both_and_unlabelled_rows_no_label_score(corpus_and_store, blurbs_folder, tmp_path, capsys):
    from tecb_eval.cli import main
    from tecb_eval.grid.store import ResultsStore

    results = tmp_path / "r.jsonl"
    assert main(["run", "--data", str(blurbs_folder), "--model", "tfidf-lsa", "--config", "minibatch_kmeans:none",
                 "--limit-splits", "1", "--results", str(results), "--cache-dir", str(tmp_path / "c"), "--quiet",
                 "--label-free"]) == 0
    (labelled,) = [json.loads(line) for line in results.read_text().splitlines()]
    assert 0 <= labelled["v_measure"] <= 1 and -1 <= labelled["silhouette"] <= 1 and labelled["calinski_harabasz"] > 0
    store = corpus_and_store
    rows = ResultsStore(store).rows
    assert rows and not ResultsStore(store).skipped
    assert all(r["labelled"] is False and r["v_measure"] is None and r["ami"] is None for r in rows)
    assert all(r["silhouette"] is not None for r in rows)
    capsys.readouterr()
    # Every output that needs labels says it does not apply, never a 0 in its place.
    assert main(["table", str(store)]) == 0
    printed = capsys.readouterr().out
    assert "do not apply" in printed and "silhouette" in printed
    assert "V-measure" not in printed.replace("V-measure, Table 2", "")
    for argv in (["table", str(store), "--table", "2"],
                 ["compare", str(store), "--model", "tfidf-lsa", "--model", "tfidf-lsa"]):
        assert "do not apply" in eval_error(capsys, argv)


def test_an_edited_unlabelled_row_with_a_v_measure_is_refused(corpus_and_store, tmp_path):
    from tecb_eval.grid.store import ResultsStore

    row = json.loads(corpus_and_store.read_text().splitlines()[0])
    row["v_measure"] = 0.0
    edited = tmp_path / "edited.jsonl"
    edited.write_text(json.dumps(row, sort_keys=True) + "\n")
    assert ResultsStore(edited).skipped


def test_report_and_exports_of_a_corpus_without_labels_write_its_label_free_scores(corpus_and_store, tmp_path, capsys):
    # What needs labels is left out in one line; what applies is written, and the command succeeds.
    from tecb_eval.cli import main

    store = corpus_and_store
    corpus = store.parent / "out" / "corpus-s2s"
    run = ["run", "--data", str(corpus), "--model", "tfidf-lsa", "--config", "minibatch_kmeans:none", "--config",
           "hdbscan:pca", "--k", "3,6", "--results", str(store), "--cache-dir", str(store.parent / "c"), "--quiet"]
    for argv in (["export", str(store), "--out", str(tmp_path / "export")], [*run, "--out", str(tmp_path / "run")]):
        capsys.readouterr()
        assert main(argv) == 0
        out = tmp_path / argv[argv.index("--out") + 1].rsplit("/", 1)[-1]
        assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == ["label_free.csv", "label_free.md"]
        said = capsys.readouterr().err
        assert "CorpusClusteringS2S: without labels: the export holds the label-free scores" in said
        table = (out / "label_free.md").read_text()
        assert "| tfidf-lsa | CorpusClusteringS2S | none | minibatch_kmeans | k=3 |" in table and "k=6" in table
        csv = (out / "label_free.csv").read_text().splitlines()
        assert len(csv) == 4 and csv[0].startswith("model,dataset,reduction,algorithm,setting,silhouette")
    assert main(["report", str(store), "--out", str(tmp_path / "site")]) == 0
    assert "CorpusClusteringS2S: without labels: the report shows its label-free scores" in capsys.readouterr().err
    page = (tmp_path / "site" / "index.html").read_text()
    assert "CorpusClusteringS2S: label-free scores" in page and "<td>k=6</td>" in page and "<td>hdbscan</td>" in page


@pytest.fixture(scope="module")
def corpus_and_store(tmp_path_factory):
    from tecb_eval.cli import main

    folder = tmp_path_factory.mktemp("unlabelled")
    corpus = unlabelled_corpus(folder)
    results = folder / "r.jsonl"
    assert main(["run", "--data", str(corpus), "--model", "tfidf-lsa", "--config", "minibatch_kmeans:none",
                 "--config", "hdbscan:pca", "--k", "3,6", "--results", str(results), "--cache-dir",
                 str(folder / "c"), "--quiet"]) == 0
    return results


# Every field a label-free criterion writes into a row, and the time they took.
LABEL_FREE_ROW_FIELDS = ("silhouette", "silhouette_points", "silhouette_seed", "calinski_harabasz", "davies_bouldin",
                         "size_balance", "label_free_note", "spectral_k", "spectral_k_fit", "assignment",
                         "label_free_s", "dbcv", "dbcv_note", "dbcv_s", "npmi", "topic_diversity", "topic_words", "topics_s")


def test_a_labelled_run_computes_no_label_free_criterion_unless_asked(blurbs_folder, tmp_path, capsys):
    from tecb_eval.cli import main

    results = tmp_path / "r.jsonl"
    common = ["run", "--data", str(blurbs_folder), "--model", "tfidf-lsa", "--config", "hdbscan:none",
              "--limit-splits", "1", "--cache-dir", str(tmp_path / "c"), "--quiet"]
    argv = [*common, "--results", str(results)]
    assert main(argv) == 0
    (plain,) = [json.loads(line) for line in results.read_text().splitlines()]
    assert not set(LABEL_FREE_ROW_FIELDS) & set(plain), sorted(set(LABEL_FREE_ROW_FIELDS) & set(plain))
    # Asked for, a stored row without them is run again from the caches; its labelled scores stay.
    capsys.readouterr()
    assert main([*argv, "--label-free"]) == 0
    asked = [json.loads(line) for line in results.read_text().splitlines()][-1]
    assert {"silhouette", "spectral_k", "assignment", "label_free_s", "npmi", "topic_words"} <= set(asked)
    assert "dbcv" in asked or "dbcv_note" in asked
    assert asked["v_measure"] == plain["v_measure"] and asked["ami"] == plain["ami"]
    # The default again keeps what is stored: nothing computed, nothing taken away.
    capsys.readouterr()
    assert main(argv) == 0
    assert [json.loads(line) for line in results.read_text().splitlines()][-1] == asked
    # --topics alone: the topic words (and the assignment they are built from), none of the vectors' criteria.
    only = tmp_path / "topics.jsonl"
    assert main([*common, "--results", str(only), "--topics"]) == 0
    (topics,) = [json.loads(line) for line in only.read_text().splitlines()]
    assert "npmi" in topics and "assignment" in topics and "silhouette" not in topics and "dbcv" not in topics
