"""``openai:NAME``: a model behind an OpenAI-compatible ``POST /v1/embeddings`` endpoint (OpenAI,
or a server of one's own: vLLM, text-embeddings-inference, Ollama, infinity), through the official
``openai`` client: its timeouts, its retries (429 and 5xx, honouring ``Retry-After``) and its
response types.

The key comes only from the environment (``OPENAI_API_KEY``, or the variable ``api_key_env``
names) and reaches nothing we write: the identity, the cache, rows and messages name the base URL
without credentials, and every message has the key and those credentials taken out in whatever
encoding a server echoes them (percent-encoded, base64, a Basic header). The texts leave the
machine; the encoder says so, once, before its first request.

The client follows no redirect (a 3xx would send the texts and the key to another server), bounds
each request attempt in time as a whole (``timeout``: a server that drips its answer a byte at a
time is cut there, as one that says nothing is) and its answer in size, decompressed included.
Each run asks the server again for one text it has cached (the canary): a server whose model
changed under the same name stops the run before old and new vectors mix.

:meth:`OpenAIEncoder.encode_batches` sends ``concurrency`` requests at a time and hands each
answered batch, checked, to a ``save`` callback in the calling thread: the grid's embedding store
writes it before more is sent, so an interrupted run pays for no text twice. The first Ctrl-C
(or SIGTERM) sends nothing more and keeps what is in flight for a while; a second leaves at once.
"""

from __future__ import annotations

import base64
import email.utils
import functools
import json
import math
import os
import queue
import re
import sys
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Callable
from urllib.parse import quote, quote_plus, unquote, urljoin, urlsplit, urlunsplit

import numpy as np

from tecb_data.errors import UserError
from tecb_eval.models import prompts as prompt_rules
from tecb_eval.models.kinds.common import EmbeddingSnippet, Encoder, Load, Option

PREFIX = "openai:"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
BASE_URL_VARIABLE = "OPENAI_BASE_URL"  # what the openai client itself reads
DEFAULT_KEY_VARIABLE = "OPENAI_API_KEY"
# vLLM's and text-embeddings-inference's documented stand-in for a server that checks no key.
NO_KEY = "EMPTY"
DEFAULTS = {"batch_size": 64, "concurrency": 4, "max_retries": 5, "timeout": 60.0, "max_wait": 600.0,
            "encoding_format": "base64", "truncate": "refuse", "api_key_env": DEFAULT_KEY_VARIABLE}
ENCODING_FORMATS = ("base64", "float")
TRUNCATE = ("refuse", "end")
# What an ``openai:`` model takes, and of what type: its registry entry's options.
OPTIONS = {
    "base_url": Option(str), "dimensions": Option(int, least=1), "batch_size": Option(int, least=1),
    "concurrency": Option(int, least=1), "max_retries": Option(int, least=0), "timeout": Option(float, above=0),
    "max_wait": Option(float, least=0), "prompt": Option(str), "api_key_env": Option(str),
    "price_per_million_tokens": Option(float, least=0), "truncate": Option(str, choices=TRUNCATE),
    "encoding_format": Option(str, choices=ENCODING_FORMATS),
}
_INTEGERS = {name: int(option.least) for name, option in OPTIONS.items() if option.type is int}
_NUMBERS = {name: option.above is None for name, option in OPTIONS.items() if option.type is float}  # 0 allowed
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# How a provider says an input is longer than the model takes (OpenAI, vLLM, TEI, infinity).
_TOO_LONG = re.compile(r"maximum context length|too long|too many tokens|exceeds? the max|input length|"
                       r"must have less than", re.I)
_CONTEXT = re.compile(r"maximum context length is (\d+) tokens.*?requested (\d+) tokens", re.I | re.S)
MAX_CUTS = 12  # truncate=end: a text is cut at most this often before it is refused
# An answer's bytes (decompressed): a float-JSON vector of 4,096 dimensions takes about 100 KB, so
# this leaves room for any model's and refuses a decompression bomb long before memory runs out.
ANSWER_BYTES_PER_TEXT = 512 * 1024
ANSWER_BYTES_BASE = 1024 * 1024
# What the client asks a server to compress with: the encodings decoded here, under the bound above.
ACCEPT_ENCODING = "gzip, deflate"
_DECOMPRESS_STEP = 1 << 20
# A tokenizer makes at most one token per UTF-8 byte, plus a few special tokens per text: a
# reported count past that bound is no count of what was sent, and no cost is kept from it.
TOKEN_SLACK_PER_TEXT = 32
# A vector whose squared length passes this cannot be clustered in float32 (a sum of squares over
# many texts overflows), and one below float32's smallest normal number cannot be normalised.
MAX_SQUARED_NORM = 1e32
# The canary: a cached text asked for again moves by GPU non-determinism (batching, fp16/bf16
# kernels: at most about 1e-2 of its length); a changed model moves it by far more.
CANARY_TOLERANCE = 0.05
# After the first Ctrl-C or SIGTERM, the requests in flight get this long to be answered and kept.
STOP_GRACE_S = 10.0
POLL_S = 0.25  # how often the waiting thread looks at the batches in flight


# -- options -----------------------------------------------------------------------------------
def model_name(spec) -> str:
    return str(spec)[len(PREFIX):]


def _int(name: str, value, model: str) -> int:
    least = _INTEGERS[name]
    text = str(value).strip()
    number = None if isinstance(value, (bool, float)) or not text.lstrip("-").isdigit() else int(text)
    if number is None or number < least:
        raise UserError(f"model {model}: {name}={value!r} must be an integer of at least {least}")
    return number


