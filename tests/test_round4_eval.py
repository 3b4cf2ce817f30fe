"""Round 4 of the adversarial trial, the evaluation side: names that would add a column, end a row or
run as a formula in every table we write; options given twice; the demo's mark on every table; a
sample file copied over another one's key; per-level scores that cover part of a cell; scores and
values read back from a store, checked against their range and type before they reach an output."""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import one_line_error, run_args
from tecb_data.errors import UserError
from tecb_eval.cli import main

DATASET = "blurbs-clustering-s2s"  # the demo's Blurbs: genre paths, so per-level scores


@pytest.fixture(scope="module")
def store(demo_datasets, tmp_path_factory) -> Path:
    """tfidf-lsa, k-means and HDBSCAN on PCA, 4 splits of the demo's Blurbs S2S (synthetic rows)."""
    folder = tmp_path_factory.mktemp("round4-eval")
    results = folder / "results.jsonl"
    assert main(run_args(demo_datasets / DATASET, results, folder / "cache", "--limit-splits", "4",
                         "--config", "hdbscan:pca")) == 0
    return results


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
    return path


# -- 1. names in Markdown, LaTeX and CSV ----------------------------------------------------------

HOSTILE = ['=HYPERLINK("http://x")|b', "two\nlines|x", "-2+3", "@SUM(1)", "-inf", "\\input{a}_%$#&{}~^"]


