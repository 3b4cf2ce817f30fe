"""Where a command may write and what it may remove: one guard for outputs and destructive options.

- A command's output folder carries a marker file naming the command that wrote it. An option
  that replaces or removes a folder (``--overwrite``, the clean-up of a ``.partial`` folder) does so
  only when the marker names the same command: a folder we did not write is never removed.
- An output that is, contains or lies inside one of the command's inputs is refused: writing or
  replacing it would damage what the command reads (a dataset folder, a model folder).
- Folders and files named by the user are checked before the long work starts, so a read-only or
  file-typed path is one line, not a traceback an hour later.
- A command's output folder is written whole or not at all (:func:`staged_output`): into
  ``OUT.partial``, then swapped in; its marker lists the files it holds, so a folder a user has
  since added files to is not replaced either.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import signal
import tempfile
import threading
import time
import unicodedata
from pathlib import Path
from typing import Iterable, Iterator

from tecb_data import inputs as readers
from tecb_data.errors import UserError
from tecb_data.publication import sync_folder

MARKER = ".tecb-output.json"

# A name that becomes one file or folder name (a dataset's, an MTEB task's) fits in one with room
# for what is added to it (".v2.json", "table3-...png"): file systems allow 255 bytes.
NAME_BYTES = 200
# Bidirectional controls: they make a name read differently from what it is (U+202E turns
# "exe.txt" around), in a listing as in a message.
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def name_problem(value) -> str | None:
    """Why ``value`` cannot be a plain name, one file or folder name that a path is built from, or
    None: text, not empty, no path separator (``/``, ``\\``), no leading ``.`` (``..``, a hidden
    file), no control, line-separator or bidirectional character, at most :data:`NAME_BYTES` bytes."""
    if not isinstance(value, str):
        return "is not text"
    if not value.strip():
        return "is empty"
    for separator in ("/", "\\"):
        if separator in value:
            return f"holds the path separator {separator!r}"
    if value.startswith("."):
        return "starts with '.'"
    bad = next((c for c in value if unicodedata.category(c) == "Cc" or c in "\u2028\u2029" or c in BIDI_CONTROLS),
               None)
    if bad is not None:
        return f"holds the control character U+{ord(bad):04X}"
    if len(value.encode("utf-8")) > NAME_BYTES:
        return f"is longer than {NAME_BYTES} bytes"
    return None


def inside(folder: str | Path, *parts: str, what: str = "a stored name") -> Path:
    """``folder`` joined with ``parts``, refused in one line where the joined path (resolved: ``..``
    and symbolic links followed) lies outside ``folder``. Every path built from a value a command
    read (a dataset's manifest, a results store's row) goes through it: such a value is data
    someone may have sent, and never chooses where a command writes. ``what``: where the parts
    come from, in words."""
    base = Path(folder)
    joined = base.joinpath(*parts)
    try:
        resolved_base, resolved = base.resolve(), joined.resolve()
    except (RuntimeError, OSError) as exc:
        raise UserError(f"{joined}: built from {what}, cannot be resolved ({exc}); check that value") from None
    if resolved == resolved_base or not resolved.is_relative_to(resolved_base):
        shown = "/".join(parts)
        shown = repr(shown) if len(shown) <= 80 else repr(shown[:77]) + "..."
        raise UserError(f"{what} {shown}: the path built from it lies outside {base}, the folder it is written "
                        "into; nothing was written: check that value (a plain name has no '/', '..' or leading '.')")
    return joined


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


def is_dataset_folder(folder: Path) -> bool:
    """Whether ``folder`` is a published dataset: its manifest.json is a tecb manifest (a JSON object
    with the files it lists and their fingerprint), not any file of that name (a web project's)."""
    try:
        manifest = json.loads(readers.read_text(Path(folder) / "manifest.json", what=str(folder)))
    except (OSError, UnicodeDecodeError, ValueError, UserError):
        return False
    return isinstance(manifest, dict) and "files" in manifest and "fingerprint" in manifest


def _inside_dataset(target: Path) -> Path | None:
    """The dataset folder that ``target`` is or lies in, if any: a file written there breaks what
    the manifest says the folder holds."""
    for folder in [target, *target.parents]:
        if is_dataset_folder(folder):
            return folder
    return None


def _marked_around(target: Path, *, itself: bool) -> tuple[Path, str] | None:
    """The nearest folder around ``target`` (``itself``: or ``target``) whose marker names the
    command that wrote it, and that command."""
    for folder in [target, *target.parents] if itself else target.parents:
        command = written_by(folder)
        if command is not None:
            return folder, command
    return None


def refuse_nested(path: str | Path, *, option: str = "--out", command: str | None = None, itself: bool = False,
                  inputs: Iterable[str | Path | None] = ()) -> Path:
    """Refuse in one line, creating nothing, a place a command writes into (an output folder, a
    cache, a checkpoint folder) that lies inside a dataset folder (what its manifest lists would
    change) or inside an output folder another command wrote (its marker: that command replaces
    its folder whole, or refuses to, once it holds files it did not write), or that is or lies
    inside one of the command's ``inputs``. ``command``: this command, whose own earlier output
    may hold it. ``itself``: ``path`` itself counts too (a cache; an output folder's own
    replacement is :func:`check_output`'s to judge). Returns the resolved path."""
    target = output_target(path, option=option)
    owner = _inside_dataset(target) if itself else _inside_dataset(target.parent) if target.parent != target else None
    if owner is not None:
        where = "is a dataset folder" if owner == target else f"lies inside the dataset folder {owner}"
        raise UserError(f"{option} {path}: {where}, whose files its manifest lists, so writing there would break "
                        "it; choose a folder outside every dataset folder")
    marked = _marked_around(target, itself=itself)
    if marked is not None and marked[1] != command:
        folder, other = marked
        where = "is" if folder == target else "lies inside"
        raise UserError(f"{option} {path}: {where} {folder}, the output of `{other}`, which replaces that folder "
                        "whole; choose a folder outside it")
    for item, source in _resolved(inputs):
        if target == source or target.is_relative_to(source):
            where = "is" if target == source else "lies inside"
            raise UserError(f"{option} {path}: {where} the input {item}, which writing there would change; choose "
                            "a folder outside the command's inputs")
    return target


def check_output_file(path: str | Path, *, option: str, inputs: Iterable[str | Path | None] = (),
                      outputs: Iterable[str | Path | None] = (), ours=None) -> Path:
    """May a command write the file the user named with ``option``? Checked before any work, creating
    nothing. Refused in one line: a folder; the same file as one of the command's ``inputs``, or one
    inside an input folder; a file inside one of the folders the command writes (``outputs``) or
    inside a dataset folder; an existing file that ``ours(path)`` (when
    given) does not recognise as this command's own earlier output. Returns the resolved path."""
    shown = path
    try:
        target = Path(path).expanduser().resolve()
    except (RuntimeError, OSError) as exc:
        raise UserError(f"{option} {shown}: a symbolic link that cannot be followed ({exc}); remove the link or "
                        "choose another file") from None
    if target.is_dir():
        raise UserError(f"{option} {shown}: a folder; name the file to write")
    if target.exists() and not target.is_file():
        # A device or a FIFO would take what is written (or block) and be no file afterwards.
        raise UserError(f"{option} {shown}: is {readers.kind(target.stat().st_mode)}, not a regular file this command "
                        "may write; name a file")
    for item, source in _resolved(inputs):
        if target == source:
            raise UserError(f"{option} {shown}: is the input {item}, which writing there would destroy; "
                            "choose another file")
        if target.is_relative_to(source):
            raise UserError(f"{option} {shown}: lies inside the input {item}, which writing there would change; "
                            "choose a file outside the inputs")
    for item, folder in _resolved(outputs):
        if target.is_relative_to(folder):
            raise UserError(f"{option} {shown}: lies inside {item}, which this command writes (and replaces whole); "
                            "choose a file outside it")
    owner = _inside_dataset(target)
    if owner is not None:
        raise UserError(f"{option} {shown}: lies inside the dataset folder {owner}, whose files its manifest lists; "
                        "choose a file outside it")
    marked = _marked_around(target, itself=False)
    # A file that output lists as its own (the demo's results store in its folder) is that output's.
    if marked is not None and target.relative_to(marked[0]).as_posix() not in (_listed_files(marked[0]) or []):
        raise UserError(f"{option} {shown}: lies inside {marked[0]}, the output of `{marked[1]}`, which replaces "
                        "that folder whole; choose a file outside it")
    if ours is not None and (target.exists() or target.is_symlink()) and not ours(target):
        raise UserError(f"{option} {shown}: already exists and was not written by this command; it is never "
                        "replaced: choose another file, or move it away yourself")
    return target


def written_by(folder: str | Path) -> str | None:
    """The command named by ``folder``'s marker, or None (no marker, unreadable, not ours)."""
    try:
        marker = json.loads(readers.read_text(Path(folder) / MARKER, what=str(folder)))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, UserError):
        return None
    return marker.get("written_by") if isinstance(marker, dict) else None


