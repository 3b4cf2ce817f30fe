"""How sure is a ranking? Paired comparisons of two models over the same splits and seeds.

Scores are on the 0..1 scale here (a V-measure of 0.036); a sentence or table shows them x100
("V-measure points", "V-measure x100"), as the paper prints them.

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
- The ranking *holds* when the interval excludes 0, p < 1 - confidence, and the difference is
  larger than the configuration's noise floor (:func:`tecb_eval.clustering.registry.noise_floor`):
  what moving every vector by 1e-7 changes a score through UMAP, as
  ``bench/bench_reduction_noise_floor.py`` measured it. A difference inside that floor is what the
  same model's vectors, rounded elsewhere, would give: indistinguishable, never a win, however
  consistent over the splits (on the embeddings and through PCA the floor is 0).
- Fast protocol (MTEB v2): its "splits" are bootstrap draws from one pool of texts embedded once.
  They share their texts, so they are not independent evidence: the resampling behind an interval
  and a p-value would treat ten looks at one sample as ten samples. A fast-protocol comparison
  reports the difference and its SD over the draws, and no interval, p-value or verdict.
- Resamples: a percentile interval takes its ends from the (1 - confidence) / 2 tails of the
  resampled means, so it needs at least 2 / (1 - confidence) resamples (40 at 95 %) for each tail
  to hold one; fewer are refused (one resample would give an "interval" of one value).

Randomness: one generator per interval, from ``numpy.random.SeedSequence`` of the seed and the
splits resampled (never the names of what is compared): a comparison gives the same interval
whatever else is compared with it, and identical scores give identical intervals whatever the
model or method is called.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from tecb_data.errors import UserError
from tecb_data.seeding import DEFAULT_SEED
from tecb_eval.files import one_line
from tecb_eval.clustering.registry import TABLE2_CONFIGURATION, noise_floor, table2_rows
from tecb_eval.reports import working

DEFAULT_CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 9999
# A bootstrap holds resamples x splits doubles; past a million the interval moves in its last digit only.
MAX_RESAMPLES = 1_000_000
FAST_PROTOCOL = "fast"  # tecb_eval.grid.protocols' name for MTEB v2's bootstrap draws


def minimum_resamples(confidence: float) -> int:
    """The fewest resamples whose percentile interval at ``confidence`` has a resample in each tail."""
    return math.ceil(round(2 / (1 - confidence), 9))


def check_settings(confidence: float, resamples: int, seed: int, *, options: dict | None = None) -> None:
    """Refuse settings that give no interval or no generator; ``options`` names them as the caller
    knows them (the CLI's ``--resamples``), default the parameter names."""
    name = {"confidence": "confidence", "resamples": "resamples", "seed": "seed", **(options or {})}
    if not (isinstance(confidence, (int, float)) and 0 < confidence < 1):
        raise UserError(f"{name['confidence']} {confidence}: give a level between 0 and 1, e.g. 0.95")
    needed = minimum_resamples(confidence)
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer)) or resamples < needed:
        raise UserError(f"{name['resamples']} {resamples}: a {100 * confidence:g} % interval needs at least {needed} "
                        f"resamples (2 / (1 - confidence), one in each tail); pass {name['resamples']} {needed} "
                        f"or more (default {DEFAULT_RESAMPLES})")
    if resamples > MAX_RESAMPLES:
        raise UserError(f"{name['resamples']} {resamples}: more resamples than {MAX_RESAMPLES:,} hold a matrix of "
                        f"resamples x splits in memory and change the interval's last digit at most; pass "
                        f"{name['resamples']} {DEFAULT_RESAMPLES} (the default) up to {MAX_RESAMPLES}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise UserError(f"{name['seed']} {seed}: the seed of the resampling must be a non-negative integer, "
                        f"e.g. {name['seed']} {DEFAULT_SEED}")


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
    spread: float = math.nan  # SD over splits (fast: over draws) of the per-split difference
    independent: bool = True  # False: the splits are bootstrap draws from one pool (fast protocol)
    floor: float = 0.0  # the configuration's noise floor (registry.noise_floor): no larger difference is a win
    floor_of: str = ""  # the configuration the floor is of, in words

    @property
    def within_floor(self) -> bool:
        """Whether A - B is no larger than what a 1e-7 move of the vectors gives (see the module)."""
        return self.floor > 0 and abs(self.difference) <= self.floor

    @property
    def holds(self) -> bool:
        if not self.independent or math.isnan(self.p_value) or self.within_floor:
            return False
        return (self.low > 0 or self.high < 0) and self.p_value < 1 - self.confidence

    def sentence(self) -> str:
        """The comparison in words, on one line (a model name's control characters escaped)."""
        return one_line(self._sentence())

    def _sentence(self) -> str:
        ahead, behind = (self.model_a, self.model_b) if self.difference >= 0 else (self.model_b, self.model_a)
        if not self.independent:
            return self._draws_sentence(ahead, behind)
        if self.splits < 2:
            return (f"{self.dataset}: {ahead} is ahead of {behind} by {100 * abs(self.difference):.2f} V-measure points "
                    f"on the one split both have (A - B = {100 * self.difference:.2f}): one split gives no interval "
                    "and no test, the ranking is not established.")
        level = f"{100 * self.confidence:g} %"
        detail = (f"{100 * abs(self.difference):.2f} V-measure points (A - B = {100 * self.difference:.2f}, "
                  f"{level} interval {100 * self.low:.2f} to {100 * self.high:.2f}, p = {self.p_value:.4f}, "
                  f"{self.splits} splits x {self.seeds} seed{'s' if self.seeds != 1 else ''})")
        if self.difference == 0 and self.low == self.high == 0:
            return f"{self.dataset}: {self.model_a} and {self.model_b} score the same on every split and seed: no ranking."
        if self.holds:
            return f"{self.dataset}: {ahead} is ahead of {behind} by {detail}: the ranking holds."
        if self.within_floor:
            return (f"{self.dataset}: {ahead} is ahead of {behind} by {detail}: inside the noise floor of "
                    f"{self.floor_of} ({100 * self.floor:.2f} points, what moving every vector by 1e-7 changes; "
                    "bench/bench_reduction_noise_floor.py): indistinguishable, not a win.")
        why = "within split and seed noise"
        excludes = self.low > 0 or self.high < 0
        rejects = self.p_value < 1 - self.confidence
        if 2.0 / 2 ** self.splits >= 1 - self.confidence:
            # The exact sign-flip test's smallest p is 2 / 2**splits: too few splits can never reject.
            why = f"too few splits to tell (no sign-flip p can fall below {1 - self.confidence:.2g} with {self.splits})"
            if excludes:
                why += ("; the interval excludes 0, but the sign-flip test cannot reject, and a ranking holds only "
                        "when both agree")
        elif excludes != rejects:
            # Two tests of one difference: the bootstrap resamples splits, the sign-flip test flips
            # each split's sign; with few splits they can disagree, and the verdict needs both.
            why = (f"the interval {'excludes' if excludes else 'includes'} 0 but the sign-flip test "
                   f"{'does not reject' if excludes else 'rejects'} (p = {self.p_value:.4f}), and a ranking holds "
                   "only when both agree")
        return f"{self.dataset}: {ahead} is ahead of {behind} by {detail}: {why}, the ranking does not hold."

    def _draws_sentence(self, ahead: str, behind: str) -> str:
        seeds = f"{self.seeds} seed{'s' if self.seeds != 1 else ''}"
        if self.difference == 0 and self.spread == 0:
            return (f"{self.dataset}: {self.model_a} and {self.model_b} score the same on every bootstrap draw of the "
                    f"fast protocol ({self.splits} draws x {seeds}).")
        return (f"{self.dataset}: {ahead} scores {100 * abs(self.difference):.2f} V-measure points above {behind} on the "
                f"fast protocol (A - B = {100 * self.difference:.2f}, SD {100 * self.spread:.2f} over {self.splits} "
                f"bootstrap draws x {seeds}). The draws resample one pool of texts, so they are not independent "
                "evidence: no interval, p-value or verdict on the ranking; compare legacy-protocol runs (independent "
                "splits) to test it.")

    def record(self) -> dict:
        # No verdict either way where the data cannot give one (fast draws, a single split).
        verdict = self.holds if self.independent and not math.isnan(self.p_value) else None
        return {**asdict(self), "holds": verdict}


