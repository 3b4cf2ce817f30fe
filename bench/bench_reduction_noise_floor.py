"""How far a score moves when the vectors move by 1e-7 (printed, not a test): the noise floor of
each reduction, below which a difference between two models is no evidence of anything.

An API model and the same model run here can give vectors that differ in the 7th decimal (float32
rounding on another machine). Without a reduction the clusterings agree; through UMAP the layout
moves, and with it the scores. This bench measures that on real texts:

1. the Blurbs S2S dev set (GermEval 2019) is built and a few of its splits are taken (default: the
   five smallest coarse and fine splits, 250 to 730 texts, so the bench fits a few minutes on two
   loaded cores);
2. the offline MiniLM (``minilm-l6``) embeds every text once;
3. the grid runs the paper's 14 configurations on those vectors, and again on ``--nudges`` copies
   of them, each vector component moved by a seeded uniform draw in [-1e-7, 1e-7] (then kept as
   float32, whose spacing there is far finer, so the move survives);
4. per reduction: the change of V-measure, AMI and ARI between the original and a nudged run, per
   split and algorithm; printed as the mean and the largest change of one split's score, and the
   change of the mean over the splits (what a table shows), all x100.

The floor ``tecb-eval compare`` uses (``NOISE_FLOORS`` in tecb_eval/clustering/registry.py, per
configuration and score) is the "mean |change| per split" column: the largest over the nudges of the
mean over the splits of how far one split's score moved. A difference between two models' figures
that is no larger is what a 1e-7 nudge of the same model's vectors gives, and is not called a win.
The last lines print those values as the registry holds them.

    HF_HUB_OFFLINE=1 python bench/bench_reduction_noise_floor.py [--splits NAME,...] [--nudges 2]
"""

from __future__ import annotations

import argparse
import hashlib
import dataclasses
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchdata import BLURBS_DEV  # noqa: E402
from tecb_data.build import build  # noqa: E402
from tecb_data.load import load  # noqa: E402

SPLITS = "coarse-00,coarse-02,fine-00,fine-08,fine-05"
METRICS = ("v_measure", "ami", "ari")
STEP = 1e-7


class Vectors:
    """An encoder object: MiniLM's vectors, encoded once and shared by every nudged copy."""

    def __init__(self, inner, seen: dict, identity: str, nudge: int | None):
        self.inner, self.seen, self.identity, self.nudge = inner, seen, identity, nudge

    def encode(self, texts):
        missing = [t for t in dict.fromkeys(texts) if t not in self.seen]
        if missing:
            self.seen.update(zip(missing, np.asarray(self.inner.encode(missing), dtype=np.float32)))
        out = np.stack([self.seen[t] for t in texts]).astype(np.float32)
        if self.nudge is None:
            return out
        # One draw per text, from the nudge's seed and the text: the same move whatever the batch.
        moved = []
        for text, row in zip(texts, out):
            digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
            seed = np.random.SeedSequence([self.nudge, int.from_bytes(digest, "big")])
            step = np.random.default_rng(seed).uniform(-STEP, STEP, size=row.shape)
            moved.append((row.astype(np.float64) + step).astype(np.float32))
        return np.stack(moved)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", default=SPLITS, help=f"Blurbs S2S dev splits to run (default {SPLITS})")
    parser.add_argument("--nudges", type=int, default=2, help="nudged copies of the vectors (default 2)")
    parser.add_argument("--seed", type=int, default=42, help="the grid's seed (default 42)")
    args = parser.parse_args()
    if not BLURBS_DEV.is_file():
        print(f"{BLURBS_DEV}: absent; the bench needs the GermEval 2019 dev set", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="tecb-bench-floor-"))
    try:
        return run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(args, work: Path) -> int:
    from tecb_eval.clustering.algorithms import PAPER_CONFIGURATIONS
    from tecb_eval.grid.run import run_grid
    from tecb_eval.models.encoders import get_encoder

    (folder, _), = build("blurbs", BLURBS_DEV, work / "data", views=("s2s",))
    bench = load(folder)
    wanted = args.splits.split(",")
    bench = dataclasses.replace(bench, splits=[s for s in bench.splits if s.name in wanted])
    inner, seen = get_encoder("minilm-l6"), {}
    models = [("original", Vectors(inner, seen, "minilm-l6|bench-original", None))]
    models += [(f"nudge-{n}", Vectors(inner, seen, f"minilm-l6|bench-nudge-{n}", n)) for n in range(1, args.nudges + 1)]
    started = time.perf_counter()
    frame = run_grid([bench], models, configurations=[f"{a}:{r}" for a, r in PAPER_CONFIGURATIONS], seed=args.seed,
                     cache_dir=work / "cache", progress=False)
    took = time.perf_counter() - started
    print(f"Blurbs S2S dev, splits {', '.join(s.name for s in bench.splits)} "
          f"({', '.join(str(len(s.texts)) for s in bench.splits)} texts), minilm-l6, seed {args.seed}, "
          f"{args.nudges} nudges of +-{STEP:g} per component; {took:.0f} s on {os.cpu_count()} CPUs "
          f"(load {os.getloadavg()[0]:.1f})")
    keys = ["algorithm", "reduction", "split"]
    base = frame[frame.model == "original"].set_index(keys)[list(METRICS)]
    rows = []
    for name, group in frame[frame.model != "original"].groupby("model", sort=True):
        change = group.set_index(keys)[list(METRICS)] - base
        for (algorithm, reduction), cell in change.groupby(level=["algorithm", "reduction"], sort=True):
            for metric in METRICS:
                values = 100 * cell[metric]
                rows.append({"reduction": reduction, "algorithm": algorithm, "nudge": name, "metric": metric,
                             "mean_abs": float(values.abs().mean()), "max_abs": float(values.abs().max()),
                             "of_mean": float(abs(values.mean()))})
    table = pd.DataFrame(rows)
    print("\nper reduction and algorithm, the largest over the nudges (x100):")
    wide = table.groupby(["reduction", "algorithm", "metric"], sort=True)[["mean_abs", "max_abs", "of_mean"]].max()
    print(wide.unstack("metric").round(3).to_string())
    print("\nthe floor per reduction (the largest mean |change| per split over its algorithms and nudges, x100):")
    floor = table.groupby(["reduction", "metric"], sort=True).mean_abs.max().unstack("metric")[list(METRICS)]
    print(floor.round(3).to_string())
    # What tecb_eval.clustering.registry.NOISE_FLOORS holds: per configuration that moved at all.
    per_config = table.groupby(["algorithm", "reduction", "metric"], sort=True).mean_abs.max() / 100
    print("\nas registry values (0..1, per configuration that moved):")
    for (algorithm, reduction), values in per_config.groupby(level=["algorithm", "reduction"], sort=True):
        if values.max() > 0:
            shown = ", ".join(f"{m!r}: {values.loc[(algorithm, reduction, m)]:.4f}" for m in METRICS)
            print(f"    ({algorithm!r}, {reduction!r}): {{{shown}}},")
    return 0


if __name__ == "__main__":
    sys.exit(main())
