"""One timeout policy for every network client of tecb_data: nothing waits forever.

Every request has a connect and a read timeout, failed requests are retried a bounded number of
times with exponential backoff, and what still fails ends in one line naming the endpoint and the
setting that changes the timeout. Each client keeps its own configuration where it has one:

- Hugging Face Hub (huggingface_hub): file requests wait ``HF_HUB_ETAG_TIMEOUT`` (metadata) and
  ``HF_HUB_DOWNLOAD_TIMEOUT`` (content) seconds, its own settings, and are retried by
  huggingface_hub. Its API calls (repository info, file lists, commits) are sent with no timeout at
  all, and its metadata retry with a fixed 60 s: those wait at most ``TECB_NETWORK_TIMEOUT``. The
  bound is set in the HTTP client huggingface_hub uses (``huggingface_hub.set_client_factory``), for
  every request of this process.
- Reddit (praw): praw's own ``timeout`` (praw.ini, or ``praw_timeout``; 16 s by default), with
  prawcore's retries and :mod:`tecb_data.sources.reddit_api`'s.
- Plain downloads (an id list's URL): ``TECB_NETWORK_TIMEOUT``, retried here.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from typing import Callable, TypeVar

from tecb_data.errors import UserError

log = logging.getLogger(__name__)
T = TypeVar("T")

TIMEOUT_ENV = "TECB_NETWORK_TIMEOUT"
DEFAULT_TIMEOUT_S = 30.0
ATTEMPTS = 3  # tries per request in all, for the requests tecb_data retries itself
BACKOFF_S = 1.0  # before the second try; doubles after each failure

# The name the Hub client's request hook leaves on a request: which setting decided its timeout.
_SETTING_KEY = "tecb_timeout_setting"


def timeout_s() -> float:
    """``TECB_NETWORK_TIMEOUT`` in seconds (default 30)."""
    raw = os.environ.get(TIMEOUT_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not math.isfinite(value) or value <= 0:
        raise UserError(f"{TIMEOUT_ENV}={raw!r}: give a positive number of seconds, e.g. {TIMEOUT_ENV}=30")
    return value


def causes(exc: BaseException | None):
    """``exc`` and every exception behind it: chained ones, and those the HTTP libraries keep as
    attributes (requests' ConnectionError holds urllib3's MaxRetryError, whose ``reason`` holds the
    NameResolutionError; prawcore keeps ``original_exception``)."""
    seen, todo = set(), [exc]
    while todo:
        item = todo.pop()
        if item is None or id(item) in seen or not isinstance(item, BaseException):
            continue
        seen.add(id(item))
        yield item
        todo += [item.__cause__, item.__context__, getattr(item, "reason", None),
                 getattr(item, "original_exception", None), *[a for a in item.args if isinstance(a, BaseException)]]


def unresolvable(exc: BaseException) -> bool:
    """Whether ``exc`` comes from a host name that could not be resolved (no network, no DNS, or a
    wrong host): retrying with backoff only makes the user wait for the same answer."""
    import socket

    for item in causes(exc):
        if isinstance(item, socket.gaierror) or type(item).__name__ == "NameResolutionError":
            return True
    return False


def describe(exc: BaseException) -> str:
    """A failure in words, for a retry line or an error: never a class name a user cannot know."""
    import socket

    if unresolvable(exc):
        return "the host name cannot be resolved (no network, or a wrong host)"
    for item in causes(exc):
        if isinstance(item, (TimeoutError, socket.timeout)) or "Timeout" in type(item).__name__:
            return "no answer in time"
        if isinstance(item, ConnectionRefusedError):
            return "the connection was refused"
        if isinstance(item, ConnectionResetError):
            return "the connection was dropped"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return text or "a network error"


def retrying(call: Callable[[], T], what: str, *, transient: tuple[type[BaseException], ...],
             attempts: int = ATTEMPTS, backoff_s: float = BACKOFF_S) -> T:
    """Run ``call``; on a ``transient`` error wait and try again, ``attempts`` tries in all, then
    let the last error through (the caller turns it into its one line)."""
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except transient as exc:
            # An unresolvable host name gives the same answer after any wait: said at once.
            if attempt == attempts or unresolvable(exc):
                raise
            wait = backoff_s * 2 ** (attempt - 1)
            log.warning("%s: %s; retrying in %.0f s (try %d of %d)", what, describe(exc), wait, attempt + 1, attempts)
            time.sleep(wait)
    raise AssertionError("unreachable")


# --- Hugging Face Hub ----------------------------------------------------------------------------

# How long a look at whether the Hub answers at all may take (a TCP connection, no request).
REACH_TIMEOUT_S = 5.0


def hub_unreachable(timeout: float | None = None) -> str | None:
    """Why the Hugging Face Hub (``HF_ENDPOINT``) cannot be reached, in words, or None when it
    accepts a connection: one look of at most ``timeout`` seconds (default
    min(TECB_NETWORK_TIMEOUT, 5)), before a library that would retry a dead network with backoff
    for minutes (huggingface_hub's file requests: 5 retries per file, 1 + 2 + 4 + 8 + 8 s) is asked."""
    import socket
    from urllib.parse import urlsplit

    from huggingface_hub import constants

    endpoint = constants.ENDPOINT
    parts = urlsplit(endpoint)
    host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    if not host:
        return f"HF_ENDPOINT {endpoint!r} names no host"
    try:
        with socket.create_connection((host, port), timeout=timeout or min(timeout_s(), REACH_TIMEOUT_S)):
            return None
    except OSError as exc:
        return f"{endpoint}: {describe(exc)}"

_hub_lock = threading.Lock()
_hub_configured = False


def _hub_setting(method: str, read) -> str | None:
    """Which of huggingface_hub's own settings gave a request its read timeout, if one did."""
    from huggingface_hub import constants

    if read is None:
        return None
    if method == "HEAD" and float(read) == float(constants.HF_HUB_ETAG_TIMEOUT):
        return "HF_HUB_ETAG_TIMEOUT"  # metadata requests
    if float(read) == float(constants.HF_HUB_DOWNLOAD_TIMEOUT):
        return "HF_HUB_DOWNLOAD_TIMEOUT"
    if float(read) == float(constants.HF_HUB_ETAG_TIMEOUT):
        return "HF_HUB_ETAG_TIMEOUT"
    return None


def _bound_timeouts(request) -> None:
    """httpx request hook: a request huggingface_hub sends without a timeout, or with one that is
    not one of its settings (the fixed 60 s of its metadata retry), waits at most TECB_NETWORK_TIMEOUT
    to connect and between reads."""
    timeouts = dict(request.extensions.get("timeout") or {})
    setting = _hub_setting(request.method, timeouts.get("read"))
    if setting is None:
        limit = timeout_s()
        for phase in ("connect", "read", "write", "pool"):
            value = timeouts.get(phase)
            timeouts[phase] = limit if value is None else min(float(value), limit)
        setting = TIMEOUT_ENV
    request.extensions = {**request.extensions, "timeout": timeouts, _SETTING_KEY: setting}


def _bounded_client_factory():
    # huggingface_hub's own client (its headers hook, redirects, proxies from the environment),
    # with one more request hook. The default factory is not exported, hence the module path.
    from huggingface_hub.utils._http import default_client_factory

    client = default_client_factory()
    hooks = client.event_hooks
    client.event_hooks = {**hooks, "request": [*hooks.get("request", []), _bound_timeouts]}
    return client


def configure_hub() -> None:
    """Make every request huggingface_hub sends in this process time out (idempotent)."""
    global _hub_configured
    with _hub_lock:
        if _hub_configured:
            return
        import huggingface_hub

        huggingface_hub.set_client_factory(_bounded_client_factory)
        _hub_configured = True


def hub_transient() -> tuple[type[BaseException], ...]:
    """The errors of huggingface_hub's HTTP client worth one more try: timeouts and dropped connections."""
    import httpx2

    return (httpx2.TimeoutException, httpx2.NetworkError, httpx2.RemoteProtocolError)


def _timeout_in_chain(exc: BaseException | None):
    import httpx2

    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, httpx2.TimeoutException):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def hub_timeout_line(error: BaseException, endpoint: str) -> str | None:
    """The one line for a Hub request that timed out, also when huggingface_hub wrapped the timeout
    in its own error (None if no timeout caused ``error``)."""
    exc = _timeout_in_chain(error)
    if exc is None:
        return None
    try:
        request = exc.request
    except RuntimeError:
        request = None
    phase = {"ConnectTimeout": "connect", "PoolTimeout": "pool", "WriteTimeout": "write"}.get(type(exc).__name__, "read")
    if request is not None:
        waited = (request.extensions.get("timeout") or {}).get(phase)
        setting = request.extensions.get(_SETTING_KEY, TIMEOUT_ENV)
        asked = f"{request.method} {request.url.copy_with(query=None)}"
    else:
        waited, setting, asked = None, TIMEOUT_ENV, endpoint
    within = f"within {waited:g} s" if isinstance(waited, (int, float)) else "in time"
    return (f"the Hub at {endpoint} did not answer {within} ({type(exc).__name__} on {asked}, after retries); "
            f"{setting} sets this timeout in seconds: raise it for a slow network, or check HF_ENDPOINT")
