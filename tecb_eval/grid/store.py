"""The results store: one JSON line per finished grid cell, appended and fsynced.

A cell is (protocol, profile, seed set, seed, model name and identity, dataset fingerprint,
reduction, algorithm, split). The seed set (``seeds``, e.g. ``"1,2,42"``) is the run's: a run with
several seeds is one version of its results, apart from a one-seed run that shares a seed. A
line is appended and fsynced before the next cell starts, so a killed run loses at most the cell it
was working on. A line is written whole or not at all: a write that stops short (a full disk) is
cut back to where the line began and ends the run with one line, the store as it was before it.
A store file this process created and never wrote a row to is removed when the store closes.

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

import errno
import fcntl
import json
import math
import os
import sys
import threading
import weakref
from pathlib import Path

import pandas as pd

from tecb_data import inputs
from tecb_data.errors import UserError
from tecb_data.publication import sync_folder
from tecb_eval.clustering.cluster_counts import Setting
from tecb_eval.clustering.criteria import needing
from tecb_eval.clustering.ranges import SCORE_RANGES, in_range, is_score
from tecb_eval.grid.seeds import MAX_SEED

KEY_FIELDS = ("protocol", "profile", "seeds", "seed", "model", "model_identity", "dataset_fingerprint",
               "reduction", "algorithm", "split", "setting")
# Stores written before profiles existed hold rows of today's libraries; before seed sets, of a
# run with one seed. A row without a setting ran at the algorithm's own (k = the labels' count).
FIELD_DEFAULTS = {"profile": lambda row: "current", "seeds": lambda row: seed_set_name([row["seed"]]),
                  "setting": lambda row: ""}


def read_setting(text: str | None) -> Setting | None:
    """A stored row's ``setting`` as the grid made it: ``"k=10"`` -> ``Setting("k", 10)``; None or
    ``""`` (the algorithm's own setting, and every row written before ranges) -> None. The one
    place a setting's text is read: the grid carries :class:`Setting` and names it only in a row."""
    if not isinstance(text, str) or not text:
        return None
    parameter, _, value = text.partition("=")
    return Setting(parameter, int(value))


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


def _row_key(line: bytes) -> tuple[dict, tuple | None] | None:
    """The row and its cell key if ``line`` is a results row (a JSON object with the key fields),
    else None. The key is None for a row whose values are not what the grid writes (:func:`row_problem`)."""
    try:
        row = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):  # json.JSONDecodeError is a ValueError
        return None
    if not isinstance(row, dict) or any(f not in row and f not in FIELD_DEFAULTS for f in KEY_FIELDS):
        return None
    return row, None if row_problem(row) else cell_key(row)


TEXT_FIELDS = ("protocol", "profile", "model", "model_identity", "dataset_fingerprint", "reduction", "algorithm",
               "split", "mteb_name", "setting")
COUNT_FIELDS = ("n_samples", "n_labels", "n_clusters_found", "dataset_splits", "dbcv_points", "silhouette_points",
                "stability_runs", "api_requests", "api_retries", "api_texts_sent", "api_cache_hits", "api_truncated")
# A non-negative number or null where present: an API model's tokens and their cost.
AMOUNT_FIELDS = ("api_tokens", "api_cost", "price_per_million_tokens", "spectral_k")
# Text or null where present: what the tables, the MTEB export and the snippets read besides the key.
OPTIONAL_TEXT_FIELDS = ("dataset_location", "language", "prompt", "backend", "dtype", "mteb_model",
                        "algorithm_params", "reduction_params", "dbcv_note", "label_free_note", "stability_note",
                        "api_key_env", "assignment", "topic_words")
