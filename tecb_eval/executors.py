"""Where grid units run: in this process, in local worker processes, or on a Dask cluster.

Each executor takes a list of :class:`Task` and calls ``on_result`` in the coordinating process
as units finish, in whatever order they finish; only the coordinator writes the results store and
the caches. Units start longest first (a better spread over the workers) and only while their
estimated peak memory fits the budget, so large Ward units do not run side by side into the OOM
killer. Scores do not depend on the executor (see :mod:`tecb_eval.work`).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import os
import signal
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from tecb_data.errors import UserError
from tecb_eval.work import WORKER_BASELINE_BYTES, UnitResult, WorkUnit, run_unit

# A safe share of the machine's memory for the grid's units, when no --memory-limit is given.
DEFAULT_MEMORY_SHARE = 0.7
DASK_CONNECT_TIMEOUT = 30.0  # seconds; --scheduler-timeout


@dataclass(frozen=True)
class Task:
    unit: WorkUnit
    input_key: str  # units with the same key share their input (a split's embeddings)
    is_reduced: bool  # the input is the cached reduction, not the embeddings


OnResult = Callable[[WorkUnit, UnitResult], None]
LoadInput = Callable[[str], np.ndarray]


# -- budgets ----------------------------------------------------------------------------------
def machine_memory() -> int:
    """Physical memory, or the cgroup's limit where one is set (containers)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit_file).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total


def parse_memory(value) -> int | None:
    """``"8GB"``, ``"512MiB"``, a share of RAM (``"0.5"``) or bytes -> bytes; None stays None."""
    if value is None:
        return None
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        number = None
    if number is not None and 0 < number <= 1:
        return int(machine_memory() * number)
    if number is not None and number > 1:
        return int(number)
    from dask.utils import parse_bytes  # dask's own reading of "8GB", "512 MiB", ...

    try:
        parsed = int(parse_bytes(text))
    except (ValueError, TypeError, KeyError):
        parsed = 0
    if parsed <= 0:
        raise UserError(f"memory limit {value!r}: not a size; give e.g. 8GB, 512MiB, or a share of RAM like 0.5")
    return parsed


def check_jobs(jobs, scheduler) -> int:
    """The number of local worker processes: ``jobs``, else ``$TECB_JOBS``, else every core this
    process may use. On a Dask cluster (``scheduler``) the cluster's workers run the units."""
    if scheduler is not None:
        if jobs not in (None, 1):
            raise UserError("give either jobs (local worker processes) or a Dask scheduler, not both")
        return 1
    if jobs is None and os.environ.get("TECB_JOBS", "").strip():
        text = os.environ["TECB_JOBS"].strip()
        if not text.isdigit() or int(text) < 1:
            raise UserError(f"TECB_JOBS={text!r}: give a positive number of worker processes")
        return int(text)
    if jobs is None:
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if isinstance(jobs, bool) or not isinstance(jobs, (int, np.integer)) or jobs < 1:
        raise UserError(f"jobs must be a positive number of worker processes, got {jobs!r}")
    return int(jobs)


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def fit_or_skip(tasks: list[Task], budget: int, where: str, log) -> list[Task]:
    """The tasks that fit ``budget`` alone; one line for each that does not. None fitting is an error."""
    fitting = [t for t in tasks if t.unit.memory + WORKER_BASELINE_BYTES <= budget]
    if tasks and not fitting:
        smallest = min(t.unit.memory for t in tasks) + WORKER_BASELINE_BYTES
        raise UserError(f"memory limit {_gib(budget)}{where} is below the smallest unit of this grid "
                        f"(about {_gib(smallest)}); raise --memory-limit")
    for task in tasks:
        if task not in fitting:
            log(f"skipped {task.unit.label}: needs about {_gib(task.unit.memory + WORKER_BASELINE_BYTES)}, more than "
                f"the memory limit {_gib(budget)}{where}; raise --memory-limit to run it (the rest goes on)")
    return fitting


def longest_first(tasks: list[Task]) -> list[Task]:
    return sorted(tasks, key=lambda t: (-t.unit.cost, t.unit.key))


