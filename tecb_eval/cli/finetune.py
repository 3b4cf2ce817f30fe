"""`tecb-eval finetune`: train a model on a clustering metric (COB) and its baselines, leak-free.

Leave one genre out (Blurbs) or transfer (Blurbs -> other datasets); the held-out published splits
are scored unchanged, by k-means V-measure and by HAC average linkage with the true k."""

from __future__ import annotations

import argparse
from pathlib import Path

from tecb_data.seeding import DEFAULT_SEED

# (setting, option, type, help); each overrides the default of FinetuneSettings.
_SETTINGS = (
    ("lambda_", "--lambda", float, "COB's blackbox step lambda (default 90, the paper's 20 Newsgroups value); above 0"),
    ("reg", "--reg", float, "COB's regulariser weight r (default 1.0, the paper's 20 Newsgroups value)"),
    ("epochs", "--epochs", int, "passes over each fold's training instances (default 1, the authors')"),
    ("max_steps", "--max-steps", int, "stop each unit after this many optimizer steps (one instance a step)"),
    ("instance_size", "--instance-size", int, "texts per clustering instance (default 50, the paper's)"),
    ("eval_every", "--eval-every", int,
     "optimizer steps between evaluations (default 100, the authors'); also before and after"),
    ("learning_rate", "--learning-rate", float, "AdamW learning rate (default 2e-5)"),
    ("weight_decay", "--weight-decay", float, "default 0.01"),
    ("warmup_ratio", "--warmup-ratio", float, "share of steps warming up linearly, then linear decay (default 0.1)"),
    ("max_grad_norm", "--max-grad-norm", float, "gradient clipping (default 1)"),
    ("adam_eps", "--adam-eps", float, "AdamW's eps (default 1e-6, the authors' transformers.AdamW; torch's own is 1e-8)"),
    ("triple_fraction", "--triple-fraction", int,
     "triplet: use 1/N of each instance's valid triples (default 25, the paper's)"),
    ("triples_per_instance", "--triples-per-instance", int,
     "triplet: draw this many random triples per instance instead (the earlier default was 50)"),
    ("max_length", "--max-length", int, "tokens per text (default: the model's own)"),
    ("eval_batch_size", "--eval-batch-size", int, "texts per encoding batch when scoring (default 32, the grid's)"),
    ("kmeans_seed", "--kmeans-seed", int, f"k-means seed of the V-measure tracked during training (default {DEFAULT_SEED})"),
)


def _cmd_finetune(args) -> int:
    from tecb_eval.cli.options import dataset_folders
    from tecb_eval.finetuning import finetune
    from tecb_eval.finetuning.run import DEFAULT_SEEDS, SCORE_SEEDS
    from tecb_eval.finetuning.settings import METHODS

    overrides = {name: getattr(args, name) for name, _, _, _ in _SETTINGS}
    if args.regulariser_without_self_pairs:
        overrides["self_pairs"] = False
    def interrupted() -> str:
        work = Path(f"{args.out}.partial")
        # Named only while it is there: an interrupt before the work folder was made left nothing.
        return (f"finished units are in {work}/ and the same command resumes there" if work.is_dir() else
                f"nothing was written (no {work}/ yet); run the same command again")

    args.interrupted = interrupted
    result = finetune(args.model, dataset_folders(args.data), method=tuple(args.method or METHODS), protocol=args.protocol,
                      seeds=args.seeds or DEFAULT_SEEDS, score_seeds=args.score_seeds or SCORE_SEEDS,
                      folds=args.folds, output_dir=args.out, overwrite=args.overwrite, progress=not args.quiet,
                      device=args.device, save_best=not args.no_save_best, **overrides)
    print((result.output_dir / "summary.md").read_text(encoding="utf-8"))
    print(f"wrote {result.output_dir}/: summary.md, summary.csv, comparisons.csv, scores.csv, evaluations.csv, "
          "figure.png, run.json; per unit <method>/<fold>/seed-<seed>/ with best/ (a model folder `tecb-eval run "
          "--model` takes)")
    return 0


EXAMPLES = """examples (a quick look on the first fold; the paper's schedule is the default):
  tecb-eval finetune --model minilm-l6 --data out/blurbs-clustering-s2s --method cob --folds 1 \\
      --max-steps 20 --out finetune-out
  tecb-eval finetune --model deepset/gbert-base --data out/blurbs-clustering-s2s --data out/tenkgnad-clustering-s2s \\
      --protocol transfer --method cob --method triplet --out finetune-transfer"""


def register(subparsers) -> argparse.ArgumentParser:
    from tecb_eval.cli.options import SeedsAction, parse_seeds
    from tecb_eval.grid.seeds import PAPER_SEEDS
    from tecb_eval.finetuning.protocols import PROTOCOLS
    from tecb_eval.finetuning.settings import METHODS

    p = subparsers.add_parser("finetune", help="train a model on a clustering metric (COB) and its baselines, leak-free",
                              description=__doc__.splitlines()[0], epilog=EXAMPLES)
    p.add_argument("--model", required=True, help="sentence-transformers or transformers folder, Hub repo id, or minilm-l6")
    p.add_argument("--data", action="append", required=True,
                   help="dataset folder (repeatable): one Blurbs build for leave-one-genre-out; Blurbs plus the "
                        "datasets to score for transfer")
    p.add_argument("--method", action="append", choices=METHODS,
                   help=f"repeatable (default all: {', '.join(METHODS)})")
    p.add_argument("--protocol", choices=PROTOCOLS, default=PROTOCOLS[0],
                   help="leave-one-genre-out: Blurbs, each fold trains on the books of the other genres and "
                        "scores the held-out genre; transfer: train on Blurbs, score every split of the other --data "
                        f"(default {PROTOCOLS[0]})")
    p.add_argument("--folds", type=int, help="run only the first N folds")
    p.add_argument("--seeds", type=parse_seeds, nargs="+", action=SeedsAction, metavar="SEED",
                   help=f"training seeds, e.g. 42 or 42,1,2 (default {DEFAULT_SEED})")
    p.add_argument("--score-seeds", type=parse_seeds, nargs="+", action=SeedsAction, metavar="SEED",
                   help=f"k-means seeds when scoring (default the grid's {' '.join(map(str, PAPER_SEEDS))})")
    for name, option, kind, text in _SETTINGS:
        p.add_argument(option, dest=name, type=kind, help=text, metavar=option.lstrip("-").replace("-", "_").upper())
    p.add_argument("--out", type=Path, required=True,
                   help="output folder (written as OUT.partial, then renamed; a rerun resumes an interrupted one)")
    p.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: CUDA when present)")
    p.add_argument("--regulariser-without-self-pairs", action="store_true",
                   help="COB's regulariser leaves each text's pair with itself out of the same-cluster mean (the "
                        "earlier default; the authors count it)")
    p.add_argument("--no-save-best", action="store_true", help="score the last model instead of keeping the best")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an output folder an earlier `tecb-eval finetune` wrote (never any other folder)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_cmd_finetune)
    return p
