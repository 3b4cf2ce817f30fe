"""Reading a file the user named: a regular file, and a small one read with a bound.

A device (``/dev/zero``, ``/dev/full``), a FIFO, a socket or a folder named where a file is read
would never end (a device yields bytes for ever), block for ever (a FIFO with no writer) or fail
with a message about something else: each is refused in one line naming it, before a byte is read.
The open never blocks (``O_NONBLOCK``, cleared once the descriptor is known to be a regular file)
and the kind is checked on the opened descriptor, so a file swapped for a FIFO after a check is
caught as well. Every reader of a user's file in both packages goes through :func:`open_regular`,
:func:`read_bytes` or :func:`read_text`; :func:`check_regular` is for a path a library opens itself.
"""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path
from typing import BinaryIO

from tecb_data.errors import UserError

# What a file that should be small may hold: a BibTeX entry, a manifest, a marker, a report of
# removed rows (its examples are capped), a journal. Far above any real one, far below a machine's memory.
SMALL_FILE_BYTES = 64 * 1024 * 1024


# stat's test for each kind of file, with its words for a message.
_KINDS = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def kind(mode: int) -> str:
    """What a file of ``mode`` (``st_mode``) is, in words for a message."""
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


def _refuse(what: str, mode: int) -> UserError:
    return UserError(f"{what}: is {kind(mode)}, not a regular file; name a file")


def check_regular(path: str | Path, *, what: str) -> None:
    """Refuse ``path`` in one line (``what: is a FIFO ..., not a regular file; ...``) when it exists
    and, its links followed, is not a regular file. A missing path passes: its reader says so."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UserError(f"{what}: cannot read it ({exc.strerror})") from None
    if not stat.S_ISREG(mode):
        raise _refuse(what, mode)


def open_regular(path: str | Path, *, what: str) -> BinaryIO:
    """``path`` opened for reading in binary, refused in one line unless it is a regular file.
    ``FileNotFoundError`` and other ``OSError`` pass to the caller, which knows what to advise."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _refuse(what, mode)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | Path, *, what: str, limit: int | None = SMALL_FILE_BYTES) -> bytes:
    """The bytes of the regular file ``path``; more than ``limit`` bytes (None: no bound, for a
    table or a corpus, which a regular file bounds by its size) are refused in one line."""
    with open_regular(path, what=what) as fh:
        data = fh.read() if limit is None else fh.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise UserError(f"{what}: larger than {limit / 2**20:,.0f} MiB, far more than such a file holds; "
                        "name the right file")
    return data


def read_text(path: str | Path, *, what: str, limit: int | None = SMALL_FILE_BYTES, encoding: str = "utf-8") -> str:
    """The text of the regular file ``path``, as :func:`read_bytes` reads it, its line ends read as
    text mode reads them (``\r\n`` and ``\r`` as ``\n``); ``UnicodeDecodeError`` passes to the caller."""
    text = read_bytes(path, what=what, limit=limit).decode(encoding)
    return text.replace("\r\n", "\n").replace("\r", "\n")
