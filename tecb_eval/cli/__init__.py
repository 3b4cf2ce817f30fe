"""`tecb-eval`: run the model x algorithm x reduction grid and read its results.

Thin: each command parses its arguments, calls one library function and prints the outcome.
User errors end in one line on stderr and exit 2; --debug shows the traceback instead.
One module per command group (``grid``: run, demo; ``results``: table, export, compare;
``layers``; ``pretrain``; ``workers``: a warm Dask cluster for ``run --scheduler``), the options
they share in ``options``. The top room: it may import every other room of ``tecb_eval``, and
none imports it.
"""

from __future__ import annotations

import argparse
import sys

from tecb_data.commandline import quiet_libraries, root_parser
from tecb_data.runner import run_command

EXAMPLES = """examples:
  tecb-eval demo --data demo-out --out demo-out/eval
  tecb-eval run --data out/blurbs-clustering-s2s --model minilm-l6 --limit-splits 2 --results results.jsonl
  tecb-eval table results.jsonl
`tecb-eval COMMAND --help` describes each command."""

def parser() -> argparse.ArgumentParser:
    from tecb_eval.cli import finetune, grid, layers, pretrain, report, results, workers

    root = root_parser("tecb-eval", __doc__.splitlines()[0], epilog=EXAMPLES)
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND")
    grid.register(commands)
    results.register(commands)
    layers.register(commands)
    pretrain.register(commands)
    finetune.register(commands)
    report.register(commands)
    workers.register(commands)
    return root


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # the installed command; in-process callers (tests) keep their own settings
        quiet_libraries(argv)
    # In-process callers (tests, notebooks) run several commands in one process: an interrupt names
    # only the stores this one opened. The store module (pandas) is not imported just to count.
    store = sys.modules.get("tecb_eval.grid.store")
    since = store.opened_so_far() if store is not None else 0
    return run_command("tecb-eval", parser(), argv, interrupted=lambda: _interrupted(since))


def _interrupted(since: int) -> str:
    from tecb_eval.grid.store import interrupted_state  # pandas: imported only when it is needed

    return interrupted_state(since)

