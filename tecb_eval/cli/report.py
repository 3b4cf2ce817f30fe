"""`tecb-eval report` and `recommend`: results for the people choosing a model and a pipeline, as
a static site that works offline, and as the best pipeline per dataset with a BERTopic
configuration."""

from __future__ import annotations

import sys
from pathlib import Path

from tecb_data.errors import UserError
from tecb_data.seeding import DEFAULT_SEED
from tecb_eval.cli.options import selection, selection_options
from tecb_eval.cli.results import NOTHING_YET, READ_ONLY
from tecb_eval.reports.working import reads_store


@reads_store("report")
def _cmd_report(args) -> int:
    from tecb_data.outputs import published
    from tecb_eval.reports.html import render

    since = len(published())

    def interrupted() -> str:
        from tecb_eval.reports.export import interrupted_state

        # The site is swapped in whole or not at all: say which of the two Ctrl-C left.
        return interrupted_state(args.out, since, "report")

    args.interrupted = interrupted
    written = render(args.results, args.out, reference=args.reference, selection=selection(args),
                     figure_folders=args.figures or (), draw_figures=not args.no_figures,
                     log=lambda message: print(message, file=sys.stderr), calibration=args.calibration)
    print(f"wrote {len(written)} pages to {args.out}/ (open {args.out / 'index.html'} in a browser)")
    return 0


@reads_store("recommend")
def _cmd_recommend(args) -> int:
    from tecb_eval.reports import compare, recommend
    from tecb_eval.reports.ranking import shared_selection
    from tecb_eval.reports.versions import read_store

    compare.check_settings(args.confidence, args.resamples, args.seed,
                           options={"confidence": "--confidence", "resamples": "--resamples", "seed": "--seed"})
    store = read_store(args.results)
    if _recommend_unlabelled(args, store):
        return 0
    if args.criterion is not None:
        raise UserError("--criterion ranks a corpus without labels; these datasets have labels, ranked by V-measure")
    if _recommend_ranges(args, store):
        return 0
    # The report's leaderboard and recommend compare the same rows: every model on the cells they share.
    chosen = shared_selection(store, **selection(args))
    frame = recommend.rows_to_recommend(chosen)
    left_out = "\n".join(line for line in (chosen.left_out, *chosen.notes()) if line) or None
    if frame.empty:
        raise UserError(f"{args.results}: no results in the version chosen")
    found = recommend.recommend(frame, args.data, confidence=args.confidence, resamples=args.resamples,
                                seed=args.seed)
    if args.format == "json":
        print(recommend.as_json(found, left_out), end="")
    else:
        print(recommend.text(found, left_out), end="")
    return 0


def _recommend_unlabelled(args, store) -> bool:
    """The corpora without labels among the datasets asked for, each ranked by a label-free
    criterion; True when every dataset asked for is one (nothing left for V-measure)."""
    from tecb_eval.reports import calibration, unlabelled
    from tecb_eval.reports.versions import select, unlabelled_rows

    corpora = sorted(store.loc[unlabelled_rows(store), "mteb_name"].unique())
    asked = args.data or sorted(store.mteb_name.unique())
    wanted = [d for d in asked if d in corpora]
    if not wanted:
        return False
    chosen, left_out = select(store[unlabelled_rows(store)], points=True, like_with_like=False, **selection(args))
    found = calibration.read_calibration(args.calibration)
    records = [unlabelled.recommend_unlabelled(chosen, dataset, criterion=args.criterion, calibration=found,
                                               k_cap=args.k_cap)
               for dataset in wanted]
    others = [d for d in asked if d not in corpora]
    note = (f"note: {', '.join(others)} have labels: run `tecb-eval recommend` with --data for them alone"
            if others else None)
    if args.format == "json":
        print(unlabelled.as_json(records, left_out, note), end="")
        return True
    for record in records:
        print(unlabelled.text(record), end="")
    if left_out:
        print(left_out)
    if note:
        print(note)
    return True


