"""Degenerate inputs for the grid: a signed hashing bag of words (many exact duplicates and
near-duplicates among its vectors) and a GermEval file with every book copied, as
``bench/bench_scale.py`` replicates them, and the bits a grid unit gives on them (what a test
compares across processes). Used by tests/test_degenerate_determinism.py and tests/test_parallel.py."""

from __future__ import annotations

import hashlib
import re

import numpy as np
from sklearn.feature_extraction.text import HashingVectorizer

METRICS = ["v_measure", "homogeneity", "completeness", "ami", "ari", "noise_fraction", "n_clusters_found"]


class HashingEncoder:
    """A degenerate encoder: scikit-learn's signed hashing bag of words, 256 buckets, unit length."""

    identity = "hashing-256-signed-l2"

    def encode(self, texts):
        vectorizer = HashingVectorizer(n_features=256, alternate_sign=True, norm="l2")
        return vectorizer.transform(list(texts)).toarray().astype(np.float32)


def replicate_books(text: str, copies: int, keep=lambda book: True) -> str:
    """bench_scale's replica of a GermEval file: ``copies`` copies of every kept book, each with its
    own ISBN and its title suffixed " (k)" (a suffix the hashing tokenizer drops: exact duplicates)."""
    head, _, rest = text.partition("<book ")
    body, _, tail = ("<book " + rest).rpartition("</book>")
    books = [b for b in re.findall(r"<book .*?</book>", body + "</book>", flags=re.S) if keep(b)]
    parts = []
    for k in range(copies):
        for book in books:
            if k:
                book = re.sub(r"<title>(.*?)</title>", lambda m: f"<title>{m.group(1)} ({k + 1})</title>", book)
            parts.append(re.sub(r"<isbn>(\d+)</isbn>", lambda m: f"<isbn>{m.group(1)}{k:02d}</isbn>", book))
    return head + "\n".join(parts) + tail


def unit_bits(folder) -> dict:
    """Per reduction, the sha256 of the reduced coarse-01 split and its cells' scores (as reprs)."""
    # Imported here: the encoder above goes to Dask workers by reference, and a worker that only
    # unpickles it needs nothing of tecb.
    import tecb_data
    from tecb_eval.grid.work import Cell, WorkUnit, run_unit

    split = tecb_data.load(folder).splits[1]
    X = HashingEncoder().encode(split.texts)
    labels = tuple(split.labels)
    cells = tuple(Cell(split.name, None, labels, len(set(labels)), a) for a in ("agglomerative", "minibatch_kmeans"))
    out = {}
    for reduction in ("umap", "pca50+umap"):
        unit = WorkUnit(f"u-{reduction}", "l", "d", reduction, 42, "legacy", "current", cells, len(X), X.shape[1])
        result = run_unit(unit, X, False)
        out[reduction] = {"reduced": hashlib.sha256(result.reduced.tobytes()).hexdigest(),
                          "scores": [repr(m[name]) for m in result.metrics for name in METRICS]}
    return out
