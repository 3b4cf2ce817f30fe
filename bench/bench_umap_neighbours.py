"""Figures for UMAP's exact neighbours (printed, not a test): the grid's UMAP, whose neighbours come
from one compiled loop (``tecb_eval.clustering.umap_neighbours``), against umap-learn's own path,
which asks scikit-learn for every distance one Python call per pair; and whether both give the same
embedding bit for bit.

On seeded clustered vectors (8 centres plus noise) of the sizes given, 5 components, seed 3, each
fit timed after one small fit has compiled (or loaded) the numba code; best of ``--repeat``.

    python bench/bench_umap_neighbours.py [--sizes 700x50,2700x384] [--repeat 2]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tecb_eval.clustering.estimators import Umap, _seeded_spectral_umap
from tecb_eval.clustering.settings import UMAP_NEIGHBOURS


def vectors(n: int, d: int) -> np.ndarray:
    rng = np.random.default_rng(n * 1000 + d)
    centres = rng.normal(size=(8, d))
    return (centres[rng.integers(0, 8, n)] + 0.5 * rng.normal(size=(n, d))).astype(np.float32)


def best_of(repeat: int, fit):
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fit()
        times.append(time.perf_counter() - start)
    return min(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="700x50,2700x384", help="NxD,... (rows x dimensions)")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    Umap(n_components=5, random_state=3).fit_transform(vectors(60, 8))  # compile or load the numba code
    warnings.simplefilter("ignore")
    for size in args.sizes.split(","):
        n, d = (int(v) for v in size.split("x"))
        X = vectors(n, d)
        theirs_params = dict(n_components=5, metric="cosine", n_neighbors=min(UMAP_NEIGHBOURS, n - 1), random_state=3)
        ours_s, ours = best_of(args.repeat, lambda X=X: Umap(n_components=5, random_state=3).fit_transform(X))
        theirs_s, theirs = best_of(args.repeat,
                                   lambda X=X, p=theirs_params: _seeded_spectral_umap()(**p).fit_transform(X))
        print(f"{n:>6} x {d:<4} ours {ours_s:6.2f} s   umap-learn's path {theirs_s:6.2f} s   "
              f"{theirs_s / ours_s:4.1f}x   same bits: {ours.tobytes() == theirs.tobytes()}")


if __name__ == "__main__":
    main()
