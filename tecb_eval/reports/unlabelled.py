"""`tecb-eval recommend` on a corpus without labels: pipelines ranked by a label-free criterion.

The criterion is the one the calibration chose (``best``:
:func:`tecb_eval.reports.calibration.choose`, among the criteria comparable across vector spaces and
their rank averages, on the packaged calibration of our labelled German data, or one the user wrote
on their own labelled store), or the one named (any criterion of the registry, or a rank average of
two or more). Each pipeline (model, reduction, algorithm, cluster setting: the k or HDBSCAN's
min_cluster_size of a range) is scored by the criterion's mean over its splits and seeds; the first
with at most as many clusters as the pipeline the grid agrees on most (:func:`capped`) is
recommended with its calibration (rho with its interval, the regret, on which data) and a BERTopic
configuration at that setting. Where the calibration is weak (rho's interval holds 0) the
text says so and lists the runner-up pipelines beside it.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from tecb_data.errors import UserError

from tecb_eval.grid.store import read_setting
from tecb_eval.clustering.consensus import decode, require_assignments, with_consensus
from tecb_eval.clustering.criteria import CRITERIA, CRITERION_NAMES, criterion as criterion_entry
from tecb_eval.files import one_line
from tecb_eval.reports import calibration as calib
from tecb_eval.reports.label_free import with_setting
from tecb_eval.reports.recommend import Recommendation, bertopic_snippet

PIPELINE = ["model", "reduction", "algorithm", "setting"]
RUNNERS_UP = 3


def indistinguishable(ranked: pd.DataFrame) -> dict:
    """The pipelines the criterion cannot tell apart from the first, by its own spread over the
    splits and seeds each pipeline ran on: those whose mean lies within two standard errors (the
    larger of the two pipelines') of the first's. ``{"members": [...], "spread": words}``; no
    members where there is no spread to judge by (one split and one seed, or a rank average)."""
    if "sd" not in ranked.columns or ranked.empty:
        return {"members": [], "spread": "a rank average has no spread of its own"}
    first = ranked.iloc[0]
    if not (first.n >= 2 and math.isfinite(first.sd)):
        return {"members": [], "spread": "one split and one seed: no spread to tell pipelines apart (run the grid "
                                         "with --seeds 1,2,3 to measure it)"}
    error = ranked.sd.fillna(0) / np.sqrt(ranked.n.clip(lower=1))
    margin = 2 * np.maximum(error, error.iloc[0])
    close = (first.pointed - ranked.pointed) <= margin
    members = ranked[close].iloc[1:]
    return {"members": [{"model": r.model, "reduction": r.reduction, "algorithm": r.algorithm, "setting": r.setting,
                         "score": float(r.score)} for r in members.itertuples()],
            "spread": f"within two standard errors over {int(first.n)} splits and seeds"}


def check_criterion(criterion: str) -> str:
    """A criterion of the registry, or a rank average of two or more different ones (``rank:a+b``,
    ``rank:a+b+c``, ...); one line naming what is wrong otherwise."""
    names = calib.parts(criterion)
    unknown = [n for n in names if n not in CRITERIA]
    combined = criterion.startswith(calib.COMBINED)
    if unknown or (combined and (len(names) < 2 or len(set(names)) < len(names))):
        problem = (f"{', '.join(map(repr, unknown))} {'is' if len(unknown) == 1 else 'are'} not a criterion" if unknown
                   else "a rank average needs two or more different criteria")
        raise UserError(f"--criterion {criterion}: {problem}; choose one of {', '.join(CRITERIA)}, or a rank average "
                        "of two or more such as rank:npmi+consensus+size_balance")
    return criterion


def ranking(rows: pd.DataFrame, criterion: str) -> pd.DataFrame:
    """The pipelines of one dataset, best first by ``criterion`` (its mean over splits and seeds,
    pointed so that higher is better; a rank average ranks the pipelines by each part's mean and
    averages the ranks); a pipeline where it is undefined everywhere is left out."""
    rows = with_setting(rows)
    if "consensus" in calib.parts(criterion) and "consensus" not in rows.columns:
        require_assignments(rows, f"--criterion {criterion}")
        rows = with_consensus(rows)
    if criterion.startswith(calib.COMBINED):
        from scipy import stats

        # Consensus, where a part, is computed above, once for all parts.
        tables = [_single_ranking(rows, part).set_index(PIPELINE) for part in calib.parts(criterion)]
        joined = pd.concat([t.pointed.rename(str(i)) for i, t in enumerate(tables)], axis=1, join="inner")
        if joined.empty:
            raise UserError(f"--criterion {criterion}: no pipeline has every part of it; choose another --criterion")
        table = pd.DataFrame({"score": np.mean([stats.rankdata(joined[c]) for c in joined.columns], axis=0)},
                             index=joined.index)
        table["splits"] = tables[0].splits.reindex(joined.index).to_numpy()
        table["pointed"] = table.score
        table = table.reset_index()
        order = table.sort_values(PIPELINE, kind="stable").index
        return table.loc[order].sort_values("pointed", ascending=False, kind="stable").reset_index(drop=True)
    return _single_ranking(rows, criterion)


def capped(rows: pd.DataFrame, ranked: pd.DataFrame, k_cap: str) -> tuple[pd.DataFrame, dict | None]:
    """``ranked`` (:func:`ranking` of ``rows``) with the pipelines the cap allows first, in their
    order, then the others, each marked ``above_cap``; and the cap: the clusters of the pipeline the
    grid agrees on most (its mean consensus and clusters over splits and seeds,
    :func:`tecb_eval.reports.calibration.within_cap`) and which pipeline that is; None where
    ``k_cap`` is ``"none"`` or no pipeline has a consensus."""
    ranked = ranked.assign(above_cap=False)
    if k_cap == calib.NO_CAP:
        return ranked, None
    if "consensus" not in rows.columns:
        return ranked, None
    rows = with_setting(rows)
    per = rows.assign(clusters=pd.to_numeric(rows.n_clusters_found, errors="coerce"),
                      agreed=pd.to_numeric(rows.consensus, errors="coerce")).groupby(PIPELINE, sort=True).agg(
        clusters=("clusters", "mean"), agreed=("agreed", "mean")).reset_index()
    index = calib.most_agreed(per.clusters, per.agreed)
    if index is None:
        return ranked, None
    allowed = dict(zip(map(tuple, per[PIPELINE].to_numpy()), calib.within_cap(per.clusters, per.agreed, k_cap)))
    above = np.array([not allowed.get(tuple(p), True) for p in ranked[PIPELINE].to_numpy()], dtype=bool)
    ranked = ranked.assign(above_cap=above)
    ranked = pd.concat([ranked[~above], ranked[above]]).reset_index(drop=True)
    top = per.iloc[index]
    return ranked, {"rule": k_cap, "clusters": float(top.clusters),
                    "pipeline": {c: top[c] for c in PIPELINE}, "consensus": float(top.agreed)}


def _single_ranking(rows: pd.DataFrame, criterion: str) -> pd.DataFrame:
    if criterion not in rows.columns or not pd.to_numeric(rows[criterion], errors="coerce").notna().any():
        how = {"reruns": "run the grid again with --stability N (e.g. 5) to measure it",
               "texts": "run the grid again with --topics to compute them"}.get(
            criterion_entry(criterion).needs, "rows written before this criterion, or no density clustering for DBCV; "
                                              "rerun the grid")
        raise UserError(f"criterion {criterion}: the results hold no {CRITERION_NAMES[criterion]} scores; {how}, or "
                        "rank by another --criterion")
    scored = rows.assign(score=pd.to_numeric(rows[criterion], errors="coerce"))
    table = scored.groupby(PIPELINE, sort=True).agg(score=("score", "mean"), splits=("split", "nunique"),
                                                    sd=("score", "std"), n=("score", "count"))
    table = table[table.score.notna()]
    if table.empty:
        raise UserError(f"{CRITERION_NAMES[criterion]} is undefined on every pipeline of these results (one cluster "
                        "or every text noise); choose another --criterion")
    table["pointed"] = CRITERIA[criterion] * table.score
    return table.sort_values("pointed", ascending=False, kind="stable").reset_index()


def _calibration_of(found: dict, criterion: str) -> dict:
    table = pd.DataFrame(found["table"])
    mine = table[(table.scope == calib.ALL) & (table.criterion == criterion)]
    if mine.empty:
        mine = table[table.criterion == criterion]
    if mine.empty:
        return {}
    row = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in mine.iloc[0].to_dict().items()}
    row["weak"] = calib.weak(row)
    row["against"] = calib.against(row)
    return row


def recommend_unlabelled(frame: pd.DataFrame, dataset: str, *, criterion: str | None = None,
                         calibration: dict, k_cap: str | None = None) -> dict:
    """The recommendation for the corpus ``dataset`` (an MTEB name) as a record: the criterion, its
    calibration, the ranked pipelines (those within the cap on clusters first: ``k_cap``, or the
    calibration's, :func:`capped`), and the BERTopic snippet of the first."""
    if criterion is not None:
        check_criterion(criterion)
    chosen = criterion or calibration["best"]
    k_cap = k_cap or calibration.get("k_cap", calib.NO_CAP)
    rows = frame[frame.mteb_name == dataset]
    if k_cap == calib.CONSENSUS_CAP:
        # The cap is the clusters of the partition the grid agrees on most.
        require_assignments(rows, dataset, otherwise="pass --k-cap none to rank every partition")
        rows = with_consensus(rows)
    ranked, cap = capped(rows, ranking(rows, chosen), k_cap)
    best = ranked.iloc[0]
    of_best = with_setting(rows)
    of_best = of_best[(of_best.model == best.model) & (of_best.reduction == best.reduction)
                      & (of_best.algorithm == best.algorithm) & (of_best.setting == best.setting)]
    newest = of_best.iloc[-1]
    point = read_setting(best.setting)
    params = json.loads(newest.get("algorithm_params") or "{}")
    reduction_params = json.loads(newest.get("reduction_params") or "{}")
    k = point[1] if point and point[0] == "k" else None
    r = Recommendation(
        dataset=dataset, synthetic=bool(newest.get("synthetic") is True), model=str(best.model),
        model_identity=str(newest.model_identity), algorithm=str(best.algorithm), reduction=str(best.reduction),
        algorithm_params=params, reduction_params=reduction_params, n_clusters=[k] if k else [],
        mean=math.nan, low=math.nan, high=math.nan, sd=math.nan, splits=int(best.splits),
        seeds=int(of_best.seed.nunique()), noise_fraction=float(pd.to_numeric(of_best.noise_fraction).mean()),
        confidence=0.95, runner_up=None, lead=None, lead_sentence="", criterion=chosen,
        criterion_value=float(best.score),
        model_location=newest.get("model_location") if isinstance(newest.get("model_location"), str) else None,
        api_key_env=newest.get("api_key_env") if isinstance(newest.get("api_key_env"), str) else None)
    r.bertopic = bertopic_snippet(r)
    return {"dataset": dataset, "criterion": chosen, "criterion_name": calib.title(chosen),
            "named_by_user": criterion is not None, "calibration": _calibration_of(calibration, chosen),
            "held_out": calib.trust_of(calibration, chosen), "target": calibration.get("target", "v_measure"),
            "spectral_k": spectral_k_of(of_best), "topics": largest_topics(newest),
            "best_criterion": calibration["best"],
            "calibrated_on": calibration.get("datasets", []), "calibration_date": calibration.get("date"),
            "pipelines": ranked[PIPELINE + ["score", "splits", "above_cap"]].to_dict("records"), "k_cap": cap,
            "tied": indistinguishable(ranked[~ranked.above_cap]),
            "noise_fraction": r.noise_fraction, "stability": stability_of(of_best), "bertopic": r.bertopic,
            "setting": best.setting or "default"}


TOPICS_SHOWN = 5


def spectral_k_of(rows: pd.DataFrame) -> int | None:
    """The spectrum's number of clusters of a pipeline's splits (their median), None where not measured."""
    if "spectral_k" not in rows.columns:
        return None
    values = pd.to_numeric(rows["spectral_k"], errors="coerce").dropna()
    return int(round(float(values.median()))) if len(values) else None


def cluster_topics(row, limit: int | None = TOPICS_SHOWN) -> list[dict]:
    """The clusters of one row, largest first (ties by cluster number), each with its size and top
    words: ``limit`` of them (None: all); [] where the row kept no assignment or no topic words."""
    words_text, kept = row.get("topic_words"), row.get("assignment")
    if not isinstance(words_text, str) or not isinstance(kept, str):
        return []
    words = json.loads(words_text)
    labels = decode(kept)
    clusters, sizes = np.unique(labels[labels != -1], return_counts=True)
    order = sorted(zip(clusters.tolist(), sizes.tolist()), key=lambda cs: (-cs[1], cs[0]))
    return [{"cluster": int(c), "size": int(n), "words": words.get(str(c), [])} for c, n in order[:limit]]


def largest_topics(row) -> list[dict]:
    return cluster_topics(row, TOPICS_SHOWN)


def runners_up_shown(calibration: dict) -> int:
    """How many runner-ups ``recommend`` lists after its pick: more where the criterion's
    calibration is missing, weak or against V-measure (its pick is then a guess)."""
    return RUNNERS_UP if calibration and not (calibration.get("weak") or calibration.get("against")) else RUNNERS_UP + 2


def stability_pipelines(frame: pd.DataFrame, calibration: dict | None = None) -> set[tuple] | None:
    """The pipelines whose stability ``tecb-eval run`` measures by default: on each corpus without
    labels in ``frame``, the pick and the runner-ups :func:`recommend_unlabelled` lists, as
    ``(dataset_fingerprint, model, reduction, algorithm, setting)``. None (every cell) where the
    calibration's best criterion is (or averages) stability itself, which the grid cannot rank by before it
    has measured it. ``calibration``: the packaged one unless given."""
    from tecb_eval.reports.versions import unlabelled_rows

    found = calib.read_calibration() if calibration is None else calibration
    if any(part.startswith("stability") for part in calib.parts(str(found["best"]))):
        return None
    corpora = frame[unlabelled_rows(frame)]
    out: set[tuple] = set()
    for dataset, rows in corpora.groupby("mteb_name", sort=True):
        picked = recommend_unlabelled(rows, str(dataset), calibration=found)
        shown = picked["pipelines"][:1 + runners_up_shown(picked["calibration"])]
        for fingerprint in sorted(set(rows["dataset_fingerprint"].astype(str))):
            out |= {(fingerprint, p["model"], p["reduction"], p["algorithm"], p["setting"] or "") for p in shown}
    return out


def stability_of(rows: pd.DataFrame) -> dict | None:
    """A pipeline's stability (:mod:`tecb_eval.clustering.stability`): the means over its splits and
    seeds of the ARI and AMI between reruns and of their interval's ends, with the reruns and the
    subsample's share; None where no row measured it."""
    if "stability_ari" not in rows.columns:
        return None
    measured = rows[pd.to_numeric(rows["stability_ari"], errors="coerce").notna()]
    if measured.empty:
        notes = rows["stability_note"].dropna() if "stability_note" in rows.columns else []
        return {"note": str(notes.iloc[0])} if len(notes) else None
    out = {name: float(pd.to_numeric(measured[name]).mean()) for name in
           ("stability_ari", "stability_ari_low", "stability_ari_high", "stability_ami", "stability_ami_low",
            "stability_ami_high")}
    out.update(runs=int(measured["stability_runs"].iloc[-1]), fraction=float(measured["stability_fraction"].iloc[-1]))
    return out


def setting_words(setting: str) -> str:
    point = read_setting(setting)
    if point is None:
        return "its own setting"
    return f"k = {point[1]}" if point[0] == "k" else f"min_cluster_size = {point[1]}"


def stability_words(found: dict | None) -> str:
    """One line on a pipeline's stability, as :func:`stability_of` found it."""
    if found is None:
        return "stability: not measured (run the grid with --stability N to rerun each clustering N times)"
    if "note" in found:
        return f"stability: undefined ({found['note']})"
    return (f"stability: ARI {found['stability_ari']:.2f} [{found['stability_ari_low']:.2f}, "
            f"{found['stability_ari_high']:.2f}], AMI {found['stability_ami']:.2f} [{found['stability_ami_low']:.2f}, "
            f"{found['stability_ami_high']:.2f}] with itself over {found['runs']} reruns on "
            f"{found['fraction']:.0%} subsamples (mean [5th, 95th percentile]; 1: the same clusters every time)")


def text(found: dict) -> str:
    """One recommendation as a user reads it."""
    c = found["calibration"]
    best = found["pipelines"][0]
    on = ", ".join(d["mteb_name"] for d in found["calibrated_on"]) or "unknown data"
    out = [f"{found['dataset']} (no labels: ranked by {found['criterion_name']}"
           + (", the criterion you named)" if found["named_by_user"] else ", the best-calibrated criterion)"),
           f"  best pipeline: {best['model']}, {best['reduction']} reduction, {best['algorithm']} with "
           f"{setting_words(best['setting'])}",
           f"    {found['criterion_name']}: {best['score']:.4f} (mean over {best['splits']} split(s)); noise "
           f"fraction {found['noise_fraction']:.2f}",
           "    " + stability_words(found.get("stability"))]
    cap = found.get("k_cap")
    if cap:
        agreed = cap["pipeline"]
        out.append(f"    at most {cap['clusters']:g} clusters: those of the partition the grid agrees on most "
                   f"({agreed['model']}, {agreed['reduction']} reduction, {agreed['algorithm']} with "
                   f"{setting_words(agreed['setting'])}; consensus {cap['consensus']:.3f}); --k-cap none ranks every "
                   "partition")
    if found.get("spectral_k") is not None:
        out.append(f"    the spectrum suggests about {found['spectral_k']} clusters (the eigengap of a cosine "
                   "k-NN graph of the pick's vectors)")
    for topic in found.get("topics", []):
        out.append(f"    cluster {topic['cluster']} ({topic['size']} texts): {', '.join(topic['words'][:10])}")
    target = calib.TARGETS.get(found.get("target"), "V-measure")
    held = found.get("held_out")
    if held:
        shown = "; ".join(
            f"{r['held_out']}: regret {r['regret']:.2f}, rho {r['rho']:+.2f}, k error {r['k_error']:.2f}"
            + (f", k ratio {r['k_ratio']:.2f}" if isinstance(r.get("k_ratio"), (int, float)) else "")
            + ("" if r["same"] else f" (the choice there: {calib.title(r['chosen'])})") for r in held["rows"])
        worst = max(r["regret"] for r in held["rows"])
        out.append(f"  trust (each dataset left out of the choice, {found['calibration_date']}): the criterion chosen "
                   f"on the other datasets lost, on the one left out, {target} x100 points against its best pipeline: "
                   f"{shown}" + (f"; up to {worst:.1f} points: compare the runner-ups' topics before acting on the pick"
                                 if worst > 5 else ""))
    if c:
        out.append(f"  calibration ({found['calibration_date']}, on {on}, in-sample): Spearman rho "
                   f"{calib.interval_text(c['rho'], c.get('rho_low'), c.get('rho_high'))} with {target}; regret "
                   f"{calib.interval_text(c['regret'], None, None, signed=False).split(' (')[0]} {target} "
                   f"x100 points against the best pipeline")
        if c["weak"]:
            out.append("  weak: the interval of rho holds 0, so on labelled data this criterion's ranking could not "
                       "be told from chance; treat the pick as a guess and try the runner-ups too")
        elif c["against"]:
            out.append(f"  against: the whole interval of rho lies below 0, so on labelled data this criterion ranked "
                       f"pipelines against {target} and its pick tends to be one of the worse; rank by the "
                       f"best-calibrated criterion instead (`--criterion {found['best_criterion']}`)")
    else:
        out.append(f"  calibration: none for {found['criterion_name']} on {on}; its ranking is untested")
    tied = found.get("tied") or {"members": []}
    if tied["members"]:
        names = "; ".join(f"{t['model']}, {t['reduction']} reduction, {t['algorithm']} with "
                          f"{setting_words(t['setting'])}" for t in tied["members"])
        out.append(f"  cannot be told apart from the pick ({tied['spread']}): {names}; treat them as one group")
    elif tied.get("spread", "").startswith("within"):
        out.append(f"  ties: no other pipeline lies {tied['spread']} of the pick")
    elif tied.get("spread"):
        out.append(f"  ties: {tied['spread']}")
    for other in found["pipelines"][1:1 + runners_up_shown(c)]:
        out.append(f"  runner-up: {other['model']}, {other['reduction']} reduction, {other['algorithm']} with "
                   f"{setting_words(other['setting'])} ({other['score']:.4f}"
                   + (", more clusters than the cap)" if other.get("above_cap") else ")"))
    out += ["  BERTopic:", *("    " + line if line else "" for line in found["bertopic"].splitlines()), ""]
    return "\n".join(one_line(line) for line in out) + "\n"


def as_json(records: list[dict], left_out: str | None = None, note: str | None = None) -> str:
    """The recommendations for corpora without labels as one JSON object, as ``recommend --format json``
    prints it: ``left_out``, ``note`` and one record per dataset (no NaN: a missing figure is null)."""
    from tecb_eval.reports.recommend import jsonable

    return json.dumps({"labelled": False, "left_out": left_out, "note": note,
                       "recommendations": jsonable(records)}, indent=2, ensure_ascii=False, allow_nan=False,
                      default=lambda v: v.item() if hasattr(v, "item") else str(v)) + "\n"


EXAMPLES = 3


def _split_texts(row) -> list[str] | None:
    """The texts of a row's split, in the order the grid clustered them; None where its dataset
    cannot be read here (moved, or a Hub build not at hand)."""
    from tecb_eval.benchmark import load_dataset

    location = row.get("dataset_location")
    if not isinstance(location, str):
        return None
    try:
        bench = load_dataset(location)
    except UserError:
        return None
    found = next((s for s in bench.splits if s.name == row.get("split")), None)
    return None if found is None else list(found.texts)


def pipelines_with_clusters(rows: pd.DataFrame, record: dict, runners: int = RUNNERS_UP,
                            examples: int = EXAMPLES) -> list[dict]:
    """The pick of ``record`` and its first ``runners`` runner-ups, each with every cluster of its
    newest row (largest first): its size, its top words and its first ``examples`` texts. A
    pipeline whose rows kept no assignment or topic words has no clusters (``clusters`` empty)."""
    rows = with_setting(rows)
    out = []
    texts_of: dict = {}
    for rank, pipeline in enumerate(record["pipelines"][:1 + runners]):
        mine = rows[(rows.model == pipeline["model"]) & (rows.reduction == pipeline["reduction"])
                    & (rows.algorithm == pipeline["algorithm"]) & (rows.setting == pipeline["setting"])]
        if mine.empty:
            continue
        newest = mine.iloc[-1]
        clusters = cluster_topics(newest, None)
        if clusters:
            key = (newest.get("dataset_location"), newest.get("split"))
            if key not in texts_of:
                texts_of[key] = _split_texts(newest)
            texts = texts_of[key]
            labels = decode(newest["assignment"])
            for c in clusters:
                members = np.flatnonzero(labels == c["cluster"])[:examples]
                c["examples"] = [texts[i] for i in members] if texts is not None and len(texts) == len(labels) else []
        out.append({"rank": rank, "pick": rank == 0, "model": pipeline["model"], "reduction": pipeline["reduction"],
                    "algorithm": pipeline["algorithm"], "setting": setting_words(pipeline["setting"]),
                    "score": pipeline["score"], "clusters": clusters})
    return out


def recommend_points(frame: pd.DataFrame, dataset: str) -> dict:
    """A labelled dataset whose rows are points of k / min_cluster_size ranges: the pipelines at each
    point (model, reduction, algorithm, setting) ranked by their mean AMI over splits and seeds
    (V-measure beside it: across k, V-measure grows with the number of clusters and AMI, corrected
    for chance, does not), the first with its setting, the spectrum's k and its largest clusters."""
    rows = with_setting(frame[frame.mteb_name == dataset])
    if rows.empty:
        raise UserError(f"--data {dataset}: not in the results; they hold {', '.join(sorted(frame.mteb_name.unique()))}")
    scored = rows.assign(v=pd.to_numeric(rows.v_measure, errors="coerce"),
                         a=pd.to_numeric(rows.get("ami"), errors="coerce") if "ami" in rows.columns else np.nan)
    table = scored.groupby(PIPELINE, sort=True).agg(score=("a", "mean"), v_measure=("v", "mean"),
                                                    splits=("split", "nunique")).reset_index()
    table = table[table.score.notna()].sort_values("score", ascending=False, kind="stable").reset_index(drop=True)
    if table.empty:
        raise UserError(f"{dataset}: no pipeline has an AMI in these results")
    best = table.iloc[0]
    mine = rows[(rows.model == best.model) & (rows.reduction == best.reduction) & (rows.algorithm == best.algorithm)
                & (rows.setting == best.setting)]
    labels = sorted({int(n) for n in pd.to_numeric(mine.get("n_labels"), errors="coerce").dropna()}) if (
        "n_labels" in mine.columns) else []
    return {"dataset": dataset, "criterion": "ami", "criterion_name": "AMI (labels)",
            "pipelines": table[PIPELINE + ["score", "v_measure", "splits"]].to_dict("records"), "labels": labels,
            "setting": best.setting or "default", "spectral_k": spectral_k_of(mine), "topics": largest_topics(mine.iloc[-1])}


def points_text(found: dict) -> str:
    """:func:`recommend_points`'s record as a user reads it."""
    best = found["pipelines"][0]
    out = [f"{found['dataset']} (labelled; its rows are points of k / min_cluster_size ranges: ranked by AMI, "
           "which is corrected for chance; V-measure grows with k)",
           f"  best pipeline: {best['model']}, {best['reduction']} reduction, {best['algorithm']} with "
           f"{setting_words(best['setting'])}",
           f"    AMI x100: {100 * best['score']:.2f}, V-measure x100: {100 * best['v_measure']:.2f} (means over "
           f"{best['splits']} split(s)); the labels number {', '.join(map(str, found['labels'])) or 'unknown'}"]
    if found.get("spectral_k") is not None:
        out.append(f"    the spectrum suggests about {found['spectral_k']} clusters")
    for topic in found.get("topics", []):
        out.append(f"    cluster {topic['cluster']} ({topic['size']} texts): {', '.join(topic['words'][:10])}")
    for other in found["pipelines"][1:1 + RUNNERS_UP]:
        out.append(f"  runner-up: {other['model']}, {other['reduction']} reduction, {other['algorithm']} with "
                   f"{setting_words(other['setting'])} (AMI x100 {100 * other['score']:.2f})")
    return "\n".join(one_line(line) for line in out) + "\n\n"
