"""Where grid units run: in this process, in local worker processes, or on a Dask cluster
(:mod:`tecb_eval.grid.dask_executor`); what they share is in :mod:`tecb_eval.grid.scheduling`.

Each executor takes a list of :class:`Task` and calls ``on_result`` in the coordinating process
as units finish, in whatever order they finish; only the coordinator writes the results store and
the caches. Units start longest first (a better spread over the workers) and only while their
estimated peak memory fits the budget, so large Ward units do not run side by side into the OOM
killer. Scores do not depend on the executor (see :mod:`tecb_eval.grid.work`).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
from concurrent.futures.process import BrokenProcessPool

from tecb_data.errors import UserError
from tecb_eval.grid.children import quiet_child
from tecb_eval.grid.scheduling import (DEFAULT_MEMORY_SHARE, LoadInput, OnResult, Task, fit_or_skip, gib, longest_first,
                                       machine_memory)
from tecb_eval.grid.work import WORKER_BASELINE_BYTES, run_unit, warm_up


# -- in this process --------------------------------------------------------------------------
class SerialExecutor:
    """Units one after the other in this process; ``threads``: how many of a unit's cells may run
    side by side (:func:`tecb_eval.grid.work.run_unit`), the cores no worker process uses."""

    def __init__(self, memory_limit: int, log, threads: int = 1):
        self.memory_limit = memory_limit
        self.log = log
        self.threads = threads

    def run(self, tasks: list[Task], load_input: LoadInput, on_result: OnResult) -> None:
        for task in fit_or_skip(tasks, self.memory_limit, "", self.log):
            # Cells side by side hold up to that many cells' peaks at once: only where that many
            # units' estimated peaks would fit the budget, as workers running side by side must.
            fits = WORKER_BASELINE_BYTES + self.threads * task.unit.memory <= self.memory_limit
            threads = self.threads if fits else 1
            on_result(task.unit, run_unit(task.unit, load_input(task.input_key), task.is_reduced, threads))

    def close(self, abandon: bool = False) -> None:
        pass


# -- local worker processes -------------------------------------------------------------------
class LocalExecutor:
    """``jobs`` worker processes on this machine, started once and kept for every model."""

    def __init__(self, jobs: int, memory_limit: int, log):
        # Each worker holds its baseline before any unit: no more workers than leave half the
        # budget to the units themselves.
        fitting = max(1, memory_limit // (2 * WORKER_BASELINE_BYTES))
        if jobs > fitting:
            log(f"note: {jobs} worker processes would hold {gib(jobs * WORKER_BASELINE_BYTES)} before any unit; "
                f"running {fitting} within the memory limit {gib(memory_limit)} (raise --memory-limit for more)")
        self.jobs = min(jobs, fitting)
        self.memory_limit = memory_limit
        self.log = log
        self.pool = None
        # The workers start now and import what units need while this process loads the datasets
        # and encodes, rather than after: 2.5 s per worker off the critical path of a short grid
        # (bench/bench_cold_jobs.py). Queued first, each warm-up runs before any unit on its worker.
        self.warming = [self._pool().submit(warm_up) for _ in range(self.jobs)]

    def _pool(self):
        if self.pool is None:
            # loky's pool (the process pool joblib and scikit-learn use): fork+exec workers, so
            # neither torch's threads in this process nor a script without a __main__ guard get
            # into them, and workers that die are reported, not waited for.
            from loky import ProcessPoolExecutor

            self.pool = ProcessPoolExecutor(max_workers=self.jobs, initializer=quiet_child)
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
        # After Ctrl-C or an error, running units are abandoned: their workers are stopped. After a
        # grid, every unit has come back and a worker holds nothing to save (it writes no file but
        # numba's cache, atomically, while it compiles): it is stopped too, rather than waited for
        # through the interpreter's teardown of numba and scikit-learn (1.6 s measured on a busy
        # machine, 0.1 s stopped; bench/bench_cold_jobs.py).
        self.pool.shutdown(wait=True, kill_workers=True)
        self.pool = None


@contextlib.contextmanager
def open_executor(*, jobs: int, scheduler: str | None, memory_limit: int | None, timeout: float, log,
                  threads: int = 1):
    """The executor for ``jobs`` local worker processes (1: this process, running up to ``threads``
    of a unit's cells side by side) or for the Dask ``scheduler``."""
    if scheduler is not None:
        try:
            from tecb_eval.grid.dask_executor import DaskExecutor, connect
        except ImportError:
            raise UserError("--scheduler needs dask.distributed: pip install -e '.[dask]' in a clone of tecb, "
                            "here and on every worker") from None

        executor = DaskExecutor(connect(scheduler, timeout), scheduler, memory_limit, log, timeout=timeout)
    else:
        budget = memory_limit or int(DEFAULT_MEMORY_SHARE * machine_memory())
        executor = SerialExecutor(budget, log, threads) if jobs == 1 else LocalExecutor(jobs, budget, log)
    try:
        yield executor
    except BaseException:
        executor.close(abandon=True)
        raise
    executor.close()
