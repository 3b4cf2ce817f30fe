"""`tecb-eval workers`: a warm Dask cluster on this machine, for `tecb-eval run --scheduler`.

Dask's own ``LocalCluster``: the scheduler in this process, N worker processes under Dask's nanny,
each preloaded with :mod:`tecb_eval.grid.worker_models`, whose ``dask_setup`` imports torch and
sentence-transformers as the worker starts (and with this module, whose ``dask_setup`` leaves
Ctrl-C to the command). A run on it pays neither import, and the workers keep the models they
load from one run to the next. The address is the one line on stdout, so a script can read it;
Ctrl-C or SIGTERM closes the cluster, and tecb_data.runner turns either into the shell's exit code.
"""

from __future__ import annotations

import errno
import os
import sys

from tecb_data.errors import UserError

PRELOAD = "tecb_eval.grid.worker_models"
DEFAULT_PORT = 8786  # Dask's own: what `dask scheduler` listens on and the manual's examples name
_POLL_S = 1.0  # how often the idle command looks whether the scheduler is still up


def _cores() -> int:
    # The cores this process may use (a container's or taskset's share), as --jobs counts them.
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _memory_limit(text: str | None, workers: int) -> dict:
    """LocalCluster's ``memory_limit`` for ``--memory-limit`` as Dask reads it (``4GB``, a share of
    RAM, ``0`` for none), checked before a worker starts: Dask's own error would come from inside a
    worker, as a traceback. None and ``auto``: LocalCluster's default, the memory shared by the workers."""
    if text is None or text == "auto":
        return {}
    if not text.strip():
        raise UserError(f"--memory-limit {text!r}: empty; give e.g. 4GB, 512MiB, a share of RAM like 0.5, auto or 0 "
                        "(no limit)")
    import logging

    from distributed.worker_memory import parse_memory_limit

    from tecb_eval.grid.work import WORKER_BASELINE_BYTES

    try:
        limit = parse_memory_limit(text, 1, workers, logger=logging.getLogger("distributed.worker.memory"))
    except (ValueError, TypeError, OverflowError):  # OverflowError: "inf", which no int can hold
        raise UserError(f"--memory-limit {text!r}: not a size Dask reads; give e.g. 4GB, 512MiB, a share of RAM "
                        "like 0.5, auto (this machine's memory shared by the workers) or 0 (no limit)") from None
    if limit is not None and limit < WORKER_BASELINE_BYTES:
        # The nanny would restart a worker over its limit again and again, before any work.
        raise UserError(f"--memory-limit {text!r}: {max(limit, 0)} bytes per worker is less than a worker holds "
                        f"before any work (about {WORKER_BASELINE_BYTES // 2**20} MiB); give e.g. 4GB or auto")
    return {"memory_limit": text}


def _check(args) -> None:
    if args.workers < 1:
        raise UserError(f"--workers {args.workers}: give at least 1 worker process")
    if args.threads_per_worker < 1:
        raise UserError(f"--threads-per-worker {args.threads_per_worker}: give at least 1 thread")
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port {args.port}: give a port from 1 to 65535, or 0 for any free port")
    if args.dashboard is not None:
        import importlib.util

        from distributed.utils import clean_dashboard_address

        if importlib.util.find_spec("bokeh") is None:
            raise UserError("--dashboard needs bokeh, which is not installed: `pip install bokeh`, or leave "
                            "--dashboard out")
        try:
            clean_dashboard_address(_dashboard(args))
        except (ValueError, TypeError):
            raise UserError(f"--dashboard {args.dashboard!r}: not an address; give e.g. :8787 or 127.0.0.1:8787, "
                            "or --dashboard alone for any free port") from None


def _dashboard(args) -> str | None:
    # --dashboard alone: any free port on --host, not on every interface (Dask's reading of ":0"),
    # so the dashboard is no more exposed than the scheduler. Dask's parser takes no IPv6 brackets.
    if args.dashboard == "":
        return f"{args.host}:0" if ":" not in args.host else ":0"
    return args.dashboard


