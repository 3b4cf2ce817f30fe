"""What every executor shares: the task it is handed, the memory budget, which units fit it and in
which order they start. Below both the local executors and the Dask one, so neither imports the other.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from tecb_data.errors import UserError
from tecb_eval.grid.work import WORKER_BASELINE_BYTES, UnitResult, WorkUnit

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


def gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def fit_or_skip(tasks: list[Task], budget: int, where: str, log) -> list[Task]:
    """The tasks that fit ``budget`` alone; one line for each that does not. None fitting is an error."""
    fitting = [t for t in tasks if t.unit.memory + WORKER_BASELINE_BYTES <= budget]
    if tasks and not fitting:
        smallest = min(t.unit.memory for t in tasks) + WORKER_BASELINE_BYTES
        raise UserError(f"memory limit {gib(budget)}{where} is below the smallest unit of this grid "
                        f"(about {gib(smallest)}); raise --memory-limit")
    for task in tasks:
        if task not in fitting:
            log(f"skipped {task.unit.label}: needs about {gib(task.unit.memory + WORKER_BASELINE_BYTES)}, more than "
                f"the memory limit {gib(budget)}{where}; raise --memory-limit to run it (the rest goes on)")
    return fitting


def longest_first(tasks: list[Task]) -> list[Task]:
    return sorted(tasks, key=lambda t: (-t.unit.cost, t.unit.key))
