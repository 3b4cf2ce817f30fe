"""SIGTERM and SIGHUP stop a command as Ctrl-C does (its workers and children with it, a line saying
what was kept, the shell's exit code for the signal), and a reader that went away ends a command
quietly with 141. Ctrl-C before the first cell names no store it removed, Ctrl-C while the exit
handlers run is 130 without a traceback, and a command exits with its own code after every exit
handler and flush."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import offline_one_job, run_args



def _stored_lines(results: Path) -> int:
    try:
        return results.read_text().count("\n")
    except FileNotFoundError:
        return 0


def _session(sid: int) -> list[int]:
    """The live processes of session ``sid`` (zombies left for init to reap do not count)."""
    import psutil

    found = []
    for p in psutil.process_iter(["pid", "status"]):
        try:
            if os.getsid(p.pid) == sid and p.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(p.pid)
        except (ProcessLookupError, PermissionError):
            pass
    return found


@pytest.mark.slow
@pytest.mark.parametrize("signum, code, word", [(signal.SIGTERM, 143, "terminated"), (signal.SIGHUP, 129, "hung up")])
def test_a_stopping_signal_stops_the_grid_its_workers_and_children(demo_datasets, tmp_path, signum, code, word):
    results = tmp_path / "r.jsonl"
    demo = [demo_datasets / "blurbs-clustering-s2s", demo_datasets / "tenkgnad-clustering-s2s"]
    # Its own session: what it leaves behind is found by session id, whoever its parent becomes.
    process = subprocess.Popen(
        [sys.executable, "-m", "tecb_eval.cli", "run", "--data", str(demo[0]), "--data", str(demo[1]),
         "--model", "tfidf-lsa", "--config", "minibatch_kmeans:umap", "--config", "agglomerative:pca50+umap",
         "--results", str(results), "--cache-dir", str(tmp_path / "cache"), "--quiet", "--jobs", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "TECB_JOBS": ""},
        start_new_session=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and _stored_lines(results) < 1 and process.poll() is None:
        time.sleep(0.05)
    assert _stored_lines(results) >= 1, "the grid wrote no cell in 600 s"
    process.send_signal(signum)  # to the command alone, as `kill` sends it: not to its process group
    out, err = process.communicate(timeout=120)
    assert process.returncode == code, err
    assert f"tecb-eval: {word}; finished cells are in the results store" in err and "Traceback" not in err, err
    lines = results.read_text().splitlines()
    assert 1 <= len(lines) < 2 * 10 * 2 and all(line.endswith("}") for line in lines)
    deadline = time.monotonic() + 60
    while _session(process.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _session(process.pid) == [], "processes of the stopped command are still running"


def _with_closed_stdout(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """The command writing into a pipe whose reader is already gone (`| head -1` once head has
    exited): every write to stdout fails, whatever the machine's speed."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "tecb_eval.cli", *argv], stdout=write, stderr=subprocess.PIPE,
                              text=True, cwd=cwd, timeout=600)
    finally:
        os.close(write)


def test_a_closed_stdout_ends_run_and_table_quietly_with_141(demo_datasets, tmp_path):
    results = tmp_path / "r.jsonl"
    ran = _with_closed_stdout(run_args(demo_datasets / "blurbs-clustering-s2s", results, tmp_path / "cache",
                                       "--limit-splits", "1"), tmp_path)
    assert ran.returncode == 141 and "Traceback" not in ran.stderr and "BrokenPipe" not in ran.stderr, ran.stderr
    for argv in (["table", str(results)], ["table", str(results), "--format", "csv"]):
        done = _with_closed_stdout(argv, tmp_path)
        assert done.returncode == 141 and done.stderr == "", (argv, done.stderr)


@pytest.mark.slow
def test_a_closed_stdout_ends_calibrate_and_recommend_quietly_with_141(blurbs_folder, tmp_path):
    from tecb_eval.cli import main

    from tablefiles import unlabelled_corpus

    labelled, corpus = tmp_path / "lab.jsonl", tmp_path / "corpus.jsonl"
    common = ["--model", "tfidf-lsa", "--config", "minibatch_kmeans:none", "--config", "agglomerative:pca",
              "--cache-dir", str(tmp_path / "c"), "--quiet"]
    assert main(["run", "--data", str(blurbs_folder), *common, "--k", "2:10:4", "--limit-splits", "3",
                 "--label-free", "--results", str(labelled)]) == 0
    assert main(["run", "--data", str(unlabelled_corpus(tmp_path / "corpus")), *common, "--k", "3,6",
                 "--results", str(corpus)]) == 0
    out = tmp_path / "cal.json"
    for argv in (["calibrate", str(labelled), "--resamples", "50", "--out", str(out)],
                 ["recommend", str(corpus), "--resamples", "50"],
                 ["recommend", str(corpus), "--format", "json", "--resamples", "50"]):
        done = _with_closed_stdout(argv, tmp_path)
        # stderr may carry the progress line of a slow machine ("choosing one version ... (5 s so far)").
        assert done.returncode == 141 and "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr
    assert not out.exists() or json.loads(out.read_text())  # whole, or not begun


