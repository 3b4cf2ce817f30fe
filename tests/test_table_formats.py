"""Tables in Markdown, LaTeX and CSV (``tecb_eval.reports.tables``, printed by `tecb-eval table` and
written by `export`): a name reaches a table only through that format's own quoting, so a name
adds no column, ends no row and runs as no formula in a spreadsheet."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pandas as pd
import pytest

from helpers import store_rows, write_store
from tecb_eval.cli import main
from tecb_eval.reports.tables import format_table

# -- format_table on names built by hand -----------------------------------------------------------

NAMES = ["a|b", "two\nlines", "=HYPERLINK(\"http://x\")", "+cmd", "@SUM(1)", "\\input{/etc/passwd}", "x_~^&%$#{}"]


def _table() -> pd.DataFrame:
    return pd.DataFrame({"BlurbsClusteringS2S": [0.1 * (i + 1) for i in range(len(NAMES))]},
                        index=pd.Index(NAMES, name="model"))


def test_markdown_a_name_adds_no_column_and_ends_no_row():
    text = format_table(_table(), "md")
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert len(rows) == 2 + len(NAMES)
    for row in rows:
        # Unescaped pipes: the cell borders only, three per row of two columns.
        assert len(re.findall(r"(?<!\\)\|", row)) == 3, row


def test_latex_every_special_character_is_escaped():
    text = format_table(_table(), "latex")
    body = [line for line in text.splitlines() if line.endswith(r"\\")][1:]
    assert len(body) == len(NAMES)
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


# -- the commands' tables of a store whose model names are hostile ---------------------------------

HOSTILE = ['=HYPERLINK("http://x")|b', "two\nlines|x", "-2+3", "@SUM(1)", "-inf", "\\input{a}_%$#&{}~^"]


@pytest.fixture(scope="module")
def hostile_store(small_store, tmp_path_factory) -> Path:
    """The store's k-means rows once per hostile model name (as an edited or shared store holds them)."""
    rows = [r for r in store_rows(small_store) if r["algorithm"] == "minibatch_kmeans"]
    return write_store(tmp_path_factory.mktemp("hostile") / "hostile.jsonl",
                       [{**r, "model": name} for name in HOSTILE for r in rows])


def _cells(line: str) -> list[str]:
    return re.split(r"(?<!\\)\|", line)[1:-1]


def test_markdown_tables_of_hostile_names_keep_their_columns_and_rows(hostile_store, capsys):
    assert main(["table", str(hostile_store), "--table", "2"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert len(rows) == 2 + len(HOSTILE)  # header, rule, one row per model: no name split a row
    assert {len(_cells(line)) for line in rows} == {3}  # model, the dataset, avg: no name added a column


def test_latex_tables_escape_every_special_character(hostile_store, capsys):
    assert main(["table", str(hostile_store), "--table", "2", "--format", "latex"]) == 0
    text = capsys.readouterr().out
    assert r"\textbackslash{}input\{a\}\_\%\$\#\&\{\}\textasciitilde{}\textasciicircum{}" in text
    body = [line for line in text.splitlines() if line.endswith(r"\\")]
    assert len(body) == 1 + len(HOSTILE) and all(line.count(" & ") == 2 for line in body)


def _no_formula(text: str) -> list[list[str]]:
    parsed = list(csv.reader(io.StringIO(text)))
    for row in parsed:
        for cell in row:
            assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell
            if cell.startswith("-") and cell != "-":  # "-" alone: the reference table's "no reduction"
                float(cell)  # a negative number stays a number; "-2+3" and "-inf" are quoted
    return parsed


@pytest.mark.parametrize("argv", [["--table", "2"], ["--table", "full"], ["--table", "3"]])
def test_every_csv_table_quotes_a_formula_by_owasps_rule(hostile_store, capsys, argv):
    assert main(["table", str(hostile_store), "--format", "csv", *argv]) == 0
    parsed = _no_formula(capsys.readouterr().out)
    if argv[1] != "3":
        names = {row[0] for row in parsed[1:]}
        assert {"'=HYPERLINK(\"http://x\")|b", "'-2+3", "'@SUM(1)", "'-inf"} <= names


def test_the_exports_csv_files_quote_a_formula(hostile_store, tmp_path, capsys):
    store = write_store(tmp_path / "s.jsonl", [r for r in store_rows(hostile_store) if "\n" not in r["model"]])
    assert main(["export", str(store), "--out", str(tmp_path / "out")]) == 0
    for name in ("results.csv", "table2.csv", "table3.csv"):
        _no_formula((tmp_path / "out" / name).read_text(encoding="utf-8"))
    assert "'-2+3" in (tmp_path / "out" / "results.csv").read_text(encoding="utf-8")
