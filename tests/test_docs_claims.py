"""What the manual says about the code is checked against the code: every ``tecb_data.X(...)`` or
``tecb_eval.X(...)`` a page calls is callable and takes the keywords the page passes, what a page
calls a function or a module is one, every option a command line on a page gives is an option of
that command, no page installs tecb from a package index it is not on, every ``tests/...::name``
a page names exists, and every equality claim says under which condition it holds.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import shlex
import types

import pytest

from helpers import REPO

DOCS = REPO / "docs"
PAGES = [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]


def page_id(page):
    return str(page.relative_to(REPO))


def text_of(page) -> str:
    return page.read_text(encoding="utf-8")


def resolve(dotted: str):
    """The object a dotted name ``tecb_eval.a.b`` names, as Python resolves it: attribute by attribute
    (``tecb_data.load`` is the function the package exports, not its module), importing a submodule
    where the package does not hold it yet."""
    parts = dotted.split(".")
    found = importlib.import_module(parts[0])
    for i, name in enumerate(parts[1:], start=2):
        if hasattr(found, name):
            found = getattr(found, name)
        else:
            found = importlib.import_module(".".join(parts[:i]))
    return found


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def dotted(node) -> str | None:
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(names)])
    return None


# --- calls ----------------------------------------------------------------------------------------

CALLED = re.compile(r"\b(tecb_(?:data|eval)(?:\.\w+)+)\(")


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_tecb_call_on_a_page_names_something_callable(page):
    for name in sorted(set(CALLED.findall(text_of(page)))):
        target = resolve(name)
        assert callable(target) and not isinstance(target, types.ModuleType), (
            f"{page_id(page)} calls {name}(...), but {name} is a {type(target).__name__}, not callable")


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(text_of(p))], ids=page_id)
def test_the_keywords_a_page_passes_are_parameters_of_the_function(page):
    for block in python_blocks(text_of(page)):
        try:
            tree = ast.parse(block)
        except SyntaxError:  # a block with an ellipsis for the reader to fill is not Python
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not (name := dotted(node.func)) or not name.startswith(("tecb_data.", "tecb_eval.")):
                continue
            signature = inspect.signature(resolve(name))
            keywords = {k.arg: None for k in node.keywords if k.arg}
            try:
                signature.bind_partial(*[None] * len(node.args), **keywords)
            except TypeError as error:
                raise AssertionError(f"{page_id(page)}: {name}{signature} cannot take what the page passes: {error}")


NAMED_AS = re.compile(r"\bthe (function|module|class) `(tecb_(?:data|eval)[\w.]*)`|`(tecb_(?:data|eval)[\w.]*)`,? "
                      r"(?:which is )?an? \**(function|module|class)\b")


def test_what_a_page_calls_a_function_a_module_or_a_class_is_one():
    checks = {"function": inspect.isfunction, "module": inspect.ismodule, "class": inspect.isclass}
    found = 0
    for page in PAGES:
        for match in NAMED_AS.finditer(re.sub(r"\s+", " ", text_of(page))):
            kind, name = (match.group(1), match.group(2)) if match.group(1) else (match.group(4), match.group(3))
            found += 1
            assert checks[kind](resolve(name)), f"{page_id(page)} calls {name} a {kind}; it is {type(resolve(name)).__name__}"
    assert found, "the API page says what tecb_eval.compare is"


def test_every_lazy_name_of_tecb_eval_is_what_the_api_page_says():
    import tecb_eval

    api = re.sub(r"\s+", " ", text_of(DOCS / "api.md"))
    for name in tecb_eval.__all__:
        target = getattr(tecb_eval, name)
        if inspect.ismodule(target):
            assert re.search(rf"`tecb_eval\.{name}`,? which is a \**module", api), f"api.md: say tecb_eval.{name} is a module"
            assert f"tecb_eval.{name}(" not in api
        else:
            assert f"`tecb_eval.{name}`" in api, f"api.md does not name tecb_eval.{name}"


# --- installs -------------------------------------------------------------------------------------

@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_no_page_installs_tecb_from_a_package_index(page):
    """tecb is not on PyPI: `pip install tecb` or `'tecb[dask]'` installs someone else's package or
    nothing. A page installs it from a clone (`pip install -e '.[dask]'`)."""
    wrong = re.findall(r"pip install\s+(?:-U\s+)?[\"']?tecb\b[^\n`]*", text_of(page))
    assert not wrong, f"{page_id(page)}: {wrong}: install from a clone of the repository instead"


def test_the_extras_a_page_installs_are_extras_of_pyproject():
    import tomllib

    extras = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    named = {e for page in PAGES for group in re.findall(r"pip install -e [\"']\.\[([\w,-]+)\][\"']", text_of(page))
             for e in group.split(",")}
    assert named and named <= extras, named - extras


# --- command lines --------------------------------------------------------------------------------

def command_options() -> dict[tuple[str, str], set[str]]:
    """(tool, subcommand) -> every option string it takes (long and short)."""
    import argparse

    from tecb_data import cli as data_cli
    from tecb_eval import cli as eval_cli

    found = {}
    for tool, parser in (("tecb-data", data_cli.parser()), ("tecb-eval", eval_cli.parser())):
        # argparse has no public way to list a parser's subcommands: its actions are the record.
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found[(tool, name)] = {o for a in sub._actions for o in a.option_strings}
    return found


def command_lines(text: str):
    """Every `tecb-data SUB ...` / `tecb-eval SUB ...` a page shows: in a code block's lines and in inline code."""
    spans = re.findall(r"```[^\n]*\n(.*?)```", text, flags=re.S)
    lines = [line for span in spans for line in span.splitlines()]
    inline = re.sub(r"```.*?```", "", text, flags=re.S)
    lines += re.findall(r"`([^`\n]+)`", inline)
    for line in lines:
        for start in re.finditer(r"(?:^|[\s(/$])(tecb-(?:data|eval)) ([a-z][\w-]*)", line):
            # the command ends where the shell or the prose goes on: a comment, a pipe, another command
            rest = re.split(r"\s(?:#|\||&&|;|>|2>)\s?|\s{3,}", line[start.end():])[0]
            yield start.group(1), start.group(2), rest


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_option_a_command_line_on_a_page_gives_is_an_option_of_that_command(page):
    options = command_options()
    for tool, command, rest in command_lines(text_of(page)):
        if (tool, command) not in options:
            assert command in {"--help", "-h", "--version"} or not command.isalpha() or command.upper() == command, (
                f"{page_id(page)}: `{tool} {command}` is not a command of {tool}")
            continue
        try:
            words = shlex.split(rest)
        except ValueError:
            words = rest.split()
        for word in words:
            option = word.split("=", 1)[0]
            if re.fullmatch(r"--[a-z][\w-]*", option):
                assert option in options[(tool, command)], f"{page_id(page)}: `{tool} {command}` has no option {option}"


