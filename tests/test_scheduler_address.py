"""`--scheduler` naming something that is not a Dask scheduler ends in one line, at once: a port
nothing listens on (refused, said without waiting out --scheduler-timeout), a web server, a server
that sends a few stray bytes and hangs up, a transport this machine lacks (ucx://). A failed
connection leaves no empty --cache-dir behind. The servers are real sockets in this process."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from helpers import run_cli_here
from tecb_data.errors import UserError

pytestmark = pytest.mark.timeout(60)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def web_server():
    class Hello(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"hello")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def stray_bytes_server():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    done = threading.Event()

    def serve():
        listener.settimeout(0.2)
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"\x01\x02garbage")
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    done.set()
    thread.join()
    listener.close()


def refused(message: str, start: float, *needles: str) -> None:
    assert time.monotonic() - start < 12, "a refusal must not wait out the timeout"
    assert "\n" not in message
    for needle in needles:
        assert needle in message, message


def test_a_refused_port_is_said_at_once():
    from tecb_eval.grid.dask_executor import connect

    start = time.monotonic()
    with pytest.raises(UserError) as error:
        connect(f"tcp://127.0.0.1:{free_port()}", timeout=30)
    refused(str(error.value), start, "refused")


def test_a_web_server_is_no_scheduler(web_server):
    from tecb_eval.grid.dask_executor import connect

    start = time.monotonic()
    with pytest.raises(UserError) as error:
        connect(web_server, timeout=3)
    refused(str(error.value), start, "does not speak Dask's protocol", web_server)


def test_a_server_sending_stray_bytes_is_no_scheduler(stray_bytes_server):
    from tecb_eval.grid.dask_executor import connect

    start = time.monotonic()
    with pytest.raises(UserError) as error:
        connect(stray_bytes_server, timeout=10)
    refused(str(error.value), start, stray_bytes_server)


def test_a_transport_this_machine_lacks_is_named():
    from tecb_eval.grid.dask_executor import connect

    start = time.monotonic()
    with pytest.raises(UserError) as error:
        connect("ucx://127.0.0.1:1", timeout=10)
    refused(str(error.value), start, "ucx://", "tcp://")


def test_a_failed_connection_leaves_no_cache_folder(tmp_path, demo_datasets):
    from tecb_eval.cli import main

    cache = tmp_path / "new" / "cache"
    done = run_cli_here("run", "--data", str(demo_datasets / "blurbs-clustering-s2s"), "--model", "tfidf-lsa",
                        "--config", "minibatch_kmeans:none", "--scheduler", f"tcp://127.0.0.1:{free_port()}", "--cache-dir", str(cache),
                        "--results", str(tmp_path / "r.jsonl"), "--quiet", main=main)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and "refused" in lines[0], done.stderr
    assert not (tmp_path / "new").exists() and not (tmp_path / "r.jsonl").exists()


def test_a_real_scheduler_still_connects():
    from distributed import LocalCluster

    from tecb_eval.grid.dask_executor import connect

    with LocalCluster(n_workers=0, processes=False, protocol="tcp", dashboard_address=None) as cluster:
        client = connect(cluster.scheduler_address, timeout=10)
        try:
            assert client.scheduler_info()["address"] == cluster.scheduler_address
        finally:
            client.close()


def _fails(error):
    raise error


def _dies():
    import os

    os._exit(1)  # as a worker killed for its memory ends


def test_a_worker_that_cannot_import_or_keeps_dying_is_one_line(kept_environment):
    import dask
    from distributed import Client, LocalCluster

    from tecb_eval.grid.cluster_encode import ClusterEncoder

    with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster, set_as_default=False) as client:
        encoder = ClusterEncoder(client, print)
        with pytest.raises(UserError) as error:
            encoder._call("checking the models", _fails, ModuleNotFoundError("No module named 'torch'", name="torch"))
        assert "a Dask worker cannot import torch" in str(error.value) and "\n" not in str(error.value)
    # Dask's own verdict on a task whose workers died (here after one death): one line, naming memory.
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster, set_as_default=False) as client:
        with pytest.raises(UserError) as error:
            ClusterEncoder(client, lambda message: None)._call("opening minilm-l6", _dies)
        assert "opening minilm-l6: every Dask worker that tried it died" in str(error.value)
        assert "memory" in str(error.value) and "\n" not in str(error.value)
