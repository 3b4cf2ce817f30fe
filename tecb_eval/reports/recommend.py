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
from tecb_eval.reports import compare, leaderboard, tables, versions

# Where each of our algorithms' estimator lives: (module, class) — the defaults a snippet leaves out.
ESTIMATORS = {
    "minibatch_kmeans": ("sklearn.cluster", "MiniBatchKMeans"),
    "agglomerative": ("sklearn.cluster", "AgglomerativeClustering"),
    "hdbscan": ("hdbscan", "HDBSCAN"),
    "dbstream": ("tecb_eval.clustering.algorithms", "DBSTREAMClusterer"),
}
# Built-in encoders that are a Sentence Transformers model on the Hub.
SENTENCE_TRANSFORMERS = {"minilm-l6": "sentence-transformers/all-MiniLM-L6-v2"}


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
    left_out: list[str] = field(default_factory=list)
    bertopic: str = ""

    @property
    def pipeline(self) -> str:
        return f"{self.model}, {self.reduction} reduction, {self.algorithm}"

    def record(self) -> dict:
        return _jsonable(asdict(self))


def _jsonable(value):
    """JSON has no NaN or infinity: a missing figure (NaN) is null, an infinite parameter (HDBSCAN's
    ``cluster_selection_epsilon_max``) the text Python reads back with ``float()``."""
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def _name(model: str, algorithm: str, reduction: str) -> str:
    return f"{model} {algorithm}:{reduction}"


def _scores(rows: pd.DataFrame) -> pd.Series:
    return rows.set_index(["split", "seed"]).v_measure.sort_index()


def recommend(frame: pd.DataFrame, datasets=None, *, confidence: float = compare.DEFAULT_CONFIDENCE,
              resamples: int = compare.DEFAULT_RESAMPLES, seed: int = compare.DEFAULT_SEED) -> list[Recommendation]:
    """A recommendation per dataset of ``frame`` (one version per table: see the module), or of the
    ``datasets`` named (MTEB names)."""
    synthetic = set(tables.synthetic_datasets(frame))
    have = tables.dataset_columns(frame.mteb_name.unique())
    if datasets:
        missing = [d for d in datasets if d not in have]
        if missing:
            raise UserError(f"--data {', '.join(missing)}: not in the results; they hold {', '.join(have)}")
        have = [d for d in have if d in set(datasets)]
    return [_recommend_one(frame[frame.mteb_name == d], d, d in synthetic, confidence, resamples, seed) for d in have]


def _recommend_one(rows: pd.DataFrame, dataset: str, synthetic: bool, confidence, resamples, seed) -> Recommendation:
    keys = ["model", "algorithm", "reduction"]
    cells = {key: frozenset(g[list(versions.CELL)].itertuples(index=False, name=None))
             for key, g in rows.groupby(keys, sort=True)}
    # Pipelines are compared on the cells most of them share, as the leaderboard ranks models.
    main, keep = leaderboard.main_cells(cells)
    left_out = [f"{_name(*key)} (other splits or seeds: {len(cells[key])} cells, the compared pipelines "
                f"{len(main)})" for key in sorted(set(cells) - set(keep))]
    compared = rows[[k in set(keep) for k in zip(rows.model, rows.algorithm, rows.reduction)]]
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
        name = (f"{dataset}\x1f{best.model}" if (best.algorithm, best.reduction) == leaderboard.TABLE2_CONFIG
                else f"{dataset}\x1f{best.model}\x1f{best.algorithm}:{best.reduction}")
        _, low, high = compare.mean_interval(scores, confidence=confidence, resamples=resamples, seed=seed, name=name)
    runner = lead = None
    sentence = "no runner-up: the results hold one pipeline on the cells compared"
    if len(ranked) > 1:
        second = ranked[1]
        theirs = compared[(compared.model == second.model) & (compared.algorithm == second.algorithm)
                          & (compared.reduction == second.reduction)]
        result = compare.paired_difference(
            scores, _scores(theirs), dataset=dataset, model_a=_name(best.model, best.algorithm, best.reduction),
            model_b=_name(second.model, second.algorithm, second.reduction), confidence=confidence,
            resamples=resamples, seed=seed, independent=independent)
        runner = {"model": second.model, "algorithm": second.algorithm, "reduction": second.reduction,
                  "mean": float(second.mean)}
        lead = _jsonable(result.record())
        sentence = result.sentence()
    noise = (float(mine.noise_fraction.mean()) if best.algorithm in leaderboard.DENSITY_ALGORITHMS
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
        lead=lead, lead_sentence=sentence, left_out=left_out)
    recommendation.bertopic = bertopic_snippet(recommendation)
    return recommendation


# -- BERTopic ------------------------------------------------------------------------------------
def _defaults(algorithm: str) -> dict:
    import importlib

    module, name = ESTIMATORS[algorithm]
    estimator = getattr(importlib.import_module(module), name)()
    return json.loads(json.dumps({k: v if isinstance(v, (int, float, str, bool, type(None))) else repr(v)
                                  for k, v in estimator.get_params(deep=False).items()}))


def _arguments(params: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in sorted(params.items()))


def _chosen(algorithm: str, params: dict, n_clusters: int | None) -> dict:
    """The parameters the grid set (those that differ from the estimator's defaults); ``n_clusters``
    as given (the grid takes each split's number of labels)."""
    defaults = _defaults(algorithm)
    chosen = {k: v for k, v in params.items() if k in defaults and defaults[k] != v and k != "n_clusters"}
    if "n_clusters" in defaults and n_clusters is not None:
        chosen["n_clusters"] = n_clusters
    return chosen


