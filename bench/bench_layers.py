"""Figures for the layer sweep (printed, not a test): one forward pass for every layer against the
same layers run one by one through the grid.

On Blurbs S2S and P2P built from the real GermEval 2019 dev set, with minilm-l6 (layers 0..6,
mean-pooled, max length 512), k-means on the embeddings (legacy protocol, seed 42), fresh caches:

1. ``tecb_eval.layer_sweep``: each unique text through the model once, all layers pooled from
   that pass, then the grid's clustering of every layer; wall time, and its encoding pass alone;
2. the same layers one by one: ``run_grid`` with ``{"spec": "minilm-l6", "layer": k}`` per layer,
   each encoding every unique text again; wall time, and each layer's encoding pass (the grid's
   own timing of it);
3. the ratio of the sweep's encoding pass to a single-layer encoding pass (median of the seven
   one-by-one passes; target <= 1.3x) and of the whole sweep to the whole one-by-one run;
4. the per-split V-measures of both, compared cell by cell (they must be identical);
5. the per-layer table (V-measure x 100, mean over the 28 splits) and figure;
6. a controlled ratio, less exposed to other work on a shared machine: one loaded model, a sample of
   the unique texts, a single-layer encode and an all-layers encode alternated, best of N each
   (``--ratio-only`` runs this part alone).

    python bench/bench_layers.py [--datasets s2s,p2p] [--out DIR] [--limit-splits N] [--ratio-only]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tecb_data.build import build  # noqa: E402
from tecb_data.load import load  # noqa: E402
from tecb_eval.grid.run import run_grid  # noqa: E402
from tecb_eval.layers import layer_sweep  # noqa: E402

BLURBS_DEV = REPO.parent / "shared" / "data" / "germeval2019" / "blurbs_dev.txt.gz"
MODEL = "minilm-l6"
_ENCODED = re.compile(r"encoded ([\d,]+) new unique texts in ([\d.]+) s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="s2s,p2p", help="Blurbs views to build (default s2s,p2p)")
    parser.add_argument("--out", type=Path, help="keep the sweep's outputs (layers.csv, figure.png, ...) here")
    parser.add_argument("--limit-splits", type=int, help="only the first N splits of each dataset")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--ratio-texts", type=int, default=400, help="sample size of the controlled ratio (default 400)")
    parser.add_argument("--ratio-repeats", type=int, default=3, help="alternations of the controlled ratio (default 3)")
    parser.add_argument("--ratio-only", action="store_true", help="only the controlled ratio (6.)")
    args = parser.parse_args()
    if not BLURBS_DEV.is_file():
        print(f"{BLURBS_DEV}: absent; the bench needs the GermEval 2019 dev set", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="tecb-bench-layers-"))
    try:
        return run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(args, work: Path) -> int:
    import dataclasses

    views = tuple(v.strip() for v in args.datasets.split(","))
    built = build("blurbs", BLURBS_DEV, work / "data", views=views)
    benches = [load(folder) for folder, _ in built]
    if args.limit_splits:
        benches = [dataclasses.replace(b, splits=b.splits[:args.limit_splits]) for b in benches]
    unique = len({t for b in benches for s in b.splits for t in s.texts})
    print(f"datasets: {', '.join(b.name for b in benches)} (GermEval 2019 dev set), "
          f"{sum(len(b.splits) for b in benches)} splits, {unique:,} unique texts; model {MODEL}; "
          f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    if args.ratio_only:
        controlled_ratio(args, benches)
        return 0
    quiet = lambda message: None  # noqa: E731

    started = time.perf_counter()
    out = args.out or work / "sweep-out"
    table = layer_sweep(MODEL, benches, seed=args.seed, cache_dir=work / "sweep-cache", output_dir=out,
                        progress=False, log=quiet)
    sweep_wall = time.perf_counter() - started
    sweep_encode = table.attrs["encode_seconds"]
    layers = sorted(table.layer.unique())
    print(f"\nsweep, layers {layers[0]}..{layers[-1]}: {sweep_wall:.1f} s wall "
          f"(one encoding pass for all layers {sweep_encode:.1f} s for {table.attrs['encoded_texts']:,} texts; "
          f"clustering {table.attrs['cluster_seconds']:.1f} s)")
    sweep_splits = pd.read_csv(out / "splits.csv")

    one_by_one, passes = [], []
    started = time.perf_counter()
    for layer in layers:
        said = []
        layer_started = time.perf_counter()
        frame = run_grid(benches, [{"spec": MODEL, "layer": int(layer)}], configurations=[("minibatch_kmeans", "none")],
                         protocol="legacy", seed=args.seed, cache_dir=work / "grid-cache", progress=False,
                         log=said.append)
        wall = time.perf_counter() - layer_started
        encoded = [_ENCODED.search(line) for line in said]
        seconds = sum(float(m.group(2)) for m in encoded if m)
        texts = sum(int(m.group(1).replace(",", "")) for m in encoded if m)
        passes.append(seconds)
        print(f"  grid, layer={layer}: {wall:.1f} s wall, encoding pass {seconds:.1f} s for {texts:,} texts")
        one_by_one.append(frame.assign(layer=int(layer)))
    grid_wall = time.perf_counter() - started
    single = statistics.median(passes)
    print(f"one by one through the grid: {grid_wall:.1f} s wall, encoding {sum(passes):.1f} s in {len(passes)} passes")
    print(f"\nsweep encoding pass / single-layer encoding pass (median of {len(passes)}): "
          f"{sweep_encode / single:.2f}x (target <= 1.3x; one by one: {sum(passes) / single:.2f}x)")
    print(f"whole sweep / whole one-by-one run: {sweep_wall / grid_wall:.2f} ({grid_wall / sweep_wall:.1f}x faster)")

    grid_splits = pd.concat(one_by_one)
    keys = ["dataset", "layer", "split"]
    merged = sweep_splits.merge(grid_splits[keys + ["v_measure"]], on=keys, suffixes=("_sweep", "_grid"))
    same = int((merged.v_measure_sweep == merged.v_measure_grid).sum())
    print(f"per-split V-measures, sweep vs grid one by one: {same}/{len(merged)} identical "
          f"(max |diff| {float((merged.v_measure_sweep - merged.v_measure_grid).abs().max()):.3g}), "
          f"of {len(sweep_splits)} sweep cells")

    print(f"\nV-measure x 100 per layer (mean over splits; ** best):\n")
    print((out / "summary.md").read_text(encoding="utf-8"))
    controlled_ratio(args, benches)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.out:
        print(f"sweep outputs in {args.out}/ (figure.png: V-measure against layer)")
    return 0 if same == len(merged) == len(sweep_splits) else 1


def controlled_ratio(args, benches) -> float:
    """All layers from one pass against one layer, same loaded model and texts, alternated."""
    from tecb_eval.models.encoders import get_encoder

    encoder = get_encoder(MODEL, layer=-1)
    unique = sorted({t for b in benches for s in b.splits for t in s.texts})
    sample = unique[::max(1, len(unique) // args.ratio_texts)][:args.ratio_texts]
    layers = list(range(encoder.n_layers + 1))
    encoder.encode(sample[:32])  # warm-up
    single = every = float("inf")
    for _ in range(args.ratio_repeats):
        started = time.perf_counter()
        encoder.encode(sample)
        single = min(single, time.perf_counter() - started)
        started = time.perf_counter()
        encoder.encode_layers(sample, layers)
        every = min(every, time.perf_counter() - started)
    print(f"\ncontrolled: {len(sample)} of the unique texts, best of {args.ratio_repeats} alternated: one layer "
          f"{single:.1f} s, all {len(layers)} layers from one pass {every:.1f} s -> {every / single:.2f}x "
          f"(target <= 1.3x)")
    return every / single


if __name__ == "__main__":
    sys.exit(main())
