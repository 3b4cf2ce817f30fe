"""MkDocs hook: the tables that the code already holds are rendered from it, so a page cannot drift.

A page writes a marker on a line of its own and the build puts the table there:

- ``<!-- tecb:algorithms -->`` and ``<!-- tecb:reductions -->``: the clustering registry's entries
  (``tecb_eval.clustering.registry``), with the defaults the grid sets and the equivalent outside tecb;
- ``<!-- tecb:changelog -->``: the repository's ``CHANGELOG.md`` (outside ``docs/``, so MkDocs cannot
  link it), its first heading dropped;
- ``<!-- tecb:fields module.Class -->``: a dataclass's fields, their types, defaults and the comment
  beside each in the source (fields carry no docstrings, so mkdocstrings shows none of this);
- ``<!-- tecb:row-schema -->``: the fields of a results-store row, from the store's own lists
  (``tecb_eval.grid.store``), which are what reading a store checks;
- ``<!-- tecb:commands -->``: the commands of both tools, each linked to its page.

And the command reference: one page per command of ``tecb-data`` and ``tecb-eval``
(``cli/TOOL-COMMAND.md``), written from the argparse parsers the installed commands build, so
every option, default and choice on it is the command's own. ``mkdocs.yml``'s nav lists the pages;
a command without its nav entry fails the strict build (an omitted page).
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


def _subcommands(parser) -> dict:
    import argparse

    # argparse has no public way to list a parser's subcommands and arguments: its actions are the record.
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            return {name: (sub, helps.get(name, "")) for name, sub in action.choices.items()}
    return {}


def tools() -> dict:
    """tool -> {command: (parser, one-line help)}."""
    from tecb_data import cli as data_cli
    from tecb_eval import cli as eval_cli

    return {"tecb-data": _subcommands(data_cli.parser()), "tecb-eval": _subcommands(eval_cli.parser())}


def _html(text: str) -> str:
    # "[,name=NAME]" after "[...]" would read as a reference link: a help text's brackets are text.
    return _cell(text).replace("<", "&lt;").replace(">", "&gt;").replace("[", "\\[")


def _option_row(action) -> str:
    import argparse

    names = ", ".join(f"`{name}`" for name in action.option_strings) or f"`{action.metavar or action.dest}`"
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        takes = " \\| ".join(f"`{choice}`" for choice in action.choices)
    elif action.nargs == 0:
        takes = "(a flag)"
    else:
        metavar = action.metavar or action.dest.upper()
        takes = f"`{' '.join(metavar) if isinstance(metavar, tuple) else metavar}`"
        if action.nargs in ("*", "+"):
            takes += " (several)"
    if action.required or not action.option_strings:
        default = "required"
    elif action.default in (None, False, argparse.SUPPRESS) or action.nargs == 0:
        default = "—"
    else:
        default = f"`{action.default}`"
    helptext = (action.help or "") % {"default": action.default, "prog": "", "choices": action.choices}
    if (isinstance(action, argparse._AppendAction) or type(action).__name__ == "CommaList") and "repeatable" not in helptext:
        helptext += " (repeatable)"
    return f"| {names} | {takes} | {default} | {_html(helptext)} |"


def command_page(tool: str, command: str, parser, summary: str) -> str:
    import argparse

    lines = [f"# {tool} {command}", "", _html(summary[:1].upper() + summary[1:]) + ".", ""]
    if parser.description:
        lines += [parser.description, ""]
    lines += ["```text", parser.format_usage().strip(), "```", "",
              "Generated from the command's own parser when this site was built: every option, choice and "
              f"default is `{tool} {command} --help`'s.", ""]
    rows = [a for a in parser._actions if a.help is not argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)]
    positional = [a for a in rows if not a.option_strings]
    options = [a for a in rows if a.option_strings]
    header = ["| argument | takes | default | what it does |", "| --- | --- | --- | --- |"]
    if positional:
        lines += ["## Arguments", "", *header, *map(_option_row, positional), ""]
    lines += ["## Options", "", *header, *map(_option_row, options), ""]
    if parser.epilog:
        lines += ["## Examples" if parser.epilog.startswith("example") else "## Notes", "", "```text",
                  parser.epilog.split("\n", 1)[1] if parser.epilog.startswith("example") else parser.epilog,
                  "```", ""]
    lines += ["[All commands](index.md)", ""]
    return "\n".join(lines)


def command_pages() -> dict[str, str]:
    """cli/<tool>-<command>.md -> its page, and cli/index.md."""
    pages = {}
    for tool, commands in tools().items():
        for command, (parser, summary) in commands.items():
            pages[f"cli/{tool}-{command}.md"] = command_page(tool, command, parser, summary or "")
    index = ["# Command reference", "",
             "One page per command, generated from the commands' own parsers when this site is built "
             "(`docs/hooks/generated.py`), so it says what `--help` says. The pages of the manual say "
             "what each command is for.", "", commands_table(link_prefix="")]
    pages["cli/index.md"] = "\n".join(index) + "\n"
    return pages


def commands_table(link_prefix: str = "cli/") -> str:
    rows = ["| command | what it does |", "| --- | --- |"]
    for tool, commands in tools().items():
        for command, (_, summary) in commands.items():
            rows.append(f"| [`{tool} {command}`]({link_prefix}{tool}-{command}.md) | {_html(summary or '')} |")
    return "\n".join(rows)


def on_files(files, config, **kwargs):
    from mkdocs.structure.files import File

    for path, content in command_pages().items():
        files.append(File.generated(config, path, content=content))
    return files


MARKERS = {
    "<!-- tecb:algorithms -->": algorithms_table,
    "<!-- tecb:reductions -->": reductions_table,
    "<!-- tecb:changelog -->": changelog,
    "<!-- tecb:row-schema -->": row_schema,
    "<!-- tecb:commands -->": commands_table,
}
FIELDS = re.compile(r"<!-- tecb:fields ([\w.]+) -->")


def version() -> str:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def on_config(config, **kwargs):
    # The header names the version the manual describes, read from pyproject.toml (one place).
    config["site_name"] = config["site_name"].replace("tecb", f"tecb {version()}", 1)
    config["extra"]["version"] = version()
    return config


def on_page_markdown(markdown, **kwargs):
    for marker, render in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, render())
    return FIELDS.sub(lambda match: fields_table(match.group(1)), markdown)
