"""Encode tasks on a Dask cluster: what two workers give over one, a warm cluster
against MTEB's own ``mteb.evaluate``, and the same scores everywhere.

- (a) the encode phase of a P2P grid (GermEval 2019 dev set built as Blurbs P2P, minilm-l6,
  2 legacy splits, k-means) on one single-core Dask worker against two single-core workers, each
  pinned to its own core with ``taskset`` (a stand-in for two machines);
- (b) on a warm cluster (workers started with ``--preload tecb_eval.grid.worker_models``, the
  model loaded by a first run), a second model's `tecb-eval run --scheduler` on Blurbs S2S against
  MTEB's ``mteb.evaluate`` in a fresh process (bench_vs_mteb.py's), alternating;
- (c) three models in one command on the warm cluster against MTEB evaluating the same three in one
  fresh process. The only sentence-transformers weights offline are MiniLM's, so the three are
  MiniLM at max_length 256 (its own), 128 and 64: three identities, each encoded in full on both
  sides (the embedding cache holds none of them), each with its own score;
- (d) the scores of (a)'s grid in this process, with ``--jobs 2`` and on Dask: equal or not.

Every figure is a wall clock in seconds; the runs alternate ``--repeat`` times and the medians
are printed.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_cluster_encode.py [--repeat 3] [--only a,d]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_vs_mteb import PYTHON, TECB_EVAL, env, mtebs  # noqa: E402
from benchdata import BLURBS_DEV, REPO  # noqa: E402

DASK = REPO / ".venv" / "bin" / "dask"
PRELOAD = "tecb_eval.grid.worker_models"
THREE = (("minilm-l6", None), ("minilm-l6,max_length=128,name=minilm-128", 128),
         ("minilm-l6,max_length=64,name=minilm-64", 64))

# MTEB's side of (c): its own wrapper around each of the three, its own v2 task, one process.
MTEB_THREE = """
import json, logging, sys, warnings
warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)
import mteb
from sentence_transformers import SentenceTransformer
import tecb_eval
from tecb_eval.models.kinds.minilm import minilm_folder
scores = []
for max_length in json.loads(sys.argv[2]):
    model = SentenceTransformer(str(minilm_folder()), device="cpu")
    if max_length is not None:
        model.max_seq_length = max_length
    result = mteb.evaluate(model, tasks=tecb_eval.mteb_tasks([sys.argv[1]], version="v2"), cache=None,
                           show_progress_bar=False)
    levels = result.task_results[0].scores["test"][0]["v_measures"]
    values = levels["Level 0"] if isinstance(levels, dict) else levels
    scores.append(sum(values) / len(values))
print(json.dumps(scores))
"""


# (label, our figure, the figure it is measured against): the ratios main() prints.
RATIOS = (("(a) two workers over one, the run", "(a) P2P run, 2 workers", "(a) P2P run, 1 worker"),
          ("(a) two workers over one, the encode phase", "(a) P2P encode phase, 2 workers",
           "(a) P2P encode phase, 1 worker"),
          ("(b) warm cluster over MTEB's fresh evaluate", "(b) warm cluster, a second model S2S",
           "(b) MTEB evaluate S2S, fresh process"),
          ("(c) three models over MTEB's three", "(c) warm cluster, three models in one command S2S",
           "(c) MTEB evaluate the same three, one fresh process"))


def mtebs_three(data: Path) -> dict:
    import json

    started = time.perf_counter()
    done = subprocess.run([str(PYTHON), "-c", MTEB_THREE, str(data), json.dumps([m for _, m in THREE])],
                          capture_output=True, text=True, env=env())
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"mteb.evaluate failed:\n{done.stderr[-3000:]}")
    scores = json.loads(done.stdout.strip().splitlines()[-1])
    return {"wall": wall, "score": 100 * statistics.fmean(scores), "each": [round(100 * v, 2) for v in scores]}


@contextlib.contextmanager
def cluster(cores: list[int], work: Path):
    """A scheduler and one single-threaded worker per core in ``cores``, each pinned with taskset."""
    address_file = work / f"scheduler-{'-'.join(map(str, cores))}.json"
    procs = [subprocess.Popen([str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--dashboard-address", ":0", "--scheduler-file", str(address_file)],
                              env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        while not address_file.is_file():
            time.sleep(0.2)
        for core in cores:
            procs.append(subprocess.Popen(
                ["taskset", "-c", str(core), str(DASK), "worker", "--scheduler-file", str(address_file),
                 "--nworkers", "1", "--nthreads", "1", "--preload", PRELOAD, "--dashboard-address", ":0"],
                env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        import json

        from distributed import Client

        address = json.loads(address_file.read_text())["address"]
        with Client(address, timeout=60) as client:
            client.wait_for_workers(len(cores), timeout=120)
        yield address
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=20)


def run(data: Path, cache: Path, results: Path, *extra: str, models=("minilm-l6",)) -> dict:
    """One `tecb-eval run`: its wall clock, its encode phase and its rows' V-measures."""
    started = time.perf_counter()
    args = [str(TECB_EVAL), "run", "--data", str(data), "--config", "minibatch_kmeans:none", "--results",
            str(results), "--cache-dir", str(cache), "--quiet", "--no-figure1", *extra]
    for model in models:
        args += ["--model", model]
    done = subprocess.run(args, capture_output=True, text=True, env=env())
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"tecb-eval run failed:\n{done.stderr[-3000:]}")
    import json

    rows = sorted((r["model"], r["split"], r["seed"], r["v_measure"])
                  for r in map(json.loads, results.read_text().splitlines()))
    phase = re.search(r"wall clock of this run: encode ([\d.]+) s", done.stderr)
    per_model = {}
    for model, _, _, value in rows:
        per_model.setdefault(model, []).append(value)
    return {"wall": wall, "encode": float(phase.group(1)) if phase else float("nan"), "rows": rows,
            "score": 100 * statistics.fmean(r[3] for r in rows),
            "each": [round(100 * statistics.fmean(v), 2) for _, v in sorted(per_model.items(), key=lambda kv: order(kv[0]))]}


