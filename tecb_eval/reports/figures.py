"""PNG plots: Table 3 as bars (ours, and against the paper's), per-model comparisons with the
authors' numbers, and the paper's Figure 1 (a 2-D UMAP of one split, coloured by label).

The UMAP scatter reads its embeddings and reduction through the grid's caches, so after a grid
run it costs no encoding and no UMAP fit. PNGs are written without a timestamp or software tag,
so equal inputs give equal files.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tecb_eval.clustering import algorithms as algo
from tecb_eval.files import atomic_save
from tecb_eval.grid.cache import EmbeddingStore, ReductionCache

PNG_METADATA = {"Software": None}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    plt = _pyplot()
    path = Path(path)
    atomic_save(path, lambda fh: fig.savefig(fh, format="png", dpi=120, metadata=PNG_METADATA), ".png")
    plt.close(fig)
    return path


def _config_label(config) -> str:
    algorithm, reduction = config
    short = {"minibatch_kmeans": "k-means", "agglomerative": "agglom.", "hdbscan": "HDBSCAN", "dbstream": "DBSTREAM"}
    return f"{short.get(algorithm, algorithm)}\n{reduction}"


def plot_bars(series: dict[str, pd.Series], path: Path, title: str, ylabel: str = "V-measure x100") -> Path:
    """Grouped bars: one group per index entry (a configuration), one bar per named series."""
    plt = _pyplot()
    index = list(next(iter(series.values())).index)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.8 * len(index) + 2), 4.2))
    width = 0.8 / len(series)
    for i, (name, values) in enumerate(series.items()):
        heights = [100 * values.get(key, np.nan) for key in index]
        ax.bar(np.arange(len(index)) + (i - (len(series) - 1) / 2) * width, heights, width, label=name)
    ax.set_xticks(np.arange(len(index)))
    ax.set_xticklabels([_config_label(k) if isinstance(k, tuple) else str(k) for k in index], fontsize=7)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    if len(series) > 1:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def plot_table3(table: pd.DataFrame, path: Path, reference: pd.DataFrame | None = None,
                reference_label: str = "paper", demo_note: str | None = None) -> Path:
    """Table 3's average column as bars; with the paper's Table 3 beside it when given, both
    averaged over the datasets they share. ``demo_note`` marks the plot as not comparable with the
    paper (in the title and in our bars' legend label), for data that is not the paper's."""
    ours_label = "this run: synthetic demo data, not comparable" if demo_note else "this run"
    series = {f"{ours_label} (avg over models and datasets)": table["avg"]}
    title = "Table 3: V-measure per algorithm and reduction"
    if reference is not None:
        common = [d for d in table.columns if d in reference.columns and d != "avg"]
        ours = table[common].mean(axis=1)
        theirs = reference.loc[:, common].mean(axis=1)
        series = {ours_label: ours, reference_label: theirs}
        title += f" on {', '.join(common)}"
    if demo_note:
        title += "\n" + demo_note
    return plot_bars(series, path, title)


def plot_model_comparison(ours: pd.DataFrame, theirs: pd.DataFrame, model: str, path: Path,
                          demo_note: str | None = None) -> Path | None:
    """One model, every configuration and dataset both sides have: our split means vs the authors'."""
    plt = _pyplot()
    datasets = sorted(set(ours.mteb_name) & set(theirs.mteb_name))
    if not datasets:
        return None
    fig, axes = plt.subplots(len(datasets), 1, figsize=(10, 3.2 * len(datasets)), squeeze=False)
    for ax, dataset in zip(axes[:, 0], datasets):
        a = ours[ours.mteb_name == dataset].set_index(["algorithm", "reduction"])["mean"]
        b = theirs[theirs.mteb_name == dataset].set_index(["algorithm", "reduction"])["v_measure"]
        configs = [c for c in algo.PAPER_CONFIGURATIONS if c in a.index] + sorted(set(a.index) - set(algo.PAPER_CONFIGURATIONS))
        x = np.arange(len(configs))
        ax.bar(x - 0.2, [100 * a.get(c, np.nan) for c in configs], 0.4,
               label="this run: synthetic demo data, not comparable" if demo_note else "this run")
        ax.bar(x + 0.2, [100 * b.get(c, np.nan) for c in configs], 0.4, label="authors")
        ax.set_xticks(x)
        ax.set_xticklabels([_config_label(c) for c in configs], fontsize=7)
        ax.set_title(f"{model} on {dataset}" + (f"\n{demo_note}" if demo_note else ""), fontsize=10)
        ax.set_ylabel("V-measure x100")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def umap_coordinates(bench, encoder, split_name: str | None, seed: int, cache_dir: Path | None):
    """(split name, 2-D UMAP coordinates, labels) for one split (default: the largest), through
    the grid's caches."""
    if split_name is None:
        split = max(bench.splits, key=lambda s: (len(s.texts), s.name))
    else:
        split = next((s for s in bench.splits if s.name == split_name), None)
    if split is None:
        from tecb_data.errors import UserError

        raise UserError(f"{bench.location}: no split named {split_name!r}")
    store = EmbeddingStore(cache_dir if getattr(encoder, "persistent", True) else None, encoder.identity)
    store.encode_missing(split.texts, encoder.encode)
    embeddings = store.embeddings()
    base = embeddings.rows(split.texts)
    reduced = ReductionCache(cache_dir).get(
        embeddings.fingerprint(split.texts), "umap", seed, lambda: algo.reduce("umap", base, seed)
    )
    return split.name, reduced, list(split.labels)


def plot_umap_scatter(panels: list[tuple[str, np.ndarray, list[str]]], path: Path, title: str) -> Path:
    """The paper's Figure 1: one panel per (title, coordinates, labels), points coloured by label."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.4), squeeze=False)
    for ax, (name, coords, labels) in zip(axes[0], panels):
        names = sorted(set(labels))
        colour = {label: i for i, label in enumerate(names)}
        cmap = plt.get_cmap("tab20" if len(names) > 10 else "tab10")
        for label in names:
            mask = np.array([lab == label for lab in labels])
            ax.scatter(coords[mask, 0], coords[mask, 1], s=6, color=cmap(colour[label] % cmap.N), label=label)
        ax.set_title(name, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
        if len(names) <= 12:
            ax.legend(fontsize=6, markerscale=2, loc="best")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def plot_table2_dots(frame: pd.DataFrame, path: Path, demo_note: str | None = None, *,
                     confidence: float = 0.95) -> Path:
    """Table 2 as a dot plot, one panel per dataset: each model's figure (the mean over seeds of
    the split means of k-means on the embeddings) with its bootstrap interval over splits and seeds
    (:func:`tecb_eval.reports.compare.mean_interval`), coloured by the paired comparison with the best
    model of the panel (:func:`tecb_eval.reports.compare.against_best`)."""
    from tecb_eval.reports.compare import against_best, mean_interval
    from tecb_eval.reports.tables import _dataset_columns

    plt = _pyplot()
    kmeans = frame[(frame.algorithm == "minibatch_kmeans") & (frame.reduction == "none")]
    datasets = _dataset_columns(set(kmeans.mteb_name))
    models = sorted(set(kmeans.model))
    marks = against_best(kmeans, confidence=confidence)
    colours = {"*": ("tab:red", "best"), "=": ("tab:orange", "difference to the best does not hold"),
               "": ("tab:blue", "the best is surely ahead"), "?": ("tab:gray", "not paired with the best")}
    fig, axes = plt.subplots(1, len(datasets), figsize=(3.2 * len(datasets) + 1.5, 0.45 * len(models) + 1.6),
                             sharey=True, squeeze=False)
    seen = set()
    for ax, dataset in zip(axes[0], datasets):
        of = kmeans[kmeans.mteb_name == dataset]
        for y, model in enumerate(models):
            scores = of[of.model == model].set_index(["split", "seed"]).v_measure.sort_index()
            if scores.empty:
                continue
            mean, low, high = mean_interval(scores, confidence=confidence, name=f"{dataset}\x1f{model}")
            colour, label = colours[marks.get((model, dataset), "?")]
            ax.errorbar(100 * mean, y, xerr=[[100 * (mean - low)], [100 * (high - mean)]], fmt="o", color=colour,
                        capsize=3, label=None if label in seen else label)
            seen.add(label)
        ax.set_title(dataset, fontsize=9)
        ax.set_xlabel("V-measure x100")
        ax.grid(axis="x", alpha=0.3)
    axes[0, 0].set_yticks(range(len(models)))
    axes[0, 0].set_yticklabels(models, fontsize=8)
    axes[0, 0].invert_yaxis()
    title = (f"Table 2: k-means on the embeddings, mean over splits and seeds with its "
             f"{100 * confidence:g} % bootstrap interval")
    if demo_note:
        title += "\n" + demo_note
    fig.suptitle(title, fontsize=10)
    fig.legend(fontsize=7, loc="lower center", ncol=4, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return _save(fig, path)
