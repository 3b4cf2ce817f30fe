"""Building published folders: layout, determinism, atomicity, verification and the CLI."""

import gzip
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import book, run_cli, run_cli_here, shared_file
from tecb_data import layout, load
from tecb_data.build import build
from tecb_data.demo import demo_input
from tecb_data.errors import UserError, VerificationError

DATASETS = ["blurbs-clustering-p2p", "blurbs-clustering-s2s", "tenkgnad-clustering-p2p", "tenkgnad-clustering-s2s"]


def tree_bytes(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_demo_build_writes_the_published_layout(demo_datasets):
    assert sorted(p.name for p in demo_datasets.iterdir()) == DATASETS
    for name in DATASETS:
        folder = demo_datasets / name
        assert sorted(tree_bytes(folder)) == ["README.md", "data/samples.jsonl", "data/test.jsonl", "manifest.json"]
        manifest = layout.verify(folder)
        assert manifest["dataset"] == name and manifest["seed"] == 42
        assert set(manifest["files"]) == {"README.md", "data/samples.jsonl", "data/test.jsonl"}
        rows = layout.read_split_rows(folder)
        assert [s["size"] for s in manifest["splits"]] == [len(texts) for texts, _ in rows]
        assert [s["labels"] for s in manifest["splits"]] == [
            dict(sorted({label: labels.count(label) for label in labels}.items())) for _, labels in rows
        ]
        for entry in manifest["inputs"]:
            assert re.fullmatch(r"[0-9a-f]{64}", entry["sha256"]) and "/" not in entry["name"]


def test_samples_table_matches_the_clustering_rows(demo_datasets):
    folder = demo_datasets / "blurbs-clustering-p2p"
    rows = layout.read_split_rows(folder)
    samples = [json.loads(line) for line in (folder / layout.SAMPLES_FILE).read_text(encoding="utf-8").splitlines()]
    names = [s["name"] for s in layout.read_manifest(folder)["splits"]]
    flat = [(name, t, label) for name, (texts, labels) in zip(names, rows) for t, label in zip(texts, labels)]
    assert [(s["split"], s["text"], s["label"]) for s in samples] == flat
    assert all(s["path"] and s["id"].isdigit() for s in samples)


def test_datasets_load_dataset_reads_the_folder_in_mteb_layout(demo_datasets, tmp_path):
    import datasets

    folder = demo_datasets / "blurbs-clustering-s2s"
    # a private cache: datasets keys its cache by path and mtime, which other test sessions may share
    test = datasets.load_dataset(str(folder), split="test", cache_dir=str(tmp_path))
    # Blurbs (recipe version 3 on) carries every text's genre path beside MTEB's two columns.
    assert set(test.column_names) == {"labels", "sentences", "label_paths"}
    assert [(row["sentences"], row["labels"]) for row in test] == [
        (list(t), list(l)) for t, l in layout.read_split_rows(folder)
    ]
    assert [row["label_paths"] for row in test] == [[list(p) for p in paths] for paths in layout.read_label_paths(folder)]
    samples = datasets.load_dataset(str(folder), "samples", split="test", cache_dir=str(tmp_path))
    assert set(samples.column_names) == {"id", "split", "text", "label", "path"}


def test_load_returns_the_benchmark(demo_datasets):
    bench = load(demo_datasets / "tenkgnad-clustering-s2s")
    assert bench.name == "tenkgnad-clustering-s2s"
    assert [s.name for s in bench.splits] == [f"sample-{i:02d}" for i in range(10)]
    assert bench.fingerprint == layout.read_manifest(demo_datasets / "tenkgnad-clustering-s2s")["fingerprint"]
    assert all(len(s.texts) == len(s.labels) > 0 for s in bench.splits)


def _shuffled_copy(source: Path, target: Path, seed: int) -> Path:
    """The demo blurbs files with their records shuffled and the files renamed into another order."""
    target.mkdir(parents=True)
    for path in sorted(source.glob("blurbs_*.txt")):
        text = path.read_text(encoding="utf-8")
        records = re.findall(r"<book .*?</book>\n", text, flags=re.S)
        random.Random(seed).shuffle(records)
        (target / path.name.replace("blurbs_", "blurbs_x_")).write_text("".join(records), encoding="utf-8")
    return target


@pytest.mark.parametrize("members", [[], ["--paired"]], ids=["per-view", "paired"])
@pytest.mark.slow
def test_builds_are_byte_identical_across_hash_seeds_and_input_order(tmp_path, members):
    source = demo_input("blurbs")
    shuffled = _shuffled_copy(source, tmp_path / "shuffled", seed=7)
    outs = []
    for n, (input_path, hashseed) in enumerate([(source, "0"), (shuffled, "12345")]):
        out = tmp_path / f"out{n}"
        result = run_cli("build", "--source", "blurbs", "--input", str(input_path), "--out", str(out), *members,
                         env={"PYTHONHASHSEED": hashseed})
        assert result.returncode == 0, result.stderr
        outs.append(out)
    for name in ("blurbs-clustering-s2s", "blurbs-clustering-p2p"):
        a, b = (layout.read_manifest(o / name) for o in outs)
        assert a["fingerprint"] == b["fingerprint"]
        files_a, files_b = tree_bytes(outs[0] / name), tree_bytes(outs[1] / name)
        del files_a["manifest.json"], files_b["manifest.json"]  # input names and hashes differ, by design
        assert files_a == files_b
        assert {k: v for k, v in a.items() if k != "inputs"} == {k: v for k, v in b.items() if k != "inputs"}


def test_same_input_twice_gives_identical_manifests_and_another_seed_changes_the_data(tmp_path):
    first = build("tenkgnad", demo_input("tenkgnad"), tmp_path / "a")
    again = build("tenkgnad", demo_input("tenkgnad"), tmp_path / "b")
    other = build("tenkgnad", demo_input("tenkgnad"), tmp_path / "c", seed=7)
    for (fa, _), (fb, _), (fc, mc) in zip(first, again, other):
        assert tree_bytes(fa) == tree_bytes(fb)
        assert tree_bytes(fa)["data/test.jsonl"] != tree_bytes(fc)["data/test.jsonl"]
        assert mc["seed"] == 7 and "seed 7" in (fc / "README.md").read_text(encoding="utf-8")


def _members(folder: Path) -> list[tuple[str, list[str]]]:
    samples = [json.loads(line) for line in (folder / layout.SAMPLES_FILE).read_text(encoding="utf-8").splitlines()]
    names = [s["name"] for s in layout.read_manifest(folder)["splits"]]
    return [(name, [s["id"] for s in samples if s["split"] == name]) for name in names]


@pytest.mark.parametrize("source", ["blurbs", "tenkgnad"])
def test_views_draw_their_own_members_by_default_and_paired_shares_them(tmp_path, source):
    built = dict((f.name, (f, m)) for f, m in build(source, demo_input(source), tmp_path / "own"))
    (s2s, ms), (p2p, mp) = built[f"{source}-clustering-s2s"], built[f"{source}-clustering-p2p"]
    assert ms["recipe"]["members"] == mp["recipe"]["members"] == "per-view"
    assert [(s["name"], s["size"]) for s in ms["splits"]] == [(s["name"], s["size"]) for s in mp["splits"]]
    assert ms["statistics"]["samples"] == mp["statistics"]["samples"]
    assert [s["labels"] for s in ms["splits"]] != [s["labels"] for s in mp["splits"]]
    own_s2s, own_p2p = _members(s2s), _members(p2p)
    assert any(set(a) != set(b) for (_, a), (_, b) in zip(own_s2s, own_p2p))
    assert "Split members (`per-view`)" in (s2s / "README.md").read_text(encoding="utf-8")

    built = dict((f.name, (f, m)) for f, m in build(source, demo_input(source), tmp_path / "paired", paired=True))
    (s2s, ms), (p2p, mp) = built[f"{source}-clustering-s2s"], built[f"{source}-clustering-p2p"]
    assert ms["recipe"]["members"] == mp["recipe"]["members"] == "paired"
    assert ms["splits"] == mp["splits"] and _members(s2s) == _members(p2p)
    assert [len(ids) for _, ids in _members(s2s)] == [len(ids) for _, ids in own_s2s]
    card = (p2p / "README.md").read_text(encoding="utf-8")
    assert "Split members (`paired`)" in card and f"--source {source} --input <source files> --seed 42 --paired`" in card


def test_paired_flag_on_the_command_line_and_one_view_alone(tmp_path):
    result = run_cli_here("build", "--source", "tenkgnad", "--demo", "--out", str(tmp_path / "a"), "--paired", "--quiet")
    assert result.returncode == 0, result.stderr
    assert layout.read_manifest(tmp_path / "a" / "tenkgnad-clustering-s2s")["recipe"]["members"] == "paired"
    # a view built alone draws exactly what it draws beside the other view, in either mode
    for paired in (False, True):
        (alone, _), = build("tenkgnad", demo_input("tenkgnad"), tmp_path / f"alone{paired}", views=("p2p",), paired=paired)
        both = dict((f.name, f) for f, _ in build("tenkgnad", demo_input("tenkgnad"), tmp_path / f"both{paired}", paired=paired))
        assert tree_bytes(alone) == tree_bytes(both["tenkgnad-clustering-p2p"])


def test_rebuild_replaces_the_folder_and_leaves_no_temporaries(tmp_path):
    build("tenkgnad", demo_input("tenkgnad"), tmp_path, seed=1)
    (tmp_path / ".tecb-tmp-stale-from-a-killed-build").mkdir()
    build("tenkgnad", demo_input("tenkgnad"), tmp_path, seed=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tenkgnad-clustering-p2p", "tenkgnad-clustering-s2s"]
    assert layout.verify(tmp_path / "tenkgnad-clustering-p2p")["seed"] == 2


def test_a_failure_while_writing_leaves_no_dataset_folder(tmp_path):
    def rows():
        yield "{}\n"
        raise OSError("disk full")

    with pytest.raises(UserError, match="cannot write the dataset .disk full"):
        layout.write_dataset(tmp_path, "x", {"data/test.jsonl": rows()}, {"dataset": "x"})
    assert list(tmp_path.iterdir()) == []


def test_a_failed_rebuild_keeps_the_previous_dataset(tmp_path):
    layout.write_dataset(tmp_path, "x", {"a.txt": ["old\n"]}, {"dataset": "x"})

    def rows():
        yield "new\n"
        raise OSError("disk full")

    with pytest.raises(UserError, match="disk full"):
        layout.write_dataset(tmp_path, "x", {"a.txt": rows()}, {"dataset": "x"})
    assert (tmp_path / "x" / "a.txt").read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["x"]


# `tecb-data ARGS` that, once its first dataset file is written, creates argv[1] and holds.
HELD_AFTER_FIRST_FILE = """
import sys, time
from pathlib import Path
from tecb_data import layout
marker = Path(sys.argv[1])
_write_text = layout._write_text
def held_write_text(*args, **kwargs):
    _write_text(*args, **kwargs)
    if not marker.exists():
        marker.touch()
        time.sleep(600)
layout._write_text = held_write_text
from tecb_data.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.slow
def test_a_build_killed_midway_leaves_no_dataset_folder(tmp_path):
    """SIGKILL while the first dataset is being written: nothing half-written is published."""
    source = shared_file("germeval2019/blurbs_dev.txt.gz")
    big = tmp_path / "in"
    big.mkdir()
    # The release's layout: a folder with the training file (here the dev set's books).
    (big / "blurbs_train.txt").write_bytes(gzip.decompress(source.read_bytes()))
    out = tmp_path / "out"
    marker = tmp_path / "first-file-written"
    # The build holds after writing its first file (into a temporary folder) and says so: the kill
    # lands mid-write whatever the machine's speed.
    process = subprocess.Popen(
        [sys.executable, "-c", HELD_AFTER_FIRST_FILE, str(marker), "build", "--source", "blurbs", "--input", str(big),
         "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and process.poll() is None and not marker.exists():
        time.sleep(0.01)
    assert marker.exists(), f"the build never wrote a file (exit {process.poll()})"
    assert any(p.name.startswith(layout.TMP_PREFIX) for p in out.iterdir())
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL
    published = [p for p in out.iterdir() if not p.name.startswith(layout.TMP_PREFIX)]
    assert "blurbs-clustering-s2s" not in [p.name for p in published]
    for folder in published:  # anything published is whole
        layout.verify(folder)
    result = run_cli_here("build", "--source", "blurbs", "--input", str(big), "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["blurbs-clustering-p2p", "blurbs-clustering-s2s"]


def test_verify_names_the_file_that_differs(demo_datasets, tmp_path):
    folder = tmp_path / "copy"
    folder.mkdir()
    for relative, data in tree_bytes(demo_datasets / "tenkgnad-clustering-s2s").items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_bytes(data)
    assert run_cli_here("verify", str(folder)).returncode == 0
    (folder / "data" / "test.jsonl").write_bytes((folder / "data" / "test.jsonl").read_bytes().replace(b"Sport", b"Sp0rt", 1))
    result = run_cli_here("verify", str(folder))
    assert result.returncode == 1
    assert result.stderr.strip() == f"tecb-data: error: {folder / 'data' / 'test.jsonl'}: content differs from manifest.json; rebuild or re-download the dataset"


def test_verify_catches_missing_and_extra_files_and_a_forged_fingerprint(demo_datasets, tmp_path):
    import shutil

    folder = tmp_path / "copy"
    shutil.copytree(demo_datasets / "tenkgnad-clustering-p2p", folder)
    (folder / "data" / "extra.jsonl").write_text("{}\n")
    with pytest.raises(VerificationError, match=r"extra\.jsonl: not listed in manifest\.json"):
        layout.verify(folder)
    (folder / "data" / "extra.jsonl").unlink()
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["fingerprint"] = "0" * 64
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(VerificationError, match="fingerprint does not match"):
        layout.verify(folder)
    (folder / "README.md").unlink()
    with pytest.raises(VerificationError, match=r"README\.md: missing"):
        layout.verify(folder)


def test_stats_command_prints_table1(demo_datasets):
    result = run_cli_here("stats", str(demo_datasets / "blurbs-clustering-p2p"))
    assert result.returncode == 0, result.stderr
    stats = layout.read_manifest(demo_datasets / "blurbs-clustering-p2p")["statistics"]
    assert re.search(rf"splits\s+{stats['splits']}\n", result.stdout)
    assert re.search(rf"samples \(all splits\)\s+{stats['samples']:,}\n", result.stdout)
    assert re.search(rf"unique texts\s+{stats['unique_texts']:,}\n", result.stdout)
    assert re.search(rf"avg chars \(all rows\)\s+{stats['avg_chars_all_rows']}\n", result.stdout)
    assert re.search(rf"avg chars \(unique texts\)\s+{stats['avg_chars_unique_texts']}\n", result.stdout)


def test_average_characters_over_all_rows_and_over_unique_texts():
    from tecb_data.stats import table1

    # rows: aa aa bbbb | aa cccccc -> 16 characters in 5 rows; unique: aa bbbb cccccc -> 12 in 3
    stats = table1([(["aa", "aa", "bbbb"], ["x", "x", "y"]), (["aa", "cccccc"], ["x", "y"])])
    assert (stats["samples"], stats["unique_texts"]) == (5, 3)
    assert stats["avg_chars_all_rows"] == 3.2
    assert stats["avg_chars_unique_texts"] == 4.0


def test_average_characters_equal_mteb_legacy_and_v2_statistics(demo_datasets):
    """MTEB is the referee: its legacy statistics average over every row of every split (the
    published 2,641.0 of TenKGnadClusteringP2P), its v2 tasks over the rows de-duplicated by
    _convert_to_fast (2,648.5 for TenKGnadClusteringP2P.v2)."""
    from datasets import Dataset, DatasetDict
    from mteb.abstasks._statistics_calculation import calculate_text_statistics
    from mteb.abstasks.clustering import _convert_to_fast

    from tecb_data.stats import table1

    for name in ("blurbs-clustering-p2p", "tenkgnad-clustering-p2p"):
        rows = layout.read_split_rows(demo_datasets / name)
        ours = table1(rows)
        legacy = calculate_text_statistics([t for texts, _ in rows for t in texts])
        table = DatasetDict({"test": Dataset.from_dict({"sentences": [list(t) for t, _ in rows], "labels": [list(l) for _, l in rows]})})
        fast = _convert_to_fast(table, "sentences", "labels", seed=42)["test"]
        v2 = calculate_text_statistics(list(fast["sentences"]))
        assert ours["avg_chars_all_rows"] == round(legacy["average_text_length"], 1)
        assert ours["avg_chars_unique_texts"] == round(v2["average_text_length"], 1)
        assert ours["unique_texts"] == legacy["unique_texts"] == v2["unique_texts"] == len(fast)
        assert ours["avg_chars_all_rows"] != ours["avg_chars_unique_texts"], "the demo should tell them apart"


def test_card_states_recipe_seed_version_statistics_licence_and_citation(demo_datasets):
    card = (demo_datasets / "blurbs-clustering-p2p" / "README.md").read_text(encoding="utf-8")
    manifest = layout.read_manifest(demo_datasets / "blurbs-clustering-p2p")
    assert card.startswith("---\n") and "license: cc-by-nc-4.0" in card and "- de\n" in card
    assert f"seed {manifest['seed']}" in card and manifest["package_version"] in card
    assert f"| samples (all splits) | {manifest['statistics']['samples']:,} |" in card
    assert "German Text Embedding Clustering Benchmark" in card and "@inproceedings{remus-etal-2019-germeval" in card


@pytest.mark.parametrize(
    "args, message",
    [
        (["build", "--source", "blurbs", "--input", "/no/such/path", "--out", "OUT"], "/no/such/path: no such file or directory"),
        (["build", "--source", "blurbs", "--out", "OUT"], "pass exactly one of --input PATH or --demo"),
        (["build", "--source", "blurbs", "--demo", "--out", "OUT", "--seed", "-3"], "--seed must be a non-negative integer"),
        (["verify", "/no/such/dataset"], "/no/such/dataset: no such dataset folder"),
        (["stats", "/no/such/dataset"], "/no/such/dataset: no such dataset folder"),
    ],
)
@pytest.mark.slow
def test_user_errors_are_one_line_and_exit_2(tmp_path, args, message):
    args = [a.replace("OUT", str(tmp_path / "out")) for a in args]
    result = run_cli_here(*args)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_debug_shows_the_traceback(tmp_path):
    result = run_cli("--debug", "verify", str(tmp_path / "nope"))
    assert result.returncode != 0 and "Traceback" in result.stderr and "UserError" in result.stderr


def test_unknown_source_and_too_little_data_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="unknown source"):
        build("arxiv", tmp_path, tmp_path / "out")
    (tmp_path / "blurbs_dev.txt").write_text(book("1", "Eins", [("A", "B")]), encoding="utf-8")
    with pytest.raises(UserError, match="too few labelled records"):
        build("blurbs", tmp_path / "blurbs_dev.txt", tmp_path / "out")


def test_the_readers_table_holds_every_source_and_each_source_owns_its_options(tmp_path, capsys):
    import argparse

    from tecb_data import cli
    from tecb_data.build import READERS

    (command,) = [a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction)]
    options = {a.dest: a for a in command.choices["build"]._actions}
    assert sorted(READERS) == ["blurbs", "reddit", "table", "tenkgnad"] == list(options["source"].choices)
    owned = [dest for reader in READERS.values() for dest in reader.own_options]
    assert len(owned) == len(set(owned)), "an option belongs to one source"
    shared = {"help", "debug", "verbose", "source", "input", "demo", "out", "seed", "view", "paired", "quiet"}
    assert set(options) == shared | set(owned), "every build option is every source's or one source's"
    # One source's option given to another is one line naming the option and its source.
    out = str(tmp_path / "out")
    for argv, message in [(["--source", "blurbs", "--demo", "--ids", "x"], "--ids is for --source reddit only"),
                          (["--source", "tenkgnad", "--demo", "--format", "csv"], "--format is for --source table only"),
                          (["--source", "reddit", "--ids", "x", "--name", "n"], "--name is for --source table only"),
                          (["--source", "table", "--input", "x", "--cache", "c"], "--cache is for --source reddit only")]:
        assert cli.main(["build", *argv, "--out", out]) == 2
        assert capsys.readouterr().err.strip().endswith(message)
    assert not (tmp_path / "out").exists()


def test_a_build_leaves_the_temporary_folder_of_a_live_concurrent_build_alone(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = tmp_path / f"{layout.TMP_PREFIX}{sleeper.pid}-blurbs-clustering-s2s-abc"
        dead = tmp_path / f"{layout.TMP_PREFIX}999999999-blurbs-clustering-s2s-abc"
        live.mkdir()
        dead.mkdir()
        build("tenkgnad", demo_input("tenkgnad"), tmp_path)
        assert live.is_dir() and not dead.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.slow
def test_the_registry_sources_labels_need_no_respelling_and_none_read_as_one():
    """The table source's label rule would change no label of the published datasets:
    their builds stay byte-identical with it or without it."""
    from tecb_data.labels import fold_key, normalise
    from tecb_data.sources import tenkgnad

    genres = {part for line in shared_file("germeval2019/hierarchy.txt").read_text(encoding="utf-8").splitlines()
              for part in line.split("\t") if part}
    categories = {item.labels["category"] for item in tenkgnad.read(shared_file("10kgnad/test.csv")).items}
    assert len(genres) > 300 and len(categories) == 9
    for labels in (genres, categories):
        assert all(normalise(label) == (label, ()) for label in labels)
        assert len({fold_key(label) for label in labels}) == len(labels)
