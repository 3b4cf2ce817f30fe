"""Ward on a k-nearest-neighbour graph: an algorithm of its own in the registry
(``agglomerative_knn``), named so in every row, scikit-learn's connectivity-constrained Ward on
the vectors the grid clustered, and never part of the paper's default grid."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.cluster import AgglomerativeClustering
from sklearn.neighbors import kneighbors_graph
from tablefiles import unlabelled_corpus

from tecb_eval.clustering import algorithms as algo
from tecb_eval.clustering import registry
from tecb_eval.clustering.label_free import size_balance


def test_the_knn_graph_variant_is_named_apart_and_stays_out_of_the_papers_grid():
    entry = registry.algorithm("agglomerative_knn")
    assert "not exact Ward" in entry.description and entry.words == "Ward agglomerative clustering on a k-NN graph"
    assert "agglomerative_knn" not in registry.DEFAULT_ALGORITHMS and len(algo.PAPER_CONFIGURATIONS) == 14
    assert all(a != "agglomerative_knn" for a, _ in algo.configurations()[0])


def test_rows_of_the_knn_graph_variant_are_scikit_learns_connectivity_ward(tmp_path):
    import tecb_data
    from tecb_eval.cli import main
    from tecb_eval.grid.cache import EmbeddingStore

    folder = unlabelled_corpus(tmp_path / "corpus")
    results, cache = tmp_path / "r.jsonl", tmp_path / "c"
    assert main(["run", "--data", str(folder), "--model", "tfidf-lsa", "--config", "agglomerative_knn:none",
                 "--k", "3,6", "--stability", "0", "--results", str(results), "--cache-dir", str(cache), "--quiet"]) == 0
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert {r["algorithm"] for r in rows} == {"agglomerative_knn"} and len(rows) == 2
    texts = tecb_data.load(folder).splits[0].texts
    X = EmbeddingStore(cache, rows[0]["model_identity"]).embeddings().rows(texts).astype(np.float64)
    for row in rows:
        k = int(row["setting"].partition("=")[2])
        assert json.loads(row["algorithm_params"]) == {"n_clusters": k, "n_neighbors": 15}
        # The referee: scikit-learn's own estimator on the cached vectors and their 15-NN graph.
        found = AgglomerativeClustering(k, linkage="ward", connectivity=kneighbors_graph(X, 15)).fit_predict(X)
        assert row["n_clusters_found"] == k
        assert row["size_balance"] == pytest.approx(size_balance(np.bincount(found)), abs=1e-12)
