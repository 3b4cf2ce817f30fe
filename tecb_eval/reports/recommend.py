"""`tecb-eval recommend`: per dataset, the best pipeline in a results store and how sure that is.

The best pipeline is the (model, reduction, algorithm) with the highest mean V-measure (the mean
over splits of each split's mean over seeds, :func:`tecb_eval.reports.tables.split_means`) among
the pipelines measured on the same (split, seed) cells, after one version per table has been
taken (:func:`tecb_eval.reports.versions.select`). Its lead over the runner-up is tested with the
paired test of ``tecb-eval compare`` (:func:`tecb_eval.reports.compare.paired_difference`), its
interval is :func:`tecb_eval.reports.compare.mean_interval`'s. The fast protocol's draws are not
independent: there the lead gets no verdict and the mean no interval.

:func:`bertopic_snippet` writes the pipeline as a BERTopic configuration (``embedding_model``,
``umap_model``, ``hdbscan_model``), with the parameters the grid ran: k-means and agglomerative
clustering go where BERTopic takes its clusterer, as BERTopic's documentation does.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field

import pandas as pd

from tecb_data.errors import UserError
from tecb_data.seeding import DEFAULT_SEED
from tecb_eval.files import one_line
from tecb_eval.clustering import registry
from tecb_eval.models import registry as models_registry
from tecb_eval.reports import compare, leaderboard, tables, versions
from tecb_eval.reports.scores import zero_reason


@dataclass
class Recommendation:
    dataset: str
    synthetic: bool
    model: str
    model_identity: str
    algorithm: str
    reduction: str
    algorithm_params: dict
    reduction_params: dict
    n_clusters: list[int]
    mean: float
    low: float
    high: float
    sd: float
    splits: int
    seeds: int
    noise_fraction: float | None
    confidence: float
    runner_up: dict | None
    lead: dict | None
    lead_sentence: str
    lead_holds: bool | None = None  # None: no runner-up to test the lead against
    left_out: list[str] = field(default_factory=list)
    bertopic: str = ""
    zero: str | None = None  # why the best pipeline's V-measure is 0 (every text noise, one cluster)
    model_location: str | None = None  # a model folder's path, as the grid read it (the store's newest row)
    api_key_env: str | None = None  # an API model's key variable, as the grid read it (the store's newest row)
    # A corpus without labels: the label-free criterion the pipeline was ranked by, and its mean.
    criterion: str | None = None
    criterion_value: float | None = None
    # The best TOP_PIPELINES pipelines of any model, best first: rank (a number, shared by figures
    # that print alike), rank_tied (another pipeline shares that rank: the text shows "1="), model,
    # algorithm, reduction, mean, and tied (True: its difference to the best does not hold; None for
    # the best itself).
    pipelines: list[dict] = field(default_factory=list)
    compared_pipelines: int = 0
    table2_leader: str | None = None  # the model the leaderboard ranks first (Table 2's configuration)
    # An API model's tokens and cost of embedding the compared splits ({tokens, cost, splits}); None: runs here.
    usage: dict | None = None
    # AMI of the best pipeline (0..1) and its interval: an interval that holds 0 is a pick near chance.
    ami: float | None = None
    ami_low: float = math.nan
    ami_high: float = math.nan

    @property
    def near_chance(self) -> bool:
        """Whether the pick's AMI interval holds 0: its clusters barely beat a random assignment."""
        return leaderboard.finite(self.ami_low) and self.ami_low <= 0 <= self.ami_high

    @property
    def pipeline(self) -> str:
        return f"{self.model}, {self.reduction} reduction, {self.algorithm}"

    def record(self) -> dict:
        return jsonable(asdict(self))


