"""The habits `tecb-data` and `tecb-eval` share on the command line.

- ``--debug`` is taken before or after the command (``tecb-data build --debug ...``).
- A usage error (a missing required option, an unknown choice) is one line naming it and how to
  get help, not argparse's usage block of a dozen lines.
- Help texts with line breaks (each command's examples, its epilog) are kept as written.
- Options are never abbreviated: ``--limit 1`` is refused, not read as ``--limit-splits 1``.
"""

from __future__ import annotations

import argparse

from tecb_data.repeats import StoreOnce


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
        # An option that takes one value, given twice, is refused rather than the last one winning
        # (tecb_data.repeats); argument groups share this registry.
        self.register("action", None, StoreOnce)
        self.register("action", "store", StoreOnce)
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
        if message.endswith("expected one argument"):
            # `--memory-limit -5GB`: argparse takes a value that starts with "-" for another option.
            option = message.removeprefix("argument ").split(":")[0].split("/")[-1]
            message += f" (a value that starts with '-' is given as {option}=VALUE)"
        self.exit(2, f"{self.prog}: error: {message}; try `{self.prog} --help`\n")


def root_parser(prog: str, description: str, epilog: str | None = None) -> CommandParser:
    """The top parser of a command; its sub-commands (``add_subparsers``) are CommandParsers too."""
    root = CommandParser(prog=prog, description=description, epilog=epilog)
    root.set_defaults(debug=False, verbose=False)
    return root


# Set before the libraries are imported (they read them once), and inherited by worker processes.
_QUIET_ENV = {
    "TRANSFORMERS_VERBOSITY": "error",  # load reports, "some weights were not used", deprecations
    # huggingface_hub and datasets set their loggers' level from these when imported (a level set
    # before would be overwritten): "Retrying in 1s [Retry 1/5]." and the like.
    "HF_HUB_VERBOSITY": "error",
    "DATASETS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # download bars (they are tqdm frames in a log file)
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "TOKENIZERS_PARALLELISM": "false",  # its "the current process just got forked" warning, once per worker
    # torch's ONNX exporter logs "torchvision is not installed. Skipping torchvision::nms" and the like
    # through torch's own handler (its glog-style "W1126 ..." lines); "-" sets a log to ERROR.
    "TORCH_LOGS": "-torch,-onnx",
    # Python warnings in the processes we start (the grid's workers, multiprocessing's resource
    # tracker): UMAP's "Spectral initialisation failed ... Falling back", "leaked semaphore objects".
    "PYTHONWARNINGS": "ignore",
}
# Python warnings the libraries raise about their own internals (deprecations, defaults that
# changed): nothing a user of tecb can act on.
_QUIET_MODULES = ("transformers", "huggingface_hub", "datasets", "sentence_transformers", "torch", "mteb")


# Our own loggers keep their warnings when the libraries' are silenced.
_OUR_LOGGERS = ("tecb_data", "tecb_eval")


def quiet_libraries(argv: list[str] | None) -> None:
    """Keep the libraries' own chatter out of the output unless ``--verbose`` is on the command line
    (read before parsing: the settings must be in place before anything imports the libraries).
    A setting the user made in the environment wins.

    Python warnings go through logging (``logging.captureWarnings``, the ``py.warnings`` logger):
    with ``--verbose`` they are printed as one line each, otherwise dropped, and so are the
    libraries' log records below ERROR (the root logger's level; ours keep WARNING)."""
    import logging
    import os
    import sys
    import warnings

    args = sys.argv[1:] if argv is None else argv
    logging.captureWarnings(True)
    if "--verbose" in args:
        # captureWarnings gives "py.warnings" a NullHandler when it has none: they would vanish.
        shown = logging.getLogger("py.warnings")
        if not any(isinstance(h, logging.StreamHandler) for h in shown.handlers):
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(message)s"))
            shown.addHandler(handler)
        return
    for name, value in _QUIET_ENV.items():
        os.environ.setdefault(name, value)
    for module in _QUIET_MODULES:
        warnings.filterwarnings("ignore", module=rf"{module}(\.|$)")
    # A warning raised by a library on our behalf (torch.onnx.export called from tecb_eval, UMAP in
    # this process) carries our module's name or the standard library's: none is for the user.
    logging.getLogger("py.warnings").setLevel(logging.ERROR)
    logging.getLogger().setLevel(logging.ERROR)
    for name in _OUR_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    for name in _QUIET_MODULES:
        logging.getLogger(name).setLevel(logging.ERROR)