def _generator(seed: int, *names: str) -> np.random.Generator:
    """The generator of one interval: ``names`` say what is resampled (the splits), never who."""
    digest = hashlib.blake2b("\x1f".join(names).encode("utf-8"), digest_size=8).digest()
    return np.random.default_rng(np.random.SeedSequence([int(seed), int.from_bytes(digest, "big")]))


def cell_scores(frame: pd.DataFrame, model: str, dataset: str, algorithm: str, reduction: str, metric: str) -> pd.Series:
    rows = frame[(frame.model == model) & (frame.mteb_name == dataset)
                 & (frame.algorithm == algorithm) & (frame.reduction == reduction)]
    return rows.set_index(["split", "seed"])[metric].sort_index()


def paired_difference(a: pd.Series, b: pd.Series, *, dataset: str = "", model_a: str = "A", model_b: str = "B",
                      confidence: float = DEFAULT_CONFIDENCE, resamples: int = DEFAULT_RESAMPLES,
                      seed: int = DEFAULT_SEED, independent: bool = True, floor: float = 0.0,
                      floor_of: str = "") -> Comparison:
    """A - B for two series of scores indexed by (split, seed); only pairs both have count.
    ``independent=False``: the splits are bootstrap draws from one pool (the fast protocol), and
    only the difference and its spread are given (see the module). ``floor``: the noise floor of
    the configuration(s) compared (``floor_of``, in words), inside which no difference holds.

    Args:
        a (pandas.Series): Model A's scores indexed by (split, seed).
        b (pandas.Series): Model B's scores indexed by (split, seed).
        dataset (str): The dataset's name, for the result and error messages.
        model_a (str): Model A's name.
        model_b (str): Model B's name.
        confidence (float): Level of the bootstrap interval.
        resamples (int): Bootstrap and sign-flip resamples, at least 2 / (1 - confidence).
        seed (int): Seed of the resampling.
        independent (bool): False when the splits are bootstrap draws from one pool (fast protocol).
        floor (float): The noise floor (0..1): a difference no larger never holds.
        floor_of (str): What the floor is of (a configuration), for the sentence.

    Returns:
        Comparison: Both means, A - B, its interval and SD, the p-value, the number of pairs and
            whether the difference holds.

    Raises:
        UserError: No pairs in common, or a bad confidence, resample count or seed.
    """
    check_settings(confidence, resamples, seed)
    both = pd.concat({"a": a, "b": b}, axis=1, join="inner").dropna()
    if both.empty:
        raise UserError(f"{dataset}: {model_a} and {model_b} share no (split, seed) to pair; "
                        "run both on the same dataset build and seeds")
    # Per split: the mean over its seeds (of A, of B, of A - B).
    per_split = both.assign(d=both.a - both.b).groupby(level="split", sort=True).mean()
    d = per_split.d.to_numpy(dtype=float)
    spread = float(d.std(ddof=1)) if len(d) > 1 else math.nan
    rng = _generator(seed, "paired", *map(str, per_split.index))
    if not independent or len(d) < 2:
        low = high = p_value = math.nan
    elif np.ptp(d) == 0:
        # Every split gives the same difference: no resample can differ (scipy calls such data degenerate).
        low = high = float(d[0])
        p_value = 1.0 if d[0] == 0 else float(2.0 ** (1 - len(d)))  # only the all-same-sign flips are as extreme
    else:
        from scipy import stats  # here: 1 to 2 s of imports that a table without a test should not pay

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            interval = stats.bootstrap((d,), np.mean, confidence_level=confidence, n_resamples=resamples,
                                       method="percentile", rng=rng).confidence_interval
        low, high = float(interval.low), float(interval.high)
        p_value = float(stats.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=resamples,
                                               alternative="two-sided", rng=rng).pvalue)
    return Comparison(dataset=dataset, model_a=model_a, model_b=model_b, mean_a=float(per_split.a.mean()),
                      mean_b=float(per_split.b.mean()), difference=float(d.mean()), low=low, high=high,
                      p_value=min(p_value, 1.0) if not math.isnan(p_value) else p_value, splits=len(d),
                      seeds=int(both.index.get_level_values("seed").nunique()), pairs=len(both),
                      confidence=confidence, spread=spread, independent=independent, floor=float(floor),
                      floor_of=floor_of)