def _recommend_ranges(args, store) -> bool:
    """A labelled store whose rows are all points of k / min_cluster_size ranges: each dataset's
    pipelines at each point ranked by V-measure, the first with its k; True when it answered."""
    from tecb_eval.reports import unlabelled
    from tecb_eval.reports.versions import label_table_rows, range_rows, select, unlabelled_rows

    labelled = store[~unlabelled_rows(store)]
    if labelled.empty or not label_table_rows(labelled)[0].empty or not range_rows(labelled).any():
        return False
    chosen, left_out = select(labelled, points=True, like_with_like=False, **selection(args))
    records = [unlabelled.recommend_points(chosen, dataset)
               for dataset in (args.data or sorted(chosen.mteb_name.unique()))]
    if args.format == "json":
        print(unlabelled.as_json(records, left_out).replace('"labelled": false', '"labelled": true', 1), end="")
    else:
        print("".join(unlabelled.points_text(r) for r in records), end="")
        if left_out:
            print(left_out)
    return True


def _cmd_calibrate(args) -> int:
    from tecb_eval.reports import calibration
    from tecb_eval.reports.versions import read_store, select

    if args.out is not None:
        from tecb_data.outputs import check_output_file

        # Before any work: never a file the command did not write, never its input.
        check_output_file(args.out, option="--out", inputs=[args.results], outputs=[], ours=_is_calibration)
    frame, left_out = select(read_store(args.results), points=True, like_with_like=False, **selection(args))
    calibration.require_label_free(frame, args.results)
    cells = calibration.cell_statistics(frame, k_cap=args.k_cap)
    table = calibration.calibrate(frame, resamples=args.resamples, seed=args.seed, cells=cells)
    chosen = calibration.choose(cells)
    # The single criteria and the one chosen; the file holds every rank average too.
    print(calibration.format_table(table[~table.criterion.str.startswith(calibration.COMBINED)
                                         | (table.criterion == chosen)]))
    print(calibration.NOTE)
    held = calibration.held_out(cells)
    if len(held):
        print("\nleave one dataset out: the criterion chosen on the other datasets, on the one left out")
        print(calibration.format_held_out(held))
    v_table = calibration.calibrate(frame, resamples=args.resamples, seed=args.seed, target="v_measure",
                                    k_cap=args.k_cap)
    document = calibration.document(table, frame, cells=cells, v_table=v_table, k_cap=args.k_cap)
    print(f"best-calibrated criterion: {document['best']} (lowest mean AMI regret over the datasets, among the "
          "criteria comparable across vector spaces and the rank averages of two or more of them)")
    for line in calibration.missing_criteria(frame):
        print(line)
    if left_out:
        print(left_out)
    if args.out is not None:
        _write_json(args.out, document)
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _is_calibration(path: Path) -> bool:
    """Whether ``path`` holds a calibration (an earlier ``--out``), read as a calibration is read:
    bounded, and checked."""
    from tecb_eval.reports.calibration import read_calibration

    try:
        read_calibration(path)
    except UserError:
        return False
    return True


def _write_json(path: Path, document: dict) -> None:
    """Written beside its target and renamed over it, as every output is."""
    import json
    import os
    import tempfile

    from tecb_data.layout import current_umask

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, path)
    except OSError as exc:
        raise UserError(f"--out {path}: cannot write it ({exc.strerror})") from None


