"""The grid at full benchmark size: serial vs local worker processes vs a Dask cluster.

Builds a full-size replica of Blurbs S2S from the GermEval 2019 dev set (ten copies of every
book, each copy with its own ISBN and its own title suffix: 20,790 books, 18,410 unique titles,
about the published set's 17,726), encodes it once with all-MiniLM-L6-v2 (384-d), then runs the
paper's 14 configurations on the same splits three times from the same embeddings and no
reduction cache: in this process (``jobs=1``), with ``--jobs`` worker processes, and on a Dask
``LocalCluster`` with as many single-threaded worker processes. Prints per-phase seconds,
speed-ups, peak RSS per worker, the identical-scores check, and a projection of the whole
six-dataset grid per model for 2, 16 and 64 cores from the measured per-unit costs.

    .venv/bin/python bench/bench_scale.py [--splits 2] [--jobs 2]

Targets on the 2-core machines here: reduce+cluster phase >= 1.7x with --jobs 2, >= 1.5x on the
2-worker cluster, identical scores.
"""

from __future__ import annotations

import argparse
import gzip
import heapq
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchdata import BLURBS_DEV, PUBLISHED, SHARED, STATS  # noqa: E402,F401  (bench_cold_jobs imports BLURBS_DEV here)
from tecb_data.build import build  # noqa: E402
from tecb_data.demo import demo_input  # noqa: E402
from tecb_data.load import load  # noqa: E402
from tecb_eval.grid import executors, scheduling  # noqa: E402
from tecb_eval.clustering.algorithms import PAPER_CONFIGURATIONS  # noqa: E402
from tecb_eval.grid.plan import GridConfig  # noqa: E402
from tecb_eval.grid.run import Grid  # noqa: E402
from tecb_eval.grid.store import ResultsStore  # noqa: E402

METRICS = ["v_measure", "homogeneity", "completeness", "ami", "ari", "noise_fraction", "n_clusters_found"]
ORDER = ["reduction", "algorithm", "split"]
# Seconds grow like n for the reductions and the other algorithms (n log n at most), like n^2 for Ward.
EXPONENT = {"agglomerative": 2.0}


def replicate(source: Path, copies: int, out: Path) -> Path:
    """``copies`` copies of every book, each copy with a distinct ISBN and title."""
    text = gzip.open(source, "rt", encoding="utf-8").read()
    head, _, rest = text.partition("<book ")
    body, _, tail = ("<book " + rest).rpartition("</book>")
    body += "</book>"
    parts = []
    for k in range(copies):
        copy = body if k == 0 else re.sub(r"<title>(.*?)</title>", lambda m: f"<title>{m.group(1)} ({k + 1})</title>", body)
        copy = re.sub(r"<isbn>(\d+)</isbn>", lambda m: f"<isbn>{m.group(1)}{k:02d}</isbn>", copy)
        parts.append(copy)
    replica = head + "\n".join(parts) + tail
    isbns = re.findall(r"<isbn>(\d+)</isbn>", replica)
    assert len(isbns) == len(set(isbns)), "replica ISBNs are not distinct"
    path = out / "blurbs_dev_x10.txt"
    path.write_text(replica, encoding="utf-8")
    return path


