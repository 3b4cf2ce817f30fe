"""Tables of the scores beyond one flat V-measure: per level of a label hierarchy, and the density
clusterings' DBCV beside their V-measure (x100 in the tables, 0..1 in the rows) and noise fraction (``tecb-eval table --levels`` and
``--density``).

Both read one version of the results (:func:`tecb_eval.reports.versions.select`), as every table
does. A row written before these scores existed, or of a dataset without label paths (Blurbs
built before recipe version 3), has no per-level scores and no DBCV: it is "not measured", left
out of the means and counted in the table, never read as 0. A DBCV that is null (one cluster,
every point noise: :mod:`tecb_eval.clustering.validity`) is counted apart from one not measured.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tecb_data.errors import UserError
from tecb_eval.clustering.registry import ALGORITHMS_REGISTRY, NOISE_ALGORITHMS

KEYS = ["model", "mteb_name", "algorithm", "reduction"]


def _noise_labels(conjunction: str) -> str:
    """The algorithms that leave texts unassigned, as the figures label them ("HDBSCAN and DBSTREAM")."""
    return conjunction.join(ALGORITHMS_REGISTRY[name].label for name in NOISE_ALGORITHMS)


def level_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (results row, level): KEYS, seed, split, level, v_measure, ami."""
    if "levels" not in frame.columns:
        return pd.DataFrame(columns=[*KEYS, "seed", "split", "level", "v_measure", "ami"])
    out = []
    for row in frame.to_dict("records"):
        levels = row.get("levels")
        if not isinstance(levels, list):
            continue  # not measured
        for level in levels:
            out.append({**{k: row[k] for k in KEYS}, "seed": row["seed"], "split": row["split"],
                        "level": int(level["level"]), "v_measure": level["v_measure"], "ami": level["ami"]})
    return pd.DataFrame(out, columns=[*KEYS, "seed", "split", "level", "v_measure", "ami"])


def levels_table(frame: pd.DataFrame, metric: str = "v_measure") -> pd.DataFrame:
    """(model, algorithm, reduction) x "<dataset> Level <n>": the mean over seeds of the mean over
    the splits (or bootstrap draws) that have that level."""
    rows = level_rows(frame)
    if rows.empty:
        raise UserError("these results hold no per-level scores: they come from Blurbs datasets built with recipe "
                        "version 3 or later (rebuild with `tecb-data build`) and runs since per-level scores exist")
    per_seed = rows.groupby([*KEYS, "level", "seed"], sort=True)[metric].agg(["mean", "size"]).reset_index()
    cells = per_seed.groupby([*KEYS, "level"], sort=True).agg(mean=("mean", "mean"), splits=("size", "max")).reset_index()
    cells["column"] = [f"{d} Level {lv}" for d, lv in zip(cells.mteb_name, cells.level)]
    means = cells.pivot_table(index=["model", "algorithm", "reduction"], columns="column", values="mean", aggfunc="first")
    return means[sorted(means.columns)]


def density_table(frame: pd.DataFrame) -> pd.DataFrame:
    """(model, dataset, algorithm, reduction) of HDBSCAN and DBSTREAM: mean V-measure and noise
    fraction over the cell's rows (x100), mean DBCV over the rows where it was computed (-1..1),
    and how many rows were: computed, null (undefined) and not measured (written before DBCV)."""
    rows = frame[frame.algorithm.isin(NOISE_ALGORITHMS)]
    if rows.empty:
        raise UserError(f"these results hold no {_noise_labels(' or ')} rows; run e.g. --config hdbscan:umap")
    rows = rows.copy()
    if "dbcv_note" not in rows.columns:
        rows["dbcv_note"] = None
    if "dbcv" not in rows.columns:
        rows["dbcv"] = np.nan
    value = pd.to_numeric(rows["dbcv"], errors="coerce")
    measured = value.notna()
    null = value.isna() & rows["dbcv_note"].notna()
    rows = rows.assign(dbcv=value, computed=measured, null=null, not_measured=~measured & ~null)
    out = rows.groupby(KEYS, sort=True).agg(
        v_measure_x100=("v_measure", lambda s: 100 * s.mean()), noise_pct=("noise_fraction", lambda s: 100 * s.mean()),
        dbcv=("dbcv", "mean"), dbcv_computed=("computed", "sum"), dbcv_null=("null", "sum"),
        dbcv_not_measured=("not_measured", "sum"))
    return out


def density_shown(table: pd.DataFrame) -> pd.DataFrame:
    """The density table for Markdown / LaTeX: the three counts as one text column
    ("computed / null / not measured"), not as figures with decimals."""
    counts = [f"{int(a)} / {int(b)} / {int(c)}" for a, b, c in
              zip(table.dbcv_computed, table.dbcv_null, table.dbcv_not_measured)]
    shown = table.drop(columns=["dbcv_computed", "dbcv_null", "dbcv_not_measured"])
    shown["dbcv rows: computed / null / not measured"] = counts
    return shown


def density_note() -> str:
    return (f"{_noise_labels(' and ')}: V-measure x100 and noise % (means over splits and seeds), DBCV (-1..1, hdbscan's "
            "validity_index on the clustered space; mean over the rows where it was computed), and how many rows "
            "were computed, null (undefined: every point noise, one cluster, a one-point cluster) or not measured "
            "(written before DBCV existed).")


def levels_note(metric: str = "v_measure") -> str:
    name = {"v_measure": "V-measure", "ami": "AMI"}[metric]
    return (f"{name} x100 per level of the label hierarchy (Level 0: top-level genre, Level 1: second-level genre): "
            "the texts that carry the level, clustered with k = its number of labels and scored against it; mean "
            "over the splits that have the level and over seeds. Rows without per-level "
            "scores (older datasets or runs) are not measured and left out.")


def zero_reason(rows: pd.DataFrame) -> str | None:
    """Why the V-measure of ``rows`` (one model, dataset and configuration) is 0, in a few words,
    or None when it is not 0 or no reason is recorded. A V-measure of 0 (on the 0..1 scale, 0.00 as
    the tables print it x100) is no bad clustering but none at all: every text left as noise (a
    density algorithm that found no dense region, e.g. DBSTREAM on PCA), or one cluster for all."""
    if rows.empty or "v_measure" not in rows.columns or round(float(rows.v_measure.mean()) * 100, 2) != 0:
        return None
    nothing = pd.Series(False, index=rows.index)
    all_noise, one = nothing.copy(), nothing.copy()
    if "noise_fraction" in rows.columns:
        all_noise |= rows.noise_fraction.astype(float).fillna(0) >= 0.999
    if "n_clusters_found" in rows.columns:
        found = rows.n_clusters_found.astype(float)
        all_noise |= found.fillna(-1) == 0
        one |= found.fillna(2) <= 1
    if all_noise.all():
        return "every text left as noise: no cluster found"
    if (all_noise | one).all():
        return "one cluster (or none) for all texts"
    return None