FLAG_FIELDS = ("synthetic", "reduce_cached", "labelled")
# What files are named by (MTEB's results layout, the report's figures): plain names only.
NAME_FIELDS = ("mteb_name", "dataset")
# grid.work.METRIC_FIELDS, less the count; named here so that reading a store needs no scikit-learn.
SCORE_FIELDS = ("v_measure", "homogeneity", "completeness", "ami", "ari", "noise_fraction")
# The scores that need labels: None on a row of a corpus without labels ("labelled": false).
LABEL_SCORE_FIELDS = ("v_measure", "homogeneity", "completeness", "ami", "ari")
# Label-free scores (tecb_eval.clustering.criteria, less stability's, checked with its interval below):
# a number in its range, or None where undefined.
LABEL_FREE_SCORES = tuple(c.name for needs in ("vectors", "texts", "partitions") for c in needing(needs))
# Stability (tecb_eval.clustering.stability): each field and the range it lies in.
STABILITY_SCORES = {"stability_ari": "stability_ari", "stability_ari_low": "stability_ari",
                    "stability_ari_high": "stability_ari", "stability_ami": "stability_ami",
                    "stability_ami_low": "stability_ami", "stability_ami_high": "stability_ami",
                    "stability_fraction": "stability_fraction"}
def row_problem(row: dict) -> str | None:
    """What makes a results row unlike every row the grid writes, or None: a key or text field that
    is no text, a seed that is no seed, a score that is no finite number, no ``mteb_name`` or
    ``v_measure``. Such a row (an edited line) can be neither keyed nor averaged: kept, it would
    break every table of its store, or drop out of a mean without a word."""
    def shown(value) -> str:
        text = json.dumps(value, ensure_ascii=False, allow_nan=True)
        return text if len(text) <= 40 else text[:37] + "..."

    def whole(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    for name in ("mteb_name", "v_measure"):
        if name not in row and not (name == "v_measure" and row.get("labelled") is False):
            return f"no {name}"
    for name in TEXT_FIELDS + ("dataset",):
        if name in row and not isinstance(row[name], str):
            return f"{name} {shown(row[name])} is not text"
    if not whole(row["seed"]) or not 0 <= row["seed"] <= MAX_SEED:
        return f"seed {shown(row['seed'])} is not a seed (an integer from 0 to {MAX_SEED})"
    if "seeds" in row:
        items = row["seeds"].split(",") if isinstance(row["seeds"], str) else [""]
        if not all(item.isdigit() for item in items) or row["seeds"] != seed_set_name(items):
            return f'seeds {shown(row["seeds"])} is not a seed set as the grid names one (sorted, e.g. "1,2,42")'
        if row["seed"] not in {int(item) for item in items}:
            return f"seeds {shown(row['seeds'])} does not hold the row's seed {row['seed']}"
    unlabelled = row.get("labelled") is False
    for name in SCORE_FIELDS:
        value = row.get(name, 0.0)
        if unlabelled and name in LABEL_SCORE_FIELDS:
            if value is not None:
                return f"{name} {shown(value)} on a row without labels (labelled false): it can only be null"
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"{name} {shown(value)} is not a finite number"
        if not in_range(name, value):
            low, high = SCORE_RANGES[name]
            return f"{name} {shown(value)} is out of range (a {name} lies from {low:g} to {high:g})"
    for name in COUNT_FIELDS:
        if name in row and (not whole(row[name]) or row[name] < 0):
            return f"{name} {shown(row[name])} is not a count"
    for name in AMOUNT_FIELDS:
        value = row.get(name)
        if value is not None and not (is_score(value) and value >= 0):
            return f"{name} {shown(value)} is not a non-negative number"
    for name in OPTIONAL_TEXT_FIELDS:
        if row.get(name) is not None and not isinstance(row[name], str):
            return f"{name} {shown(row[name])} is not text"
    for name in FLAG_FIELDS:
        if row.get(name) is not None and not isinstance(row[name], bool):
            return f"{name} {shown(row[name])} is not true or false"
    for name, value in row.items():
        # Timings (encode_s, cluster_s, levels_s, ...): the export sums them into MTEB's evaluation_time.
        if name.endswith("_s") and value is not None and not (is_score(value) and value >= 0):
            return f"{name} {shown(value)} is not a number of seconds"
    return _extra_problem(row, shown, whole)


def _extra_problem(row: dict, shown, whole) -> str | None:
    """What is wrong with a row's per-level scores or DBCV (tecb_eval.grid.extra), or None. Absent
    is fine (not measured), and so is a null DBCV with its reason."""
    for name, scale in [(n, n) for n in LABEL_FREE_SCORES] + list(STABILITY_SCORES.items()):
        if row.get(name) is not None and not in_range(scale, row[name]):
            low, high = SCORE_RANGES[scale]
            return f"{name} {shown(row[name])} is not a number from {low:g} to {high:g}"
    levels = row.get("levels")
    if levels is not None:
        if not isinstance(levels, list) or not all(
                isinstance(lv, dict) and isinstance(lv.get("level"), int) and not isinstance(lv.get("level"), bool)
                and lv["level"] >= 0 and in_range("v_measure", lv.get("v_measure")) and in_range("ami", lv.get("ami"))
                and all(whole(lv[n]) and lv[n] >= 0 for n in ("n_samples", "n_labels") if n in lv)
                for lv in levels):
            return (f"levels {shown(levels)} is not a list of per-level scores (a level from 0, a v_measure "
                    "from 0 to 1, an ami from -1 to 1)")
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
    first forever); released when the last one closes or the process ends.

    A file the lock created (there was none) and nothing was written to is removed on release: a
    run stopped before its first cell (a bad option, Ctrl-C while encoding, a lost cluster) leaves
    no empty store behind. It is removed while still locked, so a run that was waiting finds its
    lock on a removed file and opens the path again."""

    _held: dict[tuple[int, int], list] = {}  # (st_dev, st_ino) -> [fd, users, path, created]
    _guard = threading.Lock()

    @classmethod
    def acquire(cls, path: Path) -> tuple[int, tuple[int, int], bool]:
        for _ in range(_REOPEN_TRIES):
            fd, created = _open_store(path, os.O_RDWR)
            if fd is None:
                continue  # removed between two opens (see the class docstring): open it again
            identity = (os.fstat(fd).st_dev, os.fstat(fd).st_ino)
            with cls._guard:
                if identity in cls._held:
                    os.close(fd)
                    cls._held[identity][1] += 1
                    return cls._held[identity][0], identity, False
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
            if not _same_file(path, fd):
                os.close(fd)
                continue
            with cls._guard:
                cls._held[identity] = [fd, 1, path, created]
            return fd, identity, created
        raise _vanishing(path)

    @classmethod
    def release(cls, identity: tuple[int, int]) -> None:
        with cls._guard:
            entry = cls._held.get(identity)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] == 0:
                del cls._held[identity]
                fd, _, path, created = entry
                try:
                    if created and os.fstat(fd).st_size == 0 and _same_file(path, fd):
                        os.unlink(path)
                except OSError:
                    pass  # left as an empty store, which any later run reads as one
                os.close(fd)  # closing the last descriptor releases the flock


def _cut_back(fd: int, size: int) -> None:
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    except OSError:
        pass  # the torn rest is an unterminated line, which the next append cuts


# How often a store that vanishes between two opens is opened again before the run gives up: a
# removal by a finishing run happens once; a path that never stays put (a link that names nothing,
# something deleting it in a loop) must end in a message, not spin.
_REOPEN_TRIES = 50


def _vanishing(path: Path) -> UserError:
    return UserError(f"{path}: the results store vanished each time it was opened ({_REOPEN_TRIES} tries; is "
                     "something deleting it?); choose another --results file")


def _open_store(path: Path, mode: int) -> tuple[int | None, bool]:
    """``(fd, created)`` for the store at ``path``, opened for appending; ``(None, False)`` when the
    file vanished between two tries (the caller tries again, a bounded number of times). A symbolic
    link that names no file is one line: O_EXCL never follows it and the plain open finds nothing."""
    flags = mode | os.O_APPEND | os.O_CLOEXEC
    try:
        return os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o666), True
    except FileExistsError:
        try:
            return os.open(path, flags), False
        except FileNotFoundError:
            if path.is_symlink():
                raise UserError(f"{path}: a symbolic link to {os.readlink(path)}, which does not exist; "
                                "remove the link or choose another --results file") from None
            return None, False
        except OSError as exc:
            raise _unwritable(path, exc) from None
    except OSError as exc:
        raise _unwritable(path, exc) from None


def _same_file(path: Path, fd: int) -> bool:
    try:
        found, held = os.stat(path), os.fstat(fd)
    except OSError:
        return False
    return (found.st_dev, found.st_ino) == (held.st_dev, held.st_ino)


def _write_all(fd: int, data: bytes) -> None:
    """Every byte of ``data``, or an OSError: ``os.write`` may write part of it (a file system that
    fills up mid-row writes what fits and fails only on the next call)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[written:]


