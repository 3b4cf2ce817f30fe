"""What goes wrong on a Dask cluster is named in one line: a scheduler that runs other tecb code
(it unpickles every task a run sends, so it must run the coordinator's code as the workers do), and
workers that are never there because their nannies restart them for going over their memory limit.

The cluster runs for real: ``dask scheduler`` in its own process, from a copy of the package."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tecb_data.errors import UserError
from tecb_eval.grid.run import run_grid

distributed = pytest.importorskip("distributed")

pytestmark = pytest.mark.usefixtures("kept_environment")


def _free_port() -> int:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        return free.getsockname()[1]


def _other_checkout(folder: Path) -> Path:
    """A copy of tecb's packages with one file edited: another checkout of the same version."""
    import tecb_data
    import tecb_eval

    for package in (tecb_data, tecb_eval):
        root = Path(package.__file__).resolve().parent
        shutil.copytree(root, folder / root.name, ignore=shutil.ignore_patterns("__pycache__"))
    edited = folder / "tecb_eval" / "grid" / "cluster_encode.py"
    edited.write_text(edited.read_text(encoding="utf-8") + "\n# another checkout's line\n", encoding="utf-8")
    return folder


def _scheduler(address: str, env: dict, cwd: Path) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                "--port", address.rsplit(":", 1)[1], "--no-dashboard"], env=env, cwd=cwd,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", int(address.rsplit(":", 1)[1])), timeout=1).close()
            return process
        except OSError:
            time.sleep(0.1)
    return process


def _small_run(demo_datasets: Path, address: str, tmp_path: Path) -> None:
    """One cheap cell on the cluster at ``address``, its store and cache under ``tmp_path``."""
    run_grid([demo_datasets / "tenkgnad-clustering-s2s"], ["tfidf-lsa"], configurations=["minibatch_kmeans:none"],
             limit_splits=1, scheduler=address, scheduler_timeout=30, results=tmp_path / "r.jsonl",
             cache_dir=tmp_path / "cache", progress=False, log=lambda m: None)


def test_a_scheduler_running_other_tecb_code_is_one_line_naming_it(demo_datasets, tmp_path):
    code = _other_checkout(tmp_path / "checkout")
    address = f"tcp://127.0.0.1:{_free_port()}"
    env = {**os.environ, "PYTHONPATH": str(code)}
    scheduler = _scheduler(address, env, tmp_path)
    try:
        with pytest.raises(UserError, match=rf"the Dask scheduler at {address} runs other tecb code than this "
                                            r"process .* it unpickles every task a run sends: start the scheduler "
                                            r"from the same tecb installation"):
            _small_run(demo_datasets, address, tmp_path)
    finally:
        scheduler.terminate()
        scheduler.wait(timeout=60)
    assert not (tmp_path / "r.jsonl").exists() and not (tmp_path / "cache").exists()


def test_workers_restarted_for_their_memory_limit_are_named_instead_of_no_workers(demo_datasets, tmp_path):
    """A nanny whose worker starts over its --memory-limit restarts it in a loop; the worker is gone
    whenever a run asks, and the line names the memory, not "start some workers"."""
    from distributed import Client

    address = f"tcp://127.0.0.1:{_free_port()}"
    scheduler = _scheduler(address, dict(os.environ), tmp_path)
    worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nworkers", "1",
                               "--nthreads", "1", "--memory-limit", "60MB", "--no-dashboard"], cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        with Client(address, timeout=30) as client:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:  # the nanny's restarts reach the scheduler as events
                if len(client.get_events("worker-restart-memory")) >= 2 and not client.scheduler_info()["workers"]:
                    break
                time.sleep(0.2)
            else:
                pytest.fail("the worker was not restarted for its memory limit within 120 s")
        with pytest.raises(UserError, match=rf"the Dask scheduler at {address} has no workers; their nannies "
                                            r"restarted workers \d+ times for going over their memory limit \(the last "
                                            r"at [\d.]+ [MG]iB\): start them with a larger `--memory-limit`"):
            _small_run(demo_datasets, address, tmp_path)
    finally:
        # A SIGTERM can reach the nanny while it starts the next worker, which it then waits on: the
        # group is killed, the nanny and the worker it was starting.
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=60)
        scheduler.terminate()
        scheduler.wait(timeout=60)
    assert not (tmp_path / "r.jsonl").exists() and not (tmp_path / "cache").exists()
