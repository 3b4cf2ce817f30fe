"""Every configuration at 25k, 50k, 100k and 200k texts with 300 labels: wall time and peak RSS.

The data: the GermEval 2019 dev set's 2,079 book titles, replicated (each copy its own suffix, as
bench_scale's replica) to the largest size asked, labelled by each book's most specific genre
(258 of them), the largest genres split by copy parity until there are ``--classes`` (300). The
encoder is fixed and cheap (character 3-4-gram hashing, a seeded sparse random projection to
384-d, L2-normalised), so the clustering side is what is measured. Each n is a seeded random
subset of the same rows.

Every step runs in a fresh process, as a grid unit runs in a worker: one thread, the grid's own
reducers, estimators, Ward path choice and metrics (``tecb_eval.grid.work``). A step reports its
seconds, the metrics' seconds and its peak RSS (the process's, baseline of imports included). A
step whose time projected from the sizes before it (growth exponent fitted so far) would overrun
``--step-limit`` or the time left of ``--budget-minutes`` is not run: it is printed as
"projected" with the projection. Then: the growth exponent per configuration, the largest n each
reaches within a 24 GiB machine (from the measured RSS growth), the embedding cache at the
largest n, and the projection for one model over the six published datasets at full size with
--jobs 2 and on 16 / 64 workers.

    .venv/bin/python bench/bench_scale200k.py                       # the reported run (<= 35 min)
    .venv/bin/python bench/bench_scale200k.py --sizes 25000,50000 --configs agglomerative:pca,hdbscan:umap
"""

from __future__ import annotations

import argparse
import gzip
import heapq
import importlib
import json
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

sys.path.insert(0, str(REPO / "bench"))

from benchdata import BLURBS_DEV, PUBLISHED, STATS  # noqa: E402

MACHINE = 24 * 2**30  # the machine the figures are for: 24 GiB
# Where a configuration was measured at one size only, the growth assumed for it.
ASSUMED_EXPONENT = {"agglomerative": 2.0}
SEED = 42


# -- the data -------------------------------------------------------------------------------------
def corpus(size: int, classes: int) -> tuple[list[str], np.ndarray]:
    text = gzip.open(BLURBS_DEV, "rt", encoding="utf-8").read()
    titles, genres = [], []
    for book in re.findall(r"<book.*?</book>", text, re.S):
        topics = [(int(d), name) for d, name in re.findall(r'<topic d="(\d)"[^>]*>(.*?)</topic>', book)]
        title = re.search(r"<title>(.*?)</title>", book, re.S).group(1).strip()
        deepest = max(d for d, _ in topics) if topics else -1
        titles.append(title)
        genres.append(next((name for d, name in topics if d == deepest), "(none)"))
    copies = math.ceil(size / len(titles))
    names = sorted(set(genres))
    # Split the largest genres by copy parity until there are `classes` labels.
    by_size = sorted(names, key=lambda g: (-genres.count(g), g))
    split = set(by_size[:max(0, classes - len(names))])
    texts, labels = [], []
    for k in range(copies):
        for title, genre in zip(titles, genres):
            texts.append(title if k == 0 else f"{title} ({k + 1})")
            labels.append(f"{genre}#{k % 2}" if genre in split else genre)
    order = np.random.default_rng(SEED).permutation(len(texts))[:size]
    codes = {name: i for i, name in enumerate(sorted(set(labels)))}
    return [texts[i] for i in order], np.array([codes[labels[i]] for i in order])


def encode(texts: list[str]) -> np.ndarray:
    """The fixed cheap encoder: char 3-4-gram hashing, seeded sparse projection to 384-d, L2 norm."""
    from sklearn.feature_extraction.text import HashingVectorizer
    from sklearn.random_projection import SparseRandomProjection

    hashed = HashingVectorizer(analyzer="char_wb", ngram_range=(3, 4), n_features=2**18,
                               alternate_sign=False).transform(texts)
    X = SparseRandomProjection(n_components=384, random_state=0).fit_transform(hashed)
    X = np.asarray(X.todense() if hasattr(X, "todense") else X, dtype=np.float32)
    return X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)