def _innermost(exc: BaseException) -> BaseException:
    # LocalCluster wraps the scheduler's or a worker's failure in two RuntimeErrors ("Cluster failed
    # to start: Scheduler failed to start."); the cause at the bottom is what the user can act on.
    seen = set()
    while (exc.__cause__ or exc.__context__) is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return exc


def _not_started(exc: BaseException, args) -> UserError:
    cause = _innermost(exc)
    if isinstance(cause, OSError) and cause.errno == errno.EADDRINUSE:
        return UserError(f"port {args.port} on {args.host} is in use (a Dask scheduler, or another `tecb-eval "
                         "workers`, may be running there); give --port 0 for any free port, or another --port")
    if isinstance(cause, OSError):  # a host this machine has no address for, a port it may not open
        return UserError(f"cannot listen on {args.host} port {args.port} ({cause.strerror or cause}); give --host "
                         "an address of this machine (default 127.0.0.1) and a free --port")
    return UserError(f"the Dask workers did not start ({type(cause).__name__}: {cause}); --verbose shows Dask's "
                     f"log, and each worker needs torch and sentence-transformers (it imports them: {PRELOAD})")


def _hint(cluster, args) -> str:
    count = len(cluster.workers)
    what = f"{count} warm Dask worker{'s' if count != 1 else ''}"
    run = f"tecb-eval run --scheduler {cluster.scheduler_address}{' --encode-on gpu' if args.gpu else ''} ..."
    dashboard = f"; dashboard: {cluster.dashboard_link}" if args.dashboard is not None else ""
    return f"{what} ready: use {'them' if count != 1 else 'it'} with `{run}`; Ctrl-C stops the workers{dashboard}"


