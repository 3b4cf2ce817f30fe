"""Small labelled tables for the `table` source's tests: rows with unique texts and four labels,
written as TSV, and `tecb-data build --source table` run on them in this process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from helpers import run_cli_here

# The dataset name the builds below give: their folder is NAME-s2s.
NAME = "news"
WORDS = {"Sport": "Tor Spiel Trainer Liga Sieg", "Kultur": "Oper Roman Theater Bühne Konzert",
         "Politik": "Wahl Partei Minister Gesetz Rat", "Wetter": "Regen Sonne Wind Sturm Schnee"}


def table_rows(n: int = 200) -> list[tuple[str, str]]:
    """(text, label) rows, every text unique, four labels."""
    labels = sorted(WORDS)
    rows = []
    for i in range(n):
        label = labels[i % len(labels)]
        words = WORDS[label].split()
        rows.append((f"{words[i % 5]} {words[(i // 5) % 5]} Meldung {i}", label))
    return rows


def write_tsv(path: Path, rows) -> Path:
    path.write_text("text\tlabel\n" + "".join(f"{t}\t{l}\n" for t, l in rows), encoding="utf-8")
    return path


def table_build(input_path: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    # In this process: what the build writes and refuses is the same, without an interpreter's start
    # per build (the tests build a dozen times).
    return run_cli_here("build", "--source", "table", "--input", str(input_path), "--name", NAME, "--text",
                        "text", "--label", "label", "--out", str(out), "--quiet", *extra)


def samples(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "data" / "samples.jsonl").read_text(encoding="utf-8").splitlines()]


def built_texts(out: Path) -> set[str]:
    return {row["text"] for row in samples(out / f"{NAME}-s2s")}


def built_labels(out: Path) -> set[str]:
    return {row["label"] for row in samples(out / f"{NAME}-s2s")}


def unlabelled_corpus(folder: Path, n: int = 120) -> Path:
    """A corpus without labels (the texts of :func:`table_rows`) built into ``folder``: its dataset folder."""
    folder.mkdir(parents=True, exist_ok=True)
    table = folder / "corpus.tsv"
    table.write_text("text\n" + "".join(f"{t}\n" for t, _ in table_rows(n)), encoding="utf-8")
    done = run_cli_here("build", "--source", "table", "--input", str(table), "--name", "corpus", "--text", "text",
                        "--out", str(folder / "out"), "--quiet")
    assert done.returncode == 0, done.stderr
    return folder / "out" / "corpus-s2s"


def german_news(n: int = 80) -> list[tuple[str, str]]:
    """(text, label) rows of German news as people write it: apostrophes (``hat's``, ``'Tatort'``),
    quotes (``„…"`` and ``"…"``), semicolons, commas and line breaks inside the texts; every text
    unique, four labels. A dialect sniffer that sees a sample of such a file finds more fields under
    ``;`` or ``'`` than under the RFC 4180 reading that the file was written in."""
    labels = sorted(WORDS)
    rows = []
    for i in range(n):
        label = labels[i % len(labels)]
        words = WORDS[label].split()
        shapes = [
            f"Der Minister sagte: \"{words[i % 5]} geht vor\", so Meldung {i}. Er hat's gewusst; das war's.",
            f"Die 'Tagesschau' meldet {i}: {words[(i + 1) % 5]} im Norden,\nim Süden; Merkel's Rede",
            f"„{words[(i + 2) % 5]}“ – 's war einmal; Meldung {i}",
            f"{words[(i + 3) % 5]}; {words[(i + 4) % 5]}; Meldung {i} ('Stand: heute')",
        ]
        rows.append((shapes[i % 4], label))
    return rows
