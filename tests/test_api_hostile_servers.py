"""Models behind an API (``openai:NAME``) against servers on 127.0.0.1 that misbehave on purpose
(tests/openai_server.py): a redirect to another server, credentials echoed back in another
encoding, vectors no clustering can use, a usage count no request can have, a model changed under
its name, an answer dripped a byte at a time, a gzip bomb, a Retry-After date far ahead, a full
disk under the cache. Each is one line, nothing of the batch cached, nothing sent where it should
not go; the client is the real one, never patched."""

from __future__ import annotations

import base64
import email.utils
import os
import signal
import subprocess
import sys
import time
from urllib.parse import quote

import numpy as np
import pytest

from api_runs import (DATASET, KEY, KEY_VARIABLE, api_model, eval_error, full_disk, hashed_vectors, run, run_argv,
                      shards)
from openai_server import EmbeddingServer

from helpers import store_rows


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    return KEY


def encoder_for(url: str, said: list | None = None, **options):
    from tecb_eval.models.encoders import get_encoder

    encoder = get_encoder("openai:minilm", base_url=url, api_key_env=KEY_VARIABLE, **options)
    encoder.log = (said.append if said is not None else lambda message: None)
    return encoder


def refused(encoder, texts: list[str]) -> tuple[str, list]:
    """``encoder`` refuses ``texts``: its one-line error and what it handed to be cached."""
    from tecb_data.errors import UserError

    saved: list = []
    with pytest.raises(UserError) as error:
        encoder.encode_batches(texts, lambda batch, vectors, tokens: saved.extend(batch))
    message = str(error.value)
    assert "\n" not in message, message
    return message, saved


TEXTS = [f"Nachricht Nummer {i} über das Wetter" for i in range(6)]


# -- redirects ---------------------------------------------------------------------------------

def test_a_redirect_is_followed_nowhere_and_named_with_both_urls_without_credentials(
        demo_datasets, tmp_path, capsys, key):
    with EmbeddingServer(hashed_vectors) as first, EmbeddingServer(hashed_vectors) as elsewhere:
        target = elsewhere.url.replace("http://", "http://thief:stolenPass@") + "/embeddings?token=abc123"
        first.redirect_to = target
        base = first.url.replace("http://", "http://tecbuser:tecbPassw0rd@")
        error = eval_error(capsys, run_argv(demo_datasets / DATASET, api_model(first, base_url=base), tmp_path))
        assert elsewhere.requests == 0  # no text and no key went there
    assert first.url in error and elsewhere.url + "/embeddings" in error and "HTTP 307" in error, error
    assert not [s for s in ("tecbuser", "tecbPassw0rd", "thief", "stolenPass", "abc123", KEY) if s in error], error
    assert not shards(tmp_path / "cache") and not (tmp_path / "results.jsonl").exists()


# -- credentials ---------------------------------------------------------------------------------

def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize("echo", [
    lambda auth: f"bad header: {auth}",  # the Basic header as sent: base64 of user:password
    lambda auth: f"bad header (base64): {_b64(auth)}",  # the header's base64, credentials at an offset
    lambda auth: "you sent " + quote(auth, safe=""),  # percent-encoded
    lambda auth: "you sent " + auth.encode().hex(),  # hex
], ids=["basic", "base64", "percent", "hex"])
@pytest.mark.parametrize("userinfo", [True, False], ids=["userinfo", "key"])
def test_credentials_echoed_in_another_encoding_are_taken_out(echo, userinfo, key):
    with EmbeddingServer(hashed_vectors) as server:
        server.echo = echo
        url = server.url.replace("http://", "http://tecbuser:tecb%40Passw0rd@") if userinfo else server.url
        message, saved = refused(encoder_for(url), TEXTS)
        header = server.headers[0]
    sent = next(line.split(": ", 1)[1] for line in header.splitlines() if line.lower().startswith("authorization:"))
    assert sent.startswith("Basic " if userinfo else "Bearer ")
    secrets = [sent, sent.split()[1], KEY, "tecbuser", "tecb@Passw0rd", "tecb%40Passw0rd"]
    forms = {form for s in secrets for form in (s, _b64(s), quote(s, safe=""), s.encode().hex())}
    assert "HTTP 400" in message and not [f for f in forms if f in message], message
    assert not saved


def test_a_base_urls_user_and_password_go_as_basic_auth_in_place_of_the_key_and_it_says_so(key):
    said: list = []
    with EmbeddingServer(hashed_vectors) as server:
        encoder = encoder_for(server.url.replace("http://", "http://tecbuser:tecbPassw0rd@"), said)
        encoder.encode(["ein Text"])
        header = server.headers[0]
    assert f"Basic {_b64('tecbuser:tecbPassw0rd')}" in header and KEY not in header
    assert any("HTTP Basic" in line and KEY_VARIABLE in line and "not sent" in line for line in said), said
    assert not [line for line in said if "tecbPassw0rd" in line or "tecbuser" in line or KEY in line]


