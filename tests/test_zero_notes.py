"""A V-measure of 0 for a reason (every text noise, one cluster) says so under the text tables, as
the report's pages and `recommend` say it (issue 45): 0.00 is no clustering, not a bad one."""

from __future__ import annotations


def test_dbstream_on_pca_gets_its_reason_under_table_3(demo_datasets, tmp_path):
    from tecb_eval.grid.run import run_grid
    from tecb_eval.reports import tables

    frame = run_grid([demo_datasets / "blurbs-clustering-s2s"], ["tfidf-lsa"],
                     configurations=["dbstream:pca", "minibatch_kmeans:none"], limit_splits=2,
                     results=tmp_path / "r.jsonl", cache_dir=tmp_path / "cache", progress=False, log=lambda m: None)
    assert (frame[frame.algorithm == "dbstream"].v_measure == 0).all()  # what the demo data gives DBSTREAM on PCA
    note = tables.tables(frame)["table3"][1]
    assert "0.00 for dbstream / pca / BlurbsClusteringS2S: one cluster (or none) for all texts." in note
    # k-means scores above 0: no note for it, in Table 3 or Table 2.
    assert "minibatch_kmeans / none /" not in note and "0.00 for" not in tables.tables(frame)["table2"][1]
