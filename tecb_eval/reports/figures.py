"""PNG plots: Table 2 as dots with intervals, Table 3 as bars with their spread (beside the paper's),
per-model comparisons with the authors' numbers, and the paper's Figure 1 (a 2-D UMAP of one
split, coloured by label).

Every figure is built by a ``*_figure`` function that returns the matplotlib figure (so tests read
the plotted values back and compare them with the table they come from) and saved by the
``plot_*`` function beside it. House rules, the same for every figure:

- colours from Okabe & Ito's colour-blind-safe palette, and where colour carries meaning a marker
  shape carries it too;
- panels that are compared share their value axis, which starts at 0 (a V-measure is 0..100), so
  a small change is not blown up to fill the panel;
- a number that has a spread is drawn with it (bootstrap interval, SD over splits or seeds), and the
  legend or axis says which;
- the title says what was run: models, splits (and ``--limit-splits``), seeds, protocol, and whether
  the data is the synthetic demo sample;
- the legend sits outside the data, and constrained layout keeps every text inside the figure.

The UMAP scatter reads its embeddings and reduction through the grid's caches, so after a grid
run it costs no encoding and no UMAP fit. PNGs are written without a timestamp or software tag,
so equal inputs give equal files.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from tecb_data import inputs
from tecb_data.errors import UserError
from tecb_eval.clustering import algorithms as algo
from tecb_eval.clustering.criteria import CRITERIA_BY_NAME
from tecb_eval.clustering.registry import ALGORITHMS_REGISTRY, table2_rows
from tecb_eval.files import atomic_save
from tecb_eval.grid.cache import EmbeddingStore, ReductionCache

PNG_METADATA = {"Software": None}
# Okabe & Ito (2008), "Color Universal Design": distinguishable with every common colour-vision
# deficiency. Their yellow (#F0E442) is left out: it vanishes on a white page.
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000")
GREY = "#999999"
# With more labels than colours, the marker shape tells apart labels that share a colour.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
MISSING = "n/a"  # written where a bar has no value, so that it is not mistaken for a 0


def style(i: int) -> tuple[str, str]:
    """(colour, marker) of the i-th series: every pair distinct for the first 56."""
    return OKABE_ITO[i % len(OKABE_ITO)], MARKERS[(i // len(OKABE_ITO)) % len(MARKERS)]


# Figure 1 with more labels than Okabe & Ito's seven: Kelly's (1965) twenty colours of maximum
# contrast (his white and black left out: the page and the text), so that no two of the first
# twenty labels share a colour; the marker changes only past twenty.
MANY_COLOURS = ("#0067A5", "#F38400", "#008856", "#BE0032", "#875692", "#F3C300", "#A1CAF1", "#882D17", "#8DB600",
                "#E68FAC", "#848482", "#604E97", "#F99379", "#2B3D26", "#B3446C", "#C2B280", "#DCD300", "#654522",
                "#E25822", "#F6A600")


def label_style(i: int, n: int) -> tuple[str, str]:
    """(colour, marker) of the i-th of ``n`` labels of a scatter: colour-blind-safe colours up to
    seven labels, else :data:`MANY_COLOURS`; a colour repeats (with another marker) only past twenty."""
    if n <= len(OKABE_ITO):
        return OKABE_ITO[i], MARKERS[0]
    return MANY_COLOURS[i % len(MANY_COLOURS)], MARKERS[(i // len(MANY_COLOURS)) % len(MARKERS)]


def point_alpha(n: int) -> float:
    """Opacity of ``n`` scatter points: opaque enough for a few hundred, translucent for thousands,
    so that overlapping points show as darker ground, not as the last label drawn."""
    return float(min(0.85, max(0.45, 0.85 * (300 / max(n, 1)) ** 0.5)))


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def new_figure(*args, **kwargs):
    """``plt.subplots`` with constrained layout: titles, labels and outside legends stay in the figure."""
    return _pyplot().subplots(*args, layout="constrained", **kwargs)


def suptitle(fig, text: str, fontsize: float = 10) -> None:
    """The figure's title, each line wrapped to the figure's width: constrained layout makes room
    for a title's height but never shortens its lines, so a long one would be cut at the edges."""
    import textwrap

    # About 0.55 em per character of DejaVu Sans; a little margin either side.
    width = max(20, int(fig.get_figwidth() * 72 / (0.56 * fontsize)) - 4)
    lines = [part for line in text.split("\n") for part in (textwrap.wrap(line, width, break_on_hyphens=False) or [""])]
    fig.suptitle("\n".join(lines), fontsize=fontsize)


