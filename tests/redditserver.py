"""A small stand-in for Reddit's API on 127.0.0.1, for tests and benchmarks that run the real praw.

It implements what praw uses for the benchmark: the token endpoint (``POST /api/v1/access_token``,
HTTP basic auth with the client id and secret; grants ``client_credentials`` and ``password``),
``GET /api/info?id=t3_...`` and the subreddit listings ``/r/<name>/hot`` and ``/r/<name>/top``,
with Reddit's JSON shapes and ``x-ratelimit-*`` headers. Submissions are synthetic German posts made
from each id; a test marks some as deleted, removed, author-deleted or missing, and queues faults
(429, 500, 524, a dropped connection, a stalled answer, 401, 403) for the next ``/api/info`` requests.

Also :func:`praw_ini` (a praw.ini with sites pointing here) and :func:`run` (a subprocess with a
clean praw environment: praw reads praw.ini once per process, so each run gets its own).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from helpers import REPO

CLIENT_ID = "tecbTestClient"
CLIENT_SECRET = "s3cr3t-DO-NOT-LEAK-7f9a1c"
USERNAME = "tecb_tester"
PASSWORD = "pw-DO-NOT-LEAK-41c2e8"
SECRETS = (CLIENT_SECRET, PASSWORD)

# ~80 subreddit names for the synthetic posts of a bare id list.
SUBREDDITS = tuple(
    f"{topic}{suffix}"
    for topic in ("Finanzen", "Fahrrad", "Kochen", "Garten", "Reisen", "Politik", "Musik", "Filme", "Buecher", "Technik")
    for suffix in ("DE", "AT", "CH", "Talk", "Hilfe", "Fragen", "News", "Memes")
)

_WORDS = (
    "Ich habe gestern mit meinen Nachbarn über die neue Straßenbahn gesprochen",
    "Wie findet ihr die Preise im Supermarkt in letzter Zeit",
    "Meine Großmutter hat mir ein altes Rezept für Apfelkuchen gegeben",
    "Gibt es hier jemanden, der sich mit Steuererklärungen auskennt",
    "Das Wetter am Wochenende war einfach wunderbar für eine Wanderung",
    "Wir suchen eine günstige Wohnung in der Nähe der Universität",
    "Kann mir jemand ein gutes Buch über die deutsche Geschichte empfehlen",
    "Nach drei Jahren habe ich endlich meinen Führerschein bestanden",
    "Die Bahn hatte heute wieder über eine Stunde Verspätung",
    "Warum ist das Fahrrad in dieser Stadt so beliebt geworden",
    "Unser Verein sucht noch Mitglieder für die nächste Saison",
    "Ich überlege, im Herbst nach Österreich in die Berge zu fahren",
)
_ENGLISH = (
    "I have been wondering what everyone here thinks about the new train line",
    "Can someone recommend a good book about the history of this city",
    "The weather this weekend was absolutely wonderful for a long hike",
    "We are looking for a cheap apartment close to the university campus",
)


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def synthetic_post(item_id: str, subreddit: str | None = None, english: bool = False) -> dict:
    """A deterministic German (or English) self post for ``item_id``, in Reddit's JSON shape."""
    h = _digest(item_id)
    pool = _ENGLISH if english else _WORDS
    title = f"{pool[h % len(pool)]} ({item_id})"
    sentences = [pool[(h >> (8 * k)) % len(pool)] for k in range(1, 1 + (h >> 40) % 4)]
    body = ". ".join(sentences)
    if h % 3 == 0:
        body += f" Mehr dazu [hier im Artikel](https://example.org/artikel/{item_id}) und auf https://example.org/x?id={item_id}."
    return {
        "id": item_id,
        "name": f"t3_{item_id}",
        "title": title,
        "selftext": body,
        "author": f"user_{h % 9973}",
        "author_fullname": f"t2_{h % 9973:x}",
        "subreddit": subreddit or SUBREDDITS[h % len(SUBREDDITS)],
        "subreddit_id": "t5_" + format(_digest(subreddit or SUBREDDITS[h % len(SUBREDDITS)]) % 10**6, "x"),
        "removed_by_category": None,
        "is_self": True,
        "created_utc": 1_600_000_000 + h % 10**8,
        "permalink": f"/r/x/comments/{item_id}/",
        "url": f"https://www.reddit.com/r/x/comments/{item_id}/",
    }


