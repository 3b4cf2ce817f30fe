"""`tecb-eval table`, `export` and `compare`: read a results store (one version per table), print or
write its tables, MTEB JSON and plots, and say how sure a ranking is."""

from __future__ import annotations

import sys
from pathlib import Path

from tecb_data.errors import UserError
from tecb_data.seeding import DEFAULT_SEED
from tecb_eval.cli.options import format_option, print_tables, selection, selection_options
from tecb_eval.reports.working import reads_store

def _print_paper_tables(reference, which: str, fmt: str) -> None:
    from tecb_eval.reports import tables as report

    made = {"2": report.paper_table2, "3": report.paper_table3}
    for number in ("2", "3") if which == "both" else (which,):
        if which == "both" and number == "3":
            print()
        print(report.format_table(made[number](reference), fmt, note=report.paper_note(number)), end="")


# What Ctrl-C leaves, said by the command that was stopped (not the grid's sentence about cells).
READ_ONLY = "nothing was written (the command only reads the results store)"
NOTHING_YET = "nothing was written yet"

@reads_store("table")
def _cmd_table(args) -> int:
    from tecb_eval.reports import tables as report
    from tecb_eval.reports.versions import read_store, select, versions

    if args.versions:
        # A listing of every version: options that choose or annotate one table would do nothing.
        ignored = [option for option, given in (
            ("--paper", args.paper), ("--table", args.table != "both"), ("--reference", args.reference is not None),
            ("--demo", args.demo), ("--protocol", args.protocol is not None), ("--profile", args.profile is not None),
            ("--seeds", args.seeds is not None), ("--fingerprint", bool(args.fingerprint)),
            ("--model-identity", bool(args.model_identity))) if given]
        if ignored:
            raise UserError(f"--versions lists every version in the store, whatever {', '.join(ignored)} would choose "
                            "or add: leave those out, or drop --versions to print the tables they choose")
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
    if args.levels or args.density:
        from tecb_eval.reports import scores

        chosen, left_out = select(frame, **selection(args))
        # The demo's mark and what the table leaves out travel with it, as with Tables 2 and 3; a CSV
        # stays data only, so they go to stderr there.
        demo = [report.DEMO_NOTE] if args.demo or report.synthetic_datasets(chosen) else []
        notes = []

        def shown(table, note: list[str], **options) -> str:
            notes.extend([*demo, *note])
            return report.format_table(table, args.format, note="\n".join([*demo, *note]), **options)

        if args.levels:
            coverage = report.levels_coverage(chosen)
            print(shown(scores.levels_table(chosen, args.levels),
                        [scores.levels_note(args.levels), *([coverage] if coverage else [])]), end="")
        if args.density:
            if args.levels:
                print()
            density = scores.density_table(chosen)
            print(shown(density if args.format == "csv" else scores.density_shown(density), [scores.density_note()],
                        scale=1.0), end="")
        if args.format == "csv":
            for line in dict.fromkeys(notes):
                print(line, file=sys.stderr)
        if left_out:
            print(left_out, file=sys.stderr)
        return 0
    if args.versions:
        print(report.format_table(versions(frame).astype(str), args.format,
                                  note="Versions in the store (shown: what `table` and `export` show by default)."), end="")
        return 0
    if args.table == "full":
        if reference is not None:
            raise UserError("--reference sets the paper's figures beside Tables 2 and 3, not beside --table full")
        frame, left_out = select(frame, **selection(args))
        if left_out:
            print(left_out, file=sys.stderr)
        layout = report.reference_layout(frame)
        if args.format == "csv":
            print(report.csv_safe(layout).to_csv(index=False, float_format="%.15g", lineterminator="\n"), end="")
        else:
            layout = report.cost_columns_as_text(layout).set_index(report.HEADER)
            print(report.format_table(layout, args.format), end="")
    elif reference is None and not args.demo and args.table == "both":
        print_tables(frame, args.format, selection(args))
    else:
        shown = report.tables(frame, reference, demo=args.demo, selection=selection(args))
        if args.table == "2" and "table2" not in shown:
            raise UserError(f"{args.results}: no minibatch_kmeans:none cells, which Table 2 reports")
        for number in ("2", "3") if args.table == "both" else (args.table,):
            if f"table{number}" in shown:
                table, note = shown[f"table{number}"]
                print(report.format_table(table, args.format, note=note), end="\n" if args.table == "both" else "")
    return 0