def jsonable(value):
    """JSON has no NaN or infinity: a missing figure (NaN) is null, an infinite parameter (HDBSCAN's
    ``cluster_selection_epsilon_max``) the text Python reads back with ``float()``."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


# How many pipelines the ranking shows, each tested against the best.
TOP_PIPELINES = 5
MEANING = ("runner-up: the best pipeline of another model; a lead holds when the paired bootstrap interval of the "
           "difference excludes 0 and the sign-flip test gives p below {alpha:g}; tied: a pipeline whose difference "
           "to the best does not hold; a rank such as 1= is shared by pipelines whose V-measures print alike")


def _name(model: str, algorithm: str, reduction: str) -> str:
    return f"{model} {algorithm}:{reduction}"


def _scores(rows: pd.DataFrame) -> pd.Series:
    return rows.set_index(["split", "seed"]).v_measure.sort_index()


def recommend(frame: pd.DataFrame, datasets=None, *, confidence: float = compare.DEFAULT_CONFIDENCE,
              resamples: int = compare.DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> list[Recommendation]:
    """A recommendation per dataset of ``frame`` (one version per table: see the module), or of the
    ``datasets`` named (MTEB names).

    Args:
        frame (pandas.DataFrame): Results rows, one version per table (``rows_to_recommend``).
        datasets (Sequence[str] | None): MTEB names; None: every dataset of ``frame``.
        confidence (float): Level of the intervals and of the paired test of the lead.
        resamples (int): Bootstrap and sign-flip resamples, at least 2 / (1 - confidence).
        seed (int): Seed of the resampling, a non-negative integer.

    Returns:
        list[Recommendation]: One per dataset: the best pipeline, its interval, the runner-up, and
            whether the lead holds; ``text``, ``as_json`` and ``bertopic_snippet`` show it.

    Raises:
        UserError: A dataset that is not in ``frame``, or a bad confidence, resample count or seed.
    """
    synthetic = set(tables.synthetic_datasets(frame))
    have = tables.dataset_columns(frame.mteb_name.unique())
    if datasets:
        missing = [d for d in datasets if d not in have]
        if missing:
            raise UserError(f"--data {', '.join(missing)}: not in the results; they hold {', '.join(have)}")
        have = [d for d in have if d in set(datasets)]
    return [_recommend_one(frame[frame.mteb_name == d], d, d in synthetic, confidence, resamples, seed) for d in have]


def rows_to_recommend(selection) -> pd.DataFrame:
    """The rows ``recommend`` compares, from :func:`tecb_eval.reports.ranking.shared_selection`: the
    ranked models' rows on the cells they share, as the leaderboard ranks them; a dataset where no
    model has a Table 2 cell (a store of ``hdbscan:umap`` only) has no ranking, and its pipelines
    are compared on the cells most of them share (:func:`_recommend_one`)."""
    rows, every = selection.rows, selection.every
    if every is None or every.empty:
        return rows
    unranked = every[~every.mteb_name.isin(set(rows.mteb_name))] if not rows.empty else every
    return pd.concat([rows, unranked], ignore_index=True) if not unranked.empty else rows


def _check_names(rows: pd.DataFrame, dataset: str) -> None:
    """Rows whose algorithm or reduction this tecb does not know (a newer tecb's store, or a damaged
    one) get one line, not a KeyError half-way through a snippet."""
    for column, known in (("algorithm", registry.ALGORITHMS), ("reduction", registry.REDUCTIONS)):
        unknown = sorted(set(rows[column].astype(str)) - set(known))
        if unknown:
            raise UserError(f"{dataset}: the results hold the {column} {', '.join(map(repr, unknown))}, which this tecb "
                            f"does not know (it knows {', '.join(known)}); a store from a newer tecb, or a damaged one")


def _recommend_one(rows: pd.DataFrame, dataset: str, synthetic: bool, confidence, resamples, seed) -> Recommendation:
    _check_names(rows, dataset)
    keys = ["model", "algorithm", "reduction"]
    cells = {key: frozenset(g[list(versions.CELL)].itertuples(index=False, name=None))
             for key, g in rows.groupby(keys, sort=True)}
    # Pipelines are compared on the cells most of them share, as the leaderboard ranks models.
    main, keep = leaderboard.main_cells(cells)
    left_out = [f"{_name(*key)} (other splits or seeds: {len(cells[key])} cells, the compared pipelines "
                f"{len(main)})" for key in sorted(set(cells) - set(keep))]
    kept = set(keep)
    compared = rows[[k in kept for k in zip(rows.model, rows.algorithm, rows.reduction)]]
    means = tables.split_means(compared)
    order = {c: i for i, c in enumerate(tables.order_configurations(list(zip(means.algorithm, means.reduction))))}
    ranked = sorted(means.itertuples(index=False),
                    key=lambda r: (-r.mean, r.model, order[(r.algorithm, r.reduction)]))
    best = ranked[0]
    mine = compared[(compared.model == best.model) & (compared.algorithm == best.algorithm)
                    & (compared.reduction == best.reduction)]
    independent = compare.independent_splits(mine)
    low = high = math.nan
    scores = _scores(mine)
    if independent and scores.index.get_level_values("split").nunique() > 1:
        # The leaderboard's (and the Table 2 figure's) name for k-means on the embeddings: the same interval.
        name = (f"{dataset}\x1f{best.model}" if (best.algorithm, best.reduction) == registry.TABLE2_CONFIGURATION
                else f"{dataset}\x1f{best.model}\x1f{best.algorithm}:{best.reduction}")
        _, low, high = compare.mean_interval(scores, confidence=confidence, resamples=resamples, seed=seed, name=name)
    runner = lead = holds = None
    usage = tables.api_usage(compared)
    sentence = "no runner-up: the results hold one pipeline on the cells compared"
    if len(ranked) > 1:
        # The runner-up is the best pipeline of another model, as the leaderboard ranks models; a
        # store of one model compares that model's pipelines.
        second = next((r for r in ranked[1:] if r.model != best.model), ranked[1])
        theirs = compared[(compared.model == second.model) & (compared.algorithm == second.algorithm)
                          & (compared.reduction == second.reduction)]
        result = compare.paired_difference(
            scores, _scores(theirs), dataset=dataset, model_a=_name(best.model, best.algorithm, best.reduction),
            model_b=_name(second.model, second.algorithm, second.reduction), confidence=confidence,
            resamples=resamples, seed=seed, independent=independent, **_floor(best, second))
        runner = {"model": second.model, "algorithm": second.algorithm, "reduction": second.reduction,
                  "mean": float(second.mean), "zero": zero_reason(theirs), "usage": _usage(usage, second.model, dataset)}
        lead = jsonable(result.record())
        sentence = result.sentence()
        holds = result.holds
    pipelines = _ranked_pipelines(ranked, compared, scores, dataset, confidence, resamples, seed, independent)
    for pipeline in pipelines:
        pipeline["usage"] = _usage(usage, pipeline["model"], dataset)
    ami = ami_low = ami_high = math.nan
    if "ami" in mine.columns and mine.ami.notna().all():
        ami_scores = mine.set_index(["split", "seed"]).ami.sort_index()
        ami = float(ami_scores.groupby(level="split").mean().mean())
        if independent and ami_scores.index.get_level_values("split").nunique() > 1:
            _, ami_low, ami_high = compare.mean_interval(ami_scores, confidence=confidence, resamples=resamples,
                                                         seed=seed, name=f"{dataset}\x1fami")
    table2 = [r for r in ranked if (r.algorithm, r.reduction) == registry.TABLE2_CONFIGURATION]
    noise = (float(mine.noise_fraction.mean()) if best.algorithm in registry.NOISE_ALGORITHMS
             and "noise_fraction" in mine.columns else None)
    algorithm_params = leaderboard.params(mine, "algorithm_params")
    clusters = sorted({int(n) for n in mine.n_labels}) if "n_labels" in mine.columns else []
    recommendation = Recommendation(
        dataset=dataset, synthetic=synthetic, model=best.model,
        model_identity=", ".join(sorted(set(mine.model_identity.astype(str)))), algorithm=best.algorithm,
        reduction=best.reduction, algorithm_params=algorithm_params,
        reduction_params=leaderboard.params(mine, "reduction_params"),
        n_clusters=clusters if "n_clusters" in algorithm_params else [], mean=float(best.mean), low=low, high=high,
        sd=float(best.sd), splits=int(best.splits), seeds=int(best.seeds), noise_fraction=noise,
        confidence=confidence, runner_up=runner,
        lead=lead, lead_sentence=sentence, lead_holds=holds, left_out=left_out, zero=zero_reason(mine),
        pipelines=pipelines, compared_pipelines=len(ranked), table2_leader=table2[0].model if table2 else None,
        usage=_usage(usage, best.model, dataset), ami=None if math.isnan(ami) else ami, ami_low=ami_low,
        ami_high=ami_high)
    recommendation.model_location = _location(mine, recommendation)
    recommendation.api_key_env = _location(mine, recommendation, "api_key_env", "API key variable")
    recommendation.bertopic = bertopic_snippet(recommendation)
    return recommendation


def _ranked_pipelines(ranked, compared: pd.DataFrame, best_scores: pd.Series, dataset: str, confidence, resamples,
                      seed, independent: bool) -> list[dict]:
    """The first :data:`TOP_PIPELINES` of ``ranked`` (model x reduction x algorithm, best first),
    each but the best tested against it with the paired test of ``compare``: tied where the
    difference does not hold (the fast protocol's draws never establish one: every other is tied)."""
    keys = {(r.model, r.algorithm, r.reduction) for r in ranked[1:TOP_PIPELINES]}
    rows = {key: g for key, g in compared.groupby(["model", "algorithm", "reduction"], sort=False) if key in keys}
    out = []
    shown = ranked[:TOP_PIPELINES]
    ranks = tables.shared_rank_numbers([r.mean for r in shown])
    for rank, (r, (shared, rank_tied)) in enumerate(zip(shown, ranks), 1):
        tied = None
        if rank > 1:
            result = compare.paired_difference(
                best_scores, _scores(rows[(r.model, r.algorithm, r.reduction)]), dataset=dataset,
                model_a="best", model_b=_name(r.model, r.algorithm, r.reduction), confidence=confidence,
                resamples=resamples, seed=seed, independent=independent, **_floor(ranked[0], r))
            tied = not result.holds
        out.append({"rank": shared, "rank_tied": rank_tied, "model": r.model, "algorithm": r.algorithm,
                    "reduction": r.reduction, "mean": float(r.mean), "tied": tied})
    return out


def _floor(a, b) -> dict:
    """The noise floor of two pipelines compared: the larger of their configurations' (the one that
    moves more when the vectors move by 1e-7), as ``compare`` applies it."""
    floors = {f"{p.algorithm}:{p.reduction}": registry.noise_floor(p.algorithm, p.reduction) for p in (a, b)}
    worst = max(floors, key=floors.get)
    return {"floor": floors[worst], "floor_of": worst}


def _usage(usage: dict, model: str, dataset: str) -> dict | None:
    """A pipeline's API cost as a record ({tokens, cost, splits, price}); None for a model that runs here."""
    found = usage.get((model, dataset))
    return None if found is None else asdict(found)


def _usage_words(usage: dict | None) -> str:
    return "" if usage is None else tables.ApiUsage(**usage).words()


def _location(rows: pd.DataFrame, r: "Recommendation", field: str = "model_location",
              what: str = "model location") -> str | None:
    """Where the grid read a model folder (rows of a Hub or built-in model, or of an older tecb, have
    none), or another text field of the rows (an API model's key variable): the last row's, the
    newest run's."""
    if field not in rows.columns:
        return None
    found = [v for v in rows[field] if not (v is None or (isinstance(v, float) and math.isnan(v)))]
    for value in found:
        if not isinstance(value, str):
            raise _bad_value(r, what, value)
    return found[-1] if found else None


# -- BERTopic ------------------------------------------------------------------------------------
# The snippet is Python a user runs: every value in it is a literal written by ``repr`` after a
# check of its type, and no comment line carries a name or a value read from the store (a name
# with a newline would end the comment and start a line of code).
_SCALARS = (bool, int, float, str, type(None))


def _bad_value(r: "Recommendation", what: str, value) -> UserError:
    return UserError(f"{r.dataset}: the results store's {what} for {_name(r.model, r.algorithm, r.reduction)} is "
                     f"{value!r}, not a value the grid writes; the store is damaged or not tecb's: rerun that cell")


def _checked_int(r: "Recommendation", what: str, value, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise _bad_value(r, what, value)
    return value


def _defaults(algorithm: str) -> dict:
    import importlib

    equivalent = registry.algorithm(algorithm).equivalent
    estimator = getattr(importlib.import_module(equivalent.module), equivalent.name)()
    return json.loads(json.dumps({k: v if isinstance(v, _SCALARS) else repr(v)
                                  for k, v in estimator.get_params(deep=False).items()}))


def _arguments(params: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in sorted(params.items()))


def _chosen(algorithm: str, params: dict, n_clusters: int | None, r: "Recommendation | None" = None) -> dict:
    """The parameters the grid set (those that differ from the estimator's defaults); ``n_clusters``
    as given (the grid takes each split's number of labels). Only the estimator's own parameter
    names pass, each with a value of JSON's scalar types."""
    defaults = _defaults(algorithm)
    chosen = {}
    for k, v in params.items():
        if k not in defaults or k == "n_clusters" or defaults[k] == v:
            continue
        # repr(inf) and repr(nan) are no Python literals: such a value would break the printed code.
        if r is not None and (not isinstance(v, _SCALARS) or isinstance(v, float) and not math.isfinite(v)):
            raise _bad_value(r, f"algorithm parameter {k}", v)
        chosen[k] = v
    if "n_clusters" in defaults and n_clusters is not None:
        chosen["n_clusters"] = n_clusters
    return chosen


def _embedding(r: "Recommendation") -> tuple[list[str], list[str], bool, str]:
    """(import lines, the lines that build the embeddings, whether they are passed precomputed, the
    line that sets ``dims``: the embeddings' length, for a reduction that clips to it), as the kind
    of model that gave the row's identity writes them."""
    try:
        return models_registry.embedding_snippet(r.model_identity, r.model_location, r.api_key_env)
    except ValueError:
        raise _bad_value(r, "model identity", r.model_identity) from None


def _reduction_params(r: "Recommendation") -> dict:
    """The reduction's parameters as the grid ran them, each checked for its type."""
    entry = registry.reduction(r.reduction)
    p = {**entry.defaults, **{k: v for k, v in r.reduction_params.items() if k in entry.defaults or k == "random_state"}}
    for key in ("n_components", "n_neighbors", "pre_components"):
        if key in p:
            _checked_int(r, f"reduction parameter {key}", p[key], low=1)
    if "metric" in p and not (isinstance(p["metric"], str) and p["metric"].isidentifier()):
        raise _bad_value(r, "reduction parameter metric", p["metric"])
    seed = p.get("random_state", DEFAULT_SEED)
    p["random_state"] = None if seed is None else _checked_int(r, "reduction parameter random_state", seed)
    return p


def bertopic_snippet(r: Recommendation) -> str:
    """Python that builds ``BERTopic(embedding_model=..., umap_model=..., hdbscan_model=...)`` for
    ``r``'s pipeline, with German stop words for the words that name the topics; it expects the
    texts in ``docs``. Runs as printed (``tests/test_clustering_registry.py`` runs every kind offline).

    Args:
        r (Recommendation): One of ``recommend``'s results.

    Returns:
        str: Python source that runs as printed.

    Raises:
        UserError: A recommendation whose number of labels or dimensions is not a positive integer.
    """
    n_clusters = max(set(r.n_clusters), key=r.n_clusters.count) if r.n_clusters else None
    if n_clusters is not None:
        n_clusters = _checked_int(r, "number of labels", n_clusters, low=1)
    imports, embedding, precomputed, dims = _embedding(r)
    entry = registry.reduction(r.reduction)
    more, reduction = entry.snippet(_reduction_params(r))
    if entry.needs_dims:
        embedding = [*embedding, dims]
    equivalent = registry.algorithm(r.algorithm).equivalent
    imports = sorted(set([*imports, *more, equivalent.import_line, "from bertopic import BERTopic",
                          "from sklearn.feature_extraction.text import CountVectorizer",
                          "from stop_words import get_stop_words"]))
    chosen = _chosen(r.algorithm, r.algorithm_params, n_clusters, r)
    lines = []
    if r.lead_holds is False and r.runner_up:
        runner = r.runner_up
        lines.append(f"RUNNER_UP = {runner['model']!r}, {runner['reduction']!r}, {runner['algorithm']!r}"
                     "  # the lead over this runner-up does not hold: try both")
    lines += ["# tecb-eval recommend: the best pipeline of a results store as a BERTopic configuration"
              + ("; SYNTHETIC demo data: a configuration to try, not a finding" if r.synthetic else ""),
              (f"BEST = {{'dataset': {r.dataset!r}, 'model': {r.model!r}, 'reduction': {r.reduction!r}, "
               f"'algorithm': {r.algorithm!r}, 'v_measure_x100': {round(100 * r.mean, 2)!r}}}" if r.criterion is None
               else f"BEST = {{'dataset': {r.dataset!r}, 'model': {r.model!r}, 'reduction': {r.reduction!r}, "
               f"'algorithm': {r.algorithm!r}, 'criterion': {r.criterion!r}, "
               f"'score': {round(float(r.criterion_value), 4)!r}}}"),
              "# docs: your texts, a list of str", *imports, "", *embedding, reduction]
    if n_clusters is not None:
        spread = f"{min(r.n_clusters)} to {max(r.n_clusters)}" if len(set(r.n_clusters)) > 1 else str(n_clusters)
        lines.append(f"# n_clusters: the number of topics wanted; the grid took each split's number of labels ({spread})"
                     if r.criterion is None else
                     "# n_clusters: the number of topics the label-free criterion ranked first")
    lines += [f"hdbscan_model = {equivalent.name}({_arguments(chosen)})",
              "# German stop words only for the words that name each topic; the clustering sees every word",
              "vectorizer_model = CountVectorizer(stop_words=get_stop_words('german'))",
              "# language='multilingual': BERTopic's default, 'english', strips every letter outside ASCII "
              "(umlauts, eszett) before the vectorizer",
              "topic_model = BERTopic(embedding_model=embedding_model, umap_model=umap_model, "
              "hdbscan_model=hdbscan_model,\n                    vectorizer_model=vectorizer_model, "
              "language='multilingual')",
              "topics, probabilities = topic_model.fit_transform(docs" + (", embeddings)" if precomputed else ")")]
    return "\n".join(lines) + "\n"


# -- text ----------------------------------------------------------------------------------------
def text(recommendations: list[Recommendation], left_out: str | None = None) -> str:
    """The recommendations as a user reads them.

    Args:
        recommendations (list[Recommendation]): What ``recommend`` returned.
        left_out (str | None): The line naming rows that were not compared, or None.

    Returns:
        str: Lines of text, one block per dataset.
    """
    out = []
    if any(r.synthetic for r in recommendations):
        out += [tables.DEMO_NOTE, ""]
    for r in recommendations:
        head = f"{r.dataset}" + (" (synthetic, not comparable)" if r.synthetic else "")
        chosen = _chosen(r.algorithm, r.algorithm_params, None)
        params = _arguments(chosen) or "its defaults"
        if r.n_clusters:
            params = f"n_clusters = the number of labels ({', '.join(map(str, sorted(set(r.n_clusters))))})" + (
                f", {params}" if chosen else "")
        reduction = _arguments({k: v for k, v in r.reduction_params.items()
                                if k in ("n_components", "n_neighbors", "metric", "pre_components", "random_state")})
        interval = (f", {100 * r.confidence:g} % interval {leaderboard.shown(r.low)} to "
                    f"{leaderboard.shown(r.high)}" if leaderboard.finite(r.low) else ", no interval (one split, or "
                    "fast-protocol draws)")
        out += [head,
                f"  best pipeline: {r.model} ({r.model_identity})",
                f"    reduction: {r.reduction}" + (f" ({reduction})" if reduction else ""),
                f"    algorithm: {r.algorithm} ({params})",
                f"  V-measure x100: {leaderboard.shown(r.mean)}{interval}; SD over splits {leaderboard.shown(r.sd)} "
                f"({r.splits} splits x {r.seeds} seed{'s' if r.seeds != 1 else ''})"
                + (f"; 0 because: {r.zero}" if r.zero else "")]
        if r.usage is not None:
            out.append(f"  API cost: {_usage_words(r.usage)} for the texts of the {r.usage['splits']} splits compared")
        if r.near_chance:
            out.append(f"  chance: AMI x100 {leaderboard.shown(r.ami)}, {100 * r.confidence:g} % interval "
                       f"{leaderboard.shown(r.ami_low)} to {leaderboard.shown(r.ami_high)}, holds 0: these clusters "
                       "barely beat chance (a random assignment of the same sizes scores AMI 0)")
        if r.runner_up:
            u = r.runner_up
            out.append(f"  runner-up: {u['model']}, {u['reduction']} reduction, {u['algorithm']} "
                       f"({leaderboard.shown(u['mean'])}" + (f"; 0 because: {u['zero']}" if u.get("zero") else "")
                       + (f"; API cost: {_usage_words(u['usage'])}" if u.get("usage") else "") + ")")
        out.append(f"  lead: {r.lead_sentence}")
        if len(r.pipelines) > 1:
            shown = "; ".join(
                f"{p['rank']}{'=' if p['rank_tied'] else ''}. {p['model']}, {p['reduction']} reduction, "
                f"{p['algorithm']} {leaderboard.shown(p['mean'])}"
                + (f" ({_usage_words(p['usage'])})" if p.get("usage") else "")
                + ("" if p["tied"] is None else " (tied with the best)" if p["tied"] else " (behind the best: holds)")
                for p in r.pipelines)
            tied = sum(1 for p in r.pipelines if p["tied"])
            out.append(f"  pipelines ranked (V-measure x100, the first {len(r.pipelines)} of "
                       f"{r.compared_pipelines}): {shown}; {tied} of them tied with the best")
        out.append("  meaning: " + MEANING.format(alpha=round(1 - r.confidence, 6)))
        if r.table2_leader is not None and r.table2_leader != r.model:
            out.append(f"  leaderboard: {r.table2_leader} leads the leaderboard, which ranks models on one configuration "
                       f"(k-means on the embeddings, Table 2); this ranks every pipeline, so the two name different "
                       "winners")
        if r.noise_fraction is not None:
            out.append(f"  noise fraction: {r.noise_fraction:.2f} of the texts left unassigned by {r.algorithm} "
                       "(scored as one cluster of their own)")
        for line in r.left_out:
            out.append(f"  not compared: {line}")
        out += ["  BERTopic:", *("    " + line if line else "" for line in r.bertopic.splitlines()), ""]
    # Each entry is one line: a stored name (a model's, a dataset's) shows with its control
    # characters escaped, so that it can never start a line of its own (a fake "BERTopic:" block).
    out = [one_line(line) for line in out]
    if left_out:
        out.append(left_out)  # its lines were made one line each where they were composed
    return "\n".join(out).rstrip("\n") + "\n"


def as_json(recommendations: list[Recommendation], left_out: str | None = None) -> str:
    """The recommendations as one JSON object, as ``tecb-eval recommend --format json`` prints it:
    ``synthetic``, ``note``, ``left_out`` and one record per dataset (scores 0..1, the snippet as text).

    Args:
        recommendations (list[Recommendation]): What ``recommend`` returned.
        left_out (str | None): The line naming rows that were not compared, or None.

    Returns:
        str: The JSON text.
    """
    return json.dumps({"synthetic": any(r.synthetic for r in recommendations),
                       "note": tables.DEMO_NOTE if any(r.synthetic for r in recommendations) else None,
                       "left_out": left_out, "recommendations": [r.record() for r in recommendations]},
                      indent=2, ensure_ascii=False, allow_nan=False) + "\n"
