"""`tecb-eval layers`: V-measure of every layer of a transformers model from one forward pass."""

from __future__ import annotations

import sys
from pathlib import Path

from tecb_eval.cli.options import DEFAULT_CACHE, dataset_folders


def _interrupted(args, since: int) -> str:
    from tecb_data.errors import UserError
    from tecb_data.outputs import output_target, published
    from tecb_eval.grid.store import stores_kept

    kept = [f"the vectors encoded so far are in {args.cache_dir}/"]
    # A store this run created and wrote no cell to is removed: it is named only while it is there.
    kept += [f"the finished cells in {store}" for store in stores_kept([args.results])]
    try:
        done = output_target(args.out) in published()[since:]
    except UserError:
        done = False
    if done:
        return f"the new sweep in {args.out} is complete"
    return (f"nothing in {args.out} was changed (it is written whole or not at all); " + " and ".join(kept)
            + ": run the same command again")


def _cmd_layers(args) -> int:
    from tecb_data.outputs import published
    from tecb_eval.layers import SUMMARY_MD, layer_sweep

    since = len(published())
    args.interrupted = lambda: _interrupted(args, since)
    datasets = dataset_folders(args.data)
    if args.cache_dir is not None:
        from tecb_data.outputs import refuse_nested

        # Named as the user gave it: --cache-dir, not the API's "cache folder".
        model = [args.model] if Path(args.model).is_dir() else []
        refuse_nested(args.cache_dir, option="--cache-dir", itself=True,
                      inputs=[d for d in datasets if Path(d).exists()] + model)
    table = layer_sweep(args.model, datasets, layers=args.layers, seed=args.seed,
                        cache_dir=args.cache_dir, output_dir=args.out, max_length=args.max_length,
                        batch_size=args.batch_size, device=args.device, results=args.results,
                        profile=args.profile, progress=not args.quiet)
    print((args.out / SUMMARY_MD).read_text(encoding="utf-8"), end="")
    print(f"wrote {args.out}/: layers.csv, splits.csv, figure.png, summary.md "
          f"({len(table)} dataset x layer rows; vectors cached in {args.cache_dir}/ under each layer's identity)",
          file=sys.stderr)
    return 0


def register(commands) -> None:
    from tecb_eval.clustering.profiles import DEFAULT_PROFILE, PROFILES
    from tecb_data.seeding import DEFAULT_SEED

    layers = commands.add_parser(
        "layers", help="V-measure of every layer of a transformers model, one forward pass",
        description="k-means V-measure of each hidden layer's mean-pooled embeddings, every layer from one "
                    "forward pass per text.",
        epilog="example:\n  tecb-eval layers --model deepset/gbert-base --data out/blurbs-clustering-s2s "
               "--layers 0-12 --out layers-out")
    layers.add_argument("--model", required=True,
                        help="transformers or sentence-transformers folder, Hub id[@revision], or minilm-l6")
    layers.add_argument("--data", action="append", required=True,
                        help="dataset folder, folder of dataset folders, or Hub repo_id@revision (repeatable)")
    layers.add_argument("--layers", default=None,
                        help="e.g. 0-12 or 0,4,6-8 (0 = embedding layer; default: all of the model's)")
    layers.add_argument("--out", type=Path, required=True,
                        help="where layers.csv, splits.csv, figure.png, summary.md go: a new or empty folder or an "
                             "earlier sweep's, replaced whole")
    layers.add_argument("--results", type=Path, help="also append the cells to this grid results store (JSONL)")
    layers.add_argument("--max-length", type=int, help="tokens per text (default 512, clipped to the model's)")
    layers.add_argument("--batch-size", type=int, default=32, help="texts per forward pass (default 32)")
    layers.add_argument("--device", help="cpu, cuda, ... (default: CUDA when present)")
    layers.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"k-means seed (default {DEFAULT_SEED})")
    layers.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE,
                        help=f"embedding cache shared with `run` (default {DEFAULT_CACHE})")
    layers.add_argument("--profile", choices=list(PROFILES), default=DEFAULT_PROFILE, help="named in every row (default %(default)s)")
    layers.add_argument("--quiet", action="store_true", help="no progress bars")
    layers.set_defaults(func=_cmd_layers)
