"""Talking to Reddit through praw: configuration, bounded retries, and the two calls the benchmark uses.

Configuration is praw's own: a ``praw.ini`` site (``site`` argument, else the ``praw_site``
environment variable, else ``DEFAULT``) and ``praw_*`` environment variables. praw and prawcore
already pace requests by Reddit's ``x-ratelimit-*`` headers and retry 5xx answers and dropped
connections twice; what they give up on (429, a 5xx or a dropped connection that persists, a
timeout) is retried here per batch with exponential backoff, a bounded number of times.

Error texts never include configuration values: only the site name and the setting to fix.
"""

from __future__ import annotations

import configparser
import logging
import os
import time
import urllib.parse
from dataclasses import dataclass
from typing import Callable, TypeVar

import requests

from tecb_data import network
from tecb_data.errors import UserError
from tecb_data.sources.reddit_text import Fetched, from_praw

log = logging.getLogger(__name__)
T = TypeVar("T")

INFO_BATCH = 100  # the most fullnames Reddit's /api/info answers in one request
SUBMISSION_PREFIX = "t3_"


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a failed request is retried (beyond prawcore's own retries)."""

    attempts: int = 6  # tries per request in all, the first one included
    backoff_s: float = 2.0  # wait before the second try; doubles after each failure
    max_backoff_s: float = 120.0

    def wait(self, failures: int, retry_after: float | None = None) -> float:
        backoff = min(self.max_backoff_s, self.backoff_s * 2 ** (failures - 1))
        # Reddit's Retry-After wins when it asks for more patience than the backoff would give.
        return max(backoff, min(retry_after or 0.0, self.max_backoff_s))


class CountingSession(requests.Session):
    """A requests session (handed to praw as its transport) that counts every HTTP request sent to
    the API, prawcore's own retries included; token requests are counted apart."""

    def __init__(self):
        super().__init__()
        self.api_requests = 0
        self.token_requests = 0

    def request(self, method, url, *args, **kwargs):
        if urllib.parse.urlsplit(str(url)).path.rstrip("/").endswith("/access_token"):
            self.token_requests += 1
        else:
            self.api_requests += 1
        return super().request(method, url, *args, **kwargs)


def site_name(site: str | None) -> str:
    return site or os.environ.get("praw_site") or "DEFAULT"


def connect(site: str | None, session: requests.Session | None = None):
    """A praw ``Reddit`` for the praw.ini ``site`` (sending through ``session`` when given);
    configuration problems end in one line."""
    import praw
    from praw.exceptions import MissingRequiredAttributeException

    from praw.config import Config

    name = site_name(site)
    try:
        # praw reads `timeout` from praw.ini but does not hand it to prawcore, whose requests then
        # wait its fixed 16 s: the requestor is given the site's timeout here.
        requestor = {"timeout": Config(name).timeout}
        if session is not None:
            requestor["session"] = session
        reddit = praw.Reddit(site_name=site, requestor_kwargs=requestor)
    except configparser.NoSectionError:
        raise UserError(
            f"praw.ini has no site [{name}]; add a [{name}] section with client_id, client_secret and "
            "user_agent to praw.ini (in this folder or ~/.config/praw.ini) or pass another --praw-site"
        ) from None
    except MissingRequiredAttributeException as exc:
        setting = str(exc).split("'")[1] if "'" in str(exc) else "a required setting"
        raise UserError(
            f"praw site [{name}] lacks {setting}; set it in the [{name}] section of praw.ini "
            f"or as the environment variable praw_{setting}"
        ) from None
    except (ValueError, configparser.Error) as exc:
        raise UserError(f"praw site [{name}]: invalid praw.ini setting ({type(exc).__name__}); check the [{name}] section") from None
    return reddit


def _credentials_error(site: str | None, status: str) -> UserError:
    name = site_name(site)
    return UserError(
        f"Reddit refused the credentials of praw site [{name}] ({status}); fix client_id and client_secret "
        f"(and username/password for a script app) in the [{name}] section of praw.ini or the praw_* environment variables"
    )


def _status_of(exc) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def _tries(n: int) -> str:
    return "1 try" if n == 1 else f"{n} tries"


def with_retries(
    call: Callable[[], T],
    what: str,
    *,
    site: str | None,
    policy: RetryPolicy,
    not_found: str | None = None,
    refused: str | None = None,
    timeout_s: float | None = None,
) -> T:
    """Run ``call`` (one logical request), retrying transient failures; ``what`` names it in errors.
    ``not_found`` is the error for a 404 or redirect answer, ``refused`` for a 403 that is about the
    thing asked for (a private subreddit) rather than the credentials; ``timeout_s`` is praw's
    timeout, named in the error when Reddit does not answer."""
    from prawcore import exceptions as pe

    failures = 0
    token_renewed = False
    while True:
        unanswered = None  # the endpoint, when this try timed out or could not connect
        try:
            return call()
        except pe.InvalidToken as exc:
            # An access token can expire between prawcore's retries; prawcore has dropped it, so
            # one more try fetches a new one. A second refusal is about the credentials.
            if token_renewed:
                raise _credentials_error(site, f"HTTP {_status_of(exc)}") from None
            token_renewed, reason, retry_after = True, "an expired access token", 0.0
        except (pe.OAuthException, pe.Forbidden, pe.InsufficientScope) as exc:
            status = _status_of(exc)
            if refused and isinstance(exc, pe.Forbidden):
                raise UserError(f"{refused} (HTTP 403 for the {what})") from None
            raise _credentials_error(site, f"HTTP {status}" if status else type(exc).__name__) from None
        except pe.TooManyRequests as exc:
            reason, retry_after = "429 Too Many Requests", _seconds(exc.retry_after)
        except (pe.ServerError, pe.BadJSON) as exc:
            reason, retry_after = f"HTTP {_status_of(exc)}", None
        except pe.RequestException as exc:
            if network.unresolvable(exc):
                # Offline, or a wrong oauth_url: every retry would get the same answer at once, after
                # minutes of backoff. Said as what it is, not as a timeout to raise.
                raise UserError(
                    f"cannot reach Reddit for the {what}: the host name of {_endpoint_of(exc)} cannot be resolved "
                    f"(no network, or a wrong oauth_url in the [{site_name(site)}] section of praw.ini); everything "
                    "fetched so far is cached: run the same command again when online") from None
            reason, retry_after = network.describe(exc.original_exception), None
            if isinstance(exc.original_exception, (requests.Timeout, requests.ConnectionError)):
                unanswered = _endpoint_of(exc)
        except pe.ResponseException as exc:
            status = _status_of(exc)
            if status in (401, 403):  # e.g. the token endpoint refusing the client id/secret
                raise _credentials_error(site, f"HTTP {status}") from None
            if status in (302, 404) and not_found:  # Reddit redirects a missing subreddit to its search page
                raise UserError(f"{not_found} (HTTP {status} for the {what})") from None
            if status is None or status < 500:
                raise UserError(f"Reddit answered HTTP {status} to {what}; this request cannot succeed as sent") from None
            reason, retry_after = f"HTTP {status}", None
        failures += 1
        if failures >= policy.attempts and unanswered is not None:
            name = site_name(site)
            waited = f" of up to {timeout_s:g} s each" if timeout_s else ""
            raise UserError(
                f"Reddit at {unanswered} did not answer ({reason}) the {what} in {_tries(failures)}{waited}; "
                f"praw's `timeout` sets the wait in seconds (`timeout = 60` in the [{name}] section of praw.ini); "
                "or check oauth_url / the network; everything fetched so far is cached: "
                "run the same command again to resume"
            )
        if failures >= policy.attempts:
            raise UserError(
                f"Reddit kept failing ({reason}) for {what} after {_tries(failures)}; everything fetched so far "
                "is cached: run the same command again later to resume"
            )
        wait = policy.wait(failures, retry_after)
        log.warning("%s for %s; retrying in %.1f s (try %d of %d)", reason, what, wait, failures + 1, policy.attempts)
        time.sleep(wait)


def _endpoint_of(exc) -> str:
    """scheme://host[:port] of the request that failed (never its path, query or headers)."""
    request = getattr(exc.original_exception, "request", None)
    url = getattr(request, "url", None) or getattr(exc, "url", None) or ""
    parts = urllib.parse.urlsplit(str(url))
    if not parts.hostname:
        return "its API"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}"


def _seconds(value) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def fetch_batch(reddit, ids: list[str]) -> list[Fetched]:
    """One ``/api/info`` request for up to 100 base-36 submission ids (what Reddit returns of them)."""
    if len(ids) > INFO_BATCH:
        raise ValueError(f"at most {INFO_BATCH} ids per request, got {len(ids)}")
    from praw.models import Submission

    answer = reddit.info(fullnames=[SUBMISSION_PREFIX + i for i in ids])
    return [from_praw(thing) for thing in answer if isinstance(thing, Submission)]


def fetch_listing(reddit, subreddit: str, listing: str, limit: int | None) -> list[Fetched]:
    """All submissions of one listing (``hot`` or ``top`` of all time) of a subreddit, page by page."""
    sub = reddit.subreddit(subreddit)
    generator = sub.top(time_filter="all", limit=limit) if listing == "top" else getattr(sub, listing)(limit=limit)
    return [from_praw(thing) for thing in generator]
