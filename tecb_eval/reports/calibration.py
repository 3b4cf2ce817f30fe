"""How far each label-free criterion can be trusted: measured on labelled data, against AMI
(the target ``recommend`` ranks for) and V-measure.

On a results store of labelled datasets, every (dataset, split, seed) cell holds many pipelines
(model, reduction, algorithm, cluster setting), each with its AMI, V-measure and label-free scores
(the registry :mod:`tecb_eval.clustering.criteria`; consensus is computed here from the kept
assignments). Per cell and criterion (pointed so that higher is better), and per rank average of
two or more criteria (``rank:a+b+c``: the mean of their ranks over the cell's pipelines):

- Spearman's rho and Kendall's tau (scipy) between the criterion and the target over the pipelines
  where the criterion is defined (three or more, not all equal);
- the regret: the target (x100) of the best pipeline of the cell minus that of the pick, the
  pipeline the criterion ranks first among those :func:`within_cap` allows (at most the clusters
  of the partition the cell's grid agrees on most, as ``recommend`` picks): what choosing by the
  criterion loses;
- the k error: |clusters of the pick - labels| / labels, and the k ratio: clusters of the pick / labels.

Per dataset and over all of them: the mean over cells, with a percentile bootstrap interval over
the cells (one split: no interval). Which criterion ``recommend`` uses is decided leaving one
dataset out (:func:`held_out`): on each dataset, the criterion chosen on the others (lowest mean
regret) and what it lost on the one left out; the shipped file and ``recommend``'s trust line
carry those held-out figures. The candidates (:func:`candidates`) are the criteria comparable
across vector spaces (the registry's ``across_spaces``) and the rank average of every subset of two
or more of them; the space-bound criteria (silhouette, Calinski-Harabasz, Davies-Bouldin, DBCV)
are measured and shown, never chosen: their scale is the pipeline's own vector space's, so
across models and reductions they compare spaces, not partitions. The target is AMI: V-measure is
not corrected for chance and grows with the number of clusters, so a pick tuned to it learns "more
clusters" (docs/unlabelled.md).
"""

from __future__ import annotations

import itertools
import json
import math
from datetime import date
from importlib import resources

import numpy as np
import pandas as pd

from tecb_data import inputs, seeding
from tecb_data.errors import UserError
from tecb_eval.clustering.consensus import keeps_assignments
from tecb_eval.clustering.criteria import ACROSS_SPACES, CONSENSUS_CAP, CRITERIA, CRITERION_NAMES, K_CAPS, NO_CAP
from tecb_eval.reports.label_free import with_setting

TARGETS = {"ami": "AMI", "v_measure": "V-measure"}
TARGET = "ami"
COMBINED = "rank:"
PIPELINE = ["model", "reduction", "algorithm", "setting"]
CELL = ["mteb_name", "split", "seed"]
ALL = "all datasets"
PACKAGED = "data/calibration.json"
DEFAULT_RESAMPLES = 1000
MIN_PIPELINES = 3


def labelled_rows(frame: pd.DataFrame) -> pd.DataFrame:
    if "labelled" in frame.columns:
        frame = frame[frame["labelled"].map(lambda v: v is not False)]
    return with_setting(frame)


def combination(names) -> str:
    return COMBINED + "+".join(names)


def parts(name: str) -> tuple[str, ...]:
    """The criteria of a rank average (``rank:a+b``, ``rank:a+b+c``, ...), or the one criterion."""
    return tuple(name[len(COMBINED):].split("+")) if name.startswith(COMBINED) else (name,)


def direction(name: str) -> int:
    return 1 if name.startswith(COMBINED) else CRITERIA[name]


