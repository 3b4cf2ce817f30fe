"""The paper's Table-1 statistics of a dataset (and MTEB's descriptive statistics that match them).

Two average lengths, because the published figures use both. MTEB's ``average_text_length`` of a
legacy clustering task is ``total_text_length / num_samples`` over every row of every split: for
TenKGnadClusteringP2P 121,260,211 / 45,914 = 2,641.0, the figure printed for it. MTEB's v2 tasks
de-duplicate those rows first, so their statistics give the average over unique texts (2,648.5 for
TenKGnadClusteringP2P.v2, whose 10,275 texts are exactly the legacy set's unique texts).
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Sequence


def table1(splits: Iterable[tuple[Sequence[str], Sequence[str]]]) -> dict:
    """Statistics over (texts, labels) splits: what MTEB's descriptive stats call samples over all
    splits, unique texts and unique labels; the average number of characters over all rows (MTEB's
    legacy ``average_text_length``) and over the unique texts (its v2 one); the split size range."""
    sizes, label_counts = [], []
    texts_seen: set[str] = set()
    labels_seen: Counter = Counter()
    total_chars = 0
    for texts, labels in splits:
        labels = labels or ()  # a corpus without labels
        sizes.append(len(texts))
        label_counts.append(len(set(labels)))
        texts_seen.update(texts)
        labels_seen.update(labels)
        total_chars += sum(len(t) for t in texts)
    samples = sum(sizes)
    unique_chars = sum(len(t) for t in texts_seen)
    return {
        "splits": len(sizes),
        "samples": samples,
        "unique_texts": len(texts_seen),
        "unique_labels": len(labels_seen),
        "avg_chars_all_rows": round(total_chars / samples, 1) if samples else 0.0,
        "avg_chars_unique_texts": round(unique_chars / len(texts_seen), 1) if texts_seen else 0.0,
        "min_split_size": min(sizes, default=0),
        "max_split_size": max(sizes, default=0),
        "min_labels_per_split": min(label_counts, default=0),
        "max_labels_per_split": max(label_counts, default=0),
    }


TABLE1_COLUMNS = (
    ("splits", "splits"),
    ("samples", "samples (all splits)"),
    ("unique_texts", "unique texts"),
    ("unique_labels", "labels"),
    ("avg_chars_all_rows", "avg chars (all rows)"),
    ("avg_chars_unique_texts", "avg chars (unique texts)"),
    ("min_split_size", "smallest split"),
    ("max_split_size", "largest split"),
    ("min_labels_per_split", "fewest labels in a split"),
    ("max_labels_per_split", "most labels in a split"),
)


def markdown_table(stats: dict) -> str:
    lines = ["| statistic | value |", "| --- | ---: |"]
    for key, title in TABLE1_COLUMNS:
        value = stats[key]
        lines.append(f"| {title} | {value:,} |" if isinstance(value, int) else f"| {title} | {value} |")
    return "\n".join(lines)


def size_category(samples: int) -> str:
    """The Hub's size_categories value for a number of samples."""
    bounds = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")]
    for bound, name in bounds:
        if samples < bound:
            return name
    return "1M<n<10M"
