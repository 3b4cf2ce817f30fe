"""`tecb-eval workers`: a warm Dask LocalCluster that prints its address, takes `run --scheduler`
work, and stops in order on Ctrl-C or SIGTERM with the shell's exit code, leaving nothing running."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading

import pytest

from tecb_eval import cli

START_S = 120  # the address line: a worker imports torch and sentence-transformers before it
STOP_S = 60


def _start(*options: str, as_background_job: bool = False) -> subprocess.Popen:
    # Its own session, as a terminal gives a command its process group: killpg is the terminal's Ctrl-C.
    # As a background job (`tecb-eval workers &` in a script): the shell starts it with Ctrl-C ignored.
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if as_background_job else None
    return subprocess.Popen([sys.executable, "-m", "tecb_eval.cli", "workers", *options], preexec_fn=ignore,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _address(process: subprocess.Popen) -> str:
    """The command's first stdout line, within START_S: a hang fails the test instead of blocking it."""
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: lines.put(process.stdout.readline()), daemon=True).start()
    try:
        line = lines.get(timeout=START_S)
    except queue.Empty:
        process.kill()
        pytest.fail(f"no scheduler address on stdout within {START_S} s")
    assert line.startswith("tcp://127.0.0.1:"), (line, process.stderr.read() if process.poll() is not None else "")
    return line.strip()


def _children(process: subprocess.Popen) -> list:
    import psutil

    return psutil.Process(process.pid).children(recursive=True)


def _gone(children: list) -> bool:
    """Whether the command's children have all ended, within STOP_S of the command itself (the
    resource tracker ends when it sees its pipe close)."""
    import time

    import psutil

    deadline = time.monotonic() + STOP_S
    while True:
        # A child that has exited but is not reaped yet (a zombie whose parent is gone) runs nothing.
        left = [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
        if not left or time.monotonic() > deadline:
            return not left
        time.sleep(0.2)


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        # As Dask binds: a closed connection's TIME_WAIT does not hold the port, a listener does.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _stop(process: subprocess.Popen, signum: int, group: bool) -> tuple[str, str]:
    if group:
        os.killpg(process.pid, signum)  # Ctrl-C in a terminal: the command and its workers
    else:
        process.send_signal(signum)  # `kill`: the command alone
    try:
        return process.communicate(timeout=STOP_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        pytest.fail(f"the command did not stop within {STOP_S} s of {signal.Signals(signum).name}")


@pytest.mark.slow
def test_one_warm_worker_takes_work_and_ctrl_c_stops_it(tmp_path):
    import distributed

    process = _start("--workers", "1", "--port", "0")
    try:
        address = _address(process)
        children = _children(process)
        with distributed.Client(address, timeout=30) as client:
            assert len(client.scheduler_info()["workers"]) == 1
            # The preload ran: the worker imported torch as it started, before any task.
            assert list(client.run(lambda: "torch" in sys.modules).values()) == [True]
            assert client.submit(sum, [1, 2, 3]).result(timeout=30) == 6
    finally:
        out, err = _stop(process, signal.SIGINT, group=True)
    assert process.returncode == 130, err
    assert out == "", out  # the address line was read above; nothing else on stdout
    lines = err.splitlines()
    assert lines[0].startswith("1 warm Dask worker ready") and f"--scheduler {address}" in lines[0], err
    assert lines[1:] == ["tecb-eval: interrupted; the workers are stopped"], err
    assert _gone(children), [(c.pid, c.cmdline()) for c in children if c.is_running()]
    assert _port_free(int(address.rsplit(":", 1)[1]))


@pytest.mark.slow
def test_gpu_gives_each_worker_the_gpu_resource_and_sigterm_stops_it():
    """Started as a script's background job (Ctrl-C ignored), which SIGTERM still stops: it once
    went through Ctrl-C's handler, which such a job does not have, and the workers stayed up."""
    import distributed

    process = _start("--workers", "1", "--port", "0", "--gpu", as_background_job=True)
    try:
        address = _address(process)
        children = _children(process)
        with distributed.Client(address, timeout=30) as client:
            workers = client.scheduler_info()["workers"]
            assert [info["resources"] for info in workers.values()] == [{"GPU": 1}]
    finally:
        out, err = _stop(process, signal.SIGTERM, group=False)
    assert process.returncode == 143, err
    assert "--encode-on gpu" in err.splitlines()[0], err
    assert err.splitlines()[-1] == "tecb-eval: terminated; the workers are stopped", err
    assert _gone(children), [(c.pid, c.cmdline()) for c in children if c.is_running()]


@pytest.mark.slow
def test_ctrl_c_while_the_workers_start_stops_them_once_they_are_up():
    """Held, not raised mid-start: a LocalCluster interrupted while its workers start leaves them to
    an exit handler that fails on them with a traceback."""
    import time

    import psutil

    process = _start("--workers", "1", "--port", "0")
    deadline = time.monotonic() + START_S
    spawned = []
    while not spawned and time.monotonic() < deadline and process.poll() is None:
        for child in psutil.Process(process.pid).children():
            try:
                if "spawn_main" in " ".join(child.cmdline()):  # a Dask worker process, starting
                    spawned.append(child)
            except psutil.Error:  # gone already
                pass
        time.sleep(0.05)
    assert spawned, "no worker process started"
    out, err = _stop(process, signal.SIGINT, group=False)
    assert process.returncode == 130, err
    assert out == "" and "Traceback" not in err, err
    assert err.splitlines() == ["tecb-eval: stopping once the workers have started (Ctrl-C again to stop now)",
                                "tecb-eval: interrupted; the workers are stopped"], err
    assert _gone(spawned), [(c.pid, c.cmdline()) for c in spawned if c.is_running()]


def test_a_port_in_use_is_one_line_naming_it_and_exit_2():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "tecb_eval.cli", "workers", "--workers", "1", "--port",
                                 str(port)], capture_output=True, text=True, timeout=STOP_S + START_S)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("tecb-eval: error: "), result.stderr
    assert f"port {port}" in result.stderr and "--port 0" in result.stderr


@pytest.mark.parametrize("argv, says", [
    (["--workers", "0"], "--workers 0: give at least 1"),
    (["--threads-per-worker", "0"], "--threads-per-worker 0: give at least 1"),
    (["--port", "70000"], "--port 70000: give a port from 1 to 65535, or 0"),
    (["--memory-limit", "lots"], "--memory-limit 'lots': not a size Dask reads"),
    (["--memory-limit", "2"], "--memory-limit '2': 2 bytes per worker is less than a worker holds"),
])
def test_options_no_cluster_can_take_are_one_line_before_anything_starts(argv, says, capsys):
    assert cli.main(["workers", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and says in captured.err, captured.err