def mark(folder: str | Path, command: str) -> None:
    """Mark ``folder`` as written by ``command`` (what lets a later ``--overwrite`` remove it)."""
    (Path(folder) / MARKER).write_text(json.dumps({"written_by": command}) + "\n", encoding="utf-8")


_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def _reason(exc: OSError) -> str:
    """An OSError in words, a full disk named as one."""
    if exc.errno in _FULL:
        return f"the disk is full: {exc.strerror}"
    return exc.strerror or str(exc)


def _what_to_do(exc: OSError) -> str:
    return "free space there, or choose a folder on another disk" if exc.errno in _FULL else "choose a writable folder"


def write_failed(where: str, exc: OSError, doing: str = "cannot write there") -> UserError:
    """The one line for an OSError while writing ``where`` (an option and its path): what failed, in
    words (a full disk named as one), and what to do."""
    return UserError(f"{where}: {doing} ({_reason(exc)}); {_what_to_do(exc)}")


def _missing_parents(folder: Path) -> list[Path]:
    """``folder`` and those of its parents that do not exist, deepest first."""
    missing = []
    for path in [folder, *folder.parents]:
        if path.exists() or path.is_symlink():
            break
        missing.append(path)
    return missing


def _remove_unused(made: list[Path]) -> None:
    """Remove the folders ``made`` (deepest first, as :func:`_missing_parents` lists them) and the
    folders created inside the deepest, as long as they hold no file: one that holds anything now
    (another run's, or this run's work) stays, and so do the folders above it."""
    if not made:
        return
    for root, folders, files in os.walk(made[0], topdown=False):
        if not files:
            with contextlib.suppress(OSError):
                os.rmdir(root)
    for path in made:
        try:
            path.rmdir()
        except FileNotFoundError:
            continue  # removed above
        except OSError:
            break


