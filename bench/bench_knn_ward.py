"""Ward on a k-NN graph (``agglomerative_knn``) against exact Ward (``agglomerative``) on labelled data.

Exact Ward takes hours on 100,000 unreduced texts (docs/scale.md); scikit-learn's
connectivity-constrained Ward on a 15-nearest-neighbour graph takes minutes, but it is another
tree. This bench measures what that costs in V-measure where both run: the GermEval 2019 dev set
built as Blurbs S2S (and P2P with ``--views s2s,p2p``), ``--models`` (default tfidf-lsa and
minilm-l6), the first ``--limit-splits`` splits, both algorithms on each of ``--reductions`` with
k = each split's number of labels, one seed. It prints per (model, reduction) the mean V-measure
x100 of each, the difference with its range over splits, the clustering seconds of each, and the
split sizes.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_knn_ward.py [--limit-splits 4] [--views s2s]

Everything is written in a temporary folder, never in the repository.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchdata import BLURBS_DEV


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="tfidf-lsa,minilm-l6")
    p.add_argument("--reductions", default="none,umap")
    p.add_argument("--views", default="s2s")
    p.add_argument("--limit-splits", type=int, default=4)
    p.add_argument("--jobs", type=int, default=1)
    args = p.parse_args()
    if not BLURBS_DEV.is_file():
        print(f"skipped: {BLURBS_DEV} is absent (the shared GermEval data)")
        return 0
    from tecb_data.build import build
    from tecb_eval.grid.run import run_grid

    work = Path(tempfile.mkdtemp(prefix="bench-knn-ward-"))
    try:
        built = [folder for folder, _ in build("blurbs", BLURBS_DEV, work / "data", views=tuple(args.views.split(",")))]
        configurations = [f"{a}:{r}" for r in args.reductions.split(",") for a in ("agglomerative", "agglomerative_knn")]
        frame = run_grid(built, args.models.split(","), configurations=configurations, limit_splits=args.limit_splits,
                         cache_dir=work / "cache", jobs=args.jobs, progress=False, log=lambda message: None)
        print(f"load {os.getloadavg()[0]:.1f}; {len(frame)} cells; split sizes "
              f"{sorted({int(n) for n in frame.n_samples})}")
        print(f"{'dataset':<24}{'model':<12}{'reduction':<10}{'exact Ward':>11}{'k-NN Ward':>11}{'diff':>8}"
              f"{'diff range':>18}{'exact s':>9}{'k-NN s':>9}")
        keys = ["dataset", "model", "reduction"]
        for (dataset, model, reduction), rows in frame.groupby(keys, sort=True):
            by = rows.pivot_table(index="split", columns="algorithm", values="v_measure")
            seconds = rows.groupby("algorithm").cluster_s.sum()
            diff = 100 * (by["agglomerative_knn"] - by["agglomerative"])
            print(f"{dataset:<24}{model:<12}{reduction:<10}{100 * by['agglomerative'].mean():>11.2f}"
                  f"{100 * by['agglomerative_knn'].mean():>11.2f}{diff.mean():>+8.2f}"
                  f"{f'[{diff.min():+.2f}, {diff.max():+.2f}]':>18}{seconds['agglomerative']:>9.1f}"
                  f"{seconds['agglomerative_knn']:>9.1f}")
        everything = frame.pivot_table(index=keys + ["split"], columns="algorithm", values="v_measure")
        delta = 100 * (everything["agglomerative_knn"] - everything["agglomerative"])
        print(f"over all {len(delta)} (dataset, model, reduction, split): k-NN Ward minus exact Ward "
              f"{delta.mean():+.2f} V-measure x100 (range {delta.min():+.2f} to {delta.max():+.2f})")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