def _number(name: str, value, model: str) -> float:
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    zero_ok = _NUMBERS[name]
    if not math.isfinite(number) or number < 0 or (number == 0 and not zero_ok):
        raise UserError(f"model {model}: {name}={value!r} must be a {'non-negative' if zero_ok else 'positive'} "
                        "number")
    return number


def public_url(url: str) -> str:
    """``url`` without the user and password it may hold (``https://user:pass@host`` -> ``https://host``)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def _check_url(url: str, model: str) -> None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- a port that is no number raises here
    except ValueError:
        raise UserError(f"model {model}: base_url {public_url_or_hidden(url)} is not a URL; give "
                        "http(s)://HOST[:PORT]/v1") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"model {model}: base_url {public_url_or_hidden(url)} is not an http(s) URL; give "
                        "http(s)://HOST[:PORT]/v1")
    if parts.query or parts.fragment:
        raise UserError(f"model {model}: base_url {public_url(url)} holds a query or fragment; give the URL "
                        "without it (a key goes in the environment variable api_key_env names)")


def public_url_or_hidden(url: str) -> str:
    try:
        return public_url(url)
    except ValueError:
        return "(not shown: it cannot be parsed, and may hold credentials)"


@dataclass(frozen=True)
class Settings:
    """An ``openai:`` model's options, read and checked."""

    model: str
    base_url: str  # as given (it may hold credentials): only the client sees it
    public_base_url: str
    dimensions: int | None = None
    batch_size: int = DEFAULTS["batch_size"]
    concurrency: int = DEFAULTS["concurrency"]
    max_retries: int = DEFAULTS["max_retries"]
    timeout: float = DEFAULTS["timeout"]
    max_wait: float = DEFAULTS["max_wait"]
    prompt: str | None = None
    api_key_env: str = DEFAULT_KEY_VARIABLE
    price_per_million_tokens: float | None = None
    truncate: str = "refuse"
    encoding_format: str = "base64"


def settings(spec, given: dict) -> Settings:
    """The options of ``spec`` (CLI text or Python values), checked: one line for a bad one."""
    model = model_name(spec)
    shown = str(spec)
    if not model:
        raise UserError("openai:: give the model's name after openai:, e.g. openai:text-embedding-3-small")
    options = {k: v for k, v in given.items() if v is not None}
    base_url = str(options.get("base_url") or os.environ.get(BASE_URL_VARIABLE) or DEFAULT_BASE_URL)
    _check_url(base_url, shown)
    values: dict = {}
    for name in _INTEGERS:
        if name in options:
            values[name] = _int(name, options[name], shown)
    for name in _NUMBERS:
        if name in options:
            values[name] = _number(name, options[name], shown)
    if "prompt" in options:
        if not isinstance(options["prompt"], str):
            raise UserError(f"model {shown}: prompt={options['prompt']!r} must be text")
        values["prompt"] = options["prompt"] or None
    variable = str(options.get("api_key_env", DEFAULT_KEY_VARIABLE))
    if not _VARIABLE.match(variable):
        raise UserError(f"model {shown}: api_key_env={variable!r} is not the name of an environment variable; give "
                        "the variable's name (e.g. OPENAI_API_KEY), never the key")
    for name, allowed in (("truncate", TRUNCATE), ("encoding_format", ENCODING_FORMATS)):
        if name in options:
            if options[name] not in allowed:
                raise UserError(f"model {shown}: {name}={options[name]!r} is not one of {', '.join(allowed)}")
            values[name] = options[name]
    return Settings(model=model, base_url=base_url, public_base_url=public_url(base_url), api_key_env=variable,
                    **values)


def api_key(s: Settings) -> str:
    """The key from the environment; a server of one's own that checks none gets the usual stand-in."""
    key = os.environ.get(s.api_key_env, "")
    if key:
        return key
    if s.api_key_env != DEFAULT_KEY_VARIABLE or urlsplit(s.base_url).hostname == urlsplit(DEFAULT_BASE_URL).hostname:
        raise UserError(f"model {PREFIX}{s.model}: no API key: set the environment variable {s.api_key_env} "
                        f"(for {s.public_base_url})")
    return NO_KEY


# -- the encoder ---------------------------------------------------------------------------------
@dataclass
class Usage:
    """What an encoder spent in this process: requests, retries and their waits, the tokens the
    provider reported, texts sent and found in the embedding cache, texts cut to fit."""

    requests: int = 0
    retries: int = 0
    waited_s: float = 0.0
    tokens: int = 0
    texts_sent: int = 0
    cache_hits: int = 0
    truncated: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


class _OutOfTime(Exception):
    """A batch's retries would wait past ``max_wait``."""


class _Refused(Exception):
    """An answer the client must not take further (a redirect, an answer past its size bound, a
    stopped run): the message says why, without credentials."""


class _BatchError(Exception):
    """A batch the encoder cannot use; the message names what was wrong, without the key."""


@dataclass
class _Flight:
    """A batch in flight, as its thread and the waiting thread both see it: the deadline of its
    request of the moment, and whether the run gave up on it."""

    deadline: float = math.inf
    abandoned: bool = False


@dataclass
class _Piece:
    texts: list[str]
    vectors: np.ndarray
    tokens: np.ndarray  # per text, the request's reported tokens shared out by length