# How a test can make a submission gone; each is what Reddit's JSON looks like in that case.
def _gone(post: dict, how: str) -> dict | None:
    post = dict(post)
    if how == "missing":
        return None
    if how == "deleted":  # deleted by the author: author and body replaced, category "deleted"
        post.update(author="[deleted]", selftext="[deleted]", removed_by_category="deleted")
        post.pop("author_fullname", None)
    elif how == "deleted_by_user_title":
        post.update(title="[deleted by user]", selftext="")
    elif how == "removed":  # removed by moderators
        post.update(selftext="[removed]", removed_by_category="moderator")
    elif how == "removed_body_only":
        post.update(selftext="[removed]")
    elif how == "author_deleted":  # the account was deleted, the post stays
        post.update(author="[deleted]")
        post.pop("author_fullname", None)
    elif how == "author_suspended":
        post.pop("author_fullname", None)
    else:
        raise ValueError(how)
    return post


class RedditState:
    """What the fake Reddit knows and what it has seen; shared by the handler threads."""

    def __init__(self, ids=(), *, subreddits: dict[str, str] | None = None):
        self.lock = threading.Lock()
        self.known = set(ids)
        self.subreddit_of = dict(subreddits or {})
        self.english = set()
        self.gone: dict[str, str] = {}
        self.listings: dict[tuple[str, str], list[str]] = {}
        self.faults: list[str] = []  # for the next /api/info requests, in order
        self.listing_faults: list[str] = []
        self.counts: Counter = Counter()
        self.tokens: set[str] = set()
        self.served_ids: Counter = Counter()
        self.info_seconds = 0.0  # time spent answering /api/info (for the benchmark's overhead figure)

    def post(self, item_id: str) -> dict | None:
        if item_id not in self.known:
            return None
        post = synthetic_post(item_id, self.subreddit_of.get(item_id), english=item_id in self.english)
        how = self.gone.get(item_id)
        return _gone(post, how) if how else post

    def add_listing(self, subreddit: str, listing: str, ids: list[str]) -> None:
        for item_id in ids:
            self.known.add(item_id)
            self.subreddit_of[item_id] = subreddit
        self.listings[(subreddit.lower(), listing)] = list(ids)

    def next_fault(self, queue: list[str]) -> str | None:
        with self.lock:
            return queue.pop(0) if queue else None