def _unwritable(path: Path, exc: OSError) -> UserError:
    if path.is_dir():
        return UserError(f"{path}: is a folder, not a results file; name a .jsonl file (e.g. {path / 'results.jsonl'})")
    return UserError(f"{path}: cannot write to the results store ({exc.strerror}); choose another --results file "
                     "or make it writable")


_opened: list[Path] = []


def check_results(path: str | Path, *, inputs=(), option: str = "--results") -> None:
    """Can ``path`` hold a results store? Checked before any work (a run finds out before its first
    encode, not when it writes its first row or reads the store back at the end): not a folder, a
    device or a pipe, a link to nothing, an input of the run (a dataset folder) or a file inside a
    dataset folder, nor in a place where a file cannot be created."""
    import stat
    import tempfile

    from tecb_data.outputs import check_output_file

    path = Path(path)
    if path.is_symlink() and not path.exists():
        raise UserError(f"{option} {path}: a symbolic link to {os.readlink(path)}, which does not exist; remove the "
                        f"link or choose another {option} file")
    if path.is_dir():
        raise _unwritable(path, IsADirectoryError())
    target = check_output_file(path, option=option, inputs=inputs)
    if target.exists():
        if not stat.S_ISREG(target.stat().st_mode):
            raise UserError(f"{option} {path}: not a regular file (a device, a pipe or a socket), which cannot hold "
                            "a results store; name a .jsonl file")
        if not os.access(target, os.R_OK | os.W_OK):
            raise _unwritable(path, PermissionError(errno.EACCES, os.strerror(errno.EACCES)))
        return
    existing = next(p for p in [target.parent, *target.parent.parents] if p.exists())
    if not existing.is_dir():
        raise UserError(f"{option} {path}: {existing} is a file, not a folder; choose another {option} file")
    try:
        # Creating a file is the only test that agrees with the file system (ACLs, read-only
        # mounts); an unnamed temporary file leaves no trace.
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        raise _unwritable(path, exc) from None