# -- vectors no clustering can use, usage no request can have ------------------------------------

@pytest.mark.parametrize("transform, said", [
    (lambda v: np.zeros_like(v), "zero length"),
    (lambda v: np.full_like(v, 1e-30), "zero length"),  # its squares underflow float32
    (lambda v: v * np.float32(1e19), "squared length"),  # finite, but its squares overflow float32
    (lambda v: np.repeat(v[:1], len(v), axis=0), "one and the same vector"),
], ids=["zeros", "tiny", "squares-overflow", "one-vector"])
def test_vectors_a_clustering_cannot_use_are_refused_in_one_line_and_nothing_cached(transform, said, key):
    with EmbeddingServer(hashed_vectors) as server:
        server.transform = transform
        message, saved = refused(encoder_for(server.url, batch_size=3, concurrency=1), TEXTS)
    assert said in message and "nothing of this batch was cached" in message and "batch 1 of 2" in message, message
    assert not saved


def test_one_vector_for_every_text_is_refused_across_batches_of_one_text(key):
    with EmbeddingServer(lambda texts: np.ones((len(texts), 16), dtype=np.float32)) as server:
        message, saved = refused(encoder_for(server.url, batch_size=1, concurrency=1), TEXTS)
    assert "one and the same vector for all 2 distinct texts" in message and "batch 2 of 6" in message, message
    assert len(saved) == 1 and server.requests == 2


def test_one_vector_for_every_text_stops_the_grid_with_nothing_stored(demo_datasets, tmp_path, capsys, key):
    with EmbeddingServer(hashed_vectors) as server:
        server.transform = lambda v: np.repeat(v[:1], len(v), axis=0)
        error = eval_error(capsys, run_argv(demo_datasets / DATASET, api_model(server, concurrency=1), tmp_path))
    assert "one and the same vector" in error and "openai:minilm" in error, error
    assert not shards(tmp_path / "cache") and not (tmp_path / "results.jsonl").exists()


def test_a_token_count_no_request_can_have_is_no_cost(demo_datasets, tmp_path, key):
    with EmbeddingServer(hashed_vectors) as server:
        server.prompt_tokens = 10 ** 30
        code, output = run(run_argv(demo_datasets / DATASET, api_model(server, price_per_million_tokens=0.02),
                                    tmp_path, splits=1))
    assert code == 0, output
    notes = [line for line in output.splitlines() if "prompt tokens" in line]
    assert notes and all("no tokens or cost are recorded" in line for line in notes), output
    rows = store_rows(tmp_path / "results.jsonl")
    assert rows and all(r.get("api_cost") is None and r["api_tokens"] is None for r in rows), rows[0]


# -- a model changed under its name ----------------------------------------------------------------

def test_a_model_changed_under_its_name_stops_the_run_in_one_line(demo_datasets, tmp_path, capsys, key):
    data = demo_datasets / DATASET
    with EmbeddingServer(hashed_vectors) as server:
        base = server.url.replace("http://", "http://tecbuser:tecbPassw0rd@")
        model = api_model(server, base_url=base)
        code, output = run(run_argv(data, model, tmp_path, splits=1))
        assert code == 0, output
        sent = len(server.texts)
        # The same model: one cached text asked again, then the second split's new texts.
        code, output = run(run_argv(data, model, tmp_path))
        assert code == 0, output
        canary = server.texts[sent]
        assert canary in server.texts[:sent] and server.texts[sent + 1:] and set(server.texts[sent + 1:]).isdisjoint(
            server.texts[:sent])
        cached = len(shards(tmp_path / "cache"))
        server.transform = lambda v: hashed_vectors([str(x) for x in v[:, 0]])  # another model, the same name
        before = len(server.texts)
        error = eval_error(capsys, run_argv(data, model, tmp_path, "--seed", "8"))
        asked = server.texts[before:]
        assert len(asked) == 1 and asked[0] in server.texts[:before]  # nothing else asked once the canary moved
    assert "cache no longer matches the server" in error and "openai:minilm" in error and server.url in error, error
    assert "tecbuser" not in error and "tecbPassw0rd" not in error
    assert len(shards(tmp_path / "cache")) == cached
    assert not [r for r in store_rows(tmp_path / "results.jsonl") if r["seed"] == 8]


# -- time and size -----------------------------------------------------------------------------------

def test_a_dripping_answer_is_cut_at_the_timeout_of_the_whole_request(key):
    with EmbeddingServer(hashed_vectors) as server:
        server.drip = 0.02  # a byte each 20 ms: each read is quick, the answer takes about 20 s
        import openai  # noqa: F401 -- imported before the clock starts

        started = time.monotonic()
        message, saved = refused(encoder_for(server.url, timeout=1, max_retries=1), TEXTS)
        took = time.monotonic() - started
    assert "within timeout=1 s" in message and "1 retry" in message, message
    assert took < 4, took  # two tries of at most a second each, and the client's backoff between
    assert server.requests == 2 and not saved


