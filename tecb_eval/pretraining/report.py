"""The paper's Figure 2 (V-measure over training, mean over seeds with the min-max band and the
model without pre-training as a line) and a Table-5 style summary, from ``evaluations.csv``.

A summary covers one or several runs: one run per dataset (the default, as the paper), or one
run on the pooled datasets. Each row says which profile it ran under and what its model was
trained on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tecb_eval.files import markdown_text as md, write_rows_csv
from tecb_eval.training.encoding import LOGITS

SUMMARY_FIELDS = ("profile", "method", "trained_on", "checkpoint", "dataset", "seeds", "mean", "sd", "min", "max",
                  "baseline", "delta")
AVERAGE = "avg"
POOLED = "pooled"  # trained_on of a model trained on the union of the datasets
PER_DATASET = "per-dataset"  # trained_on of the average over per-dataset runs


@dataclass(frozen=True)
class RunRows:
    """What the summary needs of one run: its evaluations, each seed's best step, what it trained on."""

    trained_on: str  # the dataset's name, or POOLED
    rows: list  # its evaluations.csv rows
    best_steps: dict  # seed -> step of the best evaluation
    epochs_done: float
    evaluation: dict | None = None  # how it evaluated: run.json's "evaluation"


def _by_dataset(rows: list[dict]) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    for row in rows:
        grouped.setdefault(row["dataset"], []).append(row)
    return grouped


def baseline_scores(rows: list[dict]) -> dict[str, float]:
    """V-measure per dataset at step 0, the model without pre-training."""
    return {name: float(np.mean([r["v_measure"] for r in group if r["step"] == 0]))
            for name, group in _by_dataset(rows).items()}


def _sd(values: list[float]) -> float:
    # The sample SD over seeds, as a paper reports it; a single seed has no spread.
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def summarize(runs: list[RunRows], *, profile: str) -> list[dict]:
    """Per dataset, and over datasets when there are several: the V-measure after the last step and
    at each seed's best checkpoint (mean, SD, min, max over seeds) and the change from the model
    without pre-training. A dataset's scores come from the run that evaluated it; the average over
    datasets pairs the runs by seed."""
    method = runs[0].rows[0]["method"]
    seeds = sorted({r["seed"] for r in runs[0].rows})
    per_seed: dict[tuple[str, str], list[float]] = {}
    baseline: dict[str, float] = {}
    trained_on: dict[str, str] = {}
    for run in runs:
        last_steps = {seed: max(r["step"] for r in run.rows if r["seed"] == seed) for seed in seeds}
        score = {(r["seed"], r["step"], r["dataset"]): r["v_measure"] for r in run.rows}
        for dataset, value in baseline_scores(run.rows).items():
            baseline[dataset] = value
            trained_on[dataset] = run.trained_on
            for checkpoint, steps in (("last", last_steps), ("best", run.best_steps)):
                per_seed[(checkpoint, dataset)] = [score[(s, steps[s], dataset)] for s in seeds]
    datasets = list(trained_on)
    if len(datasets) > 1:
        baseline[AVERAGE] = float(np.mean([baseline[d] for d in datasets]))
        trained_on[AVERAGE] = runs[0].trained_on if len(runs) == 1 else PER_DATASET
        for checkpoint in ("last", "best"):
            per_seed[(checkpoint, AVERAGE)] = [float(np.mean([per_seed[(checkpoint, d)][i] for d in datasets]))
                                               for i in range(len(seeds))]
    summary = []
    for checkpoint in ("last", "best"):
        for dataset in trained_on:
            values = per_seed[(checkpoint, dataset)]
            mean = float(np.mean(values))
            summary.append({
                "profile": profile, "method": method, "trained_on": trained_on[dataset], "checkpoint": checkpoint,
                "dataset": dataset, "seeds": len(values), "mean": mean, "sd": _sd(values),
                "min": float(min(values)), "max": float(max(values)),
                "baseline": baseline[dataset], "delta": mean - baseline[dataset],
            })
    return summary


def write_summary_csv(summary: list[dict], path: Path) -> None:
    write_rows_csv(summary, SUMMARY_FIELDS, path)


