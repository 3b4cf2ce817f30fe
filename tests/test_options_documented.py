"""Every long option of both command-line tools is mentioned on some page of the manual.

The test walks the parsers the installed commands build (`tecb_data.cli.parser()` and
`tecb_eval.cli.parser()`), every subcommand, and looks for each long option as a whole word
(`--seed` is not found in `--seeds`) in the Markdown pages under docs/. An option that is left
out on purpose is listed in UNDOCUMENTED with the reason; the list is checked too, so that it
cannot keep an option that is gone or that a page now describes.
"""

from __future__ import annotations

import argparse
import re

from helpers import REPO

DOCS = REPO / "docs"

# option -> why no page needs to name it. Empty: every option has its page.
UNDOCUMENTED: dict[str, str] = {}


def long_options(parser: argparse.ArgumentParser, path: tuple[str, ...]):
    """(command path, option) for every long option of ``parser`` and its subcommands."""
    # argparse has no public way to list a parser's arguments: its actions are the record.
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from long_options(sub, (*path, name))
        else:
            for option in action.option_strings:
                if option.startswith("--"):
                    yield " ".join(path), option


def every_option() -> dict[str, set[str]]:
    from tecb_data import cli as data_cli
    from tecb_eval import cli as eval_cli

    options: dict[str, set[str]] = {}
    for tool, parser in (("tecb-data", data_cli.parser()), ("tecb-eval", eval_cli.parser())):
        for command, option in long_options(parser, (tool,)):
            options.setdefault(option, set()).add(command)
    return options


def mentioned(option: str, text: str) -> bool:
    return re.search(re.escape(option) + r"(?![\w-])", text) is not None


def manual() -> str:
    return "\n".join(page.read_text(encoding="utf-8") for page in sorted(DOCS.rglob("*.md")))


def test_the_walk_finds_the_options_of_every_subcommand():
    options = every_option()
    assert {"tecb-eval run", "tecb-eval demo"} <= options["--limit-splits"]
    assert "tecb-data build" in options["--pretty-name"] and "tecb-eval recommend" in options["--resamples"]
    assert "tecb-eval finetune" in options["--protocol"] and len(options) > 100


def test_whole_words_only():
    assert not mentioned("--seed", "run with --seeds 42,1,2")
    assert mentioned("--seed", "`--seed 42`") and mentioned("--metrics", "--metrics level,dbcv")


def test_every_long_option_is_on_some_page_of_the_manual():
    text = manual()
    missing = {option: sorted(commands) for option, commands in every_option().items()
               if option not in UNDOCUMENTED and not mentioned(option, text)}
    assert not missing, ("options no page of docs/ mentions (describe each where a user looks for it, "
                         f"or list it in UNDOCUMENTED with the reason): {missing}")


def test_the_undocumented_list_holds_only_real_unmentioned_options():
    options, text = every_option(), manual()
    for option, reason in UNDOCUMENTED.items():
        assert option in options, f"{option} is no longer an option: drop it from UNDOCUMENTED"
        assert not mentioned(option, text), f"{option} is on a page now: drop it from UNDOCUMENTED"
        assert reason.strip(), option
