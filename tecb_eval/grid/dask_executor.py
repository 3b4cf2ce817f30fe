"""Grid units on a Dask distributed cluster (``run_grid(scheduler=...)``, ``--scheduler``).

Each unit is one Dask task; a split's embeddings are scattered to the cluster once and shared by
the split's reductions. Dask reruns the tasks of a worker that dies; a unit whose scattered input
died with it is resubmitted here with a fresh copy. Results come back to the coordinator, which
alone writes the store, so a rerun unit is written once. Every worker offers a ``MEMORY`` resource
(the per-worker budget) and each unit asks for its estimated peak: Dask's own admission control.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextlib
import logging
import struct
import time

from dask.utils import format_bytes
from distributed import Client, KilledWorker, WorkerPlugin, as_completed
from distributed.client import FutureCancelledError

from tecb_data.errors import UserError
from tecb_data.version import __version__
from tecb_eval.files import source_digest
from tecb_eval.grid.scheduling import (DASK_CONNECT_TIMEOUT, DEFAULT_MEMORY_SHARE, LoadInput, OnResult, Task,
                                       check_timeout, fit_or_skip, longest_first, machine_memory)
from tecb_eval.grid.silent_workers import SILENCE_SECONDS, SilentWorkers
from tecb_eval.grid.work import WORKER_BASELINE_BYTES, run_unit

DASK_MAX_ATTEMPTS = 4  # per unit: its worker (or the worker holding its input) may die 3 times


def connect(address: str, timeout: float = DASK_CONNECT_TIMEOUT) -> Client:
    """A ``distributed.Client`` for ``address``, or one line saying why not, within ``timeout``: a
    transport this machine cannot use, a refused connection (at once, not after ``timeout``), a
    server that does not speak Dask's protocol (a web server, a proxy, anything else)."""
    timeout = check_timeout(timeout)
    failure = (f"cannot reach the Dask scheduler at {address} within {timeout:g} s ({{}}); check the address and "
               "that `dask scheduler` runs there, or raise --scheduler-timeout")
    foreign = (f"the server at {address} does not speak Dask's protocol ({{}}); point --scheduler at the "
               "scheduler's own port (8786 unless `dask scheduler --port` chose another), not its dashboard or "
               "another server")
    try:
        _check_transport(address)
        asyncio.run(_probe(address, timeout))
        return Client(address, timeout=timeout, set_as_default=False)
    except ConnectionRefusedError:
        raise UserError(f"the Dask scheduler at {address} refused the connection: nothing listens on that port; "
                        "start `dask scheduler` (or `tecb-eval workers`) there, or check the address") from None
    except (OSError, TimeoutError, asyncio.TimeoutError) as exc:
        raise UserError(failure.format(type(exc).__name__)) from None
    except ValueError as exc:
        raise UserError(f"--scheduler {address!r}: {exc}") from None
    except NotDask as exc:
        raise UserError(foreign.format(exc)) from None
    except (MemoryError, struct.error, EOFError, TypeError, KeyError, IndexError) as exc:
        # Dask reads a frame length from the first bytes it gets: an HTTP answer reads as exabytes
        # to allocate, a few stray bytes as a frame cut short, a foreign message as no handshake.
        raise UserError(foreign.format(f"its answer read as {type(exc).__name__}")) from None


class NotDask(Exception):
    """What a server that is no Dask scheduler answered, in words."""


def _check_transport(address: str) -> None:
    """Refuse an address whose transport distributed cannot use here (``ucx://`` without UCX)."""
    from distributed.comm import registry
    from distributed.comm.addressing import parse_address

    scheme, _ = parse_address(address)
    try:
        registry.get_backend(scheme).get_connector()
    except (ValueError, TypeError, ImportError) as exc:
        usable = ", ".join(f"{name}://" for name in ("tcp", "tls", "ws", "wss"))
        raise UserError(f"--scheduler {address}: distributed cannot use the {scheme}:// transport on this machine "
                        f"({type(exc).__name__}: {exc}); use one of {usable}") from None


