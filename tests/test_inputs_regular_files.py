"""Every file a command reads is a regular file, and a file that should be small is read with a
bound (``tecb_data.inputs``): a FIFO, a device or a socket named as a table, a citation, a
report, a results store or a figure is refused in one line naming it, before a byte is read, so
nothing waits for a writer that never comes or reads a device until memory runs out.

The devices here are ``/dev/null`` (a character device that ends at once, so a reader that
forgot the check fails the test instead of filling memory) and FIFOs without a writer (a reader
that forgot the check blocks until the test's timeout)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers import run_cli_here
from tablefiles import table_build, table_rows, write_tsv
from tecb_data import inputs
from tecb_data.errors import UserError

pytestmark = pytest.mark.timeout(60)

DEVICE = "/dev/null"


def fifo(folder: Path, name: str) -> Path:
    path = folder / name
    os.mkfifo(path)
    return path


def one_line_naming(done, what: str, kind: str) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, (done.returncode, done.stderr)
    assert what in lines[0] and kind in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("suffix", ["csv", "jsonl", "tsv"])
def test_a_fifo_or_device_given_as_the_table_is_refused(tmp_path, suffix):
    done = table_build(fifo(tmp_path, f"t.{suffix}"), tmp_path / "out")
    one_line_naming(done, f"t.{suffix}", "FIFO")
    done = table_build(Path(DEVICE), tmp_path / "out2", "--format", suffix)
    one_line_naming(done, DEVICE, "character device")
    assert not (tmp_path / "out").exists() and not (tmp_path / "out2").exists()


def test_a_fifo_or_device_given_as_the_blurbs_input_is_refused(tmp_path):
    for path, kind in ((fifo(tmp_path, "blurbs_train.txt"), "FIFO"), (Path(DEVICE), "character device")):
        done = run_cli_here("build", "--source", "blurbs", "--input", str(path), "--out", str(tmp_path / "out"),
                            "--quiet")
        one_line_naming(done, str(path), kind)


def test_a_citation_is_a_small_regular_file(tmp_path):
    table = write_tsv(tmp_path / "t.tsv", table_rows(40))
    for path, kind in ((fifo(tmp_path, "cite.bib"), "FIFO"), (Path(DEVICE), "character device")):
        done = table_build(table, tmp_path / "out", "--citation", str(path))
        one_line_naming(done, f"--citation {path}", kind)
    big = tmp_path / "big.bib"
    big.write_text("@misc{x,\n" + "  note = {" + "x" * (2 * 2**20) + "}\n}\n", encoding="utf-8")
    done = table_build(table, tmp_path / "out", "--citation", str(big))
    one_line_naming(done, f"--citation {big}", "larger than")
    assert not (tmp_path / "out").exists()


def test_a_report_naming_a_fifo_or_device_is_refused_before_any_work(tmp_path):
    table = write_tsv(tmp_path / "t.tsv", table_rows(40))
    for path, kind in ((fifo(tmp_path, "removed.json"), "FIFO"), (Path(DEVICE), "character device")):
        done = table_build(table, tmp_path / "out", "--report", str(path))
        one_line_naming(done, f"--report {path}", kind)
    assert not (tmp_path / "out").exists()


def test_a_results_store_that_is_no_regular_file_is_named_as_what_it_is(tmp_path):
    from tecb_eval.cli import main

    loop = tmp_path / "loop.jsonl"
    loop.symlink_to(loop)
    for path, kind in ((fifo(tmp_path, "s.jsonl"), "FIFO"), (Path(DEVICE), "character device"),
                       (loop, "symbolic links")):
        done = run_cli_here("table", str(path), main=main)
        one_line_naming(done, str(path), kind)


def test_report_figures_holding_a_fifo_is_refused(tmp_path, small_store):
    from tecb_eval.cli import main

    figures = tmp_path / "figures"
    figures.mkdir()
    fifo(figures, "a.png")
    done = run_cli_here("report", str(small_store), "--no-figures", "--figures", str(figures),
                        "--out", str(tmp_path / "site"), main=main)
    one_line_naming(done, "a.png", "FIFO")
    assert not (tmp_path / "site").exists()


def test_the_reader_refuses_devices_and_fifos_without_reading_or_blocking(tmp_path):
    for device in ("/dev/zero", "/dev/full", "/dev/urandom"):
        with pytest.raises(UserError, match="character device"):
            inputs.read_bytes(device, what=device)
    with pytest.raises(UserError, match="FIFO"):
        inputs.read_text(fifo(tmp_path, "f"), what="f")
    with pytest.raises(UserError, match="a folder"):
        inputs.open_regular(tmp_path, what=str(tmp_path))
    small = tmp_path / "small.txt"
    small.write_bytes(b"a\r\nb\rc\n")
    assert inputs.read_text(small, what="s") == "a\nb\nc\n"
    with pytest.raises(UserError, match="larger than"):
        inputs.read_bytes(small, what="s", limit=4)
    with pytest.raises(FileNotFoundError):
        inputs.read_bytes(tmp_path / "missing", what="m")