def title(name: str) -> str:
    """A criterion's or a rank average's name as tables show it."""
    if name.startswith(COMBINED):
        names = [CRITERION_NAMES.get(p, p) for p in parts(name)]
        return "rank average of " + (", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0])
    return CRITERION_NAMES.get(name, name)


def pointed_scores(cell: pd.DataFrame, name: str) -> np.ndarray:
    """The criterion ``name`` over the rows of ``cell``, higher better; a rank average ranks each
    part over the rows where every part is defined (NaN elsewhere)."""
    from scipy import stats

    if not name.startswith(COMBINED):
        return CRITERIA[name] * pd.to_numeric(cell[name], errors="coerce").to_numpy(dtype=float)
    values = [pointed_scores(cell, p) for p in parts(name)]
    ok = np.all([np.isfinite(v) for v in values], axis=0)
    out = np.full(len(cell), np.nan)
    if ok.any():
        out[ok] = np.mean([stats.rankdata(v[ok]) for v in values], axis=0)
    return out


def most_agreed(clusters, consensus) -> int | None:
    """The index of the partition that agrees most with the others of the same texts (the highest
    ``consensus``; ties: the fewer ``clusters``, then the first); None where no partition has a
    consensus and a number of clusters."""
    clusters = np.asarray(clusters, dtype=float)
    consensus = np.asarray(consensus, dtype=float)
    ok = np.flatnonzero(np.isfinite(consensus) & np.isfinite(clusters))
    if not len(ok):
        return None
    top = ok[consensus[ok] == consensus[ok].max()]
    return int(top[int(np.argmin(clusters[top]))])


def consensus_clusters(clusters, consensus) -> float:
    """The number of clusters of the partition that agrees most with the others of the same texts
    (:func:`most_agreed`): the grid's own answer to "how many clusters", read from the ensemble
    rather than from one vector space. NaN where no partition has a consensus.

    Args:
        clusters (Sequence[float]): Each partition's number of clusters found.
        consensus (Sequence[float]): Each partition's consensus (NaN where undefined).

    Returns:
        float: The clusters of the most agreed-on partition, or NaN.
    """
    index = most_agreed(clusters, consensus)
    return math.nan if index is None else float(np.asarray(clusters, dtype=float)[index])


def within_cap(clusters, consensus, k_cap: str) -> np.ndarray:
    """Which partitions the pick may be: those with at most :func:`consensus_clusters` clusters
    (``k_cap`` ``"consensus"``), or every one (``"none"``, or where no consensus is defined). The
    criteria that rank best against AMI on our data favour many clusters; the ensemble's most
    agreed-on partition bounds them (docs/unlabelled.md)."""
    clusters = np.asarray(clusters, dtype=float)
    cap = consensus_clusters(clusters, consensus) if k_cap == CONSENSUS_CAP else math.nan
    return np.ones(len(clusters), dtype=bool) if math.isnan(cap) else ~(clusters > cap)


def held_criteria(frame: pd.DataFrame) -> list[str]:
    """Every criterion of the registry that the rows hold a score of, in registry order."""
    return [c for c in CRITERIA if c in frame.columns and pd.to_numeric(frame[c], errors="coerce").notna().any()]


def candidate(name: str) -> bool:
    """Whether calibration may choose ``name``: a criterion comparable across vector spaces, or a
    rank average of two or more such (a space-bound part makes the whole space-bound)."""
    names = parts(name)
    return all(p in ACROSS_SPACES for p in names) and (len(names) >= 2 or not name.startswith(COMBINED))


def candidates(frame: pd.DataFrame) -> list[str]:
    """What calibration chooses from: every criterion comparable across vector spaces that the rows
    hold, and the rank average of every subset of two or more of them (registry order within a
    name, smaller subsets first)."""
    single = [c for c in held_criteria(frame) if c in ACROSS_SPACES]
    return single + [combination(subset) for size in range(2, len(single) + 1)
                     for subset in itertools.combinations(single, size)]


def measured(frame: pd.DataFrame) -> list[str]:
    """What calibration measures: the candidates, and each space-bound criterion the rows hold, alone
    (shown in the tables as information, never chosen)."""
    return [c for c in held_criteria(frame) if c not in ACROSS_SPACES] + candidates(frame)


def require_label_free(frame: pd.DataFrame, where) -> None:
    """One line naming ``where`` and the option to rerun with, where the rows hold labelled
    pipelines but not one label-free score: a labelled grid computes them only when asked."""
    labelled = labelled_rows(frame)
    if len(labelled) and not held_criteria(labelled) and not keeps_assignments(labelled):
        raise UserError(f"{where}: nothing to calibrate: the labelled rows hold no label-free scores (a labelled run "
                        "computes them only when asked); run the grid again with --label-free (its stored cells are "
                        "scored again from the caches)")


def cell_statistics(frame: pd.DataFrame, target: str = TARGET, k_cap: str = CONSENSUS_CAP) -> pd.DataFrame:
    """One row per (dataset, split, seed, criterion): rho, tau, regret, k error, k ratio (the pick's
    clusters / labels) and the pipelines compared; every criterion :func:`measured` names. rho and
    tau compare the criterion's ranking of every pipeline with the target's; the pick (what regret
    and k measure) is the criterion's best among the partitions :func:`within_cap` allows."""
    from scipy import stats

    from tecb_eval.clustering.consensus import with_consensus

    rows = with_consensus(labelled_rows(frame))
    out = []
    names = measured(rows)
    for (dataset, split, seed), cell in rows.groupby(CELL, sort=True):
        v = pd.to_numeric(cell[target], errors="coerce").to_numpy(dtype=float)
        best = np.nanmax(v) if np.isfinite(v).any() else math.nan
        found = pd.to_numeric(cell.get("n_clusters_found"), errors="coerce").to_numpy(dtype=float) if (
            "n_clusters_found" in cell.columns) else np.full(len(cell), np.nan)
        labels = pd.to_numeric(cell.get("n_labels"), errors="coerce").to_numpy(dtype=float) if (
            "n_labels" in cell.columns) else np.full(len(cell), np.nan)
        agreed = pd.to_numeric(cell["consensus"], errors="coerce").to_numpy(dtype=float) if (
            "consensus" in cell.columns) else np.full(len(cell), np.nan)
        allowed = within_cap(found, agreed, k_cap)
        for criterion in names:
            x = pointed_scores(cell, criterion)
            ok = np.isfinite(x) & np.isfinite(v)
            if ok.sum() < MIN_PIPELINES or np.ptp(x[ok]) == 0 or np.ptp(v[ok]) == 0:
                continue
            rho = stats.spearmanr(x[ok], v[ok]).statistic
            tau = stats.kendalltau(x[ok], v[ok]).statistic
            pickable = ok & allowed
            if not pickable.any():
                continue
            first = int(np.flatnonzero(pickable)[int(np.argmax(x[pickable]))])
            out.append({"mteb_name": dataset, "split": split, "seed": seed, "criterion": criterion,
                        "rho": float(rho), "tau": float(tau), "regret": float(100 * (best - v[first])),
                        "k_error": float(abs(found[first] - labels[first]) / labels[first]) if labels[first] > 0
                        else math.nan,
                        "k_ratio": float(found[first] / labels[first]) if labels[first] > 0 else math.nan,
                        "pipelines": int(ok.sum())})
    return pd.DataFrame(out, columns=["mteb_name", "split", "seed", "criterion", "rho", "tau", "regret", "k_error",
                                      "k_ratio", "pipelines"])


def missing_criteria(frame: pd.DataFrame) -> list[str]:
    """A line for each kind of criterion the labelled rows cannot calibrate, and what run gives it."""
    from tecb_eval.clustering.criteria import needing

    def has(name: str) -> bool:
        return name in frame.columns and pd.to_numeric(frame[name], errors="coerce").notna().any()

    out = []
    texts = [c for c in needing("texts") if not has(c.name)]
    if texts:
        out.append(f"note: {', '.join(c.title for c in texts)} not calibrated: the labelled run had no topic words; "
                   "run it again with --label-free (a labelled run leaves them out unless asked)")
    if not keeps_assignments(frame):
        out.append("note: consensus not calibrated: the rows keep no cluster assignments; run the grid again with "
                   "--label-free")
    if not any(has(c.name) for c in needing("reruns")):
        out.append("note: stability not calibrated: run the labelled grid with --stability N to calibrate it")
    return out


def spectrum_errors(frame: pd.DataFrame) -> pd.DataFrame:
    """Per dataset: the spectrum's number of clusters (its median over the cells) and |k - labels| / labels."""
    rows = labelled_rows(frame)
    if "spectral_k" not in rows.columns:
        return pd.DataFrame(columns=["mteb_name", "spectral_k", "labels", "k_error"])
    rows = rows.assign(spectral_k=pd.to_numeric(rows.spectral_k, errors="coerce"),
                       n_labels=pd.to_numeric(rows.n_labels, errors="coerce"))
    rows = rows[rows.spectral_k.notna() & rows.n_labels.notna()]
    rows = rows.assign(k_error=(rows.spectral_k - rows.n_labels).abs() / rows.n_labels)
    return rows.groupby("mteb_name", sort=True).agg(spectral_k=("spectral_k", "median"), labels=("n_labels", "median"),
                                                    k_error=("k_error", "mean")).reset_index()


def choose(cells: pd.DataFrame) -> str:
    """The candidate (:func:`candidate`: a criterion comparable across vector spaces, or a rank
    average of such) with the lowest mean regret over the datasets of ``cells`` (each dataset's mean
    over its cells, so a dataset of many splits does not outweigh the others), then the higher mean
    rho, then the name; only those measured on every dataset of ``cells``."""
    datasets = cells.mteb_name.nunique()
    cells = cells[cells.criterion.map(candidate)]
    per = cells.groupby(["criterion", "mteb_name"]).agg(regret=("regret", "mean"), rho=("rho", "mean")).reset_index()
    summary = per.groupby("criterion").agg(regret=("regret", "mean"), rho=("rho", "mean"), n=("mteb_name", "nunique"))
    summary = summary[summary.n == datasets].reset_index()
    if summary.empty:
        raise UserError("nothing to choose from: no criterion comparable across vector spaces ("
                        f"{', '.join(ACROSS_SPACES)}) has scores on every labelled dataset; run the grid again with "
                        "--label-free")
    ranked = summary.sort_values(["regret", "rho", "criterion"], ascending=[True, False, True], kind="stable")
    return str(ranked.iloc[0].criterion)


def geometric_mean(values) -> float:
    """The geometric mean of the positive finite ``values``; NaN where there is none."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values) & (values > 0)]
    return float(np.exp(np.mean(np.log(values)))) if len(values) else math.nan


def held_out(cells: pd.DataFrame) -> pd.DataFrame:
    """Leave one dataset out: per dataset, the criterion :func:`choose` picks on the other datasets,
    and its mean regret, rho and k error on the dataset left out, and the geometric mean of its
    pick's clusters / labels there (the k ratio: 2 is twice the labels, 0.5 half; NaN where it is
    undefined there)."""
    out = []
    names = sorted(cells.mteb_name.unique())
    for dataset in names:
        others = cells[cells.mteb_name != dataset]
        if others.empty:
            continue
        chosen = choose(others)
        mine = cells[(cells.mteb_name == dataset) & (cells.criterion == chosen)]
        out.append({"held_out": dataset, "chosen": chosen, "chosen_on": ", ".join(n for n in names if n != dataset),
                    "regret": float(mine.regret.mean()) if len(mine) else math.nan,
                    "rho": float(mine.rho.mean()) if len(mine) else math.nan,
                    "k_error": float(mine.k_error.mean()) if len(mine) else math.nan,
                    "k_ratio": geometric_mean(mine.k_ratio) if "k_ratio" in mine.columns else math.nan,
                    "cells": int(len(mine))})
    return pd.DataFrame(out, columns=["held_out", "chosen", "chosen_on", "regret", "rho", "k_error", "k_ratio",
                                      "cells"])


def _interval(values: np.ndarray, rng: np.random.Generator, resamples: int, confidence: float) -> tuple[float, float]:
    if len(values) < 2:
        return math.nan, math.nan  # one split: no interval (shown in words, written as null)
    draws = rng.integers(0, len(values), size=(resamples, len(values)))
    means = values[draws].mean(axis=1)
    tail = (1 - confidence) / 2
    return float(np.quantile(means, tail)), float(np.quantile(means, 1 - tail))


def calibrate(frame: pd.DataFrame, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 42,
              confidence: float = 0.95, target: str = TARGET, cells: pd.DataFrame | None = None,
              k_cap: str = CONSENSUS_CAP) -> pd.DataFrame:
    """Per dataset and over all (``ALL``), per criterion: mean rho, tau, regret and k error over the
    cells (rho, tau and regret with their bootstrap interval), and how many cells and pipelines went in."""
    cells = cell_statistics(frame, target, k_cap) if cells is None else cells
    if cells.empty:
        raise UserError("nothing to calibrate: the results hold no labelled dataset with three or more pipelines "
                        "per split that have both a V-measure and label-free scores (run a grid with several models "
                        "and algorithms, or a k range, on labelled data)")
    out = []
    scopes = [(name, cells[cells.mteb_name == name]) for name in sorted(cells.mteb_name.unique())] + [(ALL, cells)]
    for scope, part in scopes:
        for criterion in dict.fromkeys(cells.criterion):
            mine = part[part.criterion == criterion]
            if mine.empty:
                continue
            row = {"scope": scope, "criterion": criterion, "cells": int(len(mine)),
                   "pipelines": int(mine.pipelines.median()), "target": target,
                   "k_error": float(mine.k_error.mean()),
                   "k_ratio": geometric_mean(mine.k_ratio) if "k_ratio" in mine.columns else math.nan}
            for statistic in ("rho", "tau", "regret"):
                values = mine[statistic].to_numpy(dtype=float)
                rng = seeding.rng(seed, "calibration", scope, criterion, statistic)
                low, high = _interval(values, rng, resamples, confidence)
                row.update({statistic: float(values.mean()), f"{statistic}_low": low, f"{statistic}_high": high})
            out.append(row)
    return pd.DataFrame(out)


def best_criterion(table: pd.DataFrame) -> str:
    """The single criterion comparable across vector spaces whose rho over all datasets has the
    highest lower interval bound (then the highest mean rho, the smaller regret): a criterion
    measured on few splits or pipelines has a wide interval and does not win on its mean alone."""
    overall = table[(table.scope == ALL) & table.criterion.isin(ACROSS_SPACES)]
    if overall.empty:
        overall = table[table.criterion.map(candidate)]
    if overall.empty:
        raise UserError("nothing to choose from: no criterion comparable across vector spaces ("
                        f"{', '.join(ACROSS_SPACES)}) in the calibration; run the grid again with --label-free")
    ranked = overall.assign(floor=overall.rho_low.fillna(-2.0)).sort_values(
        ["floor", "rho", "regret"], ascending=[False, False, True], kind="stable")
    return str(ranked.iloc[0].criterion)


def weak(row) -> bool:
    """Whether the interval of rho holds 0 (or there is none): the criterion's ranking cannot be told
    from chance on these data."""
    low, high = row["rho_low"], row["rho_high"]
    return not (isinstance(low, float) and math.isfinite(low)) or low <= 0 <= high


def against(row) -> bool:
    """Whether the whole interval of rho lies below 0: the criterion ranks pipelines against V-measure
    on these data, so the pipeline it picks tends to be one of the worse."""
    high = row["rho_high"]
    return isinstance(high, float) and math.isfinite(high) and high < 0


def interval_text(value, low, high, signed: bool = True) -> str:
    """A mean with its interval, or the words for a mean without one."""
    form = "{:+.2f}" if signed else "{:.2f}"
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return form.format(value) + " (one split: no interval)"
    return f"{form.format(value)} [{form.format(low)}, {form.format(high)}]"


def _number(value):
    return math.nan if value is None else float(value)


def shown_table(table: pd.DataFrame) -> pd.DataFrame:
    """The calibration table as its readers show it: the criterion's name, each statistic with
    its interval as text, two decimals; an interval that cannot be formed says so."""
    target = TARGETS.get(str(table["target"].iloc[0]), "V-measure") if "target" in table.columns and len(table) else (
        "V-measure")
    get = {c: [_number(v) for v in table[c]] if c in table.columns else [math.nan] * len(table)
           for c in ("rho", "rho_low", "rho_high", "tau", "tau_low", "tau_high", "regret", "regret_low",
                     "regret_high", "k_error", "k_ratio")}
    return pd.DataFrame({
        "data": table.scope, "criterion": [title(c) for c in table.criterion],
        f"Spearman rho with {target} [interval]": [interval_text(*v) for v in zip(get["rho"], get["rho_low"],
                                                                                  get["rho_high"])],
        "Kendall tau [interval]": [interval_text(*v) for v in zip(get["tau"], get["tau_low"], get["tau_high"])],
        f"regret {target} x100 [interval]": [interval_text(*v, signed=False) for v in
                                              zip(get["regret"], get["regret_low"], get["regret_high"])],
        "k error": ["-" if not math.isfinite(e) else f"{e:.2f}" for e in get["k_error"]],
        "k ratio": ["-" if not math.isfinite(e) else f"{e:.2f}" for e in get["k_ratio"]],
        "splits": table.cells, "pipelines": table.pipelines})


def format_table(table: pd.DataFrame) -> str:
    shown = shown_table(table)
    lines = ["| " + " | ".join(shown.columns) + " |", "| " + " | ".join("---" for _ in shown.columns) + " |"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in shown.itertuples(index=False, name=None)]
    return "\n".join(lines)


def format_held_out(table: pd.DataFrame, target: str = TARGET) -> str:
    """The leave-one-dataset-out table as Markdown."""
    header = (f"| held out | chosen on the others | regret {TARGETS[target]} x100 | Spearman rho | k error | "
              "k ratio (clusters / labels) | splits |")
    lines = [header, "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for row in table.itertuples(index=False):
        ratio = getattr(row, "k_ratio", math.nan)
        lines.append(f"| {row.held_out} | {title(row.chosen)} | {row.regret:.2f} | {row.rho:+.2f} | "
                     f"{row.k_error:.2f} | {'-' if not math.isfinite(ratio) else f'{ratio:.2f}'} | {row.cells} |")
    return "\n".join(lines)


NOTE = ("rho, tau: rank correlation of the criterion with the target (AMI, or V-measure where named) over the "
        "pipelines of one split, mean over splits; regret: the target x100 lost by taking the pipeline the criterion "
        "ranks first instead of the best; k error: |clusters of that pipeline - labels| / labels; k ratio: the "
        "geometric mean of clusters / labels; intervals: 95 % "
        "percentile bootstrap over splits (one split: no interval). In-sample figures: the held-out table says what "
        "a choice made on the other datasets lost. An interval of rho that holds 0: the criterion's ranking cannot "
        "be told from chance on these data. Only criteria comparable across vector spaces, alone or as rank "
        "averages, are chosen; silhouette, Calinski-Harabasz, Davies-Bouldin and DBCV are shown, never chosen (their "
        "scale is each pipeline's own vector space's).")


def document(table: pd.DataFrame, frame: pd.DataFrame, *, when: str | None = None,
             cells: pd.DataFrame | None = None, v_table: pd.DataFrame | None = None,
             k_cap: str = CONSENSUS_CAP) -> dict:
    """The calibration as the package ships it: the table (target AMI), the held-out figures, the
    criterion chosen on every dataset (``best``), the bound on the pick's clusters its figures were
    measured with (``k_cap``: ``cells`` must have been computed with it; ``"none"`` where the rows
    keep no assignments, so no consensus bounds anything), its date, the builds it was measured on
    (dataset fingerprints), the splits, the models and algorithms, and the table against V-measure."""
    rows = labelled_rows(frame)
    builds = sorted({(str(n), str(f)) for n, f in zip(rows.mteb_name, rows.dataset_fingerprint)})
    cells = cell_statistics(frame, k_cap=k_cap) if cells is None else cells
    out = held_out(cells)
    chosen = choose(cells) if not cells.empty else best_criterion(table)
    return {
        "date": when or date.today().isoformat(),
        "target": str(table["target"].iloc[0]) if "target" in table.columns and len(table) else TARGET,
        "best": chosen,
        "k_cap": k_cap if keeps_assignments(rows) else NO_CAP,
        # What ``best`` and each held-out choice were chosen from (the rule: :func:`candidates`).
        "candidates": [c for c in dict.fromkeys(cells.criterion) if candidate(c)],
        "held_out": json.loads(out.to_json(orient="records")),
        "datasets": [{"mteb_name": n, "fingerprint": f} for n, f in builds],
        "splits": {str(n): sorted(map(str, g.split.unique())) for n, g in rows.groupby("mteb_name", sort=True)},
        "spectrum": json.loads(spectrum_errors(frame).to_json(orient="records")),
        "models": sorted(set(map(str, rows.model))),
        "algorithms": sorted(set(map(str, rows.algorithm))),
        "reductions": sorted(set(map(str, rows.reduction))),
        "table": json.loads(table.to_json(orient="records")),
        **({"table_v_measure": json.loads(v_table.to_json(orient="records"))} if v_table is not None else {}),
    }


# The document's rows as ``shown_table``, ``weak`` and ``recommend`` read them.
_STATISTICS = ("rho", "rho_low", "rho_high", "tau", "tau_low", "tau_high", "regret", "regret_low", "regret_high")
_REWRITE = "write one with `tecb-eval calibrate STORE --out FILE`"


def trust_of(found: dict, criterion: str) -> dict | None:
    """The held-out figures of the way ``criterion`` was chosen, in a calibration document: per
    dataset left out, what the choice made on the others (``criterion`` itself, or another
    criterion: ``same`` says which) lost there; None where the document holds none or
    ``criterion`` is not the document's choice (a criterion the user named was not chosen)."""
    rows = found.get("held_out", [])
    if not rows or criterion != found.get("best"):
        return None
    return {"rows": [{**r, "same": r.get("chosen") == criterion} for r in rows]}


