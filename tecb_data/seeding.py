"""Every random decision of a recipe derives from the run's seed and the names of what it decides.

Names rather than positions: adding a split or a dataset never changes the draws of another.
Membership is decided by keyed hashing of record ids, so removing one record never reorders the
others (a deletion changes exactly the rows it deletes).
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

# The paper's seed: the default of every recipe, clustering, reduction and training run.
DEFAULT_SEED = 42


def _name_to_int(name: str) -> int:
    return int.from_bytes(hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest(), "big")


def seed_sequence(seed: int, *names: str) -> np.random.SeedSequence:
    """The SeedSequence for one decision, e.g. ``seed_sequence(42, "blurbs", "coarse-03")``."""
    if seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed}")
    return np.random.SeedSequence(entropy=seed, spawn_key=tuple(_name_to_int(n) for n in names))


def rng(seed: int, *names: str) -> np.random.Generator:
    return np.random.default_rng(seed_sequence(seed, *names))


def hash_key(seed: int, *names: str) -> bytes:
    """A 16-byte key for keyed hashing, derived from the same seed sequence as :func:`rng`."""
    return seed_sequence(seed, *names, "hash-key").generate_state(4, np.uint32).astype("<u4").tobytes()


def keyed_order(ids, key: bytes) -> list:
    """Ids ordered by their keyed BLAKE2b hash (ties, impossible in practice, by id)."""
    def h(i: str) -> bytes:
        return hashlib.blake2b(i.encode("utf-8"), key=key, digest_size=16).digest()

    return sorted(ids, key=lambda i: (h(i), i))


def draw_size(generator: np.random.Generator, n: int, min_fraction: float, max_fraction: float = 1.0) -> int:
    """A sample size between ``min_fraction`` and ``max_fraction`` of ``n``.

    The fraction is drawn independently of ``n``, so one record more or less moves the size by at
    most one instead of redrawing it.
    """
    fraction = generator.uniform(min_fraction, max_fraction)
    low = min(n, max(1, math.ceil(min_fraction * n)))
    return int(min(n, max(low, round(fraction * n))))
