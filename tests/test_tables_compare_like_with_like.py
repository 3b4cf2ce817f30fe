"""A table, a comparison or an export compares like with like: the rows of Table 2, the pairs of
`compare` and MTEB's export are over the same splits for every model, and they say in one line
what they left out (``tecb_eval.reports``)."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

from tecb_eval.cli import main
from tecb_eval.grid.run import run_grid

S2S = "BlurbsClusteringS2S"
# The second model of every comparison: a tiny random BERT (tests/conftest.py), named as a user names
# a folder. Which model it is does not matter here, only that two models cover unequal splits.
TINY = "tiny-bert"


def _kmeans_mean(rows: pd.DataFrame, model: str, splits) -> float:
    mine = rows[(rows.model == model) & rows.split.isin(splits)]
    return float(mine.groupby("seed").v_measure.mean().mean())


def _store(path) -> pd.DataFrame:
    return pd.DataFrame([json.loads(line) for line in path.read_text().splitlines()])


@pytest.fixture(scope="module")
def unequal_runs(demo_datasets, tiny_bert, tmp_path_factory):
    """tfidf-lsa on 2 splits, the tiny BERT on 6 of the demo Blurbs S2S's 28, in one store."""
    tmp = tmp_path_factory.mktemp("like")
    results = tmp / "results.jsonl"
    data = str(demo_datasets / "blurbs-clustering-s2s")
    common = ["--data", data, "--results", str(results), "--cache-dir", str(tmp / "cache"), "--quiet",
              "--config", "minibatch_kmeans:none"]
    assert main(["run", "--model", "tfidf-lsa", "--limit-splits", "2", *common]) == 0
    assert main(["run", "--model", f"{tiny_bert},name={TINY}", "--limit-splits", "6", *common]) == 0
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
    assert figures[TINY] == pytest.approx(_kmeans_mean(rows, TINY, both), abs=5e-7)
    assert figures["tfidf-lsa"] == pytest.approx(_kmeans_mean(rows, "tfidf-lsa", both), abs=5e-7)
    # The tiny BERT's own 6-split mean is another number: the table did not use it.
    assert figures[TINY] != pytest.approx(_kmeans_mean(rows, TINY, rows.split.unique()), abs=1e-4)

    assert main(["table", str(results), "--table", "2"]) == 0
    shown = capsys.readouterr().out
    assert "Compared like with like" in shown and f"{TINY} 4" in shown
    assert f"Incomplete: {S2S} 2 of 28 splits" in shown


def test_compare_pairs_only_the_shared_splits_and_says_so(unequal_runs, capsys):
    _, results = unequal_runs
    capsys.readouterr()
    assert main(["compare", str(results), "--model", TINY, "--model", "tfidf-lsa", "--format", "csv",
                 "--resamples", "99"]) == 0
    captured = capsys.readouterr()
    table = pd.read_csv(io.StringIO(captured.out))
    rows = _store(results)
    both = sorted(rows[rows.model == "tfidf-lsa"].split.unique())
    assert table.loc[0, "mean_a"] == pytest.approx(_kmeans_mean(rows, TINY, both), abs=1e-4)
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


def test_a_memory_skipped_unit_of_one_model_drops_that_split_for_every_model(demo_datasets, tiny_bert, tmp_path,
                                                                              capsys):
    # What --memory-limit does to one model's largest units, made exact: its rows of one split gone.
    results = tmp_path / "results.jsonl"
    run_grid([demo_datasets / "blurbs-clustering-s2s"], ["tfidf-lsa", {"spec": str(tiny_bert), "name": TINY}],
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
    assert table.set_index(table.columns[0]).at[TINY, S2S] == pytest.approx(
        _kmeans_mean(rows, TINY, kept), abs=5e-7)