async def _probe(address: str, timeout: float) -> None:
    # A refused connection is said at once: distributed retries it until the timeout.
    from distributed.comm.addressing import parse_address, parse_host_port

    scheme, location = parse_address(address)
    if scheme in ("tcp", "tls", "ws", "wss"):
        host, port = parse_host_port(location)
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        try:
            if scheme == "tcp":
                # A scheduler speaks first: its handshake, prefixed by the message's length in 8
                # bytes. A web server or proxy waits for a request; another server sends other bytes.
                try:
                    head = await asyncio.wait_for(reader.readexactly(8), timeout)
                except asyncio.IncompleteReadError as exc:
                    raise NotDask(f"it closed the connection after {len(exc.partial)} bytes") from None
                except (TimeoutError, asyncio.TimeoutError):
                    raise NotDask(f"it accepted the connection but sent no handshake within {timeout:g} s, as a "
                                  "web server or proxy waiting for a request does; a scheduler too busy to answer "
                                  "needs a higher --scheduler-timeout") from None
                if not 0 < int.from_bytes(head, "little") < 2**26:
                    raise NotDask(f"its first bytes {head!r} are no Dask message")
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
    # distributed's connect() waits for the scheduler's handshake without a time limit, so a server
    # that accepts and never answers would hang the Client forever; the probe bounds the handshake.
    from distributed.comm import connect as comm_connect

    comm = await asyncio.wait_for(comm_connect(address, timeout=timeout), timeout)
    await comm.close()


async def _scheduler_id(address: str, timeout: float) -> str | None:
    """The id of the scheduler answering at ``address`` now: another one than a run began with is
    a restarted scheduler, which knows none of the run's tasks."""
    from distributed.core import rpc

    async with rpc(address, timeout=timeout) as scheduler:
        return (await asyncio.wait_for(scheduler.identity(), timeout)).get("id")


def _restarted(address: str, timeout: float, known: str | None) -> bool:
    """Whether the scheduler answering at ``address`` is another one than the run's (id ``known``)."""
    try:
        now = asyncio.run(_scheduler_id(address, timeout))
    except (OSError, TimeoutError, asyncio.TimeoutError):
        return False
    return now is not None and now != known


def _tecb_on_worker() -> tuple[str, str]:
    # Pickled by reference: a worker without the package cannot even load this function.
    from tecb_data.version import __version__
    from tecb_eval.files import source_digest

    return __version__, source_digest()


class MemoryBudget(WorkerPlugin):
    """A Dask worker plugin: each worker, including one that joins or is restarted mid-grid, offers
    a ``MEMORY`` resource of the per-worker budget (and reuses the memory it frees:
    :mod:`tecb_eval.grid.worker_memory`). Dask's own admission control then starts a
    unit only where its estimated peak is free, so large units do not share a worker's memory."""

    name = "tecb-memory-budget"

    def __init__(self, amount: float):
        self.amount = amount

    async def setup(self, worker) -> None:
        from tecb_eval.grid.worker_memory import reuse_freed_memory

        reuse_freed_memory()  # a worker not started with our preload computes as fast as one that was
        await worker.set_resources(MEMORY=self.amount)