class OpenAIEncoder(Encoder):
    """An OpenAI-compatible embeddings endpoint behind tecb's encoder face."""

    in_batches = True

    def __init__(self, s: Settings, log: Callable[[str], None] | None = None):
        self.settings = s
        self.name = f"{PREFIX}{s.model}"
        self.host = s.public_base_url
        self.prompt = s.prompt
        self.batch_size = s.batch_size
        self.price_per_million_tokens = s.price_per_million_tokens
        self.identity = identity(s)
        self.persistent = True
        self.usage = Usage()
        self.log = log or (lambda message: print(message, file=sys.stderr, flush=True))
        self._client = None
        self._key = None
        self._secrets: list[str] = _secret_forms(s.base_url, None)
        self._told = False
        self._checked = False
        self._stopping = False
        self._width = s.dimensions
        self._local = threading.local()
        self._one_vector: np.ndarray | None = None  # while every vector answered so far is this one
        self._one_vector_texts = 0
        self._varied = False

    # The client is made on the first request: a run whose texts are all cached needs no key or
    # network until it asks for its canary.
    def _open(self):
        if self._client is None:
            import openai

            self._key = api_key(self.settings)
            self._secrets = _secret_forms(self.settings.base_url, None if self._key == NO_KEY else self._key)
            # The client's own defaults (timeout, connection limits) are kept; a redirect is not
            # followed: it would take the texts and the key to a server nobody named.
            http = openai.DefaultHttpxClient(follow_redirects=False, headers={"Accept-Encoding": ACCEPT_ENCODING},
                                             event_hooks={"request": [self._on_request],
                                                          "response": [self._on_response]})
            self._client = openai.OpenAI(base_url=self.settings.base_url, api_key=self._key,
                                         timeout=self.settings.timeout, max_retries=self.settings.max_retries,
                                         http_client=http)
            parts = urlsplit(self.settings.base_url)
            if (parts.username or parts.password) and self._key != NO_KEY:
                self._say(f"note: {self.name}: the base URL's user and password go to {self.host} as HTTP Basic "
                          f"authentication, in place of the key in {self.settings.api_key_env} (which is not sent)")
        return self._client

    def _say(self, message: str) -> None:
        self.log(self._redact(message))

    # -- hooks on the client's own HTTP requests: each wait said in one line, the total bounded
    def _on_request(self, request) -> None:
        local = self._local
        retry = int(request.headers.get("x-stainless-retry-count", "0") or 0)
        now = time.monotonic()
        if self._stopping or local.flight.abandoned:
            raise _refuse("the run stopped waiting for this batch before the request was sent")
        if retry > 0:
            waited = max(0.0, now - getattr(local, "last", now))
            with self.usage.lock:
                self.usage.retries += 1
                self.usage.waited_s += waited
            local.waited += waited
            local.retries += 1
            self._say(f"note: {self.name}: batch {local.batch}: {local.why}; retry {retry} of "
                      f"{self.settings.max_retries} after waiting {waited:.3f} s")
            if local.waited > self.settings.max_wait:
                raise _give_up(f"its retries waited {local.waited:.1f} s, past max_wait={self.settings.max_wait:g} s")
        with self.usage.lock:
            self.usage.requests += 1
        local.last = now
        # The whole attempt, its answer read to the end, within timeout (httpx bounds each read only).
        local.flight.deadline = now + self.settings.timeout
        local.why = "no answer (connection failed or timed out)"

    def _on_response(self, response) -> None:
        local = self._local
        local.last = time.monotonic()
        status = response.status_code
        if 300 <= status < 400:
            raise _refuse(self._redirected(response))
        if local.last > local.flight.deadline:  # headers that took the whole timeout: retried as a timeout
            raise _httpx().ReadTimeout(f"the answer's headers took longer than timeout={self.settings.timeout:g} s")
        local.asked = None
        if status == 429 or status >= 500 or status in (408, 409):
            local.why = f"HTTP {status}" + (" (rate limit)" if status == 429 else "")
            after = _retry_after(response.headers)
            local.asked = after
            if after is not None and local.waited + after > self.settings.max_wait:
                raise _give_up(f"the server asked for a wait of {after:,.0f} s (HTTP {status}, Retry-After), past "
                               f"max_wait={self.settings.max_wait:g} s")
        encodings = [e.strip().lower() for e in response.headers.get_list("content-encoding", split_commas=True)
                     if e.strip().lower() not in ("", "identity")]
        if len(encodings) > 1 or (encodings and encodings[0] not in _DECODERS):
            raise _refuse(f"{self.host} answered in the content encoding {', '.join(encodings)!r}, which was not "
                          f"asked for (only {ACCEPT_ENCODING})")
        limit = ANSWER_BYTES_BASE + ANSWER_BYTES_PER_TEXT * self.batch_size
        length = response.headers.get("content-length", "")
        if length.strip().isdigit() and int(length) > limit:
            raise _refuse(f"the answer of {self.host} is {int(length):,} bytes, past the {limit / 2**20:.0f} MiB "
                          f"{self.batch_size} embeddings can take; it is not an embeddings answer")
        # Decoded here, under the bound, rather than by httpx, which decodes without one.
        if encodings:
            del response.headers["content-encoding"]
        response.stream = _bounded_stream(response.stream, self.host, limit, encodings[0] if encodings else None,
                                          local.flight.deadline, self.settings.timeout)

    def _redirected(self, response) -> str:
        asked = str(response.request.url)
        location = response.headers.get("location")
        target = _shown_url(urljoin(asked, location)) if location else "(no Location given)"
        return (f"{_shown_url(asked)} answered HTTP {response.status_code}, a redirect to {target}; no redirect is "
                "followed (the texts and the key would go to a server nobody named): if that is the endpoint, give it "
                "as base_url")

    # -- encoding
    def encode(self, texts: list[str]) -> np.ndarray:
        """The vectors of ``texts`` in their order (nothing cached: the grid encodes through
        :meth:`encode_batches` into its embedding store)."""
        texts = list(texts)
        found: dict[str, np.ndarray] = {}

        def keep(batch, vectors, tokens):
            found.update(zip(batch, vectors))

        self.encode_batches(sorted(set(texts)), keep)
        if not texts:
            return np.zeros((0, self._width or 0), dtype=np.float32)
        return np.stack([found[t] for t in texts])

    def note_cache_hits(self, count: int) -> None:
        with self.usage.lock:
            self.usage.cache_hits += count

    def check_cache(self, text: str, cached: np.ndarray) -> None:
        """Ask the server again for ``text``, whose vector the cache holds (``cached``): once per
        run, before anything else is sent. A vector that moved past GPU noise means the model behind
        the name changed, and old and new vectors must not mix: one line, the run stops."""
        if self._checked:
            return
        self._checked = True
        fresh = self.encode([text])[0]
        cached = np.asarray(cached, dtype=np.float32)
        scale = max(float(np.linalg.norm(cached.astype(np.float64))), float(np.finfo(np.float32).tiny))
        moved = math.inf if fresh.shape != cached.shape else \
            float(np.linalg.norm(fresh.astype(np.float64) - cached.astype(np.float64))) / scale
        if moved > CANARY_TOLERANCE:
            how = (f"{fresh.shape[0]} dimensions, not the cached {cached.shape[0]}" if fresh.shape != cached.shape
                   else f"a vector that moved by {moved:.3g} of its length (float noise stays under "
                        f"{CANARY_TOLERANCE:g})")
            raise UserError(self._redact(
                f"{self.name}: the embedding cache no longer matches the server: {self.host} answered for a text it "
                f"encoded before ({text[:30]!r}) {how}; the model served as {self.settings.model!r} changed. Give "
                "another --cache-dir (or remove this model's folder in it) to encode every text again, and do not "
                "compare results stored before with those after"))

    def encode_batches(self, texts: list[str], save: Callable[[list[str], np.ndarray, np.ndarray], None]) -> None:
        """Send ``texts`` in batches, ``concurrency`` requests at a time, and call ``save(texts,
        vectors, tokens)`` in this thread for every batch as it is answered and checked. On an
        error no new batch is sent, the batches in flight are waited for and saved, then the error
        is raised: what was paid for is kept. On Ctrl-C (or SIGTERM) the same, the wait bounded by
        ``STOP_GRACE_S``; a second one leaves at once. A batch that cannot be saved (a full disk)
        ends the run at once."""
        texts = list(texts)
        if not texts:
            return
        s = self.settings
        batches = [texts[i:i + s.batch_size] for i in range(0, len(texts), s.batch_size)]
        self._open()
        if not self._told:
            self._told = True
            self._say(f"note: {self.name}: the texts leave this machine: they are sent to {self.host} "
                      f"({len(texts):,} texts in {len(batches):,} requests of up to {s.batch_size}, "
                      f"{s.concurrency} at a time)")
        before = (self.usage.requests, self.usage.retries, self.usage.waited_s, self.usage.tokens)
        answers: queue.Queue = queue.Queue()
        pending = iter(range(len(batches)))
        flights: dict[int, _Flight] = {}
        failure: BaseException | None = None
        stopped_at: float | None = None

        def send() -> None:
            for number in pending:
                flight = flights[number] = _Flight()

                def one(number=number, flight=flight):
                    try:
                        pieces, error = self._batch(batches[number], number + 1, len(batches),
                                                    number * s.batch_size, flight)
                    except BaseException as exc:  # noqa: BLE001 -- a bug: said, never a wait without end
                        pieces, error = [], exc
                    answers.put((number, pieces, error))

                # Daemon threads: a second Ctrl-C, or a request past its deadline, leaves the thread
                # behind rather than waiting for a server that holds it open.
                threading.Thread(target=one, name=f"tecb-openai-{number + 1}", daemon=True).start()
                return

        for _ in range(s.concurrency):
            send()
        while flights:
            now = time.monotonic()
            patience = POLL_S if stopped_at is None else max(min(POLL_S, stopped_at + STOP_GRACE_S - now), 0.0)
            try:
                number, pieces, error = answers.get(timeout=patience)
            except queue.Empty:
                if stopped_at is not None and time.monotonic() >= stopped_at + STOP_GRACE_S:
                    self._say(f"note: {self.name}: {len(flights)} requests in flight were not answered within "
                              f"{STOP_GRACE_S:g} s of the stop; left unanswered")
                    break
                # The answer is checked against its deadline as it arrives; a server that holds
                # back even its headers is caught here, a timeout later.
                for late in [n for n, f in flights.items() if time.monotonic() > f.deadline + s.timeout]:
                    flights.pop(late).abandoned = True
                    pending = iter(())
                    failure = failure or UserError(
                        f"{self.name}: batch {late + 1} of {len(batches)}: {self.host} gave no whole answer within "
                        f"timeout={s.timeout:g} s (the time one request may take; it still held the request "
                        f"{s.timeout:g} s later); the batches answered are cached: rerun to resume, or raise timeout")
                continue
            except BaseException as exc:  # Ctrl-C (SIGTERM arrives as one): send nothing more
                if stopped_at is not None:
                    raise  # the second: leave now
                stopped_at = time.monotonic()
                self._stopping = True
                failure = failure or exc
                pending = iter(())
                self._say(f"note: {self.name}: stopping: {len(flights)} requests in flight get up to "
                          f"{STOP_GRACE_S:g} s to be answered and kept (Ctrl-C again to stop now)")
                continue
            if flights.pop(number, None) is None:
                continue  # given up on already
            for piece in pieces:
                save(piece.texts, piece.vectors, piece.tokens)  # a full disk raises here: nothing more is sent
            if error is not None and failure is None:
                failure = error
                pending = iter(())
            if failure is None:
                send()
        if failure is not None:
            raise failure
        self._summary(before)

    def _summary(self, before: tuple) -> None:
        u = self.usage
        requests, retries, waited, tokens = (u.requests - before[0], u.retries - before[1], u.waited_s - before[2],
                                             u.tokens - before[3])
        cost = self.cost(tokens)
        self._say(f"note: {self.name}: {requests:,} requests to {self.host}, {retries:,} retried "
                  f"(waited {waited:.2f} s in all), {tokens:,} tokens reported"
                  + (f", cost {cost:.6f} at {self.price_per_million_tokens:g} per million tokens"
                     if cost is not None else ""))

    def usage_fields(self, tokens: float | None) -> dict:
        """A results row's account of this model: ``api_tokens`` (the row's texts, whichever run paid
        for them) and ``api_cost``; the rest is this run's encoding with the model, all datasets
        together (the same on each of its rows: not to be summed over rows)."""
        u = self.usage
        # The key's variable (its name, never the key) lets recommend's snippet read the key where the run did.
        fields = {"api_key_env": self.settings.api_key_env, "api_tokens": None if tokens is None else float(tokens),
                  "api_requests": u.requests, "api_retries": u.retries, "api_waited_s": round(u.waited_s, 3),
                  "api_texts_sent": u.texts_sent, "api_cache_hits": u.cache_hits, "api_truncated": u.truncated}
        cost = self.cost(tokens)
        if cost is not None:
            fields.update(api_cost=cost, price_per_million_tokens=self.price_per_million_tokens)
        return fields

    def cost(self, tokens: float | None) -> float | None:
        if tokens is None or self.price_per_million_tokens is None:
            return None
        return float(tokens) * self.price_per_million_tokens / 1e6

    def _batch(self, texts: list[str], number: int, total: int, offset: int,
               flight: _Flight | None = None) -> tuple[list[_Piece], Exception | None]:
        """One batch (in a pool thread): its pieces and the error that ended it, if one did. An
        input the model refuses as too long splits the batch, so that the rest is paid for once."""
        local = self._local
        local.batch, local.waited, local.why, local.retries, local.asked = f"{number} of {total}", 0.0, "", 0, None
        local.flight = flight or _Flight()
        pieces: list[_Piece] = []
        try:
            self._send(texts, offset, pieces)
            return pieces, None
        except _BatchError as exc:
            message = f"{self.name}: batch {number} of {total} ({len(texts)} texts): {exc}"
        except UserError as exc:
            message = str(exc)
        except Exception as exc:  # noqa: BLE001 -- anything else the client raised, said in one line
            message = f"{self.name}: batch {number} of {total}: {str(exc) or type(exc).__name__}"
        # Whatever wrote the line (a server's own words included), the credentials are taken out.
        return pieces, UserError(self._redact(" ".join(message.split())))

    def _send(self, texts: list[str], offset: int, pieces: list[_Piece], cuts: int = 0) -> None:
        import openai

        s = self.settings
        sent = [(s.prompt or "") + t for t in texts]
        options = {"dimensions": s.dimensions} if s.dimensions else {}
        try:
            response = self._client.embeddings.create(model=s.model, input=sent, encoding_format=s.encoding_format,
                                                      **options)
        except openai.AuthenticationError:
            raise UserError(f"{self.name}: {self.host} refused the API key (HTTP 401): set the environment variable "
                            f"{s.api_key_env} to a key this server accepts") from None
        except openai.PermissionDeniedError:
            raise UserError(f"{self.name}: {self.host} does not let this key use {s.model} (HTTP 403): check the "
                            f"key in {s.api_key_env} and the model's name") from None
        except openai.NotFoundError:
            raise UserError(f"{self.name}: {self.host} has no model {s.model!r} or no /embeddings endpoint (HTTP "
                            "404): check the model's name and base_url (it ends in /v1)") from None
        except openai.BadRequestError as exc:
            message = self._error_text(exc)
            if not _TOO_LONG.search(message):
                raise _BatchError(f"{self.host} refused the request (HTTP 400: {message})") from None
            self._too_long(texts, offset, pieces, cuts, message)
            return
        except openai.RateLimitError:
            raise _BatchError(f"{self.host} still answered HTTP 429 (rate limit) after {self._retries()}"
                              f"{self._asked()}; the batches answered are cached: rerun later to resume, or lower "
                              "concurrency") from None
        except openai.InternalServerError as exc:
            raise _BatchError(f"{self.host} answered HTTP {exc.status_code} after {self._retries()}{self._asked()}; "
                              "the batches answered are cached: rerun to resume") from None
        except openai.APITimeoutError:
            raise _BatchError(f"{self.host} gave no whole answer within timeout={s.timeout:g} s (the time one request "
                              f"may take), {self._retries()}; the batches answered are cached: rerun to resume, or "
                              "raise timeout") from None
        except openai.APIConnectionError as exc:
            cause = type(exc.__cause__).__name__ if exc.__cause__ is not None else "connection failed"
            raise _BatchError(f"could not reach {self.host} ({cause}) after {self._retries()}; the batches "
                              "answered are cached: rerun to resume") from None
        except openai.APIResponseValidationError:
            raise _BatchError(f"the answer of {self.host} is not an embeddings response; nothing of this batch "
                              "was cached") from None
        except openai.APIStatusError as exc:
            raise _BatchError(f"{self.host} answered HTTP {exc.status_code} ({self._error_text(exc)})") from None
        except _OutOfTime as exc:
            raise _BatchError(f"gave up: {exc}; the batches answered are cached: rerun later to resume") from None
        except _Refused as exc:
            raise _BatchError(f"{exc}; nothing of this batch was cached") from None
        except (ValueError, json.JSONDecodeError):
            raise _BatchError(f"the answer of {self.host} is not JSON; nothing of this batch was cached") from None
        vectors, tokens = self._check(response, texts, sent)
        with self.usage.lock:
            self.usage.texts_sent += len(texts)
            self.usage.tokens += int(tokens) if tokens is not None else 0
            self.usage.truncated += 1 if cuts else 0
        pieces.append(_Piece(texts, vectors, _share(tokens, sent)))

    def _too_long(self, texts: list[str], offset: int, pieces: list[_Piece], cuts: int, message: str) -> None:
        """An input longer than the model takes: the batch is halved until the text is alone; then
        it is refused with its index, or (``truncate=end``) cut at the end until the model takes it."""
        if len(texts) > 1:
            half = len(texts) // 2
            self._send(texts[:half], offset, pieces)
            self._send(texts[half:], offset + half, pieces)
            return
        text = texts[0]
        if self.settings.truncate != "end" or cuts >= MAX_CUTS or len(text) < 2:
            raise _BatchError(f"text {offset} (of the texts this run sends, {len(text):,} characters, starting "
                              f"{text[:30]!r}) is longer than {self.settings.model} takes ({message}); give "
                              "truncate=end to cut such texts at the end, or shorten the text")
        found = _CONTEXT.search(message)
        keep = len(text) // 2
        if found and int(found.group(2)) > 0:
            keep = min(keep * 2 - 1, int(len(text) * int(found.group(1)) / int(found.group(2)) * 0.95))
        shorter: list[_Piece] = []
        self._send([text[:max(1, keep)]], offset, shorter, cuts + 1)
        for piece in shorter:  # stored under the whole text: its identity says truncate=end
            pieces.append(_Piece([text], piece.vectors, piece.tokens))

    def _error_text(self, exc) -> str:
        body = getattr(exc, "body", None)
        message = body.get("message") if isinstance(body, dict) else None
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            message = body["error"].get("message")
        text = str(message or getattr(exc, "message", "") or type(exc).__name__)
        return self._redact(" ".join(text.split())[:300])

    def _check_varied(self, matrix: np.ndarray) -> None:
        """One vector for every text across batches (a batch of one text each) is refused as
        within a batch: while every vector so far is one and the same, a second text with it is
        one too many."""
        with self.usage.lock:
            if self._varied:
                return
            if self._one_vector is None:
                self._one_vector = matrix[0].copy()
            if not (matrix == self._one_vector).all():
                self._varied = True
                return
            self._one_vector_texts += len(matrix)
            if self._one_vector_texts > 1:
                raise _BatchError(f"the server returned one and the same vector for all {self._one_vector_texts} "
                                  "distinct texts it was sent so far: it does not embed them; nothing of this batch "
                                  "was cached")

    def _retries(self) -> str:
        count = getattr(self._local, "retries", 0)
        return f"{count} retr{'y' if count == 1 else 'ies'}"

    def _asked(self) -> str:
        """What the last answer's Retry-After asked (a wait longer than the openai client's own
        limit ends its retries, whatever max_retries says)."""
        asked = getattr(self._local, "asked", None)
        return "" if asked is None else f" (the last answer asked for a wait of {asked:,.0f} s)"

    def _redact(self, text: str) -> str:
        """``text`` with the key and the base URL's credentials taken out, in every encoding a
        server may echo them in (see :func:`_secret_forms`)."""
        if self.settings.base_url != self.host:
            text = text.replace(self.settings.base_url, self.host)
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _check(self, response, texts: list[str], sent: list[str]) -> tuple[np.ndarray, int | None]:
        """The vectors of ``texts`` in their order, put back by each item's ``index``, as float32;
        one line for an answer that is not what was asked."""
        data = getattr(response, "data", None)
        if not isinstance(data, list):
            raise _BatchError(f"the answer of {self.host} is not JSON with a data list; nothing of this batch was "
                              "cached")
        if len(data) != len(texts):
            raise _BatchError(f"the server returned {len(data)} vectors for {len(texts)} texts; nothing of this batch "
                              "was cached")
        rows: list = [None] * len(texts)
        for item in data:
            index = getattr(item, "index", None)
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(texts) or \
                    rows[index] is not None:
                raise _BatchError(f"the server's item indexes are not 0..{len(texts) - 1}, each once; nothing of "
                                  "this batch was cached")
            rows[index] = _vector(getattr(item, "embedding", None))
            if rows[index] is None:
                raise _BatchError("an embedding is neither a list of numbers nor base64 float32; nothing of this "
                                  "batch was cached")
        widths = {len(row) for row in rows}
        width = widths.pop() if len(widths) == 1 else None
        if width is None or width == 0:
            raise _BatchError("the vectors differ in length (or are empty); nothing of this batch was cached")
        if self._width is not None and width != self._width:
            wanted = f"dimensions={self._width}" if self.settings.dimensions else f"{self._width} as before"
            raise _BatchError(f"the vectors have {width} dimensions, not {wanted}; nothing of this batch was cached")
        matrix = np.stack(rows).astype(np.float32, copy=False)
        if not np.isfinite(matrix).all():
            raise _BatchError("a vector holds NaN or infinity; nothing of this batch was cached")
        _check_usable(matrix)
        self._check_varied(matrix)
        self._width = width
        usage = getattr(response, "usage", None)
        tokens = getattr(usage, "prompt_tokens", None)
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
            return matrix, None
        most = sum(len(t.encode("utf-8")) + TOKEN_SLACK_PER_TEXT for t in sent)
        if tokens > most:
            self._say(f"note: {self.name}: batch {getattr(self._local, 'batch', '?')}: the server reported "
                      f"{tokens:,} prompt tokens for {len(sent):,} texts that can hold at most {most:,}; no tokens "
                      "or cost are recorded for them")
            return matrix, None
        return matrix, tokens