def stores_kept(paths=None) -> list[Path]:
    """The results stores this process opened for writing (or ``paths``) that are still there: what
    a message after Ctrl-C may name (a store created and left empty is removed when it closes)."""
    candidates = _opened if paths is None else [Path(p) for p in paths if p is not None]
    return [p for p in dict.fromkeys(candidates) if p.is_file() and p.stat().st_size > 0]


def opened_so_far() -> int:
    """How many stores this process has opened: a command that starts now names only the later ones."""
    return len(_opened)


def interrupted_state(since: int = 0) -> str:
    """The sentence after Ctrl-C of a command that writes results stores: where the finished cells
    are, or that none had finished (never a store that was removed, nor one that an earlier command
    in the same process opened: ``since`` is :func:`opened_so_far` when the command started)."""
    kept = stores_kept(_opened[since:])
    if kept:
        return (f"finished cells are in the results store {', '.join(map(str, kept))}; rerun the same command "
                "to resume")
    return "no cell had finished, so no results were kept; rerun the same command"


def _note_differing(path: Path, differing: list[tuple[int, int]]) -> None:
    """A note naming the cells a store holds twice with different scores, by their lines."""
    if differing:
        listed = ", ".join(f"lines {a} and {b}" for a, b in differing[:3])
        more = f" and {len(differing) - 3} more" if len(differing) > 3 else ""
        print(f"note: {path}: {len(differing)} cell(s) appear twice with different scores ({listed}{more}); the "
              "later line of each is used (two stores joined into one?): keep one line per cell", file=sys.stderr)


