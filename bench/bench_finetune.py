"""Figures of COB fine-tuning, printed (not a timed test).

    HF_HUB_OFFLINE=1 .venv/bin/python bench/bench_finetune.py [--folds N] [--max-steps N] [--epochs N]
        [--method cob --method triplet ...] [--out DIR]

all-MiniLM-L6-v2 (the built-in ``minilm-l6``) on Blurbs S2S built from the real GermEval 2019 dev
set, leave-one-genre-out: per fold, training on the other genres' books (second-level genres as
labels) minus the validation genre, the checkpoint chosen by validation ARI, the held-out genre's
published within-genre split scored. Prints the table (no training, the methods run) with
bootstrap intervals over the folds' splits, the paired comparisons against no training and
against triplet, the wall time per epoch (training only, measured per unit; a capped run's time
is scaled to a full epoch by its share of the epoch's instances), and whether COB beats triplet
on unseen genres here.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import tecb_data
from tecb_data.build import build
from tecb_eval.finetuning import finetune
from tecb_eval.finetuning.instances import epoch_instances
from tecb_eval.finetuning.protocols import leave_one_genre_out
from tecb_eval.finetuning.settings import METHODS

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
DEV = SHARED / "data" / "germeval2019" / "blurbs_dev.txt.gz"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folds", type=int, default=None, help="first N folds (default all 8)")
    parser.add_argument("--max-steps", type=int, default=None, help="cap each unit's optimizer steps")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--method", action="append", choices=METHODS, help="repeatable (default cob, triplet)")
    parser.add_argument("--out", type=Path, help="keep the run here (default: a temporary folder)")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    if not DEV.exists():
        print(f"skipped: {DEV} is absent (the benchmark needs ../shared beside the repository)")
        return 0
    import torch

    tmp = tempfile.TemporaryDirectory()
    root = args.out or Path(tmp.name)
    data = root / "data"
    folder = data / "blurbs-clustering-s2s"
    if not folder.is_dir():
        folder = build("blurbs", DEV, data, views=("s2s",))[0][0]
    bench = tecb_data.load(folder)
    methods = tuple(args.method or ("cob", "triplet"))
    print(f"Blurbs S2S from the GermEval 2019 dev set: {len(bench.splits)} splits; minilm-l6; methods "
          f"{', '.join(methods)}; folds {args.folds or 'all'}; epochs {args.epochs}; max steps "
          f"{args.max_steps or 'none'}; machine: {os.cpu_count()} cores, torch {torch.get_num_threads()} threads, "
          f"load {os.getloadavg()[0]:.1f} at the start")
    started = time.perf_counter()
    result = finetune("minilm-l6", folder, method=methods, folds=args.folds, epochs=args.epochs,
                      max_steps=args.max_steps, eval_every=args.eval_every, output_dir=root / "run", overwrite=True,
                      progress=False)
    wall = time.perf_counter() - started
    print()
    print((result.output_dir / "summary.md").read_text(encoding="utf-8"))
    folds = {f.name: f for f in leave_one_genre_out(bench)}
    print("Training time per epoch (training only, evaluations excluded; one instance of 50 texts per step):")
    for method in methods:
        per_epoch = []
        for (m, fold_id, seed), seconds in result.timings.items():
            if m != method or not seconds:
                continue
            info = next(f for f in result.folds if f["id"] == fold_id)
            steps = len(epoch_instances(folds[info["fold"]].train, 50, seed, 0, info["fold"])[0])
            record_steps = min(steps, args.max_steps or steps)
            per_epoch.append(seconds[0] * steps / record_steps)
        print(f"  {method}: {statistics.mean(per_epoch):.1f} s per full epoch (mean over {len(per_epoch)} fold(s), "
              f"min {min(per_epoch):.1f}, max {max(per_epoch):.1f})")
    print(f"whole run: {wall:.0f} s wall; load {os.getloadavg()[0]:.1f} at the end (other work slows every figure)")
    verdicts = [c for c in result.comparisons if c["model_a"] == "cob" and c["model_b"] == "triplet"]
    print()
    print("Does COB beat triplet on unseen genres here?")
    for c in verdicts:
        ahead = "COB ahead" if c["difference"] > 0 else "triplet ahead" if c["difference"] < 0 else "tie"
        holds = {True: "the difference holds", False: "the difference does not hold", None: "no test"}[c["holds"]]
        print(f"  {c['metric']}: {ahead} by {100 * abs(c['difference']):.2f} points "
              f"(interval {100 * c['low']:.2f} to {100 * c['high']:.2f}, p = {c['p_value']:.4f}): {holds}")
    if args.out:
        print(f"run kept in {root / 'run'}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