def dask_setup(worker) -> None:
    """On each worker, before the warm-up (this module is the first preload): Ctrl-C in the
    terminal reaches the whole process group, and a worker it interrupted died mid-import or
    mid-task with a traceback. The command stops its workers itself, in order, as the grid's
    children leave Ctrl-C to it (tecb_eval.grid.children); a worker whose command is gone, even
    SIGKILLed, still exits: Dask's workers follow their nanny's process."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


class _HeldInterrupt:
    """Ctrl-C (or SIGTERM, which tecb_data.runner raises as one) while the cluster starts is held
    until it is up, and then closes it in order: a LocalCluster interrupted mid-start leaves
    half-started workers to an exit handler that trips over them, with a traceback. A second
    Ctrl-C stops at once (a start that hangs)."""

    def __enter__(self):
        import signal
        import threading

        self.held, self.previous = False, None
        if threading.current_thread() is threading.main_thread():  # Python sets handlers there only
            self.previous = signal.signal(signal.SIGINT, self._hold)
        return self

    def _hold(self, signum, frame) -> None:
        if self.held:
            raise KeyboardInterrupt
        self.held = True
        print("tecb-eval: stopping once the workers have started (Ctrl-C again to stop now)", file=sys.stderr,
              flush=True)

    def __exit__(self, kind, exc, traceback) -> None:
        import signal

        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
        if kind is not None:
            # A start that failed after a Ctrl-C is the Ctrl-C's doing (a worker it reached before
            # the worker could ignore it): interrupted, not an error.
            self.release()

    def release(self) -> None:
        """The held Ctrl-C, if any, to the handler of the moment (Python's: a KeyboardInterrupt)."""
        import signal

        if self.held:
            self.held = False
            signal.raise_signal(signal.SIGINT)


def _cmd_workers(args) -> int:
    _check(args)
    memory_limit = _memory_limit(args.memory_limit, args.workers)
    import logging
    import time

    from distributed import LocalCluster
    from distributed.core import Status
    from distributed.utils import silence_logging_cmgr

    # Dask's warnings (a worker restarted over its memory limit) only with --verbose: the output is
    # the address line and the hint; its errors always. Held here, around the cluster, because the
    # cluster puts back the level it found as it closes, and closing logs what it cuts off.
    level = logging.WARNING if args.verbose else logging.ERROR
    with silence_logging_cmgr(level):
        with _HeldInterrupt() as held:
            try:
                cluster = LocalCluster(
                    n_workers=args.workers, threads_per_worker=args.threads_per_worker, processes=True,
                    host=args.host, scheduler_port=args.port, dashboard_address=_dashboard(args),
                    preload=[__name__, PRELOAD], resources={"GPU": 1} if args.gpu else None,
                    silence_logs=level, **memory_limit)
            except (OSError, RuntimeError, TimeoutError) as exc:
                # LocalCluster has closed what it had started: nothing is left running.
                raise _not_started(exc, args) from None
        with cluster:  # closed on the way out, Ctrl-C and SIGTERM included
            held.release()
            print(cluster.scheduler_address, flush=True)
            print(_hint(cluster, args), file=sys.stderr, flush=True)
            while cluster.scheduler.status not in (Status.closing, Status.closed, Status.failed):
                time.sleep(_POLL_S)
    # A client closed the scheduler (`Client.shutdown()`): the cluster is gone, and so is the command.
    print("tecb-eval: the Dask scheduler was shut down by a client; the workers are stopped", file=sys.stderr)
    return 0


def register(commands) -> None:
    workers = commands.add_parser(
        "workers", help="keep warm Dask workers on this machine for `run --scheduler`",
        description="Start a Dask scheduler and worker processes on this machine (Dask's own LocalCluster), each "
                    "with torch and sentence-transformers imported, and keep them up until Ctrl-C. Prints the "
                    "scheduler's address on stdout: give it to `tecb-eval run --scheduler`. Workers keep the "
                    "models they load from one run to the next.",
        epilog="examples:\n"
               "  tecb-eval workers --workers 2   # then: tecb-eval run ... --scheduler tcp://127.0.0.1:8786\n"
               "  tecb-eval workers --workers 1 --gpu --memory-limit 16GB   # on a machine with a GPU\n"
               "  tecb-eval workers --port 0   # any free port: the address is the line on stdout")
    workers.add_argument("--workers", type=int, default=_cores(), metavar="N",
                         help="worker processes (default: every core this process may use, here %(default)s)")
    workers.add_argument("--threads-per-worker", type=int, default=1, metavar="N",
                         help="threads per worker (default 1: an encoder's vectors depend on torch's thread count, "
                              "so 1 keeps them equal to a run in one process with one thread)")
    workers.add_argument("--memory-limit", metavar="SIZE",
                         help="memory per worker, as Dask reads it: 4GB, 512MiB, a share of RAM like 0.5, 0 for no "
                              "limit, or auto (default: this machine's memory shared by the workers)")
    workers.add_argument("--port", type=int, default=DEFAULT_PORT,
                         help=f"the scheduler's port (default {DEFAULT_PORT}; 0: any free port)")
    workers.add_argument("--host", default="127.0.0.1",
                         help="the address to listen on (default 127.0.0.1: this machine only); anyone who can "
                              "reach the scheduler can run code on the workers, so open it to trusted networks only")
    workers.add_argument("--gpu", action="store_true",
                         help="for a machine with a GPU: give each worker Dask's resource GPU=1, so that `tecb-eval "
                              "run --encode-on gpu` sends its encode tasks here (the workers share the machine's GPUs)")
    workers.add_argument("--dashboard", nargs="?", const="", metavar="ADDRESS",
                         help="serve Dask's dashboard (needs bokeh) at ADDRESS, e.g. :8787 (every interface); "
                              "without ADDRESS on any free port of --host; its link is in the line on stderr "
                              "(default: no dashboard)")
    # What an interruption leaves (tecb_data.runner), from the start: Ctrl-C may come during the imports.
    workers.set_defaults(func=_cmd_workers, interrupted="the workers are stopped")
