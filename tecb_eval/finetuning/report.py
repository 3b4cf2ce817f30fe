"""The summary of a fine-tuning run: a Table-5-like table (no training, triplet, contrastive, COB
and COB's ablations) with bootstrap intervals, paired comparisons through
``tecb_eval.reports.compare`` against no training and against triplet, and the curve figure."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from tecb_data.seeding import DEFAULT_SEED
from tecb_eval.files import markdown_text as md
from tecb_eval.finetuning.scoring import HAC, KMEANS
from tecb_eval.finetuning.settings import BASELINE, METHODS
from tecb_eval.reports import compare, figures

# (column, configuration, metric): the benchmark's score, then the metric COB optimises.
METRICS = (("V-measure (k-means)", KMEANS, "v_measure"), ("ARI (HAC)", HAC, "ari"), ("NMI (HAC)", HAC, "nmi"),
           ("RI (HAC)", HAC, "ri"))
SUMMARY_FIELDS = ("dataset", "method", "metric", "mean", "low", "high", "splits", "pairs")
COMPARISON_FIELDS = ("dataset", "metric", "model_a", "model_b", "difference", "low", "high", "p_value", "splits",
                     "seeds", "holds")


def order(methods) -> list[str]:
    return [BASELINE] + [m for m in METHODS if m in methods]


def _series(frame: pd.DataFrame, method: str, dataset: str, algorithm: str, metric: str) -> pd.Series:
    rows = frame[(frame.model == method) & (frame.mteb_name == dataset) & (frame.algorithm == algorithm)]
    return rows.set_index(["split", "seed"])[metric].dropna().sort_index()


def summarize(frame: pd.DataFrame, methods, *, resamples: int, seed: int = DEFAULT_SEED) -> list[dict]:
    rows = []
    for dataset in sorted(frame.mteb_name.unique()):
        for method in order(methods):
            for column, algorithm, metric in METRICS:
                scores = _series(frame, method, dataset, algorithm, metric)
                if scores.empty:
                    continue
                mean, low, high = compare.mean_interval(scores, resamples=resamples, seed=seed,
                                                        name=f"{dataset}/{method}/{metric}")
                rows.append({"dataset": dataset, "method": method, "metric": column, "mean": mean, "low": low,
                             "high": high, "splits": int(scores.index.get_level_values("split").nunique()),
                             "pairs": len(scores)})
    return rows


def comparisons(frame: pd.DataFrame, methods, *, resamples: int, seed: int = DEFAULT_SEED) -> list[dict]:
    """Each method against no training, and each other method against triplet, per metric."""
    pairs = [(m, BASELINE) for m in order(methods)[1:]]
    if "triplet" in methods:
        pairs += [(m, "triplet") for m in order(methods)[1:] if m != "triplet"]
    rows = []
    for a, b in pairs:
        for column, algorithm, metric in METRICS:
            for c in compare.compare(frame, a, b, algorithm=algorithm, metric=metric, resamples=resamples, seed=seed):
                rows.append({"dataset": c.dataset, "metric": column, "model_a": a, "model_b": b,
                             "difference": c.difference, "low": c.low, "high": c.high, "p_value": c.p_value,
                             "splits": c.splits, "seeds": c.seeds, "holds": c.record()["holds"]})
    return rows


def _cell(value: float) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{100 * value:.2f}"


# An interval (or a p-value) over fewer than two splits is no interval: it is printed as this.
NO_INTERVAL = "–"


def _interval(r: dict) -> str:
    if r["splits"] < 2 or r["low"] is None or math.isnan(r["low"]):
        return NO_INTERVAL
    return f"{_cell(r['low'])}, {_cell(r['high'])}"


def _methods_text(methods, settings: dict) -> str:
    """What each method run is, for those run only."""
    described = {
        "cob": f"the paper's loss (lambda {settings['lambda']:g}, r {settings['reg']:g})",
        "cob-r0": "COB without the regulariser",
        "reg-only": "the regulariser alone",
        "triplet": "sentence-transformers' "
                   + (f"TripletLoss on {settings['triples_per_instance']} random triples per instance"
                      if settings.get("triples_per_instance") else
                      f"TripletLoss on 1/{settings.get('triple_fraction', 25)} of each instance's valid triples"),
        "contrastive": "BatchAllTripletLoss over each instance's labels",
    }
    shown = [f"{BASELINE} = the model without training"] + [f"{m} = {described[m]}" for m in METHODS if m in methods]
    return "Methods: " + "; ".join(shown) + "."


def _held_out(fold: dict) -> str:
    """What a fold holds out, in words; a transfer fold holds out no genre (it scores other datasets)."""
    genre = fold.get("held_out_genre")
    return f"held out {md(genre)}, " if genre else "trained on every genre but the validation one, "


def markdown(summary: list[dict], compared: list[dict], *, model: str, protocol: str, folds: list[dict],
             settings: dict, seeds, score_seeds, confidence: float = compare.DEFAULT_CONFIDENCE,
             untrained=(), demo_note: str | None = None) -> str:
    """The summary; ``untrained``: methods whose every unit kept its step-0 checkpoint (the model
    without training, the same model as ``none``); ``demo_note``: the data are synthetic, said first."""
    lines = [demo_note, ""] if demo_note else []
    lines += [f"Fine-tuning {md(model)} on a clustering metric, protocol `{protocol}`: {len(folds)} fold(s), training "
              f"seed(s) {', '.join(map(str, seeds))}, scored with seeds {', '.join(map(str, score_seeds))}.", ""]
    for dataset in dict.fromkeys(r["dataset"] for r in summary):
        lines.append(f"**{md(dataset)}** (x 100, mean over the scored splits of each split's mean over seeds, "
                     f"[{100 * confidence:g} % bootstrap interval over splits])")
        lines.append("")
        lines.append("| method | " + " | ".join(c for c, _, _ in METRICS) + " |")
        lines.append("|---" + "|---:" * len(METRICS) + "|")
        for method in dict.fromkeys(r["method"] for r in summary if r["dataset"] == dataset):
            cells = []
            for column, _, _ in METRICS:
                r = next((r for r in summary if r["dataset"] == dataset and r["method"] == method
                          and r["metric"] == column), None)
                cells.append("" if r is None else f"{_cell(r['mean'])} [{_interval(r)}]")
            name = f"{method} (step 0: untrained)" if method in untrained else method
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    for method in untrained:
        lines.append(f"`{method}` kept its step-0 checkpoint in every unit (no evaluation after training beat the "
                     f"untrained model on the validation genre): its rows score the model without training, the "
                     f"same model as `{BASELINE}`.")
        lines.append("")
    if compared:
        lines.append(f"Paired differences A - B x 100 by (split, seed) ({100 * confidence:g} % interval, p from sign "
                     "flips of the per-split differences; `holds`: the interval excludes 0 and p < 0.05):")
        lines.append("")
        lines.append("| dataset | A - B | metric | difference | interval | p | splits | holds |")
        lines.append("|---|---|---|---:|---|---:|---:|---|")
        for c in compared:
            one = c["splits"] < 2  # no interval, no p-value, no verdict over one split
            interval = NO_INTERVAL if one or math.isnan(c["low"]) else f"{_cell(c['low'])} to {_cell(c['high'])}"
            p = NO_INTERVAL if one or math.isnan(c["p_value"]) else f"{c['p_value']:.4f}"
            holds = "n/a" if one else {True: "yes", False: "no", None: "n/a"}[c["holds"]]
            lines.append(f"| {md(c['dataset'])} | {md(c['model_a'])} - {md(c['model_b'])} | {c['metric']} | "
                         f"{_cell(c['difference'])} | {interval} | {p} | {c['splits']} | {holds} |")
        lines.append("")
    lines.append("Folds: " + "; ".join(
        f"{f['id']} = {md(f['fold'])} ({_held_out(f)}validation {md(f['validation_genre'])}, "
        f"{f['train_texts']} training texts, {f['train_labels']} labels)" for f in folds) + ".")
    run = dict.fromkeys(r["method"] for r in summary if r["method"] != BASELINE)
    lines.append(_methods_text(run, settings) + " Each fold's checkpoint is chosen by ARI on its validation genre, "
                 "never on a scored split.")
    lines.append(f"The figure tracks another number: at every evaluated step, the mean k-means V-measure (k-means "
                 f"seed {settings.get('kmeans_seed', DEFAULT_SEED)}) over all of a fold's scored splits, of the model at that "
                 "step; the tables score each unit's chosen checkpoint per dataset with the scoring seeds above.")
    return "\n".join(lines) + "\n"


def _mean_and_interval(groups) -> tuple[pd.Series, pd.Series, pd.Series]:
    """Per step: the mean over the folds and seeds evaluated there, and the 95 % interval of that
    mean (Student's t on their spread; the mean itself where a single value was evaluated)."""
    from scipy import stats

    means, counts, errors = groups.mean(), groups.count(), groups.sem(ddof=1)
    half = errors.fillna(0.0) * [float(stats.t.ppf(0.975, n - 1)) if n > 1 else 0.0 for n in counts]
    return means, means - half, means + half


def plot(evaluations: pd.DataFrame, title: str, path: Path, *, kmeans_seed: int = DEFAULT_SEED) -> None:
    """Validation ARI and the scored splits' V-measure tracked over the steps, per method: the mean
    over the folds and seeds evaluated at that step, its 95 % interval shaded where two or more were
    (one fold and seed: no band, and the legend promises none), in the house style of the other
    figures. The tracked V-measure (one k-means seed, all of a fold's scored splits, the model at
    that step) is labelled apart from the summary's score of the chosen checkpoint."""
    fig, axes = figures.new_figure(1, 2, figsize=(10, 3.8))
    lows, highs = [], []
    units = evaluations.groupby("step").size().max() if not evaluations.empty else 0
    banded = bool(units and units > 1)
    for i, method in enumerate(m for m in METHODS if m in set(evaluations.method)):
        colour, marker = figures.style(i)
        rows = evaluations[evaluations.method == method].groupby("step")
        for ax, column in zip(axes, ("validation_ari", "scored_v_measure")):
            means, low, high = (series * 100 for series in _mean_and_interval(rows[column]))
            if banded:
                ax.fill_between(means.index, low.to_numpy(), high.to_numpy(), color=colour, alpha=0.15, linewidth=0)
            ax.plot(means.index, means.to_numpy(), marker=marker, markersize=3, color=colour, label=method)
            if column == "scored_v_measure":
                lows.append(float(low.min()))
                highs.append(float(high.max()))
    # Step 0 of every curve is the model without training. The V-measure axis spans at least 10
    # points, so that a 1-point change is not drawn as the panel's height (ARI can be negative).
    if lows:
        axes[1].set_ylim(*figures.value_window(min(lows), max(highs)))
    axes[0].set_ylabel("validation ARI x 100 (HAC, true k)")
    axes[1].set_ylabel(f"tracked V-measure x 100\n(k-means seed {kmeans_seed}, mean over scored splits)", fontsize=9)
    from matplotlib.ticker import MaxNLocator

    for ax in axes:
        ax.set_xlabel("optimizer step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=8, title="mean; band: 95 % interval over folds" if banded else "one fold and seed: no band",
                   title_fontsize=7)
    figures.suptitle(fig, title)
    figures.save_figure(fig, path)