# A PNG drawn from results records which (``tecb-results``: :func:`results_digest` of its rows), so
# that `tecb-eval report --figures` embeds an export's figures only when they show the report's
# results; one drawn from no results store (a layer sweep, a training curve, a UMAP) records "none".
RESULTS_KEY = "tecb-results"
NOT_FROM_RESULTS = "none"
DIGEST_FIELDS = ("model", "mteb_name", "algorithm", "reduction", "split", "seed", "seeds", "protocol", "profile",
                 "dataset_fingerprint", "model_identity", "v_measure")


def results_digest(frame: pd.DataFrame) -> str:
    """SHA-256 (first 16 hex digits) of ``frame``'s results rows, independent of row and column order."""
    import hashlib

    present = [c for c in DIGEST_FIELDS if c in frame.columns]
    lines = sorted("\x1f".join(map(repr, row)) for row in frame[present].astype(str).itertuples(index=False, name=None))
    return hashlib.sha256("\n".join(["\x1f".join(present), *lines]).encode("utf-8")).hexdigest()[:16]


def recorded_results(path: Path) -> str | None:
    """The results digest a PNG records (:data:`RESULTS_KEY`), or None: written by another program
    or an older tecb, or not a readable PNG."""
    from PIL import Image

    try:
        with inputs.open_regular(path, what=str(path)) as fh, Image.open(fh) as image:
            value = image.text.get(RESULTS_KEY) if hasattr(image, "text") else None
    except (OSError, ValueError, UserError):
        return None
    return str(value) if value is not None else None


def legend_title(datasets: list[str]) -> str:
    """Figure 1's legend title: each label's texts per dataset, in the panels' order ("label (texts)"
    for one dataset, whose counts need no name)."""
    return f"label (texts: {' | '.join(datasets)})" if len(datasets) > 1 else "label (texts)"


def save_figure(fig, path: Path, results: pd.DataFrame | None = None) -> Path:
    """Save ``fig`` as a PNG, recording the digest of the ``results`` rows it was drawn from."""
    plt = _pyplot()
    path = Path(path)
    metadata = {**PNG_METADATA, RESULTS_KEY: results_digest(results) if results is not None else NOT_FROM_RESULTS}
    try:
        atomic_save(path, lambda fh: fig.savefig(fh, format="png", dpi=120, metadata=metadata), ".png")
    finally:  # a failed save (a full disk, a refused folder) must not keep the figure in pyplot's registry
        plt.close(fig)
    return path


def _config_label(config, sep: str = "\n") -> str:
    algorithm, reduction = config
    entry = ALGORITHMS_REGISTRY.get(algorithm)
    return f"{entry.label if entry else algorithm}{sep}{reduction}"


def _config_ticks(ax, configs) -> None:
    ax.set_xticks(np.arange(len(configs)))
    ax.set_xticklabels([_config_label(c, " / ") if isinstance(c, tuple) else str(c) for c in configs],
                       fontsize=7, rotation=60, ha="right", rotation_mode="anchor")


def value_limit(highest: float, floor: float = 0.0) -> tuple[float, float]:
    """A V-measure axis (x100) from ``floor`` (0) to a round number above ``highest``, at most 100:
    the whole scale, not a window around the data that would blow a small change up."""
    top = 10 * math.ceil((highest + 2) / 10) if np.isfinite(highest) else 100.0
    return floor, float(min(100.0, max(top, 10.0)))


def value_window(low: float, high: float, min_span: float = 10.0) -> tuple[float, float]:
    """A V-measure axis (x100) around data from ``low`` to ``high`` that spans at least ``min_span``
    points, inside 0..100: for curves whose shape matters, without blowing a 1-point change up to
    the panel's height."""
    pad = max(0.0, min_span - (high - low)) / 2 + 0.05 * (high - low)
    bottom, top = low - pad, high + pad
    if bottom < 0:
        bottom, top = 0.0, top - bottom
    if top > 100:
        bottom, top = max(0.0, bottom - (top - 100)), 100.0
    return float(bottom), float(top)


