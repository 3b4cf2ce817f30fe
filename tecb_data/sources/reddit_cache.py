"""The local rehydration cache: one SQLite file with the status of every id ever checked.

A batch's answers are written in one transaction, so a run killed at any point has either stored a
batch completely or not at all, and the next run re-fetches at most the batch that was in flight.
A dropped id keeps only its status and subreddit: its title and body are overwritten with NULL under
``secure_delete``, so the deleted text is not left behind in free pages of the file, and the
write-ahead log, which may still hold old pages, is checkpointed and emptied when the cache closes. No author names
and nothing from praw's configuration are stored.

``--refresh`` starts a new *generation*: every id checked in an older generation is due again. The
refresh is marked finished only when a run has checked all its ids, so a refresh that was killed is
continued by the next run, with or without ``--refresh``; without a refresh under way, a run fetches
only the ids the cache has never seen.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from tecb_data.errors import UserError
from tecb_data.sources.reddit_text import Fetched, drop_reason

FILE_NAME = "reddit-rehydration.sqlite3"
SCHEMA_VERSION = "1"
KEPT = "kept"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS submissions (
    id TEXT PRIMARY KEY,
    status TEXT NOT NULL,          -- "kept" or a reason from reddit_text.DROP_REASONS
    subreddit TEXT,                -- as Reddit reports it; NULL when Reddit did not return the id
    title TEXT,                    -- raw title and body, only while status is "kept"
    body TEXT,
    generation INTEGER NOT NULL
) WITHOUT ROWID;
"""


@dataclass(frozen=True)
class Entry:
    status: str
    subreddit: str | None
    title: str | None
    body: str | None


def default_dir() -> Path:
    """``$XDG_CACHE_HOME/tecb/reddit`` (``~/.cache/tecb/reddit``): texts stay out of the output folder."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tecb" / "reddit"


class RehydrationCache:
    def __init__(self, folder: Path | None = None):
        self.folder = Path(folder) if folder is not None else default_dir()
        self.path = self.folder / FILE_NAME
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            # The cache holds other people's texts: readable by the owner only.
            os.chmod(self.folder, 0o700)
            # a second run on the same cache waits for this one's batch instead of failing at once
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=60)
            self._db.execute("PRAGMA secure_delete = ON")
            # WAL with synchronous=NORMAL: a committed batch survives the process being killed (the
            # WAL is written before COMMIT returns) without an fsync per batch; a power cut may
            # lose the last batches, never consistency.
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._db.executescript(_SCHEMA)
            version = self._meta("schema_version")
            if version is None:
                self._set_meta("schema_version", SCHEMA_VERSION)
            elif version != SCHEMA_VERSION:
                raise UserError(f"{self.path}: cache of schema version {version}, expected {SCHEMA_VERSION}; delete the file")
        except sqlite3.OperationalError as exc:
            if "unable to open" in str(exc) or "readonly" in str(exc):
                raise UserError(
                    f"--cache {self.folder}: cannot write the rehydration cache there ({exc}); choose a writable folder"
                ) from None
            raise UserError(f"{self.path}: damaged rehydration cache ({exc}); delete the file and run again") from None
        except sqlite3.DatabaseError as exc:
            raise UserError(f"{self.path}: damaged rehydration cache ({exc}); delete the file and run again") from None
        except OSError as exc:  # a file where the folder should be, a read-only folder
            raise UserError(
                f"--cache {self.folder}: cannot use it as the rehydration cache folder ({exc.strerror}); "
                "choose a writable folder"
            ) from None
        except OSError as exc:
            raise UserError(f"{self.folder}: cannot use this cache folder ({exc.strerror}); pass another --cache") from None

    def close(self) -> None:
        # Copy the WAL into the database and empty it: older page versions in the WAL may still
        # hold texts that were purged since.
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self._db.close()

    def __enter__(self) -> "RehydrationCache":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()

    def _meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    @property
    def generation(self) -> int:
        return int(self._meta("generation") or 0)

    @property
    def refresh_pending(self) -> bool:
        return self._meta("refresh_pending") == "1"

    def start(self, refresh: bool) -> None:
        """Begin a run; ``refresh`` starts a new generation unless a killed refresh is still pending."""
        if refresh and not self.refresh_pending:
            with self._transaction():
                self._set_meta("generation", str(self.generation + 1))
                self._set_meta("refresh_pending", "1")

    def finish(self) -> None:
        """Every id of this run is checked in the current generation: a pending refresh is done."""
        if self.refresh_pending:
            self._set_meta("refresh_pending", "0")

    def due(self, ids: list[str]) -> list[str]:
        """The ids (in the given order) never checked, and while a refresh is under way, those checked
        before it began."""
        generation = self.generation if self.refresh_pending else -1
        checked = {}
        for start in range(0, len(ids), 900):  # SQLite's limit on bound parameters
            chunk = ids[start : start + 900]
            marks = ",".join("?" * len(chunk))
            checked.update(
                self._db.execute(f"SELECT id, generation FROM submissions WHERE id IN ({marks})", chunk).fetchall()
            )
        return [i for i in ids if i not in checked or checked[i] < generation]

    def store_batch(self, requested: list[str], fetched: list[Fetched]) -> dict[str, str]:
        """Record Reddit's answer for one batch in one transaction; returns the status per id."""
        by_id = {post.id: post for post in fetched}
        generation = self.generation
        statuses, rows = {}, []
        for item_id in requested:
            post = by_id.get(item_id)
            reason = drop_reason(post)
            statuses[item_id] = reason or KEPT
            kept = reason is None
            rows.append(
                (
                    item_id,
                    reason or KEPT,
                    post.subreddit if post is not None else None,
                    post.title if kept else None,
                    post.body if kept else None,
                    generation,
                )
            )
        with self._transaction():
            self._db.executemany(
                "INSERT OR REPLACE INTO submissions (id, status, subreddit, title, body, generation) VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
        return statuses

    def entries(self, ids: list[str]) -> dict[str, Entry]:
        found = {}
        for start in range(0, len(ids), 900):
            chunk = ids[start : start + 900]
            marks = ",".join("?" * len(chunk))
            for row in self._db.execute(
                f"SELECT id, status, subreddit, title, body FROM submissions WHERE id IN ({marks})", chunk
            ):
                found[row[0]] = Entry(*row[1:])
        return found

    def _transaction(self):
        return _Transaction(self._db)


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception (including KeyboardInterrupt)."""

    def __init__(self, db: sqlite3.Connection):
        self._db = db

    def __enter__(self):
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, *_):
        self._db.execute("ROLLBACK" if exc_type else "COMMIT")