@contextlib.contextmanager
def removed_if_unused(folder: str | Path) -> Iterator[Path]:
    """Around a command that may create ``folder`` (a cache) as it goes: if the command fails, the
    folders of ``folder``'s path it created are removed again unless they hold a file, so a run
    that failed before any work (an unreachable scheduler) leaves no empty folder behind."""
    folder = Path(folder)
    made = _missing_parents(folder)
    try:
        yield folder
    except BaseException:
        _remove_unused(made)
        raise


@contextlib.contextmanager
def created_folder(folder: str | Path) -> Iterator[Path]:
    """Create ``folder`` (and its parents) for a command's output; if the body fails or is
    interrupted, the folders created here that are still empty are removed again: a command that
    wrote nothing (a full disk, Ctrl-C) leaves no empty ``--out`` behind."""
    folder = Path(folder)
    made = _missing_parents(folder)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        yield folder
    except BaseException:
        for path in made:  # deepest first; one that holds anything now (another run's) stays
            try:
                path.rmdir()
            except OSError:
                break
        raise


def _is_empty_folder(folder: Path) -> bool:
    """Empty, or holding only an empty marker (what a run that found the disk full while marking its
    folder left before this was cleaned up): nothing of anyone's is lost by replacing it."""
    if not folder.is_dir():
        return False
    entries = list(folder.iterdir())
    return not entries or (len(entries) == 1 and entries[0].name == MARKER and not entries[0].is_symlink()
                           and entries[0].is_file() and entries[0].stat().st_size == 0)