def independent_splits(rows: pd.DataFrame) -> bool:
    """Whether ``rows``' splits are independent samples: not the fast protocol's bootstrap draws."""
    return "protocol" not in rows.columns or not (rows.protocol == FAST_PROTOCOL).any()


def _field(rows: pd.DataFrame, name: str) -> pd.Series:
    return rows[name].astype(str) if name in rows.columns else pd.Series("", index=rows.index)


def _versions_of(rows: pd.DataFrame, limit: int = 3) -> str:
    """The versions (protocol, profile, seed set, build) ``rows`` hold, in a few words."""
    keys = sorted(set(zip(_field(rows, "protocol"), _field(rows, "profile"), _field(rows, "seeds"),
                          _field(rows, "dataset_fingerprint").str[:8], _field(rows, "mteb_name"))))
    listed = [f"{dataset}: protocol {p}, profile {q}, seeds {s}, build {f}" for p, q, s, f, dataset in keys[:limit]]
    if len(keys) > limit:
        listed.append(f"{len(keys) - limit} more")
    return "; ".join(listed)


CHOOSE = ("choose that version with --protocol/--profile/--seeds/--fingerprint/--model-identity "
          "(`tecb-eval table RESULTS --versions` lists them)")


def compare(frame: pd.DataFrame, model_a: str, model_b: str, datasets=None, *,
            algorithm: str = TABLE2_CONFIGURATION[0], reduction: str = TABLE2_CONFIGURATION[1],
            metric: str = "v_measure",
            confidence: float = DEFAULT_CONFIDENCE, resamples: int = DEFAULT_RESAMPLES,
            seed: int = DEFAULT_SEED, store: pd.DataFrame | None = None) -> list[Comparison]:
    """A - B per dataset (default: every dataset both models have) for one configuration (default:
    k-means on the embeddings, Table 2's). ``frame`` should hold one version per table
    (:func:`tecb_eval.reports.versions.select`), so that pairs are on the same build and seeds;
    ``store``, the rows it was selected from, lets an error name a model's other versions.

    Args:
        frame (pandas.DataFrame): Results rows (``tecb_eval.reports.versions.read_store``), one
            version per table.
        model_a (str): The model named first (the difference is A - B).
        model_b (str): The other model.
        datasets (Sequence[str] | None): MTEB names to compare on; None: every dataset both models have.
        algorithm (str): The configuration's algorithm (a name of the clustering registry).
        reduction (str): The configuration's reduction.
        metric (str): A score column of the rows (``v_measure``, ``ami``, ``ari``), 0..1.
        confidence (float): Level of the bootstrap interval of the difference.
        resamples (int): Bootstrap and sign-flip resamples, at least 2 / (1 - confidence).
        seed (int): Seed of the resampling, a non-negative integer.
        store (pandas.DataFrame | None): The rows ``frame`` was selected from, so that an error can
            name a model's other versions.

    Returns:
        list[Comparison]: One per dataset: the paired difference, its interval, the sign-flip
            p-value and whether the difference holds.

    Raises:
        UserError: A model or dataset that is not in ``frame``, no pairs in common, or a bad
            confidence, resample count or seed.
    """
    check_settings(confidence, resamples, seed)
    if model_a == model_b:
        raise UserError(f"compare two different models (got {model_a!r} twice)")
    models = set(frame.model)
    for model in (model_a, model_b):
        if model in models:
            continue
        elsewhere = store[store.model == model] if store is not None else frame.iloc[0:0]
        if not elsewhere.empty:
            raise UserError(f"no results for model {model!r} in the version compared; the store has it only in "
                            f"other versions ({_versions_of(elsewhere)}): {CHOOSE}")
        raise UserError(f"no results for model {model!r}; the store has {', '.join(sorted(models))}")
    both = sorted(set(frame[frame.model == model_a].mteb_name) & set(frame[frame.model == model_b].mteb_name))
    if datasets:
        missing = [d for d in datasets if d not in both]
        if missing:
            raise UserError(f"{', '.join(missing)}: not run with both {model_a} and {model_b} in the version compared; "
                            f"both have {', '.join(both) or 'no dataset'}{_elsewhere_hint(store, model_a, model_b, missing)}")
        both = [d for d in both if d in set(datasets)]
    if not both:
        raise UserError(f"{model_a} and {model_b} were not run on a common dataset in the version compared"
                        f"{_elsewhere_hint(store, model_a, model_b)}")
    out = []
    for dataset in both:
        a = cell_scores(frame, model_a, dataset, algorithm, reduction, metric)
        b = cell_scores(frame, model_b, dataset, algorithm, reduction, metric)
        if a.empty or b.empty:
            raise UserError(f"{dataset}: no {algorithm}:{reduction} cells for both {model_a} and {model_b}")
        rows = frame[frame.model.isin([model_a, model_b]) & (frame.mteb_name == dataset)]
        out.append(paired_difference(a, b, dataset=dataset, model_a=model_a, model_b=model_b, confidence=confidence,
                                     resamples=resamples, seed=seed, independent=independent_splits(rows),
                                     floor=noise_floor(algorithm, reduction, metric), floor_of=f"{algorithm}:{reduction}"))
    return out


