"""`tecb-eval`: run the model x algorithm x reduction grid and read its results.

Thin: each command parses its arguments, calls one library function and prints the outcome.
User errors end in one line on stderr and exit 2; --debug shows the traceback instead.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from tecb_data.errors import UserError, run_command

DEFAULT_CACHE = Path(".tecb-cache")
DEMO_MODELS = ("tfidf-lsa", "minilm-l6")
DEMO_SPLITS = 4
SCHEDULER_TIMEOUT = 30.0  # seconds; tecb_eval.executors.DASK_CONNECT_TIMEOUT, without importing it here
_OPTION = re.compile(r",(layer|max_length|batch_size|name|device)=([^,]*)")


def parse_model(text: str):
    """``SPEC[,layer=K][,max_length=N][,batch_size=B][,name=NAME]`` -> a run_grid model item."""
    options = {key: value for key, value in _OPTION.findall(text)}
    spec = _OPTION.sub("", text)
    if not spec:
        raise UserError(f"--model {text!r}: no model named before the options")
    for key in ("layer", "max_length", "batch_size"):
        if key in options:
            try:
                options[key] = int(options[key])
            except ValueError:
                raise UserError(f"--model {text!r}: {key} must be an integer") from None
    return {"spec": spec, **options} if options else spec


def parse_seeds(text: str) -> tuple[int, ...]:
    """``--seeds 42,1,2`` -> (42, 1, 2); run_grid checks range and repeats."""
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or not all(items):
        raise argparse.ArgumentTypeError(f"{text!r}: give seeds separated by commas, e.g. 42,1,2")
    try:
        return tuple(int(item) for item in items)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: every seed must be an integer, e.g. 42,1,2") from None


def _datasets(paths: list[str]) -> list[str]:
    """Dataset folders as given; a folder that holds dataset folders stands for all of them."""
    out = []
    for item in paths:
        path = Path(item)
        if path.is_dir() and not (path / "manifest.json").is_file():
            found = sorted(p for p in path.iterdir() if (p / "manifest.json").is_file())
            if not found:
                raise UserError(f"{path}: neither a dataset folder (no manifest.json) nor a folder of them")
            out += [str(p) for p in found]
        else:
            out.append(item)
    return out


def _print_tables(frame, fmt: str = "md", selection: dict | None = None) -> None:
    from tecb_eval import report

    # The same tables as `table` and `export` write: one version, its seeds' spread, the markers.
    for table, note in report.tables(frame, selection=selection).values():
        print(report.format_table(table, fmt, note=note))


def _selection(args) -> dict:
    """Which version of each result a table shows (tecb_eval.versions.select); default the newest."""
    return {"protocol": args.protocol, "profile": args.profile, "seeds": args.seeds,
            "fingerprints": args.fingerprint or (), "identities": args.model_identity or ()}


def _selection_options(p: argparse.ArgumentParser) -> None:
    from tecb_eval.profiles import PROFILES
    from tecb_eval.protocols import PROTOCOLS

    p.add_argument("--protocol", choices=PROTOCOLS, help="show this protocol's results (default: the newest's)")
    p.add_argument("--profile", choices=list(PROFILES), help="show this profile's results (default: the newest's)")
    p.add_argument("--seeds", help="show the run with this seed set, e.g. 42,1,2 (default: the newest per dataset)")
    p.add_argument("--fingerprint", action="append",
                   help="show this dataset build (a fingerprint prefix; repeatable; default: the newest per dataset)")
    p.add_argument("--model-identity", action="append",
                   help="show this model identity (a prefix; repeatable; default: the newest per model and dataset)")


def _run(args, models, datasets, configurations=None):
    from tecb_data.outputs import writable_folder
    from tecb_eval.grid import run_grid

    if getattr(args, "out", None) is not None:
        writable_folder(args.out, option="--out")  # a read-only or file-typed --out fails now, not after the grid
    return run_grid(
        datasets, models, algorithms=args.algorithm, reductions=args.reduction or None,
        configurations=configurations, protocol=args.protocol, profile=args.profile, seed=args.seed,
        seeds=args.seeds, cache_dir=args.cache_dir,
        results=args.results, limit_splits=args.limit_splits or None, progress=not args.quiet,  # 0: all
        jobs=args.jobs, scheduler=args.scheduler, scheduler_timeout=args.scheduler_timeout,
        memory_limit=args.memory_limit,
    )


def _export(args, frame, datasets, models) -> None:
    from tecb_eval.export import export_all, figure1

    log = lambda message: print(message, file=sys.stderr)  # noqa: E731
    # Only `demo` sets args.demo: its synthetic data must not pass for the paper's.
    written = export_all(frame, args.out, reference=args.reference, log=log, demo=getattr(args, "demo", False))
    if not args.no_figure1:
        for model in models:
            written.append(figure1(datasets, model, args.out, seed=args.seed, cache_dir=args.cache_dir))
    print(f"wrote {len(written)} files to {args.out}/ (results.csv, table2.md, table3.md, mteb/, *.png)", file=sys.stderr)


def _cmd_run(args) -> int:
    from tecb_eval.algorithms import REDUCTIONS

    if args.reduction is None:
        args.reduction = list(REDUCTIONS)
    models = [parse_model(m) for m in args.model]
    datasets = _datasets(args.data)
    if args.out and args.reference is not None:
        from tecb_eval.report import read_reference

        read_reference(args.reference)  # a wrong file fails now, not after the grid
    frame = _run(args, models, datasets, args.config)
    _print_tables(frame, args.format)
    if args.out:
        _export(args, frame, datasets, models)
    return 0


def _cmd_demo(args) -> int:
    """A small grid with the offline encoders on the demo datasets, Tables 2 and 3, and the plots."""
    from tecb_eval.algorithms import REDUCTIONS
    from tecb_eval.report import DEMO_NOTE, read_reference

    if args.reference is not None:
        read_reference(args.reference)  # a wrong file fails now, not after the grid
    args.reduction = list(REDUCTIONS)
    args.algorithm, args.protocol = None, "legacy"
    args.results = args.results or args.out / "results.jsonl"
    args.limit_splits = args.limit_splits or None
    models = list(args.model or DEMO_MODELS)
    datasets = _datasets(args.data)
    frame = _run(args, [parse_model(m) for m in models], datasets)
    print(f"Note: {DEMO_NOTE}\n")
    _print_tables(frame)
    _export(args, frame, datasets, [parse_model(m) for m in models])
    print(f"Note: {DEMO_NOTE}", file=sys.stderr)
    return 0


def _print_paper_tables(reference, which: str, fmt: str) -> None:
    from tecb_eval import report

    made = {"2": report.paper_table2, "3": report.paper_table3}
    for number in ("2", "3") if which == "both" else (which,):
        if which == "both" and number == "3":
            print()
        print(report.format_table(made[number](reference), fmt, note=report.paper_note(number)), end="")


def _cmd_table(args) -> int:
    from tecb_eval import report
    from tecb_eval.versions import read_store, select, versions

    reference = report.read_reference(args.reference) if args.reference else None
    if args.paper:
        if reference is None:
            raise UserError(f"--paper prints the paper's tables from the authors' CSV: add --reference {report.REFERENCE_CSV}")
        if args.results is not None or args.table == "full":
            raise UserError("--paper prints the paper's Table 2 and/or 3 alone: leave out the results store and --table full")
        _print_paper_tables(reference, args.table, args.format)
        return 0
    if args.results is None:
        raise UserError("name a results store (JSONL), or pass --paper --reference CSV for the paper's tables alone")
    frame = read_store(args.results)
    if args.versions:
        print(report.format_table(versions(frame).astype(str), "csv" if args.format == "csv" else "md",
                                  note="Versions in the store (shown: what `table` and `export` show by default)."), end="")
        return 0
    if args.table == "full":
        if reference is not None:
            raise UserError("--reference sets the paper's figures beside Tables 2 and 3, not beside --table full")
        frame, left_out = select(frame, **_selection(args))
        if left_out:
            print(left_out, file=sys.stderr)
        layout = report.reference_layout(frame)
        if args.format == "csv":
            print(layout.to_csv(index=False, float_format="%.15g", lineterminator="\n"), end="")
        else:
            layout = layout.set_index(report.HEADER)
            print(report.format_table(layout, args.format), end="")
    elif reference is None and not args.demo and args.table == "both":
        _print_tables(frame, args.format, _selection(args))
    else:
        shown = report.tables(frame, reference, demo=args.demo, selection=_selection(args))
        if args.table == "2" and "table2" not in shown:
            raise UserError(f"{args.results}: no minibatch_kmeans:none cells, which Table 2 reports")
        for number in ("2", "3") if args.table == "both" else (args.table,):
            if f"table{number}" in shown:
                table, note = shown[f"table{number}"]
                print(report.format_table(table, args.format, note=note), end="\n" if args.table == "both" else "")
    return 0


def _cmd_layers(args) -> int:
    from tecb_eval.layers import SUMMARY_MD, layer_sweep

    table = layer_sweep(args.model, _datasets(args.data), layers=args.layers, seed=args.seed, cache_dir=args.cache_dir,
                        output_dir=args.out, max_length=args.max_length, batch_size=args.batch_size, device=args.device,
                        results=args.results, profile=args.profile, progress=not args.quiet)
    print((args.out / SUMMARY_MD).read_text(encoding="utf-8"), end="")
    print(f"wrote {args.out}/: layers.csv, splits.csv, figure.png, summary.md "
          f"({len(table)} dataset x layer rows; vectors cached in {args.cache_dir}/ under each layer's identity)",
          file=sys.stderr)
    return 0


def _cmd_compare(args) -> int:
    from tecb_eval import compare, report
    from tecb_eval.versions import read_store, select

    if len(args.model) != 2:
        raise UserError(f"compare takes two models, --model A --model B; got {len(args.model)}")
    algorithm, _, reduction = args.config.partition(":")
    frame, left_out = select(read_store(args.results), **_selection(args))
    results = compare.compare(frame, *args.model, args.dataset, algorithm=algorithm, reduction=reduction or "none",
                              confidence=args.confidence, resamples=args.resamples, seed=args.seed)
    table = compare.comparison_table(results)
    if args.format == "csv":
        print(table.to_csv(float_format="%.6f", lineterminator="\n"), end="")
    else:
        shown = table[["mean_a", "mean_b", "difference", "low", "high"]].copy()
        note = (f"A = {args.model[0]}, B = {args.model[1]}, {algorithm}:{reduction or 'none'}; V-measure x100; "
                f"A - B with its {100 * args.confidence:g} % paired bootstrap interval (low, high) over splits and seeds.")
        print(report.format_table(shown, args.format, note=note), end="")
        print("\n" + "\n".join(c.sentence() for c in results))
    if left_out:
        print(left_out, file=sys.stderr)
    return 0


def _cmd_export(args) -> int:
    from tecb_data.outputs import writable_folder
    from tecb_eval.export import export_all
    from tecb_eval.versions import read_store

    writable_folder(args.out, option="--out")
    written = export_all(read_store(args.results), args.out, reference=args.reference,
                         log=lambda m: print(m, file=sys.stderr), demo=args.demo, selection=_selection(args))
    print(f"wrote {len(written)} files to {args.out}/")
    return 0


def _grid_options(p: argparse.ArgumentParser) -> None:
    from tecb_eval.grid import DEFAULT_SEED
    from tecb_eval.profiles import DEFAULT_PROFILE, PROFILES
    from tecb_eval.protocols import PROTOCOLS

    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"k-means / UMAP seed (default {DEFAULT_SEED})")
    p.add_argument("--seeds", type=parse_seeds, metavar="S1,S2,...",
                   help="run every reduction and clustering once per seed (encoding once), e.g. 42,1,2; "
                        "instead of --seed")
    p.add_argument("--jobs", type=int, metavar="N",
                   help="local worker processes (default: every core, or $TECB_JOBS; 1: in this process)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run on a Dask distributed cluster instead, e.g. tcp://host:8786 (see README)")
    p.add_argument("--scheduler-timeout", type=float, default=SCHEDULER_TIMEOUT, metavar="SECONDS",
                   help=f"how long to wait for the Dask scheduler (default {SCHEDULER_TIMEOUT:g})")
    p.add_argument("--memory-limit", metavar="SIZE",
                   help="memory for units running side by side, e.g. 8GB or 0.5 (of RAM); per worker on a "
                        "cluster (default: 70 %% of RAM, of each worker's limit on a cluster)")
    p.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE,
                   help=f"embedding and reduction cache, shared by runs (default {DEFAULT_CACHE})")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--reference", type=Path, help="the authors' tecb-de-full-results.csv, to plot ours beside theirs")
    p.add_argument("--no-figure1", action="store_true", help="skip the UMAP scatter plots")
    p.add_argument("--profile", choices=list(PROFILES), default=DEFAULT_PROFILE,
                   help="current: today's libraries; paper: what the authors ran (river 0.14's DBSTREAM)")
    p.set_defaults(protocol=PROTOCOLS[0])


def parser() -> argparse.ArgumentParser:
    from tecb_eval.algorithms import ALGORITHMS, REDUCTIONS
    from tecb_eval.protocols import PROTOCOLS

    root = argparse.ArgumentParser(prog="tecb-eval", description=__doc__.splitlines()[0])
    root.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    commands = root.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run or resume a grid; prints Tables 2 and 3")
    run.add_argument("--data", action="append", required=True,
                     help="dataset folder, folder of dataset folders, or Hub repo_id@revision (repeatable)")
    run.add_argument("--model", action="append", required=True,
                     help="built-in name (minilm-l6, use-multilingual, tfidf-lsa), model folder or Hub id; "
                          "options: SPEC,layer=K,max_length=N,name=NAME (repeatable)")
    run.add_argument("--algorithm", action="append", choices=ALGORITHMS,
                     help="repeatable; default: all (legacy) or minibatch_kmeans (fast)")
    run.add_argument("--reduction", action="append", choices=REDUCTIONS, help="repeatable; default: all")
    run.add_argument("--config", action="append", metavar="ALGORITHM:REDUCTION",
                     help="run exactly these configurations (repeatable), e.g. hdbscan:none")
    run.add_argument("--protocol", choices=PROTOCOLS, default="legacy",
                     help="legacy: per split (the paper, MTEB v1); fast: MTEB v2 bootstrapped k-means")
    run.add_argument("--results", type=Path, required=True, help="results store (JSONL); a rerun resumes it")
    run.add_argument("--limit-splits", type=int, help="only the first N splits of each dataset (legacy; 0 = all)")
    run.add_argument("--format", choices=["md", "csv", "latex"], default="md")
    run.add_argument("--out", type=Path, help="also write CSV, tables, MTEB JSON and plots here")
    _grid_options(run)
    run.set_defaults(func=_cmd_run, protocol="legacy")

    demo = commands.add_parser("demo", help="small grid with the offline encoders; tables and plots")
    demo.add_argument("--data", action="append", required=True, help="dataset folder or folder of them (repeatable)")
    demo.add_argument("--out", type=Path, required=True, help="where results.jsonl, tables and plots go")
    demo.add_argument("--model", action="append", help=f"default: {', '.join(DEMO_MODELS)}")
    demo.add_argument("--results", type=Path, help="results store (default OUT/results.jsonl)")
    demo.add_argument("--limit-splits", type=int, default=DEMO_SPLITS,
                      help=f"first N splits of each dataset (default {DEMO_SPLITS}: a quick look; 0 = all)")
    _grid_options(demo)
    demo.set_defaults(func=_cmd_demo, demo=True)

    table = commands.add_parser("table", help="print tables from a results store, or the paper's")
    table.add_argument("results", type=Path, nargs="?", help="results store (JSONL); not with --paper")
    table.add_argument("--format", choices=["md", "csv", "latex"], default="md")
    table.add_argument("--table", choices=["2", "3", "full", "both"], default="both",
                       help="2: model x dataset; 3: algorithm x reduction; full: the authors' CSV layout")
    table.add_argument("--reference", type=Path,
                       help="the authors' tecb-de-full-results.csv: the paper's printed figures beside ours")
    table.add_argument("--paper", action="store_true",
                       help="print the paper's Table 2 / 3 alone, from --reference (no results store)")
    table.add_argument("--demo", action="store_true", help="mark the tables as synthetic demo data")
    table.add_argument("--versions", action="store_true",
                       help="list the versions (dataset build, seed set, protocol, profile, model identity) in the store")
    _selection_options(table)
    table.set_defaults(func=_cmd_table)

    export = commands.add_parser("export", help="write CSV, tables, MTEB JSON and plots from a results store")
    export.add_argument("results", type=Path)
    export.add_argument("--out", type=Path, required=True)
    export.add_argument("--reference", type=Path,
                        help="the authors' tecb-de-full-results.csv: the paper's figures beside ours")
    export.add_argument("--demo", action="store_true",
                        help="results of `tecb-eval demo`: mark tables and plots as not comparable with the paper")
    _selection_options(export)
    export.set_defaults(func=_cmd_export)

    compare = commands.add_parser("compare", help="A - B paired over splits and seeds: interval, p-value, does the ranking hold")
    compare.add_argument("results", type=Path, help="results store (JSONL)")
    compare.add_argument("--model", action="append", required=True, help="model A, then model B (as named in the tables)")
    compare.add_argument("--dataset", action="append", help="MTEB name of a dataset (repeatable; default: all both have)")
    compare.add_argument("--config", default="minibatch_kmeans:none", metavar="ALGORITHM:REDUCTION",
                         help="configuration compared (default minibatch_kmeans:none, Table 2's)")
    compare.add_argument("--confidence", type=float, default=0.95, help="interval level (default 0.95)")
    compare.add_argument("--resamples", type=int, default=9999, help="bootstrap and permutation resamples (default 9999)")
    compare.add_argument("--seed", type=int, default=42, help="seed of the bootstrap and permutations (default 42)")
    compare.add_argument("--format", choices=["md", "csv", "latex"], default="md")
    _selection_options(compare)
    compare.set_defaults(func=_cmd_compare)

    layers = commands.add_parser("layers", help="V-measure of every layer of a transformers model, one forward pass")
    layers.add_argument("--model", required=True,
                        help="transformers or sentence-transformers folder, Hub id[@revision], or minilm-l6")
    layers.add_argument("--data", action="append", required=True,
                        help="dataset folder, folder of dataset folders, or Hub repo_id@revision (repeatable)")
    layers.add_argument("--layers", default=None,
                        help="e.g. 0-12 or 0,4,6-8 (0 = embedding layer; default: all of the model's)")
    layers.add_argument("--out", type=Path, required=True, help="where layers.csv, splits.csv, figure.png, summary.md go")
    layers.add_argument("--results", type=Path, help="also append the cells to this grid results store (JSONL)")
    layers.add_argument("--max-length", type=int, help="tokens per text (default 512, clipped to the model's)")
    layers.add_argument("--batch-size", type=int, default=32, help="texts per forward pass (default 32)")
    layers.add_argument("--device", help="cpu, cuda, ... (default: CUDA when present)")
    from tecb_eval.grid import DEFAULT_SEED
    from tecb_eval.profiles import DEFAULT_PROFILE, PROFILES

    layers.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"k-means seed (default {DEFAULT_SEED})")
    layers.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE,
                        help=f"embedding cache shared with `run` (default {DEFAULT_CACHE})")
    layers.add_argument("--profile", choices=list(PROFILES), default=DEFAULT_PROFILE, help="named in every row")
    layers.add_argument("--quiet", action="store_true", help="no progress bars")
    layers.set_defaults(func=_cmd_layers)

    from tecb_eval.pretrain_cli import register as register_pretrain

    register_pretrain(commands)
    return root


def main(argv: list[str] | None = None) -> int:
    return run_command("tecb-eval", parser(), argv, interrupted="finished cells are in the results store, rerun the same command to resume")


if __name__ == "__main__":
    sys.exit(main())
