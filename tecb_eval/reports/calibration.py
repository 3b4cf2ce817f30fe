"""How far each label-free criterion can be trusted: measured on labelled data, against V-measure.

On a results store of labelled datasets, every (dataset, split, seed) cell holds many pipelines
(model, reduction, algorithm, cluster setting), each with a V-measure and its label-free scores
(:mod:`tecb_eval.clustering.label_free`). Per cell and criterion (pointed so that higher is
better: Davies-Bouldin is negated):

- Spearman's rho and Kendall's tau (scipy) between the criterion and V-measure over the pipelines
  where the criterion is defined (three or more, not all equal);
- the regret: the V-measure (x100) of the best pipeline of the cell minus that of the pipeline the
  criterion ranks first: what choosing by the criterion loses.

Per dataset and over all of them: the mean over cells, with a percentile bootstrap interval over
the cells (the splits, resampled with replacement; seeded). The criterion with the highest mean rho
over all datasets (its interval's lower bound first) is the one `recommend` ranks a corpus without
labels by. The package ships the
calibration of our labelled data (:data:`PACKAGED`, written by ``bench/bench_calibration.py``).
"""

from __future__ import annotations

import json
import math
from datetime import date
from importlib import resources

import numpy as np
import pandas as pd

from tecb_data import seeding
from tecb_data.errors import UserError
from tecb_eval.clustering.criteria import CRITERIA, CRITERION_NAMES
from tecb_eval.reports.label_free import with_setting

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


