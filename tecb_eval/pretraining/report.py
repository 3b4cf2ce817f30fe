"""The paper's Figure 2 (V-measure over training, mean over seeds with the min-max band and the
model without pre-training as a line) and a Table-5 style summary, from ``evaluations.csv``."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

SUMMARY_FIELDS = ("method", "checkpoint", "dataset", "seeds", "mean", "sd", "min", "max", "baseline", "delta")
AVERAGE = "avg"


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


def summarize(rows: list[dict], best_steps: dict[int, int]) -> list[dict]:
    """Per dataset and over datasets: the V-measure after the last step and at each seed's best
    checkpoint (mean, SD, min, max over seeds) and the change from the model without pre-training."""
    method = rows[0]["method"]
    datasets = list(_by_dataset(rows))
    baseline = baseline_scores(rows)
    seeds = sorted({r["seed"] for r in rows})
    last_steps = {seed: max(r["step"] for r in rows if r["seed"] == seed) for seed in seeds}
    score = {(r["seed"], r["step"], r["dataset"]): r["v_measure"] for r in rows}
    summary = []
    for checkpoint, steps in (("last", last_steps), ("best", best_steps)):
        per_seed = {d: [score[(s, steps[s], d)] for s in seeds] for d in datasets}
        per_seed[AVERAGE] = [float(np.mean([score[(s, steps[s], d)] for d in datasets])) for s in seeds]
        base = {**baseline, AVERAGE: float(np.mean([baseline[d] for d in datasets]))}
        for dataset, values in per_seed.items():
            mean = float(np.mean(values))
            summary.append({
                "method": method, "checkpoint": checkpoint, "dataset": dataset, "seeds": len(values),
                "mean": mean, "sd": _sd(values), "min": float(min(values)), "max": float(max(values)),
                "baseline": base[dataset], "delta": mean - base[dataset],
            })
    return summary


def write_summary_csv(summary: list[dict], path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(SUMMARY_FIELDS)
        for row in summary:
            writer.writerow([repr(row[f]) if isinstance(row[f], float) else row[f] for f in SUMMARY_FIELDS])


def summary_markdown(summary: list[dict], *, model: str, epochs_done: float) -> str:
    """Table 5's shape: V-measure x 100, mean over seeds, SD, and the change from no pre-training."""
    datasets = list(dict.fromkeys(r["dataset"] for r in summary))
    head = f"| model | method (epochs) | checkpoint | {' | '.join(datasets)} |"
    lines = [head, "|" + " --- |" * (3 + len(datasets))]
    base = {r["dataset"]: r["baseline"] for r in summary}
    lines.append(f"| {model} | none | - | " + " | ".join(f"{100 * base[d]:.2f}" for d in datasets) + " |")
    for checkpoint in ("last", "best"):
        cells = []
        for d in datasets:
            r = next(r for r in summary if r["checkpoint"] == checkpoint and r["dataset"] == d)
            cells.append(f"{100 * r['mean']:.2f} ± {100 * r['sd']:.2f} ({100 * r['delta']:+.2f})")
        method = summary[0]["method"].upper()
        lines.append(f"| {model} | {method} ({epochs_done:g}) | {checkpoint} | " + " | ".join(cells) + " |")
    seeds = summary[0]["seeds"]
    lines.append("")
    lines.append(f"V-measure x 100 with Minibatch k-Means, mean ± SD over {seeds} seed(s), "
                 "(change from the model without pre-training); a dataset's score is the mean over its splits; "
                 "`last` is the model after training, `best` each seed's best evaluation by mean V-measure.")
    return "\n".join(lines) + "\n"


def plot_curves(rows: list[dict], path: Path, *, title: str) -> None:
    """Figure 2: one panel per dataset (and their average), V-measure over epochs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grouped = _by_dataset(rows)
    if len(grouped) > 1:
        averaged: dict[tuple, list[float]] = {}
        for row in rows:
            averaged.setdefault((row["seed"], row["step"], row["epoch"]), []).append(row["v_measure"])
        grouped[AVERAGE] = [{"seed": s, "step": st, "epoch": e, "v_measure": float(np.mean(v))}
                            for (s, st, e), v in averaged.items()]
    n = len(grouped)
    cols = min(3, n)
    nrows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.2 * nrows), squeeze=False)
    for ax, (dataset, group) in zip(axes.flat, grouped.items()):
        steps = sorted({r["step"] for r in group})
        epoch_of = {r["step"]: r["epoch"] for r in group}
        values = [[r["v_measure"] * 100 for r in group if r["step"] == s] for s in steps]
        x = [epoch_of[s] for s in steps]
        ax.fill_between(x, [min(v) for v in values], [max(v) for v in values], alpha=0.25, label="min-max over seeds")
        ax.plot(x, [float(np.mean(v)) for v in values], marker="o", markersize=3, label="mean over seeds")
        base = float(np.mean(values[0])) if steps and steps[0] == 0 else None
        if base is not None:
            ax.axhline(base, color="grey", linestyle="--", linewidth=1, label="without pre-training")
        ax.set_title(dataset, fontsize=10)
        ax.set_xlabel("epoch")
        ax.set_ylabel("V-measure x 100")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    # No software version or date in the file: the same run gives the same bytes.
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)
