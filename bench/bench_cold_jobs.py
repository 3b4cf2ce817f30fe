"""A short grid on one core and on two, cold: one `tecb-eval run` each, fresh processes.

The grid of issue 24, point 3: a x4 replica of the GermEval dev set (bench_scale's replica), its
first 3 splits, the paper's 14 configurations, the cheap built-in encoder ``tfidf-lsa``. Each
command is a new `tecb-eval run` with its own empty results store and cache folder, so the worker
processes, the encoding and every reduction start from nothing. Numba's on-disk cache
(``NUMBA_CACHE_DIR``, tecb_eval.grid.work.keep_compiled_umap) is what a machine keeps between runs:
``--numba-cache fresh`` gives each command an empty one (the first run ever on a machine), ``kept``
(default) one folder filled by an untimed run first. Serial and ``--jobs 2`` alternate, ``--repeat``
times, so a busy machine's load falls on both alike; the figure is the median wall time's ratio.

    .venv/bin/python bench/bench_cold_jobs.py [--repeat 2] [--jobs 2] [--numba-cache kept|fresh]
"""

from __future__ import annotations

import argparse
import os
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


def run(data: Path, work: Path, jobs: int, numba_dir: Path, tag: str) -> float:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NUMBA_CACHE_DIR": str(numba_dir), "TECB_JOBS": str(jobs)}
    folder = work / tag
    folder.mkdir()
    started = time.perf_counter()
    done = subprocess.run([str(REPO / ".venv" / "bin" / "tecb-eval"), "run", "--data", str(data), "--model", "tfidf-lsa",
                           "--results", str(folder / "results.jsonl"), "--cache-dir", str(folder / "cache"),
                           "--limit-splits", "3", "--jobs", str(jobs), "--quiet", "--no-figure1"],
                          capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"tecb-eval run --jobs {jobs} failed: {done.stderr.strip().splitlines()[-1:]}")
    return seconds


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
        times = {1: [], args.jobs: []}
        for i in range(args.repeat):
            for jobs in (1, args.jobs):
                numba_dir = kept if args.numba_cache == "kept" else work / f"numba-{i}-{jobs}"
                seconds = run(data, work, jobs, numba_dir, f"run-{i}-{jobs}")
                times[jobs].append(seconds)
                print(f"  round {i + 1}, --jobs {jobs}: {seconds:6.1f} s (load {os.getloadavg()[0]:.1f} on "
                      f"{os.cpu_count()} cores)", flush=True)
        serial, parallel = statistics.median(times[1]), statistics.median(times[args.jobs])
        print(f"cold `tecb-eval run`, x4 replica, 3 splits, 14 configurations, tfidf-lsa, numba cache {args.numba_cache}: "
              f"serial {serial:.1f} s, --jobs {args.jobs} {parallel:.1f} s (medians of {args.repeat}): "
              f"speed-up {serial / parallel:.2f}x")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
