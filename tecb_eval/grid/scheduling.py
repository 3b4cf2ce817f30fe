"""What every executor shares: the task it is handed, the memory budget, which units fit it and in
which order they start. Below both the local executors and the Dask one, so neither imports the other.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
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


MIB = 2**20
_ASK = "give --memory-limit e.g. 8GB, 512MiB, or a share of RAM like 0.5"


def parse_memory(value) -> int | None:
    """``"8GB"``, ``"512MiB"``, a share of RAM (``"0.5"``: a bare number from 0 to 1) or a whole
    number of bytes (``8589934592``: bare digits, at least 1 MiB) -> bytes; None stays None.

    A bare number above 1 with a fraction or an exponent (``"2.0"``, ``"1e9"``) is neither a share
    nor plainly bytes, and a bare count under 1 MiB is no budget anyone means as bytes (``"2"`` was
    meant as 2 GB): both are refused, asking for a unit, rather than read as a few bytes."""
    if value is None:
        return None
    text = str(value).strip()
    if not text:  # dask's parse_bytes reads "" as 1 byte
        raise UserError(f"memory limit {value!r}: empty; {_ASK}")
    try:
        number = float(text)
    except ValueError:
        number = None
    if number is not None:
        if not math.isfinite(number):
            raise UserError(f"memory limit {value!r}: not a finite size; {_ASK}")
        if 0 < number <= 1:
            return int(machine_memory() * number)
        if number > 1:
            example = f"{number:g}GB" if number < 1e5 else "8GB"
            if not text.isdigit():
                raise UserError(f"memory limit {value!r}: a number above 1 without a unit is ambiguous (a share of "
                                f"RAM is at most 1, bytes are whole); give a unit, e.g. --memory-limit {example}, "
                                "or a share of RAM like 0.5")
            if int(text) < MIB:
                raise UserError(f"memory limit {value!r}: a bare number above 1 counts bytes, and {text} bytes cannot "
                                f"be meant; give a unit, e.g. --memory-limit {example}, or a share of RAM like 0.5")
            return int(text)
    from dask.utils import parse_bytes  # dask's own reading of "8GB", "512 MiB", ...

    try:
        parsed = int(parse_bytes(text))
    except OverflowError:  # "1e400GB": a float that became infinite
        raise UserError(f"memory limit {value!r}: not a finite size; {_ASK}") from None
    except (ValueError, TypeError, KeyError):
        parsed = 0
    if parsed <= 0:
        raise UserError(f"memory limit {value!r}: not a size; {_ASK}")
    return parsed


def check_timeout(seconds, option: str = "--scheduler-timeout") -> float:
    """A wait in seconds: a finite number above 0 (NaN would never time out, 0 never connect)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float, np.integer, np.floating)) \
            or not math.isfinite(seconds) or seconds <= 0:
        raise UserError(f"{option} {seconds!r}: not a finite number of seconds above 0; give e.g. "
                        f"{option} {DASK_CONNECT_TIMEOUT:g}")
    return float(seconds)


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


# Below this much estimated unit work (work.estimate_cost's rough seconds), a grid whose worker count
# was not asked for runs in this process: starting workers costs each a fresh import of the stack
# (about 2 s, bench/bench_cold_jobs.py), and 2 workers save at most half the work. The measurements
# behind the threshold: docs/benchmarks.md, "When a short grid stays in this process".
MIN_POOL_WORK_SECONDS = 5.0


def local_jobs(jobs: int, *, chosen: bool, side_by_side: int, work_seconds: float) -> int:
    """The local worker processes a grid gets: never more than the units a model's pass runs side
    by side (a one-unit grid runs in this process), and none for a grid too small to pay for their
    start unless ``jobs`` (or ``$TECB_JOBS``) was ``chosen``. 1 means this process."""
    jobs = min(jobs, side_by_side)
    if not chosen and work_seconds < MIN_POOL_WORK_SECONDS:
        return 1
    return jobs


def gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def plan_ward(task: Task, budget: int) -> Task:
    """``task`` with Ward's path chosen for ``budget``: the n x n matrix where it fits beside the
    worker's baseline and the unit's input, else the vectors (same labels, O(n d) memory)."""
    return replace(task, unit=replace(task.unit, ward_budget=max(0, budget - WORKER_BASELINE_BYTES)))


def fit_or_skip(tasks: list[Task], budget: int, where: str, log) -> list[Task]:
    """The tasks that fit ``budget`` alone (Ward's path chosen for it); one line for each that does
    not. None fitting is an error."""
    tasks = [plan_ward(t, budget) for t in tasks]
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