def _elsewhere_hint(store, model_a: str, model_b: str, datasets=None) -> str:
    """"; the store has both on X in another version: choose ..." where it does, else ""."""
    if store is None:
        return ""
    shared = set(store[store.model == model_a].mteb_name) & set(store[store.model == model_b].mteb_name)
    if datasets:
        shared &= set(datasets)
    if not shared:
        return ""
    return f"; the store has both on {', '.join(sorted(shared))} in other versions: {CHOOSE}"


def mean_interval(scores: pd.Series, *, confidence: float = DEFAULT_CONFIDENCE, resamples: int = DEFAULT_RESAMPLES,
                  seed: int = DEFAULT_SEED, name: str = "") -> tuple[float, float, float]:
    """(mean, low, high) of one model's scores indexed by (split, seed): the mean over splits of
    each split's mean over seeds, with the same bootstrap over splits as :func:`paired_difference`.

    Args:
        scores (pandas.Series): One model's scores indexed by (split, seed).
        confidence (float): Level of the bootstrap interval.
        resamples (int): Bootstrap resamples.
        seed (int): Seed of the resampling.
        name (str): What the scores are, for messages.

    Returns:
        tuple[float, float, float]: The mean and the interval's low and high end.
    """
    means = scores.groupby(level="split", sort=True).mean()
    per_split = means.to_numpy(dtype=float)
    if np.ptp(per_split) == 0:
        return float(per_split[0]), float(per_split[0]), float(per_split[0])
    from scipy import stats

    # ``name`` is for the caller's messages only: the draws depend on the splits, not on who scored.
    interval = stats.bootstrap((per_split,), np.mean, confidence_level=confidence, n_resamples=resamples,
                               method="percentile",
                               rng=_generator(seed, "interval", *map(str, means.index))).confidence_interval
    return float(per_split.mean()), float(interval.low), float(interval.high)