def check_replaceable(folder: str | Path, command: str, *, overwrite: bool, option: str = "--out",
                      listed: bool = False) -> None:
    """May ``command`` put its output at ``folder``? Yes if nothing is there, an empty folder, or
    (with ``overwrite``) a folder an earlier run of ``command`` wrote, holding nothing but the files
    its marker lists (see :func:`mark_files`). ``listed``: the command records its files, so a folder
    whose marker lists none is not known to hold only them and is refused too. Otherwise one line."""
    folder = Path(folder)
    if not folder.exists() and not folder.is_symlink():
        return
    if not folder.is_dir():
        raise UserError(f"{option} {folder}: is a file, not a folder; choose a folder path")
    if _is_empty_folder(folder):
        return
    if written_by(folder) != command:
        raise UserError(f"{option} {folder}: already exists and was not written by `{command}` ({_whose(folder)}); "
                        "it is never replaced: choose another output folder, or move it away yourself")
    if not overwrite:
        raise UserError(f"{option} {folder}: already exists and is not empty (an earlier `{command}` output); "
                        "choose another output folder or pass --overwrite to replace it")
    if listed and _listed_files(folder) is None:
        raise UserError(f"{option} {folder}: an earlier `{command}` output whose marker does not list the files it "
                        "wrote, so --overwrite cannot tell them from yours; move it away yourself")
    added = _added_files(folder, set())
    if added:
        shown = ", ".join(added[:3]) + (f" and {len(added) - 3} more" if len(added) > 3 else "")
        raise UserError(f"{option} {folder}: an earlier `{command}` output, but it now also holds files that command "
                        f"did not write ({shown}); --overwrite never deletes them: move them away or choose another "
                        "output folder")


def _whose(folder: Path) -> str:
    """Why ``folder`` is not a command's own, in words: another command's marker, or none."""
    other = written_by(folder)
    return f"its {MARKER} says `{other}` wrote it" if other is not None else f"no {MARKER}"


def mark_files(folder: str | Path, command: str) -> None:
    """Mark ``folder`` as written by ``command`` and list every file it holds now: what a later
    ``--overwrite`` may remove, and nothing else."""
    folder = Path(folder)
    text = json.dumps({"written_by": command, "files": _files_in(folder)}) + "\n"
    temporary = folder / (MARKER + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, folder / MARKER)


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
        shutil.rmtree(folder)
        return
    if folder.is_dir() and not folder.is_symlink() and written_by(folder) == command:
        fd = claim(folder, command)  # an interrupted run's, not a running one's
        try:
            shutil.rmtree(folder)
        finally:
            os.close(fd)
        return
    raise UserError(f"{folder}: the {what} `{command}` would use is in the way and was not written by it "
                    f"({_whose(folder) if folder.is_dir() else 'a file'}); move it away or choose another output folder")


def _move_in(work: Path, target: Path) -> None:
    """Put ``work`` where ``target`` is: the old folder is moved aside first and put back if the
    rename fails, then removed."""
    aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.replaced-", dir=target.parent))
    os.replace(target, aside / target.name)
    try:
        os.replace(work, target)
    except BaseException:
        os.replace(aside / target.name, target)
        shutil.rmtree(aside, ignore_errors=True)
        raise
    shutil.rmtree(aside, ignore_errors=True)


def replace_with(work: str | Path, target: str | Path, command: str, *, option: str = "--out") -> None:
    """Publish the finished folder ``work`` at ``target``: a folder that is there is moved aside and
    removed only once ``work`` is in place, and only if it is empty or ``command``'s own; if someone
    put another folder there meanwhile, nothing is removed and ``work`` stays where it is."""
    work, target = Path(work), Path(target)
    if target.exists() or target.is_symlink():
        if not (target.is_dir() and not target.is_symlink()
                and (_is_empty_folder(target) or (written_by(target) == command and not _added_files(target, set())))):
            raise UserError(f"{option} {target}: appeared during the run and was not written by `{command}`; "
                            f"the finished output is in {work}")
        _move_in(work, target)
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



# -- a command's output folder, written whole or not at all --------------------------------------
#
# `check_output` says before the long work whether a command may write its folder; `staged_output`
# writes it into ``OUT.partial`` and swaps it in when complete. What they add to the rules above:
# an output that holds the command's own inputs (a results store, a cache) is refused, since the swap
# would delete them; a symbolic link is followed to the folder it names; and Ctrl-C (even one a
# library swallowed) leaves OUT as it was, or, once the swap has begun, the complete new folder.

_published: list[Path] = []


def published() -> list[Path]:
    """The output folders this process has swapped into place, in order (for an honest message
    after Ctrl-C: whether the new output is there or the old one is untouched)."""
    return list(_published)


def output_target(folder: str | Path, *, option: str = "--out") -> Path:
    """``folder`` with symbolic links followed: the folder that is written. A link loop is one line."""
    try:
        return Path(folder).expanduser().resolve()
    except (RuntimeError, OSError) as exc:  # Python 3.11 raises RuntimeError for a loop, 3.13 OSError
        raise UserError(f"{option} {folder}: a symbolic link that cannot be followed ({exc}); remove the link "
                        "or choose another folder") from None


