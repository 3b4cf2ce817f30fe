"""A small OpenAI-compatible embeddings server for tests: real HTTP on 127.0.0.1, speaking
``POST /v1/embeddings`` as OpenAI documents it (request: ``model``, ``input`` a text or a list,
``encoding_format`` float or base64, ``dimensions``; answer: ``{object: "list", data: [{object:
"embedding", index, embedding}], model, usage: {prompt_tokens, total_tokens}}``, errors as
``{error: {message, type, code}}``), serving whatever ``encode`` computes (the tests: the offline
MiniLM). It counts what it is sent, and can misbehave on purpose: throttle, reorder, answer the
wrong count or dimension, NaN, a body that is not JSON, refuse the key, stop mid-run, be slow,
redirect, drip its answer, answer a gzip bomb, echo the credentials it was sent, serve vectors no
clustering can use (or another model's), report tokens it cannot have counted.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

import numpy as np

# OpenAI's wording for an input over the model's limit (what a client may parse to cut a text).
TOO_LONG = ("This model's maximum context length is {limit} tokens, however you requested {asked} tokens "
            "({asked} in your prompt; 0 for the completion). Please reduce your prompt; or completion length.")


def tokens(text: str) -> int:
    """The stand-in's token count: words (a real server counts its tokenizer's tokens)."""
    return max(1, len(text.split()))


class EmbeddingServer:
    """``with EmbeddingServer(encode) as server: server.url`` -> ``http://127.0.0.1:PORT/v1``.

    Behaviour switches (set before or during a run): ``key`` (None: any key), ``throttle_every``
    (every n-th request is a 429 with ``Retry-After: retry_after``), ``reverse`` (items in reverse
    order, indexes kept), ``wrong_count``, ``wrong_dimension``, ``nan``, ``not_json``,
    ``stop_after`` (stops listening once it has answered that many requests), ``latency`` (seconds
    per request), ``max_tokens`` (longer inputs are refused with OpenAI's 400), ``redirect_to`` (every
    POST answered ``307`` with that ``Location``), ``drip`` (seconds between the answer's bytes, its
    headers sent at once; with ``drip_headers`` its status line and headers too), ``gzip_bomb`` (the answer: that many zero bytes, gzipped), ``echo``
    (``echo(authorization)`` -> the text of a 400 that quotes what was sent), ``transform``
    (``transform(vectors)`` -> the vectors served), ``prompt_tokens`` (the usage reported)."""

    def __init__(self, encode: Callable[[list[str]], np.ndarray], *, port: int = 0, model: str = "minilm",
                 key: str | None = None, latency: float = 0.0):
        self.encode, self.model, self.key, self.latency = encode, model, key, latency
        self.throttle_every = 0
        self.retry_after = "0.05"
        self.reverse = self.wrong_count = self.wrong_dimension = self.nan = self.not_json = False
        self.stop_after: int | None = None
        self.stopped = False
        self.max_tokens: int | None = None
        self.redirect_to: str | None = None
        self.drip = 0.0
        self.drip_headers = False
        self.gzip_bomb = 0
        self.echo: Callable[[str], str] | None = None
        self.transform: Callable[[np.ndarray], np.ndarray] | None = None
        self.prompt_tokens: int | None = None
        self._closing = False
        self.requests = 0  # POSTs received
        self.answered = 0  # POSTs answered with embeddings
        self.texts: list[str] = []  # every input of every answered (embedded, paid) request, in order
        self.formats: list[str] = []
        self.bodies: list[bytes] = []  # every request's raw body and headers, for the secrets check
        self.headers: list[str] = []
        self._lock = threading.Lock()
        self._encode_lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = None

    def __enter__(self) -> "EmbeddingServer":
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        self._closing = True  # a dripping answer stops too
        if self._thread is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread = None

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet: the tests read the client's output
                pass

            def _send(self, status: int, body: bytes, content_type="application/json", headers=()):
                headers = [("Content-Type", content_type), ("Content-Length", str(len(body))), *headers]
                if server.drip_headers:
                    head = f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}\r\n" + "".join(
                        f"{name}: {value}\r\n" for name, value in headers) + "\r\n"
                    return self._drip(head.encode("latin-1") + body)
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.end_headers()
                if not server.drip:
                    self.wfile.write(body)
                    return
                self.wfile.flush()
                self._drip(body)

            def _drip(self, data: bytes) -> None:
                try:
                    for i in range(len(data)):
                        if server._closing:
                            break
                        self.wfile.write(data[i:i + 1])
                        self.wfile.flush()
                        time.sleep(server.drip)
                except OSError:  # the client gave up on the answer
                    pass
                self.close_connection = True

            def _error(self, status: int, message: str, kind: str, code=None, headers=()):
                self._send(status, json.dumps({"error": {"message": message, "type": kind, "param": None,
                                                         "code": code}}).encode(), headers=headers)

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if server.stopped:  # gone: a kept-alive connection is dropped without an answer
                    self.close_connection = True
                    return
                with server._lock:
                    server.requests += 1
                    number = server.requests
                    server.bodies.append(body)
                    server.headers.append(str(self.headers))
                if server.redirect_to is not None:
                    return self._send(307, b"", headers=[("Location", server.redirect_to)])
                if server.echo is not None:
                    return self._error(400, server.echo(self.headers.get("Authorization") or ""),
                                       "invalid_request_error")
                if self.path.rstrip("/") != "/v1/embeddings":
                    return self._error(404, f"no route {self.path}", "invalid_request_error")
                if server.key is not None and self.headers.get("Authorization") != f"Bearer {server.key}":
                    # OpenAI's own 401 shows part of the key it was given.
                    given = (self.headers.get("Authorization") or "")[7:]
                    return self._error(401, f"Incorrect API key provided: {given[:3]}***{given[-4:]}.",
                                       "invalid_request_error", "invalid_api_key")
                if server.throttle_every and number % server.throttle_every == 0:
                    return self._error(429, "Rate limit reached for requests", "requests", "rate_limit_exceeded",
                                       headers=[("Retry-After", server.retry_after)])
                try:
                    request = json.loads(body)
                    texts = request["input"]
                    texts = [texts] if isinstance(texts, str) else list(texts)
                    fmt = request.get("encoding_format", "float")
                    assert fmt in ("float", "base64") and all(isinstance(t, str) and t for t in texts)
                except (ValueError, KeyError, AssertionError, TypeError):
                    return self._error(400, "'input' must be a non-empty string or list of strings",
                                       "invalid_request_error")
                if server.max_tokens is not None:
                    longest = max(tokens(t) for t in texts)
                    if longest > server.max_tokens:
                        return self._error(400, TOO_LONG.format(limit=server.max_tokens, asked=longest),
                                           "invalid_request_error")
                if server.latency:
                    time.sleep(server.latency)
                with server._encode_lock:
                    vectors = np.asarray(server.encode(texts), dtype=np.float32)
                dimensions = request.get("dimensions")
                if dimensions:
                    # Shortened as OpenAI's text-embedding-3 models are: the first d, normalised again.
                    vectors = vectors[:, :int(dimensions)]
                    vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
                if server.wrong_dimension:
                    vectors = vectors[:, :-1]
                if server.nan:
                    vectors = vectors.copy()
                    vectors[0, 0] = math.nan
                if server.transform is not None:
                    vectors = np.asarray(server.transform(vectors), dtype=np.float32)
                items = [{"object": "embedding", "index": i,
                          "embedding": base64.b64encode(v.astype("<f4").tobytes()).decode("ascii")
                          if fmt == "base64" else [float(x) for x in v]}
                         for i, v in enumerate(vectors)]
                if server.wrong_count:
                    items = items[:-1]
                if server.reverse:
                    items = items[::-1]
                used = sum(tokens(t) for t in texts) if server.prompt_tokens is None else server.prompt_tokens
                if server.not_json:
                    return self._send(200, b"<html><body>502 Bad Gateway</body></html>", "text/html")
                if server.gzip_bomb:
                    return self._send(200, _zeros_gzipped(server.gzip_bomb), headers=[("Content-Encoding", "gzip")])
                answer = {"object": "list", "data": items, "model": request.get("model", server.model),
                          "usage": {"prompt_tokens": used, "total_tokens": used}}
                # Counted before the answer leaves: a client that has its vectors finds them counted.
                with server._lock:
                    server.answered += 1
                    server.texts.extend(texts)
                    server.formats.append(fmt)
                    stop = server.stop_after is not None and server.answered >= server.stop_after
                self._send(200, json.dumps(answer).encode())
                if stop:
                    server.stopped = True
                    # Stops listening: what is not yet accepted is refused, as a server that went away.
                    threading.Thread(target=server.stop, daemon=True).start()

        return Handler


_bombs: dict[int, bytes] = {}


def _zeros_gzipped(size: int) -> bytes:
    """``size`` zero bytes, gzipped (about a thousandth of the size): a decompression bomb."""
    if size not in _bombs:
        _bombs[size] = gzip.compress(bytes(size), compresslevel=9)
    return _bombs[size]