def can_reject(splits: int, confidence: float) -> bool:
    """Whether the exact sign-flip test over ``splits`` splits can give p < 1 - confidence at all:
    its smallest p (every difference of one sign) is 2 / 2**splits."""
    return 2.0 ** (1 - splits) < 1 - confidence


def against_best(frame: pd.DataFrame, *, confidence: float = DEFAULT_CONFIDENCE, resamples: int = DEFAULT_RESAMPLES,
                 seed: int = DEFAULT_SEED) -> dict[tuple[str, str], str]:
    """Table 2's markers: {(model, dataset): "*" for the best model on the dataset, "=" for a model
    whose difference to the best does not hold, "" for one the best is surely ahead of}. On the fast
    protocol no ranking can be shown (its draws share one pool; see the module): every other model is "=".

    Args:
        frame (pandas.DataFrame): Results rows of Table 2's configuration, one version.
        confidence (float): Level of the paired test against the best.
        resamples (int): Bootstrap and sign-flip resamples.
        seed (int): Seed of the resampling.

    Returns:
        dict[tuple[str, str], str]: ``{(model, dataset): marker}``.
    """
    kmeans = table2_rows(frame)
    markers = {}
    for dataset in sorted(kmeans.mteb_name.unique()):
        of = kmeans[kmeans.mteb_name == dataset]
        # The table's figure: mean over seeds of the split means; ties go to the first name.
        figure = of.groupby(["model", "seed"]).v_measure.mean().groupby(level="model").mean().to_dict()
        best = min(figure, key=lambda m: (-figure[m], m))
        markers[(best, dataset)] = "*"
        # Each model's scores cut out in one pass over the rows, not one filter per model.
        algorithm, reduction = TABLE2_CONFIGURATION
        config = of[(of.algorithm == algorithm) & (of.reduction == reduction)]
        scores = {model: rows.set_index(["split", "seed"]).v_measure.sort_index()
                  for model, rows in config.groupby("model", sort=False)}
        empty = config.iloc[0:0].set_index(["split", "seed"]).v_measure
        independent = independent_splits(of)
        a = scores.get(best, empty)
        for model in working.per_model(sorted(set(figure) - {best}), f"comparing each model with the best on {dataset}"):
            b = scores.get(model, empty)
            shared = a.index.intersection(b.index)
            if not shared.size:
                markers[(model, dataset)] = "?"
                continue
            if not can_reject(shared.get_level_values("split").nunique(), confidence):
                # The verdict paired_difference would give, without its resampling: no sign-flip
                # p-value over so few splits can fall below the level, so the ranking cannot hold.
                check_settings(confidence, resamples, seed)
                markers[(model, dataset)] = "="
                continue
            result = paired_difference(a, b, dataset=dataset, model_a=best, model_b=model,
                                       confidence=confidence, resamples=resamples, seed=seed,
                                       independent=independent)
            markers[(model, dataset)] = "" if result.holds else "="
    return markers


