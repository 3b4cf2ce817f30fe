"""Tables, exports and the `tecb-eval` command on a small real grid (tfidf-lsa, demo data)."""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from tecb_eval.reports import tables as report
from tecb_eval.clustering.algorithms import PAPER_CONFIGURATIONS
from tecb_eval.cli import main
from tecb_eval.cli.options import parse_model
from tecb_eval.grid.store import read_results
from helpers import SHARED

SHARED_REFERENCE = SHARED / "reference" / report.REFERENCE_CSV
CONFIGS = ["minibatch_kmeans:none", "agglomerative:pca", "hdbscan:pca"]


@pytest.fixture(scope="module")
def grid_run(demo_datasets, tmp_path_factory):
    """`tecb-eval run` over both TenKGnad demo datasets (a folder of the two), with exports, run once
    for the module: (root, its argv, what it printed). The tests read its store and exports."""
    import contextlib
    import io

    root = tmp_path_factory.mktemp("eval-cli")
    for name in ("tenkgnad-clustering-s2s", "tenkgnad-clustering-p2p"):
        shutil.copytree(demo_datasets / name, root / "data" / name)
    args = ["run", "--data", str(root / "data"), "--model", "tfidf-lsa", "--model", "tfidf-lsa,name=tfidf-again",
            "--results", str(root / "results.jsonl"), "--cache-dir", str(root / "cache"), "--quiet",
            "--out", str(root / "out"), "--no-figure1"]  # every split: MTEB's JSON holds complete results only
    for config in CONFIGS:
        args += ["--config", config]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(args) == 0, err.getvalue()
    return root, args, out.getvalue()


