"""Tables, exports and plots from the results table.

- :func:`table2`: model x dataset, k-means on the embeddings (the paper's Table 2);
- :func:`table3`: (algorithm, reduction) x dataset, averaged over models (the paper's Table 3);
- :func:`reference_layout`: the authors' full-results CSV layout, one row per model x configuration;
- :func:`write_mteb_results`: MTEB's result JSON per model and task;
- plots: Table 3 as bars, ours against the authors' (:func:`read_reference`), and the paper's
  Figure 1 (a 2-D UMAP scatter coloured by label, :mod:`tecb_eval.figures`).

V-measures are shown x100 in the Markdown/LaTeX tables as in the paper, and kept 0..1 in CSVs.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from tecb_data.errors import UserError
from tecb_eval.algorithms import PAPER_CONFIGURATIONS, REFERENCE_REDUCTIONS
from tecb_eval.cache import atomic_save, short_hash

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
REDUCTION_SPELLING = {ours: theirs for theirs, ours in REFERENCE_REDUCTIONS.items()}
MTEB_LANGUAGES = ["deu-Latn"]


def _dataset_columns(names) -> list[str]:
    known = [d for d in DATASET_ORDER if d in set(names)]
    return known + sorted(set(names) - set(known))


def split_means(frame: pd.DataFrame, metric: str = "v_measure") -> pd.DataFrame:
    """Mean and SD over splits per (model, dataset, algorithm, reduction)."""
    keys = ["model", "mteb_name", "algorithm", "reduction"]
    grouped = frame.groupby(keys, sort=False)[metric]
    return pd.DataFrame({"mean": grouped.mean(), "sd": grouped.std(ddof=0), "splits": grouped.size()}).reset_index()


def _order_configurations(index) -> list:
    known = [c for c in PAPER_CONFIGURATIONS if c in set(index)]
    return known + sorted(set(index) - set(known))


def table2(frame: pd.DataFrame) -> pd.DataFrame:
    """Model x dataset: mean V-measure over splits of k-means on unreduced embeddings, plus the average."""
    means = split_means(frame[(frame.algorithm == "minibatch_kmeans") & (frame.reduction == "none")])
    if means.empty:
        raise UserError("the results hold no minibatch_kmeans:none cells, which Table 2 reports")
    table = means.pivot(index="model", columns="mteb_name", values="mean")
    table = table[_dataset_columns(table.columns)]
    table["avg"] = table.mean(axis=1)
    return table.sort_index()


def table3(frame: pd.DataFrame) -> pd.DataFrame:
    """(algorithm, reduction) x dataset: split means averaged over models, plus the average."""
    means = split_means(frame)
    table = means.groupby(["algorithm", "reduction", "mteb_name"])["mean"].mean().unstack("mteb_name")
    table = table[_dataset_columns(table.columns)]
    table["avg"] = table.mean(axis=1)
    return table.loc[_order_configurations(table.index)]


def reference_layout(frame: pd.DataFrame) -> pd.DataFrame:
    """The authors' CSV layout: transformer, algorithm, reduction, one V-measure column per dataset."""
    means = split_means(frame)
    wide = means.pivot_table(index=["model", "algorithm", "reduction"], columns="mteb_name", values="mean")
    rows = []
    for model in sorted(means.model.unique()):
        sub = wide.loc[model]
        for algorithm, reduction in _order_configurations(sub.index):
            values = sub.loc[(algorithm, reduction)]
            rows.append([model, algorithm, REDUCTION_SPELLING.get(reduction, reduction),
                         *[values.get(d, np.nan) for d in _dataset_columns(wide.columns)]])
    return pd.DataFrame(rows, columns=HEADER + _dataset_columns(wide.columns))