def evaluation_note(summary: list[dict], evaluations: list[dict]) -> str:
    """How the evaluations encoded the model, and, where they did not encode it as the grid does
    (logits pooling), what the grid scores instead. ``evaluations``: each run's ``evaluation`` of
    run.json."""
    first = evaluations[0]
    if first["pooling"] != LOGITS:
        return ("Every evaluation, the model without pre-training included, encodes the model as `tecb-eval run` "
                f"does: {first['encoding']}. A kept checkpoint is the same kind of model (a sentence-transformers "
                "folder when the model is one), and the grid scores it what its evaluation here scored.")
    base = {r["dataset"]: r["baseline"] for r in summary}
    moved = []
    for evaluation in evaluations:
        for dataset, grid in evaluation["grid_baseline"].items():
            text = (f"{md(dataset)}: {100 * grid:.2f} without pre-training (the logits pooling gives "
                    f"{100 * base[dataset]:.2f}, {100 * (base[dataset] - grid):+.2f})")
            kept = [scores[dataset] for scores in evaluation.get("grid_best", {}).values()]
            if kept:
                text += f", {100 * float(np.mean(kept)):.2f} for the kept best checkpoints (mean over seeds)"
            moved.append(text)
    return ("Each WWM evaluation, the model without pre-training included, mean-pools the masked-LM head's output, "
            "the vocabulary logits (attention-masked), as the authors' evaluator did, and the best checkpoint is "
            "chosen on these scores. This is not how the grid encodes the model, or a kept checkpoint "
            f"(`tecb_eval.get_encoder`): it uses {first['encoding']}, and scores " + "; ".join(moved) + ".")


def summary_markdown(summary: list[dict], *, model: str, epochs_done: dict[str, float], profile,
                     evaluations: list[dict]) -> str:
    """Table 5's shape: V-measure x 100, mean over seeds, SD, and the change from no pre-training.

    ``epochs_done``: epochs trained per run (trained_on -> epochs); ``profile``: a
    :class:`tecb_eval.clustering.profiles.Profile`; ``evaluations``: how each run evaluated (see
    :func:`evaluation_note`)."""
    datasets = list(dict.fromkeys(r["dataset"] for r in summary))
    real = [d for d in datasets if d != AVERAGE]
    pooled = any(r["trained_on"] == POOLED for r in summary)
    epochs = sorted(set(epochs_done.values()))
    shown_epochs = f"{epochs[0]:g}" if len(epochs) == 1 else "see below"
    trained = f"{len(real)} datasets pooled" if pooled else "its own dataset"
    lines = [f"Profile `{profile.name}`: {profile.description}.", ""]
    lines.append(f"| model | method (epochs) | trained on | checkpoint | {' | '.join(map(md, datasets))} |")
    lines.append("|" + " --- |" * (4 + len(datasets)))
    base = {r["dataset"]: r["baseline"] for r in summary}
    model = md(model)  # a folder's name or a Hub id, written into Markdown
    lines.append(f"| {model} | none | - | - | " + " | ".join(f"{100 * base[d]:.2f}" for d in datasets) + " |")
    method = summary[0]["method"].upper()
    for checkpoint in ("last", "best"):
        cells = []
        for d in datasets:
            r = next(r for r in summary if r["checkpoint"] == checkpoint and r["dataset"] == d)
            # One seed has no spread: "–", not 0.00.
            spread = f"{100 * r['sd']:.2f}" if r["seeds"] > 1 else "–"
            cells.append(f"{100 * r['mean']:.2f} ± {spread} ({100 * r['delta']:+.2f})")
        lines.append(f"| {model} | {method} ({shown_epochs}) | {trained} | {checkpoint} | " + " | ".join(cells) + " |")
    seeds = summary[0]["seeds"]
    lines.append("")
    lines.append(f"V-measure x 100 with Minibatch k-Means, mean ± SD over {seeds} seed(s), "
                 "(change from the model without pre-training); a dataset's score is the mean over its splits; "
                 "`last` is the model after training, `best` each seed's best evaluation by mean V-measure.")
    if pooled:
        lines.append(f"One model per seed, trained on the union of the {len(real)} datasets' unique texts (pooled) "
                     "and evaluated on each; the paper trained one model per dataset.")
    else:
        lines.append("One model per dataset and seed, trained on that dataset's unique texts and evaluated on it, "
                     "as the paper did" + ("; `avg` averages the datasets' runs seed by seed." if AVERAGE in datasets
                                           else "."))
    if len(epochs) > 1:
        lines.append("Epochs trained: " + ", ".join(f"{md(name)} {e:g}" for name, e in epochs_done.items()) + ".")
    lines.append(evaluation_note(summary, evaluations))
    return "\n".join(lines) + "\n"