@pytest.fixture(scope="module")
def hostile_store(store, tmp_path_factory) -> Path:
    """The store's k-means rows once per hostile model name (as an edited or shared store holds them)."""
    rows = [r for r in _rows(store) if r["algorithm"] == "minibatch_kmeans"]
    return _write(tmp_path_factory.mktemp("hostile") / "hostile.jsonl",
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
    store = _write(tmp_path / "s.jsonl", [r for r in _rows(hostile_store) if "\n" not in r["model"]])
    assert main(["export", str(store), "--out", str(tmp_path / "out")]) == 0
    for name in ("results.csv", "table2.csv", "table3.csv"):
        _no_formula((tmp_path / "out" / name).read_text(encoding="utf-8"))
    assert "'-2+3" in (tmp_path / "out" / "results.csv").read_text(encoding="utf-8")


def test_a_model_name_with_a_control_character_is_one_line_where_it_is_given(demo_datasets, tmp_path, capsys):
    argv = run_args(demo_datasets / DATASET, tmp_path / "r.jsonl", tmp_path / "cache")
    argv[argv.index("tfidf-lsa")] = "tfidf-lsa,name=evil\nimport os"
    assert "control character" in one_line_error(capsys, argv)
    assert not (tmp_path / "r.jsonl").exists()


# -- 2. options given twice -------------------------------------------------------------------------

def _parsers():
    from tecb_data.cli import parser as data_parser
    from tecb_eval.cli import parser as eval_parser

    for tool, build in (("tecb-data", data_parser), ("tecb-eval", eval_parser)):
        root = build()
        (commands,) = [a for a in root._actions if isinstance(a, argparse._SubParsersAction)]
        for name, sub in commands.choices.items():
            yield tool, build, name, sub


def _value(action, second: bool) -> str:
    if action.choices is not None:
        choices = list(action.choices)
        return str(choices[-1] if second else choices[0])
    return "22" if second else "11"


def _required(sub, leave_out) -> list[str]:
    argv = []
    for action in sub._actions:
        if action is leave_out or action.nargs == 0:
            continue
        if not action.option_strings:
            argv.append(_value(action, False))
        elif action.required:
            argv += [action.option_strings[0], _value(action, False)]
    return argv


def _value_options():
    for tool, build, name, sub in _parsers():
        for action in sub._actions:
            if action.option_strings and action.nargs != 0:
                yield pytest.param(tool, build, name, action.option_strings[0], id=f"{tool} {name} {action.option_strings[0]}")


@pytest.mark.parametrize("tool, build, command, option", list(_value_options()))
def test_an_option_given_twice_adds_up_or_is_one_line(tool, build, command, option, capsys):
    root = build()
    (commands,) = [a for a in root._actions if isinstance(a, argparse._SubParsersAction)]
    sub = commands.choices[command]
    (action,) = [a for a in sub._actions if option in a.option_strings]
    first, second = _value(action, False), _value(action, True)
    argv = [command, *_required(sub, action), option, first, option, second]
    try:
        args = root.parse_args(argv)
    except SystemExit as exc:
        error = capsys.readouterr().err
        assert exc.code == 2 and error.count("\n") == 1, error
        assert f"{option} given twice" in error and first in error and second in error, error
        return
    # Not refused: then both values are kept, in order.
    shown = repr(getattr(args, action.dest))
    assert first in shown and second in shown and (first != second or shown.count(first) == 2), (argv, shown)
    assert shown.index(first) <= shown.rindex(second)


def test_metrics_given_twice_adds_up_as_seeds_do():
    from tecb_eval.cli import parser

    args = parser().parse_args(["run", "--data", "d", "--model", "m", "--results", "r", "--metrics", "level",
                                "--metrics", "dbcv", "--seeds", "1", "--seeds", "2,3"])
    assert args.metrics == "level,dbcv" and args.seeds == (1, 2, 3)
    table = parser().parse_args(["table", "r", "--seeds", "1", "--seeds", "2,3"])
    assert table.seeds == "1,2,3"


def test_a_default_is_replaced_by_the_first_value_given_not_added_to():
    from tecb_data.cli import parser

    args = parser().parse_args(["collect", "--source", "reddit", "--subreddits", "s", "--out", "o"])
    assert args.listings == "hot,top"


# -- 3. the demo's mark on --levels and --density ---------------------------------------------------

@pytest.mark.parametrize("option", ["--levels", "--density"])
def test_levels_and_density_tables_of_demo_rows_say_synthetic(store, capsys, option):
    from tecb_eval.reports.tables import DEMO_NOTE

    assert main(["table", str(store), option]) == 0
    assert DEMO_NOTE in capsys.readouterr().out
    assert main(["table", str(store), option, "--format", "csv"]) == 0
    captured = capsys.readouterr()
    assert DEMO_NOTE in captured.err and DEMO_NOTE not in captured.out  # a CSV stays data only


# -- 4. a sample file records the key it was drawn for ----------------------------------------------

def test_a_sample_copied_over_another_key_is_discarded_and_drawn_again(demo_datasets, tmp_path, capsys):
    import tecb_data
    from tecb_eval.grid.samples import SampleCache, same_sample, sample_key
    from tecb_eval.mteb.sampling import fast_sample

    from tecb_eval.mteb.levels import first_paths

    bench = tecb_data.load(demo_datasets / DATASET)
    cache = SampleCache(tmp_path)
    seven = cache.get(bench, 7)
    cache.levels(bench, 7, seven.texts)
    folder = tmp_path / "samples"
    # Seed 7's draws copied over seed 42's names: their row numbers index this dataset's rows as well.
    for suffix in ("", ".levels"):
        shutil.copyfile(folder / f"{sample_key(bench, 7)}{suffix}.npz", folder / f"{sample_key(bench, 42)}{suffix}.npz")
    capsys.readouterr()
    later = SampleCache(tmp_path)
    assert later.lookup(bench, 42) is None
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "drawn for key" in error and sample_key(bench, 42) in error
    assert later.lookup_levels(bench, 42, seven.texts, first_paths(bench)) is None
    assert "drawn for key" in capsys.readouterr().err
    assert same_sample(later.get(bench, 42), fast_sample(bench, 42)) and later.drawn == 1
    assert same_sample(SampleCache(tmp_path).lookup(bench, 7), fast_sample(bench, 7))  # the original stays


# -- 5. per-level scores that cover part of a cell ----------------------------------------------------

def test_levels_of_a_cell_filled_in_part_way_say_so(store, tmp_path, capsys):
    rows = _rows(store)
    # A `--metrics level` fill-in stopped after some rows: the last k-means row has no levels.
    last = max(i for i, r in enumerate(rows) if r["algorithm"] == "minibatch_kmeans")
    rows[last] = {k: v for k, v in rows[last].items() if k not in ("levels", "levels_s")}
    partial = _write(tmp_path / "partial.jsonl", rows)
    assert main(["table", str(partial), "--levels"]) == 0
    out = capsys.readouterr().out
    assert "tfidf-lsa / minibatch_kmeans / none on BlurbsClusteringS2S (3 of 4 rows)" in out
    assert "hdbscan" not in out.split("Per-level scores do not cover")[1].split("\n")[0]  # complete: not named
    assert main(["table", str(store), "--levels"]) == 0
    assert "Per-level scores do not cover" not in capsys.readouterr().out


# -- 6. every score read back is range-checked ------------------------------------------------------

@pytest.mark.parametrize("edit, problem", [
    ({"v_measure": 7.0}, "v_measure 7.0 is out of range"),
    ({"homogeneity": -0.2}, "homogeneity -0.2 is out of range"),
    ({"completeness": 1.5}, "completeness 1.5 is out of range"),
    ({"ari": 1.01}, "ari 1.01 is out of range"),
    ({"ami": -3}, "ami -3 is out of range"),
    ({"noise_fraction": 2}, "noise_fraction 2 is out of range"),
    ({"levels": [{"level": 0, "v_measure": 2.0, "ami": 0.1}]}, "is not a list of per-level scores"),
    ({"levels": [{"level": -1, "v_measure": 0.2, "ami": 0.1}]}, "is not a list of per-level scores"),
])
def test_a_score_out_of_its_range_is_a_row_unlike_the_grids(edit, problem):
    from tecb_eval.grid.store import row_problem

    row = {"mteb_name": "D", "v_measure": 0.5, "seed": 42, "ami": -0.01, "ari": -0.3, "homogeneity": 0.0,
           "completeness": 1.0, "noise_fraction": 0.0, "levels": [{"level": 0, "v_measure": 0.2, "ami": 0.1}]}
    assert row_problem(row) is None
    assert problem in row_problem({**row, **edit})


def test_a_store_row_with_v_measure_7_is_named_by_its_store_and_line(store, tmp_path, capsys):
    rows = _rows(store)
    rows[2]["v_measure"] = 7.0
    edited = _write(tmp_path / "edited.jsonl", rows)
    assert main(["table", str(edited)]) == 0
    captured = capsys.readouterr()
    warning = [line for line in captured.err.splitlines() if "v_measure 7.0" in line]
    assert len(warning) == 1 and f"{edited}: skipped 1 row" in warning[0] and "line 3:" in warning[0]
    assert "700.00" not in captured.out


# -- 7. values from a store are checked against their type before they reach an output --------------

@pytest.mark.parametrize("edit, problem", [
    ({"prompt": 5}, "prompt 5 is not text"),
    ({"dataset_location": ["x"]}, "dataset_location"),
    ({"synthetic": "yes"}, "synthetic \"yes\" is not true or false"),
    ({"encode_s": "1; rm -rf"}, "encode_s"),
    ({"cluster_s": -1.0}, "cluster_s -1.0 is not a number of seconds"),
    ({"reduction_params": {"n_components": "__import__('os')"}}, "reduction_params"),
    ({"dbcv_points": 2.5}, "dbcv_points 2.5 is not a count"),
])
def test_a_value_of_the_wrong_type_is_a_row_unlike_the_grids(store, edit, problem):
    from tecb_eval.grid.store import row_problem

    row = _rows(store)[0]
    assert row_problem(row) is None
    assert problem in row_problem({**row, **edit})


def test_the_mteb_export_checks_what_it_reads(store, tmp_path):
    from tecb_eval.grid.store import read_results
    from tecb_eval.mteb.results import write_results

    frame = read_results(store)
    for edit, problem in (({"model": ".."}, "cannot name a folder"), ({"prompt": 5}, "prompt 5 is not text"),
                          ({"v_measure": "0.5"}, "v_measure '0.5' is not a number"),
                          ({"encode_s": np.inf}, "encode_s inf is not a number of seconds")):
        edited = frame.copy()
        for column, value in edit.items():
            edited[column] = pd.Series([value] * len(edited), index=edited.index, dtype=object)
        with pytest.raises(UserError, match=re.escape(problem)):
            write_results(edited, tmp_path / "mteb")
        assert not any(p.is_file() for p in tmp_path.rglob("*"))  # refused before any file is written


def test_the_mteb_export_takes_a_perfect_score_with_its_round_off_and_refuses_one_past_it():
    """A perfect clustering's V-measure can be 1.0000000000000002 (the metric's own float
    arithmetic): the store reads it, so the export writes it; 1.1 is refused by both."""
    import pandas as pd

    from tecb_eval.grid.store import row_problem
    from tecb_eval.mteb.results import check_rows

    row = {"model": "tfidf-lsa", "mteb_name": "RedditClusteringP2P", "split": "bootstrap-00", "seed": 42,
           "v_measure": 1.0000000000000002, "ami": 1.0}
    check_rows(pd.DataFrame([row]))
    assert row_problem(row) is None
    with pytest.raises(UserError, match="v_measure 1.1 is not a number from 0 to 1"):
        check_rows(pd.DataFrame([{**row, "v_measure": 1.1}]))