def _holds_only(folder: Path, kept: set[Path]) -> bool:
    """Whether ``folder`` holds nothing but the files in ``kept`` (in folders of their own)."""
    for root, dirs, files in os.walk(folder):
        if any((Path(root) / name).is_symlink() for name in dirs):
            return False
        for name in files:
            if Path(root) / name not in kept:
                return False
    return True


def _listed_files(folder: Path) -> list[str] | None:
    """The files ``folder``'s marker says its command wrote (relative paths), or None if it does not say."""
    try:
        marker = json.loads(readers.read_text(folder / MARKER, what=str(folder)))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, UserError):
        return None
    files = marker.get("files") if isinstance(marker, dict) else None
    return files if isinstance(files, list) and all(isinstance(f, str) for f in files) else None


def _files_in(folder: Path) -> list[str]:
    found = []
    for root, dirs, files in os.walk(folder):
        links = [d for d in dirs if (Path(root) / d).is_symlink()]  # os.walk lists them as folders, never enters
        found += [(Path(root) / name).relative_to(folder).as_posix() for name in files + links]
    return sorted(f for f in found if f != MARKER)


def _added_files(target: Path, kept: set[Path]) -> list[str]:
    """Files in an output folder that its command did not write (a user's notes put there since)."""
    listed = _listed_files(target)
    if listed is None:
        return []
    allowed = set(listed) | {p.relative_to(target).as_posix() for p in kept}
    return [f for f in _files_in(target) if f not in allowed]


def _replaceable(target: Path, command: str, kept: set[Path]) -> bool:
    if not target.exists() and not target.is_symlink():
        return True
    if not target.is_dir() or target.is_symlink():
        return False
    if written_by(target) == command:
        return not _added_files(target, kept)
    return _is_empty_folder(target) or _holds_only(target, kept)


def _refuse_unreplaceable(target: Path, command: str, *, shown, option: str) -> None:
    if not target.is_dir():
        raise UserError(f"{option} {shown}: is a file, not a folder; choose a folder path")
    if (target / "manifest.json").is_file():
        raise UserError(f"{option} {shown}: is a dataset folder (it has manifest.json), which `{command}` never "
                        "writes into; choose another output folder")
    other = written_by(target)
    added = _added_files(target, set()) if other == command else []
    if added:
        shown_files = ", ".join(added[:3]) + (f" and {len(added) - 3} more" if len(added) > 3 else "")
        raise UserError(f"{option} {shown}: an earlier `{command}` output, but it now also holds files that command "
                        f"did not write ({shown_files}); they are never replaced: move them away or choose another "
                        "output folder")
    if other is not None:
        raise UserError(f"{option} {shown}: holds the output of `{other}`, which `{command}` never replaces; "
                        "choose another output folder")
    raise UserError(f"{option} {shown}: already holds files that `{command}` did not write (no {MARKER}); they are "
                    "never replaced: choose a new or empty folder, or move them away yourself")


def _resolved(paths: Iterable[str | Path | None]) -> Iterator[tuple[str | Path, Path]]:
    """Each given path with its resolved form. None is skipped, and so is a path that cannot be
    resolved (a link loop): it fails where it is read, with its own option named."""
    for item in paths:
        if item is None:
            continue
        try:
            yield item, Path(item).expanduser().resolve()
        except (RuntimeError, OSError):
            continue


def _kept(target: Path, keep: Iterable[str | Path | None]) -> set[Path]:
    found = set()
    for item in keep:
        if item is None:
            continue
        path = Path(item).expanduser().resolve()
        if path.is_relative_to(target) and path != target:
            found.add(path)
    return found