def comparison_table(comparisons: list[Comparison]) -> pd.DataFrame:
    """One row per dataset: both means, A - B with its interval (0..1) and its SD over splits, p,
    pairs, holds; no interval, p or verdict (empty) where the splits are fast-protocol draws.

    Args:
        comparisons (list[Comparison]): What ``compare`` returned.

    Returns:
        pandas.DataFrame: One row per dataset.
    """
    rows = [c.record() for c in comparisons]
    table = pd.DataFrame(rows).set_index("dataset")
    return table[["model_a", "model_b", "mean_a", "mean_b", "difference", "low", "high", "spread", "floor", "p_value",
                  "splits", "seeds", "pairs", "confidence", "independent", "holds"]]


def shown_table(comparisons: list[Comparison]) -> pd.DataFrame:
    """:func:`comparison_table` as the Markdown / LaTeX table shows it: the V-measures (0..1, which
    ``format_table`` prints x100), A - B with its interval and SD, then ``p`` (four decimals) and
    ``holds`` (yes / no) as text; "–" where the data give none (fast-protocol draws, one split)."""
    table = comparison_table(comparisons)
    shown = table[["mean_a", "mean_b", "difference", "low", "high", "spread", "floor"]].rename(columns={"spread": "sd"})
    shown["p"] = ["–" if pd.isna(p) else f"{p:.4f}" for p in table.p_value]
    shown["holds"] = ["–" if h is None or pd.isna(h) else ("yes" if h else "no") for h in table.holds]
    return shown
