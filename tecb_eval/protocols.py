"""Evaluation protocols: which texts are reduced together and which samples are clustered.

A protocol turns a benchmark into *units*. Each unit is clustered once per configuration and
gives one row of the results store. A unit names a *base* set of texts (reduced once per
reduction, shared by every algorithm) and the rows of that base it clusters.

- ``legacy`` (the paper, MTEB v1): a unit per split; base = the split; every row once.
- ``fast`` (MTEB v2, ``mteb/abstasks/clustering.py``): the splits are pooled into one set of
  unique texts (a text keeps the label of its first split, as MTEB's ``_convert_to_fast`` does),
  downsampled to ``max_documents``, and clustered in ``n_bootstrap`` samples of
  ``cluster_size`` rows drawn with replacement; the units are those samples.

The fast protocol draws from ``random.Random(seed)`` in MTEB's order (downsample, then the
samples) rather than from ``tecb_data.seeding``: on the same texts and embeddings it then draws
the same samples as MTEB, so its scores can be compared with MTEB's.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from tecb_data.errors import UserError

PROTOCOLS = ("legacy", "fast")
# MTEB v2's AbsTaskClustering defaults and its German tasks' downsampling (BlurbsClustering*.v2
# embed 2048 documents; TenKGnadClustering*.v2 embed all of them).
FAST_N_BOOTSTRAP = 10
FAST_CLUSTER_SIZE = 16_384
FAST_MAX_DOCUMENTS = {"BlurbsClusteringS2S": 2048, "BlurbsClusteringP2P": 2048}
FAST_MAX_POOL = 100_000


@dataclass(frozen=True)
class Unit:
    name: str  # the results store's "split"
    base_name: str  # what the base set is called (a split name, or "pooled")
    base_texts: tuple[str, ...]
    rows: np.ndarray | None  # indices into the base; None = all of it, in order
    labels: tuple[str, ...]  # gold labels of the clustered rows
    k: int  # clusters asked of k-means and agglomerative: the base set's number of labels

    @property
    def texts(self) -> list[str]:
        if self.rows is None:
            return list(self.base_texts)
        return [self.base_texts[i] for i in self.rows]


def legacy_units(bench, limit_splits: int | None = None) -> list[Unit]:
    splits = bench.splits if limit_splits is None else bench.splits[:limit_splits]
    return [Unit(s.name, s.name, tuple(s.texts), None, tuple(s.labels), len(set(s.labels))) for s in splits]


def pool_splits(bench) -> tuple[list[str], list[str]]:
    """Unique texts over all splits in published order, each with its first label (MTEB v2)."""
    seen: set[str] = set()
    texts, labels = [], []
    for split in bench.splits:
        for text, label in zip(split.texts, split.labels):
            if text not in seen:
                seen.add(text)
                texts.append(text)
                labels.append(label)
    return texts, labels


def fast_units(bench, seed: int, *, max_documents: int | None = None, n_bootstrap: int = FAST_N_BOOTSTRAP,
               cluster_size: int = FAST_CLUSTER_SIZE) -> list[Unit]:
    texts, labels = pool_splits(bench)
    pool_rng = random.Random(seed)
    if len(texts) > FAST_MAX_POOL:
        keep = pool_rng.sample(range(len(texts)), FAST_MAX_POOL)
        texts, labels = [texts[i] for i in keep], [labels[i] for i in keep]
    rng = random.Random(seed)
    limit = max_documents if max_documents is not None else FAST_MAX_DOCUMENTS.get(bench.mteb_name)
    if limit is not None and limit < len(texts):
        chosen = rng.sample(range(len(texts)), k=limit)
        texts, labels = [texts[i] for i in chosen], [labels[i] for i in chosen]
    base = tuple(texts)
    k = len(set(labels))
    units = []
    for b in range(n_bootstrap):
        rows = np.array(rng.choices(range(len(base)), k=cluster_size), dtype=np.int64)
        units.append(Unit(f"bootstrap-{b:02d}", "pooled", base, rows, tuple(labels[i] for i in rows), k))
    return units


def units_for(bench, protocol: str, seed: int, *, limit_splits: int | None = None,
              fast_max_documents: int | None = None) -> list[Unit]:
    if protocol == "legacy":
        return legacy_units(bench, limit_splits)
    if protocol == "fast":
        return fast_units(bench, seed, max_documents=fast_max_documents)
    raise UserError(f"unknown protocol {protocol!r}; choose from {', '.join(PROTOCOLS)}")
