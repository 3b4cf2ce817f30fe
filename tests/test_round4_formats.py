"""Round 4 of the adversarial trial, the formats we write: a name or a label reaches Markdown, LaTeX,
CSV, a shell command or a URL only through that format's own quoting, and a model name with a
control character is refused where it is given."""

from __future__ import annotations

import csv
import io
import re
import shlex

import pandas as pd
import pytest

from tecb_data.errors import UserError
from tecb_eval.reports.tables import format_table

HOSTILE = ["a|b", "two\nlines", "=HYPERLINK(\"http://x\")", "+cmd", "@SUM(1)", "\\input{/etc/passwd}", "x_~^&%$#{}"]


def _table() -> pd.DataFrame:
    return pd.DataFrame({"BlurbsClusteringS2S": [0.1 * (i + 1) for i in range(len(HOSTILE))]},
                        index=pd.Index(HOSTILE, name="model"))


def test_markdown_a_name_adds_no_column_and_ends_no_row():
    text = format_table(_table(), "md")
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert len(rows) == 2 + len(HOSTILE)
    for row in rows:
        # Unescaped pipes: the cell borders only, three per row of two columns.
        assert len(re.findall(r"(?<!\\)\|", row)) == 3, row


def test_latex_every_special_character_is_escaped():
    text = format_table(_table(), "latex")
    body = [line for line in text.splitlines() if line.endswith(r"\\")][1:]
    assert len(body) == len(HOSTILE)
    assert r"\textbackslash{}input\{/etc/passwd\}" in text and r"x\_\textasciitilde{}\textasciicircum{}\&\%\$\#\{\}" in text
    assert "\\input{" not in text


def test_csv_a_formula_stays_text_and_a_number_stays_a_number():
    frame = _table()
    frame.loc["-0.5"] = -0.5
    parsed = list(csv.reader(io.StringIO(format_table(frame, "csv"))))
    names = [row[0] for row in parsed[1:]]
    assert "'=HYPERLINK(\"http://x\")" in names and "'+cmd" in names and "'@SUM(1)" in names
    assert "-0.5" in names  # a number is not a formula
    assert not any(n.startswith(("=", "+", "@")) for n in names)


def test_the_cards_build_command_pastes_back_into_a_shell(tmp_path):
    from tecb_data import cli

    src = tmp_path / "news.csv"
    records = [{"Titel des Buches": f"Titel {topic} {i}", "Sachgebiet & Thema": topic}
               for topic in ("Sport", "Kultur", "Wirtschaft", "Politik") for i in range(12)]
    with open(src, "w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
    out = tmp_path / "out"
    assert cli.main(["build", "--source", "table", "--input", str(src), "--name", "news", "--text", "Titel des Buches",
                     "--label", "Sachgebiet & Thema", "--licence", "CC-BY-4.0", "--out", str(out), "--quiet"]) == 0
    card = next(out.rglob("README.md")).read_text(encoding="utf-8")
    command = re.search(r"Built with `tecb` \S+ \((`+) ?(.*?) ?\1\)", card).group(2)
    argv = shlex.split(command)
    assert argv[argv.index("--text") + 1] == "Titel des Buches"
    assert argv[argv.index("--label") + 1] == "Sachgebiet & Thema"


@pytest.mark.parametrize("name", ["evil\nimport os", "tab\there", "line\u2028sep"])
def test_a_model_name_with_a_control_character_is_refused_where_it_is_given(name):
    from tecb_eval.models.spec import model_spec

    with pytest.raises(UserError, match="control character"):
        model_spec({"spec": "tfidf-lsa", "name": name})


def test_a_model_folder_with_a_newline_in_its_name_is_refused(tmp_path):
    from tecb_eval.models.spec import model_spec

    folder = tmp_path / "model\nimport os"
    folder.mkdir()
    with pytest.raises(UserError, match="control character"):
        model_spec(str(folder))


def test_a_figure_named_with_url_characters_is_linked_by_its_escaped_name(tmp_path, demo_datasets):
    from reportstore import two_model_store
    from tecb_eval.reports.html import render

    store = two_model_store(demo_datasets, tmp_path, configurations=["minibatch_kmeans:none"])
    extra = tmp_path / "figs"
    extra.mkdir()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tecb_eval.reports.figures import save_figure

    fig = plt.figure(figsize=(1, 1))
    save_figure(fig, extra / "a#b?c.png")  # a tecb figure drawn from no results store: --figures takes it
    render([store], tmp_path / "report", figure_folders=[extra], draw_figures=False, log=lambda *_: None)
    page = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    assert re.search(r'src="figures/[^"]*a%23b%3Fc\.png"', page) and "#b?c.png\"" not in page.split("<img")[1]


def test_one_name_for_two_different_models_is_refused(demo_datasets, tmp_path):
    """Round 4, W4: two models under one name= would be averaged into one row of every table."""
    from tecb_eval.grid.run import run_grid

    with pytest.raises(UserError, match="'twin' is given to two different models"):
        run_grid([demo_datasets / "blurbs-clustering-s2s"],
                 [{"spec": "tfidf-lsa", "name": "twin"}, {"spec": "minilm-l6", "name": "twin"}],
                 configurations=["minibatch_kmeans:none"], limit_splits=1, results=tmp_path / "r.jsonl",
                 progress=False)
    assert not (tmp_path / "r.jsonl").exists()


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
