"""The results store: one JSON line per finished grid cell, appended and fsynced.

A cell is (protocol, profile, seed set, seed, model name and identity, dataset fingerprint,
reduction, algorithm, split). The seed set (``seeds``, e.g. ``"1,2,42"``) is the run's: a run with
several seeds is one version of its results, apart from a one-seed run that shares a seed. A
line is written with one ``write`` on a file opened for appending and fsynced before the next cell
starts, so a killed run loses at most the cell it was working on.

The store only ever edits its own files. A file is the store's when every complete line is a
results row (a JSON object with the key fields); any other file is refused with one line and never
written to. The one repair it makes is to cut a torn last line: an unterminated JSON fragment
after the store's own rows (or one that starts as every row it writes starts), which only a write
that died half-way leaves. Reading never changes the file; the cut happens on the next append,
and an append always starts on a fresh line.

``ResultsStore(path, lock=True)`` (what ``run_grid`` uses) holds an exclusive ``flock`` on the
store from before it reads the file until it is closed or the process ends: a second run on the
same store waits, saying so on stderr, then reads what the first one finished and skips it.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import threading
import weakref
from pathlib import Path

import pandas as pd

from tecb_data.errors import UserError

KEY_FIELDS = ("protocol", "profile", "seeds", "seed", "model", "model_identity", "dataset_fingerprint",
               "reduction", "algorithm", "split")
# Stores written before profiles existed hold rows of today's libraries; before seed sets, of a
# run with one seed.
FIELD_DEFAULTS = {"profile": lambda row: "current", "seeds": lambda row: seed_set_name([row["seed"]])}


def seed_set_name(seeds) -> str:
    """The canonical name of a run's seed set: sorted, comma-separated (order of asking is not a version)."""
    return ",".join(str(s) for s in sorted({int(s) for s in seeds}))


def with_defaults(row: dict) -> dict:
    for name, default in FIELD_DEFAULTS.items():
        if name not in row:
            row[name] = default(row)
    return row


def cell_key(row: dict) -> tuple:
    return tuple(row[f] if f in row or f not in FIELD_DEFAULTS else FIELD_DEFAULTS[f](row) for f in KEY_FIELDS)


# Every row is written with sorted keys, and "algorithm" sorts first among a row's fields: the
# bytes every line the store writes starts with (what marks a lone torn fragment as ours).
ROW_PREFIX = b'{"algorithm": '


def _row_key(line: bytes) -> tuple[dict, tuple] | None:
    """The row and its cell key if ``line`` is a results row, else None."""
    try:
        row = json.loads(line)
        return row, cell_key(row)
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, IndexError, AttributeError):
        return None


def _is_torn_write(fragment: bytes, after_own_rows: bool) -> bool:
    """Whether an unterminated last line is what a results write that died half-way leaves: the
    start of a JSON object (it has no newline by construction) after the store's own rows, or,
    alone in the file, one that starts as every row the store writes starts."""
    if not fragment.startswith(b'{"'):
        return False
    if after_own_rows:
        return True
    n = min(len(fragment), len(ROW_PREFIX))
    return fragment[:n] == ROW_PREFIX[:n]


class _FileLock:
    """An exclusive flock on a file, shared by every store object of this process that opens the
    same file (flock excludes open files, so a second object in one process would wait on the
    first forever); released when the last one closes or the process ends."""

    _held: dict[tuple[int, int], list] = {}  # (st_dev, st_ino) -> [fd, users]
    _guard = threading.Lock()

    @classmethod
    def acquire(cls, path: Path) -> tuple[int, tuple[int, int]]:
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            raise _unwritable(path, exc) from None
        identity = (os.fstat(fd).st_dev, os.fstat(fd).st_ino)
        with cls._guard:
            if identity in cls._held:
                os.close(fd)
                cls._held[identity][1] += 1
                return cls._held[identity][0], identity
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"note: {path}: another run is writing to this results store; waiting for it to finish "
                  "(the cells it finishes are skipped here)", file=sys.stderr, flush=True)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(fd)
                raise
        with cls._guard:
            cls._held[identity] = [fd, 1]
        return fd, identity

    @classmethod
    def release(cls, identity: tuple[int, int]) -> None:
        with cls._guard:
            entry = cls._held.get(identity)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] == 0:
                del cls._held[identity]
                os.close(entry[0])  # closing the last descriptor releases the flock


def _unwritable(path: Path, exc: OSError) -> UserError:
    if path.is_dir():
        return UserError(f"{path}: is a folder, not a results file; name a .jsonl file (e.g. {path / 'results.jsonl'})")
    return UserError(f"{path}: cannot write to the results store ({exc.strerror}); choose another --results file "
                     "or make it writable")


