"""Clustering instances: the training examples of COB and of its baselines.

An instance is a set of texts with gold labels (the paper's: chunks of about 50 documents). Each
epoch shuffles the fold's training pool with a generator derived from the seed, the epoch and the
fold (``tecb_data.seeding``), and cuts it into chunks of ``size`` texts; a chunk with a single
label cannot be clustered into k >= 2 clusters and is left out (counted). Triplet training draws
its triples inside each instance, from the same seed: by default 1/25 of the instance's valid triples
(:func:`fraction_of_triples`, the COB paper's baseline), or a fixed number drawn at random
(:func:`triples`, this package's earlier default).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tecb_data.errors import UserError
from tecb_eval.training.data import epoch_order


@dataclass(frozen=True)
class Instance:
    texts: tuple[str, ...]
    labels: tuple[str, ...]

    def __post_init__(self):
        if len(self.texts) != len(self.labels):
            raise UserError(f"an instance has {len(self.texts)} texts but {len(self.labels)} labels")
        k = len(set(self.labels))
        if k < 2:
            raise UserError(f"a clustering instance needs at least two labels; this one has {k} "
                            f"({len(self.texts)} texts, label {self.labels[0] if self.labels else None!r})")


def check_pool(pool, fold: str, size: int) -> None:
    """One line when a fold's pool cannot give instances of at least two labels."""
    if size < 4:
        raise UserError(f"instance size {size}: an instance needs at least 4 texts (two labels, two texts each); "
                        "use --instance-size 50 (the paper's)")
    labels = set(pool.labels)
    if len(labels) < 2:
        raise UserError(f"fold {fold}: the training texts carry {len(labels)} label(s) ({len(pool.texts)} texts); "
                        "an instance needs at least two labels: use a dataset with more second-level genres")


def epoch_instances(pool, size: int, seed: int, epoch: int, fold: str) -> tuple[list[Instance], int]:
    """This epoch's instances in order, and how many chunks were dropped for having one label."""
    order = epoch_order(len(pool.texts), seed, "finetune", fold, epoch=epoch)
    instances, dropped = [], 0
    for start in range(0, len(order), size):
        chunk = order[start:start + size]
        if len(chunk) < 4 or len({pool.labels[i] for i in chunk}) < 2:
            dropped += 1
            continue
        instances.append(Instance(tuple(pool.texts[i] for i in chunk), tuple(pool.labels[i] for i in chunk)))
    return instances, dropped


def triples(instance: Instance, count: int, rng: np.random.Generator) -> list[tuple[int, int, int]]:
    """(anchor, positive, negative) index triples inside ``instance``: anchors whose label has a
    second text, a positive of the same label and a negative of another, ``count`` of them."""
    labels = np.asarray(instance.labels)
    anchors = [i for i in range(len(labels)) if (labels == labels[i]).sum() > 1]
    if not anchors:
        return []
    out = []
    for _ in range(count):
        a = anchors[int(rng.integers(len(anchors)))]
        positives = [j for j in range(len(labels)) if labels[j] == labels[a] and j != a]
        negatives = [j for j in range(len(labels)) if labels[j] != labels[a]]
        out.append((a, positives[int(rng.integers(len(positives)))], negatives[int(rng.integers(len(negatives)))]))
    return out


def valid_triples(instance: Instance) -> np.ndarray:
    """Every valid triple of ``instance`` once, as rows (anchor, positive, negative): each set of
    three texts with exactly two labels among them, the two of one label as anchor and positive
    (the earlier as anchor), the third as negative -- what the COB authors' ``get_frac_triples``
    enumerates (their loops meant to visit each set once). Ordered by anchor, positive, negative."""
    labels = np.unique(np.asarray(instance.labels), return_inverse=True)[1]
    n = len(labels)
    rows = []
    for a in range(n):
        for p in range(a + 1, n):
            if labels[p] == labels[a]:
                negatives = np.flatnonzero(labels != labels[a])
                rows.append(np.column_stack([np.full(len(negatives), a), np.full(len(negatives), p), negatives]))
    return np.concatenate(rows).astype(np.int64) if rows else np.zeros((0, 3), dtype=np.int64)


def fraction_of_triples(instance: Instance, fraction: int, rng: np.random.Generator) -> list[tuple[int, int, int]]:
    """``len(valid) // fraction`` of the instance's valid triples, drawn without replacement (the
    authors' ``random.sample(triples, len(triples) // num_triples_frac)``); none when the instance
    has fewer than ``fraction`` valid triples, as theirs."""
    valid = valid_triples(instance)
    chosen = rng.choice(len(valid), size=len(valid) // fraction, replace=False) if len(valid) >= fraction else []
    return [tuple(int(x) for x in valid[i]) for i in chosen]
