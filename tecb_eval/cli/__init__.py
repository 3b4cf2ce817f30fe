"""`tecb-eval`: run the model x algorithm x reduction grid and read its results.

Thin: each command parses its arguments, calls one library function and prints the outcome.
User errors end in one line on stderr and exit 2; --debug shows the traceback instead.
One module per command group (``grid``: run, demo; ``results``: table, export, compare;
``layers``; ``pretrain``), the options they share in ``options``. The top room: it may import
every other room of ``tecb_eval``, and none imports it.
"""

from __future__ import annotations

import argparse

from tecb_data.errors import run_command

def parser() -> argparse.ArgumentParser:
    from tecb_eval.cli import grid, layers, pretrain, results

    root = argparse.ArgumentParser(prog="tecb-eval", description=__doc__.splitlines()[0])
    root.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    commands = root.add_subparsers(dest="command", required=True)
    grid.register(commands)
    results.register(commands)
    layers.register(commands)
    pretrain.register(commands)
    return root


def main(argv: list[str] | None = None) -> int:
    return run_command("tecb-eval", parser(), argv, interrupted="finished cells are in the results store, rerun the same command to resume")

