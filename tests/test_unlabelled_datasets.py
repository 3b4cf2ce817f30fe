"""A corpus without labels: `tecb-data build --source table` without a label column builds one
split of every text (or a seeded sample), with a card that says so, and the loader returns it
with no labels rather than made-up ones."""

from __future__ import annotations

import json

import pytest

import tecb_data
from helpers import run_cli_here
from tablefiles import table_rows


def write_texts(path, n: int = 40):
    path.write_text("text\tlabel\n" + "".join(f"{t}\t{label}\n" for t, label in table_rows(n)), encoding="utf-8")
    return path


def build_unlabelled(tmp_path, *extra: str, n: int = 40):
    table = write_texts(tmp_path / "corpus.tsv", n)
    return run_cli_here("build", "--source", "table", "--input", str(table), "--name", "corpus", "--text", "text",
                        "--out", str(tmp_path / "out"), "--quiet", *extra)


def test_a_table_without_a_label_column_builds_one_split_of_every_text(tmp_path):
    done = build_unlabelled(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "no labels" in done.stdout and ": 1 split, 40 samples" in done.stdout, done.stdout
    folder = tmp_path / "out" / "corpus-s2s"
    bench = tecb_data.load(folder)
    assert not bench.labelled
    assert [s.name for s in bench.splits] == ["all"]
    (split,) = bench.splits
    assert split.labels is None and len(split.texts) == 40 == len(set(split.texts))
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["labelled"] is False and manifest["recipe"]["name"] == "table-unlabelled"
    row = json.loads((folder / "data" / "test.jsonl").read_text().splitlines()[0])
    assert "labels" not in row
    card = (folder / "README.md").read_text()
    assert "Labels: none" in card and "do not apply" in card
    assert run_cli_here("verify", str(folder)).returncode == 0


def test_a_sample_is_seeded_and_a_subset(tmp_path):
    first = build_unlabelled(tmp_path / "a", "--sample", "10") if (tmp_path / "a").mkdir() is None else None
    again = build_unlabelled(tmp_path / "b", "--sample", "10") if (tmp_path / "b").mkdir() is None else None
    other = build_unlabelled(tmp_path / "c", "--sample", "10", "--seed", "7") if (tmp_path / "c").mkdir() is None else None
    assert first.returncode == again.returncode == other.returncode == 0
    texts = [tecb_data.load(tmp_path / p / "out" / "corpus-s2s").splits[0].texts for p in "abc"]
    assert len(texts[0]) == 10 and texts[0] == texts[1] and texts[0] != texts[2]
    assert set(texts[0]) <= {t for t, _ in table_rows(40)}
    files = [(tmp_path / p / "out" / "corpus-s2s" / "data" / "test.jsonl").read_bytes() for p in "ab"]
    assert files[0] == files[1]


@pytest.mark.parametrize("extra, n, says", [
    (("--sample", "41"), 40, "larger than the 40 texts"),
    (("--sample", "1"), 40, "2 or more"),
    (("--label", "topic"), 40, "no column 'topic'"),
    ((), 1, "1 text left"),
    (("--splits", "3"), 40, "--splits"),
])
def test_bad_input_is_one_line(tmp_path, extra, n, says):
    done = build_unlabelled(tmp_path, *extra, n=n)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], done.stderr
    assert not (tmp_path / "out" / "corpus-s2s").exists()
