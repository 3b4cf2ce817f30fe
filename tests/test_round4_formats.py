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
