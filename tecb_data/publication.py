"""Publishing several finished folders together: all of them or none, whatever interrupts the build.

The views of one build (S2S and P2P, or Reddit's three folders) are each complete in a temporary
sibling before this step starts. The step:

1. writes a journal, ``OUT/.tecb-publish-<pid>.json`` (written whole, fsynced, renamed into place),
   naming for every folder its new copy, its place and where the old one is moved aside;
2. with SIGINT and SIGTERM deferred (not ignored: they take effect when the step is done), moves
   each old folder aside and each new one into place, then marks the journal ``committed``;
3. removes the old folders, then the journal, then lets a deferred signal take effect.

A process killed outright (SIGKILL, a power cut) during 1-3 leaves its journal. The next build into
OUT, and ``verify`` / ``load`` of a folder in OUT, finish a committed journal (remove the old
folders) or roll an uncommitted one back (old folders back in place, new ones removed), once the
process that wrote it is gone. Renames within one folder are atomic, so every step is undoable.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import threading
from pathlib import Path

from tecb_data import inputs
from tecb_data.errors import UserError

log = logging.getLogger(__name__)
JOURNAL_PREFIX = ".tecb-publish-"
_DEFERRED = (signal.SIGINT, signal.SIGTERM)

# Folders this process has published (for a true "interrupted" message: see published()).
_published: list[Path] = []


def published() -> list[Path]:
    """The folders this process has published so far, in order."""
    return list(_published)


_remote_in_flight: list[str] = []  # "repo@branch" of a Hub commit sent and not yet answered


@contextlib.contextmanager
def remote_commit(where: str):
    """Mark a Hub commit as in flight, so that an interruption says what it may have done."""
    _remote_in_flight.append(where)
    try:
        yield
    finally:
        _remote_in_flight.remove(where)


def interrupted_state() -> str:
    """What an interrupted `tecb-data` command leaves behind, in words."""
    if _remote_in_flight:
        return (f"the commit to {_remote_in_flight[-1]} was under way: the Hub applies a commit whole or not at "
                "all; run the same push again (it makes no second commit if this one went through)")
    if not _published:
        return "nothing was published (every dataset folder is as it was before this command)"
    return f"these datasets had been published, each complete: {', '.join(str(p) for p in _published)}"


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sync_folder(folder: Path) -> None:
    """Make the names in ``folder`` durable (a new or renamed file's name is, once its folder is
    synced); a file system that cannot sync a folder is left as it is."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_journal(path: Path, entries: list[dict], state: str) -> None:
    partial = path.with_name(path.name + ".partial")
    try:
        with open(partial, "w", encoding="utf-8") as fh:
            json.dump({"state": state, "entries": entries}, fh, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    sync_folder(path.parent)


@contextlib.contextmanager
def _signals_deferred():
    """Hold SIGINT and SIGTERM until the block is done; yields the list of signals received.

    Python handlers run in the main thread only, so elsewhere nothing can interrupt the block
    with an exception; SIGKILL cannot be deferred at all, which is what the journal is for."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous = {}
    for signum in _DEFERRED:
        previous[signum] = signal.signal(signum, lambda number, frame: received.append(number))
    try:
        yield received
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _redeliver(received: list[int]) -> None:
    for signum in dict.fromkeys(received):  # once each, in the order they came
        signal.raise_signal(signum)


def publish(out: Path, moves: list[tuple[Path, Path]]) -> None:
    """Move each finished ``(new, target)`` folder into place, all together (see the module doc)."""
    out = Path(out)
    token = secrets.token_hex(4)
    journal = out / f"{JOURNAL_PREFIX}{os.getpid()}-{token}.json"
    entries = [
        {
            "new": new.name,
            "target": target.name,
            "aside": f"{new.name}-old",
            "had_old": target.is_dir(),
        }
        for new, target in moves
    ]
    received: list[int] = []
    try:
        with _signals_deferred() as received:
            _write_journal(journal, entries, "prepared")
            try:
                for entry in entries:
                    if entry["had_old"]:
                        os.replace(out / entry["target"], out / entry["aside"])
                    os.replace(out / entry["new"], out / entry["target"])
                sync_folder(out)
                _write_journal(journal, entries, "committed")
            except BaseException:
                _roll_back(out, entries)
                journal.unlink(missing_ok=True)
                raise
            _published.extend(out / entry["target"] for entry in entries)
        _finish(out, entries)
        journal.unlink(missing_ok=True)
    finally:
        _redeliver(received)


def _roll_back(out: Path, entries: list[dict]) -> None:
    """Undo whichever renames were done: old folders back in place, new ones removed."""
    for entry in reversed(entries):
        new, target, aside = out / entry["new"], out / entry["target"], out / entry["aside"]
        if not new.exists() and target.is_dir() and (aside.exists() or not entry["had_old"]):
            os.replace(target, new)  # the new folder had been moved into place
        if entry["had_old"] and aside.is_dir() and not target.exists():
            os.replace(aside, target)
        shutil.rmtree(new, ignore_errors=True)
    sync_folder(out)


def _finish(out: Path, entries: list[dict]) -> None:
    for entry in entries:
        shutil.rmtree(out / entry["aside"], ignore_errors=True)


def recover(out: Path) -> list[str]:
    """Complete or roll back the publications of processes that died during one; returns what was done."""
    out = Path(out)
    done = []
    if not out.is_dir():
        return done
    for path in sorted(out.glob(JOURNAL_PREFIX + "*")):
        pid_text = path.name[len(JOURNAL_PREFIX):].split("-", 1)[0]
        if not pid_text.isdigit() or _pid_alive(int(pid_text)):
            continue
        if path.name.endswith(".partial"):  # died while writing the journal: nothing was moved yet
            path.unlink(missing_ok=True)
            continue
        try:
            journal = json.loads(inputs.read_text(path, what=str(path)))
            state, entries = journal["state"], journal["entries"]
        except (OSError, ValueError, KeyError, TypeError, UserError):
            continue  # not ours to judge; left for a person
        if state == "committed":
            _finish(out, entries)
            done.append(f"finished the publication of {', '.join(e['target'] for e in entries)}")
        else:
            _roll_back(out, entries)
            done.append(f"rolled back an interrupted publication of {', '.join(e['target'] for e in entries)}")
        path.unlink(missing_ok=True)
        log.warning("warning: %s: %s (its build was killed while publishing)", out, done[-1])
    return done


def pending(out: Path) -> bool:
    """Whether OUT holds the journal of a publication that has not ended (a live or a dead writer)."""
    return Path(out).is_dir() and any(p.suffix == ".json" for p in Path(out).glob(JOURNAL_PREFIX + "*"))