def check_output(folder: str | Path, command: str, *, inputs: Iterable[str | Path | None] = (),
                 option: str = "--out", keep: Iterable[str | Path | None] = ()) -> Path:
    """May ``command`` write its output folder at ``folder``? Checked before the long work, creating
    nothing. Yes when nothing is there, an empty folder, a folder an earlier ``command`` wrote (its
    marker: rerunning a command replaces its own output), or one that holds only the files in
    ``keep`` (which the new output keeps). Refused in one line: a file, a dataset folder, another
    command's or a user's folder, a folder that is, holds or lies inside one of ``inputs`` (files or
    folders the command reads or keeps elsewhere: the swap would delete them), a work folder
    ``OUT.partial`` that is not ours, a place that cannot be written. Returns the folder to write."""
    target = output_target(folder, option=option)
    refuse_overlap(folder, [item for item, _ in _resolved(inputs)], option=option)
    refuse_nested(folder, option=option, command=command)
    if not _replaceable(target, command, _kept(target, keep)):
        _refuse_unreplaceable(target, command, shown=folder, option=option)
    work = target.with_name(target.name + ".partial")
    if (work.exists() or work.is_symlink()) and not (work.is_dir() and not work.is_symlink()
                                                     and (_is_empty_folder(work) or written_by(work) == command)):
        raise UserError(f"{work}: the work folder `{command}` would use is in the way and was not written by it "
                        f"({_whose(work) if work.is_dir() else 'a file'}); move it away or choose another output folder")
    return check_writable(folder, option=option)


def check_writable(folder: str | Path, *, option: str = "--out") -> Path:
    """Can ``folder`` be made where it is named (its nearest existing parent takes a new file)?
    Creating nothing; one line if not. Cheap enough to ask before a command imports its libraries.
    Returns the folder to write."""
    target = output_target(folder, option=option)
    existing = next(p for p in [target.parent, *target.parent.parents] if p.exists())
    try:
        # Creating a file is the only test that agrees with the file system (ACLs, read-only mounts,
        # root squash); os.access does not. An unnamed temporary file leaves no trace.
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        raise UserError(f"{option} {folder}: cannot write there ({exc.strerror}); choose a writable folder") from None
    return target


class _Interrupts:
    """SIGINT while an output is written: raised as KeyboardInterrupt and remembered, so one that a
    library swallowed still stops the command at the next :meth:`check`; while ``holding`` (the
    swap, the clean-up) SIGINT and SIGTERM wait and take effect when the step is done."""

    _SIGNALS = (signal.SIGINT, signal.SIGTERM)
    # A second Ctrl-C this soon after the first lands while the first is still unwinding (before
    # the clean-up could begin): raising it there would skip the clean-up. Later, the first was
    # evidently swallowed, and the second is raised.
    _REPEAT_SECONDS = 0.5

    def __init__(self):
        self.seen = False
        self.holding = False
        self.held: list[int] = []
        self._previous: dict = {}
        self._raised_at: float | None = None

    def _handler(self, signum, frame):
        if self.holding:
            self.held.append(signum)
            return
        if signum == signal.SIGINT:
            self.seen = True
            now = time.monotonic()
            if self._raised_at is None or now - self._raised_at > self._REPEAT_SECONDS:
                self._raised_at = now
                raise KeyboardInterrupt
            return
        self._restore()
        signal.raise_signal(signum)

    def __enter__(self) -> "_Interrupts":
        if threading.current_thread() is threading.main_thread():
            for signum in self._SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handler)
        return self

    def check(self) -> None:
        if self.seen:
            raise KeyboardInterrupt

    def _restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    def __exit__(self, *exc) -> None:
        self._restore()
        for signum in dict.fromkeys(self.held):
            if signum == signal.SIGINT and exc[0] is None:
                raise KeyboardInterrupt
            if signum != signal.SIGINT:
                signal.raise_signal(signum)


class Stage:
    """The folder an output is written into (``work``); call ``check()`` between files, so that a
    Ctrl-C a library swallowed still stops the command. ``resumed``: ``work`` is an interrupted
    run's, kept because it was begun for the same ``resume`` key."""

    def __init__(self, work: Path, target: Path, check, resumed: bool = False):
        self.work, self.target, self.check, self.resumed = work, target, check, resumed


RESUME_KEY = "key.json"  # in a work folder that may be resumed: what it was begun for


def _begun_for(work: Path, command: str, key: dict) -> bool:
    """Is ``work`` an interrupted ``command``'s work folder begun for ``key``?"""
    if not (work.is_dir() and not work.is_symlink() and written_by(work) == command):
        return False
    try:
        return json.loads(readers.read_text(work / RESUME_KEY, what=str(work))) == key
    except (OSError, ValueError, UserError):
        return False