# -- in this process --------------------------------------------------------------------------
class SerialExecutor:
    def __init__(self, memory_limit: int, log):
        self.memory_limit = memory_limit
        self.log = log

    def run(self, tasks: list[Task], load_input: LoadInput, on_result: OnResult) -> None:
        for task in fit_or_skip(tasks, self.memory_limit, "", self.log):
            on_result(task.unit, run_unit(task.unit, load_input(task.input_key), task.is_reduced))

    def close(self, abandon: bool = False) -> None:
        pass


# -- local worker processes -------------------------------------------------------------------
def _worker_init() -> None:
    # Ctrl-C is the coordinator's to handle: it stops the workers and says what was kept.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class LocalExecutor:
    """``jobs`` worker processes on this machine, started once and kept for every model."""

    def __init__(self, jobs: int, memory_limit: int, log):
        # Each worker holds its baseline before any unit: no more workers than leave half the
        # budget to the units themselves.
        fitting = max(1, memory_limit // (2 * WORKER_BASELINE_BYTES))
        if jobs > fitting:
            log(f"note: {jobs} worker processes would hold {_gib(jobs * WORKER_BASELINE_BYTES)} before any unit; "
                f"running {fitting} within the memory limit {_gib(memory_limit)} (raise --memory-limit for more)")
        self.jobs = min(jobs, fitting)
        self.memory_limit = memory_limit
        self.log = log
        self.pool = None

    def _pool(self):
        if self.pool is None:
            # loky's pool (the process pool joblib and scikit-learn use): fork+exec workers, so
            # neither torch's threads in this process nor a script without a __main__ guard get
            # into them, and workers that die are reported, not waited for.
            from loky import ProcessPoolExecutor

            self.pool = ProcessPoolExecutor(max_workers=self.jobs, initializer=_worker_init)
        return self.pool

    def run(self, tasks: list[Task], load_input: LoadInput, on_result: OnResult) -> None:
        queue = longest_first(fit_or_skip(tasks, self.memory_limit, "", self.log))
        running: dict[cf.Future, Task] = {}
        used = self.jobs * WORKER_BASELINE_BYTES
        while queue or running:
            for task in list(queue):
                if len(running) >= self.jobs:
                    break
                # A unit starts when its estimated peak fits beside those running; the largest
                # waits for room rather than letting smaller ones overtake it forever.
                if used + task.unit.memory <= self.memory_limit or not running:
                    queue.remove(task)
                    future = self._pool().submit(run_unit, task.unit, load_input(task.input_key), task.is_reduced)
                    running[future] = task
                    used += task.unit.memory
                else:
                    break
            done, _ = cf.wait(running, return_when=cf.FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: running[f].unit.key):
                task = running.pop(future)
                used -= task.unit.memory
                try:
                    result = future.result()
                except BrokenProcessPool:
                    raise UserError(f"a worker process died while running {task.unit.label} (killed by the system, "
                                    "out of memory?); finished cells are in the results store: rerun to resume, "
                                    "with a lower --memory-limit or fewer --jobs") from None
                on_result(task.unit, result)

    def close(self, abandon: bool = False) -> None:
        if self.pool is None:
            return
        # After Ctrl-C or an error, running units are abandoned: their workers are stopped.
        self.pool.shutdown(wait=True, kill_workers=abandon)
        self.pool = None


@contextlib.contextmanager
def open_executor(*, jobs: int, scheduler: str | None, memory_limit: int | None, timeout: float, log):
    if scheduler is not None:
        try:
            from tecb_eval.dask_executor import DaskExecutor, connect
        except ImportError:
            raise UserError("--scheduler needs dask.distributed: pip install 'tecb[dask]' here and on every "
                            "worker") from None

        executor = DaskExecutor(connect(scheduler, timeout), scheduler, memory_limit, log)
    else:
        budget = memory_limit or int(DEFAULT_MEMORY_SHARE * machine_memory())
        executor = SerialExecutor(budget, log) if jobs == 1 else LocalExecutor(jobs, budget, log)
    try:
        yield executor
    except BaseException:
        executor.close(abandon=True)
        raise
    executor.close()
