"""A corpus without labels from CSV to a pick: build, grid, criteria, recommend and report, per phase.

Builds a corpus of ``--texts N`` German texts without labels from the GermEval 2019 blurbs in
../shared/data (dev and test sets, every blurb's sentences), writes it as a one-column CSV and
builds it with ``tecb-data build --source table`` as a user would, then runs the user's commands
one by one, each in a fresh process (``tecb-eval``), and prints the wall clock, the CPU time and
the peak memory of each phase:

- **build**: ``tecb-data build --source table --input corpus.csv --text text``;
- **encode**: ``tecb-eval run`` with every model and one k-means cell at k = 2 on the embeddings
  (what it takes is the encoding; its rows go to a scratch store);
- **reduce**: the same with k-means on UMAP (the UMAP of every model, into the reduction cache);
- **grid**: the grid itself on the cached embeddings and reductions: every configuration over
  ``--k`` and ``--min-cluster-size``, the label-free criteria on each row and the stability
  reruns; its *cluster*, *criteria* and *stability* lines are the rows' own seconds (``cluster_s``,
  ``label_free_s``, ``dbcv_s``, ``topics_s``, ``stability_s``, summed over the processes that ran them);
  consensus is computed after the run by ``recommend``, so the share of criteria and stability in
  the whole bench counts the recommend phase as criteria too;
- **recommend** and **report** on the grid's store.

*criteria (each)*: the rows time the four scores of ``label_free_scores`` together (and DBCV
apart); ``--criteria-each`` splits that share by timing each score alone on random vectors of the
grid's shapes (n x 384 and n x 2, k = 30).

The texts: first every unique sentence of the blurbs (at least 20 characters; about 33,700), in a
seeded order; beyond them, two sentences of one blurb joined (neighbours first, then sentences two
apart, and so on), in the same seeded order of blurbs; a text is never repeated. ``--texts``
beyond what that gives is one line.

Peak memory is the largest sum of the resident memory of the command's process tree (and, with
``--scheduler``, of the Dask workers), sampled every 0.2 s; CPU time is the tree's user + system
time (the workers' counted too). With ``--scheduler`` the run phases go to a local Dask cluster of
``--workers`` single-threaded workers (``tecb-eval workers``), and ``--compare`` runs the whole
bench twice, in one process (``--jobs 1``) and on the cluster, each from nothing, and prints the
wall-time ratio and whether the rows are identical.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_unlabelled_scale.py --texts 20000
    .venv/bin/python bench/bench_unlabelled_scale.py --texts 5000 --models tfidf-lsa --k 5:30:5
    .venv/bin/python bench/bench_unlabelled_scale.py --texts 5000 --compare          # one process vs Dask
    .venv/bin/python bench/bench_unlabelled_scale.py --texts 100000 --model tfidf-lsa --model minilm-l6,backend=onnx,dtype=int8

Everything is written in a temporary folder (``--keep DIR``: there instead, for a look afterwards),
never in the repository.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchdata import SHARED

BLURBS = [SHARED / "data" / "germeval2019" / name for name in ("blurbs_dev.txt.gz", "blurbs_test_nolabel.txt.gz")]
MIN_CHARS = 20
SEED = 42
DEFAULT_CONFIGS = "minibatch_kmeans:none,minibatch_kmeans:umap,hdbscan:umap"
# Fields that say where and how long, not what: the rows of two executors differ only there.
WHERE = {"encoded_on", "clustered_on", "dataset_location"}


# -- the corpus ----------------------------------------------------------------------------------
def _sentences(blurb: str) -> list[str]:
    parts = re.split(r"(?<=[.!?…])\s+(?=[A-ZÄÖÜ„\"»])", blurb.strip())
    return [" ".join(p.split()) for p in parts if p.strip()]


def corpus(n: int) -> tuple[list[str], str]:
    """``n`` unique texts and how they were made (see the module)."""
    import numpy as np

    blurbs = []
    for path in BLURBS:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            text = f.read()
        blurbs += [_sentences(b) for b in re.findall(r"<body>(.*?)</body>", text, flags=re.DOTALL)]
    order = np.random.default_rng(SEED).permutation(len(blurbs))
    seen: set[str] = set()
    out: list[str] = []

    def take(text: str) -> bool:
        if len(text) >= MIN_CHARS and text not in seen:
            seen.add(text)
            out.append(text)
        return len(out) >= n

    sentences = [s for i in order for s in blurbs[i]]
    for s in (sentences[i] for i in np.random.default_rng(SEED + 1).permutation(len(sentences))):
        if take(s):
            return out, "unique sentences of the GermEval 2019 blurbs (dev + test)"
    single = len(out)
    longest = max(len(b) for b in blurbs)
    for gap in range(1, longest):
        for i in order:
            b = blurbs[i]
            for j in range(len(b) - gap):
                if take(f"{b[j]} {b[j + gap]}"):
                    return out, (f"{single:,} unique sentences of the GermEval 2019 blurbs (dev + test), then "
                                 f"{n - single:,} pairs of sentences of one blurb joined (up to {gap} apart)")
    raise SystemExit(f"--texts {n}: the blurbs give at most {len(out):,} unique texts this way; give fewer")


def write_csv(texts: list[str], path: Path) -> None:
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text"])
        writer.writerows([t] for t in texts)


# -- measuring a phase ---------------------------------------------------------------------------
class Phase:
    """One command in a fresh process: wall clock, CPU of its tree (and of ``extra`` processes,
    the Dask workers), and the largest summed RSS, sampled."""

    def __init__(self, name: str, cmd: list[str], env: dict, extra=None, log: Path | None = None):
        self.name, self.cmd, self.env, self.extra, self.log = name, cmd, env, extra or [], log
        self.wall = self.cpu = 0.0
        self.peak = 0
        self.output = ""

    @staticmethod
    def _tree(proc) -> list:
        import psutil

        try:
            return [proc, *proc.children(recursive=True)]
        except psutil.Error:
            return [proc]

    def _rss(self, procs) -> int:
        import psutil

        total = 0
        for p in procs:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        return total

    @staticmethod
    def _cpu(procs) -> dict:
        import psutil

        out = {}
        for p in procs:
            try:
                t = p.cpu_times()
                out[p.pid] = t.user + t.system + t.children_user + t.children_system
            except psutil.Error:
                pass
        return out

    def run(self) -> Phase:
        import psutil

        extra_before = self._cpu([q for p in self.extra for q in self._tree(p)])
        started = time.perf_counter()
        proc = subprocess.Popen(self.cmd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        chunks: list[str] = []
        reader = threading.Thread(target=lambda: chunks.extend(proc.stdout), daemon=True)
        reader.start()
        ps = psutil.Process(proc.pid)
        while proc.poll() is None:
            self.peak = max(self.peak, self._rss(self._tree(ps) + [q for p in self.extra for q in self._tree(p)]))
            time.sleep(0.2)
        # wait4 was done by poll(); the CPU of the process and every child it waited for:
        self.wall = time.perf_counter() - started
        reader.join()
        self.output = "".join(chunks)
        if self.log is not None:
            self.log.write_text(self.output, encoding="utf-8")
        if proc.returncode != 0:
            sys.stderr.write(self.output[-4000:])
            raise SystemExit(f"phase {self.name} failed (exit {proc.returncode}): {' '.join(self.cmd)}")
        extra_after = self._cpu([q for p in self.extra for q in self._tree(p)])
        self.cpu = sum(extra_after.get(pid, 0) - extra_before.get(pid, 0) for pid in extra_after)
        return self


def run_phase(name, cmd, env, extra=None, log=None) -> Phase:
    import resource

    # RUSAGE_CHILDREN grows by what the finished command (and every process it waited for) used.
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    phase = Phase(name, cmd, env, extra, log).run()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    phase.cpu += (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return phase


# -- the bench -----------------------------------------------------------------------------------
def tecb(command: str, *args) -> list[str]:
    return [sys.executable, "-c", f"import sys; from tecb_{command}.cli import main; sys.exit(main())", *map(str, args)]


def rows_of(store: Path) -> list[dict]:
    return [json.loads(line) for line in store.read_text(encoding="utf-8").splitlines() if line.strip()]


def seconds(rows: list[dict], field: str) -> float:
    return float(sum(r.get(field) or 0.0 for r in rows))


def criteria_each(n: int, dims: tuple[int, ...] = (384, 2), k: int = 30) -> dict[str, float]:
    """Each label-free score timed alone, one call per shape: ``n`` seeded random vectors of each
    of ``dims`` (the embeddings', UMAP's output) in ``k`` clusters of k-means. A score's cost
    depends on n, the dimensions and k, not on what the vectors mean (see the module)."""
    import numpy as np
    from sklearn import metrics
    from sklearn.cluster import MiniBatchKMeans

    from tecb_eval.clustering.label_free import (
        SILHOUETTE_MAX_POINTS,
        davies_bouldin,
        size_balance,
    )

    rng = np.random.default_rng(SEED)
    spent = {"silhouette": 0.0, "calinski_harabasz": 0.0, "davies_bouldin": 0.0, "size_balance": 0.0}
    for d in dims:
        data = rng.standard_normal((n, d))
        y = MiniBatchKMeans(n_clusters=k, random_state=SEED, n_init=1).fit_predict(data)
        for name, call in (
                ("silhouette", lambda X, y: metrics.silhouette_score(X, y, metric="cosine",
                                                                     sample_size=min(n, SILHOUETTE_MAX_POINTS),
                                                                     random_state=SEED)),
                ("calinski_harabasz", metrics.calinski_harabasz_score),
                ("davies_bouldin", davies_bouldin),
                ("size_balance", lambda X, y: size_balance(np.bincount(y)))):
            started = time.perf_counter()
            call(data, y)
            spent[name] += time.perf_counter() - started
    return spent


def start_cluster(workers: int, env: dict):
    """``tecb-eval workers`` on any free port: (its process, the scheduler's address)."""
    import psutil

    proc = subprocess.Popen(tecb("eval", "workers", "--workers", workers, "--port", 0), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    address = proc.stdout.readline().strip()
    if not address.startswith("tcp://"):
        proc.terminate()
        raise SystemExit(f"tecb-eval workers did not start (said {address!r})")
    return proc, psutil.Process(proc.pid), address


def bench(args, work: Path, *, scheduler: bool, jobs: str | None) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    work.mkdir(parents=True, exist_ok=True)
    csv_path, data = work / "corpus.csv", work / "data"
    cache = args.cache_dir or work / "cache"
    texts, how = corpus(args.texts)
    write_csv(texts, csv_path)
    name = f"unlabelled-{args.texts}"
    phases: list[Phase] = []
    cluster = None
    where: list[str] = []
    extra = []
    if scheduler:
        cluster, psproc, address = start_cluster(args.workers, env)
        where, extra = ["--scheduler", address], [psproc]
    elif jobs is not None:
        where = ["--jobs", jobs]
    try:
        phases.append(run_phase("build", tecb("data", "build", "--source", "table", "--input", csv_path, "--text", "text",
                                             "--name", name, "--out", data, "--quiet"), env, log=work / "build.log"))
        folder = next(data.glob(f"{name}-*"))
        models = args.model or [m for m in args.models.split(",") if m]
        model_args = [x for m in models for x in ("--model", m)]
        common = ["--data", folder, *model_args, "--cache-dir", cache, "--quiet", *where]
        scratch = work / "scratch.jsonl"
        phases.append(run_phase("encode", tecb("eval", "run", *common, "--config", "minibatch_kmeans:none", "--k", 2,
                                               "--stability", 0, "--results", scratch), env, extra, work / "encode.log"))
        configs = [c for c in args.configs.split(",") if c]
        reductions = sorted({c.split(":")[1] for c in configs} - {"none"})
        if reductions:
            phases.append(run_phase("reduce", tecb("eval", "run", *common, "--k", 2, "--stability", 0, "--results",
                                                   scratch, *[x for r in reductions
                                                              for x in ("--config", f"minibatch_kmeans:{r}")]),
                                    env, extra, work / "reduce.log"))
        store = work / "results.jsonl"
        grid = ["--results", store, *[x for c in configs for x in ("--config", c)]]
        if any(c.split(":")[0] in ("minibatch_kmeans", "agglomerative") for c in configs):
            grid += ["--k", args.k]
        if any(c.split(":")[0] == "hdbscan" for c in configs):
            grid += ["--min-cluster-size", args.min_cluster_size]
        if args.stability is not None:
            grid += ["--stability", args.stability]
        phases.append(run_phase("grid", tecb("eval", "run", *common, *grid), env, extra, work / "grid.log"))
        phases.append(run_phase("recommend", tecb("eval", "recommend", store), env, log=work / "recommend.log"))
        phases.append(run_phase("report", tecb("eval", "report", store, "--out", work / "report"), env,
                                log=work / "report.log"))
    finally:
        if cluster is not None:
            cluster.terminate()
            cluster.wait(timeout=60)
    rows = rows_of(store)
    return {"phases": phases, "rows": rows, "how": how, "texts": len(texts), "folder": folder, "cache": cache,
            "models": models, "work": work}


def show(result: dict, args, label: str) -> float:
    phases = {p.name: p for p in result["phases"]}
    rows = result["rows"]
    total = sum(p.wall for p in result["phases"])
    built = re.search(r"[\d,]+ unique texts[^;]*", phases["build"].output)
    print(f"\n== {label}: {result['texts']:,} texts ({result['how']}); {len(rows)} rows; models {', '.join(result['models'])}")
    if built:
        print(f"   build says: {built.group(0)}")
    print(f"{'phase':<28}{'wall s':>10}{'CPU s':>10}{'peak MiB':>10}")
    for p in result["phases"]:
        print(f"{p.name:<28}{p.wall:>10.1f}{p.cpu:>10.1f}{p.peak / 2**20:>10,.0f}")
        if p.name == "grid":
            # The grid's parts, from its rows (seconds summed over the processes that ran them).
            for part, field in (("  reduce (in grid)", "reduce_s"), ("  cluster", "cluster_s"),
                                ("  criteria (label-free)", "label_free_s"), ("  criteria: DBCV", "dbcv_s"),
                                ("  criteria: topic words", "topics_s"), ("  stability", "stability_s")):
                print(f"{part:<28}{seconds(rows, field):>10.1f}{'(rows)':>10}")
    print(f"{'total':<28}{total:>10.1f}")
    cells = len(comparable(rows))
    stable = sum(1 for r in rows if r.get("stability_runs"))
    # Every line of the store counts: a rerun cell was clustered and scored twice.
    parts = ("label_free_s", "dbcv_s", "topics_s", "stability_s")
    in_rows = sum(seconds(rows, f) for f in parts)
    work = in_rows + seconds(rows, "reduce_s") + seconds(rows, "cluster_s")
    # Consensus is computed after the run, by recommend: its whole phase counts as criteria.
    criteria = in_rows + phases["recommend"].wall
    print(f"{cells} cells ({len(rows)} rows written), {stable} with stability reruns; criteria and stability in "
          f"the rows {in_rows:.1f} s: {100 * in_rows / max(work, 1e-9):.1f} % of the rows' reduce + cluster + "
          f"criteria seconds, {100 * in_rows / phases['grid'].wall:.1f} % of the grid phase's wall clock; with "
          f"recommend's phase (consensus) {criteria:.1f} s: {100 * criteria / total:.1f} % of the whole bench's")
    grid_encode = re.findall(r"(\S+): encoded ([\d,]+) new unique texts in ([\d.]+) s", phases["encode"].output)
    for model, count, secs in grid_encode:
        print(f"encode {model}: {count} texts in {secs} s (the run's own figure)")
    return total


def comparable(rows: list[dict]) -> list[str]:
    """Each cell's newest row (a rerun appends the row that replaces it) without where and how long."""
    newest = {}
    for r in rows:
        newest[(r["model"], r["reduction"], r["algorithm"], r.get("setting"), r["split"], r["seed"])] = r
    return sorted(json.dumps({k: v for k, v in r.items() if not k.endswith("_s") and k not in WHERE}, sort_keys=True)
                  for r in newest.values())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--texts", type=int, default=20000)
    p.add_argument("--models", default="tfidf-lsa,minilm-l6")
    p.add_argument("--model", action="append", metavar="SPEC",
                   help="a model with its options, as tecb-eval run's --model takes it (repeat it; replaces --models), "
                        "e.g. --model tfidf-lsa --model minilm-l6,backend=onnx,dtype=int8")
    p.add_argument("--configs", default=DEFAULT_CONFIGS)
    p.add_argument("--k", default="5:60:5")
    p.add_argument("--min-cluster-size", default="10,50,100")
    p.add_argument("--stability", type=int, default=None,
                   help="--stability N on every cell (default: tecb's default, the top pipelines only)")
    p.add_argument("--jobs", default=None, help="--jobs for the run phases (default: tecb's own)")
    p.add_argument("--scheduler", action="store_true", help="run the phases on a local Dask cluster")
    p.add_argument("--workers", type=int, default=2, help="Dask workers with --scheduler (default 2)")
    p.add_argument("--compare", action="store_true",
                   help="run in one process (--jobs 1) and on the Dask cluster: wall ratio, identical rows")
    p.add_argument("--criteria-each", action="store_true",
                   help="time each label-free score alone on random vectors of the grid's shapes")
    p.add_argument("--keep", type=Path, help="write everything here instead of a temporary folder")
    p.add_argument("--cache-dir", type=Path,
                   help="the embedding and reduction cache of an earlier run of the same --texts (its folder's "
                        "cache/): the encode and reduce phases then find their work done")
    args = p.parse_args()
    if args.texts < 100:
        raise SystemExit("--texts: give 100 or more")
    top = args.keep or Path(tempfile.mkdtemp(prefix="tecb-unlabelled-"))
    if args.keep and REPO in [args.keep.resolve(), *args.keep.resolve().parents]:
        raise SystemExit(f"--keep {args.keep}: inside the repository; give a folder outside it")
    print(f"bench_unlabelled_scale: --texts {args.texts}, models {' '.join(args.model or [args.models])}, configs {args.configs}, --k {args.k}, "
          f"--min-cluster-size {args.min_cluster_size}, stability {args.stability or 'default'}; load "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; in {top}")
    try:
        if args.compare:
            one = bench(args, top / "one-process", scheduler=False, jobs="1")
            wall_one = show(one, args, "one process (--jobs 1)")
            dask = bench(args, top / "dask", scheduler=True, jobs=None)
            wall_dask = show(dask, args, f"Dask LocalCluster, {args.workers} single-threaded workers")
            same = comparable(one["rows"]) == comparable(dask["rows"])
            grid = lambda r: next(ph for ph in r["phases"] if ph.name == "grid").wall
            print(f"\nwall ratio one process / Dask: whole bench {wall_one / wall_dask:.2f}x, grid phase "
                  f"{grid(one) / grid(dask):.2f}x; rows identical (scores, criteria, stability): {same}")
            result = one
        else:
            result = bench(args, top / "run", scheduler=args.scheduler, jobs=args.jobs)
            show(result, args, "Dask LocalCluster" if args.scheduler else "this machine")
        if args.criteria_each:
            spent = criteria_each(result["texts"])
            whole = sum(spent.values())
            print(f"criteria (each): one call on {result['texts']:,} random 384-d and 2-d vectors in 30 k-means "
                  "clusters (the share of each in the rows' label-free seconds):")
            for name, s in spent.items():
                print(f"  {name:<20}{s:>8.2f} s  {100 * s / max(whole, 1e-9):5.1f} %")
    finally:
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
        if args.keep is None:
            shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