def _swap(work: Path, target: Path, command: str, kept: set[Path], *, shown, option: str) -> None:
    """``work`` into ``target``'s place; the old folder is moved aside and removed once ``work`` is in
    place, and only if it is still replaceable (someone may have put their own folder there)."""
    if not (target.exists() or target.is_symlink()):
        os.replace(work, target)
        return
    if not _replaceable(target, command, kept):
        raise UserError(f"{option} {shown}: changed during the run and is no longer `{command}`'s to replace; "
                        f"nothing there was changed")
    _move_in(work, target)


@contextlib.contextmanager
def staged_output(folder: str | Path, command: str, *, inputs: Iterable[str | Path | None] = (),
                  option: str = "--out", keep: Iterable[str | Path | None] = (), overwrite: bool | None = None,
                  resume: dict | None = None, keep_partial: tuple = ()) -> Iterator[Stage]:
    """Write ``command``'s output folder whole or not at all, the one way every command publishes
    a folder: checked as :func:`check_output` says, written into ``OUT.partial`` (marked, held with
    :func:`claim`; one left by a killed run is removed first), then swapped into place with SIGINT
    and SIGTERM held back. The files in ``keep`` that lie inside OUT (the demo's own results store)
    are hard-linked into the new folder, so they survive the swap. Anything that stops the body (an
    error, Ctrl-C) removes ``OUT.partial`` and leaves OUT as it was; a file-system error is one line
    naming ``option``.

    A command with ``--overwrite`` passes it as ``overwrite``: its earlier output is then replaced
    only with it (:func:`check_replaceable`, the files its marker lists). ``resume`` (a JSON-able
    key: model, data, settings): an interrupted run's ``OUT.partial`` begun for the same key is kept
    and the stage says ``resumed``. ``keep_partial`` (exception types): what stops the body with one
    of them leaves ``OUT.partial`` where it is (finished units to resume from, a diverged run's
    checkpoints to inspect) instead of removing it."""
    if overwrite is None:
        target = check_output(folder, command, inputs=inputs, option=option, keep=keep)
    else:
        refuse_overlap(folder, [item for item, _ in _resolved(inputs)], option=option)
        refuse_nested(folder, option=option, command=command)
        target = output_target(folder, option=option)
        check_replaceable(target, command, overwrite=overwrite, option=option, listed=True)
    kept = _kept(target, keep)
    work = target.with_name(target.name + ".partial")
    # Folders made for OUT that stay empty (a full disk, Ctrl-C before anything was published) go again.
    with contextlib.ExitStack() as parents, _Interrupts() as interrupts:
        resumed = resume is not None and _begun_for(work, command, resume)
        made = False
        try:
            if not resumed:
                parents.enter_context(created_folder(target.parent))
                remove_own(work, command, what="work folder")  # left by a killed run
                work.mkdir()  # the mode mkdir gives under the umask, as the folder's final mode
                made = True
                mark(work, command)
                if resume is not None:
                    (work / RESUME_KEY).write_text(json.dumps(resume, sort_keys=True) + "\n", encoding="utf-8")
        except OSError as exc:
            if made:  # a marker the disk had no room for: no half-made work folder is left in the way
                shutil.rmtree(work, ignore_errors=True)
            raise UserError(f"{option} {folder}: cannot write there ({_reason(exc)}); "
                            f"{_what_to_do(exc)}") from None
        held = claim(work, command)
        try:
            yield Stage(work, target, interrupts.check, resumed)
            interrupts.check()
            if resume is not None:
                (work / RESUME_KEY).unlink()
            for path in sorted(kept):
                copy = work / path.relative_to(target)
                copy.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(path, copy)  # the same file under both names: nothing to lose at any moment
                except OSError:
                    shutil.copy2(path, copy)
            # The marker lists what the folder holds: a later run replaces it only while it holds
            # nothing else (a user's notes put there since are never deleted).
            (work / MARKER).write_text(json.dumps({"written_by": command, "files": _files_in(work)}) + "\n",
                                       encoding="utf-8")
            interrupts.holding = True
            _swap(work, target, command, kept, shown=folder, option=option)
            sync_folder(target.parent)
            _published.append(target)
        except BaseException as exc:
            interrupts.holding = True
            os.close(held)
            if isinstance(exc, keep_partial):
                raise
            shutil.rmtree(work, ignore_errors=True)
            if isinstance(exc, OSError):
                raise UserError(f"{option} {folder}: writing the output failed ({_reason(exc)}); nothing "
                                f"there was changed: {_what_to_do(exc)}") from None
            raise
        os.close(held)
