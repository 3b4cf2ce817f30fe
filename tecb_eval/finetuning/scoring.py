"""Scores of a model on a fold's splits: the benchmark's own (k-means V-measure per split, Table 2's
legacy protocol) and the metric COB optimises (HAC average linkage with the true k: ARI, NMI and
the Rand index), with the grid's seeds.

Every distinct text is encoded once, as the grid encodes it (``encode_per_task``: with its task's
prompt for a model that has prompts; the grid's chunks, order and batch size), then each split is
clustered. HAC is deterministic; its row is repeated per
seed so that every row pairs by (split, seed) in ``tecb_eval.reports.compare``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score, rand_score

from tecb_eval.clustering.evaluation import kmeans_v_measure
from tecb_eval.grid.work import one_thread
from tecb_eval.training.tracking import encode_per_task, non_finite_texts

KMEANS = "minibatch_kmeans"  # the grid's name: Table 2's configuration
HAC = "hac_average_true_k"


def hac_labels(vectors: np.ndarray, k: int) -> np.ndarray:
    from sklearn.cluster import AgglomerativeClustering

    return AgglomerativeClustering(n_clusters=int(k), metric="euclidean", linkage="average").fit_predict(vectors)


def hac_scores(vectors: np.ndarray, labels: Sequence[str]) -> dict:
    predicted = hac_labels(np.asarray(vectors, dtype=np.float64), len(set(labels)))
    return {"ari": float(adjusted_rand_score(labels, predicted)), "nmi": float(normalized_mutual_info_score(labels, predicted)),
            "ri": float(rand_score(labels, predicted))}


def vectors_for(encoder, parts) -> list[dict[str, np.ndarray]]:
    """``text -> vector`` for each ``(benchmark, split)`` of ``parts``: with the prompt the
    benchmark's task gets where the model has per-task prompts (``encode_per_task``)."""
    out, _ = encode_per_task(encoder, [(bench, split.texts) for bench, split in parts])
    if non_finite_texts(out):
        raise ArithmeticError("the model gives vectors that are not finite")
    return out


def score_splits(encoder, scored, seeds: Sequence[int]) -> list[dict]:
    """One row per (scored split, seed) and configuration: k-means V-measure, HAC ARI / NMI / RI."""
    vectors = vectors_for(encoder, [(s.bench, s.split) for s in scored])
    rows = []
    with one_thread():  # as the grid's units cluster: the same k-means labels
        for s, by_text in zip(scored, vectors):
            matrix = np.stack([by_text[t] for t in s.split.texts])
            hac = hac_scores(matrix, s.split.labels)
            for seed in seeds:
                base = {"dataset": s.dataset, "mteb_name": s.mteb_name, "split": s.split.name, "seed": int(seed),
                        "reduction": "none"}
                rows.append({**base, "algorithm": KMEANS,
                             "v_measure": kmeans_v_measure(matrix, s.split.labels, int(seed)),
                             "ari": np.nan, "nmi": np.nan, "ri": np.nan})
                rows.append({**base, "algorithm": HAC, "v_measure": np.nan, **hac})
    return rows


def tracking_scores(encoder, fold, kmeans_seed: int) -> dict:
    """During training: ARI (HAC, true k) on the fold's validation split, which chooses the
    checkpoint, and the mean k-means V-measure over its scored splits, which is only watched (never
    chooses)."""
    validation, *scored = vectors_for(encoder, [(fold.source, fold.validation)] + [(s.bench, s.split) for s in fold.scored])
    with one_thread():
        matrix = np.stack([validation[t] for t in fold.validation.texts])
        validation_ari = hac_scores(matrix, fold.validation.labels)["ari"]
        v = [kmeans_v_measure(np.stack([by_text[t] for t in s.split.texts]), s.split.labels, kmeans_seed)
             for s, by_text in zip(fold.scored, scored)]
    return {"validation_ari": validation_ari, "scored_v_measure": float(np.mean(v))}
