"""Tables, exports and plots from the results table.

- :func:`table2`: model x dataset, k-means on the embeddings (the paper's Table 2);
- :func:`table3`: (algorithm, reduction) x dataset, averaged over models (the paper's Table 3);
- :func:`paper_table2`, :func:`paper_table3`: the paper's Tables 2 and 3 from the authors' CSV
  (:func:`read_reference`) over the paper's model set :data:`PAPER_MODELS`; :func:`printed` gives
  their figures as printed (x100, two decimals);
- :func:`beside_paper`: one of our tables with the paper's row under each of our rows;
- :func:`reference_layout`: the authors' full-results CSV layout, one row per model x configuration;
- MTEB's results layout: :func:`tecb_eval.mteb.results.write_results`;
- plots: Table 3 as bars, ours against the paper's, and the paper's Figure 1 (a 2-D UMAP scatter
  coloured by label, :mod:`tecb_eval.reports.figures`).

V-measures are shown x100 in the Markdown/LaTeX tables as in the paper, and kept 0..1 in CSVs.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tecb_data import inputs
from tecb_data.errors import UserError
from tecb_eval.clustering.algorithms import PAPER_CONFIGURATIONS, REFERENCE_REDUCTIONS
from tecb_eval.clustering.registry import table2_rows
from tecb_eval.files import csv_cell, markdown_text, one_line, write_text
from tecb_eval.reports import working
from tecb_eval.reports.formats import DEFAULT_TABLE_FORMAT, TABLE_FORMATS

REFERENCE_CSV = "tecb-de-full-results.csv"
# The reference file's dataset columns (with its spellings) -> the MTEB task names we use.
REFERENCE_DATASETS = {
    "BlurbsClusteringS2S": "BlurbsClusteringS2S",
    "BlurbsClusteringSP2P": "BlurbsClusteringP2P",
    "10kGNADClusteringS2S": "TenKGnadClusteringS2S",
    "10kGNADClusteringP2P": "TenKGnadClusteringP2P",
    "RedditClusteringS2S": "RedditClusteringS2S",
    "RedditClusteringP2P": "RedditClusteringP2P",
}
DATASET_ORDER = list(REFERENCE_DATASETS.values())
HEADER = ["transformer", "clustering\nalgorithm", "dimensionality\nreduction"]
# After the dataset columns of results.csv, where an API model is among its rows (reference_layout).
COST_COLUMNS = ["api_tokens", "api_cost"]
REDUCTION_SPELLING = {ours: theirs for theirs, ours in REFERENCE_REDUCTIONS.items()}

# The models the paper's Tables 2 and 3 are over, spelled and ordered as in the authors' CSV.
# The CSV holds a 13th, sentence-t5-large, that the paper's tables leave out: only the average
# over these 12 reproduces the printed Table 3 (k-means/none 25.19, HDBSCAN/UMAP 22.45,
# DBSTREAM/UMAP 28.40; with all 13: 25.78, 23.12, 28.94). Table 2 is taken to print the same 12:
# its rows are the per-model k-means/none cells, whose mean is Table 3's k-means/none row (25.19
# only without sentence-t5-large), and the reference README counts 12 models behind both tables.
PAPER_MODELS = (
    "GBERT-base",
    "GBERT-large",
    "GELECTRA-base",
    "GELECTRA-large",
    "GottBERT",
    "cross-en-de-roberta-sentence-transformer",
    "paraphrase-multilingual-mpnet-base-v2",
    "paraphrase-multilingual-MiniLM-L12-v2",
    "use-cmlm-multilingual",
    "sentence-t5-base",
    "sentence-t5-xxl",
    "XLM-RoBERTa-large",
)
# In the authors' CSV but not in the paper's tables (still used for the per-model plots).
REFERENCE_ONLY_MODELS = ("sentence-t5-large",)
# Said wherever the demo's numbers are shown next to, or could be mistaken for, the paper's.
DEMO_NOTE = ("Synthetic demo data (the small embedded demo sample, written for this project): "
             "these scores are NOT comparable with the paper's figures.")
DEMO_TITLE = "Synthetic demo data: NOT comparable with the paper's figures"  # short, for plot titles
PAPER_BARS_LABEL = (f"paper's Table 3 (avg over its {len(PAPER_MODELS)} models; "
                    f"{', '.join(REFERENCE_ONLY_MODELS)} left out, as in the paper)")
PAPER_TABLE_NOTES = {
    "2": "The paper's Table 2: V-measure x100, Minibatch k-Means on the embeddings, per model.",
    "3": "The paper's Table 3: V-measure x100 per algorithm / reduction, averaged over its models.",
}


def dataset_columns(names) -> list[str]:
    known = [d for d in DATASET_ORDER if d in set(names)]
    return known + sorted(set(names) - set(known))


def seed_split_means(frame: pd.DataFrame, metric: str = "v_measure") -> pd.DataFrame:
    """Mean and SD over splits per (model, dataset, algorithm, reduction, seed)."""
    frame = frame if "seed" in frame.columns else frame.assign(seed=0)
    keys = ["model", "mteb_name", "algorithm", "reduction", "seed"]
    grouped = frame.groupby(keys, sort=True)[metric]
    sizes = grouped.size()
    # The SD of one value is no spread at all: NaN (printed "–"), not 0.
    sd = grouped.std(ddof=0).where(sizes > 1)
    return pd.DataFrame({"mean": grouped.mean(), "sd": sd, "splits": sizes}).reset_index()


def split_means(frame: pd.DataFrame, metric: str = "v_measure") -> pd.DataFrame:
    """Per (model, dataset, algorithm, reduction): ``mean``, the mean over seeds of the mean over
    splits; ``sd``, the SD over splits (population, as MTEB's ``v_measure_std``) averaged over
    seeds; ``sd_seeds``, the sample SD over seeds of the split means (NaN with one seed);
    ``splits`` and ``seeds``. With one seed: mean and SD over splits, as MTEB reports them."""
    per_seed = seed_split_means(frame, metric)
    grouped = per_seed.groupby(["model", "mteb_name", "algorithm", "reduction"], sort=True)
    return pd.DataFrame({"mean": grouped["mean"].mean(), "sd": grouped["sd"].mean(),
                         "sd_seeds": grouped["mean"].std(ddof=1), "splits": grouped["splits"].max(),
                         "seeds": grouped.size()}).reset_index()


def order_configurations(index) -> list:
    known = [c for c in PAPER_CONFIGURATIONS if c in set(index)]
    return known + sorted(set(index) - set(known))


# A table with uncertainty: columns (column, stat); format_table writes the stats of a cell
# together in Markdown / LaTeX and as their own columns in CSV.
STATS = ("mean", "sd_seeds", "sd_splits", "marker", "n_splits")
# Stats that only shape the Markdown / LaTeX text ("–" for an SD of one split), not CSV columns.
TEXT_ONLY_STATS = ("n_splits",)
NO_SPREAD = "–"  # an SD of a single value


def _stat_table(parts: dict[str, pd.DataFrame]) -> pd.DataFrame:
    mean = parts["mean"]
    table = pd.concat({stat: parts[stat].reindex(index=mean.index, columns=mean.columns)
                       for stat in STATS if stat in parts}, axis=1)
    table = table.swaplevel(axis=1)
    order = [(c, s) for c in mean.columns for s in STATS if (c, s) in table.columns]
    table = table[order]
    table.columns = pd.MultiIndex.from_tuples(order, names=[None, "stat"])
    return table


def has_stats(table: pd.DataFrame) -> bool:
    return isinstance(table.columns, pd.MultiIndex) and table.columns.names[-1] == "stat"


def means_of(table: pd.DataFrame) -> pd.DataFrame:
    """The figures (means) of a table, with or without its stats."""
    return table.xs("mean", axis=1, level="stat") if has_stats(table) else table


def _aggregate(per_seed: pd.DataFrame, row_keys: list[str]) -> dict[str, pd.DataFrame]:
    """Cells (row keys x dataset, plus ``avg``) from per-seed split means, averaged over models.

    mean: over models of each model's mean over seeds. sd_seeds: the SD over seeds of the per-seed
    figure (the average over models, and for ``avg`` over datasets, of that seed's split means);
    only where every model (and dataset) of the cell ran the same seeds, else NaN. sd_splits: the
    SD over splits averaged over models and seeds (none for ``avg``).
    """
    cells, seeds_of = {}, {}
    for key, group in per_seed.groupby([*row_keys, "mteb_name"], sort=True):
        *row, dataset = key
        row = tuple(row) if len(row) > 1 else row[0]
        by_model = {m: g.set_index("seed") for m, g in group.groupby("model", sort=True)}
        seed_sets = {tuple(sorted(g.index)) for g in by_model.values()}
        per_model = [g["mean"].mean() for g in by_model.values()]
        per_seed_figure = None
        if len(seed_sets) == 1:
            (seeds,) = seed_sets
            per_seed_figure = pd.Series({s: np.mean([g.at[s, "mean"] for g in by_model.values()]) for s in seeds})
        cells[(row, dataset)] = {"mean": float(np.mean(per_model)),
                                 "sd_seeds": per_seed_figure.std(ddof=1) if per_seed_figure is not None and len(per_seed_figure) > 1 else np.nan,
                                 "sd_splits": float(np.mean([g["sd"].mean() for g in by_model.values()])),
                                 "n_splits": int(max(g["splits"].max() for g in by_model.values()))}
        seeds_of[(row, dataset)] = per_seed_figure
    rows = sorted({r for r, _ in cells}, key=lambda r: r if isinstance(r, tuple) else (r,))
    datasets = dataset_columns({d for _, d in cells})
    out = {}
    for stat in ("mean", "sd_seeds", "sd_splits", "n_splits"):
        out[stat] = pd.DataFrame([[cells.get((r, d), {}).get(stat, np.nan) for d in datasets] for r in rows],
                                 index=pd.MultiIndex.from_tuples(rows, names=row_keys) if len(row_keys) > 1
                                 else pd.Index(rows, name=row_keys[0]), columns=datasets)
    out["mean"]["avg"] = out["mean"][datasets].mean(axis=1)
    avg_sd = []
    for r in rows:
        figures = [seeds_of.get((r, d)) for d in datasets if (r, d) in cells]
        same = all(f is not None for f in figures) and len({tuple(f.index) for f in figures}) == 1
        avg_sd.append(pd.concat(figures, axis=1).mean(axis=1).std(ddof=1) if same and len(figures[0]) > 1 else np.nan)
    out["sd_seeds"]["avg"] = avg_sd
    out["sd_splits"]["avg"] = np.nan
    out["n_splits"]["avg"] = np.nan
    return out


def one_version(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame``'s cells that every model has (:func:`tecb_eval.reports.versions.common_cells`) if it
    holds one version per table (:mod:`tecb_eval.reports.versions`), else a :class:`UserError`: a
    table of several versions would average them."""
    from tecb_eval.reports.versions import common_cells, select

    _, left_out = select(frame, like_with_like=False)
    if left_out:
        raise UserError("the results hold several versions of a result, which a table would average; take one "
                        "first (tecb_eval.reports.versions.select, or report.tables, which does): " + left_out)
    return common_cells(frame)[0]


def table2(frame: pd.DataFrame, *, stats: bool = False, markers: bool = False) -> pd.DataFrame:
    """Model x dataset: V-measure of k-means on unreduced embeddings, the mean over seeds of the
    mean over splits, plus the average over datasets. ``stats``: a table with, per cell, the SD
    over seeds and over splits too (columns (dataset, stat)); ``markers``: and the paired
    comparison with the best model per dataset (:func:`tecb_eval.reports.compare.against_best`)."""
    working.step("Table 2")
    kmeans = table2_rows(frame)
    if kmeans.empty:
        raise UserError("the results hold no minibatch_kmeans:none cells, which Table 2 reports")
    kmeans = one_version(kmeans)
    parts = _aggregate(seed_split_means(kmeans), ["model"])
    if not stats:
        return parts["mean"]
    if markers:
        from tecb_eval.reports.compare import against_best

        marks = against_best(kmeans)
        parts["marker"] = pd.DataFrame([[marks.get((m, d), "") for d in parts["mean"].columns]
                                        for m in parts["mean"].index], index=parts["mean"].index,
                                       columns=parts["mean"].columns)
    return _stat_table(parts)


def table3_models(frame: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """Per dataset, only the models that ran every configuration shown for it, and one line naming
    the models left out (or None): a configuration's row averaged over other models than the next
    row's would rank the models, not the configurations."""
    keep = pd.Series(True, index=frame.index)
    left = []
    for dataset, rows in frame.groupby("mteb_name", sort=True):
        configurations = set(zip(rows.algorithm, rows.reduction))
        ran = {model: set(zip(mine.algorithm, mine.reduction)) for model, mine in rows.groupby("model", sort=True)}
        complete = [m for m, have in ran.items() if have == configurations]
        if len(complete) == len(ran) or not complete:
            continue
        for model in sorted(set(ran) - set(complete)):
            keep[rows.index[rows.model == model]] = False
            left.append(f"{model} on {dataset} ({len(ran[model])} of {len(configurations)} configurations)")
    if not left:
        return frame, None
    return frame[keep], one_line("Table 3 averages each dataset over the models that ran every configuration; "
                                 "left out: " + "; ".join(left) + ".")


def table3(frame: pd.DataFrame, *, stats: bool = False) -> pd.DataFrame:
    """(algorithm, reduction) x dataset: the models' figures (mean over seeds of the split means)
    averaged over the models that ran every configuration (:func:`table3_models`), plus the average
    over datasets; ``stats`` as in :func:`table2`."""
    working.step("Table 3")
    frame, _ = table3_models(one_version(frame))
    parts = _aggregate(seed_split_means(frame), ["algorithm", "reduction"])
    parts = {stat: table.loc[order_configurations(table.index)] for stat, table in parts.items()}
    return _stat_table(parts) if stats else parts["mean"]


def reference_layout(frame: pd.DataFrame) -> pd.DataFrame:
    """The authors' CSV layout: transformer, algorithm, reduction, one V-measure column per dataset;
    where a model behind a paid API is among the rows, then :data:`COST_COLUMNS`: each such model's
    tokens and cost of embedding every split of those datasets (the same on each of its rows, as its
    vectors are made once for all configurations), empty for a model that runs here."""
    chosen = one_version(frame)
    means = split_means(chosen)
    wide = means.pivot_table(index=["model", "algorithm", "reduction"], columns="mteb_name", values="mean")
    usage: dict[str, list] = {}
    for (model, _), used in api_usage(chosen).items():
        tokens, cost = usage.get(model, (0.0, 0.0))
        usage[model] = [tokens + used.tokens, None if cost is None or used.cost is None else cost + used.cost]
    rows = []
    for model in sorted(means.model.unique()):
        sub = wide.loc[model]
        tokens, cost = usage.get(model, (None, None))
        for algorithm, reduction in order_configurations(sub.index):
            values = sub.loc[(algorithm, reduction)]
            rows.append([model, algorithm, REDUCTION_SPELLING.get(reduction, reduction),
                         *[values.get(d, np.nan) for d in dataset_columns(wide.columns)],
                         *([np.nan if tokens is None else tokens, np.nan if cost is None else cost] if usage else [])])
    return pd.DataFrame(rows, columns=HEADER + dataset_columns(wide.columns) + (COST_COLUMNS if usage else []))


def cost_columns_as_text(layout: pd.DataFrame) -> pd.DataFrame:
    """:func:`reference_layout` for a Markdown or LaTeX table, which prints every number x100: its
    cost columns as text (tokens whole, cost to six digits; empty for a model that runs here)."""
    out = layout.copy()
    for column, form in zip(COST_COLUMNS, ("{:,.0f}", "{:.6g}")):
        if column in out.columns:
            out[column] = ["" if pd.isna(v) else form.format(v) for v in out[column]]
    return out


# -- the authors' results and the paper's tables ---------------------------------------------------
def _not_reference(path: Path, why: str) -> UserError:
    return UserError(f"{path}: not the authors' {REFERENCE_CSV} ({why}); pass that file to --reference")


def read_reference(path: Path) -> pd.DataFrame:
    """The authors' table as (model, algorithm, reduction, mteb_name, v_measure) rows.

    The published file was saved from a spreadsheet that auto-incremented the model names of two
    blocks (``...-mpnet-base-v2``, ``-v3``, ... ``-v15``): each model is a block of the 14 paper
    configurations, so a block takes the name on its first row. A ``results.csv`` that ``export``
    wrote reads the same way: its columns named by MTEB task, an empty cell where a model did not
    run a dataset, and its API cost columns left unread. Anything else (another CSV, a results
    store, a binary file) is a one-line :class:`UserError` naming it.

    Args:
        path (Path): The authors' ``tecb-de-full-results.csv``, or a ``results.csv`` of ours.

    Returns:
        pandas.DataFrame: Rows ``(model, algorithm, reduction, mteb_name, v_measure)``.

    Raises:
        UserError: A file that is missing or is not that table.
    """
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{path}: a folder, not the authors' {REFERENCE_CSV}; pass that file to --reference")
    inputs.check_regular(path, what=f"--reference {path}")
    if not path.is_file():
        raise UserError(f"{path}: no such reference file (expected the authors' {REFERENCE_CSV})")
    try:
        with inputs.open_regular(path, what=f"--reference {path}") as raw, \
                io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as fh:
            reader = csv.reader(fh)
            # The header's cells hold line breaks, so physical line numbers come from the reader.
            records = [(reader.line_num, r) for r in reader if r]
    except UnicodeDecodeError:
        raise _not_reference(path, "not UTF-8 text") from None
    except csv.Error as exc:
        raise _not_reference(path, f"unreadable CSV: {exc}") from None
    if not records:
        raise _not_reference(path, "empty")
    (_, header), body = records[0], records[1:]
    expected = [" ".join(h.split()) for h in HEADER]
    # A results.csv of ours names its columns by MTEB task and may end in an API model's cost: a
    # reference is V-measures, so those columns are left unread.
    named = {**{d: d for d in DATASET_ORDER}, **REFERENCE_DATASETS}
    read = len(header) - len(COST_COLUMNS) if header[-len(COST_COLUMNS):] == COST_COLUMNS else len(header)
    if [" ".join(h.split()) for h in header[:3]] != expected or not header[3:read] \
            or not set(header[3:read]) <= set(named):
        raise _not_reference(path, f"its header should be {', '.join(expected)} and the authors' dataset columns")
    datasets = [named[c] for c in header[3:read]]
    block = len(PAPER_CONFIGURATIONS)
    rows = []
    for start in range(0, len(body), block):
        chunk = body[start:start + block]
        line = chunk[0][0]
        configs = [(r[1], REFERENCE_REDUCTIONS.get(r[2], r[2])) if len(r) > 2 else None for _, r in chunk]
        if configs != PAPER_CONFIGURATIONS:
            raise _not_reference(path, f"line {line}: expected a block of the paper's 14 configurations in order")
        model = chunk[0][1][0]
        for (line, r), (algorithm, reduction) in zip(chunk, configs):
            if len(r) != len(header):
                raise _not_reference(path, f"line {line}: {len(r)} cells, the header has {len(header)}")
            for dataset, value in zip(datasets, r[3:read]):
                if not value.strip():
                    continue  # a results.csv of ours leaves a dataset the model did not run empty
                try:
                    v_measure = float(value)
                except ValueError:
                    v_measure = np.nan
                # The file holds V-measures 0..1; a x100 copy would silently scale every figure.
                if not 0.0 <= v_measure <= 1.0:
                    raise _not_reference(path, f"line {line}: {value!r} is not a V-measure between 0 and 1")
                rows.append({"model": model, "algorithm": algorithm, "reduction": reduction,
                             "mteb_name": dataset, "v_measure": v_measure})
    return pd.DataFrame(rows)


def _paper_models(reference: pd.DataFrame) -> pd.DataFrame:
    missing = [m for m in PAPER_MODELS if m not in set(reference.model)]
    if missing:
        raise UserError(f"the reference table lacks {len(missing)} of the paper's models ({', '.join(missing)}); "
                        f"pass the authors' complete {REFERENCE_CSV}")
    return reference[reference.model.isin(PAPER_MODELS)]


def paper_table2(reference: pd.DataFrame) -> pd.DataFrame:
    """The paper's Table 2 (0..1): its models x dataset, k-means on the embeddings, plus the average."""
    rows = _paper_models(reference)
    rows = table2_rows(rows)
    table = rows.pivot(index="model", columns="mteb_name", values="v_measure")
    table = table.loc[list(PAPER_MODELS), dataset_columns(table.columns)]
    table["avg"] = table.mean(axis=1)
    return table


def paper_table3(reference: pd.DataFrame) -> pd.DataFrame:
    """The paper's Table 3 (0..1): (algorithm, reduction) x dataset averaged over the paper's 12
    models (:data:`PAPER_MODELS`), plus the average over datasets."""
    rows = _paper_models(reference)
    table = rows.groupby(["algorithm", "reduction", "mteb_name"])["v_measure"].mean().unstack("mteb_name")
    table = table[dataset_columns(table.columns)]
    table["avg"] = table.mean(axis=1)
    return table.loc[order_configurations(table.index)]


def shown(value, scale: float = 100.0) -> str:
    if isinstance(value, str):  # a listing (the store's versions), not figures
        return value
    return "" if pd.isna(value) else f"{value * scale:.2f}"


def shared_ranks(values) -> list[str]:
    """Ranks of ``values`` (0..1 scores, best first), as the tables print them: figures that print
    alike (x100, two decimals) share the rank of the first of them, marked "=" ("1=", "1=", "3"):
    a margin of "+0.00" is no lead, so two such models are never ranked 1 and 2."""
    return [f"{rank}=" if tied else str(rank) for rank, tied in shared_rank_numbers(values)]


def shared_rank_numbers(values) -> list[tuple[int, bool]]:
    """:func:`shared_ranks` for machine-readable outputs: per value its rank as a number and whether
    another value shares it ((1, True), (1, True), (3, False))."""
    out, first, before = [], 0, None
    for i, figure in enumerate((shown(v) for v in values), 1):
        if figure != before:
            first, before = i, figure
        out.append(first)
    return [(rank, out.count(rank) > 1) for rank in out]


def printed(table: pd.DataFrame) -> pd.DataFrame:
    """A table's figures as the paper prints them: x100, rounded to two decimals (the same
    rounding as the Markdown and LaTeX tables)."""
    return table.map(lambda v: float(shown(v)) if shown(v) else np.nan)


def paper_model(model: str, names) -> str | None:
    """The authors' name for one of our models (``deepset/gbert-base`` -> ``GBERT-base``), or None."""
    by_lower = {n.lower(): n for n in names}
    return by_lower.get(model.lower()) or by_lower.get(model.rsplit("/", 1)[-1].lower())


def beside_paper(ours: pd.DataFrame, paper: pd.DataFrame, match=None) -> pd.DataFrame:
    """Our table with the paper's row under each of our rows the paper also has.

    The index gains a last level, ``source`` (``ours`` / ``paper``); the columns are our datasets
    and ``avg``, which for both rows is over the datasets both sides have, so the two averages
    stay comparable when a run covers only some of the paper's datasets. ``match`` maps one of our
    row keys to the paper's (default: the same key). A table with stats (:func:`table2`
    ``stats=True``) keeps them on our rows; its ``avg`` keeps its SD over seeds only where the
    datasets both have are all of ours.
    """
    stats = {}
    if has_stats(ours):
        stats = {stat: ours.xs(stat, axis=1, level="stat") for stat in STATS
                 if stat in ours.columns.get_level_values("stat")}
        ours = stats["mean"]
    datasets = [c for c in ours.columns if c != "avg"]
    shared = [d for d in datasets if d in paper.columns]
    if not shared:
        raise UserError(f"none of this run's datasets ({', '.join(datasets)}) is in the paper's tables")
    match = match or (lambda key: key)
    keys, rows, extra = [], [], {stat: [] for stat in stats if stat != "mean"}
    for key in ours.index:
        parts = key if isinstance(key, tuple) else (key,)
        keys.append((*parts, "ours"))
        rows.append([*ours.loc[key, datasets], ours.loc[key, shared].mean()])
        for stat in extra:
            keep_avg = shared == datasets or stat == "marker"
            extra[stat].append([*stats[stat].loc[key, datasets], stats[stat].loc[key, "avg"] if keep_avg else np.nan])
        theirs = match(key)
        if theirs is not None and theirs in paper.index:
            keys.append((*parts, "paper"))
            rows.append([paper.loc[theirs].get(d, np.nan) for d in datasets] + [paper.loc[theirs, shared].mean()])
            for stat in extra:
                extra[stat].append(["" if stat == "marker" else np.nan] * (len(datasets) + 1))
    names = [*(ours.index.names if isinstance(ours.index, pd.MultiIndex) else [ours.index.name]), "source"]
    index = pd.MultiIndex.from_tuples(keys, names=names)
    table = pd.DataFrame(rows, index=index, columns=[*datasets, "avg"])
    if not stats:
        return table
    return _stat_table({"mean": table, **{stat: pd.DataFrame(values, index=index, columns=[*datasets, "avg"])
                                          for stat, values in extra.items()}})


def beside_paper_note(table: str, ours: pd.DataFrame, models, paper: pd.DataFrame, demo: bool = False) -> str:
    """What the ours/paper rows of :func:`beside_paper` are, in words (one line each), for the top
    of a table."""
    datasets = [c for c in ours.columns if c != "avg"]
    shared = [d for d in datasets if d in paper.columns]
    lines = [DEMO_NOTE] if demo else []
    lines.append(f"Table {table}, V-measure x100, this run (ours) beside the paper's printed figures (paper).")
    if table == "3":
        lines.append(f"ours: mean over splits, averaged over this run's {_models_phrase(models)}.")
        lines.append(f"paper: the authors' {REFERENCE_CSV} averaged over the paper's {len(PAPER_MODELS)} models; "
                     f"{', '.join(REFERENCE_ONLY_MODELS)} is in that file but not in the paper's tables.")
    else:
        lines.append("ours: mean over splits. paper: the row the paper printed for the model of that name "
                     f"(from the authors' {REFERENCE_CSV}); models the paper did not print have none.")
    if shared != [d for d in paper.columns if d != "avg"]:
        lines.append(f"avg: over the datasets both have ({', '.join(shared)}), so the paper's avg here is not "
                     "its printed avg over all six datasets.")
    else:
        lines.append("avg: over the six datasets, as printed.")
    return "\n".join(lines)


def _models_phrase(models) -> str:
    models = sorted(models)
    return f"{len(models)} model{'s' if len(models) != 1 else ''} ({', '.join(models)})"


def paper_note(table: str) -> str:
    return (f"{PAPER_TABLE_NOTES[table]} From the authors' {REFERENCE_CSV}, over the paper's "
            f"{len(PAPER_MODELS)} models ({', '.join(REFERENCE_ONLY_MODELS)} is in that file but not in the paper).")


def _seeds_phrase(frame: pd.DataFrame) -> tuple[str, bool]:
    """How the seeds enter a cell, in words, and whether any cell has several seeds."""
    if "seeds" in frame.columns:
        by_dataset = {d: sorted({str(s) for s in g.seeds}) for d, g in frame.groupby("mteb_name", sort=True)}
    else:
        by_dataset = {d: [",".join(str(s) for s in sorted(set(g.seed)))] for d, g in frame.groupby("mteb_name", sort=True)}
    sets = sorted({s for v in by_dataset.values() for s in v})
    several = any(len(s.split(",")) > 1 for s in sets)
    if len(sets) == 1:
        (only,) = sets
        if not several:
            return f"seed {only}", False
        return f"averaged over seeds {only}, ±SD over seeds", True
    listed = "; ".join(f"{d}: {', '.join(v)}" for d, v in by_dataset.items())
    return f"averaged over the seeds of each dataset's run ({listed}), ±SD over seeds where several", several


def _cells_phrase(frame: pd.DataFrame) -> tuple[str, str]:
    """What a cell's mean is over and what its bracketed SD is over: splits (legacy), or MTEB v2's
    bootstrap draws (fast protocol), which are resamples of one pool of texts, not splits."""
    if "protocol" in frame.columns and (frame.protocol == "fast").any():
        draws = sorted(frame.groupby(["model", "mteb_name", "seed"]).split.nunique().unique())
        counted = "/".join(map(str, draws))
        return (f"the mean over the fast protocol's {counted} bootstrap draws (MTEB v2; resamples of one pool of texts, "
                "not independent splits)", "the SD over those draws")
    return "the mean over splits", "the SD over splits"


def legend(table: str, frame: pd.DataFrame, confidence: float = 0.95) -> str:
    """One line saying what a cell of our Table 2 / 3 is."""
    seeds, _ = _seeds_phrase(frame)
    over, spread = _cells_phrase(frame)
    one = f" ({NO_SPREAD}: one split, no spread)" if (frame.groupby(["model", "mteb_name", "seed"]).split.nunique() == 1).any() else ""
    if table == "2":
        if "protocol" in frame.columns and (frame.protocol == "fast").any():
            ranking = "* best model on the dataset; = every other model: the draws give no ranking test."
        else:
            ranking = (f"* best model on the dataset; = its difference to the best does not hold (paired "
                       f"{100 * confidence:g} % bootstrap interval over splits and seeds includes 0, or sign-flip "
                       f"p >= {1 - confidence:.2g}); unmarked: the best is surely ahead.")
        return (f"Table 2: V-measure x100 of Minibatch k-Means on the embeddings; a cell is {over} "
                f"({seeds}) with {spread} in brackets{one}. {ranking}")
    return (f"Table 3: V-measure x100 per algorithm / reduction, averaged over models; a cell is {over} "
            f"({seeds}) with {spread} (averaged over models) in brackets{one}.")


def synthetic_datasets(frame: pd.DataFrame) -> list[str]:
    """The datasets of ``frame`` built from the embedded demo sample. Rows say so themselves
    (``synthetic``, written by the grid); older rows are checked against the manifest at their
    ``dataset_location`` where that folder is still there."""
    import json

    from tecb_data.demo import is_demo_manifest

    found = set()
    flagged = frame["synthetic"] if "synthetic" in frame.columns else pd.Series(np.nan, index=frame.index)
    found |= set(frame.mteb_name[flagged.eq(True)])
    unknown = frame[flagged.isna()]
    if "dataset_location" in unknown.columns:
        for dataset, location in sorted(set(zip(unknown.mteb_name, unknown.dataset_location.astype(str)))):
            try:
                manifest = json.loads((Path(location) / "manifest.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if is_demo_manifest(manifest):
                found.add(dataset)
    return dataset_columns(found)


def levels_coverage(frame: pd.DataFrame) -> str | None:
    """One line naming the cells of ``frame`` whose per-level scores cover only some of the splits (or
    bootstrap draws) the cell ran, or None: a ``--metrics level`` fill-in stopped part-way leaves
    such cells, and their per-level figure is then a mean over fewer splits than its flat V-measure.
    A cell of a dataset with per-level scores elsewhere that has none is named as left out."""
    if "levels" not in frame.columns:
        return None
    measured = frame["levels"].map(lambda v: isinstance(v, list))
    keys = ["model", "mteb_name", "algorithm", "reduction"]
    with_levels = set(frame.mteb_name[measured])
    partial, missing = [], []
    rows = frame[frame.mteb_name.isin(with_levels)].assign(measured=measured)
    for key, cell in rows.groupby(keys, sort=True):
        have, ran = int(cell.measured.sum()), len(cell)
        name = f"{' / '.join(map(str, (key[0], *key[2:])))} on {key[1]}"
        if have == 0:
            missing.append(name)
        elif have < ran:
            partial.append(f"{name} ({have} of {ran} rows)")
    if not partial and not missing:
        return None
    said = []
    if partial:
        said.append("averaged over only the rows that have per-level scores: " + "; ".join(partial))
    if missing:
        said.append("left out, no per-level scores: " + "; ".join(missing))
    return ("Per-level scores do not cover every row that ran (a `run --metrics level` stopped early?): "
            + ". ".join(said) + ". Run the same `tecb-eval run ... --metrics level` again to fill in the rest.")


def tables(frame: pd.DataFrame, reference: pd.DataFrame | None = None, *, demo: bool = False,
           selection: dict | None = None) -> dict[str, tuple]:
    """{"table2": (table, note), "table3": (table, note)} as the export writes and ``tecb-eval table``
    and ``run`` print them (Table 2 only when the results hold k-means on the embeddings).

    Tables never average across versions: one version per table is taken first
    (:func:`tecb_eval.reports.versions.select` with ``selection``; default the newest), and the note says
    in one line what was left out. Cells carry the SD over seeds and over splits, Table 2 the
    markers against the best model per dataset. With the authors' results
    (:func:`read_reference`), Table 3 gets the paper's row under each of ours, and Table 2 under
    each model the paper printed; ``demo`` puts :data:`DEMO_NOTE` on both, as do rows of datasets
    built from the demo sample (:func:`synthetic_datasets`) without it.

    Args:
        frame (pandas.DataFrame): Results rows (a results store read by ``read_store``).
        reference (pandas.DataFrame | None): The authors' results (``read_reference``); None: ours only.
        demo (bool): Put the synthetic-data note on both tables.
        selection (dict | None): Which version to show (``protocol``, ``profile``, ``seeds``,
            ``fingerprints``, ``identities``); None: the newest.

    Returns:
        dict[str, tuple]: ``{"table2": (table, note), "table3": (table, note)}``.

    Raises:
        UserError: A reference table that lacks some of the paper's models.
    """
    from tecb_eval.reports.versions import select

    frame, left_out = select(frame, **(selection or {}))
    demo = demo or bool(synthetic_datasets(frame))
    out = {}
    tail = [left_out] if left_out else []
    if not table2_rows(frame).empty:
        t2 = table2(frame, stats=True, markers=True)
        t2_note = [DEMO_NOTE] if demo else []
        if reference is not None:
            paper = paper_table2(reference)

            def match(model):
                return paper_model(model, paper.index)

            # Most models one runs are not the paper's; a paper row appears only under those that are.
            if any(match(m) for m in t2.index):
                t2_note = [beside_paper_note("2", means_of(t2), [], paper, demo)]
                t2 = beside_paper(t2, paper, match)
        kmeans = table2_rows(frame)
        out["table2"] = (t2, "\n".join([*t2_note, legend("2", frame), *zero_notes(kmeans, ["model", "mteb_name"]),
                                        *cost_notes(kmeans), *tail]))
    t3 = table3(frame, stats=True)
    t3_note = [DEMO_NOTE] if demo else []
    t3_models, t3_left = table3_models(frame)
    if reference is not None:
        paper = paper_table3(reference)
        t3_note = [beside_paper_note("3", means_of(t3), t3_models.model.unique(), paper, demo)]
        t3 = beside_paper(t3, paper)
    out["table3"] = (t3, "\n".join([*t3_note, legend("3", frame), *zero_notes(frame, ["algorithm", "reduction", "mteb_name"]),
                                    *tail, *([t3_left] if t3_left else [])]))
    return out


@dataclass(frozen=True)
class ApiUsage:
    """What embedding one dataset's splits cost a model behind a paid API: the tokens the provider
    reported, summed over the splits (each split's texts once, whatever the seeds and
    configurations), and their cost where a price was given (None: no price)."""

    tokens: float
    cost: float | None
    splits: int
    price: float | None = None

    def words(self) -> str:
        """The usage as a table cell or a sentence says it: "1,234 tokens, cost 0.0012"."""
        return f"{self.tokens:,.0f} tokens" + ("" if self.cost is None else f", cost {self.cost:.6g}")


def api_usage(frame: pd.DataFrame) -> dict[tuple[str, str], ApiUsage]:
    """Per (model, dataset) of ``frame``'s rows of models behind a paid API (rows with ``api_tokens``),
    their :class:`ApiUsage` over the splits the rows hold. A model that runs here has no entry: its
    rows show no cost, never a cost of 0."""
    if "api_tokens" not in frame.columns or frame["api_tokens"].isna().all():
        return {}
    rows = frame[frame["api_tokens"].notna()].drop_duplicates(["model", "mteb_name", "split"])
    out = {}
    for (model, dataset), group in rows.groupby(["model", "mteb_name"], sort=True):
        cost = (float(group["api_cost"].sum()) if "api_cost" in group.columns and group["api_cost"].notna().all()
                else None)
        price = (float(group["price_per_million_tokens"].iloc[-1]) if cost is not None
                 and "price_per_million_tokens" in group.columns else None)
        out[(str(model), str(dataset))] = ApiUsage(float(group["api_tokens"].sum()), cost, len(group), price)
    return out


def cost_notes(frame: pd.DataFrame) -> list[str]:
    """Quality beside price, for models behind a paid API (rows with ``api_tokens``; none in older
    stores, which get no line): per model and dataset, the tokens the provider reported for the
    table's splits in all and, where a price was given, their cost, then the same per split (the mean)."""
    parts = []
    for (model, dataset), usage in api_usage(frame).items():
        text = f"{model} on {dataset} {usage.words()} over {usage.splits} split{'s' if usage.splits != 1 else ''}"
        text += f" (a split: {usage.tokens / usage.splits:,.0f} tokens"
        text += ")" if usage.cost is None else f", cost {usage.cost / usage.splits:.6g})"
        parts.append(text)
    return ["API cost of embedding each dataset's texts (in all, and the mean per split): " + "; ".join(parts) + "."] \
        if parts else []


def zero_notes(frame: pd.DataFrame, keys: list[str]) -> list[str]:
    """One line per cell of a table whose V-measure is 0 for a reason (every text noise, one
    cluster: :func:`tecb_eval.reports.scores.zero_reason`), so a 0.00 is not read as a bad score."""
    from tecb_eval.reports.scores import zero_reason

    lines = []
    for key, rows in frame.groupby(keys, sort=True):
        why = zero_reason(rows)
        if why:
            lines.append(f"0.00 for {' / '.join(map(str, key))}: {why}.")
    return lines


# -- formatting ----------------------------------------------------------------------------------
def _cell(values: dict, scale: float) -> str:
    """One cell of a table with stats: mean, ±SD over seeds, (SD over splits), marker."""
    text = shown(values.get("mean"), scale)
    if not text:
        return ""
    if not pd.isna(values.get("sd_seeds", np.nan)):
        text += f" ±{shown(values['sd_seeds'], scale)}"
    if not pd.isna(values.get("sd_splits", np.nan)):
        text += f" ({shown(values['sd_splits'], scale)})"
    elif values.get("n_splits") == 1:
        text += f" ({NO_SPREAD})"
    marker = values.get("marker")
    if isinstance(marker, str) and marker:
        text += f" {marker}"
    return text


def _csv_columns(table: pd.DataFrame) -> pd.DataFrame:
    """A table with stats as plain columns: ``<column>`` (the mean), ``<column> sd_seeds``, ...;
    a stat column with nothing in it (one seed: no SD over seeds) is left out."""
    flat = {}
    for column, stat in table.columns:
        values = table[(column, stat)]
        if stat in TEXT_ONLY_STATS:
            continue
        if stat != "mean" and (values.isna() | (values == "")).all():
            continue
        flat[column if stat == "mean" else f"{column} {stat}"] = values
    return pd.DataFrame(flat, index=table.index)


# Text a user or a store supplies (a model's name, a label) reaches a table only through its
# format's own quoting: a name must not add a column, end a row or run as a formula or a command.
_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def _latex_cell(value) -> str:
    text = one_line(value)  # a name's control characters as escapes, shown as every text output shows them
    return "".join(_LATEX_SPECIAL.get(c, c) for c in text).replace("±", r"$\pm$")


def csv_safe(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with every text cell, index entry and column name a spreadsheet would run as a
    formula quoted by OWASP's rule (a leading ``'``); numbers are left as numbers. Every CSV we
    write from a table goes through it."""
    data = table.copy()
    if isinstance(data.index, pd.MultiIndex):
        data.index = pd.MultiIndex.from_tuples([tuple(map(csv_cell, i)) for i in data.index], names=data.index.names)
    else:
        data.index = data.index.map(csv_cell)
    data.columns = [csv_cell(c) for c in data.columns]
    return data.map(csv_cell)


def format_table(table: pd.DataFrame, fmt: str = DEFAULT_TABLE_FORMAT, scale: float = 100.0, note: str | None = None) -> str:
    """Markdown, CSV or LaTeX text of a table (values x ``scale``, two decimals).

    ``note`` (lines of text) goes above the table in Markdown and as ``%`` comments in LaTeX; a
    CSV stays data only, so that it loads as it is. A table with stats (columns (column, stat))
    shows a cell as ``mean ±SD-over-seeds (SD-over-splits) marker`` in Markdown and LaTeX, and its
    stats as columns of their own in CSV (0..1, like the means).

    Args:
        table (pandas.DataFrame): A table from ``tables``.
        fmt (str): ``"markdown"``, ``"csv"`` or ``"latex"``.
        scale (float): Factor for the values (100: V-measure x 100).
        note (str | None): Lines of text above the table (Markdown), as comments (LaTeX); left out in CSV.

    Returns:
        str: The table as text.

    Raises:
        UserError: An unknown format.
    """
    if fmt == "csv":
        buffer = io.StringIO()
        csv_safe(_csv_columns(table) if has_stats(table) else table).to_csv(buffer, float_format="%.6f",
                                                                            lineterminator="\n")
        return buffer.getvalue()
    flat = table.copy()
    if isinstance(flat.index, pd.MultiIndex):
        flat.index = [" / ".join(map(str, i)) for i in flat.index]
    if has_stats(table):
        columns = list(dict.fromkeys(table.columns.get_level_values(0)))
        cells = pd.DataFrame([[_cell({stat: flat.loc[i, (c, stat)] for stat in STATS if (c, stat) in flat.columns}, scale)
                               for c in columns] for i in flat.index], index=flat.index, columns=columns)
    else:
        cells = flat.map(lambda v: shown(v, scale))
    name = table.index.name or " / ".join(n for n in (table.index.names or []) if n) or ""
    if fmt == "md":
        # Every cell and note line through one escaper: a name shows as text, never as HTML, a
        # link or a new cell.
        head = [markdown_text(name), *map(markdown_text, cells.columns)]
        # One paragraph per note line: Markdown would run consecutive lines together.
        lines = [part for line in (note or "").splitlines() for part in (markdown_text(line), "")]
        lines += ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * len(cells.columns)) + "|"]
        lines += ["| " + " | ".join([markdown_text(i), *map(markdown_text, row)]) + " |"
                  for i, row in zip(cells.index, cells.values.tolist())]
        return "\n".join(lines) + "\n"
    if fmt == "latex":
        esc = _latex_cell
        lines = [f"% {line}" for line in (note or "").splitlines()]
        lines += [r"\begin{tabular}{l" + "r" * len(cells.columns) + "}", r"\toprule",
                  " & ".join([esc(name), *map(esc, cells.columns)]) + r" \\", r"\midrule"]
        lines += [" & ".join([esc(i), *map(esc, row)]) + r" \\" for i, row in zip(cells.index, cells.values.tolist())]
        lines += [r"\bottomrule", r"\end{tabular}"]
        return "\n".join(lines) + "\n"
    raise UserError(f"unknown table format {fmt!r}; choose {', '.join(TABLE_FORMATS[:-1])} or {TABLE_FORMATS[-1]}")


def write_reference_csv(frame: pd.DataFrame, path: Path) -> Path:
    buffer = io.StringIO()
    csv_safe(reference_layout(frame)).to_csv(buffer, index=False, float_format="%.15g", lineterminator="\n")
    return write_text(path, buffer.getvalue())


