"""`tecb-eval` under bad input and misuse, through the real command: a results store that is not
ours is never touched, a torn line is cut only when it is ours, an append never glues onto a line,
two runs on one store do each cell once, a damaged cache file is recomputed with a warning, and
every user error is one line with exit code 2."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import run_args as _run_args, one_line_error as _one_line_error
from tecb_data.build import build
from tecb_data.demo import demo_input
from tecb_eval.cli import main
from tecb_eval.grid.store import ResultsStore

REPO = Path(__file__).resolve().parents[1]
DATASET = "tenkgnad-clustering-s2s"
NOBODY = 65534


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("hardening-data")
    build("tenkgnad", demo_input("tenkgnad"), out, views=("s2s",))
    return out / DATASET


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -- the results store edits only its own files ------------------------------------------------

@pytest.mark.parametrize("content", [b'{"id": 1, "text": "a line of someone else\'s data"}\n',
                                     b'{"id": 1, "text": "no final newline"}',
                                     b'{"id": 1, "te'])
def test_a_foreign_file_as_results_is_refused_and_left_as_it_was(data, tmp_path, capsys, content):
    foreign = tmp_path / "notes.jsonl"
    foreign.write_bytes(content)
    error = _one_line_error(capsys, _run_args(data, foreign, tmp_path / "cache", "--limit-splits", "1"))
    assert f"{foreign}:1: not a results line" in error
    assert foreign.read_bytes() == content
    assert f"{foreign}:1: not a results line" in _one_line_error(capsys, ["table", str(foreign)])
    assert foreign.read_bytes() == content


def test_a_store_without_a_final_newline_gets_its_next_row_on_a_new_line(data, tmp_path, capsys):
    results = tmp_path / "results.jsonl"
    assert main(_run_args(data, results, tmp_path / "cache", "--limit-splits", "2")) == 0
    first = results.read_bytes()
    assert first.endswith(b"\n") and len(_lines(results)) == 2
    results.write_bytes(first.rstrip(b"\n"))  # as an editor that drops the final newline leaves it
    assert main(_run_args(data, results, tmp_path / "cache", "--limit-splits", "3")) == 0
    rows = _lines(results)  # every line parses: nothing glued onto the last one
    assert len(rows) == 3 and len({r["split"] for r in rows}) == 3
    assert results.read_bytes().startswith(first.rstrip(b"\n") + b"\n")  # the old rows byte for byte


def test_a_torn_row_is_cut_only_on_the_next_append_and_only_when_it_is_ours(data, tmp_path, capsys):
    results = tmp_path / "results.jsonl"
    assert main(_run_args(data, results, tmp_path / "cache", "--limit-splits", "3")) == 0
    whole = results.read_bytes()
    rows = whole.split(b"\n")[:-1]
    torn = b"\n".join(rows[:2]) + b"\n" + rows[2][: len(rows[2]) // 2]  # died half-way through row 3
    results.write_bytes(torn)
    # Reading (table) changes nothing and says what it ignores.
    assert main(["table", str(results), "--table", "full", "--format", "csv"]) == 0
    assert "incomplete last line" in capsys.readouterr().err and results.read_bytes() == torn
    # The next run cuts its own torn row and writes the cell again.
    assert main(_run_args(data, results, tmp_path / "cache", "--limit-splits", "3")) == 0
    again = _lines(results)
    assert len(again) == 3 and [json.loads(r) for r in rows[:2]] == again[:2]
    assert {k: v for k, v in again[2].items() if not k.endswith("_s")} == \
        {k: v for k, v in json.loads(rows[2]).items() if not k.endswith("_s")}
    # Text that is not the start of a row is not ours to cut: refused, untouched.
    junk = b"\n".join(rows[:2]) + b"\nsome notes"
    results.write_bytes(junk)
    capsys.readouterr()
    assert ":3: not a results line" in _one_line_error(capsys, _run_args(data, results, tmp_path / "cache"))
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
def test_a_second_run_on_the_same_store_waits_then_skips_what_the_first_finished(data, tmp_path):
    results, cache = tmp_path / "results.jsonl", tmp_path / "cache"
    # UMAP makes each split take a while, so the first run is still working when it is paused.
    args = ["run", "--data", str(data), "--model", "tfidf-lsa", "--config", "minibatch_kmeans:umap",
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


# -- a damaged cache is recomputed -------------------------------------------------------------

def test_a_damaged_cache_file_is_recomputed_with_a_warning_naming_it(data, tmp_path, capsys):
    cache = tmp_path / "cache"
    args = ["run", "--data", str(data), "--model", "tfidf-lsa", "--config", "minibatch_kmeans:pca",
            "--limit-splits", "2", "--cache-dir", str(cache), "--quiet"]
    assert main(args + ["--results", str(tmp_path / "first.jsonl")]) == 0
    shards = sorted(cache.glob("embeddings/*/shard-*.npz"))
    reductions = sorted(cache.glob("reductions/*.npy"))
    assert len(shards) == 1 and len(reductions) == 2
    shards[0].write_bytes(shards[0].read_bytes()[:100])  # cut short, as a full disk leaves it
    reductions[0].write_bytes(b"\x93NUMPY garbage")
    np.save(reductions[1], np.zeros(3))  # a valid file with the wrong content (1-D)
    capsys.readouterr()
    assert main(args + ["--results", str(tmp_path / "second.jsonl")]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert sorted(w.split(": ")[1] for w in warnings) == sorted(str(p) for p in [shards[0], *reductions])
    scores = lambda name: [(r["split"], r["v_measure"]) for r in _lines(tmp_path / name)]  # noqa: E731
    assert scores("second.jsonl") == scores("first.jsonl")
    # Recomputed and written back: a third run reads them without a word.
    assert main(args + ["--results", str(tmp_path / "third.jsonl")]) == 0
    assert "warning" not in capsys.readouterr().err


# -- user errors are one line ------------------------------------------------------------------

def test_bad_arguments_are_one_line(data, tmp_path, capsys):
    results, cache = tmp_path / "results.jsonl", tmp_path / "cache"
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    run = lambda *extra: _run_args(data, results, cache, *extra)  # noqa: E731
    assert "4294967295" in _one_line_error(capsys, run("--seed", str(2**32)))
    assert "does not take layer=3" in _one_line_error(capsys, ["run", "--data", str(data), "--model", "tfidf-lsa,layer=3",
                                                               "--results", str(results), "--quiet"])
    assert "tpu9" in _one_line_error(capsys, ["run", "--data", str(data), "--model", "minilm-l6,device=tpu9",
                                              "--results", str(results), "--quiet"])
    assert "limit_splits" in _one_line_error(capsys, run("--limit-splits", "-1"))
    assert "is a file" in _one_line_error(capsys, _run_args(data, results, a_file))
    assert "is a folder" in _one_line_error(capsys, _run_args(data, tmp_path, cache))
    assert "is a file" in _one_line_error(capsys, run("--out", str(a_file)))
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    assert str(broken / "config.json") in _one_line_error(
        capsys, ["run", "--data", str(data), "--model", str(broken), "--results", str(results), "--quiet"])
    not_csv = tmp_path / "reference.csv"
    not_csv.write_text("a;b\n1;2\n")
    assert str(not_csv) in _one_line_error(capsys, run("--out", str(tmp_path / "out"), "--reference", str(not_csv)))
    assert not results.exists() or results.read_bytes() == b""  # none of them ran a cell
    # export's --out
    assert main(run("--limit-splits", "1")) == 0
    capsys.readouterr()
    assert "is a file" in _one_line_error(capsys, ["export", str(results), "--out", str(a_file)])


def test_limit_splits_zero_means_all_as_in_demo(data, tmp_path, capsys):
    results = tmp_path / "results.jsonl"
    assert main(_run_args(data, results, tmp_path / "cache", "--limit-splits", "0")) == 0
    assert len(_lines(results)) == 10  # every split of the dataset
    from tecb_data.errors import UserError
    from tecb_eval.grid.run import run_grid

    frame = run_grid([data], ["tfidf-lsa"], configurations=["minibatch_kmeans:none"], limit_splits=0, progress=False)
    assert len(frame) == 10
    for bad in (-1, True, 1.5):
        with pytest.raises(UserError, match="or 0 for all of them"):
            run_grid([data], ["tfidf-lsa"], configurations=["minibatch_kmeans:none"], limit_splits=bad, progress=False)


@pytest.fixture
def world_readable(data):
    """A folder another user can read, holding a copy of the dataset; removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="tecb-readonly-"))
    try:
        root.chmod(0o755)
        shutil.copytree(data, root / DATASET)
        for path in [root / DATASET, *(root / DATASET).rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        yield root
    finally:
        for path in [root, *root.rglob("*")]:
            if path.is_dir():
                path.chmod(0o755)
        shutil.rmtree(root)


def _as_user_who_cannot_write(root: Path, *args: str) -> subprocess.CompletedProcess:
    """`tecb-eval ARGS` as a user for whom root's read-only folders are read-only: root itself
    writes anywhere, so as root it runs as nobody (setpriv); otherwise as this user."""
    home = root / "home"
    home.mkdir(exist_ok=True)
    command = [sys.executable, "-m", "tecb_eval.cli", *args]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: no user to whom a folder is read-only")
        os.chown(home, NOBODY, NOBODY)
        setpriv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
        # A checkout inside a folder only root may enter (mktemp -d) cannot be imported by nobody.
        probe = subprocess.run([*setpriv, sys.executable, "-c", "import tecb_eval.cli"], cwd="/",
                               capture_output=True, text=True, timeout=120)
        if probe.returncode != 0:
            pytest.skip(f"nobody cannot import this checkout ({probe.stderr.strip().splitlines()[-1][:120]})")
        command = [*setpriv, *command]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HOME": str(home), "HF_HUB_OFFLINE": "1", "MPLCONFIGDIR": str(home)})


@pytest.mark.slow
def test_read_only_outputs_are_one_line(world_readable):
    root = world_readable
    locked = root / "locked"
    locked.mkdir()
    (locked / "results.jsonl").write_text("")
    locked.chmod(0o555)
    (locked / "results.jsonl").chmod(0o444)
    home = root / "home"
    data = str(root / DATASET)
    run = ["run", "--data", data, "--model", "tfidf-lsa", "--config", "minibatch_kmeans:none", "--quiet",
           "--limit-splits", "1"]
    cases = [
        (run + ["--results", str(locked / "results.jsonl"), "--cache-dir", str(home / "cache")], "results.jsonl"),
        (run + ["--results", str(locked / "new.jsonl"), "--cache-dir", str(home / "cache")], "new.jsonl"),
        (run + ["--results", str(home / "r.jsonl"), "--cache-dir", str(locked / "cache")], "cache"),
        (run + ["--results", str(home / "r.jsonl"), "--cache-dir", str(home / "cache"), "--out", str(locked / "out")],
         "out"),
        (["pretrain", "--model", "minilm-l6", "--data", data, "--out", str(locked / "pre"), "--quiet"], "pre"),
    ]
    for args, names in cases:
        done = _as_user_who_cannot_write(root, *args)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith("tecb-eval: error: ") and str(locked / names) in done.stderr, done.stderr
    done = _as_user_who_cannot_write(root, *run, "--results", str(home / "r.jsonl"), "--cache-dir", str(home / "cache"))
    assert done.returncode == 0, done.stderr  # the same run, writable: works
    done = _as_user_who_cannot_write(root, "export", str(home / "r.jsonl"), "--out", str(locked / "report"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and str(locked / "report") in done.stderr, done.stderr
    assert sorted(p.name for p in locked.iterdir()) == ["results.jsonl"] and (locked / "results.jsonl").read_text() == ""
