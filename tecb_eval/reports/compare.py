"""How sure is a ranking? Paired comparisons of two models over the same splits and seeds.

For a dataset, model A's and B's scores are paired by (split, seed): same texts, same seed of
reduction and clustering. Their difference A - B is summarised as the mean over splits of each
split's mean over seeds, which is the difference of the two models' Table 2 figures when both ran
every split and seed.

- Interval: a paired bootstrap (``scipy.stats.bootstrap``, percentile, seeded) that resamples
  splits, each with all its seeds. A split is the unit because its seeds share its texts (their
  differences are correlated); the runs of one seed on different splits are independent draws.
  The interval therefore covers both the split-to-split and the seed-to-seed variation of the
  difference.
- p-value: a sign-flip permutation test (``scipy.stats.permutation_test``, one sample,
  ``permutation_type="samples"``) of the per-split differences: under "A and B are the same
  model" each split's difference is as likely negative as positive. Exact when 2**splits is at
  most ``resamples``, else ``resamples`` seeded random flips.
- The ranking *holds* when the interval excludes 0 and p < 1 - confidence.

Randomness: one generator per comparison, from ``numpy.random.SeedSequence`` of the seed and the
names compared, so a comparison gives the same interval whatever else is compared with it.
"""

from __future__ import annotations

import hashlib
import warnings
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy import stats

from tecb_data.errors import UserError

DEFAULT_CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 9999
DEFAULT_SEED = 42


@dataclass(frozen=True)
class Comparison:
    """A - B on one dataset (V-measure 0..1)."""

    dataset: str
    model_a: str
    model_b: str
    mean_a: float
    mean_b: float
    difference: float
    low: float
    high: float
    p_value: float
    splits: int
    seeds: int
    pairs: int
    confidence: float

    @property
    def holds(self) -> bool:
        return (self.low > 0 or self.high < 0) and self.p_value < 1 - self.confidence

    def sentence(self) -> str:
        ahead, behind = (self.model_a, self.model_b) if self.difference >= 0 else (self.model_b, self.model_a)
        level = f"{100 * self.confidence:g} %"
        detail = (f"{100 * abs(self.difference):.2f} V-measure points (A - B = {100 * self.difference:.2f}, "
                  f"{level} interval {100 * self.low:.2f} to {100 * self.high:.2f}, p = {self.p_value:.4f}, "
                  f"{self.splits} splits x {self.seeds} seed{'s' if self.seeds != 1 else ''})")
        if self.difference == 0 and self.low == self.high == 0:
            return f"{self.dataset}: {self.model_a} and {self.model_b} score the same on every split and seed: no ranking."
        if self.holds:
            return f"{self.dataset}: {ahead} is ahead of {behind} by {detail}: the ranking holds."
        why = "within split and seed noise"
        if 2.0 / 2 ** self.splits >= 1 - self.confidence:
            # The exact sign-flip test's smallest p is 2 / 2**splits: too few splits can never reject.
            why = f"too few splits to tell (no sign-flip p can fall below {1 - self.confidence:.2g} with {self.splits})"
        return f"{self.dataset}: {ahead} is ahead of {behind} by {detail}: {why}, the ranking does not hold."

    def record(self) -> dict:
        return {**asdict(self), "holds": self.holds}


def _generator(seed: int, *names: str) -> np.random.Generator:
    digest = hashlib.blake2b("\x1f".join(names).encode("utf-8"), digest_size=8).digest()
    return np.random.default_rng(np.random.SeedSequence([int(seed), int.from_bytes(digest, "big")]))


def _scores(frame: pd.DataFrame, model: str, dataset: str, algorithm: str, reduction: str, metric: str) -> pd.Series:
    rows = frame[(frame.model == model) & (frame.mteb_name == dataset)
                 & (frame.algorithm == algorithm) & (frame.reduction == reduction)]
    return rows.set_index(["split", "seed"])[metric].sort_index()


def paired_difference(a: pd.Series, b: pd.Series, *, dataset: str = "", model_a: str = "A", model_b: str = "B",
                      confidence: float = DEFAULT_CONFIDENCE, resamples: int = DEFAULT_RESAMPLES,
                      seed: int = DEFAULT_SEED) -> Comparison:
    """A - B for two series of scores indexed by (split, seed); only pairs both have count."""
    both = pd.concat({"a": a, "b": b}, axis=1, join="inner").dropna()
    if both.empty:
        raise UserError(f"{dataset}: {model_a} and {model_b} share no (split, seed) to pair; "
                        "run both on the same dataset build and seeds")
    # Per split: the mean over its seeds (of A, of B, of A - B).
    per_split = both.assign(d=both.a - both.b).groupby(level="split", sort=True).mean()
    d = per_split.d.to_numpy(dtype=float)
    rng = _generator(seed, dataset, model_a, model_b)
    if np.ptp(d) == 0:
        # Every split gives the same difference: no resample can differ (scipy calls such data degenerate).
        low = high = float(d[0])
        p_value = 1.0 if d[0] == 0 else float(2.0 ** (1 - len(d)))  # only the all-same-sign flips are as extreme
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            interval = stats.bootstrap((d,), np.mean, confidence_level=confidence, n_resamples=resamples,
                                       method="percentile", rng=rng).confidence_interval
        low, high = float(interval.low), float(interval.high)
        p_value = float(stats.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=resamples,
                                               alternative="two-sided", rng=rng).pvalue)
    return Comparison(dataset, model_a, model_b, float(per_split.a.mean()), float(per_split.b.mean()),
                      float(d.mean()), low, high, min(p_value, 1.0), len(d),
                      int(both.index.get_level_values("seed").nunique()), len(both), confidence)


