"""The results store (``tecb_eval.grid.store``), through the real commands: a --results that cannot
hold a store ends at once in one line; a store that is not ours is never touched, a torn line is
cut only when it is ours, an append never glues onto a line; two runs on one store do each cell
once; every score and value read back is checked against its range and type before it reaches an
output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import one_error_line, one_line_error, run_args, store_rows, write_store
from helpers import REPO, offline_one_job
from tecb_eval.cli import main
from tecb_eval.grid.store import ResultsStore

def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -- a --results that cannot hold a store ----------------------------------------------------------

@pytest.mark.slow
def test_a_dangling_link_as_results_ends_within_ten_seconds_in_one_line(tenkgnad_folder, tmp_path):
    link = tmp_path / "results.jsonl"
    link.symlink_to(tmp_path / "gone" / "results.jsonl")
    def timed(results) -> tuple[subprocess.CompletedProcess, float]:
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "tecb_eval.cli", *run_args(tenkgnad_folder, results, tmp_path / "cache")],
                              capture_output=True, text=True, env=offline_one_job(), timeout=120)
        return done, time.monotonic() - started

    # The same command failing at once on another --results: what starting Python and importing
    # costs on this machine now (a loaded 2-core box takes seconds); the link must add under 10 s.
    baseline, startup = timed("/dev/null")
    assert baseline.returncode == 2
    done, seconds = timed(link)
    assert seconds < startup + 10, (seconds, startup)
    error = one_error_line(done, "tecb-eval")
    assert str(link) in error and "does not exist" in error
    # The library's store opener (no command-line check before it) ends the same way, never spinning.
    from tecb_data.errors import UserError
    from tecb_eval.grid.store import ResultsStore

    with pytest.raises(UserError, match="does not exist"):
        ResultsStore(link, lock=True)


def test_results_that_cannot_hold_a_store_is_refused_before_the_first_encode(tenkgnad_folder, tmp_path, capsys):
    cache = tmp_path / "cache"
    error = one_line_error(capsys, run_args(tenkgnad_folder, "/dev/null", cache))
    assert "not a regular file" in error and not cache.exists()
    error = one_line_error(capsys, run_args(tenkgnad_folder, tenkgnad_folder / "results.jsonl", cache))
    assert "lies inside the input" in error and not (tenkgnad_folder / "results.jsonl").exists() and not cache.exists()


# -- the results store edits only its own files ------------------------------------------------

@pytest.mark.parametrize("content", [b'{"id": 1, "text": "a line of someone else\'s data"}\n',
                                     b'{"id": 1, "text": "no final newline"}',
                                     b'{"id": 1, "te'])
def test_a_foreign_file_as_results_is_refused_and_left_as_it_was(tenkgnad_folder, tmp_path, capsys, content):
    foreign = tmp_path / "notes.jsonl"
    foreign.write_bytes(content)
    error = one_line_error(capsys, run_args(tenkgnad_folder, foreign, tmp_path / "cache", "--limit-splits", "1"))
    assert f"{foreign}:1: not a results line" in error
    assert foreign.read_bytes() == content
    assert f"{foreign}:1: not a results line" in one_line_error(capsys, ["table", str(foreign)])
    assert foreign.read_bytes() == content


def test_a_store_without_a_final_newline_gets_its_next_row_on_a_new_line(tenkgnad_folder, tmp_path, capsys):
    results = tmp_path / "results.jsonl"
    assert main(run_args(tenkgnad_folder, results, tmp_path / "cache", "--limit-splits", "2")) == 0
    first = results.read_bytes()
    assert first.endswith(b"\n") and len(_lines(results)) == 2
    results.write_bytes(first.rstrip(b"\n"))  # as an editor that drops the final newline leaves it
    assert main(run_args(tenkgnad_folder, results, tmp_path / "cache", "--limit-splits", "3")) == 0
    rows = _lines(results)  # every line parses: nothing glued onto the last one
    assert len(rows) == 3 and len({r["split"] for r in rows}) == 3
    assert results.read_bytes().startswith(first.rstrip(b"\n") + b"\n")  # the old rows byte for byte


def test_a_torn_row_is_cut_only_on_the_next_append_and_only_when_it_is_ours(tenkgnad_folder, tmp_path, capsys):
    results = tmp_path / "results.jsonl"
    assert main(run_args(tenkgnad_folder, results, tmp_path / "cache", "--limit-splits", "3")) == 0
    whole = results.read_bytes()
    rows = whole.split(b"\n")[:-1]
    torn = b"\n".join(rows[:2]) + b"\n" + rows[2][: len(rows[2]) // 2]  # died half-way through row 3
    results.write_bytes(torn)
    # Reading (table) changes nothing and says what it ignores.
    assert main(["table", str(results), "--table", "full", "--format", "csv"]) == 0
    assert "incomplete last line" in capsys.readouterr().err and results.read_bytes() == torn
    # The next run cuts its own torn row and writes the cell again.
    assert main(run_args(tenkgnad_folder, results, tmp_path / "cache", "--limit-splits", "3")) == 0
    again = _lines(results)
    assert len(again) == 3 and [json.loads(r) for r in rows[:2]] == again[:2]
    assert {k: v for k, v in again[2].items() if not k.endswith("_s")} == \
        {k: v for k, v in json.loads(rows[2]).items() if not k.endswith("_s")}
    # Text that is not the start of a row is not ours to cut: refused, untouched.
    junk = b"\n".join(rows[:2]) + b"\nsome notes"
    results.write_bytes(junk)
    capsys.readouterr()
    assert ":3: not a results line" in one_line_error(capsys, run_args(tenkgnad_folder, results, tmp_path / "cache"))
    assert results.read_bytes() == junk


# -- two runs on one store ---------------------------------------------------------------------

def _cli(*args: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tecb_eval.cli", *args], cwd=REPO,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"}, **popen)


def _wait_for(condition, timeout: float = 240.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


# `tecb-eval ARGS` whose first results-store append, once written, creates argv[1] and holds until
# argv[2] exists (the event the lock test waits on, instead of racing to SIGSTOP a running grid).
HELD_AFTER_FIRST_CELL = """
import sys, time
from pathlib import Path
from tecb_eval.grid import store
held, release = Path(sys.argv[1]), Path(sys.argv[2])
_append = store.ResultsStore.append
def held_append(self, row):
    _append(self, row)
    if not held.exists():
        held.touch()
        deadline = time.monotonic() + 600
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
store.ResultsStore.append = held_append
from tecb_eval.cli import main
sys.exit(main(sys.argv[3:]))
"""


@pytest.mark.slow
def test_a_second_run_on_the_same_store_waits_then_skips_what_the_first_finished(tenkgnad_folder, tmp_path):
    results, cache = tmp_path / "results.jsonl", tmp_path / "cache"
    # Two configurations, so a split's cells are more than the first one the first run holds after.
    args = ["run", "--data", str(tenkgnad_folder), "--model", "tfidf-lsa", "--config", "minibatch_kmeans:pca",
            "--config", "minibatch_kmeans:none", "--results", str(results), "--cache-dir", str(cache), "--quiet"]
    started = []
    held, release = tmp_path / "first-cell-written", tmp_path / "release"
    with open(tmp_path / "first.err", "wb") as first_err, open(tmp_path / "second.err", "wb") as second_err:
        try:
            # The first run holds after its first cell (holding the store) until told to go on: it
            # is mid-run whatever the machine's speed.
            first = subprocess.Popen([sys.executable, "-c", HELD_AFTER_FIRST_CELL, str(held), str(release), *args],
                                     cwd=REPO, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                                     stdout=subprocess.PIPE, stderr=first_err)
            started.append(first)
            _wait_for(lambda: held.exists() or first.poll() is not None, what="the first run's first cell")
            assert held.exists(), (tmp_path / "first.err").read_text()
            try:
                written = results.read_bytes()
                second = _cli(*args, stdout=subprocess.PIPE, stderr=second_err)
                started.append(second)
                _wait_for(lambda: b"another run is writing" in (tmp_path / "second.err").read_bytes(),
                          what="the second run to say it waits")
                # The first run cannot have let go of the store: the second can only be waiting.
                assert second.poll() is None and results.read_bytes() == written  # it waits, writing nothing
            finally:
                release.touch()
            first_out, _ = first.communicate(timeout=600)
            second_out, _ = second.communicate(timeout=600)
        finally:
            for process in started:  # a failed assertion leaves no run behind
                if process.poll() is None:
                    process.kill()
                    process.wait()
    assert first.returncode == 0 and second.returncode == 0, (tmp_path / "second.err").read_text()
    waited = [line for line in (tmp_path / "second.err").read_text().splitlines() if "another run" in line]
    assert len(waited) == 1 and str(results) in waited[0]
    rows = _lines(results)
    keys = [(r["split"], r["reduction"], r["algorithm"]) for r in rows]
    assert len(keys) == len(set(keys)) == 10 * 2  # every cell once: the second run did none again
    assert second_out == first_out  # and printed the same tables from the store


def test_a_store_lock_is_shared_within_one_process(tmp_path):
    path = tmp_path / "results.jsonl"
    with ResultsStore(path, lock=True) as one:
        with ResultsStore(path, lock=True) as two:  # would wait on itself forever with a plain flock
            assert one.rows == two.rows == []


# -- every score read back is range-checked ------------------------------------------------------

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


def test_a_store_row_with_v_measure_7_is_named_by_its_store_and_line(small_store, tmp_path, capsys):
    rows = store_rows(small_store)
    rows[2]["v_measure"] = 7.0
    edited = write_store(tmp_path / "edited.jsonl", rows)
    assert main(["table", str(edited)]) == 0
    captured = capsys.readouterr()
    warning = [line for line in captured.err.splitlines() if "v_measure 7.0" in line]
    assert len(warning) == 1 and f"{edited}: skipped 1 row" in warning[0] and "line 3:" in warning[0]
    assert "700.00" not in captured.out


# -- values from a store are checked against their type before they reach an output --------------

@pytest.mark.parametrize("edit, problem", [
    ({"prompt": 5}, "prompt 5 is not text"),
    ({"dataset_location": ["x"]}, "dataset_location"),
    ({"synthetic": "yes"}, "synthetic \"yes\" is not true or false"),
    ({"encode_s": "1; rm -rf"}, "encode_s"),
    ({"cluster_s": -1.0}, "cluster_s -1.0 is not a number of seconds"),
    ({"reduction_params": {"n_components": "__import__('os')"}}, "reduction_params"),
    ({"dbcv_points": 2.5}, "dbcv_points 2.5 is not a count"),
])
def test_a_value_of_the_wrong_type_is_a_row_unlike_the_grids(small_store, edit, problem):
    from tecb_eval.grid.store import row_problem

    row = store_rows(small_store)[0]
    assert row_problem(row) is None
    assert problem in row_problem({**row, **edit})


def test_a_cell_twice_with_other_scores_is_noted_with_its_lines(tmp_path, small_store, capsys):
    lines = small_store.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[0])
    row["v_measure"] = row["v_measure"] / 2
    joined = tmp_path / "joined.jsonl"
    joined.write_text("\n".join([*lines, json.dumps(row), lines[1]]) + "\n", encoding="utf-8")
    capsys.readouterr()
    ResultsStore(joined)
    err = capsys.readouterr().err
    assert f"1 cell(s) appear twice with different scores (lines 1 and {len(lines) + 1})" in err, err