@reads_store("compare")
def _cmd_compare(args) -> int:
    from tecb_eval.reports import compare, tables as report
    from tecb_eval.reports.versions import read_store, select

    if len(args.model) != 2:
        raise UserError(f"compare takes two models, --model A --model B; got {len(args.model)}")
    compare.check_settings(args.confidence, args.resamples, args.seed,
                           options={"confidence": "--confidence", "resamples": "--resamples", "seed": "--seed"})
    algorithm, _, reduction = args.config.partition(":")
    store = read_store(args.results)
    frame, left_out = select(store, **selection(args))
    results = compare.compare(frame, *args.model, args.dataset, algorithm=algorithm, reduction=reduction or "none",
                              confidence=args.confidence, resamples=args.resamples, seed=args.seed, store=store)
    table = compare.comparison_table(results)
    if args.format == "csv":
        print(report.csv_safe(table).to_csv(float_format="%.6f", lineterminator="\n"), end="")
    else:
        shown = compare.shown_table(results)
        from tecb_eval.files import one_line

        note = (f"A = {one_line(args.model[0])}, B = {one_line(args.model[1])}, {algorithm}:{reduction or 'none'}; "
                f"V-measure x100; A - B with its {100 * args.confidence:g} % paired bootstrap interval (low, high) over "
                f"splits and seeds, its SD over splits (sd), the sign-flip p ({args.resamples} resamples, exact for few "
                f"splits), the configuration's noise floor (floor: what moving every vector by 1e-7 changes, "
                f"bench/bench_reduction_noise_floor.py; 0 without UMAP) and whether the ranking holds (interval "
                f"excludes 0, p < {1 - args.confidence:.2g}, and A - B larger than the floor).")
        if not all(c.independent for c in results):
            note += ("\nFast protocol: sd is the SD over its bootstrap draws; low/high stay empty and p/holds are –: the "
                     "draws share one pool of texts, so they are not independent evidence for an interval or a test.")
        if report.synthetic_datasets(frame):
            note = report.DEMO_NOTE + "\n" + note
        print(report.format_table(shown, args.format, note=note), end="")
        print("\n" + "\n".join(c.sentence() for c in results))
    if left_out:
        print(left_out, file=sys.stderr)
    return 0


@reads_store("export")
def _cmd_export(args) -> int:
    from tecb_data.outputs import check_output, published
    from tecb_eval.reports.export import EXPORT, export_all, interrupted_state
    from tecb_eval.reports.versions import read_store

    # A --out that is not an earlier export's, or holds the store, fails before the store is read.
    check_output(args.out, EXPORT, inputs=[args.results, args.reference])
    frame = read_store(args.results)
    since = len(published())
    args.interrupted = lambda: interrupted_state(args.out, since)
    written = export_all(frame, args.out, reference=args.reference, log=lambda m: print(m, file=sys.stderr),
                         demo=args.demo, selection=selection(args), inputs=[args.results])
    print(f"wrote {len(written)} files to {args.out}/")
    return 0