# -- one step in a fresh process ------------------------------------------------------------------
def child(spec: dict) -> dict:
    from tecb_eval.clustering import algorithms as algo
    from tecb_eval.grid import work


    out = {}
    with work.one_thread():
        if spec["kind"] == "reduce" and "umap" in spec["reduction"]:
            work.keep_compiled_umap()  # as a grid unit does
            # UMAP's numba code compiles on its first call in every process (a one-time cost per
            # worker, printed apart): what grows with n is measured after it.
            started = time.perf_counter()
            algo.reduce(spec["reduction"], np.random.default_rng(0).normal(size=(300, 64)).astype(np.float32), SEED)
            out["jit_s"] = time.perf_counter() - started
        if spec.get("algorithm") == "hdbscan":
            importlib.import_module("hdbscan")  # loaded before the baseline RSS is read
        out["baseline_rss"] = peak_rss()
        X = np.load(spec["input"])
        cpu = cpu_seconds()
        started = time.perf_counter()
        if spec["kind"] == "reduce":
            reduced = algo.reduce(spec["reduction"], work.aligned_copy(X), SEED)
            out["wall_s"], out["seconds"] = time.perf_counter() - started, cpu_seconds() - cpu
            np.save(spec["output"], np.asarray(reduced))
        else:
            labels = np.load(spec["labels"])
            path = work.ward_path(len(X), X.shape[1], "current", spec["budget"], spec["input_values"])
            estimator = algo.make_algorithm(spec["algorithm"], spec["k"], SEED, "legacy", profile="current",
                                            ward_path=path)
            predicted = algo.cluster(estimator, work.aligned_copy(X))
            out["wall_s"], out["seconds"] = time.perf_counter() - started, cpu_seconds() - cpu
            cpu = cpu_seconds()
            scores = work.clustering_metrics(labels, predicted)
            out["metrics_s"] = cpu_seconds() - cpu
            out.update(v_measure=scores["v_measure"], n_clusters_found=scores["n_clusters_found"],
                       ward_path=path if spec["algorithm"] == "agglomerative" else None)
    out["max_rss"] = peak_rss()
    return out


def cpu_seconds() -> float:
    """This process's CPU seconds: on a machine shared with other work, what one quiet core would
    take (every step runs on one thread, as grid units do); its wall time is printed beside."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss() -> int:
    """This process's peak RSS since its exec (VmHWM; ru_maxrss would include the bench's own peak,
    which a child inherits through fork)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_child(spec: dict, limit: float) -> dict:
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True,
                              text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return {"error": f"stopped after {limit:.0f} s (--step-limit)", "wall": time.perf_counter() - started}
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": f"exit {done.returncode}: {tail[:160]}", "wall": time.perf_counter() - started}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["wall"] = time.perf_counter() - started
    return result


# -- growth ---------------------------------------------------------------------------------------
def exponent(points: list[tuple[int, float]], default: float) -> tuple[float, bool]:
    """Least-squares slope of log(value) on log(n); ``default`` (and False: assumed) under 2 sizes."""
    points = [(n, v) for n, v in points if v > 0]
    if len({n for n, _ in points}) < 2:
        return default, False
    x = np.log([n for n, _ in points])
    y = np.log([v for _, v in points])
    return float(np.polyfit(x, y, 1)[0]), True


def predict(points: list[tuple[int, float]], n: int, default: float) -> float:
    e, _ = exponent(points, default)
    n0, v0 = max(points)
    return v0 * (n / n0) ** e


