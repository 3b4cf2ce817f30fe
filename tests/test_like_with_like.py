"""Issue 18, cases 1, 3 and 4: what a table, a comparison or an export compares is the same work for
every row; a seed set is a set; a manifest that was edited does not verify or load."""

from __future__ import annotations

import io
import json
import shutil

import pandas as pd
import pytest

from tecb_data import layout
from tecb_data.cli import main as data_main
from tecb_eval.cli import main
from tecb_eval.grid.run import run_grid

S2S = "BlurbsClusteringS2S"


def _kmeans_mean(rows: pd.DataFrame, model: str, splits) -> float:
    mine = rows[(rows.model == model) & rows.split.isin(splits)]
    return float(mine.groupby("seed").v_measure.mean().mean())


def _store(path) -> pd.DataFrame:
    return pd.DataFrame([json.loads(line) for line in path.read_text().splitlines()])


@pytest.fixture(scope="module")
def unequal_runs(demo_datasets, tmp_path_factory):
    """tfidf-lsa on 2 splits, minilm-l6 on 6 of the demo Blurbs S2S's 28, in one store."""
    tmp = tmp_path_factory.mktemp("like")
    results = tmp / "results.jsonl"
    data = str(demo_datasets / "blurbs-clustering-s2s")
    common = ["--data", data, "--results", str(results), "--cache-dir", str(tmp / "cache"), "--quiet",
              "--config", "minibatch_kmeans:none"]
    assert main(["run", "--model", "tfidf-lsa", "--limit-splits", "2", *common]) == 0
    assert main(["run", "--model", "minilm-l6", "--limit-splits", "6", *common]) == 0
    return tmp, results


def test_table_2_ranks_models_over_the_splits_both_have_and_says_so(unequal_runs, capsys):
    tmp, results = unequal_runs
    capsys.readouterr()
    assert main(["table", str(results), "--table", "2", "--format", "csv"]) == 0
    out = capsys.readouterr().out
    table = pd.read_csv(io.StringIO(out))
    rows = _store(results)
    both = sorted(rows[rows.model == "tfidf-lsa"].split.unique())
    assert len(both) == 2
    figures = table.set_index(table.columns[0])[S2S]
    assert figures["minilm-l6"] == pytest.approx(_kmeans_mean(rows, "minilm-l6", both), abs=5e-7)
    assert figures["tfidf-lsa"] == pytest.approx(_kmeans_mean(rows, "tfidf-lsa", both), abs=5e-7)
    # minilm-l6's own 6-split mean is another number: the table did not use it.
    assert figures["minilm-l6"] != pytest.approx(_kmeans_mean(rows, "minilm-l6", rows.split.unique()), abs=1e-4)

    assert main(["table", str(results), "--table", "2"]) == 0
    shown = capsys.readouterr().out
    assert "Compared like with like" in shown and "minilm-l6 4" in shown
    assert f"Incomplete: {S2S} 2 of 28 splits" in shown


def test_compare_pairs_only_the_shared_splits_and_says_so(unequal_runs, capsys):
    _, results = unequal_runs
    capsys.readouterr()
    assert main(["compare", str(results), "--model", "minilm-l6", "--model", "tfidf-lsa", "--format", "csv",
                 "--resamples", "99"]) == 0
    captured = capsys.readouterr()
    table = pd.read_csv(io.StringIO(captured.out))
    rows = _store(results)
    both = sorted(rows[rows.model == "tfidf-lsa"].split.unique())
    assert table.loc[0, "mean_a"] == pytest.approx(_kmeans_mean(rows, "minilm-l6", both), abs=1e-4)
    assert "Compared like with like" in captured.err and "Incomplete" in captured.err