RATE_OK = {"x-ratelimit-remaining": "999", "x-ratelimit-used": "1", "x-ratelimit-reset": "1"}
RATE_EXHAUSTED = {"x-ratelimit-remaining": "0", "x-ratelimit-used": "1000", "x-ratelimit-reset": "1"}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall
    server: "RedditServer"

    def log_message(self, *args):  # quiet
        pass

    def _send(self, status: int, payload, headers: dict | None = None) -> None:
        body = json.dumps(payload).encode() if not isinstance(payload, bytes) else payload
        self.send_response(status)
        self.send_header("content-type", "application/json; charset=UTF-8")
        self.send_header("content-length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _count(self, key: str) -> None:
        with self.server.state.lock:
            self.server.state.counts[key] += 1

    def do_POST(self):
        state = self.server.state
        url = urllib.parse.urlsplit(self.path)
        length = int(self.headers.get("content-length") or 0)
        form = urllib.parse.parse_qs(self.rfile.read(length).decode())
        if url.path != "/api/v1/access_token":
            return self._send(404, {"message": "Not Found", "error": 404})
        self._count("token")
        auth = self.headers.get("authorization", "")
        try:
            client, secret = base64.b64decode(auth.removeprefix("Basic ")).decode().split(":", 1)
        except ValueError:
            client, secret = "", ""
        if (client, secret) != (CLIENT_ID, CLIENT_SECRET):
            return self._send(401, {"message": "Unauthorized", "error": 401})
        grant = form.get("grant_type", [""])[0]
        if grant == "password" and (form.get("username", [""])[0], form.get("password", [""])[0]) != (USERNAME, PASSWORD):
            return self._send(200, {"error": "invalid_grant"})
        if grant not in ("password", "client_credentials"):
            return self._send(400, {"error": "unsupported_grant_type"})
        with state.lock:
            token = f"token-{len(state.tokens) + 1}-{grant}"
            state.tokens.add(token)
            state.counts[f"grant_{grant}"] += 1
        self._send(200, {"access_token": token, "token_type": "bearer", "expires_in": 86400, "scope": "*"})

    def do_GET(self):
        state = self.server.state
        url = urllib.parse.urlsplit(self.path)
        params = urllib.parse.parse_qs(url.query)
        if url.path == "/stats":  # for benchmarks in another process
            with state.lock:
                return self._send(200, {"counts": dict(state.counts), "info_seconds": state.info_seconds})
        if url.path.startswith("/files/"):  # plain downloads (id lists served by URL)
            self._count("files")
            body = self.server.files.get(url.path.removeprefix("/files/"))
            if body is None:
                return self._send(404, b"not found")
            return self._send(200, body)
        token = self.headers.get("authorization", "").removeprefix("bearer ")
        if token not in state.tokens:
            return self._send(401, {"message": "Unauthorized", "error": 401},
                              {"www-authenticate": 'Bearer realm="reddit", error="invalid_token"'})
        if url.path.rstrip("/") == "/api/info":
            started = time.perf_counter()
            self._count("info")
            fault = state.next_fault(state.faults)
            if fault and self._fault(fault):
                return
            ids = [f.removeprefix("t3_") for f in params.get("id", [""])[0].split(",") if f]
            with state.lock:
                state.served_ids.update(ids)
            children = [{"kind": "t3", "data": p} for p in map(state.post, ids) if p is not None]
            self._send(200, _listing(children, None), RATE_OK)
            with state.lock:
                state.info_seconds += time.perf_counter() - started
            return
        parts = url.path.strip("/").removesuffix(".json").split("/")
        if len(parts) == 3 and parts[0] == "r" and parts[2] in ("hot", "top"):
            self._count("listing")
            fault = state.next_fault(state.listing_faults)
            if fault and self._fault(fault):
                return
            ids = state.listings.get((parts[1].lower(), parts[2]))
            if ids is None:  # Reddit redirects an unknown subreddit to the search page
                return self._send(302, {}, {"location": f"/subreddits/search.json?q={parts[1]}"})
            limit = min(100, int(params.get("limit", ["25"])[0]))
            after = params.get("after", [None])[0]
            start = ids.index(after.removeprefix("t3_")) + 1 if after else 0
            page = ids[start : start + limit]
            children = [{"kind": "t3", "data": state.post(i)} for i in page]
            more = start + limit < len(ids)
            return self._send(200, _listing(children, f"t3_{page[-1]}" if more and page else None), RATE_OK)
        self._send(404, {"message": "Not Found", "error": 404})

    def _fault(self, fault: str) -> bool:
        """Serve ``fault`` instead of the answer; False for a stall, which answers late."""
        self._count(f"fault_{fault}")
        if fault == "429":
            self._send(429, {"message": "Too Many Requests", "error": 429}, {**RATE_EXHAUSTED, "retry-after": "1"})
        elif fault == "429-bare":
            self._send(429, {"message": "Too Many Requests", "error": 429}, {"retry-after": "0"})
        elif fault in ("500", "524"):
            self._send(int(fault), b"<html>server error</html>")
        elif fault == "401":
            self._send(401, {"message": "Unauthorized", "error": 401},
                       {"www-authenticate": 'Bearer realm="reddit", error="invalid_token"'})
        elif fault == "403":
            self._send(403, {"message": "Forbidden", "error": 403})
        elif fault == "drop":  # close the connection without an answer
            self.close_connection = True
            self.connection.shutdown(2)
        elif fault == "stall":
            time.sleep(self.server.stall_s)
            return False
        else:
            raise ValueError(fault)
        return True


def _listing(children: list, after: str | None) -> dict:
    return {"kind": "Listing", "data": {"after": after, "before": None, "dist": len(children), "children": children}}


class RedditServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: RedditState):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state
        self.files: dict[str, bytes] = {}
        self.stall_s = 1.5
        # shutdown() waits for the serving loop's next poll: a short poll stops the server at once.
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def handle_error(self, request, client_address):
        pass  # a client that gave up on a stalled answer is expected here, not an error

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> "RedditServer":
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.shutdown()
        self.server_close()


