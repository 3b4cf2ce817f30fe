"""How long `tecb-eval report` takes on a full-sized store, and how much HTML it writes (printed,
not a test). Target: 10,000 rows within 10 s and 50 MB of HTML.

The store is synthetic (seeded): one dataset of 28 splits x the paper's 14 configurations x 25
models = 9,800 rows, as the grid writes them (the fields every row has), one seed. The report is
rendered twice, with the Table 2 / 3 plots and without (``--no-figures``), each in a fresh folder.
The CPU time beside the wall time tells a slow run from a busy machine.

    python bench/bench_report.py [--models 25] [--splits 28] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from tecb_eval.clustering.algorithms import PAPER_CONFIGURATIONS  # noqa: E402
from tecb_eval.reports.html import render  # noqa: E402

DATASET, MTEB_NAME, LABELS, TEXTS = "blurbs-clustering-s2s", "BlurbsClusteringS2S", 12, 400


def synthetic_store(path: Path, models: int, splits: int, seed: int = 0) -> int:
    """Rows like the grid's: per model a level, per configuration an offset, per split noise."""
    rng = np.random.default_rng(seed)
    level = rng.uniform(0.2, 0.5, models)
    offset = {config: rng.normal(0, 0.03) for config in PAPER_CONFIGURATIONS}
    lines = []
    for m in range(models):
        name = f"bench-model-{m:02d}"
        for algorithm, reduction in PAPER_CONFIGURATIONS:
            for s in range(splits):
                v = float(np.clip(level[m] + offset[(algorithm, reduction)] + rng.normal(0, 0.04), 0, 1))
                noise = float(rng.uniform(0, 0.4)) if algorithm in ("hdbscan", "dbstream") else 0.0
                lines.append(json.dumps({
                    "algorithm": algorithm, "algorithm_params": json.dumps({"n_clusters": LABELS, "random_state": 42}),
                    "ami": v * 0.8, "ari": v * 0.6, "completeness": v, "homogeneity": v, "dataset": DATASET,
                    "dataset_fingerprint": "b" * 64, "dataset_location": "bench/" + DATASET, "dataset_splits": splits,
                    "model": name, "model_identity": f"{name}:bench", "mteb_name": MTEB_NAME,
                    "n_clusters_found": LABELS, "n_labels": LABELS, "n_samples": TEXTS, "noise_fraction": noise,
                    "profile": "current", "protocol": "legacy", "reduction": reduction,
                    "reduction_params": json.dumps({"n_components": 2, "random_state": 42}), "seed": 42, "seeds": "42",
                    "split": f"split-{s:02d}", "synthetic": True, "v_measure": v}, sort_keys=True))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines)


def html_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*.html"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=25)
    parser.add_argument("--splits", type=int, default=28)
    parser.add_argument("--keep", type=Path, help="render into DIR/with-figures and DIR/no-figures and keep them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-report-") as scratch:
        root = args.keep or Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        store = Path(scratch) / "store.jsonl"
        rows = synthetic_store(store, args.models, args.splits)
        print(f"store: {rows} rows ({args.models} models x {len(PAPER_CONFIGURATIONS)} configurations x "
              f"{args.splits} splits), {store.stat().st_size / 1e6:.1f} MB")
        for label, draw in (("with figures", True), ("no figures", False)):
            out = root / label.replace(" ", "-")
            start, cpu = time.perf_counter(), time.process_time()
            pages = render([store], out, draw_figures=draw, log=lambda message: None)
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            size = html_bytes(out)
            verdict = "within" if wall <= 10 and size <= 50e6 else "OVER"
            print(f"{label}: {wall:.1f} s wall ({cpu:.1f} s CPU in this process), {len(pages)} pages, {size / 1e6:.2f} MB of HTML "
                  f"({verdict} the 10 s / 50 MB target)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
