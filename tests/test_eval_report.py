"""Tables, exports and the `tecb-eval` command on a small real grid (tfidf-lsa, demo data)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tecb_data.build import build
from tecb_data.demo import demo_input
from tecb_eval import report
from tecb_eval.algorithms import PAPER_CONFIGURATIONS
from tecb_eval.cli import main, parse_model
from tecb_eval.store import read_results

SHARED_REFERENCE = Path(__file__).resolve().parents[1].parent / "shared" / "reference" / report.REFERENCE_CSV
CONFIGS = ["minibatch_kmeans:none", "agglomerative:pca", "hdbscan:pca"]


@pytest.fixture(scope="module")
def grid_run(tmp_path_factory):
    """`tecb-eval run` over both TenKGnad demo datasets, with exports."""
    root = tmp_path_factory.mktemp("eval-cli")
    build("tenkgnad", demo_input("tenkgnad"), root / "data")
    args = ["run", "--data", str(root / "data"), "--model", "tfidf-lsa", "--model", "tfidf-lsa,name=tfidf-again",
            "--results", str(root / "results.jsonl"), "--cache-dir", str(root / "cache"), "--quiet",
            "--limit-splits", "3", "--out", str(root / "out"), "--no-figure1"]
    for config in CONFIGS:
        args += ["--config", config]
    return root, args


def test_run_prints_tables_and_writes_every_export(grid_run, capsys):
    root, args = grid_run
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "Table 2" in printed and "Table 3" in printed and "| tfidf-lsa |" in printed
    frame = read_results(root / "results.jsonl")
    assert len(frame) == 2 * 2 * 3 * len(CONFIGS)
    assert {"model_identity", "dataset_fingerprint", "algorithm_params", "reduce_s", "cluster_s", "ami", "ari"} <= set(frame.columns)
    out = root / "out"
    with open(out / "results.csv", encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == report.HEADER + ["TenKGnadClusteringS2S", "TenKGnadClusteringP2P"]
    assert [r[1:3] for r in rows[1:4]] == [["minibatch_kmeans", "-"], ["agglomerative", "pca"], ["hdbscan", "pca"]]
    result = json.loads(next((out / "mteb" / "tfidf-lsa").rglob("TenKGnadClusteringS2S.json")).read_text())
    scores = result["scores"]["test"][0]
    assert result["task_name"] == "TenKGnadClusteringS2S" and len(scores["v_measures"]) == 3
    assert scores["main_score"] == pytest.approx(sum(scores["v_measures"]) / 3)
    # One MTEB model folder per model, though tfidf-lsa is fitted once per dataset.
    assert len(list((out / "mteb" / "tfidf-lsa").iterdir())) == 1
    assert (out / "table3.png").read_bytes()[:4] == b"\x89PNG"
    # A rerun resumes: nothing new in the store, same tables.
    assert main(args) == 0
    assert capsys.readouterr().out == printed
    assert len(read_results(root / "results.jsonl")) == len(frame)


def test_table_command_formats(grid_run, capsys):
    root, args = grid_run
    main(args)
    capsys.readouterr()
    results = str(root / "results.jsonl")
    assert main(["table", results, "--table", "2", "--format", "latex"]) == 0
    latex = capsys.readouterr().out
    assert latex.startswith("\\begin{tabular}") and "tfidf-again" in latex and "\\bottomrule" in latex
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
    t3 = report.reference_table3(reference)
    assert list(t3.index) == PAPER_CONFIGURATIONS and "RedditClusteringP2P" in t3.columns


def test_side_by_side_plot_for_a_model_the_authors_ran(grid_run, tmp_path):
    if not SHARED_REFERENCE.is_file():
        pytest.skip(f"{SHARED_REFERENCE} is absent")
    from tecb_eval.export import export_all

    root, args = grid_run
    main(args)
    frame = read_results(root / "results.jsonl")
    frame.loc[frame.model == "tfidf-again", "model"] = "GBERT-base"  # pretend: a model the authors also ran
    written = export_all(frame, tmp_path, reference=SHARED_REFERENCE, log=lambda m: None)
    assert tmp_path / "vs-authors-GBERT-base.png" in written
