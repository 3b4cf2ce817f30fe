"""The Reddit id lists: reading them (a file, a URL or a ``reddit-clustering-ids`` folder) and writing them.

The file format is the benchmark's ``submission_ids.txt``: a header line ``id``, then one base-36
submission id per line. ``tecb-data collect`` adds each id's subreddit as a second, comma-separated
column (header ``id,subreddit``), so one file carries both and a reader of the plain format still
finds the id first on every line. With subreddits, the list fixes the set of subreddits the splits
are drawn from, whatever Reddit deletes later.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tecb_data import inputs, layout, network
from tecb_data.errors import UserError
from tecb_data.sources import InputFile

IDS_DATASET = "reddit-clustering-ids"
SUBMISSIONS_FILE = "data/submissions.jsonl"  # in the ids folder: every kept id with its subreddit
_ID = re.compile(r"^[0-9a-z]{1,13}$")
# Reddit's rule for subreddit names (3-21 letters, digits, underscores; a few old ones have 2).
_SUBREDDIT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_]{1,20}$")


@dataclass(frozen=True)
class IdList:
    ids: tuple[str, ...]  # unique, in numeric (base-36) order
    subreddits: dict[str, str]  # id -> subreddit, where the input names it
    universe: tuple[str, ...] | None  # the subreddits the splits draw from, where the input fixes them
    input: InputFile
    seed: int | None = None  # the seed an ids folder was built with
    report: dict = field(default_factory=dict)


def id_key(item_id: str) -> tuple[int, str]:
    """Numeric order of base-36 ids (shorter is smaller), which is the order Reddit created them."""
    return (len(item_id), item_id)


def valid_subreddit(name: str) -> bool:
    return bool(_SUBREDDIT.match(name))


def normalize_id(token: str) -> str | None:
    token = token.strip()
    token = token[3:] if token.lower().startswith("t3_") else token
    return token if _ID.match(token) else None


def parse(text: str, name: str, source: InputFile) -> IdList:
    lines = text.lstrip("\ufeff").splitlines()
    numbered = [(n, line.strip()) for n, line in enumerate(lines, start=1) if line.strip()]
    if not numbered:
        raise UserError(f"{name}: empty id list; expected a header line `id`, then one submission id per line")
    header_line, header = numbered[0]
    columns = [c.strip().lower() for c in header.split(",")]
    if columns not in (["id"], ["id", "subreddit"]):
        raise UserError(
            f"{name}:{header_line}: expected the header `id` (or `id,subreddit`), found {header[:40]!r}; "
            "is this a Reddit submission id list?"
        )
    with_subreddits = len(columns) == 2
    subreddits: dict[str, str] = {}
    ids: set[str] = set()
    duplicates = 0
    for number, line in numbered[1:]:
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != len(columns):
            raise UserError(f"{name}:{number}: expected {len(columns)} comma-separated field(s) ({header}), found {len(fields)}")
        item_id = normalize_id(fields[0])
        if item_id is None:
            raise UserError(f"{name}:{number}: {fields[0][:40]!r} is not a base-36 Reddit submission id")
        if with_subreddits:
            subreddit = fields[1].removeprefix("r/")
            if not valid_subreddit(subreddit):
                raise UserError(f"{name}:{number}: {fields[1][:40]!r} is not a subreddit name")
            if subreddits.get(item_id, subreddit) != subreddit:
                raise UserError(f"{name}:{number}: id {item_id} listed before with subreddit {subreddits[item_id]}")
            subreddits[item_id] = subreddit
        duplicates += item_id in ids
        ids.add(item_id)
    if not ids:
        raise UserError(f"{name}: the id list has a header but no ids")
    universe = tuple(sorted(set(subreddits.values()))) if with_subreddits else None
    return IdList(tuple(sorted(ids, key=id_key)), subreddits, universe, source, report={"duplicate_ids": duplicates})


def _display(url: str) -> str:
    """The URL without user info or query, which may hold credentials."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host += f":{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


class _Transient(Exception):
    """A download failure worth another try: no answer, a dropped connection, a 5xx."""

    def __init__(self, reason: str, timed_out: bool, cause: BaseException | None = None):
        super().__init__(reason)
        self.timed_out = timed_out
        self.reason = cause  # what network.describe reads (an unresolvable host is said as such)


def download(url: str) -> tuple[bytes, str]:
    """The body of ``url`` (plain HTTP GET) and a file name for the manifest; connect and read wait
    ``TECB_NETWORK_TIMEOUT`` seconds, failures are retried (network.ATTEMPTS tries)."""
    shown = _display(url)
    limit = network.timeout_s()

    def fetch() -> bytes:
        try:
            with urllib.request.urlopen(url, timeout=limit) as response:
                return response.read()
        except urllib.error.HTTPError as exc:
            if exc.code >= 500:
                raise _Transient(f"HTTP {exc.code} {exc.reason}", False) from None
            raise UserError(f"{shown}: HTTP {exc.code} {exc.reason}; check the address of the id list") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            timed_out = isinstance(reason, (TimeoutError, socket.timeout)) or isinstance(exc, (TimeoutError, socket.timeout))
            raise _Transient(network.describe(exc), timed_out, exc) from None

    try:
        body = network.retrying(fetch, f"{shown}: downloading the id list", transient=(_Transient,))
    except _Transient as exc:
        if exc.timed_out:
            raise UserError(
                f"{shown}: no answer within {limit:g} s ({network.ATTEMPTS} tries); {network.TIMEOUT_ENV} sets this "
                "timeout in seconds: raise it for a slow network, or check the address"
            ) from None
        if network.unresolvable(exc):
            raise UserError(f"{shown}: cannot download the id list: its host name cannot be resolved (no network, "
                            "or a wrong address); run again when online, or pass a local copy of the list as --ids") from None
        raise UserError(f"{shown}: cannot download the id list ({exc}; {network.ATTEMPTS} tries)") from None
    name = Path(urllib.parse.urlsplit(url).path).name or "ids.txt"
    return body, name


def _decode(raw: bytes, name: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{name}: not a text file (not UTF-8 at byte {exc.start}); expected a Reddit id list") from None


def _from_bytes(raw: bytes, name: str) -> IdList:
    source = InputFile(name, hashlib.sha256(raw).hexdigest(), len(raw))
    return parse(_decode(raw, name), name, source)


def _read_folder(folder: Path) -> IdList:
    manifest = layout.verify(folder)
    if manifest.get("dataset") != IDS_DATASET:
        raise UserError(f"{folder}: a {manifest.get('dataset')!r} folder; --ids takes a {IDS_DATASET} folder or an id list")
    path = folder / SUBMISSIONS_FILE
    subreddits: dict[str, str] = {}
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            try:
                row = json.loads(line)
                item_id, subreddit = normalize_id(row["id"]), row["subreddit"]
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
                raise UserError(f"{path}:{number}: not an id row; rebuild or re-download the dataset") from None
            if item_id is None or not valid_subreddit(subreddit):
                raise UserError(f"{path}:{number}: invalid id or subreddit; rebuild or re-download the dataset")
            subreddits[item_id] = subreddit
    universe = tuple(manifest.get("subreddits") or sorted(set(subreddits.values())))
    source = InputFile.of(path, name=f"{IDS_DATASET}/{SUBMISSIONS_FILE}")
    return IdList(tuple(sorted(subreddits, key=id_key)), subreddits, universe, source, seed=manifest.get("seed"))


def read(ids: str | Path) -> IdList:
    """An id list from a file, an http(s) URL, or a ``reddit-clustering-ids`` folder."""
    text = str(ids)
    if text.startswith(("http://", "https://")):
        raw, name = download(text)
        return _from_bytes(raw, name)
    path = Path(ids)
    if path.is_dir():
        return _read_folder(path)
    if not path.exists():
        raise UserError(f"{path}: no such file or folder; pass an id list, its http(s) URL or a {IDS_DATASET} folder")
    return _from_bytes(inputs.read_bytes(path, what=str(path), limit=None), path.name)


def write(path: Path, rows: list[tuple[str, str]]) -> None:
    """Write ``id,subreddit`` rows (numeric id order) atomically: a temporary file renamed into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~layout.current_umask())  # as open() would have made it, not mkstemp's 0600
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write("id,subreddit\n")
            for item_id, subreddit in sorted(rows, key=lambda r: id_key(r[0])):
                fh.write(f"{item_id},{subreddit}\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
