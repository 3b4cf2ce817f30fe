"""Every CSV file we write (``tecb_eval.files.csv_cell``: the training logs, fine-tuning's scores,
the layer sweep's table) quotes a name a spreadsheet would run as a formula, and what reads the
file back gets every name as it was given."""

from __future__ import annotations

import csv

import pandas as pd

# What a model folder, a dataset or a split may be called, and what a spreadsheet must not run.
NAMES = ['=HYPERLINK("http://x")', "+cmd", "@SUM(1)", "-2+3", "'=1+1", "''@x", "'plain", "-", "-0.5", "plain"]


def test_our_own_csvs_cell_rule_quotes_a_formula_and_gives_back_every_name():
    from tecb_eval.files import csv_cell, csv_value

    written = [csv_cell(name) for name in NAMES]
    assert written[:5] == ["'=HYPERLINK(\"http://x\")", "'+cmd", "'@SUM(1)", "'-2+3", "''=1+1"]
    assert written[5:] == ["'''@x", "'plain", "-", "-0.5", "plain"]  # only quotes before a formula get one more
    assert [csv_value(cell) for cell in written] == NAMES
    assert csv_cell(0.5) == 0.5 and csv_value(-1) == -1


def _cells(path) -> list[str]:
    with open(path, newline="", encoding="utf-8") as fh:
        return [cell for row in csv.reader(fh) for cell in row]


def test_the_training_logs_and_the_fine_tuning_scores_quote_a_name_and_read_it_back(tmp_path):
    """The training logs (CsvLog, read back by a resumed pre-training run) and fine-tuning's
    scores.csv (read back by a resumed run): a spreadsheet runs no name, and the run reads each
    name back as it was given."""
    from tecb_eval.finetuning.run import SCORE_FIELDS, _read_scores, _write_scores
    from tecb_eval.training.tracking import CsvLog, read_csv

    log = CsvLog(tmp_path / "evaluations.csv", ("dataset", "seed", "step", "v_measure"))
    for i, name in enumerate(NAMES):
        log.write({"dataset": name, "seed": 42, "step": i, "v_measure": -0.25})
    log.close()
    assert [row["dataset"] for row in read_csv(tmp_path / "evaluations.csv")] == NAMES
    assert not [c for c in _cells(tmp_path / "evaluations.csv") if c.startswith(("=", "+", "@")) or c == "-2+3"]

    rows = [{**{f: 0.5 for f in SCORE_FIELDS}, "model": name, "dataset": "d", "fold": "fold-01", "split": "s",
             "algorithm": "kmeans", "reduction": "none", "mteb_name": name, "seed": 1, "train_seed": 2}
            for name in NAMES]
    _write_scores(rows, tmp_path / "scores.csv")
    assert not [c for c in _cells(tmp_path / "scores.csv") if c.startswith(("=", "+", "@")) or c == "-2+3"]
    back = _read_scores(tmp_path / "scores.csv")
    assert [r["model"] for r in back] == NAMES and [r["mteb_name"] for r in back] == NAMES


def test_the_layer_sweeps_csv_quotes_a_model_name(tmp_path):
    from tecb_eval.layers import _write_csv

    _write_csv(pd.DataFrame({"model": NAMES, "layer": range(len(NAMES)), "v_measure": -0.5}), tmp_path / "layers.csv")
    cells = _cells(tmp_path / "layers.csv")
    assert "'=HYPERLINK(\"http://x\")" in cells and "'-2+3" in cells and "-0.5" in cells
    assert not [c for c in cells if c.startswith(("=", "+", "@")) or c == "-2+3"]
