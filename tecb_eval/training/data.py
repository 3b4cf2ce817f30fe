"""What training reads: the datasets, and the seeded order in which an epoch visits the texts."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tecb_data import seeding
from tecb_data.errors import UserError


def load_benchmarks(datasets) -> list:
    """Benchmarks from folders / repo ids (anything ``tecb_data.load`` takes) or loaded benchmarks."""
    import tecb_data

    if isinstance(datasets, (str, Path)) or hasattr(datasets, "splits"):
        datasets = [datasets]
    benchmarks = [d if hasattr(d, "splits") else tecb_data.load(d) for d in datasets]
    if not benchmarks:
        raise UserError("no datasets given: pass at least one dataset folder")
    names = [b.name for b in benchmarks]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise UserError(f"dataset {duplicated[0]} is given twice; pass each dataset once")
    # By name: the outputs do not depend on the order the datasets were given in.
    return sorted(benchmarks, key=lambda b: b.name)


def epoch_order(count: int, seed: int, *names: str, epoch: int) -> np.ndarray:
    """The order in which epoch ``epoch`` visits ``count`` texts: a permutation drawn from a generator
    derived from the seed, ``names`` (who trains, e.g. ``"pretrain", "wwm"``) and the epoch, so that
    no other draw shifts it."""
    return seeding.rng(seed, *names, f"epoch-{epoch}").permutation(count)
