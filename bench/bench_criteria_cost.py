"""What the label-free criteria cost beside the grid, on 5,000 texts and about 60 pipelines.

Builds a corpus without labels from the first 5,000 GermEval 2019 Blurbs texts (dev, then test;
title and blurb), runs the grid with every label-free criterion (``--label-free``, the default on
a corpus without labels, given so that the bench measures them whatever the default) but without
stability reruns (``--stability 0``), then computes consensus over the kept assignments as
``recommend`` does, and prints each part's seconds and its share of the grid's wall clock. The
stability reruns a corpus without labels gets by default (5 reruns of the pipelines ``recommend``
lists, after the grid) are then timed on their own, by the same command without ``--stability 0``
on the finished store, and printed beside:

    python bench/bench_criteria_cost.py
    python bench/bench_criteria_cost.py --texts 2000 --models tfidf-lsa      # a quicker look

The vector criteria (silhouette, Calinski-Harabasz, Davies-Bouldin, size balance, the spectrum's
k) are timed inside each cell (``label_free_s``), DBCV inside each density clustering's cell
(``dbcv_s``), topic words, NPMI and diversity in the process that writes the store (``topics_s``),
consensus after the run. Those are wall-clock seconds, which a busy machine stretches; the CPU
seconds of the grid (this process and its worker processes) and of consensus are printed too, and
``--baseline`` runs the same grid again without any label-free criterion (``--no-label-free``,
fresh caches), so that the CPU seconds the criteria add to the grid are measured as a difference:

    python bench/bench_criteria_cost.py --baseline
"""

from __future__ import annotations

import argparse
import gzip
import re
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchdata import SHARED  # noqa: E402

BLURBS = [SHARED / "data" / "germeval2019" / "blurbs_dev.txt.gz", SHARED / "data" / "germeval2019" /
          "blurbs_test_nolabel.txt.gz"]


