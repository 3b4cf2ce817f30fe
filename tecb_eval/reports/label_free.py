"""The label-free scores of a results store as a table: per pipeline (model, dataset, reduction,
algorithm, cluster setting), the means over splits and seeds of each criterion
(:mod:`tecb_eval.clustering.label_free`), the clusters found and the noise. A row of a range of k
is one point of the curve the table draws down its column; a score that is undefined on a row
(None) is left out of its mean, never read as 0."""

from __future__ import annotations

import io

import pandas as pd

from tecb_eval.grid.store import read_setting
from tecb_eval.clustering.criteria import CRITERIA, CRITERION_NAMES
from tecb_eval.files import markdown_text
from tecb_eval.reports.tables import csv_safe, format_table

PIPELINE = ["model", "dataset", "reduction", "algorithm", "setting"]
# Every criterion of the registry, then stability's interval, the spectrum's number of clusters,
# the clusters found and the noise.
COLUMNS = (*CRITERIA, "stability_ari_low", "stability_ari_high", "spectral_k", "n_clusters_found", "noise_fraction")
# The ends of stability's interval (tecb_eval.clustering.stability: the reruns' 5th and 95th percentiles).
INTERVAL_NAMES = {"stability_ari_low": "ARI 5th pct", "stability_ari_high": "ARI 95th pct",
                  "spectral_k": "spectrum's k"}


