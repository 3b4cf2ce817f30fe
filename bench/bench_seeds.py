"""Figures for seeds (printed, not a test): what k seeds cost against one, and how sure a ranking is.

On Blurbs S2S and P2P built from the real GermEval 2019 dev set (``--data`` reuses built folders):

1. cost: the grid with one seed and with ``--seeds`` (default 42,1,2), each with fresh caches, so
   that each run encodes every unique text once. Encoding does not depend on the seed; each seed
   adds its reductions and clusterings. The predicted ratio is
   ``1 + (k - 1) x (reduce + cluster share of the one-seed run)``, the share measured from the
   one-seed run's own wall-clock split (encoding = the grid's encoding time). A warm-up grid on one
   split comes first, so that loading the model and compiling UMAP (numba) count for neither run;
2. ``--table``: Table 2 (k-means on the embeddings) for ``--model`` (default minilm-l6,
   use-multilingual, tfidf-lsa) over the seeds, with the SD over seeds and splits, the markers
   against the best model, the paired comparisons of every pair of models, and the dot plot.

    python bench/bench_seeds.py [--data OUT] [--views s2s,p2p] [--limit-splits N] [--configs paper|kmeans] [--jobs J]
    python bench/bench_seeds.py --table [--data OUT] [--limit-splits N] [--out DIR]
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tecb_data.build import build  # noqa: E402
from tecb_eval.reports import compare, figures, tables as report  # noqa: E402
from tecb_eval.clustering.algorithms import PAPER_CONFIGURATIONS  # noqa: E402
from tecb_eval.grid.run import run_grid  # noqa: E402

SHARED = REPO.parent / "shared"
BLURBS_DEV = SHARED / "data" / "germeval2019" / "blurbs_dev.txt.gz"
TABLE_MODELS = ("minilm-l6", "use-multilingual", "tfidf-lsa")


def datasets(args, work: Path) -> list[Path]:
    root = args.data
    if root is None:
        if not BLURBS_DEV.is_file():
            sys.exit(f"{BLURBS_DEV} is absent: pass --data with built Blurbs folders")
        build("blurbs", BLURBS_DEV, work / "data")
        root = work / "data"
    return [root / f"blurbs-clustering-{view}" for view in args.views.split(",")]


def timed_grid(data, models, seeds, configs, args, cache: Path):
    encode = {}

    def log(message):
        # The grid reports "<model>: encoded N new unique texts in S s" once per model.
        if ": encoded " in message and message.endswith(" s"):
            encode[message.split(":")[0]] = float(message.rsplit(" in ", 1)[1][:-2])

    started = time.perf_counter()
    frame = run_grid(data, models, configurations=configs, seeds=seeds, cache_dir=cache,
                     limit_splits=args.limit_splits, jobs=args.jobs, progress=False, log=log)
    return frame, time.perf_counter() - started, sum(encode.values())


def cost(args, data, work: Path) -> None:
    configs = [f"{a}:{r}" for a, r in PAPER_CONFIGURATIONS] if args.configs == "paper" else ["minibatch_kmeans:none"]
    seeds = tuple(int(s) for s in args.seeds.split(","))
    k = len(seeds)
    # Warm-up on one split with a throwaway cache: model loading and numba's compilation of UMAP
    # happen once per process and would otherwise be charged to whichever run comes first.
    warm = argparse.Namespace(**{**vars(args), "limit_splits": 1})
    timed_grid(data, [args.model], seeds[:1], configs, warm, work / "cache-warm-up")
    one, t1, enc1 = timed_grid(data, [args.model], seeds[:1], configs, args, work / "cache-1")
    many, tk, enck = timed_grid(data, [args.model], seeds, configs, args, work / f"cache-{k}")
    share = (t1 - enc1) / t1
    print(f"{args.model}, {len(configs)} configuration(s), {one.split.nunique()} splits per dataset x {len(data)} datasets, "
          f"jobs={args.jobs}, {os.cpu_count()} CPUs (load {os.getloadavg()[0]:.1f})")
    print(f"1 seed : {t1:7.1f} s wall ({len(one)} rows; encoding {enc1:.1f} s, reduce+cluster+rest {t1 - enc1:.1f} s = "
          f"{100 * share:.1f} %)")
    print(f"{k} seeds: {tk:7.1f} s wall ({len(many)} rows; encoding {enck:.1f} s)")
    for name, frame in (("1 seed", one), (f"{k} seeds", many)):
        print(f"  {name}: summed over cells: reduce {frame.reduce_s.sum():.1f} s, cluster {frame.cluster_s.sum():.1f} s")
    print(f"ratio {tk / t1:.2f} (predicted 1 + (k - 1) x share = {1 + (k - 1) * share:.2f}; "
          f"k x one seed would be {k:.0f}.00)")


def table(args, data, work: Path) -> None:
    seeds = tuple(int(s) for s in args.seeds.split(","))
    models = args.table_models.split(",")
    results = args.out / "results.jsonl" if args.out else None  # for `tecb-eval compare` / `table` afterwards
    frame = run_grid(data, models, configurations=["minibatch_kmeans:none"], seeds=seeds,
                     cache_dir=args.cache_dir or work / "cache", results=results, limit_splits=args.limit_splits,
                     jobs=args.jobs, progress=False, log=lambda m: print(m, file=sys.stderr))
    shown = report.tables(frame)
    t2, note = shown["table2"]
    print(report.format_table(t2, "md", note=note))
    for dataset in report.dataset_columns(set(frame.mteb_name)):
        for a, b in itertools.combinations(models, 2):
            print(compare.compare(frame, a, b, [dataset])[0].sentence())
    if args.out:
        print(f"\n{figures.plot_table2_dots(frame, args.out / 'table2.png')}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="folder holding blurbs-clustering-s2s and -p2p (default: build the dev set)")
    parser.add_argument("--views", default="s2s,p2p", help="Blurbs views to run (default s2s,p2p)")
    parser.add_argument("--model", default="minilm-l6", help="model of the cost figures (default minilm-l6)")
    parser.add_argument("--seeds", default="42,1,2")
    parser.add_argument("--configs", choices=["paper", "kmeans"], default="paper",
                        help="paper: the 14 configurations; kmeans: k-means on the embeddings only")
    parser.add_argument("--limit-splits", type=int, help="first N splits per dataset (default: all 28)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes of the grid (default 1)")
    parser.add_argument("--table", action="store_true", help="Table 2 with intervals and comparisons instead of the cost")
    parser.add_argument("--table-models", default=",".join(TABLE_MODELS))
    parser.add_argument("--cache-dir", type=Path, help="embedding cache for --table (default: a fresh one)")
    parser.add_argument("--out", type=Path, help="--table: write the results store and the dot plot here")
    args = parser.parse_args()
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-seeds-") as tmp:
        work = Path(tmp)
        data = datasets(args, work)
        (table if args.table else cost)(args, data, work)


if __name__ == "__main__":
    main()
