"""``openai:NAME``: a model behind an OpenAI-compatible ``POST /v1/embeddings`` endpoint (OpenAI,
or a server of one's own: vLLM, text-embeddings-inference, Ollama, infinity), through the official
``openai`` client: its timeouts, its retries (429 and 5xx, honouring ``Retry-After``) and its
response types.

The key comes only from the environment (``OPENAI_API_KEY``, or the variable ``api_key_env``
names) and reaches nothing we write: the identity, the cache, rows and messages name the base URL
without credentials. The texts leave the machine; the encoder says so, once, before its first
request.

:meth:`OpenAIEncoder.encode_batches` sends ``concurrency`` requests at a time and hands each
answered batch, checked, to a ``save`` callback in the calling thread: the grid's embedding store
writes it before more is sent, so an interrupted run pays for no text twice.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import os
import re
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable
from urllib.parse import urlsplit, urlunsplit

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


class _BatchError(Exception):
    """A batch the encoder cannot use; the message names what was wrong, without the key."""


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
        self._told = False
        self._width = s.dimensions
        self._local = threading.local()

    # The client is made on the first request: a run whose texts are all cached needs no key or network.
    def _open(self):
        if self._client is None:
            import openai

            self._key = api_key(self.settings)
            http = openai.DefaultHttpxClient(event_hooks={"request": [self._on_request],
                                                          "response": [self._on_response]})
            self._client = openai.OpenAI(base_url=self.settings.base_url, api_key=self._key,
                                         timeout=self.settings.timeout, max_retries=self.settings.max_retries,
                                         http_client=http)
        return self._client

    # -- hooks on the client's own HTTP requests: each wait said in one line, the total bounded
    def _on_request(self, request) -> None:
        local = self._local
        retry = int(request.headers.get("x-stainless-retry-count", "0") or 0)
        now = time.monotonic()
        if retry > 0:
            waited = max(0.0, now - getattr(local, "last", now))
            with self.usage.lock:
                self.usage.retries += 1
                self.usage.waited_s += waited
            local.waited += waited
            self.log(f"note: {self.name}: batch {local.batch}: {local.why}; retry {retry} of "
                     f"{self.settings.max_retries} after waiting {waited:.3f} s")
            if local.waited > self.settings.max_wait:
                raise _give_up(f"its retries waited {local.waited:.1f} s, past max_wait={self.settings.max_wait:g} s")
        with self.usage.lock:
            self.usage.requests += 1
        local.last = now
        local.why = "no answer (connection failed or timed out)"

    def _on_response(self, response) -> None:
        local = self._local
        local.last = time.monotonic()
        status = response.status_code
        if status == 429 or status >= 500 or status in (408, 409):
            local.why = f"HTTP {status}" + (" (rate limit)" if status == 429 else "")
            after = _retry_after(response.headers)
            if after is not None and local.waited + after > self.settings.max_wait:
                raise _give_up(f"HTTP {status} asks for a wait of {after:g} s, past max_wait="
                               f"{self.settings.max_wait:g} s")

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

    def encode_batches(self, texts: list[str], save: Callable[[list[str], np.ndarray, np.ndarray], None]) -> None:
        """Send ``texts`` in batches, ``concurrency`` requests at a time, and call ``save(texts,
        vectors, tokens)`` in this thread for every batch as it is answered and checked. On an
        error or Ctrl-C no new batch is sent, the batches in flight are waited for and saved, then
        the error is raised: what was paid for is kept."""
        texts = list(texts)
        if not texts:
            return
        s = self.settings
        batches = [texts[i:i + s.batch_size] for i in range(0, len(texts), s.batch_size)]
        self._open()
        if not self._told:
            self._told = True
            self.log(f"note: {self.name}: the texts leave this machine: they are sent to {self.host} "
                     f"({len(texts):,} texts in {len(batches):,} requests of up to {s.batch_size}, "
                     f"{s.concurrency} at a time)")
        before = (self.usage.requests, self.usage.retries, self.usage.waited_s, self.usage.tokens)
        offsets = list(range(0, len(texts), s.batch_size))
        failure: BaseException | None = None
        with ThreadPoolExecutor(max_workers=s.concurrency, thread_name_prefix="tecb-openai") as pool:
            pending = iter(range(len(batches)))
            running: dict = {}

            def submit() -> None:
                for number in pending:
                    running[pool.submit(self._batch, batches[number], number + 1, len(batches),
                                        offsets[number])] = number
                    return

            for _ in range(s.concurrency):
                submit()
            while running:
                try:
                    done, _ = wait(list(running), return_when=FIRST_COMPLETED)
                except BaseException as exc:  # Ctrl-C: keep what is in flight, send nothing more
                    failure = failure or exc
                    pending = iter(())
                    continue
                for future in done:
                    running.pop(future)
                    pieces, error = future.result()
                    for piece in pieces:
                        save(piece.texts, piece.vectors, piece.tokens)
                    if error is not None and failure is None:
                        failure = error
                        pending = iter(())
                    if failure is None:
                        submit()
        if failure is not None:
            raise failure
        self._summary(before)

    def _summary(self, before: tuple) -> None:
        u = self.usage
        requests, retries, waited, tokens = (u.requests - before[0], u.retries - before[1], u.waited_s - before[2],
                                             u.tokens - before[3])
        cost = self.cost(tokens)
        self.log(f"note: {self.name}: {requests:,} requests to {self.host}, {retries:,} retried "
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

    def _batch(self, texts: list[str], number: int, total: int, offset: int) -> tuple[list[_Piece], Exception | None]:
        """One batch (in a pool thread): its pieces and the error that ended it, if one did. An
        input the model refuses as too long splits the batch, so that the rest is paid for once."""
        local = self._local
        local.batch, local.waited, local.why = f"{number} of {total}", 0.0, ""
        pieces: list[_Piece] = []
        try:
            self._send(texts, offset, pieces)
            return pieces, None
        except _BatchError as exc:
            return pieces, UserError(f"{self.name}: batch {number} of {total} ({len(texts)} texts): {exc}")
        except UserError as exc:
            return pieces, exc
        except Exception as exc:  # noqa: BLE001 -- anything else the client raised, said in one line
            return pieces, UserError(f"{self.name}: batch {number} of {total}: {self._redact(str(exc) or type(exc).__name__)}")

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
            raise _BatchError(f"{self.host} still answered HTTP 429 (rate limit) after {s.max_retries} retries; "
                              "the batches answered are cached: rerun later to resume, or lower concurrency") from None
        except openai.InternalServerError as exc:
            raise _BatchError(f"{self.host} answered HTTP {exc.status_code} after {s.max_retries} retries; the "
                              "batches answered are cached: rerun to resume") from None
        except openai.APITimeoutError:
            raise _BatchError(f"{self.host} gave no answer within timeout={s.timeout:g} s, {s.max_retries} retries; "
                              "the batches answered are cached: rerun to resume, or raise timeout") from None
        except openai.APIConnectionError as exc:
            cause = type(exc.__cause__).__name__ if exc.__cause__ is not None else "connection failed"
            raise _BatchError(f"could not reach {self.host} ({cause}) after {s.max_retries} retries; the batches "
                              "answered are cached: rerun to resume") from None
        except openai.APIResponseValidationError:
            raise _BatchError(f"the answer of {self.host} is not an embeddings response; nothing of this batch "
                              "was cached") from None
        except openai.APIStatusError as exc:
            raise _BatchError(f"{self.host} answered HTTP {exc.status_code} ({self._error_text(exc)})") from None
        except _OutOfTime as exc:
            raise _BatchError(f"gave up: {exc}; the batches answered are cached: rerun later to resume") from None
        except (ValueError, json.JSONDecodeError):
            raise _BatchError(f"the answer of {self.host} is not JSON; nothing of this batch was cached") from None
        vectors, tokens = self._check(response, texts)
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

    def _redact(self, text: str) -> str:
        """``text`` with the key and the base URL's credentials taken out."""
        if self._key and self._key != NO_KEY:
            text = text.replace(self._key, "***")
        if self.settings.base_url != self.host:
            text = text.replace(self.settings.base_url, self.host)
        parts = urlsplit(self.settings.base_url)
        for secret in (parts.password, parts.username):
            if secret:
                text = text.replace(secret, "***")
        return text

    def _check(self, response, texts: list[str]) -> tuple[np.ndarray, int | None]:
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
        self._width = width
        usage = getattr(response, "usage", None)
        tokens = getattr(usage, "prompt_tokens", None)
        return matrix, tokens if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0 else None


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


def _retry_after(headers) -> float | None:
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return float(value) / scale
            except ValueError:
                return None
    return None


@functools.cache
def _out_of_time():
    import openai

    # The client passes its own error types on as they are, without a retry.
    return type("OutOfTime", (_OutOfTime, openai.OpenAIError), {})


def _give_up(message: str) -> Exception:
    return _out_of_time()(message)


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
