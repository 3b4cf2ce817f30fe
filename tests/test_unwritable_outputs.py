"""Outputs this user cannot write (a read-only folder, a file where a folder should be): every
command of both tools ends in one line naming the option and the path, exit code 2, and writes
nothing. Run as a user to whom the folders are read-only (as root: as nobody, through setpriv)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from helpers import error_line, run_cli
from helpers import REPO

DATASET = "tenkgnad-clustering-s2s"
NOBODY = 65534


def unwritable_folder(tmp_path: Path) -> Path:
    """A folder this process cannot create anything in (root ignores permissions: use sysfs there)."""
    if os.geteuid() == 0:
        return Path("/sys/tecb-test-not-writable")
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    return folder / "out"


@pytest.mark.parametrize("kind", ["file", "unwritable"])
@pytest.mark.slow
def test_build_out_and_cache_that_cannot_be_written_are_one_line(tmp_path, kind):
    if kind == "file":
        bad = tmp_path / "a-file"
        bad.write_text("x")
    else:
        bad = unwritable_folder(tmp_path)
    result = run_cli("build", "--source", "tenkgnad", "--demo", "--out", str(bad), "--quiet")
    assert result.returncode == 2 and f"--out {bad}" in error_line(result.stderr)
    ids = tmp_path / "ids.txt"
    ids.write_text("id\nabc1\n")
    result = run_cli("build", "--source", "reddit", "--ids", str(ids), "--out", str(tmp_path / "o"), "--cache", str(bad),
                     "--quiet")
    assert result.returncode == 2 and f"--cache {bad}" in error_line(result.stderr)


@pytest.fixture
def world_readable(demo_datasets):
    """A folder another user can read, holding a copy of the dataset; removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="tecb-readonly-"))
    try:
        root.chmod(0o755)
        shutil.copytree(demo_datasets / DATASET, root / DATASET)
        for path in [root / DATASET, *(root / DATASET).rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        yield root
    finally:
        for path in [root, *root.rglob("*")]:
            if path.is_dir():
                path.chmod(0o755)
        shutil.rmtree(root)


# Each command of a list run in one interpreter (`tecb_eval.cli.main`, the libraries quieted as the
# installed command quiets them), its standard error read from the file descriptor (what a library writes there too),
# its exit code as the process would return it: one start of Python for the whole list.
_COMMANDS = """
import json, os, sys, tempfile
from tecb_data.commandline import quiet_libraries
from tecb_eval.cli import main
done = []
for args in json.loads(sys.argv[1]):
    sys.stdout.flush(); sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as err:
        os.dup2(err.fileno(), 2)
        try:
            quiet_libraries(args)
            try:
                code = main(args)
            except SystemExit as stop:
                code = stop.code
        finally:
            sys.stdout.flush(); sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        done.append({"returncode": code if isinstance(code, int) else (0 if code is None else 1),
                     "stderr": err.read().decode("utf-8", "replace")})
print(json.dumps(done))
"""


def _as_user_who_cannot_write(root: Path, *commands: list[str]) -> list[subprocess.CompletedProcess]:
    """Each of ``commands`` (`tecb-eval ARGS`) as a user for whom root's read-only folders are
    read-only, in one process: root itself writes anywhere, so as root it runs as nobody
    (setpriv); otherwise as this user."""
    import json

    home = root / "home"
    home.mkdir(exist_ok=True)
    command = [sys.executable, "-c", _COMMANDS, json.dumps([list(c) for c in commands])]
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
    ran = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "HOME": str(home), "HF_HUB_OFFLINE": "1", "MPLCONFIGDIR": str(home)})
    assert ran.returncode == 0, ran.stderr[-3000:]
    return [subprocess.CompletedProcess(c, r["returncode"], "", r["stderr"])
            for c, r in zip(commands, json.loads(ran.stdout.splitlines()[-1]))]


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
    # The same run, writable, works; then the export of what it wrote into a read-only folder.
    *refused, writable, export = _as_user_who_cannot_write(
        root, *(args for args, _ in cases), [*run, "--results", str(home / "r.jsonl"), "--cache-dir", str(home / "cache")],
        ["export", str(home / "r.jsonl"), "--out", str(locked / "report")])
    for done, (_, names) in zip(refused, cases):
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith("tecb-eval: error: ") and str(locked / names) in done.stderr, done.stderr
    assert writable.returncode == 0, writable.stderr
    done = export
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and str(locked / "report") in done.stderr, done.stderr
    assert sorted(p.name for p in locked.iterdir()) == ["results.jsonl"] and (locked / "results.jsonl").read_text() == ""