def cell_statistics(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (dataset, split, seed, criterion): rho, tau, regret and the pipelines compared."""
    from scipy import stats

    rows = labelled_rows(frame)
    out = []
    for (dataset, split, seed), cell in rows.groupby(CELL, sort=True):
        v = pd.to_numeric(cell["v_measure"], errors="coerce").to_numpy(dtype=float)
        best = np.nanmax(v) if np.isfinite(v).any() else math.nan
        for criterion, sign in CRITERIA.items():
            if criterion not in cell.columns:
                continue
            x = sign * pd.to_numeric(cell[criterion], errors="coerce").to_numpy(dtype=float)
            ok = np.isfinite(x) & np.isfinite(v)
            if ok.sum() < MIN_PIPELINES or np.ptp(x[ok]) == 0 or np.ptp(v[ok]) == 0:
                continue
            rho = stats.spearmanr(x[ok], v[ok]).statistic
            tau = stats.kendalltau(x[ok], v[ok]).statistic
            picked = v[ok][int(np.argmax(x[ok]))]
            out.append({"mteb_name": dataset, "split": split, "seed": seed, "criterion": criterion,
                        "rho": float(rho), "tau": float(tau), "regret": float(100 * (best - picked)),
                        "pipelines": int(ok.sum())})
    return pd.DataFrame(out, columns=["mteb_name", "split", "seed", "criterion", "rho", "tau", "regret", "pipelines"])


def _interval(values: np.ndarray, rng: np.random.Generator, resamples: int, confidence: float) -> tuple[float, float]:
    if len(values) < 2:
        return math.nan, math.nan
    draws = rng.integers(0, len(values), size=(resamples, len(values)))
    means = values[draws].mean(axis=1)
    tail = (1 - confidence) / 2
    return float(np.quantile(means, tail)), float(np.quantile(means, 1 - tail))


def calibrate(frame: pd.DataFrame, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 42,
              confidence: float = 0.95) -> pd.DataFrame:
    """Per dataset and over all (``ALL``), per criterion: mean rho, tau and regret over the cells,
    each with its bootstrap interval, and how many cells and pipelines went in."""
    cells = cell_statistics(frame)
    if cells.empty:
        raise UserError("nothing to calibrate: the results hold no labelled dataset with three or more pipelines "
                        "per split that have both a V-measure and label-free scores (run a grid with several models "
                        "and algorithms, or a k range, on labelled data)")
    out = []
    scopes = [(name, cells[cells.mteb_name == name]) for name in sorted(cells.mteb_name.unique())] + [(ALL, cells)]
    for scope, part in scopes:
        for criterion in CRITERIA:
            mine = part[part.criterion == criterion]
            if mine.empty:
                continue
            row = {"scope": scope, "criterion": criterion, "cells": int(len(mine)),
                   "pipelines": int(mine.pipelines.median())}
            for statistic in ("rho", "tau", "regret"):
                values = mine[statistic].to_numpy(dtype=float)
                rng = seeding.rng(seed, "calibration", scope, criterion, statistic)
                low, high = _interval(values, rng, resamples, confidence)
                row.update({statistic: float(values.mean()), f"{statistic}_low": low, f"{statistic}_high": high})
            out.append(row)
    return pd.DataFrame(out)


def best_criterion(table: pd.DataFrame) -> str:
    """The criterion whose rho over all datasets has the highest lower interval bound (then the
    highest mean rho, the smaller regret): a criterion measured on few splits or pipelines has a
    wide interval and does not win on its mean alone."""
    overall = table[table.scope == ALL]
    if overall.empty:
        overall = table
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


def shown_table(table: pd.DataFrame) -> pd.DataFrame:
    """The calibration table as its readers show it: the criterion's name, each statistic with
    its interval as text, two decimals."""
    return pd.DataFrame({
        "data": table.scope, "criterion": [CRITERION_NAMES.get(c, c) for c in table.criterion],
        "Spearman rho [interval]": [f"{r:+.2f} [{lo:+.2f}, {hi:+.2f}]" for r, lo, hi in
                                    zip(table.rho, table.rho_low, table.rho_high)],
        "Kendall tau [interval]": [f"{r:+.2f} [{lo:+.2f}, {hi:+.2f}]" for r, lo, hi in
                                   zip(table.tau, table.tau_low, table.tau_high)],
        "regret x100 [interval]": [f"{r:.2f} [{lo:.2f}, {hi:.2f}]" for r, lo, hi in
                                   zip(table.regret, table.regret_low, table.regret_high)],
        "splits": table.cells, "pipelines": table.pipelines})


def format_table(table: pd.DataFrame) -> str:
    shown = shown_table(table)
    lines = ["| " + " | ".join(shown.columns) + " |", "| " + " | ".join("---" for _ in shown.columns) + " |"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in shown.itertuples(index=False, name=None)]
    return "\n".join(lines)


NOTE = ("rho, tau: rank correlation of the criterion with V-measure over the pipelines of one split, mean over "
        "splits; regret: V-measure x100 lost by taking the pipeline the criterion ranks first instead of the best; "
        "intervals: 95 % percentile bootstrap over splits. An interval of rho that holds 0: the criterion's ranking "
        "cannot be told from chance on these data.")


def document(table: pd.DataFrame, frame: pd.DataFrame, *, when: str | None = None) -> dict:
    """The calibration as the package ships it: the table, its date, the best criterion and the
    builds it was measured on (dataset fingerprints), the models and algorithms."""
    rows = labelled_rows(frame)
    builds = sorted({(str(n), str(f)) for n, f in zip(rows.mteb_name, rows.dataset_fingerprint)})
    return {
        "date": when or date.today().isoformat(),
        "best": best_criterion(table),
        "datasets": [{"mteb_name": n, "fingerprint": f} for n, f in builds],
        "models": sorted(set(map(str, rows.model))),
        "algorithms": sorted(set(map(str, rows.algorithm))),
        "reductions": sorted(set(map(str, rows.reduction))),
        "table": json.loads(table.to_json(orient="records")),
    }


def read_calibration(path=None) -> dict:
    """A calibration document: ``path`` (one `tecb-eval calibrate --out` wrote) or the packaged one."""
    try:
        if path is None:
            text = resources.files("tecb_eval").joinpath(PACKAGED).read_text(encoding="utf-8")
        else:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        found = json.loads(text)
        pd.DataFrame(found["table"])[["scope", "criterion", "rho", "rho_low", "rho_high", "regret"]]
        return found
    except FileNotFoundError:
        raise UserError(f"{path or PACKAGED}: no such calibration file; write one with `tecb-eval calibrate STORE "
                        "--out FILE`") from None
    except (ValueError, KeyError, TypeError):
        raise UserError(f"{path or PACKAGED}: not a calibration written by `tecb-eval calibrate --out`") from None