class DaskExecutor:
    """Units as Dask tasks on the cluster at ``address``; a split's embeddings are scattered once."""

    def __init__(self, client: Client, address: str, memory_limit: int | None, log, timeout: float | None = None,
                 silence: float = SILENCE_SECONDS):
        self.address = address
        self.silence = silence  # seconds without a finished unit before a silent worker is named
        self.log = log
        self.client = client
        # How long to ask a scheduler that may be gone whether it still answers: --scheduler-timeout,
        # which connect() gave the client (distributed keeps it as _timeout).
        self.timeout = timeout or getattr(client, "_timeout", None) or DASK_CONNECT_TIMEOUT
        # The client logs a lost scheduler or result with tracebacks; run() says it in one line.
        self._client_log = logging.getLogger("distributed.client")
        self._client_log_level = self._client_log.level
        self._client_log.setLevel(logging.CRITICAL)
        try:
            workers = self._check_workers((__version__, source_digest()))
            limits = [int(info.get("memory_limit") or 0) for info in workers.values()]
            # Per worker: --memory-limit, else a safe share of the workers' own limit (or of this machine's RAM).
            self.budget = memory_limit or int(DEFAULT_MEMORY_SHARE * min((v for v in limits if v),
                                                                        default=machine_memory()))
            self.workers = len(workers)
            self.window = 4 * self.workers  # units submitted ahead, so scattered inputs stay few
            # Tasks the cluster runs at once: a model with fewer units than this has its units' cells
            # cut into pieces (tecb_eval.grid.execution), so no worker waits while one clusters.
            self.slots = max(1, sum(int(info.get("nthreads") or 1) for info in workers.values()))
            self.client.register_plugin(MemoryBudget(float(self.budget - WORKER_BASELINE_BYTES)))
            self.scheduler_id = self.client.scheduler_info().get("id")
        except BaseException:
            self.close()
            raise

    def _check_workers(self, ours: tuple[str, str]) -> dict[str, dict]:
        """Every worker runs our code of tecb (its version and the digest of its source, so a worker
        started from another checkout of the same version is refused); returns the scheduler's
        description of each worker. The scheduler too: it unpickles every task a run sends (an
        encode task names tecb's functions and its model spec), so one running other code fails
        them all with Dask's "Error during deserialization of the task graph"."""
        check_scheduler(self.client, self.address, ours)
        workers = self.client.scheduler_info(n_workers=-1).get("workers", {})
        if not workers:
            raise UserError(f"the Dask scheduler at {self.address} has no workers; "
                            + (memory_restarts(self.client) or f"start some with `dask worker {self.address}`"))
        answers = self.client.run(_tecb_on_worker, on_error="return")
        for worker, answer in sorted(answers.items()):
            if isinstance(answer, BaseException):
                raise UserError(f"Dask worker {worker} cannot run tecb: {answer}; install "
                                f"tecb=={ours[0]} with its [dask] extra in every worker's environment") from None
            if not isinstance(answer, (tuple, list)) or len(answer) != 2:  # a tecb that answers its version alone
                answer = (str(answer), "unknown")
            if answer[0] != ours[0]:
                raise UserError(f"Dask worker {worker} runs tecb {answer[0]}, this process {ours[0]}; install the same "
                                "version on every worker (a score must not depend on where its unit ran)")
            if tuple(answer) != tuple(ours):
                raise UserError(f"Dask worker {worker} runs other tecb code than this process (version {ours[0]} "
                                f"both, source {answer[1]} there, {ours[1]} here); install the same code on every "
                                "worker and restart it (a score must not depend on where its unit ran)")
        return workers

    def run(self, tasks: list[Task], load_input: LoadInput, on_result: OnResult) -> None:
        pending = longest_first(fit_or_skip(tasks, self.budget, " per worker", self.log))
        inputs: dict[str, list] = {}  # input key -> its scattered copies (futures), while a unit needs it
        given: dict[str, int] = {}  # input key -> units sent with it, to take its copies in turn
        users: dict[str, int] = {}
        for task in pending:
            users[task.input_key] = users.get(task.input_key, 0) + 1
        attempts: dict[str, int] = {}
        running: dict[object, Task] = {}
        completed = None

        def submit(task: Task) -> None:
            data = None if task.input_key in inputs else load_input(task.input_key)
            attempt = attempts.get(task.unit.key, 0)
            try:
                if data is not None:
                    # Once per split, not once per cell: the embeddings travel to the cluster once.
                    # An input as many units need as there are workers goes to every worker at once:
                    # held by one, its units would all queue there (Dask places a task where its
                    # input is) while the others idle until work stealing moves one.
                    inputs[task.input_key] = self._scatter(data, everywhere=1 < self.workers <= users[task.input_key])
                copies = inputs[task.input_key]
                given[task.input_key] = given.get(task.input_key, 0) + 1
                future = self.client.submit(run_unit, task.unit, copies[given[task.input_key] % len(copies)],
                                            task.is_reduced,
                                            key=f"tecb-unit-{task.unit.key}-{attempt}", pure=False,
                                            resources={"MEMORY": float(task.unit.memory)})
            except OSError as exc:
                # distributed's connection errors (CommClosedError) and "No valid workers found"
                # (a TimeoutError) are OSErrors: the cluster is gone, not this unit's fault.
                raise self._cluster_lost(exc) from None
            running[future] = task
            if completed is not None:
                completed.add(future)

        def fill() -> None:
            while pending and len(running) < self.window:
                submit(pending.pop(0))

        fill()
        if not running:
            return
        completed = as_completed(list(running), loop=self.client.loop, raise_errors=False)
        with SilentWorkers(self.client, self.log, "clustering", self.silence, running) as watch:
            for future in completed:
                watch.progressed()
                task = running.pop(future)
                result, exc, lost = None, None, False
                try:
                    # A finished unit's result can still be lost: it lives on its worker until gathered.
                    result = future.result() if future.status == "finished" else None
                    if future.status == "error":
                        exc = future.exception()
                except OSError as error:
                    # Gathering failed: the worker holding the result went away (the unit runs again),
                    # or the scheduler did (nothing can run again).
                    if not self._scheduler_answers():
                        raise self._cluster_lost(error, scheduler_answers=False) from None
                    lost = True
                except Exception as error:  # noqa: BLE001 -- sorted into lost or not just below
                    exc = error
                if result is None:
                    if exc is not None and not lost and not worker_lost(exc):
                        raise exc  # the unit's own error (a bug, bad data): not something a rerun fixes
                    attempts[task.unit.key] = attempts.get(task.unit.key, 0) + 1
                    if attempts[task.unit.key] >= DASK_MAX_ATTEMPTS:
                        raise UserError(f"{task.unit.label}: its Dask worker was lost {DASK_MAX_ATTEMPTS} times "
                                        "(out of memory?); finished cells are stored, rerun to resume") from None
                    self.log(f"note: {task.unit.label}: its worker or its input was lost; running it again")
                    inputs.pop(task.input_key, None)  # the scattered copy may have gone with the worker
                    submit(task)
                    continue
                users[task.input_key] -= 1
                if users[task.input_key] == 0:
                    inputs.pop(task.input_key, None)  # released on the cluster once no unit needs it
                on_result(task.unit, result)
                fill()

    def _scatter(self, data, everywhere: bool = False) -> list:
        """``data``'s copies on the cluster: one, or with ``everywhere`` one per worker, each sent to
        its worker alone. (Not ``broadcast=True``: Dask's replication of it retries a worker killed
        meanwhile for as long as the client holds the data, and the run hangs.) ``client.scatter``
        sends to a worker the scheduler still lists: one killed a moment ago refuses the connection
        (CommClosedError) while the others live. The send is tried again until the scheduler has
        dropped the dead worker, within --scheduler-timeout; with no worker left, the error goes up
        (the cluster is lost)."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                workers = sorted(self.client.scheduler_info(n_workers=-1).get("workers", {})) if everywhere else []
                if len(workers) < 2:
                    return [self.client.scatter(data, hash=False)]
                return [self.client.scatter(data, hash=False, workers=[worker]) for worker in workers]
            except OSError:
                if time.monotonic() > deadline or not self._has_workers():
                    raise
                time.sleep(0.2)

    def _has_workers(self) -> bool:
        try:
            return bool(self.client.scheduler_info(n_workers=-1).get("workers"))
        except (OSError, TimeoutError):
            return False

    def _scheduler_answers(self) -> bool:
        try:
            asyncio.run(_probe(self.address, self.timeout))
        except (OSError, TimeoutError, asyncio.TimeoutError):
            return False
        return True

    def _cluster_lost(self, exc: OSError, scheduler_answers: bool | None = None) -> UserError:
        """One line for a cluster that stopped taking work mid-run: its scheduler, or every worker, is gone."""
        # distributed's own text names sockets and streams, except a short one ("No valid workers found").
        cause = f"{type(exc).__name__}: {exc}" if 0 < len(str(exc)) <= 60 else type(exc).__name__
        if not (self._scheduler_answers() if scheduler_answers is None else scheduler_answers):
            return UserError(f"lost the Dask scheduler at {self.address} mid-run (it no longer answers); the cells "
                             "finished before are stored: restart the scheduler and its workers, then rerun the same "
                             "command to resume")
        if _restarted(self.address, self.timeout, self.scheduler_id):
            return UserError(f"the Dask scheduler at {self.address} was restarted mid-run and knows none of this "
                             "run's tasks; the cells finished before are stored: rerun the same command to resume")
        return UserError(f"the Dask cluster at {self.address} lost its workers mid-run and none took over ({cause}); "
                         f"the cells finished before are stored: start workers (`dask worker {self.address}`), then "
                         "rerun the same command to resume")

    def close(self, abandon: bool = False) -> None:
        # The memory plugin stays registered: the cluster may be shared, and another client's run
        # needs it on every worker that joins or restarts after this run ends (a worker without it
        # offers no MEMORY, and that run's units would wait for one for ever).
        try:
            self.client.close()
        finally:
            self._client_log.setLevel(self._client_log_level)


def check_scheduler(client: Client, address: str, ours: tuple[str, str]) -> None:
    """The scheduler runs our code of tecb too: it unpickles every task a run sends."""
    how = ("start the scheduler from the same tecb installation as this process and the workers "
           "(`tecb-eval workers` starts both), then rerun")
    try:
        answer = client.run_on_scheduler(_tecb_on_worker)
    except OSError:
        raise  # the scheduler went away: connect's and run's own lines say so
    except Exception as exc:  # noqa: BLE001 -- raised there: it cannot import our code (or this function)
        raise UserError(f"the Dask scheduler at {address} cannot load tecb's code ({type(exc).__name__}: "
                        f"{str(exc).strip().splitlines()[0] if str(exc).strip() else 'no detail'}); it unpickles "
                        f"every task a run sends, so it needs tecb {ours[0]} too: {how}") from None
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:  # a tecb that answers its version alone
        answer = (str(answer), "unknown")
    if tuple(answer) != tuple(ours):
        raise UserError(f"the Dask scheduler at {address} runs other tecb code than this process (version "
                        f"{answer[0]} there, {ours[0]} here; source {answer[1]} there, {ours[1]} here); it "
                        f"unpickles every task a run sends: {how}")


def memory_restarts(client: Client) -> str:
    """What the scheduler heard of workers its nannies restarted for going over their memory limit
    (a worker that preloads a model larger than its limit is restarted in a loop and is never there
    when asked), as advice; "" where it heard of none."""
    try:
        events = client.get_events("worker-restart-memory")
    except Exception:  # noqa: BLE001 -- advice only: the line without it still says what is wrong
        return ""
    sizes = [event.get("rss") for _, event in events if isinstance(event, dict)]
    sizes = [size for size in sizes if isinstance(size, (int, float))]
    if not sizes:
        return ""
    return (f"their nannies restarted workers {len(sizes)} times for going over their memory limit (the last "
            f"at {format_bytes(sizes[-1])}): start them with a larger `--memory-limit` than the model needs, "
            "or fewer workers per machine")


def worker_lost(exc: BaseException) -> bool:
    """The unit failed because its worker died, or its scattered input went with one."""
    # FutureCancelledError: the scheduler forgot the unit (its input, or its finished result, died
    # with a worker before we gathered it).
    return isinstance(exc, (KilledWorker, FutureCancelledError, cf.CancelledError)) or "lost" in str(exc).lower()
