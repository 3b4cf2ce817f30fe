"""What a seed may be: one rule for the grid, the layer sweep and pre-training.

numpy's, scikit-learn's and torch's seeds are 32-bit, so a seed is an integer from 0 to 2**32 - 1;
a run's seeds are at least one such seed, none repeated.
"""

from __future__ import annotations

import numpy as np

from tecb_data.errors import UserError
from tecb_data.seeding import DEFAULT_SEED

# The paper's seed set: three k-means (and pre-training) seeds, the default seed first.
PAPER_SEEDS = (DEFAULT_SEED, 1, 2)
MAX_SEED = 2**32 - 1


def check_seed(seed, what: str = "seed") -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed <= MAX_SEED:
        raise UserError(f"{what} must be an integer from 0 to {MAX_SEED}, got {seed!r}")
    return int(seed)


def check_seeds(seeds) -> tuple[int, ...]:
    """A run's seeds: at least one, each a valid seed, none repeated."""
    seeds = tuple(seeds)
    if not seeds:
        raise UserError("seeds is empty; give at least one seed, e.g. --seeds 42,1,2")
    checked = tuple(check_seed(s, "every seed") for s in seeds)
    repeated = sorted({s for s in checked if checked.count(s) > 1})
    if repeated:
        raise UserError(f"seeds repeat {', '.join(map(str, repeated))}; give each seed once")
    return checked
