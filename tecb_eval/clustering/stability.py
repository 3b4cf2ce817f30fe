"""Stability: how far a clustering comes out the same when it is run again, a score that needs no labels.

A cell's clustering is run ``runs`` more times on the vectors it clustered (the reduction's output,
never encoded or reduced again), each time with another seed and on another subsample of the
texts: ``fraction`` of them, drawn without replacement. Each rerun is compared with the cell's own
labels on the texts both hold, with scikit-learn's ``adjusted_rand_score`` (ARI) and
``adjusted_mutual_info_score`` (AMI). The row keeps the mean of the ``runs`` agreements and a 90 %
percentile interval over them: their 5th and 95th percentiles (numpy's linear interpolation); with
5 runs that lies just inside the lowest and highest agreement.

Subsamples are drawn without replacement (m out of n, as Ben-Hur et al. 2002 and Lange et al. 2004
measure clustering stability), not as a bootstrap: a text drawn twice would be a duplicate point,
which pulls a density clustering (HDBSCAN) toward it, and would be counted twice in the agreement.
Noise (label -1) is compared as a cluster of its own: a rerun that leaves other texts as noise
agrees less. Each rerun's seed and subsample come from the cell's seed and names (split,
algorithm, cluster setting, rerun number), one draw per decision, so the scores are the same bit
for bit in this process, in a worker process and on a Dask worker.

Where a rerun cannot run as the cell did (its k or HDBSCAN's min_cluster_size larger than the
subsample's texts) the scores are None with the reason in ``stability_note``, never 0.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from tecb_data import seeding
from tecb_data.errors import UserError

# Reruns on a corpus without labels unless --stability says otherwise: there stability is one of
# the few things a user can check, and a rerun of a cell's clustering costs a fraction of its
# reduction. Labelled data run none by default (0): the grid's cost, and V-measure says more there.
UNLABELLED_RUNS = 5
DEFAULT_FRACTION = 0.8
MAX_RUNS = 1000  # more is a typo, not an interval anyone needs
INTERVAL = (5.0, 95.0)  # percentiles of the reruns' agreements: a 90 % percentile interval
STABILITY_FIELDS = ("stability_runs", "stability_fraction", "stability_ari", "stability_ari_low", "stability_ari_high",
                    "stability_ami", "stability_ami_low", "stability_ami_high", "stability_note")


def check_runs(runs, option: str = "--stability") -> int:
    """A number of reruns: an integer from 0 (off) to :data:`MAX_RUNS`; one line otherwise."""
    if isinstance(runs, bool) or not isinstance(runs, (int, np.integer)) or not 0 <= runs <= MAX_RUNS:
        raise UserError(f"{option} {runs!r}: give the number of reruns per cell, an integer from 0 (none) to "
                        f"{MAX_RUNS}, e.g. {option} {UNLABELLED_RUNS}")
    return int(runs)


def check_fraction(fraction, option: str = "--stability-fraction") -> float:
    """A subsample's share of the texts: more than 0, at most 1 (every text, only the seed varies)."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float, np.floating)) or not (
            math.isfinite(fraction) and 0 < fraction <= 1):
        raise UserError(f"{option} {fraction!r}: give the share of the texts each rerun clusters, a number above 0 "
                        f"and at most 1, e.g. {DEFAULT_FRACTION}")
    return float(fraction)


def subsample_size(n: int, fraction: float) -> int:
    """How many of ``n`` texts a rerun clusters (rounded half to even, as Python rounds)."""
    return min(n, int(round(fraction * n)))


def draws(n: int, runs: int, fraction: float, seed: int, *names: str) -> list[tuple[np.ndarray, int]]:
    """Per rerun: the sorted rows of its subsample of ``n`` texts and its clustering seed."""
    size = subsample_size(n, fraction)
    out = []
    for run in range(runs):
        rng = seeding.rng(seed, "stability", *names, str(run))
        rows = np.sort(rng.choice(n, size=size, replace=False)) if size < n else np.arange(n)
        out.append((rows, int(rng.integers(2**31 - 1))))
    return out


def _undefined(runs: int, fraction: float, note: str) -> dict:
    return {"stability_runs": runs, "stability_fraction": fraction, "stability_ari": None, "stability_ari_low": None,
            "stability_ari_high": None, "stability_ami": None, "stability_ami_low": None, "stability_ami_high": None,
            "stability_note": note}


def summary(agreements) -> tuple[float, float, float]:
    """The mean of the agreements and their :data:`INTERVAL` percentiles."""
    values = np.asarray(agreements, dtype=float)
    low, high = np.percentile(values, INTERVAL)
    return float(values.mean()), float(low), float(high)


def stability(predicted: np.ndarray, fit: Callable[[np.ndarray, int], np.ndarray], runs: int, fraction: float,
              seed: int, *names: str, too_few: int = 0) -> dict:
    """The stability fields of a clustering ``predicted``: ``fit(rows, seed)`` reclusters the rows
    ``rows`` with ``seed`` and returns their labels; ``too_few`` is the fewest texts a rerun needs
    (the cell's k or min_cluster_size)."""
    from sklearn import metrics  # here: the grid's caller on a Dask cluster scores nothing

    predicted = np.asarray(predicted)
    n = len(predicted)
    size = subsample_size(n, fraction)
    if size < max(2, too_few):
        return _undefined(runs, fraction, f"a subsample of {size} of the {n} texts is too few to cluster again "
                                          f"({max(2, too_few)} or more needed)")
    ari, ami = [], []
    for rows, rerun_seed in draws(n, runs, fraction, seed, *names):
        found = np.asarray(fit(rows, rerun_seed))
        ari.append(metrics.adjusted_rand_score(predicted[rows], found))
        ami.append(metrics.adjusted_mutual_info_score(predicted[rows], found))
    out = {"stability_runs": runs, "stability_fraction": fraction, "stability_note": None}
    for name, values in (("ari", ari), ("ami", ami)):
        mean, low, high = summary(values)
        out.update({f"stability_{name}": mean, f"stability_{name}_low": low, f"stability_{name}_high": high})
    return out