def praw_ini(folder: Path, url: str) -> Path:
    """``folder/praw.ini`` with sites: ``tecbtest`` (read-only app), ``tecbscript`` (script app),
    ``tecbbad`` (wrong secret), ``tecbenv`` (no secret: it comes from ``praw_client_secret``)."""
    common = f"oauth_url={url}\nreddit_url={url}\ncheck_for_updates=False\nuser_agent=tecb tests by u/tecb_tester\n"
    text = (
        f"[tecbtest]\n{common}client_id={CLIENT_ID}\nclient_secret={CLIENT_SECRET}\n\n"
        f"[tecbscript]\n{common}client_id={CLIENT_ID}\nclient_secret={CLIENT_SECRET}\nusername={USERNAME}\npassword={PASSWORD}\n\n"
        f"[tecbbad]\n{common}client_id={CLIENT_ID}\nclient_secret=wrong-{CLIENT_SECRET}\n\n"
        f"[tecbenv]\n{common}client_id={CLIENT_ID}\n"
    )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "praw.ini"
    path.write_text(text)
    return path


def clean_env(home: Path, **extra: str) -> dict:
    """The environment for a run: praw.ini only from ``home/.config``, no praw_* from outside."""
    env = {k: v for k, v in os.environ.items() if not k.lower().startswith("praw")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_CACHE_HOME=str(home / ".cache"),
               PYTHONPATH=str(REPO), PYTHONHASHSEED="random", **extra)
    return env


DRIVER = """
import json, sys
from tecb_data.errors import UserError
from tecb_data.sources import reddit
from tecb_data.sources.reddit_api import RetryPolicy
args = json.loads(sys.argv[1])
if args.pop("debug_log", False):  # everything praw, prawcore and urllib3 log, to stderr
    import logging
    logging.basicConfig(level=logging.DEBUG)
retry = RetryPolicy(attempts=args.pop("attempts", 4), backoff_s=0.01, max_backoff_s=0.05)
run = {}
try:
    built = reddit.build_from_ids(args.pop("ids"), args.pop("out"), retry=retry, run_info=run, **args)
except UserError as exc:
    print(f"tecb-data: error: {exc}", file=sys.stderr)
    sys.exit(2)
print(json.dumps({"run": run, "built": [[str(f), m["fingerprint"]] for f, m in built]}))
"""


def run(args: list[str], home: Path, *, cwd: Path | None = None, timeout: float = 120, **env) -> subprocess.CompletedProcess:
    """``tecb-data ARGS`` in a subprocess with ``home`` as its HOME (praw.ini in ``home/.config``)."""
    return subprocess.run([sys.executable, "-m", "tecb_data.cli", *args], cwd=cwd or home, env=clean_env(home, **env),
                          capture_output=True, text=True, timeout=timeout)


def rehydrate(home: Path, *, timeout: float = 120, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    """``tecb_data.sources.reddit.build_from_ids`` in a subprocess with tiny retry backoff (a parameter)."""
    kwargs = {k: str(v) if isinstance(v, Path) else v for k, v in kwargs.items()}
    return subprocess.run([sys.executable, "-c", DRIVER, json.dumps(kwargs)], cwd=home, env=clean_env(home, **(env or {})),
                          capture_output=True, text=True, timeout=timeout)


def start_rehydrate(home: Path, **kwargs) -> subprocess.Popen:
    kwargs = {k: str(v) if isinstance(v, Path) else v for k, v in kwargs.items()}
    return subprocess.Popen([sys.executable, "-c", DRIVER, json.dumps(kwargs)], cwd=home, env=clean_env(home),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