def test_dripping_headers_are_cut_a_timeout_after_the_requests_deadline(key):
    with EmbeddingServer(hashed_vectors) as server:
        server.drip, server.drip_headers = 0.1, True  # even the status line: no answer to look at
        import openai  # noqa: F401 -- imported before the clock starts

        started = time.monotonic()
        message, saved = refused(encoder_for(server.url, timeout=1, max_retries=3), TEXTS)
        took = time.monotonic() - started
    assert "within timeout=1 s" in message and "held the request" in message, message
    assert took < 3.5 and server.requests == 1 and not saved, took


def test_a_gzip_bomb_is_stopped_at_the_answers_bound_and_named(key):
    with EmbeddingServer(hashed_vectors) as server:
        server.gzip_bomb = 64 * 2 ** 20  # 64 MiB of zeros in about 64 KB
        message, saved = refused(encoder_for(server.url, batch_size=8), TEXTS)
    assert "of gzip past 5 MiB" in message and "decompression bomb" in message, message
    assert "nothing of this batch was cached" in message and server.requests == 1 and not saved


def test_a_retry_after_date_past_max_wait_says_so_and_sends_no_retry(key):
    with EmbeddingServer(hashed_vectors) as server:
        server.throttle_every = 1
        server.retry_after = email.utils.formatdate(time.time() + 86400, usegmt=True)
        message, saved = refused(encoder_for(server.url), TEXTS)
    assert "asked for a wait of" in message and "past max_wait=600 s" in message, message
    assert "retries" not in message.split("rerun")[0].replace("its retries", "")
    assert server.requests == 1 and not saved


def test_a_retry_after_the_client_will_not_wait_for_names_the_retries_it_sent(key):
    # Within max_wait, but longer than the openai client waits (60 s or 120 s, by its version): it
    # sends no retry, and the line says none was sent.
    with EmbeddingServer(hashed_vectors) as server:
        server.throttle_every, server.retry_after = 1, "500"
        message, _ = refused(encoder_for(server.url, max_retries=3), TEXTS)
    assert "after 0 retries" in message and "asked for a wait of 500 s" in message, message
    assert server.requests == 1


# -- stopping ------------------------------------------------------------------------------------------

def _dripping_run(server, demo_datasets, tmp_path, timeout: int):
    model = api_model(server, timeout=timeout, max_retries=0, concurrency=1)
    process = subprocess.Popen(
        [sys.executable, "-m", "tecb_eval.cli", *run_argv(demo_datasets / DATASET, model, tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", KEY_VARIABLE: KEY, "TECB_JOBS": "1"})
    deadline = time.monotonic() + 60
    while server.requests < 1 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    assert server.requests == 1, process.communicate()
    time.sleep(0.3)  # the answer is dripping
    return process


def test_a_second_ctrl_c_leaves_a_dripping_server_at_once(demo_datasets, tmp_path):
    with EmbeddingServer(hashed_vectors) as server:
        server.drip = 0.05
        process = _dripping_run(server, demo_datasets, tmp_path, timeout=120)
        process.send_signal(signal.SIGINT)
        time.sleep(0.5)
        process.send_signal(signal.SIGINT)
        started = time.monotonic()
        try:
            _, stderr = process.communicate(timeout=10)
        finally:
            process.kill()
        took = time.monotonic() - started
    assert process.returncode == 130 and took < 5, (process.returncode, took, stderr)
    assert "Ctrl-C again to stop now" in stderr and "Traceback" not in stderr, stderr


def test_sigterm_stops_a_run_held_by_a_dripping_server(demo_datasets, tmp_path):
    with EmbeddingServer(hashed_vectors) as server:
        server.drip = 0.05
        # The request in flight may take its timeout to be answered and kept, no longer, and no retry follows.
        process = _dripping_run(server, demo_datasets, tmp_path, timeout=2)
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        try:
            _, stderr = process.communicate(timeout=30)
        finally:
            process.kill()
        took = time.monotonic() - started
    assert process.returncode == 143 and took < 4, (process.returncode, took, stderr)
    assert server.requests == 1
    assert "terminated" in stderr and "Traceback" not in stderr, stderr


# -- a full disk ---------------------------------------------------------------------------------------

def test_a_full_disk_under_the_cache_is_one_line_and_leaves_no_part_of_a_shard(demo_datasets, tmp_path, capsys, key):
    try:
        with full_disk(tmp_path / "small") as small, EmbeddingServer(hashed_vectors) as server:
            cache = small / "cache"
            error = eval_error(capsys, run_argv(demo_datasets / DATASET, api_model(server), tmp_path, cache=cache))
            left = sorted(p.name for p in cache.rglob("*") if p.is_file())
            answered = server.answered
    except PermissionError as exc:
        pytest.skip(f"cannot mount a small tmpfs here ({exc})")
    assert "the disk is full" in error and str(cache) in error and "--cache-dir" in error, error
    assert answered >= 1 and not [name for name in left if name.startswith(".tmp-") or name.endswith(".npz")], left
    assert not (tmp_path / "results.jsonl").exists()