def blurbs_texts(limit: int) -> list[str]:
    import html

    out = []
    for path in BLURBS:
        text = gzip.open(path, "rt", encoding="utf-8").read()
        for book in re.findall(r"<book[^>]*>(.*?)</book>", text, flags=re.S):
            title = re.search(r"<title>(.*?)</title>", book, flags=re.S)
            body = re.search(r"<body>(.*?)</body>", book, flags=re.S)
            if title and body:
                out.append(html.unescape(" ".join(f"{title.group(1)}. {body.group(1)}".split())))
    return sorted(set(out))[:limit]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=5000)
    parser.add_argument("--models", default="tfidf-lsa,minilm-l6")
    parser.add_argument("--configs", default="minibatch_kmeans:none,agglomerative:none,hdbscan:pca")
    parser.add_argument("--k", default="5:70:5")
    parser.add_argument("--min-cluster-size", default="10,20,40")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--baseline", action="store_true",
                        help="also run the grid without label-free criteria and print the CPU seconds they add")
    args = parser.parse_args()

    import csv

    from tecb_eval.cli import main as eval_main
    from tecb_eval.clustering.consensus import with_consensus
    from tecb_eval.grid.store import read_results
    from tecb_data.cli import main as data_main

    with tempfile.TemporaryDirectory(prefix="tecb-criteria-cost-") as tmp:
        tmp = Path(tmp)
        texts = blurbs_texts(args.texts)
        with open(tmp / "corpus.csv", "w", encoding="utf-8", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["text"])
            writer.writerows([t] for t in texts)
        # The quote character named: texts with apostrophes can mislead the format sniffer.
        if data_main(["build", "--source", "table", "--input", str(tmp / "corpus.csv"), "--name", "cost", "--text",
                      "text", "--quotechar", '"', "--delimiter", ",", "--out", str(tmp / "data"), "--quiet"]):
            return 1

        def grid_run(criteria: str, name: str, stability: tuple = ("--stability", "0")) -> tuple[float, float] | None:
            """The grid's wall clock and CPU seconds (this process and its worker processes)."""
            argv = ["run", "--data", str(tmp / "data" / "cost-s2s"), "--results", str(tmp / f"{name}.jsonl"),
                    "--cache-dir", str(tmp / f"cache-{name}"), "--quiet", criteria, *stability, "--k", args.k,
                    "--min-cluster-size", args.min_cluster_size, "--jobs", str(args.jobs)]
            for model in args.models.split(","):
                argv += ["--model", model]
            for config in args.configs.split(","):
                argv += ["--config", config]
            cpu_began, started = cpu_seconds(), time.perf_counter()
            if eval_main(argv):
                return None
            return time.perf_counter() - started, cpu_seconds() - cpu_began

        measured = grid_run("--label-free", "r")
        if measured is None:
            return 1
        grid, grid_cpu = measured
        frame = read_results(tmp / "r.jsonl")
        cpu_began, started = time.process_time(), time.perf_counter()
        with_consensus(frame)
        agreement, agreement_cpu = time.perf_counter() - started, time.process_time() - cpu_began
        # The default's stability pass on its own: the same command without --stability 0 finds every
        # cell stored, ranks the pipelines as recommend does and reruns the listed ones' cells; less
        # what the command costs on the finished store with --stability 0 (start, store, encoder).
        idle = grid_run("--label-free", "r")
        rerun = grid_run("--label-free", "r", stability=())
        if rerun is None or idle is None:
            return 1
        stability = (rerun[0] - idle[0], rerun[1] - idle[1])
        baseline = grid_run("--no-label-free", "baseline") if args.baseline else None
        if args.baseline and baseline is None:
            return 1
    criteria = frame.label_free_s.fillna(0) + (frame.dbcv_s.fillna(0) if "dbcv_s" in frame.columns else 0.0)
    vectors, density = float(frame.label_free_s.sum()), float(frame.dbcv_s.sum()) if "dbcv_s" in frame.columns else 0.0
    words = float(frame.topics_s.sum()) if "topics_s" in frame.columns else 0.0
    clustering = float(frame.cluster_s.sum())
    # The vector criteria and DBCV run inside the units (one per model, reduction and seed here),
    # on the workers. The units' work ends after about the larger of its sum over --jobs workers
    # and the longest unit (the units here are far from equal: Ward's holds most of the work), so
    # the criteria's share of the wall clock is that bound with them less that bound without them.
    unit = ["model", "reduction", "seed"]
    with_them = (frame.cluster_s + criteria).groupby([frame[c] for c in unit]).sum()
    without = frame.cluster_s.groupby([frame[c] for c in unit]).sum()
    inside = (max(with_them.sum() / args.jobs, with_them.max()) - max(without.sum() / args.jobs, without.max()))
    print(f"{len(texts)} texts, {len(frame)} pipelines ({args.models}; {args.configs}; k {args.k}, "
          f"min_cluster_size {args.min_cluster_size}), --jobs {args.jobs}")
    print(f"grid wall clock (encoding included, topic words included): {grid:.1f} s, {grid_cpu:.1f} CPU s; "
          f"clustering summed over cells {clustering:.1f} s")
    print(f"vector criteria, the spectrum's k and DBCV (summed over cells): {vectors + density:.1f} s (DBCV "
          f"{density:.1f} s), about {inside:.1f} s of the units' wall clock over {args.jobs} workers "
          f"({100 * inside / grid:.1f} %)")
    print(f"topic words, NPMI and diversity (this process): {words:.1f} s ({100 * words / grid:.1f} %)")
    print(f"consensus after the run: {agreement:.1f} s, {agreement_cpu:.1f} CPU s ({100 * agreement / grid:.1f} %)")
    total = inside + words + agreement
    print(f"label-free criteria in all: {total:.1f} s, {100 * total / grid:.1f} % of the grid's wall clock")
    print(f"the default's stability pass (rank as recommend does, 5 reruns of the pipelines it lists; what "
          f"--stability 0 leaves out): {stability[0]:.1f} s, {stability[1]:.1f} CPU s (the command without "
          f"--stability 0 on the finished store {rerun[0]:.1f} s, with it {idle[0]:.1f} s); with it the label-free "
          f"criteria take {total + stability[0]:.1f} s, {100 * (total + stability[0]) / (grid + stability[0]):.1f} % "
          "of the run's wall clock")
    if baseline is not None:
        wall, cpu = baseline
        added = grid_cpu - cpu + agreement_cpu
        print(f"the same grid without label-free criteria: {wall:.1f} s, {cpu:.1f} CPU s; the criteria's CPU "
              f"seconds (the difference, and consensus): {added:.1f}, {100 * added / grid_cpu:.1f} % "
              "of the grid's CPU seconds")
    return 0


def cpu_seconds() -> float:
    """CPU seconds of this process and of its finished child processes (the grid's workers)."""
    return sum(resource.getrusage(who).ru_utime + resource.getrusage(who).ru_stime
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))


if __name__ == "__main__":
    sys.exit(main())
