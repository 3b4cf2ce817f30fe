"""Writing our output files and naming things by digest: the bottom of ``tecb_eval``, imported by
every room (caches, tables, MTEB results, layer sweeps) and importing none of them.

Every file is written whole or not at all (a temporary sibling, fsynced, renamed into place) and
gets the mode a plain ``open`` gives under the umask: ``tempfile.mkstemp`` would make it 0600,
unreadable by the rest of a group sharing a cache or a report.
"""

from __future__ import annotations

import csv
import errno
import hashlib
import os
import re
import secrets
from pathlib import Path
from typing import Callable

from tecb_data.errors import UserError


class WriteError(UserError):
    """Writing one of our files failed (a full disk, a read-only folder). ``path`` and ``reason``
    let the command that owns the folder say it in its own terms (its option, what was kept)."""

    def __init__(self, message: str, path: Path, reason: str):
        super().__init__(message)
        self.path, self.reason = path, reason


# OWASP's CSV injection rule: a cell a spreadsheet would read as a formula starts with one of these.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# A plain decimal number, which a spreadsheet reads as that number and never as a formula (Python's
# float() would also pass "-inf", "-nan" and "-1_0", which are text there).
PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\Z")


def _runs(text: str) -> bool:
    # A lone sign is no formula: "-" is the reference table's spelling of "no reduction", and a
    # spreadsheet reads it as text; quoting it would change a column the authors' tools read.
    return text.startswith(FORMULA_START) and not PLAIN_NUMBER.match(text) and text not in ("-", "+")


def csv_cell(value):
    """``value`` as a CSV cell: text a spreadsheet would run as a formula (a model or dataset name
    holding ``=HYPERLINK(...)``) gets a leading ``'`` by OWASP's rule, and so does text that is only
    quotes before such text, so that :func:`csv_value` gives back exactly what was written. Numbers
    and other values pass unchanged."""
    if isinstance(value, str) and (_runs(value) or (value.startswith("'") and _runs(value.lstrip("'")))):
        return "'" + value
    return value


def csv_value(value):
    """What :func:`csv_cell` was given, from what it wrote (for our own CSVs read back: a resumed run)."""
    if isinstance(value, str) and value.startswith("'") and _runs(value.lstrip("'")):
        return value[1:]
    return value


def write_rows_csv(rows: list[dict], fields, path: Path) -> None:
    """``rows`` as a CSV of ``fields``: floats by ``repr`` (exact, the same on every platform), other
    values through :func:`csv_cell`."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(fields)
        for row in rows:
            writer.writerow([repr(row[f]) if isinstance(row[f], float) else csv_cell(row[f]) for f in fields])


def one_line(text) -> str:
    """``text`` as one line of a message or a text output: every character Python would not print
    (controls, line separators, bidirectional and other format characters, spaces other than " ")
    as its escape in ``repr``'s spelling (``\\n``, ``\\x1b``, ``\\u202e``), so that a stored name can
    neither start a line of its own (a fake block of output) nor turn the text around it."""
    text = str(text)
    if all(c.isprintable() or c == " " for c in text):
        return text
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


# Markdown's own escapes for what would otherwise be markup: a backslash escape for its punctuation.
# "(" and ")" are link syntax only right after "]", which is always escaped. "<", ">" and "&" are
# markup only in context (see _markup_at), so ordinary text ("p < 0.05", "p >= 0.05", "Tom & Jerry")
# reads as itself on a terminal and in a Markdown file, with no HTML entity in it.
_MARKDOWN_ESCAPES = {"\\": "\\\\", "|": "\\|", "[": "\\[", "]": "\\]", "`": "\\`"}
# What HTML reads after "&": an entity reference, which would show as its character.
_ENTITY = re.compile(r"&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z0-9]+);")
_TAG_START = re.compile(r"<[A-Za-z/!?]")
_MAIL_LINK = re.compile(r"<[^<> !]+@[^@<> ]+>")


def _markup_at(text: str, i: int) -> str | None:
    """The escape of the "<", ">" or "&" at ``text[i]`` where it would be markup, else None. "<"
    opens a tag, comment or link only before a letter, "/", "!" or "?", or as an e-mail autolink
    (CommonMark and Python-Markdown alike); ">" is a block quote only at the start of a line; "&"
    only where an entity follows. Python-Markdown has no backslash escape for "<" or "&", so those
    take the entity that HTML reads as the character itself."""
    c = text[i]
    if c == "<" and (_TAG_START.match(text, i) or _MAIL_LINK.match(text, i)):
        return "&lt;"
    if c == "&" and _ENTITY.match(text, i):
        return "&amp;"
    if c == ">" and not text[:i].strip():
        return "\\>"
    return None


def _can_delimit(text: str, i: int) -> bool:
    """Whether the ``*`` or ``_`` at ``text[i]`` could open or close emphasis: not when it stands
    between two spaces (or ends), nor ``_`` between two letters or digits, which Markdown reads as
    part of the word (``minibatch_kmeans``)."""
    before = text[i - 1] if i > 0 else " "
    after = text[i + 1] if i + 1 < len(text) else " "
    if before.isspace() and after.isspace():
        return False
    return not (text[i] == "_" and before.isalnum() and after.isalnum())


def markdown_text(value) -> str:
    """``value`` as Markdown text that shows as itself: on one line (:func:`one_line`), with the
    characters that would make HTML, a link, a code span, emphasis or a new table cell escaped.
    Every cell and every name we write into Markdown goes through it."""
    text = one_line(value)
    return "".join(_MARKDOWN_ESCAPES.get(c) or (c in "<>&" and _markup_at(text, i))
                   or ("\\" + c if c in "*_" and _can_delimit(text, i) else c) for i, c in enumerate(text))


def short_hash(*parts: str) -> str:
    digest = hashlib.blake2b(digest_size=12)
    for part in parts:
        digest.update(part.encode("utf-8") + b"\0")
    return digest.hexdigest()


# A name in a file name (a model's page, a figure) is cut to this many characters: with what is
# added around it ("vs-authors-", ".html") it stays far below the 255 bytes a file name may have.
SLUG_CHARS = 80


def file_slug(name: str) -> str:
    """``name`` as part of a file name (a model's page, ``figure1-<model>.png``): letters, digits,
    ``.``, ``_`` and ``-``, everything else as ``_``, never starting with ``.``. A name longer than
    :data:`SLUG_CHARS` is cut and ends in a digest of the whole name, so that a long name never
    makes a file name the file system refuses, and two that share their start stay apart."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_").lstrip(".") or "model"
    if len(slug) > SLUG_CHARS:
        slug = slug[:SLUG_CHARS - 13].rstrip("._-") + "-" + short_hash(name)[:12]
    return slug


