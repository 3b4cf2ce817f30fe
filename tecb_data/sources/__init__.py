"""One module per source: read the raw format, yield normalized records (:class:`tecb_data.recipes.Item`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class InputFile:
    """An input file as recorded in the manifest: its base name (never a machine's path) and hash."""

    name: str
    sha256: str
    bytes: int

    @classmethod
    def of(cls, path: Path, name: str | None = None) -> "InputFile":
        digest = hashlib.sha256()
        size = 0
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
                size += len(block)
        return cls(name or path.name, digest.hexdigest(), size)


@dataclass
class SourceResult:
    """What a source reader hands to the builder."""

    items: list  # list[Item], sorted by id
    inputs: list[InputFile]
    views: tuple[str, ...]  # the text views this input can provide
    report: dict = field(default_factory=dict)  # counts and warnings for the build report