@pytest.mark.parametrize("command", [["table"], ["recommend"], ["report", "--out", "{out}"]])
def test_ctrl_c_in_a_reading_command_says_that_commands_state(demo_datasets, tmp_path, command):
    """Ctrl-C before the work began: the command's own sentence, not the grid's about cells."""
    from tecb_eval.cli import parser
    from tecb_data.runner import what_was_left

    argv = [c.format(out=tmp_path / "site") for c in command]
    args = parser().parse_args([argv[0], str(tmp_path / "r.jsonl"), *argv[1:]])
    said = what_was_left(args, lambda: "no cell had finished")
    assert "cell" not in said and "nothing was written" in said


@pytest.mark.parametrize("command", [["table"], ["recommend"], ["compare", "--model", "a", "--model", "b"],
                                     ["report", "--out", "{out}"]])
def test_ctrl_c_while_a_reading_command_opens_the_store_says_its_own_sentence(tmp_path, monkeypatch, capsys, command):
    """Ctrl-C as the command reads the store (its first second): exit 130 and that command's line."""
    from tecb_eval.cli import main
    from tecb_eval.grid import store

    results = tmp_path / "r.jsonl"
    results.write_text("")

    def ctrl_c(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(store.ResultsStore, "__init__", ctrl_c)
    argv = [c.format(out=tmp_path / "site") for c in command]
    assert main([argv[0], str(results), *argv[1:]]) == 130
    said = capsys.readouterr().err
    assert said.startswith("tecb-eval: interrupted; ") and said.count("\n") == 1, said
    # The grid's sentence is about cells; a reading command wrote nothing, a report changed nothing.
    assert "cell" not in said and ("nothing was written" in said or "site was changed" in said), said
    assert not (tmp_path / "site").exists()


def test_an_interrupt_before_any_cell_does_not_name_the_removed_store(demo_datasets, tmp_path, capsys, monkeypatch):
    from tecb_eval.cli import main
    from tecb_eval.models.kinds.tfidf_lsa import TfidfLsaEncoder

    data = demo_datasets / "tenkgnad-clustering-s2s"

    def interrupted(self, texts):
        raise KeyboardInterrupt

    monkeypatch.setattr(TfidfLsaEncoder, "encode", interrupted)
    results = tmp_path / "results.jsonl"
    capsys.readouterr()
    assert main(run_args(data, results, tmp_path / "cache")) == 130
    error = capsys.readouterr().err
    assert not results.exists() and str(results) not in error and "no cell had finished" in error, error


# -- Ctrl-C while the interpreter exits, and the exit code after every exit handler ----------------

LATE_CTRL_C = """
import atexit, os, signal, sys, time

def a_librarys_exit_handler():  # as torch's or tqdm's: registered when the library is imported
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.5)
    print("the library's handler finished", file=sys.stderr)

atexit.register(a_librarys_exit_handler)
from tecb_data.cli import main
sys.argv = ["tecb-data", *sys.argv[1:]]
sys.exit(main())
"""


def test_ctrl_c_while_exit_handlers_run_exits_130_without_a_traceback(demo_datasets):
    data = demo_datasets / "tenkgnad-clustering-s2s"
    done = subprocess.run([sys.executable, "-c", LATE_CTRL_C, "verify", str(data)], capture_output=True, text=True,
                          env=offline_one_job(), timeout=120)
    assert done.returncode == 130 and "Traceback" not in done.stderr, done.stderr
    assert "the library's handler finished" in done.stderr and "tecb-data: interrupted; " in done.stderr


EXIT_AFTER_HANDLERS = """
import atexit, sys

def a_librarys_exit_handler():  # as logging's or a worker pool's: flushes what it holds
    print("the library's handler ran", file=sys.stderr)
    print("unterminated last words", end="")  # buffered: it reaches the reader only if flushed

atexit.register(a_librarys_exit_handler)
from tecb_data.cli import main
sys.argv = ["tecb-data", *sys.argv[1:]]
sys.exit(main())
"""


@pytest.mark.parametrize(("argv", "code"), [(("verify",), 0), (("verify", "/no/such/folder"), 2)])
def test_the_command_exits_with_its_code_after_every_exit_handler_and_flush(demo_datasets, argv, code):
    # The command ends the process itself once the exit handlers ran (skipping the interpreter's
    # teardown of torch and the like): its exit code, every handler and every buffered byte stay.
    data = demo_datasets / "tenkgnad-clustering-s2s"
    args = [*argv, str(data)] if len(argv) == 1 else list(argv)
    done = subprocess.run([sys.executable, "-c", EXIT_AFTER_HANDLERS, *args], capture_output=True, text=True,
                          env=offline_one_job(), timeout=120)
    assert done.returncode == code, done.stderr
    assert "the library's handler ran" in done.stderr and done.stdout.endswith("unterminated last words")
    assert "Traceback" not in done.stderr