class ResultsStore:
    """The rows of a results file (``path=None``: in memory only). ``lock=True``: hold the store
    exclusively (see the module docstring) until :meth:`close`, the end of a ``with`` block, or
    the end of the process."""

    def __init__(self, path: Path | None, *, lock: bool = False):
        self.path = None if path is None else Path(path)
        self.rows: list[dict] = []
        self.skipped: list[tuple[int, str]] = []  # (line number, what is wrong) of rows read but not kept
        self.differing: list[tuple[int, int]] = []  # (earlier line, later line) of one cell with other scores
        self._lines: dict[tuple, int] = {}  # a cell's key -> the line it was last read from
        self._keys: dict[tuple, int] = {}
        self._plain: set[str] = set()  # names checked to be plain (tecb_data.outputs.name_problem)
        self._tail: int | None = None  # where a torn last line starts (cut before the next append)
        self._needs_newline = False  # the last row lacks its newline (appends start a fresh line)
        self._size = 0  # the file's size when read: a repair is made only to the file as it was read
        self._lock = None
        self._fd: int | None = None  # the locked descriptor, which appends write through
        self._new_file = False  # created by this store: its folder is synced after the first row
        if self.path is not None and self.path.is_dir():
            raise _unwritable(self.path, IsADirectoryError())
        if lock and self.path is not None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise _unwritable(self.path, exc) from None
            self._fd, identity, self._new_file = _FileLock.acquire(self.path)
            _opened.append(self.path)
            self._lock = identity
            self._finalizer = weakref.finalize(self, _FileLock.release, identity)
        if self.path is not None and self.path.exists():
            self._read()

    def close(self) -> None:
        """Release the lock (if any); the rows stay readable."""
        if self._lock is not None:
            self._finalizer()
            self._lock = None
            self._fd = None

    def __enter__(self) -> "ResultsStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _read(self) -> None:
        try:
            data = inputs.read_bytes(self.path, what=str(self.path), limit=None)
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
                self._check_names(number, found[0])
                self._keep(number, *found)
            offset += len(line) + 1
        if last.strip():
            found = _row_key(last)
            if found is not None:
                self._check_names(len(lines), found[0])
                self._keep(len(lines), *found)
                self._needs_newline = True
            elif _is_torn_write(last, after_own_rows=bool(self.rows)):
                print(f"note: {self.path}:{len(lines)}: an incomplete last line (a run killed while writing it); "
                      "the next run writes that cell again", file=sys.stderr)
                self._tail = offset
            else:
                raise self._foreign(len(lines))
        _note_differing(self.path, self.differing)
        if self.skipped:
            listed = "; ".join(f"line {number}: {problem}" for number, problem in self.skipped[:3])
            more = f"; and {len(self.skipped) - 3} more" if len(self.skipped) > 3 else ""
            print(f"warning: {self.path}: skipped {len(self.skipped)} row(s) unlike any the grid writes (an edited "
                  f"line?) ({listed}{more}); their cells count as not run: fix or delete those lines",
                  file=sys.stderr)

    def _keep(self, number: int, row: dict, key: tuple | None) -> None:
        if key is None:
            self.skipped.append((number, row_problem(row)))
        else:
            row = with_defaults(row)
            earlier = self._lines.get(key)
            if earlier is not None and self.rows[self._keys[key]].get("v_measure") != row.get("v_measure"):
                self.differing.append((earlier, number))
            self._lines[key] = number
            self._remember(row, key)

    def _check_names(self, number: int, row: dict) -> None:
        """A row whose dataset names are no plain names is refused, not skipped: an export names
        files by them, and a store may come from anyone (a row ``mteb_name: "../../x"`` would
        choose where it writes)."""
        from tecb_data.outputs import name_problem
        from tecb_eval.files import one_line

        for name in NAME_FIELDS:
            if isinstance(row.get(name), str) and row[name] not in self._plain:  # a store repeats them
                problem = name_problem(row[name])
                if problem is not None:
                    shown = one_line(json.dumps(row[name], ensure_ascii=False))
                    shown = shown if len(shown) <= 60 else shown[:57] + "..."
                    raise UserError(f"{self.path}:{number}: {name} {shown} {problem}, but files are named by it, so "
                                    "it must be a plain name; fix or delete that line (a store from elsewhere: ask "
                                    "whoever sent it)")
                self._plain.add(row[name])

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
            self._write(line)
            self._needs_newline = False
        self._remember(row, key)

    def _write(self, line: bytes) -> None:
        """Append ``line`` whole and fsynced, or leave the store as it was and say so in one line."""
        fd, own = self._fd, self._fd is None
        if own:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise _unwritable(self.path, exc) from None
            fd = None
            for _ in range(_REOPEN_TRIES):
                fd, self._new_file = _open_store(self.path, os.O_WRONLY)
                if fd is not None:
                    break
            else:
                raise _vanishing(self.path)
        start = None
        try:
            start = os.fstat(fd).st_size
            if (self._tail is not None or self._needs_newline) and start != self._size:
                raise UserError(f"{self.path}: changed while this run was using it (another run writing without "
                                "the lock?); nothing was repaired: rerun to read it again")
            if self._tail is not None:
                # Cut the torn line, so this row does not continue it.
                os.ftruncate(fd, self._tail)
                self._tail = None
                start = os.fstat(fd).st_size
            try:
                _write_all(fd, line)
            except BaseException:
                # A row is in the store whole or not at all: cut the part that got written (a Ctrl-C
                # that lands just after the last byte leaves a whole row, which stays).
                if os.fstat(fd).st_size != start + len(line):
                    _cut_back(fd, start)
                raise
            try:
                os.fsync(fd)
            except OSError:
                _cut_back(fd, start)  # the disk did not take it: the row may not survive a crash
                raise
            # Ctrl-C during the fsync raises from here with the row kept: it was written whole, and
            # a finished cell is what an interrupted run promises to keep.
            if self._new_file:
                sync_folder(self.path.parent)
                self._new_file = False
        except OSError as exc:
            if own and self._new_file and start == 0:
                self.path.unlink(missing_ok=True)  # this append created it: no empty store is left
            raise UserError(f"{self.path}: writing a results line failed ({exc.strerror or exc}); the store is as "
                            "it was before that cell, every finished cell is kept: free space, then rerun the same "
                            "command to resume") from None
        finally:
            if own:
                os.close(fd)

    def frame(self) -> pd.DataFrame:
        return rows_frame(self.rows)


def rows_frame(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    order = ["model", "dataset", "reduction", "algorithm", "split", "protocol", "seed"]
    return frame.sort_values([c for c in order if c in frame.columns], kind="stable").reset_index(drop=True)


def no_results_file(path: Path) -> UserError:
    """The one line for a results path that is not a file: a folder is named as one, as `run` does;
    a device, a FIFO or a socket as what it is; a link that cannot be followed by why."""
    if path.is_dir():
        return UserError(f"{path}: is a folder, not a results file; name a .jsonl file (e.g. {path / 'results.jsonl'})")
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return UserError(f"{path}: no such results file; run `tecb-eval run ... --results {path}` first")
    except OSError as exc:
        return UserError(f"{path}: cannot read it ({exc.strerror}); name the results file itself")
    return UserError(f"{path}: is {inputs.kind(mode)}, not a results file; name a .jsonl file")


def read_results(path: Path) -> pd.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise no_results_file(path)
    frame = ResultsStore(path).frame()
    if frame.empty:
        raise UserError(f"{path}: holds no results yet")
    return frame