def test_the_command_line_reader_finds_the_pages_commands():
    lines = list(command_lines(text_of(DOCS / "components.md")))
    assert ("tecb-eval", "run", "--metrics level,dbcv") in [(t, c, r.strip()) for t, c, r in lines]


# --- named tests ----------------------------------------------------------------------------------

NAMED_TEST = re.compile(r"(tests/[\w/]+\.py)::(\w+)((?:`?,\s*`?::\w+)*)")


def test_every_test_a_page_names_exists():
    named = 0
    for page in PAGES:
        for match in NAMED_TEST.finditer(text_of(page)):
            path = REPO / match.group(1)
            assert path.exists(), f"{page_id(page)} names {match.group(1)}, which does not exist"
            defined = {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)}
            for name in [match.group(2), *re.findall(r"::(\w+)", match.group(3))]:
                named += 1
                assert name in defined, f"{page_id(page)} names {match.group(1)}::{name}, which does not exist"
    assert named > 20


# --- equality claims ------------------------------------------------------------------------------

def sentences(text: str) -> list[str]:
    flat = re.sub(r"\s+", " ", re.sub(r"```.*?```", "", text, flags=re.S))
    return re.split(r"(?<=[.!?])\s+(?=[A-Z*`(\[])|\n\n| \| ", flat)


BIT_FOR_BIT = re.compile(r"bit for bit|bit-for-bit|same bits", re.I)
# what makes a claim of identical floats true: the same device, dtype and threads, or one process
CONDITION = re.compile(r"same device|same dtype|dtype|thread|same (?:machine|libraries|library)|in (?:this|one) process|"
                       r"tested|\(test|UMAP's own|its own function|validity_index|original's layer|"
                       r"grid's score of the model|as `tecb-eval run`", re.I)


@pytest.mark.parametrize("page", [p for p in PAGES if BIT_FOR_BIT.search(text_of(p))], ids=page_id)
def test_every_bit_for_bit_claim_says_its_condition(page):
    for sentence in sentences(text_of(page)):
        if BIT_FOR_BIT.search(sentence):
            assert CONDITION.search(sentence), f"{page_id(page)}: a bit-for-bit claim without its condition: {sentence!r}"


MTEB_EQUAL = re.compile(r"equal (?:to )?MTEB|(?:scores|equal)[^.]{0,40}MTEB's own|MTEB's own evaluators give|"
                        r"tested equal to MTEB|scores (?:are|is) MTEB's", re.I)
ENCODER = re.compile(r"batch|hashing|encoder|MiniLM|embeds each text alone", re.I)


@pytest.mark.parametrize("page", [p for p in PAGES if MTEB_EQUAL.search(text_of(p))], ids=page_id)
def test_every_mteb_equality_claim_says_for_which_encoders(page):
    for sentence in sentences(text_of(page)):
        if MTEB_EQUAL.search(sentence):
            assert ENCODER.search(sentence), f"{page_id(page)}: an MTEB-equality claim that names no encoder: {sentence!r}"


def test_the_referees_page_has_the_per_level_row_with_its_figures():
    rows = [line for line in text_of(DOCS / "referees.md").splitlines() if line.startswith("| per-level")]
    assert len(rows) == 1
    assert all(part in rows[0] for part in ("1e-9", "19 of 20", "0.225", "all-MiniLM-L6-v2",
                                            "test_fast_per_level_scores_equal_mtebs_own_hierarchical_evaluation"))


# --- what the grid computes ----------------------------------------------------------------------

def test_the_metrics_option_is_described_as_filling_in_old_rows():
    """Every new row gets per-level scores and DBCV (tests/test_levels.py::
    test_run_metrics_fills_in_what_old_rows_lack_and_only_that runs it); `--metrics` fills them in
    on rows written before them. The option's help says so, and no page says they come only on request."""
    from tecb_eval import cli as eval_cli

    import argparse

    run = next(a for a in eval_cli.parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["run"]
    helptext = next(a.help for a in run._actions if "--metrics" in a.option_strings)
    assert "already holds" in helptext
    for page in PAGES:
        text = re.sub(r"\s+", " ", text_of(page))
        assert not re.search(r"on request with `?(?:tecb-eval run )?--metrics", text), page_id(page)
        assert not re.search(r"with `--metrics (?:level|dbcv)`, (?:per-level|DBCV)", text), page_id(page)