@pytest.mark.slow
def test_run_prints_tables_and_writes_every_export(grid_run, capsys):
    root, args, printed = grid_run
    assert "Table 2" in printed and "Table 3" in printed and "| tfidf-lsa |" in printed
    frame = read_results(root / "results.jsonl")
    assert len(frame) == 2 * 2 * 10 * len(CONFIGS)
    assert {"model_identity", "dataset_fingerprint", "algorithm_params", "reduce_s", "cluster_s", "ami", "ari"} <= set(frame.columns)
    out = root / "out"
    with open(out / "results.csv", encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == report.HEADER + ["TenKGnadClusteringS2S", "TenKGnadClusteringP2P"]
    assert [r[1:3] for r in rows[1:4]] == [["minibatch_kmeans", "-"], ["agglomerative", "pca"], ["hdbscan", "pca"]]
    result = json.loads(next((out / "mteb" / "results" / "tfidf-lsa").rglob("TenKGnadClusteringS2S.json")).read_text())
    scores = result["scores"]["test"][0]
    assert result["task_name"] == "TenKGnadClusteringS2S" and len(scores["v_measures"]) == 10
    assert scores["tecb_profile"] == "current" and result["dataset_revision"] == frame[frame.mteb_name == "TenKGnadClusteringS2S"].dataset_fingerprint.iloc[0]
    assert scores["main_score"] == pytest.approx(sum(scores["v_measures"]) / 10)
    # One MTEB model folder per model, though tfidf-lsa is fitted once per dataset.
    assert len(list((out / "mteb" / "results" / "tfidf-lsa").iterdir())) == 1
    assert (out / "table3.png").read_bytes()[:4] == b"\x89PNG"
    # A rerun resumes: nothing new in the store, same tables.
    assert main(args) == 0
    assert capsys.readouterr().out == printed
    assert len(read_results(root / "results.jsonl")) == len(frame)


@pytest.mark.slow
def test_table_command_formats(grid_run, capsys):
    root = grid_run[0]
    results = str(root / "results.jsonl")
    assert main(["table", results, "--table", "2", "--format", "latex"]) == 0
    latex = capsys.readouterr().out
    # The demo sample's rows say they are synthetic, in every table made of them.
    assert latex.startswith(f"% {report.DEMO_NOTE}\n% Table 2: ") and "\n\\begin{tabular}" in latex
    assert "tfidf-again" in latex
    assert "\\bottomrule" in latex
    # The same model under two names: one is the best (*), the other's difference to it does not hold (=).
    rows = {line.split(" & ")[0]: line for line in latex.splitlines() if line.startswith("tfidf")}
    assert rows["tfidf-again"].count(" * ") == 2 and rows["tfidf-lsa"].count(" = ") == 2
    assert main(["table", results, "--table", "3", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("algorithm,reduction,TenKGnadClusteringS2S") and len(lines) == 1 + len(CONFIGS)
    assert main(["table", results, "--table", "full", "--format", "csv"]) == 0
    assert capsys.readouterr().out.count("tfidf-again,") == len(CONFIGS)


def test_user_errors_are_one_line(tmp_path, capsys):
    assert main(["table", str(tmp_path / "none.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tecb-eval: error: ") and err.count("\n") == 1 and "none.jsonl" in err
    assert main(["run", "--data", str(tmp_path), "--model", "tfidf-lsa", "--results", str(tmp_path / "r.jsonl")]) == 2
    assert "neither a dataset folder" in capsys.readouterr().err
    assert parse_model("models/gbert,layer=6,max_length=128") == {"spec": "models/gbert", "layer": 6, "max_length": 128}


def test_reference_table_is_read_with_its_spreadsheet_artifacts_repaired():
    if not SHARED_REFERENCE.is_file():
        pytest.skip(f"{SHARED_REFERENCE} is absent (the authors' results live in ../shared/reference)")
    reference = report.read_reference(SHARED_REFERENCE)
    models = sorted(reference.model.unique())
    assert len(models) == 13 and "paraphrase-multilingual-mpnet-base-v2" in models
    assert not any(m.endswith("-v3") for m in models)
    assert len(reference) == 13 * len(PAPER_CONFIGURATIONS) * 6
    gbert = reference[(reference.model == "GBERT-base") & (reference.algorithm == "minibatch_kmeans")
                      & (reference.reduction == "none") & (reference.mteb_name == "BlurbsClusteringS2S")]
    assert gbert.v_measure.item() == pytest.approx(0.112671049316939)
    t3 = report.paper_table3(reference)
    assert list(t3.index) == PAPER_CONFIGURATIONS and "RedditClusteringP2P" in t3.columns


@pytest.mark.slow
def test_side_by_side_plot_for_a_model_the_authors_ran(grid_run, tmp_path):
    if not SHARED_REFERENCE.is_file():
        pytest.skip(f"{SHARED_REFERENCE} is absent")
    from tecb_eval.reports.export import export_all

    root = grid_run[0]
    frame = read_results(root / "results.jsonl")
    frame.loc[frame.model == "tfidf-again", "model"] = "GBERT-base"  # pretend: a model the authors also ran
    written = export_all(frame, tmp_path, reference=SHARED_REFERENCE, log=lambda m: None)
    assert tmp_path / "vs-authors-GBERT-base.png" in written


def _md_rows(text: str) -> dict[str, list[str]]:
    return {cells[0]: cells[1:] for cells in
            ([c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("| "))}


def _finished_grid_with_reference(grid_run):
    """The grid run's folder and its results, for the tests that need the paper's CSV."""
    if not SHARED_REFERENCE.is_file():
        pytest.skip(f"{SHARED_REFERENCE} is absent")
    root = grid_run[0]
    return root, read_results(root / "results.jsonl")


@pytest.mark.slow
def test_table3_beside_the_paper_in_export_and_table_command(grid_run, tmp_path, capsys):
    from tecb_eval.reports.export import export_all

    root, frame = _finished_grid_with_reference(grid_run)
    export_all(frame, tmp_path / "a", reference=SHARED_REFERENCE, log=lambda m: None)
    md = (tmp_path / "a" / "table3.md").read_text()
    rows = _md_rows(md)
    assert rows["algorithm / reduction / source"] == ["TenKGnadClusteringS2S", "TenKGnadClusteringP2P", "avg"]
    # The paper's printed TenKGnad figures (12-model average); avg over the two datasets run here.
    assert rows["minibatch_kmeans / none / paper"] == ["16.78", "32.21", "24.49"]
    assert rows["hdbscan / pca / paper"][:2] == ["7.08", "10.60"]
    ours = report.table3(frame)
    assert [c.split()[0] for c in rows["agglomerative / pca / ours"][:2]] == [
        f"{100 * v:.2f}" for v in ours.loc[("agglomerative", "pca")].iloc[:2]]
    assert "12 models" in md and "sentence-t5-large" in md and "not its printed avg" in md
    assert md.startswith(report.DEMO_NOTE)  # the demo sample's rows mark themselves
    with open(tmp_path / "a" / "table3.csv", encoding="utf-8", newline="") as fh:
        table = list(csv.reader(fh))
    # One seed: the SD over splits beside each figure, no SD over seeds.
    assert table[0] == ["algorithm", "reduction", "source", "TenKGnadClusteringS2S", "TenKGnadClusteringS2S sd_splits",
                        "TenKGnadClusteringP2P", "TenKGnadClusteringP2P sd_splits", "avg"]
    assert [r[:3] for r in table[1:3]] == [["minibatch_kmeans", "none", "ours"], ["minibatch_kmeans", "none", "paper"]]
    assert len(table) == 1 + 2 * len(CONFIGS)
    # No model of this run is one the paper printed: Table 2 stays ours alone.
    assert "| model |" in (tmp_path / "a" / "table2.md").read_text()
    # `table --reference` prints what the export writes; every export is byte-identical.
    results = str(root / "results.jsonl")
    assert main(["table", results, "--table", "3", "--reference", str(SHARED_REFERENCE)]) == 0
    assert capsys.readouterr().out == md
    assert main(["export", results, "--out", str(tmp_path / "b"), "--reference", str(SHARED_REFERENCE)]) == 0
    for name in ("table2.md", "table2.csv", "table3.md", "table3.csv", "table3.png", "results.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


@pytest.mark.slow
def test_table2_beside_the_paper_for_a_model_it_printed(grid_run, tmp_path):
    root, frame = _finished_grid_with_reference(grid_run)
    frame.loc[frame.model == "tfidf-again", "model"] = "deepset/gbert-base"  # pretend: a model the paper printed
    shown = report.tables(frame, report.read_reference(SHARED_REFERENCE))
    rows = _md_rows(report.format_table(*shown["table2"][:1], note=shown["table2"][1]))
    assert rows["deepset/gbert-base / paper"] == ["24.23", "37.16", "30.70"]
    assert "tfidf-lsa / ours" in rows and "tfidf-lsa / paper" not in rows


@pytest.mark.slow
def test_table3_plot_labels_the_paper_bars_and_the_demo(grid_run, tmp_path, monkeypatch, capsys):
    if not SHARED_REFERENCE.is_file():
        pytest.skip(f"{SHARED_REFERENCE} is absent")
    from tecb_eval.reports import figures
    from tecb_eval.reports.export import export_all

    seen = []
    drawn = figures.table3_figure

    def recording(*args, **options):
        fig = drawn(*args, **options)
        bars = [c.get_label() for c in fig.get_axes()[0].containers if not c.get_label().startswith("_")]
        seen.append((bars, fig._suptitle.get_text()))
        return fig

    monkeypatch.setattr(figures, "table3_figure", recording)
    root = grid_run[0]
    results = str(root / "results.jsonl")
    # Rows that are not the demo sample's (as a real build's are): the paper's bars beside ours.
    frame = read_results(root / "results.jsonl").assign(synthetic=False)
    export_all(frame, tmp_path / "plain", reference=SHARED_REFERENCE, log=lambda m: None)
    labels, title = seen[-1]
    assert labels[0].startswith("this run (") and labels[1] == report.PAPER_BARS_LABEL and "comparable" not in title
    assert "12 models" in labels[1] and "sentence-t5-large left out" in labels[1]

    # The demo: its printed output, table3.md and table3.png all say it is not the paper's data.
    demo = ["demo", "--data", str(root / "data" / "tenkgnad-clustering-s2s"), "--model", "tfidf-lsa",
            "--out", str(tmp_path / "demo"), "--cache-dir", str(root / "cache"), "--limit-splits", "1",
            "--quiet", "--no-figure1", "--reference", str(SHARED_REFERENCE)]
    # A wrong --reference stops the demo before its grid runs.
    assert main([*demo[:-1], results]) == 2
    assert "not the authors'" in capsys.readouterr().err and not (tmp_path / "demo").exists()
    assert main(demo) == 0
    printed = capsys.readouterr()
    assert printed.out.startswith(f"Note: {report.DEMO_NOTE}") and "NOT comparable" in printed.err
    md = (tmp_path / "demo" / "table3.md").read_text()
    assert md.startswith(report.DEMO_NOTE) and "| minibatch_kmeans / none / paper |" in md
    assert (tmp_path / "demo" / "table2.md").read_text().startswith(report.DEMO_NOTE)
    labels, title = seen[-1]
    # Synthetic scores are never drawn beside the paper's (table3.md keeps the paper's rows).
    assert "NOT comparable with the paper" in title and "synthetic demo data" in labels[0] and len(labels) == 1
    assert "not drawn beside synthetic scores" in title
    # `export` of the demo's store writes the same bytes, with --demo or without (its rows say it).
    store = str(tmp_path / "demo" / "results.jsonl")
    for flags in (["--demo"], []):
        again = tmp_path / f"again{len(flags)}"
        assert main(["export", store, "--out", str(again), *flags, "--reference", str(SHARED_REFERENCE)]) == 0
        for name in ("table2.md", "table3.md", "table3.csv", "table3.png"):
            assert (tmp_path / "demo" / name).read_bytes() == (again / name).read_bytes(), name
    assert main(["export", store, "--out", str(tmp_path / "alone"), "--demo"]) == 0
    assert "NOT comparable" in seen[-1][1] and (tmp_path / "alone" / "table3.md").read_text().startswith(report.DEMO_NOTE)
    for flags in (["--demo"], []):
        assert main(["table", store, *flags]) == 0
        assert capsys.readouterr().out.count(report.DEMO_NOTE) == 2


def test_formats_carry_the_note_where_they_can():
    import pandas as pd

    table = pd.DataFrame({"A": [0.1234], "avg": [0.1234]}, index=pd.Index(["m"], name="model"))
    assert report.format_table(table, "md", note="one\ntwo").startswith("one\n\ntwo\n\n| model | A | avg |")
    assert report.format_table(table, "latex", note="one").startswith("% one\n\\begin{tabular}")
    assert report.format_table(table, "csv", note="one") == "model,A,avg\nm,0.123400,0.123400\n"


def test_dbstream_on_pca_gets_its_reason_under_table_3(demo_datasets, tmp_path):
    """A V-measure of 0 for a reason (every text noise, one cluster) says so under the text tables, as
    the report's pages and `recommend` say it: 0.00 is no clustering, not a bad one."""
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