def run_mode(name: str, bench, warmup, work: Path, embeddings: Path, args, **options):
    """One mode, timed after a warm-up on the demo data through the same workers: numba compiles
    UMAP once per process (a one-time cost, printed apart), which a real grid pays once."""
    cache = work / f"cache-{name}"
    cache.mkdir()
    (cache / "embeddings").symlink_to(embeddings)  # the same vectors; reductions computed afresh
    common = dict(configurations=PAPER_CONFIGURATIONS, protocol="legacy", seed=42, progress=False, time_limit=None)
    log = lambda m: print(f"  {m}")  # noqa: E731
    with executors.open_executor(jobs=options.get("jobs", 1), scheduler=options.get("scheduler"), memory_limit=None,
                                 timeout=scheduling.DASK_CONNECT_TIMEOUT, log=print) as executor:
        started = time.perf_counter()
        Grid([warmup], GridConfig(models=["tfidf-lsa"], cache_dir=work / f"warmup-{name}", limit_splits=4, **common),
             store=ResultsStore(None), log=log).run(executor)
        warm = time.perf_counter() - started
        grid = Grid([bench], GridConfig(models=["minilm-l6"], cache_dir=cache, limit_splits=args.splits, **common),
                    store=ResultsStore(None), log=log)
        frame = grid.run(executor)
    phase = grid.wall_seconds["reduce+cluster"]
    rss = ", ".join(f"{v / 2**20:,.0f}" for _, v in sorted(grid.worker_rss.items()))
    print(f"{name:>14}: reduce+cluster {phase:7.1f} s wall; worker seconds: reduce {frame.reduce_s.sum():6.1f}, "
          f"cluster {frame.cluster_s.sum():6.1f}; peak RSS per worker (MiB): {rss}; warm-up {warm:.1f} s")
    return frame.sort_values(ORDER).reset_index(drop=True), phase


def unit_costs(frame) -> list[tuple[str, str, int, float]]:
    """(reduction, algorithm, n, seconds) per cell, the reduction's time on its first algorithm."""
    reduce_time = frame.groupby(["split", "reduction"]).reduce_s.sum()
    out = []
    for row in frame.itertuples():
        out.append((row.reduction, row.algorithm, row.n_samples, row.cluster_s))
    for (split, reduction), seconds in reduce_time.items():
        n = int(frame[(frame.split == split) & (frame.reduction == reduction)].n_samples.iloc[0])
        out.append((reduction, "(reduce)", n, float(seconds)))
    return out


def fit_model(costs) -> dict:
    """Per (reduction, algorithm): c in seconds = c * n^e (e from EXPONENT), least squares over splits."""
    model = {}
    for key in sorted({(r, a) for r, a, _, _ in costs}):
        e = EXPONENT.get(key[1], 1.0)
        xs = np.array([n ** e for r, a, n, _ in costs if (r, a) == key], dtype=float)
        ys = np.array([s for r, a, _, s in costs if (r, a) == key], dtype=float)
        model[key] = (float(xs @ ys / (xs @ xs)), e)
    return model