def with_setting(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    if "setting" not in frame.columns:
        frame["setting"] = ""
    frame["setting"] = frame["setting"].map(lambda v: v if isinstance(v, str) else "")
    return frame


def setting_order(setting: str) -> tuple:
    point = read_setting(setting)
    return (0, "", 0) if point is None else (1, point[0], point[1])


def task_named(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each dataset named by its MTEB task (``NewsClusteringS2S``), as the tables and
    notes beside a label-free table name it, rather than by its folder (``news-s2s``)."""
    if "mteb_name" not in frame.columns:
        return frame
    return frame.assign(dataset=frame["mteb_name"].where(frame["mteb_name"].notna(), frame["dataset"]))


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
    return table.rename(columns={**CRITERION_NAMES, **INTERVAL_NAMES, "n_clusters_found": "clusters",
                                 "noise_fraction": "noise %"})


def _shown(table: pd.DataFrame) -> pd.DataFrame:
    shown = table.copy()
    for column in shown.columns:
        shown[column] = [("-" if pd.isna(v) else f"{v:.1f}" if column in ("clusters", "noise %", "Calinski-Harabasz", "spectrum's k")
                          else f"{v:.3f}") for v in shown[column]]
    shown = shown.reset_index()
    shown["setting"] = [s or "default" for s in shown["setting"]]
    return shown


def format_label_free(table: pd.DataFrame, fmt: str = "text", note: str | None = None) -> str:
    """The table as plain text, Markdown, LaTeX or CSV.

    Text, Markdown and LaTeX show 3 decimals (one for counts, noise and Calinski-Harabasz) and an
    undefined mean as '-'; CSV keeps the means as numbers, an undefined one empty, every text cell
    quoted against spreadsheet formulas.

    Args:
        table (pandas.DataFrame): A table from :func:`label_free_table`.
        fmt (str): ``"text"``, ``"md"``, ``"latex"`` or ``"csv"``.
        note (str | None): Lines above the table in Markdown (one paragraph each) and as ``%``
            comments in LaTeX; left out otherwise.

    Returns:
        str: The table as text.

    Raises:
        ValueError: An unknown ``fmt`` (a caller's mistake, not a user's).
    """
    if fmt == "text":
        return _shown(table).to_string(index=False)
    if fmt == "csv":
        buffer = io.StringIO()
        csv_safe(table.reset_index()).to_csv(buffer, index=False, float_format="%.6f", lineterminator="\n")
        return buffer.getvalue()
    if fmt == "latex":
        # The V-measure tables' LaTeX (escaping, rules); the cells are text already, shown as they are.
        return format_table(_shown(table).set_index(PIPELINE), "latex", note=note)
    if fmt != "md":
        raise ValueError(f"label-free table format {fmt!r}: text, md, latex or csv")
    shown = _shown(table)
    lines = [part for line in (note or "").splitlines() for part in (markdown_text(line), "")]
    lines += ["| " + " | ".join(map(markdown_text, shown.columns)) + " |",
              "|" + "|".join(["---"] * len(PIPELINE) + ["---:"] * (len(shown.columns) - len(PIPELINE))) + "|"]
    lines += ["| " + " | ".join(map(markdown_text, row)) + " |" for row in shown.values.tolist()]
    return "\n".join(lines) + "\n"


def label_free_points(frame: pd.DataFrame, selection: dict | None = None) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """Split a results store for the outputs that write files: the rows a V-measure table can hold,
    the label-free points of one version (rows of corpora without labels and of k ranges, chosen as
    :func:`tecb_eval.reports.versions.select` with ``points=True`` chooses them), and the names of
    the datasets without labels, whose V-measure outputs do not apply.

    Args:
        frame (pandas.DataFrame): Results rows, as :func:`tecb_eval.reports.versions.read_store` reads them.
        selection (dict | None): Which version to keep (``protocol``, ``profile``, ``seeds``,
            ``fingerprints``, ``identities``); None: the newest.

    Returns:
        tuple[pandas.DataFrame, pandas.DataFrame, list[str]]: The labelled rows outside any range, the
        label-free points of the version chosen, and the sorted MTEB names of the datasets without labels.

    Raises:
        UserError: A ``selection`` that matches none of the points, where the store holds nothing else.
    """
    from tecb_data.errors import UserError
    from tecb_eval.reports.versions import label_table_rows, range_rows, select, unlabelled_rows

    if frame.empty:
        return frame, frame, []
    unlabelled = unlabelled_rows(frame)
    name = "mteb_name" if "mteb_name" in frame.columns else "dataset"
    names = sorted(frame.loc[unlabelled, name].unique())
    labelled, _ = label_table_rows(frame)
    points = frame[unlabelled | range_rows(frame)]
    if not points.empty:
        try:
            points, _ = select(points, points=True, like_with_like=False, **(selection or {}))
        except UserError:
            if labelled.empty:
                raise
            points = points.iloc[0:0]  # the version asked for is one of the labelled rows'
    return labelled, points, names


def label_free_sections(points: pd.DataFrame) -> list[dict]:
    """The label-free table per dataset, as the report's index page shows it.

    Args:
        points (pandas.DataFrame): The label-free points of one version (:func:`label_free_points`).

    Returns:
        list[dict]: Per dataset (sorted), ``dataset``, ``columns`` (the header) and ``rows`` (the
        cells as text: 3 decimals, '-' where a mean is undefined, ``default`` for an algorithm's own
        setting).
    """
    if points.empty:
        return []
    shown = _shown(label_free_table(points))
    return [{"dataset": dataset, "columns": [c for c in shown.columns if c != "dataset"],
             "rows": rows.drop(columns="dataset").values.tolist()}
            for dataset, rows in shown.groupby("dataset", sort=True)]


def corpus_sections(points: pd.DataFrame) -> list[dict]:
    """The datasets without labels among ``points`` (rows with ``labelled`` false), each as its own
    report page shows it: the label-free table (:func:`label_free_sections`), its rows, and what
    its stability was measured with.

    Args:
        points (pandas.DataFrame): The label-free points of one version (:func:`label_free_points`).

    Returns:
        list[dict]: Per dataset (sorted): ``dataset``, ``mteb_name``, ``columns``, ``rows``,
        ``points`` (its rows, for the figures), ``stability`` (``{"runs", "fraction"}`` of its
        newest measured row, or None where no row measured it) and ``synthetic``.
    """
    if points.empty or "labelled" not in points.columns:
        return []
    unlabelled = points[points["labelled"].map(lambda v: v is False)]
    sections = {s["dataset"]: s for s in label_free_sections(unlabelled)}
    out = []
    for dataset, rows in unlabelled.groupby("dataset", sort=True):
        measured = rows[pd.to_numeric(rows["stability_ari"], errors="coerce").notna()] if (
            "stability_ari" in rows.columns) else rows.iloc[0:0]
        stability = None if measured.empty else {"runs": int(measured["stability_runs"].iloc[-1]),
                                                 "fraction": float(measured["stability_fraction"].iloc[-1])}
        name = rows["mteb_name"].iloc[0] if "mteb_name" in rows.columns else dataset
        out.append({**sections[dataset], "mteb_name": str(name), "points": rows, "stability": stability,
                    "synthetic": "synthetic" in rows.columns and bool(rows["synthetic"].map(lambda v: v is True).any())})
    return out
