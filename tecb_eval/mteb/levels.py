"""The fast protocol's per-level draws: what MTEB v2's ``AbsTaskClustering`` clusters per level when
each embedded text is labelled with its genre path (``label_paths``) instead of one flat label.

MTEB's ``_evaluate_clustering_bootstrapped`` takes hierarchical labels (a list of labels per text,
top level first): for each level up to ``max_depth`` it keeps the texts that carry the level, asks
k-means for k = the number of labels at that level among them, and draws ``n_clusters`` samples of
``max_documents_per_cluster`` texts with replacement from ``rng_state``, level after level. The
draws here are those: the same task, transform and downsampling as the flat sample
(:func:`tecb_eval.mteb.sampling.embedded_set`), then the level-by-level draws from the same
``rng_state``. A text's path is that of its first occurrence in the splits, the occurrence MTEB's
transform keeps. Tested equal to MTEB's own evaluation (``tests/test_levels.py``).

A text without a level is left out of that level, as MTEB means to: it marks such a text with the
integer -1 and filters on it. That filter works where labels are integers; with text labels numpy
turns the -1 into the string "-1", the filter keeps every text, and the texts without the level
are scored as one more genre called "-1" (mteb 2.26, ``_evaluate_clustering_bootstrapped``). We do
not copy that: the referee gives MTEB the genre names coded as integers.
"""

from __future__ import annotations

import numpy as np

from tecb_data.errors import UserError


def first_paths(bench) -> dict[str, tuple[str, ...]] | None:
    """text -> its label path at its first occurrence over the splits in order; None when a split
    has no label paths (a dataset built before them)."""
    found: dict[str, tuple[str, ...]] = {}
    for split in bench.splits:
        if getattr(split, "label_paths", None) is None:
            return None
        for text, path in zip(split.texts, split.label_paths):
            found.setdefault(text, tuple(path))
    return found


def fast_levels(bench, seed: int, base_texts) -> tuple[tuple, ...] | None:
    """Per bootstrap draw b (MTEB's ``n_clusters`` of them), the :class:`~tecb_eval.clustering.levels.Level`
    of each level with the rows of ``base_texts`` (the flat sample's embedded texts) that MTEB's
    b-th draw at that level clusters; None for a dataset without label paths."""
    from tecb_eval.mteb.sampling import embedded_set

    paths_of = first_paths(bench)
    if paths_of is None:
        return None
    task, texts, _ = embedded_set(bench, seed)
    if tuple(texts) != tuple(base_texts):
        raise UserError(f"{bench.location}: the fast protocol's cached sample is not MTEB's embedded set for seed "
                        f"{seed}; delete the cache folder's samples and run again")
    return level_draws(task, texts, paths_of)


def fast_draws(bench, seed: int) -> tuple:
    """``(sample, levels)``: :func:`~tecb_eval.mteb.sampling.fast_sample` and :func:`fast_levels` of
    ``bench`` (``levels`` None without genre paths) from one run of MTEB's transform. Both begin
    their draws where the downsampling draw leaves ``rng_state`` (MTEB draws either the flat labels
    or the genre paths of a task, never both), so the state is kept and restored between them: the
    same draws as calling each on its own, for half the transforms, the bulk of a cold sample's
    cost (2.3 s each on the Blurbs dev set)."""
    from tecb_eval.mteb.sampling import bootstrapped, embedded_set

    task, texts, labels = embedded_set(bench, seed)
    state = task.rng_state.getstate()
    sample = bootstrapped(task, texts, labels)
    paths_of = first_paths(bench)
    if paths_of is None:
        return sample, None
    task.rng_state.setstate(state)
    return sample, level_draws(task, texts, paths_of)


def level_draws(task, texts, paths_of: dict) -> tuple[tuple, ...]:
    """The per-level draws of :func:`fast_levels` from ``task``'s ``rng_state`` as it stands after
    the transform and downsampling draw that gave the embedded ``texts``."""
    from tecb_eval.clustering.levels import Level

    paths = [paths_of[t] for t in texts]
    depth = max(map(len, paths))
    if task.max_depth is not None:
        depth = min(task.max_depth, depth)
    per_draw: list[list] = [[] for _ in range(task.n_clusters)]
    for level in range(depth):
        valid = np.array([i for i, p in enumerate(paths) if len(p) > level], dtype=np.int64)
        labels = [paths[i][level] for i in valid]
        k = len(set(labels))
        for b in range(task.n_clusters):
            drawn = task.rng_state.choices(range(len(valid)), k=task.max_documents_per_cluster)
            per_draw[b].append(Level(level, valid[drawn], tuple(labels[j] for j in drawn), k))
    return tuple(tuple(levels) for levels in per_draw)
