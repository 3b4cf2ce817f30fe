"""The habits `tecb-data` and `tecb-eval` share on the command line.

- ``--debug`` is taken before or after the command (``tecb-data build --debug ...``).
- A usage error (a missing required option, an unknown choice) is one line naming it and how to
  get help, not argparse's usage block of a dozen lines.
- Help texts with line breaks (each command's examples, its epilog) are kept as written.
- Options are never abbreviated: ``--limit 1`` is refused, not read as ``--limit-splits 1``.
"""

from __future__ import annotations

import argparse


class _Formatter(argparse.HelpFormatter):
    """Wraps a description of one paragraph, keeps text with line breaks (the examples) as written."""

    def _fill_text(self, text, width, indent):
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


class CommandParser(argparse.ArgumentParser):
    """argparse with one-line usage errors and ``--debug`` on every command (the root parser sets
    ``debug=False`` as its default: see :func:`root_parser`)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _Formatter)
        # No abbreviated options (`--limit 1` for `--limit-splits 1`): an option added later must not
        # change what an old command line means. Sub-commands are CommandParsers too (add_subparsers
        # uses the root's class), so this reaches every parser of both tools.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        # SUPPRESS: a sub-command's --debug sets the flag only when given, so `--debug run` (the root's)
        # is not reset to False by the sub-command's default.
        self.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                          help="show the traceback of an error (also before the command)")
        self.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                          help="let the libraries (transformers, huggingface_hub, datasets) print their own "
                               "messages and progress bars (also before the command)")

    def error(self, message: str):
        # argparse names a missing option "the following arguments are required: --out"; one line of
        # that and where the help is, instead of the usage block above it.
        self.exit(2, f"{self.prog}: error: {message}; try `{self.prog} --help`\n")


def root_parser(prog: str, description: str, epilog: str | None = None) -> CommandParser:
    """The top parser of a command; its sub-commands (``add_subparsers``) are CommandParsers too."""
    root = CommandParser(prog=prog, description=description, epilog=epilog)
    root.set_defaults(debug=False, verbose=False)
    return root


# Set before the libraries are imported (they read them once), and inherited by worker processes.
_QUIET_ENV = {
    "TRANSFORMERS_VERBOSITY": "error",  # load reports, "some weights were not used", deprecations
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # download bars (they are tqdm frames in a log file)
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "TOKENIZERS_PARALLELISM": "false",  # its "the current process just got forked" warning, once per worker
}
# Python warnings the libraries raise about their own internals (deprecations, defaults that
# changed): nothing a user of tecb can act on.
_QUIET_MODULES = ("transformers", "huggingface_hub", "datasets", "sentence_transformers", "torch", "mteb")


def quiet_libraries(argv: list[str] | None) -> None:
    """Keep the libraries' own chatter out of the output unless ``--verbose`` is on the command line
    (read before parsing: the settings must be in place before anything imports the libraries).
    A setting the user made in the environment wins."""
    import os
    import sys
    import warnings

    args = sys.argv[1:] if argv is None else argv
    if "--verbose" in args:
        return
    for name, value in _QUIET_ENV.items():
        os.environ.setdefault(name, value)
    for module in _QUIET_MODULES:
        warnings.filterwarnings("ignore", module=rf"{module}(\.|$)")
    import logging

    for name in _QUIET_MODULES:
        logging.getLogger(name).setLevel(logging.ERROR)
