"""Errors a user can cause. The CLI prints them as one line and exits 2; anything else is a bug."""


class UserError(Exception):
    """A problem with the user's input, configuration or environment, with what to do about it."""

    exit_code = 2


class VerificationError(UserError):
    """A published folder does not match its manifest."""

    exit_code = 1


def run_command(prog: str, parser, argv, *, interrupted) -> int:
    """Run a parsed sub-command: a UserError becomes one line on stderr and its exit code
    (``--debug`` prints its traceback too and keeps the exit code); Ctrl-C says what state it left
    behind: ``interrupted`` is that sentence, or a function that tells it when the interruption
    comes. Ctrl-C after the work, while the interpreter exits, is handled the same way (exit 130)."""
    args = parser.parse_args(argv)
    try:
        return _run(prog, args, interrupted)
    finally:
        if argv is None:  # the installed command, not an in-process caller with its own signal handling
            _exit_130_on_a_late_ctrl_c(prog, interrupted)


def _run(prog: str, args, interrupted) -> int:
    import sys

    try:
        return args.func(args)
    except UserError as exc:
        if args.debug:
            # The traceback for whoever debugs, and the exit code a script relies on all the same.
            import traceback

            traceback.print_exc()
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        state = interrupted() if callable(interrupted) else interrupted
        print(f"{prog}: interrupted; {state}", file=sys.stderr)
        return 130


_late = {"interrupted": False, "running": False}


def _exit_130_on_a_late_ctrl_c(prog: str, interrupted) -> None:
    """Ctrl-C after the command's work, while the interpreter runs its exit handlers (torch's,
    tqdm's, temporary folders'): no traceback from inside one of them, every handler still runs,
    and the exit code is 130, as for any interrupted command.

    Called when the command returns, it takes SIGINT over and registers the last exit handler, which
    runs first: it runs the others itself, then ends the process with 130 if Ctrl-C came meanwhile."""
    import atexit
    import os
    import signal
    import sys
    import threading

    if threading.current_thread() is not threading.main_thread():
        return

    def noted(signum, frame):
        _late["interrupted"] = True

    # From now on (the command's work is done) Ctrl-C is noted, never raised into a library's handler.
    signal.signal(signal.SIGINT, noted)

    def finish() -> None:
        if _late["running"]:
            return  # called again by the run below
        _late["running"] = True
        atexit._run_exitfuncs()  # the others, now, with Ctrl-C noted instead of raised inside them
        if _late["interrupted"]:
            try:
                state = interrupted() if callable(interrupted) else interrupted
            except Exception:  # the state cannot be told this late: the work itself had finished
                state = "the command had finished its work"
            print(f"{prog}: interrupted; {state}", file=sys.stderr)
            sys.stderr.flush()
            sys.stdout.flush()
            os._exit(130)

    atexit.register(finish)