def read_reference(path: Path) -> pd.DataFrame:
    """The authors' table as (model, algorithm, reduction, mteb_name, v_measure) rows.

    The published file was saved from a spreadsheet that auto-incremented the model names of two
    blocks (``...-mpnet-base-v2``, ``-v3``, ... ``-v15``): each model is a block of the 14 paper
    configurations, so a block takes the name on its first row.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such reference file (expected the authors' {REFERENCE_CSV})")
    with open(path, encoding="utf-8-sig", newline="") as fh:
        records = list(csv.reader(fh))
    header, body = records[0], [r for r in records[1:] if r]
    datasets = [REFERENCE_DATASETS.get(c, c) for c in header[3:]]
    block = len(PAPER_CONFIGURATIONS)
    rows = []
    for start in range(0, len(body), block):
        chunk = body[start:start + block]
        configs = [(r[1], REFERENCE_REDUCTIONS.get(r[2], r[2])) for r in chunk]
        if configs != PAPER_CONFIGURATIONS:
            raise UserError(f"{path}:{start + 2}: expected a block of the paper's 14 configurations in order")
        model = chunk[0][0]
        for r, (algorithm, reduction) in zip(chunk, configs):
            for dataset, value in zip(datasets, r[3:]):
                rows.append({"model": model, "algorithm": algorithm, "reduction": reduction,
                             "mteb_name": dataset, "v_measure": float(value)})
    return pd.DataFrame(rows)


def reference_table3(reference: pd.DataFrame) -> pd.DataFrame:
    table = reference.groupby(["algorithm", "reduction", "mteb_name"])["v_measure"].mean().unstack("mteb_name")
    table = table[_dataset_columns(table.columns)]
    table["avg"] = table.mean(axis=1)
    return table.loc[_order_configurations(table.index)]


# -- formatting ----------------------------------------------------------------------------------
def format_table(table: pd.DataFrame, fmt: str = "md", scale: float = 100.0) -> str:
    """Markdown, CSV or LaTeX text of a table (values x ``scale``, two decimals)."""
    flat = table.copy()
    if isinstance(flat.index, pd.MultiIndex):
        flat.index = [" / ".join(map(str, i)) for i in flat.index]
    if fmt == "csv":
        buffer = io.StringIO()
        table.to_csv(buffer, float_format="%.6f", lineterminator="\n")
        return buffer.getvalue()
    shown = flat.map(lambda v: "" if pd.isna(v) else f"{v * scale:.2f}")
    name = table.index.name or " / ".join(n for n in (table.index.names or []) if n) or ""
    if fmt == "md":
        head = [name, *map(str, shown.columns)]
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * len(shown.columns)) + "|"]
        lines += ["| " + " | ".join([str(i), *row]) + " |" for i, row in zip(shown.index, shown.values.tolist())]
        return "\n".join(lines) + "\n"
    if fmt == "latex":
        def esc(text):
            return re.sub(r"([&%$#_{}])", r"\\\1", str(text))

        lines = [r"\begin{tabular}{l" + "r" * len(shown.columns) + "}", r"\toprule",
                 " & ".join([esc(name), *map(esc, shown.columns)]) + r" \\", r"\midrule"]
        lines += [" & ".join([esc(i), *row]) + r" \\" for i, row in zip(shown.index, shown.values.tolist())]
        lines += [r"\bottomrule", r"\end{tabular}"]
        return "\n".join(lines) + "\n"
    raise UserError(f"unknown table format {fmt!r}; choose md, csv or latex")


def write_text(path: Path, text: str) -> Path:
    atomic_save(Path(path), lambda fh: fh.write(text.encode("utf-8")), Path(path).suffix)
    return Path(path)


def write_reference_csv(frame: pd.DataFrame, path: Path) -> Path:
    buffer = io.StringIO()
    reference_layout(frame).to_csv(buffer, index=False, float_format="%.15g", lineterminator="\n")
    return write_text(path, buffer.getvalue())


# -- MTEB result files ---------------------------------------------------------------------------
def mteb_results(frame: pd.DataFrame, version: str) -> dict[tuple[str, str], dict]:
    """{(model folder, task name): MTEB TaskResult dict} for k-means on the embeddings (MTEB's main
    score); legacy -> ``BlurbsClusteringS2S`` with ``v_measures`` per split, fast -> the ``.v2``
    task with ``v_measures`` per level as MTEB v2 writes it."""
    kmeans = frame[(frame.algorithm == "minibatch_kmeans") & (frame.reduction == "none")]
    out = {}
    for (model, identity, task, fingerprint, protocol), group in kmeans.groupby(
            ["model", "model_identity", "mteb_name", "dataset_fingerprint", "protocol"], sort=True):
        group = group.sort_values("split")
        scores = group.v_measure.to_numpy()
        v2 = protocol == "fast"
        task_name = f"{task}.v2" if v2 else task
        score = {
            "v_measure": float(scores.mean()),
            "v_measure_std": float(scores.std()),
            "v_measures": {"Level 0": scores.tolist()} if v2 else scores.tolist(),
            "main_score": float(scores.mean()),
            "hf_subset": "default",
            "languages": MTEB_LANGUAGES,
        }
        # A per-dataset fitted encoder (tfidf-lsa) is one model: its revision leaves the corpus out.
        revision = short_hash(re.sub(r"\|corpus=[^|]*", "", identity))[:16]
        folder = f"{model.replace('/', '__')}/{revision}"
        out[(folder, task_name)] = {
            "dataset_revision": fingerprint,
            "task_name": task_name,
            "mteb_version": f"tecb-eval {version}",
            "scores": {"test": [score]},
            "evaluation_time": float(group[["encode_s", "reduce_s", "cluster_s"]].to_numpy().sum()),
            "kg_co2_emissions": None,
        }
    return out


def write_mteb_results(frame: pd.DataFrame, out: Path, version: str) -> list[Path]:
    written = []
    for (folder, task), result in mteb_results(frame, version).items():
        path = Path(out) / folder / f"{task}.json"
        written.append(write_text(path, json.dumps(result, indent=2, sort_keys=True) + "\n"))
    return written
