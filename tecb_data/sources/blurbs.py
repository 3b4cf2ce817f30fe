"""GermEval 2019 Task 1 (hierarchical blurb classification) files.

The release files are XML-like but not XML: raw ``&`` in titles and blurbs, and a ``<root>`` wrapper
that some files have and some don't. Each ``<book>`` element is cut out line by line and parsed on its
own, so one malformed record is reported with its file and line and the rest of the file still counts.
"""

from __future__ import annotations

import gzip
import re
import zipfile
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator
from xml.etree import ElementTree

from tecb_data import inputs
from tecb_data.errors import UserError
from tecb_data.recipes import Item
from tecb_data.sources import InputFile, SourceResult, is_visible

ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")
FILE_PATTERN = re.compile(r"^blurbs_[a-z_]+\.txt(\.gz)?$")
# An & that does not start an XML entity is the raw & of "Literatur & Unterhaltung".
_RAW_AMPERSAND = re.compile(r"&(?!(?:amp|lt|gt|quot|apos|#[0-9]+|#x[0-9a-fA-F]+);)")


@dataclass(frozen=True)
class Book:
    isbn: str
    title: str
    blurb: str
    genre_paths: tuple[tuple[str, ...], ...]  # one path (top-level first) per <category>
    location: str  # "file:line" of the <book> tag


class MalformedRecord(Exception):
    def __init__(self, location: str, reason: str):
        super().__init__(f"{location}: {reason}")
        self.location = location
        self.reason = reason


def _records(text: str, name: str) -> Iterator[tuple[int, str]]:
    """(first line number, text) of each <book>...</book> element. Raises UserError on truncation."""
    start = None
    lines: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if start is None:
            if stripped.startswith("<book"):
                start, lines = number, [line]
                if "</book>" in stripped:
                    yield start, "\n".join(lines)
                    start = None
            continue
        if stripped.startswith("<book"):
            raise UserError(
                f"{name}:{start}: <book> is never closed before the next one at line {number}; "
                "the file is damaged: download it again"
            )
        lines.append(line)
        if "</book>" in stripped:
            yield start, "\n".join(lines)
            start = None
    if start is not None:
        raise UserError(f"{name}:{start}: file ends inside a <book> record; it is truncated: download it again")


def _parse_book(record: str, location: str) -> Book | None:
    try:
        element = ElementTree.fromstring(_RAW_AMPERSAND.sub("&amp;", record))
    except ElementTree.ParseError as exc:
        line_in_record = exc.position[0] - 1
        file, line = location.rsplit(":", 1)
        raise MalformedRecord(f"{file}:{int(line) + line_in_record}", f"not parseable ({exc.msg})") from None
    isbn = (element.findtext("isbn") or "").strip()
    title = (element.findtext("title") or "").strip()
    if not isbn:
        raise MalformedRecord(location, "book without <isbn>")
    if not is_visible(title):
        raise MalformedRecord(location, f"book {isbn} without <title>")
    blurb = (element.findtext("body") or "").strip()
    if not is_visible(blurb):
        blurb = ""
    paths = []
    for category in element.iter("category"):
        topics = []
        for topic in category.findall("topic"):
            depth = topic.get("d", "")
            if not depth.isdigit() or not (topic.text or "").strip():
                raise MalformedRecord(location, f"book {isbn} has a <topic> without depth or name")
            topics.append((int(depth), topic.text.strip()))
        if not topics:
            raise MalformedRecord(location, f"book {isbn} has an empty <category>")
        topics.sort()
        if [d for d, _ in topics] != list(range(len(topics))):
            raise MalformedRecord(location, f"book {isbn} has a genre path with missing levels")
        paths.append(tuple(name for _, name in topics))
    return Book(isbn, title, blurb, tuple(sorted(set(paths))), location)


def _decode(raw: bytes, name: str) -> str:
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, gzip.BadGzipFile) as exc:
            raise UserError(f"{name}: damaged gzip file ({exc}); download it again") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{name}: not a GermEval blurbs file (not UTF-8 text at byte {exc.start})") from None
    if "<book" not in text:
        raise UserError(f"{name}: not a GermEval blurbs file (no <book> records); pass blurbs_*.txt files")
    return text