# -- what was run, for titles -------------------------------------------------------------------
def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def run_description(frame: pd.DataFrame, *, models: bool = True) -> str:
    """What a figure's rows are, in one line: models, splits per dataset (with ``--limit-splits``),
    seeds, protocol. From the rows themselves, so the title cannot say more than was run."""
    from tecb_eval.reports.versions import coverage

    parts = []
    if models:
        parts.append(_plural(frame.model.nunique(), "model"))
    fast = "protocol" in frame.columns and (frame.protocol == "fast").any()
    covered = coverage(frame)
    if fast:
        draws = sorted({c for c, _ in covered.values()})
        parts.append(f"fast protocol (MTEB v2): {'/'.join(map(str, draws))} bootstrap draws per dataset")
    else:
        limited = {d: (c, n) for d, (c, n) in covered.items() if c < n}
        if not limited:
            counts = sorted({n for _, n in covered.values()})
            parts.append(f"all splits ({'/'.join(map(str, counts))} per dataset)")
        else:
            ran = sorted({c for c, _ in covered.values()})
            totals = sorted({n for _, n in covered.values()})
            of = f"{totals[0]}" if len(totals) == 1 else f"{totals[0]}-{totals[-1]}"
            parts.append(f"{'/'.join(map(str, ran))} of {of} splits per dataset (limited: --limit-splits or skipped units)")
    seeds = sorted({int(s) for s in frame.seed}) if "seed" in frame.columns else []
    if len(seeds) == 1:
        parts.append(f"seed {seeds[0]}")
    elif seeds:
        parts.append(f"{len(seeds)} seeds ({', '.join(map(str, seeds))})")
    return ", ".join(parts)


def _title(first: str, frame: pd.DataFrame | None, demo_note: str | None, *, models: bool = True) -> str:
    lines = [first]
    if frame is not None and not frame.empty:
        lines.append(run_description(frame, models=models))
    if demo_note:
        lines.append(demo_note)
    return "\n".join(lines)


