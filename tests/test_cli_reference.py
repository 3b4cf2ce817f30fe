"""The command reference is generated from the parsers (docs/hooks/generated.py): a page per
command of both tools, each option of the command on its page with its default and choices, and
every page in the nav (the strict build in tests/test_docs.py fails on a page the nav leaves out)."""

from __future__ import annotations

import argparse
import re
import sys

import pytest
import yaml

from helpers import REPO


@pytest.fixture(scope="module")
def generated():
    sys.path.insert(0, str(REPO / "docs" / "hooks"))
    try:
        import generated
    finally:
        sys.path.remove(str(REPO / "docs" / "hooks"))
    return generated


def test_every_command_has_a_page_with_every_option(generated):
    pages = generated.command_pages()
    commands = 0
    for tool, found in generated.tools().items():
        for command, (parser, _) in found.items():
            commands += 1
            page = pages[f"cli/{tool}-{command}.md"]
            assert page.startswith(f"# {tool} {command}\n")
            for action in parser._actions:  # argparse keeps its arguments only there
                if isinstance(action, argparse._HelpAction) or action.help is argparse.SUPPRESS:
                    continue
                for option in action.option_strings:
                    assert f"`{option}`" in page, f"{tool} {command}: {option} is not on its page"
                for choice in action.choices or ():
                    assert f"`{choice}`" in page, f"{tool} {command} {action.option_strings}: choice {choice}"
    assert commands >= 16 and f"[`tecb-eval run`](tecb-eval-run.md)" in pages["cli/index.md"]


def test_a_default_and_a_required_option_are_shown_as_the_parser_has_them(generated):
    page = generated.command_pages()["cli/tecb-eval-run.md"]
    row = next(line for line in page.splitlines() if line.startswith("| `--protocol` |"))
    assert "`legacy` \\| `fast`" in row and "| `legacy` |" in row
    assert re.search(r"^\| `--results` \| `RESULTS` \| required \|", page, flags=re.M)


def test_every_command_page_is_in_the_nav(generated):
    nav = str(yaml.safe_load((REPO / "mkdocs.yml").read_text().replace("!ENV", ""))["nav"])
    for path in generated.command_pages():
        assert path in nav, f"mkdocs.yml's nav does not list {path}"