def compare(frame: pd.DataFrame, model_a: str, model_b: str, datasets=None, *,
            algorithm: str = "minibatch_kmeans", reduction: str = "none", metric: str = "v_measure",
            confidence: float = DEFAULT_CONFIDENCE, resamples: int = DEFAULT_RESAMPLES,
            seed: int = DEFAULT_SEED) -> list[Comparison]:
    """A - B per dataset (default: every dataset both models have) for one configuration (default:
    k-means on the embeddings, Table 2's). ``frame`` should hold one version per table
    (:func:`tecb_eval.reports.versions.select`), so that pairs are on the same build and seeds."""
    if not 0 < confidence < 1:
        raise UserError(f"confidence must be between 0 and 1, got {confidence}")
    if resamples < 1:
        raise UserError(f"resamples must be positive, got {resamples}")
    models = set(frame.model)
    for model in (model_a, model_b):
        if model not in models:
            raise UserError(f"no results for model {model!r}; the store has {', '.join(sorted(models))}")
    if model_a == model_b:
        raise UserError(f"compare two different models (got {model_a!r} twice)")
    both = sorted(set(frame[frame.model == model_a].mteb_name) & set(frame[frame.model == model_b].mteb_name))
    if datasets:
        missing = [d for d in datasets if d not in both]
        if missing:
            raise UserError(f"{', '.join(missing)}: not run with both {model_a} and {model_b}; "
                            f"both have {', '.join(both) or 'no dataset'}")
        both = [d for d in both if d in set(datasets)]
    if not both:
        raise UserError(f"{model_a} and {model_b} were not run on a common dataset")
    out = []
    for dataset in both:
        a = _scores(frame, model_a, dataset, algorithm, reduction, metric)
        b = _scores(frame, model_b, dataset, algorithm, reduction, metric)
        if a.empty or b.empty:
            raise UserError(f"{dataset}: no {algorithm}:{reduction} cells for both {model_a} and {model_b}")
        out.append(paired_difference(a, b, dataset=dataset, model_a=model_a, model_b=model_b,
                                     confidence=confidence, resamples=resamples, seed=seed))
    return out


def mean_interval(scores: pd.Series, *, confidence: float = DEFAULT_CONFIDENCE, resamples: int = DEFAULT_RESAMPLES,
                  seed: int = DEFAULT_SEED, name: str = "") -> tuple[float, float, float]:
    """(mean, low, high) of one model's scores indexed by (split, seed): the mean over splits of
    each split's mean over seeds, with the same bootstrap over splits as :func:`paired_difference`."""
    per_split = scores.groupby(level="split", sort=True).mean().to_numpy(dtype=float)
    if np.ptp(per_split) == 0:
        return float(per_split[0]), float(per_split[0]), float(per_split[0])
    interval = stats.bootstrap((per_split,), np.mean, confidence_level=confidence, n_resamples=resamples,
                               method="percentile", rng=_generator(seed, "interval", name)).confidence_interval
    return float(per_split.mean()), float(interval.low), float(interval.high)


def against_best(frame: pd.DataFrame, *, confidence: float = DEFAULT_CONFIDENCE, resamples: int = DEFAULT_RESAMPLES,
                 seed: int = DEFAULT_SEED) -> dict[tuple[str, str], str]:
    """Table 2's markers: {(model, dataset): "*" for the best model on the dataset, "=" for a model
    whose difference to the best does not hold, "" for one the best is surely ahead of}."""
    kmeans = frame[(frame.algorithm == "minibatch_kmeans") & (frame.reduction == "none")]
    markers = {}
    for dataset in sorted(kmeans.mteb_name.unique()):
        of = kmeans[kmeans.mteb_name == dataset]
        # The table's figure: mean over seeds of the split means; ties go to the first name.
        figure = of.groupby(["model", "seed"]).v_measure.mean().groupby(level="model").mean().to_dict()
        best = min(figure, key=lambda m: (-figure[m], m))
        markers[(best, dataset)] = "*"
        for model in sorted(set(figure) - {best}):
            a = _scores(of, best, dataset, "minibatch_kmeans", "none", "v_measure")
            b = _scores(of, model, dataset, "minibatch_kmeans", "none", "v_measure")
            if not a.index.intersection(b.index).size:
                markers[(model, dataset)] = "?"
                continue
            result = paired_difference(a, b, dataset=dataset, model_a=best, model_b=model,
                                       confidence=confidence, resamples=resamples, seed=seed)
            markers[(model, dataset)] = "" if result.holds else "="
    return markers


def comparison_table(comparisons: list[Comparison]) -> pd.DataFrame:
    """One row per dataset: both means, A - B with its interval (0..1), p, pairs, holds."""
    rows = [c.record() for c in comparisons]
    table = pd.DataFrame(rows).set_index("dataset")
    return table[["model_a", "model_b", "mean_a", "mean_b", "difference", "low", "high", "p_value",
                  "splits", "seeds", "pairs", "confidence", "holds"]]