def _vector(embedding) -> np.ndarray | None:
    if isinstance(embedding, str):
        try:
            raw = base64.b64decode(embedding, validate=True)
        except ValueError:
            return None
        return np.frombuffer(raw, dtype="<f4") if len(raw) % 4 == 0 else None
    if isinstance(embedding, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in embedding):
        return np.asarray(embedding, dtype=np.float32)
    return None


def _share(tokens: int | None, sent: list[str]) -> np.ndarray:
    """A request's reported tokens shared out over its texts by length (NaN: none reported)."""
    if tokens is None:
        return np.full(len(sent), np.nan)
    lengths = np.asarray([len(t) + 1 for t in sent], dtype=np.float64)
    return tokens * lengths / lengths.sum()


def _check_usable(matrix: np.ndarray) -> None:
    """Vectors a clustering can use: none of zero length (no direction to normalise), none whose
    squares overflow float32, and not one vector for every text of a batch of distinct texts (a
    server that embeds nothing). One line for a batch that fails, as for NaN."""
    squares = np.einsum("ij,ij->i", matrix.astype(np.float64), matrix.astype(np.float64))
    tiny = float(np.finfo(np.float32).tiny)
    for i, value in enumerate(squares):
        if value < tiny:
            raise _BatchError(f"the vector of text {i} of the batch has zero length (all zeros, or too small to "
                              "normalise in float32); nothing of this batch was cached")
        if value > MAX_SQUARED_NORM:
            raise _BatchError(f"the vector of text {i} of the batch has a squared length of {value:.3g}, past the "
                              f"{MAX_SQUARED_NORM:g} float32 clustering can sum; nothing of this batch was cached")
    if len(matrix) > 1 and (matrix == matrix[0]).all():
        raise _BatchError(f"the server returned one and the same vector for all {len(matrix)} distinct texts of the "
                          "batch: it does not embed them; nothing of this batch was cached")


