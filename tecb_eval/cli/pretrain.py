"""`tecb-eval pretrain`: continued pre-training (WWM or TSDAE) with V-measure tracked during training."""

from __future__ import annotations

import argparse
from pathlib import Path

from tecb_data.seeding import DEFAULT_SEED

# (setting, type, help); each becomes --setting-name and overrides the method's default.
_SETTINGS = (
    ("epochs", int, "epochs (default: WWM 30, TSDAE 1; TSDAE 30 with --profile paper)"),
    ("eval_every", int, "optimizer steps between evaluations (default: WWM 25, TSDAE 512); the last step is always evaluated"),
    ("eval_schedule", str, "global: eval_every counted over the run; per-epoch: counted within each epoch, plus each "
                           "epoch's end, as sentence-transformers 2.2 (default global; TSDAE per-epoch with --profile paper)"),
    ("max_steps", int, "stop after this many optimizer steps"),
    ("truncate_at", int, "keep only the model's first K layers and train those (truncated-model fine-tuning); "
                         "the checkpoints are K-layer models"),
    ("learning_rate", float, "default: WWM 1e-4, TSDAE 3e-5"),
    ("weight_decay", float, "default: WWM 0.01, TSDAE 0"),
    ("batch_size", int, "texts per forward pass (default: WWM 32, TSDAE 8)"),
    ("grad_accumulation", int, "forward passes per optimizer step (default: WWM 8, TSDAE 1)"),
    ("warmup_ratio", float, "share of the steps warming up, then constant (default: WWM 0.06, TSDAE 0)"),
    ("max_length", int, "tokens per text in training (default 512, clipped to the model's); evaluations "
                        "encode as `tecb-eval run` does"),
    ("mlm_probability", float, "WWM: share masked (default 0.15): of the words (profile current), of the tokens, in whole words (paper)"),
    ("deletion_ratio", float, "TSDAE: share of words deleted (default 0.6)"),
    ("pooling", str, "TSDAE, plain checkpoints: pooling the decoder sees: mean (default), cls, max; a "
                        "sentence-transformers model keeps its own"),
    ("max_grad_norm", float, "gradient clipping (default 1.0)"),
    ("eval_batch_size", int, "texts per encoding batch in evaluations (default 32, the grid's)"),
    ("kmeans_seed", int, f"MiniBatchKMeans random_state (default {DEFAULT_SEED})"),
)


EXAMPLE = """example (a quick look; the paper's schedule is the default):
  tecb-eval pretrain --model deepset/gbert-base --data out/blurbs-clustering-s2s --method tsdae \\
      --seeds 42 1 --max-steps 200 --out pretrain-out"""


def _cmd_pretrain(args) -> int:
    from tecb_data.outputs import check_writable

    # Before torch and transformers are imported (seconds): an --out that cannot be written is one
    # line at once, not after them.
    check_writable(args.out)
    from tecb_eval.cli.options import dataset_folders
    from tecb_eval.pretraining import pretrain
    from tecb_eval.pretraining.run import DEFAULT_SEEDS

    overrides = {name: getattr(args, name) for name, _, _ in _SETTINGS}
    def interrupted() -> str:
        work = Path(f"{args.out}.partial")
        # Named only while it is there: an interrupt before the work folder was made left nothing.
        return (f"what was written is in {work}/ (a rerun starts afresh)" if work.is_dir() else
                f"nothing was written (no {work}/ yet)")

    args.interrupted = interrupted
    result = pretrain(
        args.model, dataset_folders(args.data), method=args.method, profile=args.profile, pool=args.pool,
        seeds=DEFAULT_SEEDS if args.seeds is None else args.seeds, output_dir=args.out, overwrite=args.overwrite,
        progress=not args.quiet, precision=args.precision, device=args.device, save_best=not args.no_save_best,
        **overrides,
    )
    print((result.output_dir / "summary.md").read_text(encoding="utf-8"))
    for name, run in result.runs.items():
        for seed, best in run.best.items():
            where = best["path"] or "not saved (--no-save-best)"
            print(f"{name} seed {seed}: best at step {best['step']} (epoch {best['epoch']:g}), "
                  f"mean V-measure {100 * best['v_measure']:.2f}: {where}")
    files = ("evaluations.csv, evaluations_splits.csv, losses.csv, figure.png, summary.csv, summary.md, run.json, "
             "timings.json, seed-<seed>/best/")
    how = "pooled: one model per seed on the union of the datasets" if result.pool else "one model per dataset and seed"
    print(f"profile {result.profile.name}, {how}")
    if result.pool:
        print(f"wrote {result.output_dir}/: {files}")
    else:
        print(f"wrote {result.output_dir}/: summary.md, summary.csv, figure.png, evaluations.csv, run.json; "
              f"per dataset {result.output_dir}/<dataset>/: {files}")
    return 0


def register(subparsers) -> argparse.ArgumentParser:
    """Add the ``pretrain`` command to the ``tecb-eval`` sub-commands."""
    from tecb_eval.cli.options import SeedsAction, parse_seeds
    from tecb_eval.grid.seeds import PAPER_SEEDS
    from tecb_eval.pretraining.settings import METHODS, PRECISIONS
    from tecb_eval.clustering.profiles import DEFAULT_PROFILE, PROFILES

    p = subparsers.add_parser("pretrain", help="continue pre-training a model on the datasets' texts (WWM or TSDAE)",
                              description=__doc__.splitlines()[0], epilog=EXAMPLE)
    p.add_argument("--model", required=True,
                   help="transformers checkpoint folder, Hub repo id[@revision], or minilm-l6")
    p.add_argument("--data", action="append", required=True,
                   help="dataset folder or folder of dataset folders (repeatable); each dataset's model trains on its "
                        "unique texts")
    p.add_argument("--method", choices=METHODS, default="wwm",
                   help="wwm: whole-word masked language modelling; tsdae: denoising auto-encoder (default wwm)")
    p.add_argument("--profile", choices=list(PROFILES), default=None,
                   help=f"{' or '.join(PROFILES)} (default {DEFAULT_PROFILE}): today's libraries, or what the paper's "
                        "authors ran (classic whole word masking, logits pooling in WWM evaluations, 30 TSDAE epochs)")
    p.add_argument("--pool", action="store_true",
                   help="train one model on the union of the datasets, not one per dataset as the paper did")
    p.add_argument("--out", type=Path, required=True,
                   help="output folder (written as OUT.partial, then renamed); not a dataset or model folder, nor "
                        "one that holds them")
    p.add_argument("--seeds", type=parse_seeds, nargs="+", action=SeedsAction, metavar="SEED",
                   help=f"one training run per seed, e.g. 42 1 2 or 42,1,2 (default {' '.join(map(str, PAPER_SEEDS))})")
    for name, kind, text in _SETTINGS:
        p.add_argument("--" + name.replace("_", "-"), dest=name, type=kind, help=text)
    p.add_argument("--precision", choices=PRECISIONS, default="fp32", help="fp16 needs CUDA; bf16 works on CPU too")
    p.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: CUDA when present)")
    p.add_argument("--no-save-best", action="store_true", help="do not keep the best checkpoint per seed")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an output folder an earlier `tecb-eval pretrain` wrote (never any other folder)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_cmd_pretrain)
    return p