def register(commands) -> None:
    table = commands.add_parser(
        "table", help="print tables from a results store, or the paper's",
        description="Print Tables 2 and 3 (or the full layout) from a results store, one version of the results "
                    "(newest by default), or the paper's printed tables from the authors' CSV.",
        epilog="examples:\n  tecb-eval table results.jsonl --table 2 --format latex\n"
               "  tecb-eval table --paper --reference ../shared/reference/tecb-de-full-results.csv")
    table.add_argument("results", type=Path, nargs="?", help="results store (JSONL); not with --paper")
    format_option(table, "table format")
    table.add_argument("--table", choices=["2", "3", "full", "both"], default="both",
                       help="2: model x dataset; 3: algorithm x reduction; full: the authors' CSV layout; "
                            "both: 2 and 3 (default both)")
    table.add_argument("--reference", type=Path,
                       help="the authors' tecb-de-full-results.csv: the paper's printed figures beside ours")
    table.add_argument("--paper", action="store_true",
                       help="print the paper's Table 2 / 3 alone, from --reference (no results store)")
    table.add_argument("--demo", action="store_true", help="mark the tables as synthetic demo data")
    table.add_argument("--versions", action="store_true",
                       help="list the versions (dataset build, seed set, protocol, profile, model identity) in the store")
    table.add_argument("--levels", choices=["v_measure", "ami"], nargs="?", const="v_measure", default=None,
                       help="per-level scores of a label hierarchy (Blurbs' genre levels), V-measure or AMI, instead "
                            "of Tables 2 and 3")
    table.add_argument("--density", action="store_true",
                       help="HDBSCAN and DBSTREAM: DBCV beside V-measure and noise fraction, instead of Tables 2 and 3")
    selection_options(table)
    table.set_defaults(func=_cmd_table, interrupted=READ_ONLY)

    export = commands.add_parser(
        "export", help="write CSV, tables, MTEB JSON and plots from a results store",
        description="Write results.csv (the authors' layout), table2/table3 (.md, .csv), MTEB's results layout "
                    "(mteb/) and the plots of one version of a results store into one folder.",
        epilog="example:\n  tecb-eval export results.jsonl --out report/ "
               "--reference ../shared/reference/tecb-de-full-results.csv")
    export.add_argument("results", type=Path, help="results store (JSONL) written by `run` or `demo`")
    export.add_argument("--out", type=Path, required=True,
                        help="output folder for every format at once (CSV, Markdown, MTEB JSON, PNG): a new or "
                             "empty folder, or an earlier export's, which is replaced whole (never a folder "
                             "something else wrote)")
    export.add_argument("--reference", type=Path,
                        help="the authors' tecb-de-full-results.csv: the paper's figures beside ours")
    export.add_argument("--demo", action="store_true",
                        help="results of `tecb-eval demo`: mark tables and plots as not comparable with the paper")
    selection_options(export)
    export.set_defaults(func=_cmd_export, interrupted=NOTHING_YET)

    compare = commands.add_parser("compare", help="A - B paired over splits and seeds: interval, p-value, does the ranking hold "
                                                  "(fast protocol: the difference and its spread only)",
                                  description="Model A minus model B, paired over the splits and seeds both have.",
                                  epilog="example:\n  tecb-eval compare results.jsonl --model minilm-l6 --model tfidf-lsa")
    compare.add_argument("results", type=Path, help="results store (JSONL)")
    compare.add_argument("--model", action="append", required=True, help="model A, then model B (as named in the tables)")
    compare.add_argument("--dataset", action="append", help="MTEB name of a dataset (repeatable; default: all both have)")
    compare.add_argument("--config", default="minibatch_kmeans:none", metavar="ALGORITHM:REDUCTION",
                         help="configuration compared (default minibatch_kmeans:none, Table 2's)")
    compare.add_argument("--confidence", type=float, default=0.95, help="interval level (default 0.95)")
    compare.add_argument("--resamples", type=int, default=9999,
                         help="bootstrap and permutation resamples, at least 2 / (1 - confidence) (default 9999)")
    compare.add_argument("--seed", type=int, default=DEFAULT_SEED,
                         help="seed of the bootstrap and permutations, a non-negative integer "
                              f"(default {DEFAULT_SEED})")
    format_option(compare, "table format")
    selection_options(compare)
    compare.set_defaults(func=_cmd_compare, interrupted=READ_ONLY)