def order(model: str) -> int:
    """A model's place in THREE (its scores are printed in that order, as MTEB's are)."""
    names = ["minilm-l6", "minilm-128", "minilm-64"]
    return names.index(model) if model in names else len(names)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default="a,b,c,d", help="which parts to run (a,b,c,d)")
    args = parser.parse_args()
    parts = set(args.only.split(","))
    if not BLURBS_DEV.is_file():
        print(f"skipped: {BLURBS_DEV} is absent (the shared GermEval data)")
        return 0
    sys.path.insert(0, str(REPO))
    from tecb_data.build import build

    work = Path(tempfile.mkdtemp(prefix="bench-cluster-encode-"))
    figures: dict[str, list[float]] = {}

    def note(name: str, figure: dict, what: str = "wall") -> None:
        figures.setdefault(name, []).append(figure[what])
        each = f" (each {', '.join(f'{v:.2f}' for v in figure['each'])})" if len(figure.get("each", ())) > 1 else ""
        print(f"  {name}: {figures[name][-1]:.1f} s" + (f", score {figure['score']:.2f}{each}" if "score" in figure else "")
              + f" (load {os.getloadavg()[0]:.1f})", flush=True)

    try:
        built = {f.name: f for f, _ in build("blurbs", BLURBS_DEV, work / "data", views=("s2s", "p2p"))}
        s2s, p2p = built["blurbs-clustering-s2s"], built["blurbs-clustering-p2p"]
        legacy = ("--protocol", "legacy", "--limit-splits", "2")
        scores = {}
        for i in range(args.repeat):
            print(f"round {i + 1} of {args.repeat}", flush=True)
            if "a" in parts or "d" in parts:
                for cores in ([0], [0, 1]):
                    with cluster(cores, work) as address:
                        tag = f"{len(cores)} worker{'s' if len(cores) > 1 else ''}"
                        out = run(p2p, work / f"a{i}-{tag}", work / f"a{i}-{tag}.jsonl", *legacy, "--scheduler", address)
                        note(f"(a) P2P run, {tag}", out)
                        note(f"(a) P2P encode phase, {tag}", out, "encode")
                        scores[f"Dask, {tag}"] = out["rows"]
            if "d" in parts and i == 0:
                scores["this process"] = run(p2p, work / "d1", work / "d1.jsonl", *legacy, "--jobs", "1")["rows"]
                scores["--jobs 2"] = run(p2p, work / "d2", work / "d2.jsonl", *legacy, "--jobs", "2")["rows"]
            if "b" in parts or "c" in parts:
                with cluster([0, 1], work) as address:
                    fast = ("--protocol", "fast", "--scheduler", address)
                    run(s2s, work / f"warm{i}", work / f"warm{i}.jsonl", *fast)  # loads MiniLM on the workers, untimed
                    # As bench_vs_mteb's second model: the fast sample stored by a first model (untimed).
                    run(s2s, work / f"b{i}", work / f"b{i}-first.jsonl", *fast, models=("tfidf-lsa",))
                    if "b" in parts:
                        note("(b) warm cluster, a second model S2S", run(s2s, work / f"b{i}", work / f"b{i}.jsonl", *fast))
                        note("(b) MTEB evaluate S2S, fresh process", mtebs(s2s))
                    if "c" in parts:
                        run(s2s, work / f"c{i}", work / f"c{i}-first.jsonl", *fast, models=("tfidf-lsa",))  # the sample
                        note("(c) warm cluster, three models in one command S2S",
                             run(s2s, work / f"c{i}", work / f"c{i}.jsonl", *fast, models=[m for m, _ in THREE]))
                        note("(c) MTEB evaluate the same three, one fresh process", mtebs_three(s2s))
        print("medians:")
        for name, values in figures.items():
            print(f"  {name}: {statistics.median(values):.1f} s over {len(values)}")
        # The figures are ratios of alternating runs: each pair's, and the medians'.
        for label, ours, theirs in RATIOS:
            if ours in figures and theirs in figures:
                pairs = [t / o for o, t in zip(figures[ours], figures[theirs])]
                print(f"  {label}: {statistics.median(figures[theirs]) / statistics.median(figures[ours]):.2f}x of the "
                      f"medians; per pair {', '.join(f'{r:.2f}' for r in pairs)} (median pair "
                      f"{statistics.median(pairs):.2f}x)")
        if scores:
            reference = next(iter(scores.values()))
            for name, rows in scores.items():
                print(f"  (d) scores {name}: {'equal' if rows == reference else 'DIFFERENT'} ({len(rows)} rows)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