def largest_n(points: list[tuple[int, float]], baseline: float, limit: float) -> int:
    """The n where the RSS beyond the baseline, grown as measured, reaches ``limit``."""
    extra = [(n, max(v - baseline, 1.0)) for n, v in points]
    e, fitted = exponent(extra, 1.0)
    n0, v0 = max(extra)
    if not fitted or e <= 0:
        e = 1.0
    return int(n0 * ((limit - baseline) / v0) ** (1 / e))


# -- main -----------------------------------------------------------------------------------------
def main() -> int:
    from tecb_eval.clustering.algorithms import PAPER_CONFIGURATIONS, parse_configuration
    from tecb_eval.grid import scheduling, work

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="25000,50000,100000,200000", help="comma-separated n (default %(default)s)")
    parser.add_argument("--configs", default="all", help="ALGORITHM:REDUCTION,... or all (the paper's 14)")
    parser.add_argument("--classes", type=int, default=300)
    parser.add_argument("--budget-minutes", type=float, default=33.0, help="stop starting steps past this")
    parser.add_argument("--step-limit", type=float, default=600.0, help="seconds one step may take")
    parser.add_argument("--json", type=Path, help="also write every measurement here")
    parser.add_argument("--summarize", type=Path, nargs="+", metavar="JSON",
                        help="measure nothing: print the tables of earlier runs' --json files together (a step "
                             "measured in one and projected in another counts as measured)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    if args.summarize:
        return summarize(args)
    if not BLURBS_DEV.is_file():
        print(f"skipped: {BLURBS_DEV} is absent (the shared GermEval data)")
        return 0
    sizes = sorted(int(s) for s in args.sizes.split(","))
    configs = PAPER_CONFIGURATIONS if args.configs == "all" else [parse_configuration(c) for c in args.configs.split(",")]
    reductions = [r for r in ("none", "pca", "umap", "pca50+umap") if any(r == c[1] for c in configs)]
    deadline = time.perf_counter() + args.budget_minutes * 60
    budget = int(scheduling.DEFAULT_MEMORY_SHARE * MACHINE)  # what the planner gives a 24 GiB machine
    work_dir = Path(tempfile.mkdtemp(prefix="bench-200k-"))
    records: list[dict] = []
    print(f"sizes {sizes}, {len(configs)} configurations, {args.classes} labels; memory budget of a 24 GiB machine "
          f"{budget / 2**30:.1f} GiB; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores at start")

    started = time.perf_counter()
    texts, labels = corpus(max(sizes), args.classes)
    X = encode(texts)
    print(f"data: {len(texts):,} texts, {len(set(labels.tolist()))} labels, {X.shape[1]}-d; built and encoded in "
          f"{time.perf_counter() - started:.1f} s")
    embedding_cache(texts, X, work_dir)

    def seen(step):  # [(n, seconds)] and [(n, rss)] measured so far for this step
        rows = [r for r in records if r["step"] == step and "error" not in r and not r.get("projected")]
        return [(r["n"], r["seconds"]) for r in rows], [(r["n"], r["max_rss"]) for r in rows]

    def go(step, n, spec, default_e):
        times, _ = seen(step)
        left = deadline - time.perf_counter()
        if times:
            # CPU seconds projected, times how much slower than CPU the wall clock has run so far
            ratios = [r["wall_s"] / max(r["seconds"], 0.1) for r in records if "wall_s" in r]
            guess = predict(times, n, default_e) * 1.3 * (float(np.median(ratios)) if ratios else 1.0) + 5
            if guess > min(args.step_limit, left):
                records.append(dict(step=step, n=n, projected=True, seconds=predict(times, n, default_e)))
                print(f"  {step:<26} n={n:>7,}: projected {records[-1]['seconds']:8.1f} s (not run: past "
                      f"{'the step limit' if guess > args.step_limit else 'the time budget'})")
                return None
        if left <= 0:
            records.append(dict(step=step, n=n, error="not run: time budget spent"))
            print(f"  {step:<26} n={n:>7,}: not run, time budget spent")
            return None
        result = run_child(spec, min(args.step_limit, max(left, 30)))
        records.append(dict(step=step, n=n, **result))
        if "error" in result:
            print(f"  {step:<26} n={n:>7,}: {result['error']}")
            return None
        extra = f", metrics {result['metrics_s']:.1f} s" if "metrics_s" in result else ""
        extra += f" (+ {result['jit_s']:.0f} s numba compile first)" if "jit_s" in result else ""
        found = f", {result['n_clusters_found']} clusters, V {result['v_measure']:.3f}" if "v_measure" in result else ""
        path = f", Ward on the {result['ward_path']}" if result.get("ward_path") else ""
        print(f"  {step:<26} n={n:>7,}: {result['seconds']:8.1f} s CPU ({result['wall_s']:.0f} s wall){extra}, peak RSS "
              f"{result['max_rss'] / 2**30:5.2f} GiB (baseline {result['baseline_rss'] / 2**30:.2f}){found}{path}",
              flush=True)
        return result

    # The cheap reductions (none, pca) at every size first, then UMAP's, smallest n first, while
    # the time budget lasts: the most sizes measured for the most configurations.
    phases = [[r for r in reductions if "umap" not in r], [r for r in reductions if "umap" in r]]
    for phase in phases:
        for n in sizes:
            if not phase:
                continue
            print(f"n = {n:,}, {', '.join(phase)} (load {os.getloadavg()[0]:.1f})", flush=True)
            base = work_dir / f"x{n}.npy"
            if not base.exists():
                np.save(base, X[:n])
                np.save(work_dir / f"y{n}.npy", labels[:n])
            inputs = {"none": base}
            for reduction in phase:
                if reduction == "none":
                    continue
                out = work_dir / f"x{n}-{reduction}.npy"
                if go(f"(reduce) {reduction}", n, dict(kind="reduce", reduction=reduction, input=str(base),
                                                         output=str(out)), 1.0):
                    inputs[reduction] = out
            # Ward on the unreduced vectors last: the longest step of its phase.
            for algorithm, reduction in sorted(configs, key=lambda c: c == ("agglomerative", "none")):
                if reduction not in phase:
                    continue
                step = f"{algorithm}:{reduction}"
                if reduction not in inputs:
                    records.append(dict(step=step, n=n, error=f"not run: its reduction {reduction} did not run"))
                    print(f"  {step:<26} n={n:>7,}: not run, its reduction did not run")
                    continue
                go(step, n, dict(kind="cluster", algorithm=algorithm, input=str(inputs[reduction]),
                                 labels=str(work_dir / f"y{n}.npy"), k=args.classes,
                                 budget=budget - work.WORKER_BASELINE_BYTES, input_values=n * X.shape[1]),
                   ASSUMED_EXPONENT.get(algorithm, 1.0))
    summary(records, configs, reductions, sizes, budget, args)
    if args.json:
        args.json.write_text(json.dumps(records, indent=1))
    print(f"\nbench wall time {(time.perf_counter() - started) / 60:.1f} min (load {os.getloadavg()[0]:.1f} at end)")
    import shutil

    shutil.rmtree(work_dir, ignore_errors=True)
    return 0


def embedding_cache(texts, X, work_dir: Path) -> None:
    """The grid's embedding cache at the largest n: encode (store) every text, reopen, look all up."""
    from tecb_eval.grid.cache import EmbeddingStore

    vectors = {t: v for t, v in zip(texts, X)}
    started = time.perf_counter()
    store = EmbeddingStore(work_dir / "cache", "bench-hashing-384")
    store.encode_missing(texts, lambda batch: np.stack([vectors[t] for t in batch]))
    wrote = time.perf_counter() - started
    started = time.perf_counter()
    again = EmbeddingStore(work_dir / "cache", "bench-hashing-384").embeddings()
    rows = again.rows(texts)
    read = time.perf_counter() - started
    assert np.array_equal(rows, X), "the embedding cache gave other vectors back"
    size = sum(p.stat().st_size for p in (work_dir / "cache").rglob("*") if p.is_file())
    print(f"embedding cache, {len(texts):,} texts: stored in {wrote:.1f} s, reopened and looked up in {read:.1f} s, "
          f"{size / 2**20:,.0f} MiB on disk")


def summarize(args) -> int:
    """The tables of several runs' records: measured rows first, then a projection or a "not run"
    only where no run measured that step at that n."""
    from tecb_eval.clustering.algorithms import PAPER_CONFIGURATIONS
    from tecb_eval.grid import scheduling

    records, kept = [], {}
    for path in args.summarize:
        for row in json.loads(path.read_text()):
            key = (row["step"], row["n"])
            measured = "error" not in row and not row.get("projected")
            if key not in kept or (measured and not kept[key][1]):
                kept[key] = (row, measured)
    records = [row for row, _ in kept.values()]
    steps = {r["step"] for r in records}
    configs = [c for c in PAPER_CONFIGURATIONS if f"{c[0]}:{c[1]}" in steps]
    reductions = [r for r in ("none", "pca", "umap", "pca50+umap") if any(r == c[1] for c in configs)]
    sizes = sorted({r["n"] for r in records})
    print(f"{len(args.summarize)} runs: {', '.join(str(p) for p in args.summarize)}")
    summary(records, configs, reductions, sizes, int(scheduling.DEFAULT_MEMORY_SHARE * MACHINE), args)
    return 0


def summary(records, configs, reductions, sizes, budget, args) -> None:
    print("\nper configuration (CPU seconds on one thread: the clustering, or the reduction, once per unit; "
          "peak RSS GiB; * = projected, not measured)")
    steps = [f"(reduce) {r}" for r in reductions if r != "none"] + [f"{a}:{r}" for a, r in configs]
    header = "".join(f"{n:>22,}" for n in sizes)
    print(f"{'':<26}{header}   exponent   largest n in 24 GiB")
    model = {}
    for step in steps:
        rows = [r for r in records if r["step"] == step and "error" not in r and not r.get("projected")]
        algorithm = step.split(":")[0]
        # Ward's two paths grow alike (n^2) but the vectors' is slower per pair: each path's times
        # are fitted and projected apart, and a size runs on the path the planner picks for it.
        for path in sorted({r.get("ward_path") for r in rows}, key=str):
            on_path = [(r["n"], r["seconds"]) for r in rows if r.get("ward_path") == path]
            model[(step, path)] = (on_path, exponent(on_path, ASSUMED_EXPONENT.get(algorithm, 1.0))[0])
        last = max(rows, key=lambda r: r["n"]).get("ward_path") if rows else None
        e, fitted = exponent([(r["n"], r["seconds"]) for r in rows if r.get("ward_path") == last],
                             ASSUMED_EXPONENT.get(algorithm, 1.0))
        cells = []
        for n in sizes:
            row = next((r for r in rows if r["n"] == n), None)
            if row is not None:
                cells.append(f"{row['seconds']:,.1f} s {row['max_rss'] / 2**30:.2f}G")
                continue
            guess = projected_seconds(model, step, n, budget)
            said = next((r for r in records if r["step"] == step and r["n"] == n), None)
            if guess is not None:
                cells.append(f"*{guess:,.0f} s")
            elif said is None:
                cells.append("-")
            else:
                cells.append("not run" if said.get("error", "").startswith("not run") else "failed")
        reach = "-"
        if rows:
            base = min(r["baseline_rss"] for r in rows)
            largest = largest_n([(r["n"], r["max_rss"]) for r in rows], base, budget)
            reach = f"{largest:,}" if largest < 10**7 else ">10M"
            if algorithm == "agglomerative":  # the matrix to its limit, then the vectors: the planner's n
                reach = f"matrix to {int(math.sqrt(budget / 11)):,}, then vectors: {ward_reach(step, budget):,}"
        shown = f"{e:5.2f}{'' if fitted else ' (assumed)'}" + (f" ({last})" if last else "")
        print(f"{step:<26}" + "".join(f"{c:>22}" for c in cells) + f"   {shown}   {reach}")
    print("largest n: where the measured RSS growth beyond the imports' baseline reaches the planner's budget "
          f"on a 24 GiB machine ({budget / 2**30:.1f} GiB); Ward's runs on the vectors past the matrix's limit "
          f"(about {int(math.sqrt(budget / 11)):,} texts for the matrix in 384-d). Ward's exponent is fitted on "
          "the path its largest measured size ran on (matrix or vector).")
    project(model, configs, budget)


def ward_reach(step: str, budget: int) -> int:
    """The largest n whose Ward unit the planner fits in ``budget`` (input 384-d, Ward on the vectors)."""
    from tecb_eval.grid import work

    reduction = step.split(":")[1]
    lo, hi = 1000, 10**8
    while hi - lo > 1000:
        n = (lo + hi) // 2
        unit = work.WorkUnit(key="k", label="l", dataset="d", reduction=reduction, seed=1, protocol="legacy",
                             profile="current", cells=(work.Cell("s", None, (), 300, "agglomerative"),), n=n, dim=384,
                             ward_budget=budget - work.WORKER_BASELINE_BYTES)
        lo, hi = (n, hi) if unit.memory + work.WORKER_BASELINE_BYTES <= budget else (lo, n)
    return lo


def projected_seconds(model, step: str, n: int, budget: int) -> float | None:
    """``step``'s seconds at ``n`` from its fitted growth; Ward's from the path the planner picks at
    that n (the other path's fit where that one was never run). None: never measured."""
    from tecb_eval.grid import work

    fits = {path: fit for (s, path), fit in model.items() if s == step}
    if not fits:
        return None
    path = None
    if step.startswith("agglomerative:"):
        dim = 384 if step.endswith(":none") else 2
        path = work.ward_path(n, dim, "current", budget - work.WORKER_BASELINE_BYTES, n * 384)
    times, e = fits.get(path) or next(iter(fits.values()))
    n0, s0 = max(times)
    return s0 * (n / n0) ** e


def project(model, configs, budget: int) -> None:
    """One model over the six published datasets at full size: per-unit seconds from the fit, Ward's
    from the path the planner picks at that n (the other path's fit where that one was never run)."""
    def seconds(step, n):
        return projected_seconds(model, step, n, budget)

    units, missing = [], set()
    for name, (stats, splits) in PUBLISHED.items():
        total = json.loads((STATS / stats).read_text())["test"]["num_samples"]
        n = total // splits
        for reduction in sorted({r for _, r in configs}):
            unit = (seconds(f"(reduce) {reduction}", n) or 0.0) if reduction != "none" else 0.0
            for algorithm, r in configs:
                if r == reduction:
                    s = seconds(f"{algorithm}:{r}", n)
                    if s is None:
                        missing.add(f"{algorithm}:{r}")
                    unit += s or 0.0
            units.extend([(unit, name, n)] * splits)
    total = sum(u for u, _, _ in units)
    print(f"\nprojection, one model, the six published datasets at full size (splits spread evenly over each "
          f"test set; {len(units)} units, {total / 3600:.1f} core-hours at this machine's per-core speed):")
    for cores in (2, 16, 64):
        loads = [0.0] * cores
        for s, _, _ in sorted(units, reverse=True):  # longest first, as the executors start them
            heapq.heappush(loads, heapq.heappop(loads) + s)
        label = "--jobs 2 here" if cores == 2 else f"{cores} workers"
        print(f"  {label:>14}: {max(loads) / 3600:6.2f} h (longest unit {max(u for u, _, _ in units) / 60:.1f} min)")
    if missing:
        print(f"  left out (not measured at any size): {', '.join(sorted(missing))}")


if __name__ == "__main__":
    sys.exit(main())