def register(commands) -> None:
    from tecb_eval.clustering.criteria import CRITERIA, K_CAPS

    report = commands.add_parser(
        "report", help="write a static HTML site of results stores (leaderboards, per-model pages)",
        description="Write a static site that works offline from file://: a leaderboard per dataset and view "
                    "(every model ranked by mean V-measure x100 of k-means on the embeddings over the split x seed "
                    "cells they share, margin, SD, bootstrap interval, coverage, best pipeline and its gain; an "
                    "average over datasets), a page per model (heat table of algorithm x reduction, AMI, ARI, noise fraction, "
                    "per-split scores), the figures and the provenance of every row.",
        epilog="example:\n  tecb-eval report results.jsonl --out report/ && xdg-open report/index.html")
    report.add_argument("results", type=Path, nargs="+", metavar="STORE",
                        help="results stores (JSONL); a later store's rows count as newer")
    report.add_argument("--out", type=Path, required=True,
                        help="the site's folder: new, empty, or an earlier report's, which is replaced whole "
                             "(never a folder something else wrote)")
    report.add_argument("--reference", type=Path,
                        help="the authors' tecb-de-full-results.csv: the paper's figures beside ours")
    report.add_argument("--figures", type=Path, action="append", metavar="DIR",
                        help="embed the PNG figures of this folder too: an export's of the same stores (matched by "
                             "the digest of the results each PNG records; others are left out, and named), a layer "
                             "sweep, pre-training curves; repeatable")
    report.add_argument("--no-figures", action="store_true",
                        help="leave out the plots: Table 2 / 3, the criteria over k of a corpus without labels (faster)")
    report.add_argument("--calibration", type=Path, metavar="FILE",
                        help="the calibration a corpus without labels' page shows: one `tecb-eval calibrate --out` "
                             "wrote (default: the one shipped, measured on our labelled German data)")
    selection_options(report)
    report.set_defaults(func=_cmd_report, interrupted=NOTHING_YET)

    recommend = commands.add_parser(
        "recommend", help="the best pipeline per dataset, how sure that is, and a BERTopic configuration",
        description="For each dataset of a results store: the best pipeline (model, reduction, algorithm and its "
                    "parameters), its mean V-measure and interval, whether its lead over the runner-up holds (the "
                    "paired test of `compare`), its noise fraction, and a BERTopic configuration to use it.",
        epilog="example:\n  tecb-eval recommend results.jsonl --data BlurbsClusteringS2S --format json")
    recommend.add_argument("results", type=Path, metavar="STORE", help="results store (JSONL)")
    recommend.add_argument("--data", action="append", metavar="DATASET",
                           help="MTEB name of a dataset (repeatable; default: every dataset in the store)")
    recommend.add_argument("--format", choices=["text", "json"], default="text", help="output (default text)")
    recommend.add_argument("--confidence", type=float, default=0.95, help="interval level (default 0.95)")
    recommend.add_argument("--resamples", type=int, default=9999,
                           help="bootstrap and permutation resamples, at least 2 / (1 - confidence) (default 9999)")
    recommend.add_argument("--seed", type=int, default=DEFAULT_SEED,
                           help="seed of the bootstrap and permutations, a non-negative integer "
                                f"(default {DEFAULT_SEED})")
    recommend.add_argument("--criterion", metavar="NAME",
                           help="a corpus without labels: rank by this label-free criterion (one of "
                                f"{', '.join(CRITERIA)}), or by a rank average of two or more (rank:A+B, rank:A+B+C) "
                                "(default: the one the calibration chose, leaving one dataset out)")
    recommend.add_argument("--calibration", type=Path, metavar="FILE",
                           help="a corpus without labels: the calibration `tecb-eval calibrate --out` wrote on your own "
                                "labelled store (default: the one shipped, measured on our labelled German data)")
    recommend.add_argument("--k-cap", choices=K_CAPS, default=None,
                           help="a corpus without labels: pick among the partitions with at most as many clusters as "
                                "the one the grid agrees on most (consensus), or among all (none) (default: the "
                                "calibration's rule; the shipped one caps)")
    selection_options(recommend)
    recommend.set_defaults(func=_cmd_recommend, interrupted=READ_ONLY)

    calibrate = commands.add_parser(
        "calibrate", help="how far each label-free criterion ranks pipelines as V-measure does, on labelled data",
        description="On a results store of labelled datasets: per dataset and over all, Spearman's rho and Kendall's "
                    "tau of each label-free criterion the rows carry, and of rank averages of them, with AMI (and "
                    "V-measure) over the pipelines of each split, the regret of choosing by it, with bootstrap "
                    "intervals over splits, and the criterion chosen leaving one dataset out: among the criteria "
                    "comparable across vector spaces and the rank averages of two or more of them.",
        epilog="example:\n  tecb-eval calibrate results.jsonl --out calibration.json")
    calibrate.add_argument("results", type=Path, metavar="STORE", help="results store (JSONL) of labelled datasets")
    calibrate.add_argument("--out", type=Path, help="also write the calibration as JSON, for `recommend --calibration`")
    calibrate.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    calibrate.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"bootstrap seed (default {DEFAULT_SEED})")
    calibrate.add_argument("--k-cap", choices=K_CAPS, default=K_CAPS[0],
                           help="measure each criterion's pick among the partitions with at most as many clusters as "
                                "the one the grid agrees on most (consensus, what recommend does), or among all (none) "
                                f"(default {K_CAPS[0]}; written to --out)")
    selection_options(calibrate)
    calibrate.set_defaults(func=_cmd_calibrate, interrupted=READ_ONLY)
