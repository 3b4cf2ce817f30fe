"""What the label-free criteria cost beside the grid, on 5,000 texts and about 60 pipelines.

Builds a corpus without labels from the first 5,000 GermEval 2019 Blurbs texts (dev, then test;
title and blurb), runs the grid with every label-free criterion (``--label-free``, the default on
a corpus without labels, given so that the bench measures them whatever the default) and without stability reruns
(``--stability 0``: reruns are a criterion of their own, priced per rerun in docs/unlabelled.md),
then computes consensus over the kept assignments as ``recommend`` does, and prints each part's
seconds and its share of the grid's wall clock:

    python bench/bench_criteria_cost.py
    python bench/bench_criteria_cost.py --texts 2000 --models tfidf-lsa      # a quicker look

The vector criteria (silhouette, Calinski-Harabasz, Davies-Bouldin, size balance, the spectrum's
k) are timed inside each cell (``label_free_s``), topic words, NPMI and diversity in the process
that writes the store (``topics_s``), consensus after the run.
"""

from __future__ import annotations

import argparse
import gzip
import re
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
        results = tmp / "r.jsonl"
        argv = ["run", "--data", str(tmp / "data" / "cost-s2s"), "--results", str(results), "--cache-dir",
                str(tmp / "cache"), "--quiet", "--label-free", "--stability", "0", "--k", args.k, "--min-cluster-size",
                args.min_cluster_size, "--jobs", str(args.jobs)]
        for model in args.models.split(","):
            argv += ["--model", model]
        for config in args.configs.split(","):
            argv += ["--config", config]
        started = time.perf_counter()
        if eval_main(argv):
            return 1
        grid = time.perf_counter() - started
        frame = read_results(results)
        started = time.perf_counter()
        with_consensus(frame)
        agreement = time.perf_counter() - started
    vectors = float(frame.label_free_s.sum())
    words = float(frame.topics_s.sum()) if "topics_s" in frame.columns else 0.0
    clustering = float(frame.cluster_s.sum())
    # The vector criteria run inside the units, on the workers: their seconds are spread over
    # --jobs processes as the clustering's are; topic words and consensus run in this process.
    inside = vectors / args.jobs
    print(f"{len(texts)} texts, {len(frame)} pipelines ({args.models}; {args.configs}; k {args.k}, "
          f"min_cluster_size {args.min_cluster_size}), --jobs {args.jobs}")
    print(f"grid wall clock (encoding included, topic words included): {grid:.1f} s; clustering summed over "
          f"cells {clustering:.1f} s")
    print(f"vector criteria and the spectrum's k (summed over cells): {vectors:.1f} s, about {inside:.1f} s of wall "
          f"clock over {args.jobs} workers ({100 * inside / grid:.1f} %)")
    print(f"topic words, NPMI and diversity (this process): {words:.1f} s ({100 * words / grid:.1f} %)")
    print(f"consensus after the run: {agreement:.1f} s ({100 * agreement / grid:.1f} %)")
    total = inside + words + agreement
    print(f"label-free criteria in all: {total:.1f} s, {100 * total / grid:.1f} % of the grid's wall clock")
    return 0


if __name__ == "__main__":
    sys.exit(main())
