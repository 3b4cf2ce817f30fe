"""One module per source: read the raw format, yield normalized records (:class:`tecb_data.recipes.Item`)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class InputFile:
    """An input file as recorded in the manifest: its base name (never a machine's path) and hash."""

    name: str
    sha256: str
    bytes: int

    @classmethod
    def of(cls, path: Path, name: str | None = None) -> "InputFile":
        from tecb_data.layout import sha256_file

        return cls(name or path.name, sha256_file(path), path.stat().st_size)

    @classmethod
    def of_bytes(cls, name: str, data: bytes) -> "InputFile":
        """For an input already read into memory: no second pass over the file."""
        return cls(name, hashlib.sha256(data).hexdigest(), len(data))


def csv_reader(text: str, **dialect):
    """``csv.reader`` over a file already read into memory as ``text``. The csv module refuses a field
    over 131,072 characters by default, a guard against reading an endless field from a stream; a
    field of a file in memory cannot be longer than the file, so the limit is raised to its length."""
    import csv
    import io

    if csv.field_size_limit() < len(text) + 1:
        csv.field_size_limit(len(text) + 1)
    return csv.reader(io.StringIO(text), **dialect)


def collapse_spaces(text: str) -> str:
    """Runs of whitespace (newlines, tabs, non-breaking spaces) as one space, trimmed; the empty
    text if nothing of it is visible (see :func:`is_visible`)."""
    collapsed = _SPACES.sub(" ", text).strip()
    return collapsed if is_visible(collapsed) else ""


def is_visible(text: str) -> bool:
    """Whether a reader sees anything of ``text``: a text of format characters (zero-width space,
    word joiner, BOM, soft hyphen, bidi controls, ...), other Default_Ignorable code points and
    blanks only is an empty text. Folded as labels are (:func:`tecb_data.labels.normalise`)."""
    from tecb_data.labels import normalise

    return bool(normalise(text)[0])


@dataclass
class SourceResult:
    """What a source reader hands to the builder."""

    items: list  # list[Item], sorted by id
    inputs: list[InputFile]
    views: tuple[str, ...]  # the text views this input can provide
    report: dict = field(default_factory=dict)  # counts and warnings for the build report
