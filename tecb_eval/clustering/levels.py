"""One level of a label hierarchy, as a cell is scored on it (Blurbs: level 0 the top-level genre,
level 1 the second-level genre). Made by the protocols (:func:`tecb_eval.grid.protocols.split_levels`,
:func:`tecb_eval.mteb.levels.fast_levels`), scored by :func:`tecb_eval.grid.extra.level_scores`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Level:
    """The rows of the base set that carry the level, their labels at that level, and k (the number
    of labels at that level in the set the rows are drawn from)."""

    level: int
    rows: np.ndarray | None  # rows of the base set; None = all, in order
    labels: tuple[str, ...]
    k: int
