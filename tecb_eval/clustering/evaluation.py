"""The legacy (MTEB v1) clustering evaluation on one split, and encoding a set of benchmarks once.

Shared by the grid and by evaluation during pre-training: every unique text across all given
datasets and splits is encoded exactly once, then each split is clustered from those vectors.

Scale: every score here is scikit-learn's, 0..1 (a V-measure of 0.036). The tables, pages and
``recommend`` print it x100 with two decimals, as the paper does (3.60), and say "V-measure x100".
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

import numpy as np
from sklearn.metrics import v_measure_score

from tecb_data.seeding import DEFAULT_SEED
from tecb_eval.clustering.algorithms import make_algorithm


def unique_texts(benchmarks: Iterable) -> list[str]:
    """Every distinct text of the benchmarks' splits, in a deterministic (sorted) order."""
    return sorted({text for bench in benchmarks for split in bench.splits for text in split.texts})


def encode_unique(benchmarks: Sequence, encode: Callable[[list[str]], np.ndarray]) -> dict[str, np.ndarray]:
    """text -> embedding, calling ``encode`` once on the unique texts of all benchmarks."""
    texts = unique_texts(benchmarks)
    vectors = np.asarray(encode(texts))
    if len(vectors) != len(texts):
        raise ValueError(f"encoder returned {len(vectors)} vectors for {len(texts)} texts")
    return dict(zip(texts, vectors))


def split_matrix(split, vectors: dict[str, np.ndarray]) -> np.ndarray:
    return np.stack([vectors[t] for t in split.texts])


def kmeans_v_measure(embeddings: np.ndarray, labels: Sequence[str], seed: int = DEFAULT_SEED) -> float:
    """MTEB v1: MiniBatchKMeans with k = number of labels, batch 500, n_init auto, then V-measure (0..1)."""
    predicted = make_algorithm("minibatch_kmeans", len(set(labels)), seed).fit_predict(embeddings)
    return float(v_measure_score(labels, predicted))


def evaluate_kmeans(benchmarks: Sequence, encode: Callable[[list[str]], np.ndarray], seed: int = DEFAULT_SEED) -> list[dict]:
    """V-measure (0..1) per (dataset, split) with k-means, encoding every unique text once."""
    vectors = encode_unique(benchmarks, encode)
    rows = []
    for bench in benchmarks:
        for split in bench.splits:
            rows.append(
                {
                    "dataset": bench.name,
                    "split": split.name,
                    "v_measure": kmeans_v_measure(split_matrix(split, vectors), split.labels, seed),
                }
            )
    return rows
