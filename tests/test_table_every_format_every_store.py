"""`tecb-eval table --format F` prints F on every kind of store: labelled datasets, ranges of
cluster counts (label-free points), and a corpus without labels."""

from __future__ import annotations

import csv
import io

import pytest

from tablefiles import unlabelled_corpus
from tecb_eval.cli import main


@pytest.fixture(scope="module")
def stores(tmp_path_factory, small_store, blurbs_folder):
    root = tmp_path_factory.mktemp("format-stores")
    common = ["--model", "tfidf-lsa", "--config", "minibatch_kmeans:none", "--cache-dir", str(root / "c"), "--quiet"]
    ranges, corpus = root / "ranges.jsonl", root / "corpus.jsonl"
    assert main(["run", "--data", str(blurbs_folder), *common, "--k", "2:10:4", "--limit-splits", "2",
                 "--results", str(ranges)]) == 0
    assert main(["run", "--data", str(unlabelled_corpus(root / "corpus")), *common, "--k", "3,6",
                 "--results", str(corpus)]) == 0
    return {"labelled": small_store, "ranges": ranges, "corpus": corpus}


def _is_markdown(text: str) -> bool:
    # Every line is a table row, a paragraph of notes or empty; each table has its rule line.
    lines = [line for line in text.splitlines() if line.strip()]
    rows = [line for line in lines if line.startswith("|")]
    return bool(rows) and any(line.startswith("|---") for line in rows) and all(
        line.startswith("|") or "  " not in line for line in lines)


def _is_latex(text: str) -> bool:
    lines = [line for line in text.splitlines() if line.strip()]
    return bool(lines) and r"\begin{tabular}" in text and all(
        line.startswith(("%", "\\")) or line.endswith("\\\\") for line in lines)


def _is_csv(text: str) -> bool:
    rows = list(csv.reader(io.StringIO(text)))
    return len(rows) > 1 and all(len(row) > 1 for row in rows if row)


# The tables of V-measure (--table full, --versions, --density) refuse a store of points alone in one line.
CASES = [("labelled", []), ("labelled", ["--table", "full"]), ("labelled", ["--versions"]),
         ("labelled", ["--density"]), ("ranges", []), ("corpus", [])]


@pytest.mark.parametrize("kind, extra", CASES, ids=[" ".join([k, *e]) for k, e in CASES])
@pytest.mark.parametrize("fmt, check", [("md", _is_markdown), ("latex", _is_latex), ("csv", _is_csv)])
def test_table_prints_the_format_asked_for(stores, kind, fmt, check, extra, capsys):
    capsys.readouterr()
    assert main(["table", str(stores[kind]), "--format", fmt, *extra]) == 0
    out = capsys.readouterr().out
    assert check(out), out
