"""Command-line habits of both tools: every --help ends with examples that parse (the cheap ones
really run on the demo data), every command has a description and an example, no option is ever
abbreviated, an option given twice adds up or is one line, a missing option is one line naming it,
and --debug (before or after the command) shows the traceback and keeps a user error's exit code."""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys

import pytest

from helpers import REPO, offline_one_job, run_args, run_cli, run_eval_cli
from tecb_data import cli as data_cli
from tecb_eval import cli as eval_cli

TOOLS = {"tecb-data": data_cli, "tecb-eval": eval_cli}
# Every command the README names; a command added later is found by walking the parsers anyway.
KNOWN = {
    "tecb-eval": {"run", "demo", "table", "export", "compare", "layers", "pretrain", "finetune"},
    "tecb-data": {"build", "collect", "verify", "stats", "push"},
}


def _commands(root: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in root._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def _examples(epilog: str | None, tool: str) -> list[list[str]]:
    """The command lines of an epilog: lines starting with the tool's name, `\\` continuations joined,
    a trailing `# comment` dropped."""
    text = (epilog or "").replace("\\\n", " ")
    lines = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(tool + " "):
            words = shlex.split(line, comments=True)[1:]
            # A shell line (`... --out site/ && xdg-open site/index.html`): our command is its first part.
            cut = [i for i, word in enumerate(words) if word in ("&&", "||", "|", ";")]
            lines.append(words[:cut[0]] if cut else words)
    return lines


def _all_parsers():
    for tool, module in TOOLS.items():
        root = module.parser()
        yield tool, None, root
        for name, sub in _commands(root).items():
            yield tool, name, sub


PARSERS = [pytest.param(tool, name, id=f"{tool} {name or ''}".strip()) for tool, name, _ in _all_parsers()]


def _parser(tool, name):
    root = TOOLS[tool].parser()
    return root, (root if name is None else _commands(root)[name])


def test_every_known_command_is_there():
    for tool, module in TOOLS.items():
        assert KNOWN[tool] <= set(_commands(module.parser())), tool


@pytest.mark.parametrize("tool,name", PARSERS)
def test_help_ends_with_examples_that_parse(tool, name, capsys):
    root, parser = _parser(tool, name)
    help_text = parser.format_help()
    examples = _examples(parser.epilog, tool)
    assert examples, f"`{tool} {name or ''} --help` shows no example"
    # The examples are the last thing the help shows, kept as written (not re-wrapped).
    assert help_text.rstrip().endswith(parser.epilog.rstrip().splitlines()[-1].strip())
    for argv in examples:
        try:
            args = root.parse_args(argv)
        except SystemExit:  # pragma: no cover - the message is the failure
            pytest.fail(f"the example `{tool} {shlex.join(argv)}` does not parse: {capsys.readouterr().err}")
        if name is not None:
            assert args.command == name, argv
        assert callable(getattr(args, "func", None))


@pytest.mark.parametrize("tool,name", [p for p in PARSERS if p.values[1] is not None])
def test_every_parser_refuses_abbreviations(tool, name, capsys):
    """Each long option of each command, one letter short, appended to the command's own example:
    refused in one line with exit 2 (argparse would otherwise take the unique prefix)."""
    root, parser = _parser(tool, name)
    base = _examples(parser.epilog, tool)[0]
    options = {o for action in parser._actions for o in action.option_strings if o.startswith("--")}
    assert parser.allow_abbrev is False
    for option in sorted(options):
        short = option[:-1]
        if short in options or len(short) < 3:
            continue
        argv = [*base, short, "1"]
        with pytest.raises(SystemExit) as raised:
            root.parse_args(argv)
        assert raised.value.code == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and f"unrecognized arguments: {short}" in error, (option, error)


@pytest.mark.parametrize("module,argv,prefix", [
    (eval_cli, ["run", "--data", "d", "--model", "tfidf-lsa", "--results", "r.jsonl", "--limit", "1"], "tecb-eval"),
    (eval_cli, ["demo", "--data", "d", "--out", "o", "--limit=1"], "tecb-eval"),
    (eval_cli, ["--verb", "table", "r.jsonl"], "tecb-eval"),
    (data_cli, ["build", "--source", "blurbs", "--dem", "--out", "o"], "tecb-data"),
])
def test_abbreviation_is_one_line_and_exit_2(module, argv, prefix, capsys):
    """An abbreviation (`--limit 1` for `--limit-splits 1`) is refused: through the installed entry
    point it is one line on stderr and exit 2, nothing run."""
    with pytest.raises(SystemExit) as raised:
        module.main(argv)
    assert raised.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith(f"{prefix}: error: "), captured.err
    assert "unrecognized arguments" in captured.err


def test_cheap_examples_really_run(tmp_path, monkeypatch, capsys):
    """`tecb-data`'s own examples run as printed on the demo sample: build, then verify and stats of
    what it built (the folder names of their examples)."""
    monkeypatch.chdir(tmp_path)
    root = data_cli.parser()
    ran = []
    top = _examples(root.epilog, "tecb-data")
    demo_build = [argv for argv in top if "--demo" in argv]
    assert demo_build, "the tool's help shows how to build the demo data"
    assert data_cli.main(demo_build[0]) == 0
    # The commands' examples read out/…; the demo build into out/ gives them a real folder.
    assert data_cli.main(["build", "--source", "blurbs", "--demo", "--out", "out", "--quiet"]) == 0
    for name in ("verify", "stats"):
        for argv in _examples(_commands(root)[name].epilog, "tecb-data"):
            assert data_cli.main(argv) == 0, argv
            ran.append(argv)
    assert ran
    out = capsys.readouterr().out
    assert "blurbs-clustering-s2s" in out


# --- one module for errors, one for running a command and its messages ------------------------------

def test_errors_holds_errors_only_and_no_command_catches_ctrl_c_itself():
    """The runner says what Ctrl-C left (each command through ``args.interrupted``); errors.py is
    the errors a user can cause, nothing else."""
    import ast
    from pathlib import Path

    import tecb_data.errors as errors

    tree = ast.parse(Path(errors.__file__).read_text())
    defined = [node for node in tree.body if not isinstance(node, (ast.Expr, ast.ImportFrom, ast.Import))]
    assert all(isinstance(node, ast.ClassDef) for node in defined), [ast.dump(n)[:60] for n in defined]
    assert all(issubclass(getattr(errors, node.name), Exception) for node in defined)
    root = Path(eval_cli.__file__).parent
    for module in [*sorted(root.glob("*.py")), Path(data_cli.__file__)]:
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.ExceptHandler) and node.type is not None:
                caught = {n.id for n in ast.walk(node.type) if isinstance(n, ast.Name)}
                assert "KeyboardInterrupt" not in caught, f"{module.name}:{node.lineno} catches Ctrl-C itself"


