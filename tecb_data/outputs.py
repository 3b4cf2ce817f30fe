"""Where a command may write and what it may remove: one guard for outputs and destructive options.

- A command's output folder carries a marker file naming the command that wrote it. An option
  that replaces or removes a folder (``--overwrite``, the clean-up of a ``.partial`` folder) does so
  only when the marker names the same command: a folder we did not write is never removed.
- An output that is, contains or lies inside one of the command's inputs is refused: writing or
  replacing it would damage what the command reads (a dataset folder, a model folder).
- Folders and files named by the user are checked before the long work starts, so a read-only or
  file-typed path is one line, not a traceback an hour later.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterable

from tecb_data.errors import UserError

MARKER = ".tecb-output.json"


def refuse_overlap(output: str | Path, inputs: Iterable[str | Path], *, option: str = "--out") -> None:
    """Refuse an ``output`` that is, contains or lies inside one of ``inputs`` (compared resolved,
    so symbolic links and ``..`` do not hide an overlap)."""
    target = Path(output).expanduser().resolve()
    for item in inputs:
        source = Path(item).expanduser().resolve()
        if target == source or source.is_relative_to(target):
            raise UserError(f"{option} {output}: holds the input {item}, which writing there would replace or delete; "
                            "choose an output folder outside the inputs")
        if target.is_relative_to(source):
            raise UserError(f"{option} {output}: lies inside the input {item}, which writing there would change; "
                            "choose an output folder outside the inputs")


def written_by(folder: str | Path) -> str | None:
    """The command named by ``folder``'s marker, or None (no marker, unreadable, not ours)."""
    try:
        marker = json.loads((Path(folder) / MARKER).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return marker.get("written_by") if isinstance(marker, dict) else None


def mark(folder: str | Path, command: str) -> None:
    """Mark ``folder`` as written by ``command`` (what lets a later ``--overwrite`` remove it)."""
    (Path(folder) / MARKER).write_text(json.dumps({"written_by": command}) + "\n", encoding="utf-8")


def _is_empty_folder(folder: Path) -> bool:
    return folder.is_dir() and not any(folder.iterdir())


def check_replaceable(folder: str | Path, command: str, *, overwrite: bool, option: str = "--out") -> None:
    """May ``command`` put its output at ``folder``? Yes if nothing is there, an empty folder, or
    (with ``overwrite``) a folder an earlier run of ``command`` wrote. Otherwise one line saying why."""
    folder = Path(folder)
    if not folder.exists() and not folder.is_symlink():
        return
    if not folder.is_dir():
        raise UserError(f"{option} {folder}: is a file, not a folder; choose a folder path")
    if _is_empty_folder(folder):
        return
    if written_by(folder) != command:
        raise UserError(f"{option} {folder}: already exists and was not written by `{command}` (no {MARKER}); "
                        "it is never replaced: choose another output folder, or move it away yourself")
    if not overwrite:
        raise UserError(f"{option} {folder}: already exists and is not empty (an earlier `{command}` output); "
                        "choose another output folder or pass --overwrite to replace it")


def claim(folder: str | Path, command: str) -> int:
    """Hold ``folder`` (marked by ``command``) while a run writes it: an exclusive flock on its
    marker, released when the returned descriptor is closed or the process ends. Another run's
    :func:`remove_own` then refuses to remove the folder instead of deleting work in progress."""
    fd = os.open(Path(folder) / MARKER, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise UserError(f"{folder}: another `{command}` is writing it now; wait for it to finish or choose another "
                        "output folder") from None
    return fd


def remove_own(folder: str | Path, command: str, *, what: str = "folder") -> None:
    """Remove ``folder`` if an earlier run of ``command`` wrote it (or it is empty) and no running
    one holds it (:func:`claim`); refuse otherwise."""
    folder = Path(folder)
    if not folder.exists() and not folder.is_symlink():
        return
    if folder.is_dir() and not folder.is_symlink() and _is_empty_folder(folder):
        folder.rmdir()
        return
    if folder.is_dir() and not folder.is_symlink() and written_by(folder) == command:
        fd = claim(folder, command)  # an interrupted run's, not a running one's
        try:
            shutil.rmtree(folder)
        finally:
            os.close(fd)
        return
    raise UserError(f"{folder}: the {what} `{command}` would use is in the way and was not written by it "
                    f"(no {MARKER}); move it away or choose another output folder")


def replace_with(work: str | Path, target: str | Path, command: str, *, option: str = "--out") -> None:
    """Publish the finished folder ``work`` at ``target``: a folder that is there is moved aside and
    removed only once ``work`` is in place, and only if it is empty or ``command``'s own; if someone
    put another folder there meanwhile, nothing is removed and ``work`` stays where it is."""
    work, target = Path(work), Path(target)
    if target.exists() or target.is_symlink():
        if not (target.is_dir() and not target.is_symlink()
                and (_is_empty_folder(target) or written_by(target) == command)):
            raise UserError(f"{option} {target}: appeared during the run and was not written by `{command}`; "
                            f"the finished output is in {work}")
        aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.replaced-", dir=target.parent))
        os.replace(target, aside / target.name)
        try:
            os.replace(work, target)
        except BaseException:
            os.replace(aside / target.name, target)
            shutil.rmtree(aside, ignore_errors=True)
            raise
        shutil.rmtree(aside, ignore_errors=True)
    else:
        os.replace(work, target)


def writable_folder(folder: str | Path, *, option: str) -> Path:
    """Create ``folder`` (and its parents) if needed and check that files can be written in it."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{option} {folder}: is a file, not a folder; choose a folder path")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # Creating a file is the only test that agrees with the file system (ACLs, read-only
        # mounts, root squash); os.access does not.
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise UserError(f"{option} {folder}: cannot write there ({exc.strerror}); choose a writable folder") from None
    return folder

