"""What per-level scores and DBCV add to a cell (printed, not a test).

1. The GermEval dev set's sizes: Blurbs S2S built from the real dev set, tfidf-lsa, every split
   (17 to 1,802 texts) under ``--reduction`` (default pca, 2-d; umap is what the paper runs HDBSCAN
   and DBSTREAM on, and costs minutes here), each algorithm. Per algorithm: the clustering's time
   and what the levels and DBCV add, summed over the 28 splits and at the largest split.
2. 15,000 points drawn from a Gaussian KDE of the dev set's reduced vectors (each keeps the genre path of
   the point it was drawn from), one unit as the grid runs it.

    python bench/bench_metrics.py [--reduction pca|umap] [--size 15000] [--algorithms ...]

Times are wall seconds in one process with one thread (as every grid unit runs); on a busy
machine they carry its load.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from benchdata import BLURBS_DEV  # noqa: E402
from tecb_data.build import build  # noqa: E402
from tecb_eval.clustering import algorithms as algo  # noqa: E402
from tecb_eval.grid.protocols import split_levels  # noqa: E402
from tecb_eval.grid.run import run_grid  # noqa: E402
from tecb_eval.grid.work import Cell, WorkUnit, run_unit  # noqa: E402

ALGORITHMS = ("minibatch_kmeans", "agglomerative", "hdbscan", "dbstream")


def dev_figures(folder: Path, reduction: str, algorithms, cache: Path) -> None:
    frame = run_grid([folder], ["tfidf-lsa"], configurations=[f"{a}:{reduction}" for a in algorithms], limit_splits=0,
                     jobs=1, cache_dir=cache, progress=False, log=lambda m: None)
    print(f"GermEval dev set, Blurbs S2S, tfidf-lsa, {reduction}: {frame.split.nunique()} splits, "
          f"{frame.n_samples.min()}-{frame.n_samples.max()} texts")
    print(f"{'algorithm':18} {'cluster s':>10} {'+levels s':>10} {'+dbcv s':>10} {'largest: cluster':>17} "
          f"{'+levels':>8} {'+dbcv':>8}")
    for algorithm, rows in frame.groupby("algorithm", sort=False):
        big = rows.loc[rows.n_samples.idxmax()]
        dbcv = rows.dbcv_s.sum() if "dbcv_s" in rows and rows.dbcv_s.notna().any() else float("nan")
        print(f"{algorithm:18} {rows.cluster_s.sum():10.2f} {rows.levels_s.sum():10.2f} {dbcv:10.2f} "
              f"{big.cluster_s:17.3f} {big.levels_s:8.3f} {big.get('dbcv_s', float('nan')):8.3f}")
    density = frame[frame.algorithm.isin(["hdbscan", "dbstream"])]
    if "dbcv" in density:
        print(f"DBCV on the density rows: {density.dbcv.notna().sum()} computed, range "
              f"{density.dbcv.min():.3f} to {density.dbcv.max():.3f}; null: "
              + "; ".join(f"{n} x {note}" for note, n in density[density.dbcv.isna()].dbcv_note.value_counts().items()))


def large_figures(folder: Path, reduction: str, size: int, algorithms, cache: Path) -> None:
    import tecb_data
    from tecb_eval.grid.cache import EmbeddingStore
    from tecb_eval.models.encoders import get_encoder

    bench = tecb_data.load(folder)
    texts, paths = {}, {}
    for split in bench.splits:
        for text, path in zip(split.texts, split.label_paths):
            paths.setdefault(text, path)
    texts = sorted(paths)
    encoder = get_encoder("tfidf-lsa", seed=42).fit_corpus(texts)
    vectors = EmbeddingStore(cache, encoder.identity).embeddings().rows(texts)
    reduced = algo.reduce(reduction, np.asarray(vectors), 42)
    # Drawn from a smooth density of the same shape (scipy's Gaussian KDE, Scott's bandwidth): a
    # point of the dev set, moved by the kernel's noise, keeping its genre path. Copies moved by a
    # little noise instead would form thousands of tiny dense clumps that HDBSCAN calls clusters.
    from scipy.stats import gaussian_kde

    rng = np.random.default_rng(0)
    kernel = gaussian_kde(np.asarray(reduced, dtype=np.float64).T).covariance
    source = rng.integers(len(texts), size=size)
    X = (reduced[source] + rng.multivariate_normal(np.zeros(reduced.shape[1]), kernel, size=size)).astype(np.float32)
    all_paths = [paths[texts[i]] for i in source]
    top = tuple(p[0] for p in all_paths)
    levels = split_levels(all_paths)
    cells = tuple(Cell("large", None, top, len(set(top)), a, levels) for a in algorithms)
    unit = WorkUnit(key="large", label="large", dataset="blurbs", reduction=reduction, seed=42, protocol="legacy",
                    profile="current", cells=cells, n=size, dim=X.shape[1])
    result = run_unit(unit, X, is_reduced=True)
    print(f"\n{size:,} points (a KDE of the {reduction} of the dev set's tfidf-lsa vectors), one unit:")
    print(f"{'algorithm':18} {'cluster s':>10} {'+levels s':>10} {'+dbcv s':>10}  dbcv")
    for cell, scores in zip(cells, result.metrics):
        dbcv = scores.get("dbcv_s", float("nan"))
        shown = "" if "dbcv" not in scores else (f"{scores['dbcv']:.3f}" if scores["dbcv"] is not None else "null")
        print(f"{cell.algorithm:18} {scores['cluster_s']:10.2f} {scores['levels_s']:10.2f} {dbcv:10.2f}  {shown} "
              f"{scores.get('dbcv_note') or ''} ({scores['n_clusters_found']} clusters)")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reduction", default="pca", choices=["pca", "umap"])
    parser.add_argument("--size", type=int, default=15_000)
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS))
    args = parser.parse_args(argv)
    algorithms = args.algorithms.split(",")
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as tmp:
        tmp = Path(tmp)
        build("blurbs", BLURBS_DEV, tmp / "data", views=("s2s",))
        folder = tmp / "data" / "blurbs-clustering-s2s"
        dev_figures(folder, args.reduction, algorithms, tmp / "cache")
        large_figures(folder, args.reduction, args.size, algorithms, tmp / "cache")


if __name__ == "__main__":
    main()