# -- Table 3 -------------------------------------------------------------------------------------
def table3_figure(table: pd.DataFrame, reference: pd.DataFrame | None = None, reference_label: str = "paper",
                  demo_note: str | None = None, frame: pd.DataFrame | None = None, *, models: int | None = None,
                  datasets: list[str] | None = None):
    """Table 3 as bars, one panel per dataset on one shared y-axis: per configuration our figure
    (the mean over models) with whiskers of ± the SD over splits (averaged over models), and the
    paper's figure beside it where ``reference`` (the paper's Table 3) has the dataset. ``table``
    is :func:`tecb_eval.reports.tables.table3` with ``stats=True`` (or without: no whiskers).

    ``demo_note``: the data is the synthetic demo sample; the paper's bars are then left out (its
    scores are on other data, and bars side by side invite the comparison) and the title says so.
    So are they beside a dataset this run did not cover whole (``frame``'s coverage: the paper's
    figure is a mean over every split) or ran with the fast protocol (the paper's is per split):
    its panel says what it covers."""
    from tecb_eval.reports.tables import has_stats

    means = table.xs("mean", axis=1, level="stat") if has_stats(table) else table
    sds = table.xs("sd_splits", axis=1, level="stat") if has_stats(table) else None
    datasets = [c for c in means.columns if c != "avg" and (datasets is None or c in datasets)]
    configs = list(means.index)
    paper_shown = reference is not None and not demo_note
    unlike = _unlike_the_paper(frame)
    cols = 2 if len(datasets) == 4 else min(3, len(datasets))
    rows = math.ceil(len(datasets) / cols)
    # A panel at most 9.2 in (1104 px) wide: a page 1280 px wide shows one dataset's panel at its own size.
    fig, axes = new_figure(rows, cols, figsize=(min(9.2, max(5.5, 0.22 * len(configs) + 1.5)) * cols, 2.6 * rows + 2.6),
                           sharey=True, squeeze=False)
    ours_label = "this run: synthetic demo data, not comparable" if demo_note else "this run"
    ours_label += " (mean over models; whiskers ± SD over splits)" if sds is not None else " (mean over models)"
    x = np.arange(len(configs))
    highest = 0.0
    for index, (ax, dataset) in enumerate(zip(axes.flat, datasets)):
        series = [(ours_label, means[dataset], sds[dataset] if sds is not None else None, 0)]
        if paper_shown and dataset in reference.columns and dataset not in unlike:
            series.append((reference_label, reference[dataset].reindex(configs), None, 1))
        n_series = len(series)
        width = 0.8 / n_series
        for i, (label, values, spread, colour) in enumerate(series):
            heights = np.array([100 * values.get(c, np.nan) for c in configs], dtype=float)
            errors = None if spread is None else np.array([100 * spread.get(c, np.nan) for c in configs], dtype=float)
            pos = x + (i - (n_series - 1) / 2) * width
            ax.bar(pos, np.nan_to_num(heights), width, yerr=None if errors is None else np.nan_to_num(errors),
                   color=OKABE_ITO[colour], ecolor="#333333", capsize=2, error_kw={"linewidth": 0.8},
                   label=label, hatch=None if i == 0 else "//", edgecolor="white" if i else None, gid=f"bars:{label}")
            for p, h in zip(pos, heights):
                # A bar of height 0 and a bar that is not there look alike: say which it is.
                if np.isnan(h):
                    ax.text(p, 0.5, MISSING, rotation=90, ha="center", va="bottom", fontsize=7, color="#555555")
                elif round(h, 1) == 0:
                    ax.text(p, 0.5, "0", ha="center", va="bottom", fontsize=7, color="#555555")
            highest = max(highest, np.nanmax(np.append(heights + (np.nan_to_num(errors) if errors is not None else 0), 0)))
        held_back = paper_shown and dataset in reference.columns and dataset in unlike
        ax.set_title(dataset + (f"\n{unlike[dataset]}" if held_back else ""), fontsize=9)
        if index + cols < len(datasets):  # a panel below shows the same configurations' names
            ax.set_xticks(x)
            ax.tick_params(axis="x", labelbottom=False)
        else:
            _config_ticks(ax, configs)
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(datasets):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("V-measure x100")
    axes.flat[0].set_ylim(*value_limit(highest))
    first = "Table 3: V-measure per algorithm and reduction"
    if models is not None:
        first += f", averaged over {_plural(models, 'model')}"
    title = _title(first, frame, demo_note, models=models is None)
    if reference is not None and demo_note:
        title += "\nThe paper's Table 3 is not drawn beside synthetic scores (table3.md lists its figures)."
    elif paper_shown and any(d in unlike for d in datasets if d in reference.columns):
        title += "\nThe paper's figure (a mean over all splits, legacy protocol) is drawn only beside a dataset this run covered alike."
    suptitle(fig, title, fontsize=10)
    fig.legend(*_legend_entries(axes.flat), loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    return fig


def _legend_entries(axes) -> tuple[list, list]:
    """Every series of any panel once (the first panel may lack the paper's bars)."""
    handles, labels = [], []
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    return handles, labels


def _unlike_the_paper(frame: pd.DataFrame | None) -> dict[str, str]:
    """Per dataset whose rows cannot stand beside the paper's figure (a mean over all its splits, each
    clustered once: the legacy protocol), what they cover instead, in a few words."""
    if frame is None or frame.empty:
        return {}
    from tecb_eval.reports.versions import coverage

    fast = set(frame.loc[frame.protocol == "fast", "mteb_name"]) if "protocol" in frame.columns else set()
    out = {}
    for dataset, (covered, total) in coverage(frame).items():
        if dataset in fast:
            out[dataset] = "fast protocol: the paper's figure not drawn"
        elif covered < total:
            out[dataset] = f"{covered} of {total} splits: the paper's figure (all {total}) not drawn"
    return out


def plot_table3(table: pd.DataFrame, path: Path, reference: pd.DataFrame | None = None,
                reference_label: str = "paper", demo_note: str | None = None, frame: pd.DataFrame | None = None,
                models: int | None = None, datasets: list[str] | None = None) -> Path:
    """:func:`table3_figure`, saved as a PNG."""
    return save_figure(table3_figure(table, reference, reference_label, demo_note, frame, models=models,
                                     datasets=datasets), path, frame)


# -- one model against the authors --------------------------------------------------------------
def model_comparison_figure(ours: pd.DataFrame, theirs: pd.DataFrame, model: str, demo_note: str | None = None,
                            frame: pd.DataFrame | None = None):
    """One model, every configuration and dataset both sides have: our figure (mean over splits,
    whiskers ± SD over splits) beside the authors' (no spread published). ``ours``:
    :func:`tecb_eval.reports.tables.split_means` rows of the model; ``theirs``: the authors' rows
    (:func:`tecb_eval.reports.tables.read_reference`). None when they share no dataset."""
    from tecb_eval.reports.tables import dataset_columns

    datasets = dataset_columns(set(ours.mteb_name) & set(theirs.mteb_name))
    if not datasets:
        return None
    configs_of = {}
    for dataset in datasets:
        have = set(ours[ours.mteb_name == dataset].set_index(["algorithm", "reduction"]).index)
        configs_of[dataset] = ([c for c in algo.PAPER_CONFIGURATIONS if c in have]
                               + sorted(have - set(algo.PAPER_CONFIGURATIONS)))
    same = len({tuple(c) for c in configs_of.values()}) == 1  # then one row of labels, under the last panel
    fig, axes = new_figure(len(datasets), 1, figsize=(10, (2.2 if same else 2.8) * len(datasets) + (2.4 if same else 1.4)),
                           squeeze=False, sharey=True, sharex=same)
    ours_label = "this run: synthetic demo data, not comparable" if demo_note else "this run"
    shown = frame[frame.model == model] if frame is not None else None
    unlike = _unlike_the_paper(shown)  # the authors' figure is a mean over all splits, legacy protocol
    highest = 0.0
    for ax, dataset in zip(axes[:, 0], datasets):
        mine = ours[ours.mteb_name == dataset].set_index(["algorithm", "reduction"])
        a, spread = mine["mean"], mine["sd"]
        b = theirs[theirs.mteb_name == dataset].set_index(["algorithm", "reduction"])["v_measure"]
        configs = configs_of[dataset]
        x = np.arange(len(configs))
        heights = np.array([100 * a.get(c, np.nan) for c in configs], dtype=float)
        errors = np.array([100 * spread.get(c, np.nan) for c in configs], dtype=float)
        theirs_h = np.array([100 * b.get(c, np.nan) for c in configs], dtype=float)
        like = dataset not in unlike
        offset = 0.2 if like else 0.0
        ax.bar(x - offset, np.nan_to_num(heights), 0.4, yerr=np.nan_to_num(errors), capsize=2, color=OKABE_ITO[0],
               ecolor="#333333", error_kw={"linewidth": 0.8}, label=f"{ours_label} (whiskers ± SD over splits)",
               gid="bars:ours")
        if like:
            ax.bar(x + 0.2, np.nan_to_num(theirs_h), 0.4, color=OKABE_ITO[1], hatch="//", edgecolor="white",
                   label="authors (no spread published)", gid="bars:authors")
        else:
            theirs_h = np.full(len(configs), np.nan)
        for pos, values in ((x - offset, heights), (x + 0.2, theirs_h)) if like else ((x, heights),):
            for p, h in zip(pos, values):
                if np.isnan(h):
                    ax.text(p, 0.5, MISSING, rotation=90, ha="center", va="bottom", fontsize=7, color="#555555")
                elif round(h, 1) == 0:
                    ax.text(p, 0.5, "0", ha="center", va="bottom", fontsize=7, color="#555555")
        highest = max(highest, np.nanmax(np.append(heights + np.nan_to_num(errors), np.nan_to_num(theirs_h))))
        if not same or ax is axes[-1, 0]:
            _config_ticks(ax, configs)
        ax.set_title(dataset + ("" if like else f"\n{unlike[dataset]}"), fontsize=9)
        ax.set_ylabel("V-measure x100")
        ax.grid(axis="y", alpha=0.3)
    axes[0, 0].set_ylim(*value_limit(highest))
    suptitle(fig, _title(f"{model}: this run against the authors' published figures", shown, demo_note, models=False),
                 fontsize=10)
    fig.legend(*_legend_entries(axes[:, 0]), loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    return fig


def plot_model_comparison(ours: pd.DataFrame, theirs: pd.DataFrame, model: str, path: Path,
                          demo_note: str | None = None, frame: pd.DataFrame | None = None) -> Path | None:
    """:func:`model_comparison_figure`, saved as a PNG (None when there is nothing to compare)."""
    fig = model_comparison_figure(ours, theirs, model, demo_note, frame)
    return None if fig is None else save_figure(fig, path, frame)


# -- Figure 1 ------------------------------------------------------------------------------------
def figure1_split(bench, splits: set[str] | None = None, split_name: str | None = None):
    """The split Figure 1 shows: ``split_name``, else the largest of ``splits`` (the splits the grid
    ran, so that ``--limit-splits`` is honoured), else the largest of the dataset."""
    from tecb_data.errors import UserError

    if split_name is not None:
        split = next((s for s in bench.splits if s.name == split_name), None)
        if split is None:
            raise UserError(f"{bench.location}: no split named {split_name!r}")
        return split
    candidates = [s for s in bench.splits if splits is None or s.name in splits] or list(bench.splits)
    return max(candidates, key=lambda s: (len(s.texts), s.name))


def cached_embeddings(cache_dir: Path | None, identity: str | None, texts) -> np.ndarray | None:
    """The vectors of ``texts`` from the grid's embedding cache under ``identity``, or None when the
    cache lacks any of them (then the caller encodes)."""
    if cache_dir is None or not identity:
        return None
    store = EmbeddingStore(cache_dir, identity)
    if store.missing(texts):
        return None
    return store.embeddings()


def umap_coordinates(bench, encoder, split_name: str | None, seed: int, cache_dir: Path | None, *,
                     identity: str | None = None, splits: set[str] | None = None):
    """(split name, 2-D UMAP coordinates, labels) for one split (:func:`figure1_split`), through the
    grid's caches. With the ``identity`` the grid stored the model's vectors under, they are read
    from the cache and ``encoder`` (a callable giving the encoder) is never called; it is only
    for texts the cache lacks."""
    split = figure1_split(bench, splits, split_name)
    embeddings = cached_embeddings(cache_dir, identity, split.texts)
    if embeddings is None:
        encoder = encoder() if callable(encoder) and not hasattr(encoder, "encode") else encoder
        store = EmbeddingStore(cache_dir if encoder.persistent else None, encoder.identity)
        store.encode_missing(split.texts, encoder.encode)
        embeddings = store.embeddings()
    base = embeddings.rows(split.texts)
    reduced = ReductionCache(cache_dir).get(
        embeddings.fingerprint(split.texts), "umap", seed, lambda: algo.reduce("umap", base, seed)
    )
    return split.name, reduced, list(split.labels)


def umap_figure(panels: list[tuple[str, np.ndarray, list[str]]], title: str):
    """The paper's Figure 1: one panel per (title, coordinates, labels), points coloured (and, past
    seven labels, shaped) by label. Neighbouring panels with the same labels (a dataset's S2S and
    P2P views) share one legend below them, which gives each label's count in every panel of the
    group; no legend sits on the points."""
    label_sets = [tuple(sorted(set(labels))) for _, _, labels in panels]
    groups: list[list[int]] = []
    for i, names in enumerate(label_sets):
        if groups and label_sets[groups[-1][0]] == names:
            groups[-1].append(i)
        else:
            groups.append([i])
    longest = max(len(s) for s in label_sets)
    fig = _pyplot().figure(layout="constrained", figsize=(4.3 * len(panels), 4.3 + 0.16 * longest))
    # One sub-figure per group, so that a group's legend goes below exactly its panels.
    subfigures = fig.subfigures(1, len(groups), width_ratios=[len(g) for g in groups], squeeze=False)[0]
    for sub, group in zip(subfigures, groups):
        axes = sub.subplots(1, len(group), squeeze=False)[0]
        for ax, i in zip(axes, group):
            name, coords, labels = panels[i]
            alpha = point_alpha(len(labels))
            for j, label in enumerate(label_sets[i]):
                mask = np.array([lab == label for lab in labels])
                colour, marker = label_style(j, len(label_sets[i]))
                ax.scatter(coords[mask, 0], coords[mask, 1], s=9, color=colour, marker=marker, linewidths=0,
                           alpha=alpha, label=label)
            ax.set_title(f"{name}\n{len(labels):,} texts, {_plural(len(label_sets[i]), 'label')}", fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
        counts = [pd.Series(panels[i][2]).value_counts() for i in group]
        handles, names = axes[0].get_legend_handles_labels()
        shown = [f"{label} ({' | '.join(str(int(c.get(label, 0))) for c in counts)})" for label in names]
        legend = sub.legend(handles, shown, fontsize=6.5, markerscale=1.4, loc="outside lower center",
                            ncol=2 if len(names) > 12 else 1, frameon=False,
                            title=legend_title([panels[i][0].split(" / ")[0] for i in group]),
                            title_fontsize=7)
        for handle in legend.legend_handles:  # the key opaque, though its points are translucent
            handle.set_alpha(1)
    suptitle(fig, title, fontsize=10)
    return fig


def plot_umap_scatter(panels: list[tuple[str, np.ndarray, list[str]]], path: Path, title: str) -> Path:
    """:func:`umap_figure`, saved as a PNG."""
    return save_figure(umap_figure(panels, title), path)


# -- Table 2 -------------------------------------------------------------------------------------
# The paired comparison with the best model of a panel (tecb_eval.reports.compare.against_best):
# colour, marker, filled, legend text.
TABLE2_MARKS = {
    "*": (OKABE_ITO[0], "D", True, "best on the dataset"),
    "=": (OKABE_ITO[1], "o", False, "behind the best, but the gap could be chance"),
    "": (OKABE_ITO[5], "s", True, "behind the best: the gap holds"),
    "?": (GREY, "x", True, "not paired with the best (no shared splits)"),
}


def table2_figure(frame: pd.DataFrame, demo_note: str | None = None, *, confidence: float = 0.95):
    """Table 2 as a dot plot, one panel per dataset on one shared x-axis: each model's figure (the
    table's: mean over seeds of the split means of k-means on the embeddings) with its
    ``confidence`` bootstrap interval over splits (:func:`tecb_eval.reports.compare.mean_interval`),
    marked by the paired comparison with the best model of the panel
    (:func:`tecb_eval.reports.compare.against_best`). On the fast protocol the draws are not
    independent, so the whiskers are ± the SD over the draws instead and no model is ranked."""
    from tecb_eval.reports.compare import against_best, independent_splits, mean_interval
    from tecb_eval.reports.tables import dataset_columns, one_version, table2

    kmeans = one_version(table2_rows(frame))
    shown = table2(kmeans, stats=True)
    datasets = dataset_columns(set(kmeans.mteb_name))
    models = sorted(set(kmeans.model))
    marks = against_best(kmeans, confidence=confidence)
    independent = independent_splits(kmeans)
    # At most three panels a row and 9.2 in (1104 px) wide: shown at its own size on a page 1280 px
    # wide, the smallest text (7 pt) stays above 10 px.
    cols = min(3, len(datasets))
    rows = math.ceil(len(datasets) / cols)
    fig, axes = new_figure(rows, cols, figsize=(min(9.2, max(6.0, 2.6 * cols + 1.6)), (0.42 * len(models) + 1.2) * rows + 1.3),
                           sharey=True, sharex=True, squeeze=False)
    for ax in list(axes.flat)[len(datasets):]:
        ax.set_visible(False)
    seen, highest = set(), 0.0
    for ax, dataset in zip(axes.flat, datasets):
        of = kmeans[kmeans.mteb_name == dataset]
        for y, model in enumerate(models):
            scores = of[of.model == model].set_index(["split", "seed"]).v_measure.sort_index()
            if scores.empty:
                continue
            mean = float(shown.at[model, (dataset, "mean")])
            if independent:
                _, low, high = mean_interval(scores, confidence=confidence, name=f"{dataset}\x1f{model}")
            else:  # the table's SD over the draws
                sd = float(np.nan_to_num(shown.at[model, (dataset, "sd_splits")]))
                low, high = mean - sd, mean + sd
            colour, marker, filled, label = TABLE2_MARKS[marks.get((model, dataset), "?")]
            if not independent and label == TABLE2_MARKS["="][3]:
                label = "not ranked against the best (the draws give no test)"
            ax.errorbar(100 * mean, y, xerr=[[100 * (mean - low)], [100 * (high - mean)]], fmt=marker, color=colour,
                        markerfacecolor=colour if filled else "white", markersize=6, capsize=3,
                        label=None if label in seen else label, gid=f"dot:{model}")
            seen.add(label)
            highest = max(highest, 100 * high)
        ax.set_title(dataset, fontsize=9)
        ax.set_xlabel("V-measure x100")
        ax.grid(axis="x", alpha=0.3)
    axes[0, 0].set_yticks(range(len(models)))
    axes[0, 0].set_yticklabels(models, fontsize=8)
    for ax in list(axes.flat)[:len(datasets)]:
        # Every panel keeps its value scale: the last row may leave a panel above with none below it.
        ax.tick_params(axis="x", labelbottom=True)
        ax.tick_params(axis="y", labelsize=8)
    axes[0, 0].set_ylim(len(models) - 0.5, -0.5)  # the first model on top
    axes[0, 0].set_xlim(*value_limit(highest))
    one_split = int(kmeans.groupby(["mteb_name", "model"]).split.nunique().max()) < 2
    if independent and one_split:  # an interval over one split is none: no whiskers promised
        what = "Dot: the one split's score (no interval over one split)"
    elif independent:
        what = f"Dot: mean over splits; whiskers: its {100 * confidence:g} % bootstrap interval"
    else:
        what = "Dot: mean over the draws; whiskers: ± SD over them (not independent: no ranking)"
    suptitle(fig, _title(f"Table 2: k-means on the embeddings. {what}", kmeans, demo_note),
                 fontsize=10)
    handles, labels = [], []
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, fontsize=7, loc="outside lower center", ncol=min(2, len(labels)), frameon=False)
    return fig


def plot_table2_dots(frame: pd.DataFrame, path: Path, demo_note: str | None = None, *,
                     confidence: float = 0.95) -> Path:
    """:func:`table2_figure`, saved as a PNG."""
    return save_figure(table2_figure(frame, demo_note, confidence=confidence), path, frame)


# The criteria a corpus without labels is drawn by over its cluster settings, in the registry's
# order, each with which way is better; then the noise, which has no direction.
CURVE_PANELS = (*((c.name, c.panel) for c in CRITERIA_BY_NAME.values()), ("noise_fraction", "noise % (texts in no cluster)"))


def label_free_curves(points: pd.DataFrame, parameter: str, title: str):
    """Each label-free criterion over the values of ``parameter`` (``"k"`` or
    ``"min_cluster_size"``), one line per pipeline (model / reduction / algorithm) of ``points``
    (one dataset's rows of a range), the mean over splits and seeds; stability with the mean of its
    interval's ends as a band. None where no pipeline has two points of that parameter."""
    from tecb_eval.grid.store import read_setting

    settings = points["setting"].map(read_setting)
    mine = points[settings.map(lambda p: p is not None and p[0] == parameter)].copy()
    if mine.empty:
        return None
    mine["x"] = [point.value for point in settings[mine.index]]
    columns = [c for c, _ in CURVE_PANELS if c in mine.columns and pd.to_numeric(mine[c], errors="coerce").notna().any()]
    for band in ("stability_ari_low", "stability_ari_high"):
        if band in mine.columns:
            columns.append(band)
    numeric = mine[["model", "reduction", "algorithm", "x"]].copy()
    for column in columns:
        numeric[column] = pd.to_numeric(mine[column], errors="coerce")
    means = numeric.groupby(["model", "reduction", "algorithm", "x"], sort=True)[columns].mean().reset_index()
    if means.groupby(["model", "reduction", "algorithm"]).size().max() < 2:
        return None
    panels = [(c, words) for c, words in CURVE_PANELS if c in columns]
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = new_figure(nrows, ncols, figsize=(4.2 * ncols + 2.6, 3.0 * nrows + 0.8), squeeze=False)
    pipelines = list(means.groupby(["model", "reduction", "algorithm"], sort=True))
    for index, (column, words) in enumerate(panels):
        ax = axes[index // ncols][index % ncols]
        for i, ((model, reduction, algorithm), line) in enumerate(pipelines):
            colour, marker = style(i)
            y = line[column] * (100 if column == "noise_fraction" else 1)
            ax.plot(line["x"], y, color=colour, marker=marker, markersize=4, linewidth=1.2,
                    label=f"{model} / {reduction} / {algorithm}")
            if column == "stability_ari" and "stability_ari_low" in line.columns:
                ax.fill_between(line["x"], line["stability_ari_low"], line["stability_ari_high"], color=colour,
                                alpha=0.15, linewidth=0)
        ax.set_title(words, fontsize=9)
        ax.set_xlabel(parameter)
        values = sorted(means["x"].unique())
        if len(values) <= 12:
            ax.set_xticks(values)
        else:
            from matplotlib.ticker import MaxNLocator

            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, linewidth=0.4, color="#dddddd")
        if column == "noise_fraction":
            ax.set_ylim(-2, 100)  # a line at 0 (no noise) stays in sight above the axis
        elif column == "stability_ari":
            ax.set_ylim(min(0.0, float(means["stability_ari_low"].min()) if "stability_ari_low" in means else 0.0), 1.02)
    for index in range(len(panels), nrows * ncols):
        axes[index // ncols][index % ncols].set_visible(False)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize=8, title="model / reduction / algorithm",
               title_fontsize=8)
    suptitle(fig, title)
    return fig


def plot_label_free_curves(points: pd.DataFrame, parameter: str, path: Path, title: str) -> Path | None:
    """:func:`label_free_curves`, saved as a PNG; None (nothing written) where it draws nothing."""
    fig = label_free_curves(points, parameter, title)
    return None if fig is None else save_figure(fig, path, points)