def test_export_leaves_incomplete_results_out_of_mtebs_layout(unequal_runs, capsys):
    tmp, results = unequal_runs
    out = tmp / "export"
    assert main(["export", str(results), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert not list((out / "mteb").rglob(f"{S2S}.json")), "a mean over 2 of 28 splits is not MTEB's score"
    assert f"{S2S}" in err and "2 of 28" in err
    note = (out / "table2.md").read_text()
    assert "Compared like with like" in note and "Incomplete" in note


def test_a_memory_skipped_unit_of_one_model_drops_that_split_for_every_model(demo_datasets, tmp_path, capsys):
    # What --memory-limit does to one model's largest units, made exact: its rows of one split gone.
    results = tmp_path / "results.jsonl"
    run_grid([demo_datasets / "blurbs-clustering-s2s"], ["tfidf-lsa", "minilm-l6"],
             configurations=["minibatch_kmeans:none"], cache_dir=tmp_path / "cache", results=results,
             limit_splits=4, progress=False, log=lambda m: None)
    lines = results.read_text().splitlines()
    gone = [line for line in lines if json.loads(line)["model"] == "tfidf-lsa" and json.loads(line)["split"] == "coarse-02"]
    assert len(gone) == 1
    results.write_text("".join(line + "\n" for line in lines if line not in gone))
    assert main(["table", str(results), "--table", "2", "--format", "csv"]) == 0
    table = pd.read_csv(io.StringIO(capsys.readouterr().out))
    rows = _store(results)
    kept = sorted(set(rows.split) - {"coarse-02"})
    assert table.set_index(table.columns[0]).at["minilm-l6", S2S] == pytest.approx(
        _kmeans_mean(rows, "minilm-l6", kept), abs=5e-7)


def test_the_order_of_a_seed_set_changes_nothing(demo_datasets, tmp_path):
    results = tmp_path / "results.jsonl"
    options = dict(configurations=["minibatch_kmeans:none", "minibatch_kmeans:pca"], cache_dir=tmp_path / "cache",
                   results=results, limit_splits=2, progress=False, log=lambda m: None)
    data = [demo_datasets / "tenkgnad-clustering-p2p"]
    first = run_grid(data, ["tfidf-lsa"], seeds=(42, 1, 2), **options)
    written = results.read_bytes()
    again = run_grid(data, ["tfidf-lsa"], seeds=(2, 1, 42), **options)
    assert results.read_bytes() == written, "the same seed set in another order computed its cells again"
    assert set(first.model_identity) == set(again.model_identity) and set(first.seeds) == {"1,2,42"}
    pd.testing.assert_frame_equal(first, again[first.columns])
    other = tmp_path / "other.jsonl"
    reordered = run_grid(data, ["tfidf-lsa"], seeds=(2, 42, 1), **{**options, "results": other})
    timings = ["encode_s", "reduce_s", "cluster_s", "reduce_cached"]  # the second run reads the cache
    pd.testing.assert_frame_equal(first.drop(columns=timings), reordered[first.columns].drop(columns=timings))


@pytest.mark.parametrize("field, value", [("mteb_name", "TenKGnadClusteringS2S"), ("seed", 7),
                                          ("dataset", "tenkgnad-clustering-s2s"), ("mteb_name", None),
                                          ("splits", [])])
def test_an_edited_manifest_neither_verifies_nor_loads(demo_datasets, tmp_path, capsys, field, value):
    folder = tmp_path / "blurbs-clustering-s2s"
    shutil.copytree(demo_datasets / "blurbs-clustering-s2s", folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, field: value}))
    assert data_main(["verify", str(folder)]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "manifest.json" in err
    results = tmp_path / "results.jsonl"
    assert main(["run", "--data", str(folder), "--model", "tfidf-lsa", "--config", "minibatch_kmeans:none",
                 "--results", str(results), "--limit-splits", "1", "--cache-dir", str(tmp_path / "c"), "--quiet"]) != 0
    assert not results.exists() or results.read_text() == ""


def test_a_manifest_forged_with_a_fresh_fingerprint_is_still_checked_against_the_registry(demo_datasets, tmp_path,
                                                                                          capsys):
    folder = tmp_path / "blurbs-clustering-s2s"
    shutil.copytree(demo_datasets / "blurbs-clustering-s2s", folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    forged = {**manifest, "mteb_name": "TenKGnadClusteringS2S"}
    forged["fingerprint"] = layout.manifest_fingerprint(forged)
    (folder / "manifest.json").write_text(json.dumps(forged))
    assert data_main(["verify", str(folder)]) == 1
    assert "BlurbsClusteringS2S" in capsys.readouterr().err


def test_the_fingerprint_is_the_same_for_the_same_build_and_moves_with_the_meaning(demo_datasets):
    manifest = json.loads((demo_datasets / "blurbs-clustering-s2s" / "manifest.json").read_text())
    assert layout.manifest_fingerprint(manifest) == manifest["fingerprint"]
    for field in layout.MEANING_FIELDS:
        assert layout.manifest_fingerprint({**manifest, field: "x"}) != manifest["fingerprint"], field
    # Provenance is not meaning: another package version builds the same dataset.
    assert layout.manifest_fingerprint({**manifest, "package_version": "9"}) == manifest["fingerprint"]
