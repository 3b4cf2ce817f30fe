"""The label-free scores of a results store as a table: per pipeline (model, dataset, reduction,
algorithm, cluster setting), the means over splits and seeds of each criterion
(:mod:`tecb_eval.clustering.label_free`), the clusters found and the noise. A row of a range of k
is one point of the curve the table draws down its column; a score that is undefined on a row
(None) is left out of its mean, never read as 0."""

from __future__ import annotations

import pandas as pd

from tecb_eval.clustering.cluster_counts import parse_setting
from tecb_eval.clustering.label_free import CRITERION_NAMES

PIPELINE = ["model", "dataset", "reduction", "algorithm", "setting"]
COLUMNS = ("silhouette", "calinski_harabasz", "davies_bouldin", "dbcv", "size_balance", "n_clusters_found",
           "noise_fraction")


def with_setting(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    if "setting" not in frame.columns:
        frame["setting"] = ""
    frame["setting"] = frame["setting"].map(lambda v: v if isinstance(v, str) else "")
    return frame


def setting_order(setting: str) -> tuple:
    point = parse_setting(setting)
    return (0, "", 0) if point is None else (1, point[0], point[1])


def label_free_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per pipeline, the mean of each label-free column over its splits and seeds."""
    frame = with_setting(frame)
    present = [c for c in COLUMNS if c in frame.columns]
    numeric = frame[PIPELINE].copy()
    for column in present:
        numeric[column] = pd.to_numeric(frame[column], errors="coerce")
    table = numeric.groupby(PIPELINE, sort=False)[present].mean()
    table = table.reset_index()
    table["_order"] = table["setting"].map(setting_order)
    table = table.sort_values(["dataset", "model", "reduction", "algorithm", "_order"], kind="stable")
    table = table.drop(columns="_order").set_index(PIPELINE)
    if "noise_fraction" in table.columns:
        table["noise_fraction"] = 100 * table["noise_fraction"]
    return table.rename(columns={**CRITERION_NAMES, "n_clusters_found": "clusters", "noise_fraction": "noise %"})


def format_label_free(table: pd.DataFrame) -> str:
    """The table as plain text, numbers with 3 significant decimals, an undefined mean as '-'."""
    shown = table.copy()
    for column in shown.columns:
        shown[column] = [("-" if pd.isna(v) else f"{v:.1f}" if column in ("clusters", "noise %", "Calinski-Harabasz")
                          else f"{v:.3f}") for v in shown[column]]
    shown = shown.reset_index()
    shown["setting"] = [s or "default" for s in shown["setting"]]
    return shown.to_string(index=False)
