"""Evaluation protocols: which texts are reduced together and which samples are clustered.

A protocol turns a benchmark into *units*. Each unit is clustered once per configuration and
gives one row of the results store. A unit names a *base* set of texts (reduced once per
reduction, shared by every algorithm) and the rows of that base it clusters.

- ``legacy`` (the paper, MTEB v1's ``AbsTaskClusteringLegacy``): a unit per split; base = the
  split; every row once.
- ``fast`` (MTEB v2's ``AbsTaskClustering``): what MTEB's own ``<Task>.v2`` clusters, taken from
  MTEB's code by :func:`tecb_eval.mteb.sampling.fast_sample` (the task's own transform, its
  downsampling and its bootstrap draws from ``random.Random(seed)``); the units are the
  bootstrap samples, and the base is the embedded set they are drawn from. MTEB draws a
  dataset's sample once per seed and MTEB version; the grid keeps it under the cache folder
  (:mod:`tecb_eval.grid.samples`).

Both are tested equal to MTEB's scores on the same folders (``tests/test_mteb_referee.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tecb_data.errors import UserError

PROTOCOLS = ("legacy", "fast")


@dataclass(frozen=True)
class Unit:
    name: str  # the results store's "split"
    base_name: str  # what the base set is called (a split name, or "pooled")
    base_texts: tuple[str, ...]
    rows: np.ndarray | None  # indices into the base; None = all of it, in order
    labels: tuple[str, ...] | None  # gold labels of the clustered rows; None: a corpus without labels
    k: int  # clusters asked of k-means and agglomerative: the base set's number of labels (0: none)
    # The label hierarchy's levels scored beside the flat labels (tecb_eval.clustering.levels.Level); () for none.
    levels: tuple = ()

    @property
    def texts(self) -> list[str]:
        if self.rows is None:
            return list(self.base_texts)
        return [self.base_texts[i] for i in self.rows]


def legacy_units(bench, limit_splits: int | None = None) -> list[Unit]:
    splits = bench.splits if limit_splits is None else bench.splits[:limit_splits]
    # A corpus without labels: no gold labels and no k from them (a range of k gives it one).
    return [Unit(s.name, s.name, tuple(s.texts), None, None if s.labels is None else tuple(s.labels),
                 0 if s.labels is None else len(set(s.labels)), split_levels(getattr(s, "label_paths", None)))
            for s in splits]


def split_levels(paths) -> tuple:
    """The levels of a split's label paths (None: the dataset has none) that hold two labels or
    more (a within-genre split's top level holds one: nothing to score); rows None where every text
    carries the level."""
    from tecb_eval.clustering.levels import Level

    if not paths:
        return ()
    levels = []
    for depth in range(max(len(p) for p in paths)):
        rows = [i for i, p in enumerate(paths) if len(p) > depth]
        labels = tuple(paths[i][depth] for i in rows)
        if len(set(labels)) >= 2:
            levels.append(Level(depth, None if len(rows) == len(paths) else np.array(rows, dtype=np.int64),
                                labels, len(set(labels))))
    return tuple(levels)


def fast_units(bench, seed: int, samples=None) -> list[Unit]:
    """``samples``: a :class:`~tecb_eval.grid.samples.SampleCache` that keeps MTEB's draws under the
    cache folder; None draws them here (a cache without a folder)."""
    if samples is None:
        from tecb_eval.grid.samples import SampleCache

        samples = SampleCache(None)
    sample = samples.get(bench, seed)
    # k as MTEB's bootstrapped k-means asks for it: the number of labels in the embedded set.
    k = len(set(sample.labels))
    # Per draw, MTEB's draws for each level of the genre paths (None: the dataset has none),
    # kept beside the sample when there is a cache folder.
    levels = samples.levels(bench, seed, sample.texts)
    return [
        Unit(f"bootstrap-{b:02d}", "pooled", sample.texts, rows, tuple(sample.labels[i] for i in rows), k,
             levels[b] if levels else ())
        for b, rows in enumerate(sample.bootstraps)
    ]


def units_for(bench, protocol: str, seed: int, *, limit_splits: int | None = None, samples=None) -> list[Unit]:
    if protocol == "fast" and not getattr(bench, "labelled", True):
        raise UserError(f"{bench.location}: a corpus without labels; the fast protocol draws its samples by label "
                        "(MTEB v2): run it with --protocol legacy")
    if protocol == "legacy":
        return legacy_units(bench, limit_splits)
    if protocol == "fast":
        return fast_units(bench, seed, samples)
    raise UserError(f"unknown protocol {protocol!r}; choose from {', '.join(PROTOCOLS)}")
