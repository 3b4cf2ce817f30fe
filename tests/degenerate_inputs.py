"""Degenerate inputs for the grid: a signed hashing bag of words (many exact duplicates and
near-duplicates among its vectors) and a GermEval file with every book copied, as
``bench/bench_scale.py`` replicates them. Used by tests/test_degenerate_determinism.py and
tests/test_parallel.py."""

from __future__ import annotations

import re

import numpy as np
from sklearn.feature_extraction.text import HashingVectorizer


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
