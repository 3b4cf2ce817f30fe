"""A short grid on one core and on two, cold: one `tecb-eval run` each, fresh processes.

The grid: a x4 replica of the GermEval dev set (bench_scale's replica), its
first 3 splits, the paper's 14 configurations, the cheap built-in encoder ``tfidf-lsa``. Each
command is a new `tecb-eval run` with its own empty results store and cache folder, so the worker
processes, the encoding and every reduction start from nothing. Numba's on-disk cache
(``NUMBA_CACHE_DIR``, tecb_eval.clustering.numba_cache.keep_compiled_umap) is what a machine keeps between runs:
``--numba-cache fresh`` gives each command an empty one (the first run ever on a machine), ``kept``
(default) one folder filled by an untimed run first. Serial and ``--jobs 2`` alternate, ``--repeat``
times, so a busy machine's load falls on both alike; the figure is the median wall time's ratio.

Beside the wall times it prints what bounds them: the CPU seconds of every process of a run
(coordinator and workers; more with ``--jobs`` where workers redo a process's one-off work), each
unit's seconds in the serial run (its reduction and clusterings, from the results store), the
longest unit (no schedule finishes sooner) and the makespan of those units packed longest first on
``--jobs`` workers, and the best speed-up those figures allow: the serial run's time outside units
stays serial, and ``--jobs`` cores cannot finish the parallel run's CPU seconds sooner than
CPU / jobs.

    .venv/bin/python bench/bench_cold_jobs.py [--repeat 2] [--jobs 2] [--numba-cache kept|fresh]
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_scale import BLURBS_DEV, replicate  # noqa: E402

from tecb_data.build import build  # noqa: E402


def run(data: Path, work: Path, jobs: int, numba_dir: Path, tag: str) -> tuple[float, float, Path]:
    """Wall seconds, CPU seconds of the command and every process it started, its results store."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NUMBA_CACHE_DIR": str(numba_dir), "TECB_JOBS": str(jobs)}
    folder = work / tag
    folder.mkdir()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([str(REPO / ".venv" / "bin" / "tecb-eval"), "run", "--data", str(data), "--model", "tfidf-lsa",
                           "--results", str(folder / "results.jsonl"), "--cache-dir", str(folder / "cache"),
                           "--limit-splits", "3", "--jobs", str(jobs), "--quiet", "--no-figure1"],
                          capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    # Workers are reaped by the command, so their CPU time is in the command's children's.
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"tecb-eval run --jobs {jobs} failed: {done.stderr.strip().splitlines()[-1:]}")
    return seconds, cpu, folder / "results.jsonl"


def unit_seconds(results: Path) -> dict[tuple[str, str], float]:
    """Seconds per unit (split x reduction): its reduction (counted on one row) and its clusterings."""
    units: dict[tuple[str, str], float] = {}
    for line in results.read_text().splitlines():
        row = json.loads(line)
        key = (row["split"], row["reduction"])
        units[key] = units.get(key, 0.0) + row["reduce_s"] + row["cluster_s"]
    return units


def makespan(seconds: list[float], workers: int) -> float:
    """Units started longest first, each on the worker that frees up first (LPT)."""
    loads = [0.0] * workers
    for s in sorted(seconds, reverse=True):
        heapq.heappush(loads, heapq.heappop(loads) + s)
    return max(loads)


def scores(results: Path) -> dict:
    return {(r["split"], r["reduction"], r["algorithm"]): tuple(r[k] for k in ("v_measure", "ami", "ari"))
            for r in map(json.loads, results.read_text().splitlines())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--numba-cache", choices=("kept", "fresh"), default="kept")
    args = parser.parse_args()
    if not BLURBS_DEV.is_file():
        print(f"skipped: {BLURBS_DEV} is absent (the shared GermEval data)")
        return 0
    work = Path(tempfile.mkdtemp(prefix="bench-cold-jobs-"))
    try:
        data = build("blurbs", replicate(BLURBS_DEV, 4, work), work / "data", views=("s2s",))[0][0]
        kept = work / "numba-kept"
        if args.numba_cache == "kept":
            started = time.perf_counter()
            run(data, work, 1, kept, "fill")
            print(f"untimed run filling the numba cache: {time.perf_counter() - started:.1f} s")
        times: dict[int, list] = {1: [], args.jobs: []}
        for i in range(args.repeat):
            for jobs in (1, args.jobs):
                numba_dir = kept if args.numba_cache == "kept" else work / f"numba-{i}-{jobs}"
                seconds, cpu, results = run(data, work, jobs, numba_dir, f"run-{i}-{jobs}")
                times[jobs].append((seconds, cpu, results))
                print(f"  round {i + 1}, --jobs {jobs}: {seconds:6.1f} s wall, {cpu:6.1f} s CPU over its processes "
                      f"(load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)", flush=True)
        if any(scores(r) != scores(times[1][0][2]) for runs in times.values() for _, _, r in runs):
            raise SystemExit("the scores differ between runs: a bug, not a timing")
        serial = statistics.median(s for s, _, _ in times[1])
        parallel = statistics.median(s for s, _, _ in times[args.jobs])
        print(f"cold `tecb-eval run`, x4 replica, 3 splits, 14 configurations, tfidf-lsa, numba cache {args.numba_cache}: "
              f"serial {serial:.1f} s, --jobs {args.jobs} {parallel:.1f} s (medians of {args.repeat}): "
              f"speed-up {serial / parallel:.2f}x (scores identical)")
        # What bounds it, from the fastest serial run and the parallel run with the least CPU.
        serial_wall, serial_cpu, serial_results = min(times[1], key=lambda t: t[0])
        _, parallel_cpu, parallel_results = min(times[args.jobs], key=lambda t: t[1])
        units = unit_seconds(serial_results)
        in_units = sum(units.values())
        outside = serial_wall - in_units
        longest = max(units, key=units.get)
        packed = makespan(list(units.values()), args.jobs)
        print(f"serial run: {serial_wall:.1f} s wall, {serial_cpu:.1f} s CPU; {len(units)} units {in_units:.1f} s, "
              f"outside units (start, imports, loading, encoding, writing) {outside:.1f} s")
        print("  units, serial seconds: " + ", ".join(f"{split}/{red} {sec:.1f}" for (split, red), sec in
                                                       sorted(units.items(), key=lambda kv: -kv[1])))
        print(f"  longest unit {longest[0]}/{longest[1]} {units[longest]:.1f} s; the units packed longest first on "
              f"{args.jobs} workers: {packed:.1f} s")
        summed = sum(unit_seconds(parallel_results).values())
        print(f"--jobs {args.jobs}: {parallel_cpu:.1f} s CPU over its processes, {parallel_cpu - serial_cpu:+.1f} s "
              f"against serial (each worker's start and imports, numba code that cannot be cached compiled again "
              f"in each process); units' wall seconds summed over workers {summed:.1f} s (serial {in_units:.1f} s; "
              f"more where the machine's other work took the cores)")
        bound = max(outside + packed, parallel_cpu / args.jobs)
        print(f"best --jobs {args.jobs} wall clock these figures allow: {bound:.1f} s = max(outside units + packed "
              f"units {outside + packed:.1f} s, CPU / {args.jobs} {parallel_cpu / args.jobs:.1f} s): at most "
              f"{serial / bound:.2f}x")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
