"""MkDocs hook: the tables that the code already holds are rendered from it, so a page cannot drift.

A page writes a marker on a line of its own and the build puts the table there:

- ``<!-- tecb:algorithms -->`` and ``<!-- tecb:reductions -->``: the clustering registry's entries
  (``tecb_eval.clustering.registry``), with the defaults the grid sets and the equivalent outside tecb;
- ``<!-- tecb:changelog -->``: the repository's ``CHANGELOG.md`` (outside ``docs/``, so MkDocs cannot
  link it), its first heading dropped;
- ``<!-- tecb:fields module.Class -->``: a dataclass's fields, their types, defaults and the comment
  beside each in the source (fields carry no docstrings, so mkdocstrings shows none of this);
- ``<!-- tecb:row-schema -->``: the fields of a results-store row, from the store's own lists
  (``tecb_eval.grid.store``), which are what reading a store checks.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _cell(text: str) -> str:
    # A table cell: a pipe would end the cell, a newline the row.
    return str(text).replace("|", "\\|").replace("\n", " ")


def _params(values: dict) -> str:
    return ", ".join(f"`{key}={value!r}`" for key, value in values.items()) or "its library's defaults"


def algorithms_table() -> str:
    from tecb_eval.clustering.registry import ALGORITHMS_REGISTRY

    rows = ["| name (`--algorithm`), the paper's | what it is | parameters the grid sets | "
            "equivalent outside tecb | not run on |", "| --- | --- | --- | --- | --- |"]
    for entry in ALGORITHMS_REGISTRY.values():
        # k is the split's number of labels; a density algorithm finds its own and labels noise -1.
        extra = {**({"n_clusters": "k"} if entry.takes_k else {}), **entry.defaults}
        params = ", ".join(f"`{key}={value}`" if key == "n_clusters" else f"`{key}={value!r}`"
                           for key, value in extra.items()) or "its library's defaults"
        if entry.labels_noise:
            params += "; noise: label -1"
        equivalent = f"`{entry.equivalent.import_line}`" + (f" ({entry.equivalent.note})" if entry.equivalent.note else "")
        skipped = ", ".join(f"`{name}` (unless named)" for name in entry.skipped_with) or "—"
        rows.append(f"| `{entry.name}`, {_cell(entry.paper_name)} | {_cell(entry.description)} | {_cell(params)} | "
                    f"{_cell(equivalent)} | {skipped} |")
    return "\n".join(rows)


def reductions_table() -> str:
    from tecb_eval.clustering.registry import REDUCTIONS_REGISTRY

    rows = ["| name (`--reduction`) | the paper's name | what it is | parameters the grid sets | "
            "equivalent outside tecb |", "| --- | --- | --- | --- | --- |"]
    for entry in REDUCTIONS_REGISTRY.values():
        if entry.equivalent is None:
            equivalent = "`from bertopic.dimensionality import BaseDimensionalityReduction` (no reduction)"
        else:
            equivalent = f"`{entry.equivalent.import_line}`" + (f" ({entry.equivalent.note})"
                                                               if entry.equivalent.note else "")
        params = _params(entry.defaults) if entry.reduces else "—"
        rows.append(f"| `{entry.name}` | `{_cell(entry.paper_name)}` | {_cell(entry.description)} | "
                    f"{_cell(params)} | {_cell(equivalent)} |")
    return "\n".join(rows)


def changelog() -> str:
    lines = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8").splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    return "\n".join(lines)


def _comments(cls) -> dict[str, str]:
    """field -> the comment on its line (or on the lines just above it) in the class's source."""
    found, above = {}, []
    for line in inspect.getsource(cls).splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            above.append(stripped.lstrip("# "))
            continue
        match = re.match(r"\s+(\w+)\s*:[^#]*?(?:#\s*(.*))?$", line)
        if match and not stripped.startswith(("def ", "@", "return")):
            found[match.group(1)] = " ".join([*above, match.group(2) or ""]).strip()
        above = []
    return found


def fields_table(path: str) -> str:
    module, _, name = path.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    comments = _comments(cls)
    rows = ["| field | type | default | what it is |", "| --- | --- | --- | --- |"]
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            default = f"`{f.default!r}`"
        elif f.default_factory is not dataclasses.MISSING:
            default = f"`{f.default_factory()!r}`"
        else:
            default = "required"
        kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        rows.append(f"| `{f.name}` | `{_cell(kind)}` | {_cell(default)} | {_cell(comments.get(f.name, ''))} |")
    return "\n".join(rows)


def row_schema() -> str:
    from tecb_eval.grid import store

    groups = [(store.TEXT_FIELDS, "text"), (store.COUNT_FIELDS, "count (an integer, 0 or more)"),
              (store.OPTIONAL_TEXT_FIELDS, "text or null, where present"), (store.FLAG_FIELDS, "true or false"),
              (store.SCORE_FIELDS, "score"), (tuple(store.SCORE_RANGES), "score")]
    # The two key fields no type list of the store names.
    kinds: dict[str, str] = {name: "" for name in store.KEY_FIELDS}
    kinds.update(seeds="text: the run's seed set, sorted, e.g. `1,2,42`", seed="integer: this row's seed")
    for names, kind in groups:
        for name in names:
            kinds[name] = kinds.get(name) or kind
    rows = ["| field | in the cell's key | kind | range |", "| --- | --- | --- | --- |"]
    for name, kind in kinds.items():
        low_high = store.SCORE_RANGES.get(name)
        shown = f"{low_high[0]:g} to {low_high[1]:g}" if low_high else ""
        key = "yes" if name in store.KEY_FIELDS else ""
        default = " (missing in older stores: see below)" if name in store.FIELD_DEFAULTS else ""
        rows.append(f"| `{name}` | {key} | {kind or 'text or integer'}{default} | {shown} |")
    return "\n".join(rows)


MARKERS = {
    "<!-- tecb:algorithms -->": algorithms_table,
    "<!-- tecb:reductions -->": reductions_table,
    "<!-- tecb:changelog -->": changelog,
    "<!-- tecb:row-schema -->": row_schema,
}
FIELDS = re.compile(r"<!-- tecb:fields ([\w.]+) -->")


def on_page_markdown(markdown, **kwargs):
    for marker, render in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, render())
    return FIELDS.sub(lambda match: fields_table(match.group(1)), markdown)
