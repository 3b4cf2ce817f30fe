"""On a cold numba cache one process compiles UMAP's code while the others wait for it
(tecb_eval.clustering.estimators.compile_umap): a process that reaches its first UMAP fit
while another holds the compile lock waits on it, and goes on once it is released; with the code
said to be on disk (its marker), a process takes no lock at all."""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import REPO

CHILD = "from tecb_eval.clustering.estimators import compile_umap; compile_umap()"


def _flocks(lock: Path, pid: int) -> set[str]:
    """What process ``pid`` has of a flock on ``lock``: "waits" (the kernel's /proc/locks marks a
    waiter with ``->``) and/or "holds"."""
    inode = lock.stat().st_ino
    found = set()
    for line in Path("/proc/locks").read_text().splitlines():
        if re.search(rf"FLOCK\s+\S+\s+WRITE\s+{pid}\s+\S+:{inode}\s", line):
            found.add("waits" if "->" in line else "holds")
    return found


def _until(condition, child: subprocess.Popen, seconds: float = 120) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


def _start(cache: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO, env={**os.environ, "NUMBA_CACHE_DIR": str(cache)})


@pytest.mark.slow
def test_a_process_waits_while_another_compiles_and_goes_on_once_it_is_done(tmp_path):
    cache = tmp_path / "numba"
    cache.mkdir()
    path = cache / "tecb-umap-compile.lock"
    path.touch()
    child = None
    try:
        with open(path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # this test is the process compiling
            child = _start(cache)
            assert _until(lambda: "waits" in _flocks(path, child.pid), child), child.poll()
            time.sleep(0.5)
            assert child.poll() is None and _flocks(path, child.pid) == {"waits"}  # still waiting
        # Released: the child takes the lock (to compile, the cache being empty) or is past it.
        assert _until(lambda: "waits" not in _flocks(path, child.pid), child, 30)
    finally:
        if child is not None:
            child.kill()
            child.communicate()


def test_with_the_code_on_disk_no_lock_is_taken(tmp_path):
    from tecb_eval.clustering import numba_cache

    cache = tmp_path / "numba"
    cache.mkdir()
    (cache / f"tecb-umap-compiled-{numba_cache._code_key()}").touch()
    path = cache / "tecb-umap-compile.lock"
    path.touch()
    child = None
    try:
        with open(path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # held the whole time: a child that asked for it would wait
            child = _start(cache)
            # It goes on to import UMAP without ever waiting: an import of numba, not a lock.
            assert _until(lambda: "numba" in _loaded(child.pid), child), child.poll()
            assert "waits" not in _flocks(path, child.pid)
    finally:
        if child is not None:
            child.kill()
            child.communicate()


def _loaded(pid: int) -> str:
    """The shared objects and files process ``pid`` has mapped (numba's compiled core, once imported)."""
    try:
        return Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return ""