def _retry_after(headers) -> float | None:
    """The wait an answer asks for, in seconds: ``retry-after-ms``, or ``Retry-After`` as seconds
    or as an HTTP date; None where none is given or it cannot be read."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / scale
        except ValueError:
            seconds = None
            if name == "retry-after":
                try:
                    seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
                except (TypeError, ValueError, OverflowError, IndexError):
                    return None
        if seconds is None or math.isnan(seconds):
            return None
        return max(seconds, 0.0)
    return None


def _shown_url(url: str) -> str:
    """A URL fit for a message: without credentials, query or fragment, and nothing unprintable."""
    shown = public_url_or_hidden(url)
    return "".join(c if c.isprintable() and not c.isspace() else f"\\x{ord(c):02x}" for c in shown)


def _secret_forms(base_url: str, key: str | None) -> list[str]:
    """Every form in which a server may echo a credential back: the key, the base URL's user and
    password (as written, and percent-decoded), ``user:password`` (what HTTP Basic sends), each
    also percent-encoded, in hex, and in base64 (standard and URL-safe, at each of the three byte
    alignments it may have inside a longer encoded text). Longest first, so that a form inside
    another is not left half-replaced."""
    parts = urlsplit(base_url)
    user, password = parts.username or "", parts.password or ""
    secrets = {key or "", user, password, unquote(user), unquote(password)}
    if user or password:
        pairs = {f"{user}:{password}", f"{unquote(user)}:{unquote(password)}"}
        # The Basic header's token is itself a credential, which a server may encode once more.
        secrets |= pairs | {base64.b64encode(pair.encode("utf-8")).decode("ascii") for pair in pairs}
    forms: set[str] = set()
    for secret in filter(None, secrets):
        forms |= {secret, quote(secret, safe=""), quote(secret), quote_plus(secret)}
        raw = secret.encode("utf-8")
        forms |= {raw.hex(), raw.hex().upper()}
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            for pad in range(3):
                # Past ``pad`` bytes of what comes before, a 6-bit character depends on the secret
                # alone from character ceil(8 * pad / 6) to the last one wholly inside it.
                encoded = encode(b"\0" * pad + raw).decode("ascii")
                core = encoded[-(-8 * pad // 6):(8 * (pad + len(raw))) // 6]
                if len(core) >= 4:
                    forms.add(core)
    # An encoded form as short as a word would take words out of every message.
    return sorted((f for f in forms if f in secrets or len(f) >= 4), key=lambda f: (-len(f), f))


_DECODERS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def _bounded_stream(inner, host: str, limit: int, encoding: str | None, deadline: float, timeout: float):
    """An answer's body as httpx reads it, decompressed here (``encoding``: gzip or deflate) and cut
    where it passes ``limit`` bytes or the request's ``deadline``: a one-line refusal for the first
    (naming a decompression bomb where it expanded), a timeout the client retries for the second."""
    httpx = _httpx()

    class Bounded(httpx.SyncByteStream):
        def __iter__(self):
            total = 0
            sent = 0
            decoder = None if encoding is None else zlib.decompressobj(_DECODERS[encoding])
            for chunk in inner:
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout(f"the answer took longer than timeout={timeout:g} s")
                sent += len(chunk)
                pieces = [chunk] if decoder is None else _inflate(decoder, chunk, encoding, host)
                for piece in pieces:
                    total += len(piece)
                    if total > limit:
                        raise _refuse(_too_big(host, limit, encoding, sent))
                    yield piece
            if decoder is not None:
                rest = decoder.flush()
                if total + len(rest) > limit:
                    raise _refuse(_too_big(host, limit, encoding, sent))
                yield rest

        def close(self):
            inner.close()

    return Bounded()


def _inflate(decoder, chunk: bytes, encoding: str, host: str):
    """``chunk`` decompressed a step at a time, so that a bomb is stopped at the bound, not in memory."""
    try:
        out = decoder.decompress(chunk, _DECOMPRESS_STEP)
        while True:
            yield out
            if not decoder.unconsumed_tail:
                return
            out = decoder.decompress(decoder.unconsumed_tail, _DECOMPRESS_STEP)
    except zlib.error as exc:
        raise _refuse(f"the answer of {host} is not valid {encoding} ({exc})") from None


def _too_big(host: str, limit: int, encoding: str | None, sent: int) -> str:
    if encoding is None:
        return f"the answer of {host} passed {limit / 2**20:.0f} MiB, more than a batch's embeddings take"
    return (f"the answer of {host} expanded from {sent:,} bytes of {encoding} past {limit / 2**20:.0f} MiB, more "
            "than a batch's embeddings take (a decompression bomb, or no embeddings answer)")


@functools.cache
def _httpx():
    """The httpx the openai client is built on (``httpx``, or its successor ``httpx2``)."""
    import openai

    for base in openai.DefaultHttpxClient.__mro__:
        if base.__name__ == "Client" and base.__module__.startswith("httpx"):
            return sys.modules[base.__module__.split(".")[0]]
    raise ImportError("the openai client is built on no httpx this module knows")


@functools.cache
def _out_of_time():
    import openai

    # The client passes its own error types on as they are, without a retry.
    return type("OutOfTime", (_OutOfTime, openai.OpenAIError), {})


def _give_up(message: str) -> Exception:
    return _out_of_time()(message)


@functools.cache
def _refused():
    import openai

    return type("Refused", (_Refused, openai.OpenAIError), {})


def _refuse(message: str) -> Exception:
    return _refused()(message)


def identity(s: Settings) -> str:
    """What the vectors depend on: the endpoint without credentials, the model, its dimensions, the
    prompt and the truncation; never the key. The embedding cache is keyed by it and the text."""
    return (f"{PREFIX}{s.model}@{s.public_base_url}|dimensions={s.dimensions or 'native'}"
            + prompt_rules.identity_suffix(s.prompt) + ("|truncate=end" if s.truncate == "end" else ""))


# -- the kind ------------------------------------------------------------------------------------
def load(load: Load) -> OpenAIEncoder:
    given = dict(load.options)
    if load.batch_size is not None:
        given["batch_size"] = load.batch_size
    return OpenAIEncoder(settings(load.spec, given))


def check(spec, given: dict, here: bool) -> None:
    """The options, the client and a key where the endpoint needs one, before anything is encoded."""
    s = settings(spec, given)
    try:
        import openai  # noqa: F401
    except ImportError:
        raise UserError(f"model {spec}: needs the openai package: pip install -e '.[api]' in a clone of tecb") from None
    api_key(s)


def display(spec) -> str:
    """``openai:`` and the model's short name."""
    rest = model_name(str(spec).rstrip("/"))
    return PREFIX + rest.split("@")[0].rsplit("/", 1)[-1]