def split_sizes(bench, name: str) -> list[int]:
    """Published split sizes: Blurbs' from the replica's split proportions scaled to the published
    total; the others' total spread evenly over their splits (their split sizes are not published)."""
    stats_file, n_splits = PUBLISHED[name]
    total = json.loads((STATS / stats_file).read_text())["test"]["num_samples"]
    if name.startswith("Blurbs"):
        sizes = np.array([len(s.texts) for s in bench.splits], dtype=float)
        return [int(round(x)) for x in sizes / sizes.sum() * total]
    return [total // n_splits] * n_splits


def project(model: dict, bench, memory_per_core: float) -> None:
    units = []  # (seconds, dataset) per (split, reduction): the grid's unit
    for name in PUBLISHED:
        for n in split_sizes(bench, name):
            for reduction in sorted({r for _, r in PAPER_CONFIGURATIONS}):
                seconds = model.get((reduction, "(reduce)"), (0.0, 1.0))
                total = seconds[0] * n ** seconds[1]
                for algorithm, r in PAPER_CONFIGURATIONS:
                    if r == reduction:
                        c, e = model[(reduction, algorithm)]
                        total += c * n ** e
                units.append((total, name, n))
    work = sum(u[0] for u in units)
    print(f"\nprojection, whole six-dataset grid (14 configurations) per model, reduce+cluster only, from the "
          f"measured per-unit costs ({len(units)} units, {work / 3600:.1f} core-hours):")
    for cores in (2, 16, 64):
        loads = [0.0] * cores
        heapq.heapify(loads)
        for seconds, _, _ in sorted(units, reverse=True):  # longest first, as the executors start them
            heapq.heappush(loads, heapq.heappop(loads) + seconds)
        print(f"  {cores:>2} cores: {max(loads) / 3600:6.2f} h (serial {work / 3600:.1f} h; "
              f"longest unit {max(u[0] for u in units) / 3600:.2f} h)")
    ward = max(n for _, name, n in units)
    print(f"  largest split {ward:,} texts: Ward holds about {11 * ward ** 2 / 2**30:,.0f} GiB; on {memory_per_core:.0f} GiB "
          "per worker such units are skipped with one line each (raise --memory-limit on a larger machine)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=2, help="first N splits of the replica (default 2, the largest)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes and Dask workers (default 2)")
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--skip-dask", action="store_true")
    args = parser.parse_args()
    if not BLURBS_DEV.is_file():
        print(f"skipped: {BLURBS_DEV} is absent (the shared GermEval data)")
        return 0
    work = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    try:
        replica = replicate(BLURBS_DEV, args.copies, work)
        folder = build("blurbs", replica, work / "data", views=("s2s",))[0][0]
        bench = load(folder)
        splits = bench.splits[:args.splits]
        print(f"replica: {bench.mteb_name}, {len(bench.splits)} splits, {sum(len(s.texts) for s in bench.splits):,} rows, "
              f"{len({t for s in bench.splits for t in s.texts}):,} unique titles; largest split "
              f"{max(len(s.texts) for s in bench.splits):,}; running the first {len(splits)} "
              f"({', '.join(f'{len(s.texts):,}' for s in splits)} texts), {len(PAPER_CONFIGURATIONS)} configurations")

        warmup = load(build("blurbs", demo_input("blurbs"), work / "demo")[0][0])
        # Encode once, outside the timed phases.
        started = time.perf_counter()
        encode_cache = work / "cache-encode"
        config = GridConfig(models=["minilm-l6"], configurations=[("minibatch_kmeans", "none")], protocol="legacy",
                            seed=42, cache_dir=encode_cache, limit_splits=args.splits, progress=False, jobs=1,
                            time_limit=None)
        Grid([bench], config, store=ResultsStore(None), log=lambda m: None).run()
        print(f"encoding (once, shared by every mode): {time.perf_counter() - started:.1f} s")
        embeddings = encode_cache / "embeddings"

        frames, phases = {}, {}
        frames["serial"], phases["serial"] = run_mode("serial", bench, warmup, work, embeddings, args, jobs=1)
        frames["jobs"], phases["jobs"] = run_mode(f"--jobs {args.jobs}", bench, warmup, work, embeddings, args,
                                                  jobs=args.jobs)
        if not args.skip_dask:
            from distributed import LocalCluster

            with LocalCluster(n_workers=args.jobs, threads_per_worker=1, processes=True, dashboard_address=":0",
                              host="127.0.0.1", silence_logs=40) as cluster:
                frames["dask"], phases["dask"] = run_mode(f"dask x{args.jobs}", bench, warmup, work, embeddings,
                                                          args, scheduler=cluster.scheduler_address)
        print()
        for name in frames:
            if name != "serial":
                same = frames[name][ORDER + METRICS].equals(frames["serial"][ORDER + METRICS])
                print(f"{name}: speed-up {phases['serial'] / phases[name]:.2f}x over serial "
                      f"(reduce+cluster wall), scores identical to serial: {same}")
                if not same:
                    a, b = frames["serial"], frames[name]
                    for i in a.index[(a[METRICS] != b[METRICS]).any(axis=1)]:
                        print(f"  differs: {a.split[i]} {a.algorithm[i]}/{a.reduction[i]}: v_measure "
                              f"{a.v_measure[i]!r} vs {b.v_measure[i]!r}")
        project(fit_model(unit_costs(frames["serial"])), bench, memory_per_core=24 * 0.7 / max(1, args.jobs))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
