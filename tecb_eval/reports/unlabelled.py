"""`tecb-eval recommend` on a corpus without labels: pipelines ranked by a label-free criterion.

The criterion is the one the calibration found best (:func:`tecb_eval.reports.calibration.best_criterion`:
the packaged calibration of our labelled German data, or one the user wrote on their own labelled
store), or the one named. Each pipeline (model, reduction, algorithm, cluster setting: the k or
HDBSCAN's min_cluster_size of a range) is scored by the criterion's mean over its splits and seeds;
the first is recommended with its calibration (rho with its interval, the regret, on which data)
and a BERTopic configuration at that setting. Where the calibration is weak (rho's interval holds
0) the text says so and lists the runner-up pipelines beside it.
"""

from __future__ import annotations

import json
import math

import pandas as pd

from tecb_data.errors import UserError
from tecb_eval.clustering.cluster_counts import parse_setting
from tecb_eval.clustering.label_free import CRITERIA, CRITERION_NAMES
from tecb_eval.files import one_line
from tecb_eval.reports import calibration as calib
from tecb_eval.reports.label_free import with_setting
from tecb_eval.reports.recommend import Recommendation, bertopic_snippet

PIPELINE = ["model", "reduction", "algorithm", "setting"]
RUNNERS_UP = 3


def ranking(rows: pd.DataFrame, criterion: str) -> pd.DataFrame:
    """The pipelines of one dataset, best first by ``criterion`` (its mean over splits and seeds,
    pointed so that higher is better); a pipeline where it is undefined everywhere is left out."""
    rows = with_setting(rows)
    if criterion not in rows.columns:
        if criterion.startswith("stability"):
            raise UserError(f"--criterion {criterion}: the results hold no {CRITERION_NAMES[criterion]} scores; run "
                            "the grid again with --stability N (e.g. 5) to measure it")
        raise UserError(f"--criterion {criterion}: the results hold no {CRITERION_NAMES[criterion]} scores "
                        "(rows written before label-free scores, or no density clustering for DBCV); rerun the grid")
    scored = rows.assign(score=pd.to_numeric(rows[criterion], errors="coerce"))
    table = scored.groupby(PIPELINE, sort=True).agg(score=("score", "mean"), splits=("split", "nunique"))
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
    row = mine.iloc[0].to_dict()
    row["weak"] = calib.weak(row)
    row["against"] = calib.against(row)
    return row


def recommend_unlabelled(frame: pd.DataFrame, dataset: str, *, criterion: str | None = None,
                         calibration: dict) -> dict:
    """The recommendation for the corpus ``dataset`` (an MTEB name) as a record: the criterion, its
    calibration, the ranked pipelines, and the BERTopic snippet of the first."""
    if criterion is not None and criterion not in CRITERIA:
        raise UserError(f"--criterion {criterion}: choose one of {', '.join(CRITERIA)}")
    chosen = criterion or calibration["best"]
    rows = frame[frame.mteb_name == dataset]
    ranked = ranking(rows, chosen)
    best = ranked.iloc[0]
    of_best = with_setting(rows)
    of_best = of_best[(of_best.model == best.model) & (of_best.reduction == best.reduction)
                      & (of_best.algorithm == best.algorithm) & (of_best.setting == best.setting)]
    newest = of_best.iloc[-1]
    point = parse_setting(best.setting)
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
    return {"dataset": dataset, "criterion": chosen, "criterion_name": CRITERION_NAMES[chosen],
            "named_by_user": criterion is not None, "calibration": _calibration_of(calibration, chosen),
            "best_criterion": calibration["best"],
            "calibrated_on": calibration.get("datasets", []), "calibration_date": calibration.get("date"),
            "pipelines": ranked[PIPELINE + ["score", "splits"]].to_dict("records"),
            "noise_fraction": r.noise_fraction, "stability": stability_of(of_best), "bertopic": r.bertopic,
            "setting": best.setting or "default"}


def runners_up_shown(calibration: dict) -> int:
    """How many runner-ups ``recommend`` lists after its pick: more where the criterion's
    calibration is missing, weak or against V-measure (its pick is then a guess)."""
    return RUNNERS_UP if calibration and not (calibration.get("weak") or calibration.get("against")) else RUNNERS_UP + 2


def stability_pipelines(frame: pd.DataFrame, calibration: dict | None = None) -> set[tuple] | None:
    """The pipelines whose stability ``tecb-eval run`` measures by default: on each corpus without
    labels in ``frame``, the pick and the runner-ups :func:`recommend_unlabelled` lists, as
    ``(dataset_fingerprint, model, reduction, algorithm, setting)``. None (every cell) where the
    calibration's best criterion is stability itself, which the grid cannot rank by before it
    has measured it. ``calibration``: the packaged one unless given."""
    from tecb_eval.reports.versions import unlabelled_rows

    found = calib.read_calibration() if calibration is None else calibration
    if str(found["best"]).startswith("stability"):
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


def _setting_words(setting: str) -> str:
    point = parse_setting(setting)
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
           f"{_setting_words(best['setting'])}",
           f"    {found['criterion_name']}: {best['score']:.4f} (mean over {best['splits']} split(s)); noise "
           f"fraction {found['noise_fraction']:.2f}",
           "    " + stability_words(found.get("stability"))]
    if c:
        out.append(f"  calibration ({found['calibration_date']}, on {on}): Spearman rho {c['rho']:+.2f} "
                   f"[{c['rho_low']:+.2f}, {c['rho_high']:+.2f}] with V-measure; regret {c['regret']:.2f} V-measure "
                   f"x100 points against the best pipeline")
        if c["weak"]:
            out.append("  weak: the interval of rho holds 0, so on labelled data this criterion's ranking could not "
                       "be told from chance; treat the pick as a guess and try the runner-ups too")
        elif c["against"]:
            out.append(f"  against: the whole interval of rho lies below 0, so on labelled data this criterion ranked "
                       f"pipelines against V-measure and its pick tends to be one of the worse; rank by the "
                       f"best-calibrated criterion instead (`--criterion {found['best_criterion']}`)")
    else:
        out.append(f"  calibration: none for {found['criterion_name']} on {on}; its ranking is untested")
    for other in found["pipelines"][1:1 + runners_up_shown(c)]:
        out.append(f"  runner-up: {other['model']}, {other['reduction']} reduction, {other['algorithm']} with "
                   f"{_setting_words(other['setting'])} ({other['score']:.4f})")
    out += ["  BERTopic:", *("    " + line if line else "" for line in found["bertopic"].splitlines()), ""]
    return "\n".join(one_line(line) for line in out) + "\n"
