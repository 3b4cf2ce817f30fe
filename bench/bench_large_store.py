"""How `tecb-eval table`, `report --no-figures` and `recommend` scale with the number of models in a
results store (printed, not a test). Target: time linear in the models, 4,000 models x 2 datasets
(64,000 rows) within a minute each, and a progress line past a few seconds.

The store is synthetic (seeded), rows as the grid writes them: per model and dataset two
configurations (k-means on the embeddings, HDBSCAN on PCA) on 4 splits (``--splits``). Each command runs in this
process through its CLI's ``main``, its output discarded; the wall and CPU time are printed per
size, and the ratio of each size's time to the smallest's beside the ratio of their models, so a
superlinear part shows as a ratio that grows faster than the models.

    python bench/bench_large_store.py [--models 500,1000,2000,4000] [--commands table,report,recommend] [--splits 4]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

DATASETS = (("blurbs-clustering-s2s", "BlurbsClusteringS2S"), ("tenkgnad-clustering-s2s", "TenKGnadClusteringS2S"))
CONFIGURATIONS = (("minibatch_kmeans", "none"), ("hdbscan", "pca"))
LABELS, TEXTS = 12, 400


def synthetic_store(path: Path, models: int, splits: int = 4, seed: int = 0) -> int:
    """Rows like the grid's: per model a level, per configuration an offset, per split noise."""
    rng = np.random.default_rng(seed)
    level = rng.uniform(0.2, 0.5, models)
    lines = []
    for m in range(models):
        name = f"bench-model-{m:04d}"
        for dataset, mteb_name in DATASETS:
            for algorithm, reduction in CONFIGURATIONS:
                for s in range(splits):
                    v = float(np.clip(level[m] + rng.normal(0, 0.04), 0, 1))
                    noise = float(rng.uniform(0, 0.4)) if algorithm == "hdbscan" else 0.0
                    lines.append(json.dumps({
                        "algorithm": algorithm, "algorithm_params": json.dumps({"n_clusters": LABELS, "random_state": 42}),
                        "ami": v * 0.8, "ari": v * 0.6, "completeness": v, "homogeneity": v, "dataset": dataset,
                        "dataset_fingerprint": "b" * 64, "dataset_location": "bench/" + dataset,
                        "dataset_splits": splits, "model": name, "model_identity": f"{name}:bench",
                        "mteb_name": mteb_name, "n_clusters_found": LABELS, "n_labels": LABELS, "n_samples": TEXTS,
                        "noise_fraction": noise, "profile": "current", "protocol": "legacy", "reduction": reduction,
                        "reduction_params": json.dumps({"n_components": 2, "random_state": 42}), "seed": 42,
                        "seeds": "42", "split": f"split-{s:02d}", "synthetic": True, "v_measure": v}, sort_keys=True))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines)


def timed(argv: list[str]) -> tuple[float, float, int, str]:
    from tecb_eval.cli import main

    out, err = io.StringIO(), io.StringIO()
    start, cpu = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return time.perf_counter() - start, time.process_time() - cpu, code, err.getvalue()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="500,1000,2000,4000", help="comma-separated store sizes in models")
    parser.add_argument("--commands", default="table,report,recommend")
    parser.add_argument("--splits", type=int, default=4, help="splits per model, dataset and configuration")
    args = parser.parse_args()
    sizes = [int(n) for n in args.models.split(",")]
    commands = args.commands.split(",")
    first: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-large-store-") as scratch:
        for models in sizes:
            store = Path(scratch) / f"store-{models}.jsonl"
            rows = synthetic_store(store, models, args.splits)
            print(f"{models} models: {rows:,} rows, {store.stat().st_size / 1e6:.1f} MB", flush=True)
            for command in commands:
                argv = {"table": ["table", str(store)],
                        "report": ["report", str(store), "--no-figures", "--out", f"{scratch}/report-{models}"],
                        "recommend": ["recommend", str(store)]}[command]
                wall, cpu, code, err = timed(argv)
                first.setdefault(command, wall / models * sizes[0])
                progress = sum(1 for line in err.splitlines() if line.strip())
                print(f"  {command}: {wall:.1f} s wall ({cpu:.1f} s CPU), exit {code}, {progress} progress/note "
                      f"lines; {wall / first[command]:.1f}x the smallest store's time for "
                      f"{models / sizes[0]:.1f}x its models", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
