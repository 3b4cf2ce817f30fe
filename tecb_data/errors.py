"""Errors a user can cause. The CLI prints them as one line and exits 2; anything else is a bug."""


class UserError(Exception):
    """A problem with the user's input, configuration or environment, with what to do about it."""

    exit_code = 2


class VerificationError(UserError):
    """A published folder does not match its manifest."""

    exit_code = 1


def run_command(prog: str, parser, argv, *, interrupted) -> int:
    """Run a parsed sub-command: a UserError becomes one line on stderr and its exit code
    (``--debug`` re-raises it for the traceback); Ctrl-C says what state it left behind:
    ``interrupted`` is that sentence, or a function that tells it when the interruption comes."""
    import sys

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except UserError as exc:
        if args.debug:
            raise
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        state = interrupted() if callable(interrupted) else interrupted
        print(f"{prog}: interrupted; {state}", file=sys.stderr)
        return 130