def _embedding(model: str, identity: str) -> tuple[list[str], str]:
    """(import lines, the line that builds ``embedding_model``)."""
    if model == "tfidf-lsa" or identity.startswith("tfidf-lsa:"):
        parts = dict(p.split("=", 1) for p in identity.split("|") if "=" in p and "==" not in p)
        dim, features, seed = parts.get("dim", "256"), parts.get("max_features", "100000"), parts.get("seed", "42")
        return (["from sklearn.decomposition import TruncatedSVD",
                 "from sklearn.feature_extraction.text import TfidfVectorizer",
                 "from sklearn.pipeline import make_pipeline", "from sklearn.preprocessing import Normalizer"],
                "# tfidf-lsa as the grid ran it: TF-IDF, LSA (at most one component fewer than texts), unit length\n"
                f"embedding_model = make_pipeline(TfidfVectorizer(sublinear_tf=True, max_features={features}),\n"
                f"                                TruncatedSVD(n_components=min({dim}, len(docs) - 1), "
                f"random_state={seed}), Normalizer())")
    hub = SENTENCE_TRANSFORMERS.get(model, model.removeprefix("mteb:"))
    note = ""
    if "layer=" in identity or "prompt" in identity:
        note = "# the grid ran this model with options (a layer or a prompt) SentenceTransformer does not take here\n"
    return (["from sentence_transformers import SentenceTransformer"],
            f"{note}embedding_model = SentenceTransformer({hub!r})")


def _reduction(reduction: str, params: dict) -> tuple[list[str], str]:
    seed = params.get("random_state", 42)
    components = params.get("n_components", 2)
    umap = (f"UMAP(n_components={components}, n_neighbors={params.get('n_neighbors', 15)}, "
            f"metric={params.get('metric', 'cosine')!r}, random_state={seed})")
    if reduction == "none":
        return (["from bertopic.dimensionality import BaseDimensionalityReduction"],
                "umap_model = BaseDimensionalityReduction()  # no reduction: cluster the embeddings")
    if reduction == "pca":
        return (["from sklearn.decomposition import PCA"], f"umap_model = PCA(n_components={components}, random_state={seed})")
    if reduction == "umap":
        return (["from umap import UMAP"], f"umap_model = {umap}")
    if reduction == "pca50+umap":
        pre = params.get("pre_components", 50)
        return (["from sklearn.decomposition import PCA", "from sklearn.pipeline import make_pipeline",
                 "from umap import UMAP"],
                f"umap_model = make_pipeline(PCA(n_components={pre}, random_state={seed}),\n"
                f"                           UMAP(n_components={components}, n_neighbors=15, metric='cosine', "
                f"random_state={seed}))")
    raise UserError(f"no BERTopic equivalent known for the reduction {reduction!r}")


def bertopic_snippet(r: Recommendation) -> str:
    """Python that builds ``BERTopic(embedding_model=..., umap_model=..., hdbscan_model=...)`` for
    ``r``'s pipeline; it expects the texts in ``docs``."""
    n_clusters = max(set(r.n_clusters), key=r.n_clusters.count) if r.n_clusters else None
    imports, embedding = _embedding(r.model, r.model_identity)
    more, reduction = _reduction(r.reduction, r.reduction_params)
    module, name = ESTIMATORS[r.algorithm]
    imports = sorted(set([*imports, *more, f"from {module} import {name}", "from bertopic import BERTopic"]))
    chosen = _chosen(r.algorithm, r.algorithm_params, n_clusters)
    lines = ["# " + ("SYNTHETIC demo data: a configuration to try, not a finding. " if r.synthetic else "")
             + f"Best on {r.dataset}: {r.pipeline} (V-measure x100 {leaderboard.shown(r.mean)}).",
             "# docs: your texts, a list of str", *imports, "", embedding, reduction]
    if n_clusters is not None:
        spread = f"{min(r.n_clusters)} to {max(r.n_clusters)}" if len(set(r.n_clusters)) > 1 else str(n_clusters)
        lines.append(f"# n_clusters: the number of topics wanted; the grid took each split's number of labels ({spread})")
    lines += [f"hdbscan_model = {name}({_arguments(chosen)})",
              "topic_model = BERTopic(embedding_model=embedding_model, umap_model=umap_model, hdbscan_model=hdbscan_model)",
              "topics, probabilities = topic_model.fit_transform(docs)"]
    return "\n".join(lines) + "\n"


# -- text ----------------------------------------------------------------------------------------
def text(recommendations: list[Recommendation], left_out: str | None = None) -> str:
    """The recommendations as a user reads them."""
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
                f"({r.splits} splits x {r.seeds} seed{'s' if r.seeds != 1 else ''})"]
        if r.runner_up:
            u = r.runner_up
            out.append(f"  runner-up: {u['model']}, {u['reduction']} reduction, {u['algorithm']} "
                       f"({leaderboard.shown(u['mean'])})")
        out.append(f"  lead: {r.lead_sentence}")
        if r.noise_fraction is not None:
            out.append(f"  noise fraction: {r.noise_fraction:.2f} of the texts left unassigned by {r.algorithm} "
                       "(scored as one cluster of their own)")
        for line in r.left_out:
            out.append(f"  not compared: {line}")
        out += ["  BERTopic:", *("    " + line if line else "" for line in r.bertopic.splitlines()), ""]
    if left_out:
        out.append(left_out)
    return "\n".join(out).rstrip("\n") + "\n"


def as_json(recommendations: list[Recommendation], left_out: str | None = None) -> str:
    return json.dumps({"synthetic": any(r.synthetic for r in recommendations),
                       "note": tables.DEMO_NOTE if any(r.synthetic for r in recommendations) else None,
                       "left_out": left_out, "recommendations": [r.record() for r in recommendations]},
                      indent=2, ensure_ascii=False, allow_nan=False) + "\n"