def read_calibration(path=None) -> dict:
    """A calibration document: ``path`` (one `tecb-eval calibrate --out` wrote) or the packaged one.
    A named file is read as every input of a user's is (a regular file, bounded:
    :func:`tecb_data.inputs.read_text`) and its content checked (:func:`check_calibration`), so
    that a wrong file is one line naming it."""
    if path is None:
        text = resources.files("tecb_eval").joinpath(PACKAGED).read_text(encoding="utf-8")
        return check_calibration(json.loads(text), PACKAGED)
    what = f"--calibration {path}"
    try:
        text = inputs.read_text(path, what=what)
    except FileNotFoundError:
        raise UserError(f"{what}: no such calibration file; {_REWRITE}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{what}: not UTF-8 text (byte {exc.start}), not a calibration; {_REWRITE}") from None
    except OSError as exc:
        raise UserError(f"{what}: cannot read it ({exc.strerror or exc}); {_REWRITE}") from None
    try:
        found = json.loads(text)
    except RecursionError:
        raise UserError(f"{what}: JSON nested deeper than Python reads, not a calibration; {_REWRITE}") from None
    except ValueError as exc:
        raise UserError(f"{what}: not JSON ({exc}); {_REWRITE}") from None
    return check_calibration(found, what)


def check_calibration(found, what: str) -> dict:
    """``found`` if it is a calibration document as :func:`document` writes it (the keys and types
    its readers use, ``best`` and every row's criterion known), else a UserError naming ``what``."""
    def wrong(problem: str) -> UserError:
        return UserError(f"{what}: not a calibration written by `tecb-eval calibrate --out` ({problem}); {_REWRITE}")

    def number(value) -> bool:
        return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))

    if not isinstance(found, dict):
        raise wrong(f"a JSON {type(found).__name__}, expected an object")
    def known(name) -> bool:  # a criterion, or a rank average of criteria (``rank:a+b``)
        return isinstance(name, str) and all(part in CRITERIA for part in parts(name))

    best = found.get("best")
    if not isinstance(best, str):
        raise wrong(f"best is {best!r}, expected a criterion's name")
    unknown = [part for part in parts(best) if part not in CRITERIA]
    if unknown:
        raise UserError(f"{what}: its chosen criterion {best!r} is not one this tecb knows ({', '.join(unknown)}); "
                        "write the file again with this tecb's `tecb-eval calibrate STORE --out FILE`")
    if found.get("k_cap", NO_CAP) not in K_CAPS:
        raise wrong(f"k_cap is {found.get('k_cap')!r}, expected one of {', '.join(K_CAPS)}")
    table = found.get("table")
    if not isinstance(table, list) or not table:
        raise wrong("no table of criteria")
    for n, row in enumerate(table, start=1):
        if not isinstance(row, dict):
            raise wrong(f"table row {n} is not an object")
        if not isinstance(row.get("scope"), str):
            raise wrong(f"table row {n}: scope is not text")
        if not known(row.get("criterion")):
            raise wrong(f"table row {n}: criterion {row.get('criterion')!r} is none of {', '.join(CRITERIA)}")
        bad = next((k for k in _STATISTICS if not number(row.get(k))), None)
        if bad is not None:
            raise wrong(f"table row {n}: {bad} is {row.get(bad)!r}, expected a number")
        bad = next((k for k in ("cells", "pipelines") if type(row.get(k)) is not int), None)
        if bad is not None:
            raise wrong(f"table row {n}: {bad} is {row.get(bad)!r}, expected a whole number")
    if not isinstance(found.get("date", ""), str):
        raise wrong("date is not text")
    datasets = found.get("datasets", [])
    if not isinstance(datasets, list) or not all(isinstance(d, dict) and isinstance(d.get("mteb_name"), str)
                                                 for d in datasets):
        raise wrong("datasets is not a list of {mteb_name: ...}")
    held_out = found.get("held_out", [])
    if not isinstance(held_out, list) or not all(isinstance(r, dict) for r in held_out):
        raise wrong("held_out is not a list of objects")
    for n, row in enumerate(held_out, start=1):
        if not known(row.get("chosen")) or not isinstance(row.get("held_out"), str):
            raise wrong(f"held_out row {n}: chosen {row.get('chosen')!r} or the dataset left out is not known")
        bad = next((k for k in ("regret", "rho", "k_error") if not number(row.get(k))), None)
        if bad is not None:
            raise wrong(f"held_out row {n}: {bad} is {row.get(bad)!r}, expected a number")
    return found