def _find_inputs(path: Path) -> tuple[list[tuple[str, bytes]], list[InputFile]]:
    """(name, raw bytes) of every blurbs file in ``path``, sorted by name, and the manifest inputs."""
    if not path.exists():
        raise UserError(f"{path}: no such file or directory; pass the GermEval 2019 files, their folder or zip")
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and FILE_PATTERN.match(p.name))
        if not files:
            raise UserError(f"{path}: no blurbs_*.txt or blurbs_*.txt.gz files in this folder")
        contents = [(p.name, p.read_bytes()) for p in files]
        return contents, [InputFile.of_bytes(name, raw) for name, raw in contents]
    inputs.check_regular(path, what=str(path))
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            members = sorted(
                (m for m in archive.infolist() if not m.is_dir() and FILE_PATTERN.match(Path(m.filename).name)),
                key=lambda m: Path(m.filename).name,
            )
            if not members:
                raise UserError(f"{path}: the zip holds no blurbs_*.txt files; is it the GermEval 2019 Task 1 release?")
            try:
                contents = [(f"{path.name}!{Path(m.filename).name}", archive.read(m)) for m in members]
            except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as exc:
                raise UserError(f"{path}: damaged zip file ({exc}); download it again") from None
        return contents, [InputFile.of(path)]
    raw = inputs.read_bytes(path, what=str(path), limit=None)
    if raw[:4] in ZIP_MAGIC:
        # is_zipfile looks for the directory at the end of the file: a cut-off download has none
        raise UserError(f"{path}: damaged or truncated zip file (no central directory at its end); download it again")
    return [(path.name, raw)], [InputFile.of_bytes(path.name, raw)]


def read_books(path: Path, progress=None) -> tuple[list[Book], list[InputFile], dict]:
    """Every labelled book of the input, deduplicated by ISBN, sorted by ISBN; and the read report."""
    contents, inputs = _find_inputs(Path(path))
    by_isbn: dict[str, list[Book]] = {}
    malformed: list[str] = []
    unlabelled = 0
    for name, raw in contents:
        text = _decode(raw, name)
        for line, record in _records(text, name):
            try:
                book = _parse_book(record, f"{name}:{line}")
            except MalformedRecord as exc:
                malformed.append(str(exc))
                continue
            if not book.genre_paths:
                unlabelled += 1  # the unlabelled test release: no genre, nothing to cluster on
                continue
            by_isbn.setdefault(book.isbn, []).append(book)
            if progress is not None:
                progress.update(1)
    duplicates = sum(len(v) - 1 for v in by_isbn.values())
    # Input order must not matter: of duplicate ISBNs keep the one with the smallest content.
    books = [
        min(versions, key=lambda b: (b.title, b.blurb, b.genre_paths))
        for _, versions in sorted(by_isbn.items())
    ]
    report = {
        "books_read": len(books) + duplicates,
        "skipped_unlabelled": unlabelled,
        "duplicate_isbns": duplicates,
        "malformed": len(malformed),
        "malformed_records": malformed,
    }
    return books, inputs, report


def select(books: list[Book]) -> tuple[list[Item], dict]:
    """The paper's selection: one top-level genre, at most two second-level genres; with two, the
    less frequent one over the whole corpus labels the book (ties broken by name)."""
    frequency = Counter(name for book in books for name in {p[1] for p in book.genre_paths if len(p) > 1})
    items, rejected = [], Counter()
    for book in books:
        tops = {p[0] for p in book.genre_paths}
        seconds = sorted({p[1] for p in book.genre_paths if len(p) > 1})
        if len(tops) != 1:
            rejected["several_top_level_genres"] += 1
            continue
        if len(seconds) > 2:
            rejected["more_than_two_second_level_genres"] += 1
            continue
        fine = min(seconds, key=lambda g: (frequency[g], g)) if seconds else None
        items.append(
            Item(
                id=book.isbn,
                views={"s2s": book.title, "p2p": f"{book.title} {book.blurb}".strip()},
                labels={"top": next(iter(tops)), "fine": fine},
                path=tuple(" > ".join(p) for p in book.genre_paths),
            )
        )
    return items, {"selected": len(items), **{f"rejected_{k}": v for k, v in sorted(rejected.items())}}


def read(path: Path, progress=None) -> SourceResult:
    books, inputs, report = read_books(path, progress)
    if not books:
        raise UserError(f"{path}: no labelled books found (the unlabelled test release alone cannot be clustered)")
    items, selection = select(books)
    return SourceResult(items=items, inputs=inputs, views=("s2s", "p2p"), report={**report, **selection})