def snippet(identity: str, location: str | None, key_variable: str | None = None) -> EmbeddingSnippet:
    """BERTopic's own OpenAI backend, its client reading the key from the environment variable the
    run read it from (``key_variable``, a results row's ``api_key_env``; None: ``OPENAI_API_KEY``)."""
    head, _, rest = identity[len(PREFIX):].partition("|")
    if "@" not in head:
        raise ValueError(f"{identity!r} is not an identity the openai kind gives")
    model, _, base_url = head.rpartition("@")
    parts = dict(p.split("=", 1) for p in rest.split("|") if "=" in p)
    variable = key_variable or DEFAULT_KEY_VARIABLE
    imports = ["import openai", "from bertopic.backend import OpenAIBackend"]
    if variable == DEFAULT_KEY_VARIABLE:
        lines = [f"client = openai.OpenAI(base_url={base_url!r})  # the key: the environment's {DEFAULT_KEY_VARIABLE}"]
    else:
        imports.insert(0, "import os")
        lines = [f"client = openai.OpenAI(base_url={base_url!r}, api_key=os.environ[{variable!r}])"]
    extra = {} if parts.get("dimensions", "native") == "native" else {"dimensions": int(parts["dimensions"])}
    if "prompt" in parts:
        lines.append("# the grid prefixed every text with a prompt, which OpenAIBackend does not: the vectors differ")
    lines.append(f"embedding_model = OpenAIBackend(client, {model!r}"
                 + (f", generator_kwargs={extra!r})" if extra else ")"))
    dims = f"dims = len(client.embeddings.create(model={model!r}, input=docs[:1]" + \
        "".join(f", {k}={v!r}" for k, v in extra.items()) + ").data[0].embedding)"
    return EmbeddingSnippet(imports, lines, False, dims)
