"""Small results stores of the demo datasets for the report and recommend tests: cheap models
(tfidf-lsa at two sizes), 3 splits of each dataset, a few configurations (k-means, Ward, HDBSCAN
on PCA: a density algorithm, so noise fractions are real)."""

from __future__ import annotations

import shutil
from pathlib import Path

CONFIGURATIONS = ["minibatch_kmeans:none", "agglomerative:none", "minibatch_kmeans:pca", "hdbscan:pca"]
DATASETS = ("blurbs-clustering-s2s", "tenkgnad-clustering-s2s")
MODELS = ["tfidf-lsa", {"spec": "tfidf-lsa", "name": "tfidf-lsa-16", "n_components": 16}]
# A third model on fewer splits, whose name is markup: it must stand apart, and show as text.
APART = {"spec": "tfidf-lsa", "name": "<i>lsa</i>", "n_components": 8}


def two_model_store(demo: Path, folder: Path, configurations=CONFIGURATIONS) -> Path:
    from tecb_eval.grid.run import run_grid

    store = folder / "two.jsonl"
    run_grid([demo / d for d in DATASETS], MODELS, configurations=configurations, results=store, limit_splits=3,
             progress=False, cache_dir=folder / "cache")
    return store


def with_apart_model(store: Path, demo: Path, folder: Path) -> Path:
    """A copy of ``store`` plus :data:`APART` on 2 splits of the first dataset."""
    from tecb_eval.grid.run import run_grid

    copy = folder / "three.jsonl"
    shutil.copyfile(store, copy)
    run_grid([demo / DATASETS[0]], [APART],
             configurations=["minibatch_kmeans:none"], results=copy, limit_splits=2, progress=False,
             cache_dir=folder / "cache")
    return copy
