"""The output blocks the manual shows as a command's output, and their shape: which lines a block
holds, in order, without the figures. A block is marked in its page by an HTML comment on the line
before its fence, ``<!-- output: NAME -->``, which MkDocs leaves out of the page."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_MARK = re.compile(r"^<!-- output: ([\w-]+) -->\n```\w*\n(.*?)^```", re.MULTILINE | re.DOTALL)
# A line's label: the words before its first ":" or " (" ("best pipeline:", "calibration (...):").
_LABEL = re.compile(r"^(\s*)([A-Za-z][\w -]*?)(?::| \()")
# A figure inside a label ("cluster 17 (255 texts)", "the spectrum suggests about 60 clusters")
# moves with the data like every other figure: it reads as N.
_FIGURE = re.compile(r"\d+(?:[.,]\d+)*")


def output_blocks() -> dict[str, tuple[str, str]]:
    """NAME -> (page, the block's text) for every marked block of docs/*.md."""
    found: dict[str, tuple[str, str]] = {}
    for page in sorted((REPO / "docs").glob("*.md")):
        for match in _MARK.finditer(page.read_text(encoding="utf-8")):
            assert match.group(1) not in found, f"output block {match.group(1)!r} marked twice"
            found[match.group(1)] = (page.name, match.group(2))
    return found


def shape(text: str, *, stop_at: str | None = None, leave_out=frozenset()) -> list[str]:
    """The labels of the lines of ``text``, indented as they are: a line at the left margin (a
    dataset's heading, a note) is ``<top>``, a line without a label ``<text>``; a run of lines with
    the same label counts once (one runner-up or three), a figure in a label reads as N, and the
    labels in ``leave_out`` (lines the command prints only for some data) are left out. ``stop_at``: the label after which the rest
    (a code snippet) is not compared."""
    labels: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        match = _LABEL.match(line)
        if not line[0].isspace():
            label = "<top>"
        else:
            label = (match.group(1) + match.group(2)) if match else line[:len(line) - len(line.lstrip())] + "<text>"
        label = _FIGURE.sub("N", label)
        if label.strip() in leave_out:
            continue
        if not labels or labels[-1] != label:
            labels.append(label)
        if stop_at is not None and label.strip() == stop_at:
            break
    return labels