class ResultsStore:
    """The rows of a results file (``path=None``: in memory only). ``lock=True``: hold the store
    exclusively (see the module docstring) until :meth:`close`, the end of a ``with`` block, or
    the end of the process."""

    def __init__(self, path: Path | None, *, lock: bool = False):
        self.path = None if path is None else Path(path)
        self.rows: list[dict] = []
        self._keys: dict[tuple, int] = {}
        self._tail: int | None = None  # where a torn last line starts (cut before the next append)
        self._needs_newline = False  # the last row lacks its newline (appends start a fresh line)
        self._size = 0  # the file's size when read: a repair is made only to the file as it was read
        self._lock = None
        if self.path is not None and self.path.is_dir():
            raise _unwritable(self.path, IsADirectoryError())
        if lock and self.path is not None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise _unwritable(self.path, exc) from None
            _, identity = _FileLock.acquire(self.path)
            self._lock = identity
            self._finalizer = weakref.finalize(self, _FileLock.release, identity)
        if self.path is not None and self.path.exists():
            self._read()

    def close(self) -> None:
        """Release the lock (if any); the rows stay readable."""
        if self._lock is not None:
            self._finalizer()
            self._lock = None

    def __enter__(self) -> "ResultsStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _read(self) -> None:
        try:
            data = self.path.read_bytes()
        except OSError as exc:
            raise UserError(f"{self.path}: cannot read the results store ({exc.strerror})") from None
        self._size = len(data)
        lines = data.split(b"\n")
        # A file ending in a newline splits into its lines and an empty last piece; any other
        # last piece is a line the writer did not finish with its newline.
        *complete, last = lines
        offset = 0
        for number, line in enumerate(complete, 1):
            if line.strip():
                found = _row_key(line)
                if found is None:
                    raise self._foreign(number)
                self._remember(with_defaults(found[0]), found[1])
            offset += len(line) + 1
        if not last.strip():
            return
        found = _row_key(last)
        if found is not None:
            self._remember(with_defaults(found[0]), found[1])
            self._needs_newline = True
        elif _is_torn_write(last, after_own_rows=bool(self.rows)):
            print(f"note: {self.path}:{len(lines)}: an incomplete last line (a run killed while writing it); "
                  "the next run writes that cell again", file=sys.stderr)
            self._tail = offset
        else:
            raise self._foreign(len(lines))

    def _foreign(self, number: int) -> UserError:
        return UserError(f"{self.path}:{number}: not a results line; is this a tecb-eval results file? It is left "
                         "as it is: choose another --results file")

    def _remember(self, row: dict, key: tuple) -> None:
        if key in self._keys:
            self.rows[self._keys[key]] = row
        else:
            self._keys[key] = len(self.rows)
            self.rows.append(row)

    def __contains__(self, key: tuple) -> bool:
        return key in self._keys

    def get(self, key: tuple) -> dict | None:
        return self.rows[self._keys[key]] if key in self._keys else None

    def append(self, row: dict) -> None:
        key = cell_key(row)
        if self.path is not None:
            line = (json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
            if self._needs_newline:
                line = b"\n" + line
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
            except OSError as exc:
                raise _unwritable(self.path, exc) from None
            try:
                if (self._tail is not None or self._needs_newline) and os.fstat(fd).st_size != self._size:
                    raise UserError(f"{self.path}: changed while this run was using it (another run writing without "
                                    "the lock?); nothing was repaired: rerun to read it again")
                if self._tail is not None:
                    # Cut the torn line, so this row does not continue it.
                    os.ftruncate(fd, self._tail)
                    self._tail = None
                os.write(fd, line)
                os.fsync(fd)
            except OSError as exc:
                raise UserError(f"{self.path}: writing a results line failed ({exc.strerror}); the finished "
                                "cells before it are kept: free space or fix the file and rerun") from None
            finally:
                os.close(fd)
            self._needs_newline = False
        self._remember(row, key)

    def frame(self) -> pd.DataFrame:
        return rows_frame(self.rows)


def rows_frame(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    order = ["model", "dataset", "reduction", "algorithm", "split", "protocol", "seed"]
    return frame.sort_values([c for c in order if c in frame.columns], kind="stable").reset_index(drop=True)


def read_results(path: Path) -> pd.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such results file; run `tecb-eval run ... --results {path}` first")
    frame = ResultsStore(path).frame()
    if frame.empty:
        raise UserError(f"{path}: holds no results yet")
    return frame
