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


MIXED_CONFIGURATIONS = ["minibatch_kmeans:none", "agglomerative:none", "dbstream:pca"]
# A store as a user grows it: two models over seeds 42 and 1, a third later over seed 42 only.
MIXED_BOTH_SEEDS = ["tfidf-lsa", {"spec": "tfidf-lsa", "name": "tfidf-lsa-16", "n_components": 16}]
MIXED_ONE_SEED = {"spec": "tfidf-lsa", "name": "tfidf-lsa-8", "n_components": 8}


def mixed_seed_store(demo: Path, folder: Path, late=(MIXED_ONE_SEED,)) -> Path:
    """Two models over seeds 42 and 1, then ``late`` models over seed 42 only (written last, so
    the newest seed set), on 2 splits of two demo datasets, with DBSTREAM on PCA (all noise)."""
    from tecb_eval.grid.run import run_grid

    store = folder / "mixed.jsonl"
    datasets = [demo / d for d in DATASETS]
    run_grid(datasets, MIXED_BOTH_SEEDS, configurations=MIXED_CONFIGURATIONS, results=store, limit_splits=2,
             seeds=[42, 1], progress=False, cache_dir=folder / "cache")
    return with_late_models(store, demo, folder, late)


def with_late_models(store: Path, demo: Path, folder: Path, late) -> Path:
    """``late`` models over seed 42 only, written at the end of ``store`` (in place): the newest seed
    set of a store grown as a user grows it (:func:`mixed_seed_store`)."""
    from tecb_eval.grid.run import run_grid

    run_grid([demo / d for d in DATASETS], list(late), configurations=MIXED_CONFIGURATIONS, results=store,
             limit_splits=2, seeds=[42], progress=False, cache_dir=folder / "cache")
    return store
