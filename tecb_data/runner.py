"""How `tecb-data` and `tecb-eval` run a parsed command and end its process.

- A :class:`~tecb_data.errors.UserError` is one line on stderr and its exit code (``--debug`` prints
  the traceback too).
- Ctrl-C (SIGINT), ``kill`` (SIGTERM) and a closed terminal (SIGHUP) stop the command the same way:
  the work in hand unwinds as for a KeyboardInterrupt (worker pools and child processes are shut
  down on the way), one line says what state the command left, and the exit code is the shell's for
  that signal (130, 143, 129). A command says what it leaves through ``args.interrupted``, a
  function it sets before its work (or a parser default), else the ``interrupted`` the tool gives.
- A reader that goes away (``| head -1``) ends the command quietly with 141, as a shell reports a
  process ended by SIGPIPE.
- The installed command ends its process itself once every exit handler has run (see
  :class:`_ExitHook`).
"""

from __future__ import annotations

import signal
import sys

from tecb_data.errors import UserError

# What each stopping signal is called in the message, and the exit code a shell gives it.
STOPPING = {signal.SIGINT: ("interrupted", 130), signal.SIGTERM: ("terminated", 143),
            signal.SIGHUP: ("hung up", 129)}
PIPE_CLOSED = 141  # 128 + SIGPIPE: what a shell reports for a writer whose reader went away


class _Stop:
    """Which signal stopped the command (SIGTERM and SIGHUP arrive as SIGINT does, so every handler
    the work installed for Ctrl-C, and every ``except KeyboardInterrupt``, serves them too)."""

    def __init__(self):
        self.signum = signal.SIGINT

    def forward(self, signum, frame):
        self.signum = signum
        if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL, None):
            # SIGINT is ignored (a job a script started with `&`: the shell ignores Ctrl-C for it, and
            # Python then installs no handler), so forwarding would drop SIGTERM too: raise it here.
            raise KeyboardInterrupt
        # The main thread's SIGINT handler of the moment (the grid's, an output's, or Python's own
        # that raises KeyboardInterrupt) takes it from here.
        signal.raise_signal(signal.SIGINT)

    def install(self) -> None:
        import threading

        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGHUP):
                signal.signal(signum, self.forward)

    @property
    def word(self) -> str:
        return STOPPING[self.signum][0]

    @property
    def code(self) -> int:
        return STOPPING[self.signum][1]


def run_command(prog: str, parser, argv, *, interrupted) -> int:
    """Run a parsed sub-command (see the module). ``interrupted``: the sentence that says what an
    interruption left, or a function that tells it when the interruption comes; a command's own
    ``args.interrupted`` comes first."""
    args = parser.parse_args(argv)
    stop = _Stop()
    if argv is None:  # the installed command; an in-process caller (a test) keeps its own signal handling
        stop.install()
    code = _RAISED
    try:
        if sys.stdout is None:
            # Python starts with no sys.stdout when its descriptor 1 is closed (`>&-`): print() would
            # drop every line in silence and the command would still say it succeeded.
            code = 2
            if sys.stderr is not None:
                print(f"{prog}: error: standard output is closed, so what this command prints would be lost; "
                      "send it to a file, a pipe or /dev/null", file=sys.stderr)
            return code
        code = _run(prog, args, interrupted, stop)
        return code
    finally:
        if argv is None:
            _ExitHook(prog, lambda: what_was_left(args, interrupted), stop, code).install()


_RAISED = object()  # the command ended in an exception: the interpreter prints it and exits as usual


def what_was_left(args, interrupted) -> str:
    told = getattr(args, "interrupted", None) or interrupted
    return told() if callable(told) else told


def _run(prog: str, args, interrupted, stop: _Stop) -> int:
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
        print(f"{prog}: {stop.word}; {what_was_left(args, interrupted)}", file=sys.stderr)
        return stop.code
    except BrokenPipeError:
        _stdout_to_devnull()
        return PIPE_CLOSED


def _stdout_to_devnull() -> None:
    """The reader of stdout is gone: what is still buffered for it goes nowhere, so that the
    interpreter's last flush raises nothing (Python's documentation on SIGPIPE does the same)."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout already closed or not a file
        pass


class _ExitHook:
    """The last exit handler of the installed command, which runs first.

    Ctrl-C (or SIGTERM, SIGHUP) after the command's work, while the interpreter runs its exit
    handlers (torch's, tqdm's, temporary folders'), is noted instead of raised inside one of them;
    every handler still runs, and the exit code is the signal's, as for any stopped command. Once
    they have run, the hook ends the process with the command's code, skipping the interpreter's
    teardown of every module, which writes nothing and after torch, transformers and MTEB takes over
    a second (docs/benchmarks.md, "Ending the process"): the command has closed its files, and the
    exit handlers that flush and stop what libraries hold have run. A command that ended in an
    exception (``code`` left out) exits as the interpreter does."""

    def __init__(self, prog: str, state, stop: _Stop, code=_RAISED):
        self.prog, self.state, self.stop, self.code = prog, state, stop, code
        self.noted = False
        self.running = False

    def install(self) -> None:
        import atexit
        import threading

        if threading.current_thread() is not threading.main_thread():
            return
        # From now on (the command's work is done) a stopping signal is noted, never raised into a library's handler.
        for signum in STOPPING:
            signal.signal(signum, self._note)
        atexit.register(self._finish)

    def _note(self, signum, frame) -> None:
        self.noted = True
        self.stop.signum = signum

    def _finish(self) -> None:
        import atexit
        import os

        if self.running:
            return  # called again by the run below
        self.running = True
        atexit._run_exitfuncs()  # the others, now, with a stopping signal noted instead of raised inside them
        if self.noted:
            try:
                state = self.state()
            except Exception:  # the state cannot be told this late: the work itself had finished
                state = "the command had finished its work"
            print(f"{self.prog}: {self.stop.word}; {state}", file=sys.stderr)
            _flushed()
            os._exit(self.stop.code)
        if self.code is not _RAISED:
            closed = not _flushed()
            os._exit(PIPE_CLOSED if closed and self.code in (0, None) else 0 if self.code is None else int(self.code))


def _flushed() -> bool:
    """Flush stdout and stderr; False where stdout's reader had gone (`| head`)."""
    reader_there = True
    for stream in (sys.stdout, sys.stderr):
        if stream is None:  # its descriptor was closed when Python started
            continue
        try:
            stream.flush()
        except BrokenPipeError:
            reader_there = reader_there and stream is not sys.stdout
            _stdout_to_devnull()
        except (OSError, ValueError):  # a stream already closed
            pass
    return reader_there
