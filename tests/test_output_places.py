"""Where a command may write: every folder it writes into (an output folder, the embedding cache,
the results store's folder, a checkpoint folder) is never inside a dataset folder, never inside a
folder another command wrote, never one of the command's own inputs. A refusal is one line, exit 2,
and creates nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helpers import one_line_error, run_cli_here

DATASET = "tenkgnad-clustering-s2s"
GRID = ["--model", "tfidf-lsa", "--config", "minibatch_kmeans:none", "--limit-splits", "1", "--quiet"]


@pytest.fixture
def dataset(demo_datasets, tmp_path) -> Path:
    folder = tmp_path / "data" / DATASET
    shutil.copytree(demo_datasets / DATASET, folder)
    return folder


@pytest.fixture(scope="module")
def written(demo_datasets, tmp_path_factory) -> dict[str, Path]:
    """A results store, and an export's and a report's folders: what makes a folder another
    command's output is its marker, which names that command and lists its files."""
    from tecb_data.outputs import mark_files
    from tecb_eval.cli import main
    from tecb_eval.reports.export import EXPORT
    from tecb_eval.reports.html import REPORT

    root = tmp_path_factory.mktemp("places")
    store = root / "r.jsonl"
    assert main(["run", "--data", str(demo_datasets / DATASET), *GRID, "--results", str(store),
                 "--cache-dir", str(root / "cache")]) == 0
    for name, command in (("export", EXPORT), ("report", REPORT)):
        (root / name).mkdir()
        (root / name / "index.html").write_text("<p>written by the command</p>\n", encoding="utf-8")
        mark_files(root / name, command)
    return {"store": store, "export": root / "export", "report": root / "report"}


def _unchanged(dataset: Path) -> None:
    assert run_cli_here("verify", str(dataset)).returncode == 0
    assert sorted(p.name for p in dataset.iterdir()) == ["README.md", "data", "manifest.json"]


def test_a_cache_inside_a_dataset_folder_is_refused_and_the_dataset_stays_whole(dataset, tmp_path, capsys):
    for cache in (dataset, dataset / "cache"):
        error = one_line_error(capsys, ["run", "--data", str(dataset), *GRID, "--results", str(tmp_path / "r.jsonl"),
                                        "--cache-dir", str(cache)])
        assert "--cache-dir" in error and "dataset folder" in error
        _unchanged(dataset)
    error = one_line_error(capsys, ["demo", "--data", str(dataset), "--out", str(tmp_path / "demo"),
                                    "--cache-dir", str(dataset), "--limit-splits", "1", "--quiet"])
    assert "--cache-dir" in error
    _unchanged(dataset)
    assert not (tmp_path / "r.jsonl").exists() and not (tmp_path / "demo").exists()


def test_no_output_lies_inside_a_dataset_folder(demo_datasets, dataset, written, tmp_path, capsys):
    # The dataset written into is not the one read: what is refused is the place, not an overlap.
    store, data = written["store"], str(demo_datasets / DATASET)
    for argv, option in ((["export", str(store), "--out", str(dataset / "export")], "--out"),
                         (["report", str(store), "--out", str(dataset / "site")], "--out"),
                         (["run", "--data", data, *GRID, "--results", str(dataset / "r.jsonl"),
                           "--cache-dir", str(tmp_path / "cache")], "--results"),
                         (["run", "--data", data, *GRID, "--results", str(tmp_path / "r.jsonl"),
                           "--cache-dir", str(tmp_path / "cache"), "--out", str(dataset / "exported")], "--out")):
        error = one_line_error(capsys, argv)
        assert option in error and "dataset folder" in error, error
        _unchanged(dataset)


def test_nothing_is_written_inside_another_commands_output(demo_datasets, written, tmp_path, capsys):
    data = str(demo_datasets / DATASET)
    export, report = written["export"], written["report"]
    before = {folder: sorted(p.relative_to(folder) for p in folder.rglob("*")) for folder in (export, report)}
    for argv, option in ((["run", "--data", data, *GRID, "--results", str(tmp_path / "r.jsonl"),
                           "--cache-dir", str(export / "cache")], "--cache-dir"),
                         (["run", "--data", data, *GRID, "--results", str(export / "r.jsonl"),
                           "--cache-dir", str(tmp_path / "cache")], "--results"),
                         (["export", str(written["store"]), "--out", str(report / "export")], "--out"),
                         (["report", str(written["store"]), "--out", str(export / "site")], "--out")):
        error = one_line_error(capsys, argv)
        assert option in error and "tecb-eval" in error, error
    assert before == {folder: sorted(p.relative_to(folder) for p in folder.rglob("*")) for folder in (export, report)}
    assert not (tmp_path / "r.jsonl").exists() and not (tmp_path / "cache").exists()


def test_training_checkpoints_never_go_inside_a_dataset_folder(demo_datasets, dataset, capsys):
    # The dataset written into is not the one trained on: what is refused is the place, not an overlap.
    for command in ("pretrain", "finetune"):
        error = one_line_error(capsys, [command, "--model", "minilm-l6", "--data", str(demo_datasets / DATASET),
                                        "--out", str(dataset / "checkpoints")])
        assert "--out" in error and "dataset folder" in error, error
        _unchanged(dataset)


def test_a_layer_sweep_writes_neither_cache_nor_output_into_a_dataset(demo_datasets, dataset, tmp_path, capsys):
    data = str(demo_datasets / DATASET)
    for extra in (["--cache-dir", str(dataset), "--out", str(tmp_path / "l")],
                  ["--cache-dir", str(tmp_path / "cache"), "--out", str(dataset / "l")]):
        error = one_line_error(capsys, ["layers", "--model", "minilm-l6", "--data", data, *extra])
        assert "dataset folder" in error, error
        _unchanged(dataset)