def _create_temporary(folder: Path, suffix: str) -> tuple[int, Path]:
    # Mode 0o666 as open() uses: the kernel applies the umask (and a folder's default ACL).
    while True:
        tmp = folder / f".tmp-{secrets.token_hex(8)}{suffix}"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), tmp
        except FileExistsError:
            continue


# What a file system says when it is full (or a quota or file-size limit is reached).
_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def _reason(exc: OSError) -> str:
    """An OSError in words, a full disk named as one."""
    if exc.errno in _FULL:
        return f"the disk is full: {exc.strerror}"
    return exc.strerror or str(exc)


def atomic_save(path: Path, write: Callable[[object], None], suffix: str, *, option: str | None = None) -> None:
    """Write through ``write(fileobj)`` into a temporary sibling, fsync, then rename into place.
    ``option``: the command-line option that chose the folder, named in the error line (e.g.
    ``--cache-dir``); without it the line says to choose another folder."""
    path = Path(path)
    choose = f"choose another {option}" if option else "choose another folder"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _create_temporary(path.parent, suffix)
    except OSError as exc:
        reason = _reason(exc)
        raise WriteError(f"{path.parent}: cannot write there ({reason}); {choose}", path, reason) from None
    try:
        # A buffered file retries a short write until every byte is out, and raises if one fails.
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        reason = _reason(exc)
        raise WriteError(f"{path}: writing the file failed ({reason}); free space or {choose}", path, reason) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str, *, option: str | None = None) -> Path:
    atomic_save(Path(path), lambda fh: fh.write(text.encode("utf-8")), Path(path).suffix, option=option)
    return Path(path)


def source_digest() -> str:
    """A short digest of the code that decides results: every ``.py`` file of the imported
    ``tecb_data`` and ``tecb_eval`` packages, by relative path and content. Two processes with the
    same version string but other code (an older checkout, a local edit) differ here."""
    global _SOURCE_DIGEST
    if _SOURCE_DIGEST is None:
        import tecb_data
        import tecb_eval

        digest = hashlib.blake2b(digest_size=8)
        for package in (tecb_data, tecb_eval):
            root = Path(package.__file__).resolve().parent
            for path in sorted(root.rglob("*.py")):
                digest.update(f"{package.__name__}/{path.relative_to(root).as_posix()}".encode("utf-8") + b"\0")
                digest.update(path.read_bytes() + b"\0")
        _SOURCE_DIGEST = digest.hexdigest()
    return _SOURCE_DIGEST


_SOURCE_DIGEST: str | None = None  # the code does not change under a running process
