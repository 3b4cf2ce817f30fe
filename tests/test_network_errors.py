"""Network answers that never come, or cannot come (``tecb_data.network``, praw's own timeout, the
Hub client): a Hub, an id-list URL or Reddit that accepts a connection and never answers ends in
one line naming the endpoint and the setting that bounds the wait; a host that cannot be resolved
is said at once, without retries; a retry says what failed in words; a commit the Hub answers too
late is said to be perhaps applied, and a re-run makes no second commit."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from helpers import error_line, one_error, run_cli


class StalledServer:
    """Accepts TCP connections on 127.0.0.1, reads nothing and never answers (a hung endpoint)."""

    def __init__(self):
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(128)
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._socket.getsockname()[1]}"

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            self._held.append(connection)

    def __enter__(self) -> "StalledServer":
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._socket.close()
        for connection in self._held:
            connection.close()

    @property
    def connections(self) -> int:
        return len(self._held)


@pytest.fixture
def stalled():
    with StalledServer() as server:
        yield server


def hub_env(tmp_path: Path, endpoint: str, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_", "TECB_"))}
    env.update(HF_ENDPOINT=endpoint, HF_HOME=str(tmp_path / "hf-home"), HF_HUB_OFFLINE="0", HF_HUB_DISABLE_XET="1",
               HF_HUB_DISABLE_TELEMETRY="1", HF_TOKEN="hf_tecbTestSecret0123456789abcdef", **extra)
    return env


def timed(command: list[str], env: dict, **kwargs) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, **kwargs)
    return result, time.monotonic() - started


# --- nothing hangs: a server that accepts connections and never answers -------------------------

@pytest.mark.slow
def test_push_dry_run_against_a_hub_that_never_answers_ends_in_one_line(demo_datasets, tmp_path, stalled):
    # A short wait, as a user may set it: the server never answers, whatever the wait.
    env = hub_env(tmp_path, stalled.url, TECB_NETWORK_TIMEOUT="0.3")
    result, seconds = timed([sys.executable, "-m", "tecb_data.cli", "push", str(demo_datasets / "blurbs-clustering-s2s"),
                             "--repo-id", "tecb-test/blurbs", "--dry-run"], env)
    line = error_line(result.stderr)
    assert result.returncode == 2
    assert stalled.url in line and "TECB_NETWORK_TIMEOUT" in line and "within 0.3 s" in line, line
    assert stalled.connections >= 3  # tried more than once (bounded retries)...
    # ...and gave up in bounded time (3 tries of 0.3 s + 1 + 2 s backoff, about 4 s; the bound is
    # generous because a loaded 2-core machine takes seconds just to start the interpreter)
    assert seconds < 120, seconds


@pytest.mark.slow
def test_loading_a_repo_id_from_a_hub_that_never_answers_ends_in_one_line(tmp_path, stalled):
    """tecb-eval run --data ORG/NAME goes through tecb_data.load."""
    # huggingface_hub reads its own timeouts as whole seconds.
    env = hub_env(tmp_path, stalled.url, TECB_NETWORK_TIMEOUT="0.3", HF_HUB_ETAG_TIMEOUT="1",
                  HF_HUB_DOWNLOAD_TIMEOUT="1")
    code = ("import sys, tecb_data\nfrom tecb_data.errors import UserError\n"
            "try:\n    tecb_data.load('tecb-test/blurbs-clustering-s2s')\n"
            "except UserError as exc:\n    print(f'tecb-data: error: {exc}', file=sys.stderr); sys.exit(2)\n")
    result, seconds = timed([sys.executable, "-c", code], env)
    line = error_line(result.stderr)
    assert result.returncode == 2
    assert stalled.url in line and "TECB_NETWORK_TIMEOUT" in line and "tecb-test/blurbs-clustering-s2s" in line, line
    assert seconds < 120, seconds  # bounded (generous for a loaded machine), not a hang


@pytest.mark.slow
def test_an_id_list_url_that_never_answers_ends_in_one_line(tmp_path, stalled):
    env = {**os.environ, "TECB_NETWORK_TIMEOUT": "0.3"}
    url = f"{stalled.url}/ids.txt?token=secret-in-query"
    result, seconds = timed([sys.executable, "-m", "tecb_data.cli", "build", "--source", "reddit", "--ids", url,
                             "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "cache"), "--quiet"], env)
    line = error_line(result.stderr)
    assert result.returncode == 2 and "secret-in-query" not in result.stderr
    assert f"{stalled.url}/ids.txt" in line and "TECB_NETWORK_TIMEOUT" in line and "within 0.3 s" in line, line
    assert stalled.connections == 3 and seconds < 120, (stalled.connections, seconds)


@pytest.mark.slow
def test_reddit_that_never_answers_ends_in_one_line_naming_praws_timeout(tmp_path, stalled):
    import redditserver as rs

    home = tmp_path / "home"
    home.mkdir()
    ini = rs.praw_ini(home / ".config", stalled.url)
    ini.write_text(ini.read_text().replace("[tecbtest]\n", "[tecbtest]\ntimeout = 1\n"))  # praw's own setting
    ids = tmp_path / "ids.txt"
    ids.write_text("id\nabc1\nabc2\n")
    started = time.monotonic()
    result = rs.rehydrate(home, ids=ids, out=tmp_path / "out", cache=tmp_path / "cache", praw_site="tecbtest",
                          attempts=1)
    seconds = time.monotonic() - started
    line = error_line(result.stderr)
    assert result.returncode == 2
    assert stalled.url in line and "`timeout = " in line and "[tecbtest]" in line and "up to 1 s" in line, line
    assert " in 1 try of up to 1 s each;" in line, line
    assert seconds < 80, seconds  # 1 of our tries: prawcore's 3 of 1 s and its short waits (generous)


def test_a_bad_network_timeout_setting_is_one_line(demo_datasets, tmp_path):
    env = hub_env(tmp_path, "http://127.0.0.1:9", TECB_NETWORK_TIMEOUT="soon")
    result = run_cli("push", str(demo_datasets / "blurbs-clustering-s2s"), "--repo-id", "a/b", "--dry-run", env=env)
    assert result.returncode == 2 and "TECB_NETWORK_TIMEOUT='soon'" in error_line(result.stderr)


@pytest.mark.slow
def test_a_commit_the_hub_answers_too_late_says_it_may_have_been_applied(demo_datasets, tmp_path):
    """The Hub applies the commit after the client gave up: the line says so, and a re-run makes no
    second commit."""
    from hubserver import FakeHub

    hub = FakeHub(tokens={"hf_tecbTestSecret0123456789abcdef": "maintainer"})
    hub.start()
    try:
        # The Hub holds the commit until the client has given up (an event, not a guess at how
        # long giving up takes), then applies it.
        client_gave_up = threading.Event()
        held = []  # True: the client had given up while the Hub still held its commit
        hub.before("POST", r"/commit/", lambda _hub: held.append(client_gave_up.wait(timeout=300)))
        env = hub_env(tmp_path, hub.url, TECB_NETWORK_TIMEOUT="1")
        folder = str(demo_datasets / "blurbs-clustering-s2s")
        result, _ = timed([sys.executable, "-m", "tecb_data.cli", "push", folder, "--repo-id", "tecb-test/x",
                           "--allow-synthetic"], env)
        client_gave_up.set()
        line = error_line(result.stderr)
        assert result.returncode == 2 and "committing" in line and "within 1 s" in line, line
        assert "may have been applied" in line and "nothing was published" not in line, line
        deadline = time.monotonic() + 120  # the Hub finishes the commit it was sent
        while len(hub.history("tecb-test/x")) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        # The client gave up on its own (TECB_NETWORK_TIMEOUT), not when the Hub answered: the Hub
        # was still holding the commit when the client had exited.
        assert held == [True], held
        again = run_cli("push", folder, "--repo-id", "tecb-test/x", "--allow-synthetic", env=env)
        assert again.returncode == 0 and "unchanged" in again.stdout, again.stderr
        assert len(hub.history("tecb-test/x")) == 2  # the Hub's initial commit and ours, once
    finally:
        hub.stop()


# --- an unresolvable host, and retries --------------------------------------------------------------

@pytest.mark.slow
def test_reddit_with_an_unresolvable_host_says_so_at_once(tmp_path):
    import redditserver as rs

    home = tmp_path / "home"
    home.mkdir()
    rs.praw_ini(home / ".config", "https://tecb-offline.invalid")  # .invalid never resolves (RFC 2606)
    ids = tmp_path / "ids.txt"
    ids.write_text("id\nabc1\nabc2\n")
    started = time.monotonic()
    result = rs.rehydrate(home, ids=ids, out=tmp_path / "out", cache=tmp_path / "cache", praw_site="tecbtest",
                          attempts=6)
    seconds = time.monotonic() - started
    line = one_error(result, "tecb-data")
    assert "cannot be resolved" in line and "tecb-offline.invalid" in line and "timeout" not in line, line
    assert "retrying" not in result.stderr  # no backoff for an answer that will not change
    # Six attempts with backoff would take over a minute; an unresolvable host takes seconds. 60 s
    # leaves room for a loaded machine's start-up.
    assert seconds < 60, seconds


class _Flaky(BaseHTTPRequestHandler):
    answers: list[int] = []

    def do_GET(self):
        status = self.answers.pop(0) if self.answers else 200
        body = b"id\nabc1\n" if status == 200 else b"busy"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.mark.slow
def test_an_id_list_retry_says_what_failed_in_words(tmp_path):
    _Flaky.answers = [503, 503, 503]
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/ids.txt"
        result = run_cli("build", "--source", "reddit", "--ids", url, "--out", str(tmp_path / "out"),
                         "--cache", str(tmp_path / "cache"), "--quiet")
    finally:
        server.shutdown()
        server.server_close()
    retries = [line for line in result.stderr.splitlines() if "retrying" in line]
    assert len(retries) == 2 and all("HTTP 503" in line for line in retries), result.stderr
    assert "_Transient" not in result.stderr
    unresolvable = run_cli("build", "--source", "reddit", "--ids", "https://tecb-offline.invalid/ids.txt",
                           "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "cache"), "--quiet")
    line = one_error(unresolvable, "tecb-data")
    assert "host name cannot be resolved" in line and "retrying" not in unresolvable.stderr, unresolvable.stderr