def test_no_docstring_carries_a_dated_measurement():
    """A figure with its date belongs in docs/benchmarks.md, which a docstring links to; a docstring
    says what a thing is and does."""
    import ast
    import re

    dated = re.compile(r"\b20\d\d-\d\d-\d\d\b|\brun of 20\d\d|\(measured\b|, measured\)")
    found = []
    for package in ("tecb_data", "tecb_eval"):
        for module in sorted((REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(module.read_text())):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    doc = ast.get_docstring(node) or ""
                    found += [f"{module.name}: {line.strip()}" for line in doc.splitlines() if dated.search(line)]
    assert found == []


@pytest.mark.parametrize("command", [["table"], ["recommend"], ["report", "--out", "{out}"], ["compare"]])
def test_a_folder_given_as_results_is_called_a_folder(command, tmp_path, capsys):
    from helpers import one_line_error

    argv = [command[0], str(tmp_path), *(c.format(out=tmp_path.parent / "site") for c in command[1:])]
    if command[0] == "compare":
        argv = ["compare", str(tmp_path), "--model", "a", "--model", "b"]
    error = one_line_error(capsys, argv)
    assert "is a folder, not a results file" in error and "no such" not in error, error


def test_figures_naming_a_file_says_it_is_a_file(tmp_path, capsys):
    from helpers import one_line_error

    picture = tmp_path / "figure.png"
    picture.write_bytes(b"\x89PNG")
    error = one_line_error(capsys, ["report", str(tmp_path / "r.jsonl"), "--out", str(tmp_path / "site"),
                                    "--figures", str(picture)])
    assert f"--figures {picture}: is a file, not a folder" in error, error


def test_a_cache_file_holding_python_objects_is_named_so_not_with_numpy_s_advice(tmp_path, capsys):
    import numpy as np

    from tecb_eval.grid.cache import load_or_discard

    path = tmp_path / "sample.npz"
    np.savez(path, chosen=np.array([{"a": 1}], dtype=object))
    assert load_or_discard(path, "chosen") is None and not path.exists()
    warning = capsys.readouterr().err
    assert "holds Python objects" in warning and "allow_pickle" not in warning, warning


# --- --debug, missing options, the help of every command ------------------------------------------

@pytest.mark.slow
def test_debug_keeps_the_exit_code_of_a_user_error(demo_datasets, tmp_path):
    argv = run_args(demo_datasets / "tenkgnad-clustering-s2s", "/dev/null", tmp_path / "cache")
    done = subprocess.run([sys.executable, "-m", "tecb_eval.cli", "--debug", *argv], capture_output=True, text=True,
                          env=offline_one_job(), timeout=120)
    assert done.returncode == 2 and "Traceback" in done.stderr and "tecb-eval: error: " in done.stderr
    done = run_cli("--debug", "build", "--source", "table", "--input", str(tmp_path / "absent.csv"), "--name", "x",
                   "--text", "text", "--label", "label", "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and "Traceback" in done.stderr


def test_debug_is_taken_after_the_command_too(tmp_path):
    result = run_cli("build", "--source", "blurbs", "--input", str(tmp_path / "absent"), "--out", str(tmp_path / "o"),
                     "--debug")
    assert result.returncode != 0 and "Traceback" in result.stderr and "UserError" in result.stderr
    plain = run_cli("build", "--source", "blurbs", "--input", str(tmp_path / "absent"), "--out", str(tmp_path / "o"))
    assert "Traceback" not in plain.stderr and plain.stderr.count("\n") == 1


def test_a_missing_option_is_one_line_naming_it_and_where_help_is(tmp_path):
    data = run_cli("build", "--source", "blurbs")
    assert data.returncode == 2 and data.stderr == ("tecb-data build: error: the following arguments are required: "
                                                    "--out; try `tecb-data build --help`\n")
    result = run_eval_cli("run", "--data", "x", "--model", "tfidf-lsa")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "--results" in result.stderr and "try `tecb-eval run --help`" in result.stderr
    choice = run_eval_cli("pretrain", "--model", "m", "--data", "d", "--out", str(tmp_path / "o"), "--profile", "papr")
    assert choice.returncode == 2 and choice.stderr.count("\n") == 1 and "'current', 'paper'" in choice.stderr


@pytest.mark.parametrize("prog, command", [
    ("tecb-data", "build"), ("tecb-data", "verify"), ("tecb-data", "stats"), ("tecb-data", "push"),
    ("tecb-data", "collect"), ("tecb-eval", "run"), ("tecb-eval", "demo"), ("tecb-eval", "table"),
    ("tecb-eval", "export"), ("tecb-eval", "compare"), ("tecb-eval", "layers"), ("tecb-eval", "pretrain"),
])
def test_every_command_has_a_description_and_an_example(prog, command):
    from tecb_data.cli import parser as data_parser
    from tecb_eval.cli import parser as eval_parser

    root = data_parser() if prog == "tecb-data" else eval_parser()
    sub = next(a for a in root._actions if hasattr(a, "choices") and isinstance(a.choices, dict)).choices[command]
    text = sub.format_help()
    assert sub.description and "example" in text and f"{prog} {command}" in (sub.epilog or ""), text
    undocumented = [a.option_strings or [a.dest] for a in sub._actions if not a.help]
    assert undocumented == [], undocumented


# --- options given twice, and lists of seeds ---------------------------------------------------------

def _parsers():
    from tecb_data.cli import parser as data_parser
    from tecb_eval.cli import parser as eval_parser

    for tool, build in (("tecb-data", data_parser), ("tecb-eval", eval_parser)):
        root = build()
        (commands,) = [a for a in root._actions if isinstance(a, argparse._SubParsersAction)]
        for name, sub in commands.choices.items():
            yield tool, build, name, sub


def _value(action, second: bool) -> str:
    if action.choices is not None:
        choices = list(action.choices)
        return str(choices[-1] if second else choices[0])
    return "22" if second else "11"


def _required(sub, leave_out) -> list[str]:
    argv = []
    for action in sub._actions:
        if action is leave_out or action.nargs == 0:
            continue
        if not action.option_strings:
            argv.append(_value(action, False))
        elif action.required:
            argv += [action.option_strings[0], _value(action, False)]
    return argv


def _value_options():
    for tool, build, name, sub in _parsers():
        for action in sub._actions:
            if action.option_strings and action.nargs != 0:
                yield pytest.param(tool, build, name, action.option_strings[0], id=f"{tool} {name} {action.option_strings[0]}")


@pytest.mark.parametrize("tool, build, command, option", list(_value_options()))
def test_an_option_given_twice_adds_up_or_is_one_line(tool, build, command, option, capsys):
    root = build()
    (commands,) = [a for a in root._actions if isinstance(a, argparse._SubParsersAction)]
    sub = commands.choices[command]
    (action,) = [a for a in sub._actions if option in a.option_strings]
    first, second = _value(action, False), _value(action, True)
    argv = [command, *_required(sub, action), option, first, option, second]
    try:
        args = root.parse_args(argv)
    except SystemExit as exc:
        error = capsys.readouterr().err
        assert exc.code == 2 and error.count("\n") == 1, error
        assert f"{option} given twice" in error and first in error and second in error, error
        return
    # Not refused: then both values are kept, in order.
    shown = repr(getattr(args, action.dest))
    assert first in shown and second in shown and (first != second or shown.count(first) == 2), (argv, shown)
    assert shown.index(first) <= shown.rindex(second)


def test_metrics_given_twice_adds_up_as_seeds_do():
    from tecb_eval.cli import parser

    args = parser().parse_args(["run", "--data", "d", "--model", "m", "--results", "r", "--metrics", "level",
                                "--metrics", "dbcv", "--seeds", "1", "--seeds", "2,3"])
    assert args.metrics == "level,dbcv" and args.seeds == (1, 2, 3)
    table = parser().parse_args(["table", "r", "--seeds", "1", "--seeds", "2,3"])
    assert table.seeds == "1,2,3"


def test_a_default_is_replaced_by_the_first_value_given_not_added_to():
    from tecb_data.cli import parser

    args = parser().parse_args(["collect", "--source", "reddit", "--subreddits", "s", "--out", "o"])
    assert args.listings == "hot,top"


def test_seeds_take_commas_and_spaces_everywhere():
    from tecb_eval.cli import parser

    def seeds(*argv):
        return parser().parse_args(argv).seeds

    base = ("run", "--data", "d", "--model", "m", "--results", "r")
    assert seeds(*base, "--seeds", "42", "1", "2") == seeds(*base, "--seeds", "42,1,2") == (42, 1, 2)
    assert seeds(*base, "--seeds", "42,1", "2", "--seeds", "7") == (42, 1, 2, 7)
    assert seeds("pretrain", "--model", "m", "--data", "d", "--out", "o", "--seeds", "42", "1,2") == (42, 1, 2)
    assert seeds("table", "r", "--seeds", "42", "1", "2") == seeds("table", "r", "--seeds", "42,1,2") == "42,1,2"
