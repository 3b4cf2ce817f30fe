"""MkDocs hook: the tables that the code already holds are rendered from it, so a page cannot drift.

A page writes a marker on a line of its own and the build puts the table there:

- ``<!-- tecb:algorithms -->`` and ``<!-- tecb:reductions -->``: the clustering registry's entries
  (``tecb_eval.clustering.registry``), with the defaults the grid sets and the equivalent outside tecb;
- ``<!-- tecb:changelog -->``: the repository's ``CHANGELOG.md`` (outside ``docs/``, so MkDocs cannot
  link it), its first heading dropped.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _cell(text: str) -> str:
    # A table cell: a pipe would end the cell, a newline the row.
    return str(text).replace("|", "\\|").replace("\n", " ")


def _params(values: dict) -> str:
    return ", ".join(f"`{key}={value!r}`" for key, value in values.items()) or "its library's defaults"


def algorithms_table() -> str:
    from tecb_eval.clustering.registry import ALGORITHMS_REGISTRY

    rows = ["| name (`--algorithm`) | the paper's name | what it is | number of clusters | noise | "
            "parameters the grid sets | equivalent outside tecb | left out with |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for entry in ALGORITHMS_REGISTRY.values():
        k = "k = the split's number of labels" if entry.takes_k else "its own"
        extra = {**({"n_clusters": "k"} if entry.takes_k else {}), **entry.defaults}
        params = ", ".join(f"`{key}={value}`" if key == "n_clusters" else f"`{key}={value!r}`"
                           for key, value in extra.items()) or "its library's defaults"
        equivalent = f"`{entry.equivalent.import_line}`" + (f" ({entry.equivalent.note})" if entry.equivalent.note else "")
        skipped = ", ".join(f"`{name}`" for name in entry.skipped_with) or "—"
        rows.append(f"| `{entry.name}` | {_cell(entry.paper_name)} | {_cell(entry.description)} | {k} | "
                    f"{'yes (label -1)' if entry.labels_noise else 'no'} | {_cell(params)} | {_cell(equivalent)} | "
                    f"{skipped} |")
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


MARKERS = {
    "<!-- tecb:algorithms -->": algorithms_table,
    "<!-- tecb:reductions -->": reductions_table,
    "<!-- tecb:changelog -->": changelog,
}


def on_page_markdown(markdown, **kwargs):
    for marker, render in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, render())
    return markdown