def curves_figure(rows: list[dict], *, title: str, average: bool = True):
    """Figure 2: one panel per dataset (and, with ``average``, their average), V-measure over epochs:
    the mean over seeds, the min-max band over seeds (with several), the model without
    pre-training dashed. Panels share their y-axis, which spans at least 10 points
    (:func:`tecb_eval.reports.figures.value_window`) so that a 1-point change looks like one.

    No average across separate runs per dataset: their evaluations fall on different steps."""
    from tecb_eval.reports.figures import OKABE_ITO, new_figure, suptitle, value_window

    grouped = _by_dataset(rows)
    if average and len(grouped) > 1:
        averaged: dict[tuple, list[float]] = {}
        for row in rows:
            averaged.setdefault((row["seed"], row["step"], row["epoch"]), []).append(row["v_measure"])
        grouped[AVERAGE] = [{"seed": s, "step": st, "epoch": e, "v_measure": float(np.mean(v))}
                            for (s, st, e), v in averaged.items()]
    seeds = sorted({r["seed"] for r in rows})
    n = len(grouped)
    cols = min(3, n)
    nrows = int(np.ceil(n / cols))
    fig, axes = new_figure(nrows, cols, figsize=(max(6.0, 4.2 * cols), 3.0 * nrows + 1.4), squeeze=False, sharey=True)
    low, high = np.inf, -np.inf
    for ax, (dataset, group) in zip(axes.flat, grouped.items()):
        steps = sorted({r["step"] for r in group})
        epoch_of = {r["step"]: r["epoch"] for r in group}
        values = [[r["v_measure"] * 100 for r in group if r["step"] == s] for s in steps]
        x = [epoch_of[s] for s in steps]
        if len(seeds) > 1:
            ax.fill_between(x, [min(v) for v in values], [max(v) for v in values], alpha=0.25, color=OKABE_ITO[0],
                            linewidth=0, label=f"min-max over the {len(seeds)} seeds")
        mean = [float(np.mean(v)) for v in values]
        ax.plot(x, mean, marker="o", markersize=3, color=OKABE_ITO[0], gid=f"line:{dataset}",
                label="mean over seeds" if len(seeds) > 1 else f"seed {seeds[0]}")
        base = float(np.mean(values[0])) if steps and steps[0] == 0 else None
        if base is not None:
            ax.axhline(base, color=OKABE_ITO[5], linestyle="--", linewidth=1, label="without pre-training")
        low, high = min(low, min(min(v) for v in values)), max(high, max(max(v) for v in values))
        ax.set_title(dataset, fontsize=10)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel("V-measure x 100")
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    if np.isfinite(low):
        axes.flat[0].set_ylim(*value_window(low, high))
    fig.legend(*axes.flat[0].get_legend_handles_labels(), loc="outside lower center", ncol=3, fontsize=8,
               frameon=False)
    seeds_text = f"{len(seeds)} seeds ({', '.join(map(str, seeds))})" if len(seeds) > 1 else f"seed {seeds[0]}"
    suptitle(fig, f"{title}\nMinibatch k-Means V-measure, mean over each dataset's splits; {seeds_text}", fontsize=10)
    return fig


def plot_curves(rows: list[dict], path: Path, *, title: str, average: bool = True) -> None:
    """:func:`curves_figure`, saved as a PNG (no software version or date in the file: the same run
    gives the same bytes)."""
    from tecb_eval.reports.figures import save_figure

    save_figure(curves_figure(rows, title=title, average=average), path)
