"""What a command that reads a results store is doing, said once it has taken a few seconds.

A store of thousands of models takes `table`, `report` and `recommend` minutes; without a word
that reads as a hang. :func:`working` around such a command writes, past :data:`PROGRESS_DELAY`
seconds, one line naming the step in progress (:func:`step`) and the time so far, then one every
:data:`tecb_data.progress.LINE_INTERVAL` seconds; a command that ends sooner writes nothing. Steps
over the models show their own count (:func:`per_model`).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time

from tecb_data.progress import LINE_INTERVAL

# A step over a store shows its progress once it has run this long (a store of a few models says
# nothing; one of thousands says how far it is).
PROGRESS_DELAY = 5.0

_step = ["starting"]


def step(text: str) -> None:
    """Name the step in progress (``reading the results store``), for the next line :func:`working` writes."""
    _step[0] = text


@contextlib.contextmanager
def working(what: str, *, stream=None):
    """Around a command reading a store: its step and time so far, past :data:`PROGRESS_DELAY` s."""
    done = threading.Event()
    start = time.monotonic()
    step("starting")

    def run() -> None:
        wait = PROGRESS_DELAY
        while not done.wait(wait):
            out = stream or sys.stderr
            if out is not None:
                print(f"{what}: {_step[0]} ({time.monotonic() - start:.0f} s so far)", file=out, flush=True)
            wait = LINE_INTERVAL

    thread = threading.Thread(target=run, name="tecb-working", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def per_model(models, what: str):
    """``models`` as an iterable that shows, past :data:`PROGRESS_DELAY` seconds, how many of them
    ``what`` (e.g. "comparing each model with the best on X") has done: a bar on a terminal, lines
    in a log."""
    from tecb_data.progress import progress

    step(what)
    return progress(models, desc=what, unit="models", delay=PROGRESS_DELAY)


def reads_store(command: str):
    """A command function (``args -> exit code``) that reads a results store, run inside :func:`working`."""
    import functools

    def wrap(function):
        @functools.wraps(function)
        def run(args):
            with working(f"tecb-eval {command}"):
                return function(args)
        return run
    return wrap
