"""`tecb-data`: build, verify and describe the benchmark datasets.

Thin: each command parses its arguments, calls one library function and prints the outcome.
User errors end in one line on stderr and exit 2 (a failed verification exits 1); --debug shows
the traceback instead.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tecb_data.commandline import quiet_libraries, root_parser
from tecb_data.errors import UserError
from tecb_data.runner import run_command


# The spelling of an option whose argparse dest is not its name.
_FLAGS = {"id_column": "--id", "input_format": "--format"}


# One example per command, shown under its --help.
_EXAMPLES = {
    "tecb-data": "examples:\n  tecb-data build --source blurbs --demo --out demo-out\n"
                 "  tecb-data build --source blurbs --input ../shared/data/germeval2019 --out out\n"
                 "  tecb-data stats out/blurbs-clustering-s2s\n"
                 "`tecb-data COMMAND --help` describes each command.",
    "build": "examples:\n  tecb-data build --source blurbs --input blurbs_dev.txt --out out\n"
             "  tecb-data build --source tenkgnad --input articles.csv --out out   # 10kGNAD csv: P2P only\n"
             "  tecb-data build --source reddit --ids reddit-ids.csv --out out --praw-site tecb",
    "collect": "example:\n  tecb-data collect --source reddit --subreddits subreddits.txt --out ids.csv --praw-site tecb",
    "verify": "example:\n  tecb-data verify out/blurbs-clustering-s2s",
    "stats": "example:\n  tecb-data stats out/blurbs-clustering-s2s",
    "push": "example:\n  tecb-data push out/blurbs-clustering-s2s --repo-id my-org/blurbs-clustering-s2s --dry-run",
}


def _print_built(built) -> dict:
    for folder, manifest in built:
        stats = manifest["statistics"]
        texts = "unique ids" if manifest.get("view") == "ids" else "unique texts"
        print(
            f"{folder}: {stats['splits']} split{'' if stats['splits'] == 1 else 's'}, {stats['samples']:,} samples, "
            f"{stats['unique_texts']:,} {texts}, "
            + ("no labels; " if manifest.get("labelled") is False else f"{stats['unique_labels']} labels; ")
            + f"fingerprint {manifest['fingerprint'][:16]}" + ("; synthetic demo data" if manifest.get("synthetic") else "")
        )
    return manifest


def _flag(dest: str) -> str:
    return _FLAGS.get(dest, "--" + dest.replace("_", "-"))


def _cmd_build(args) -> int:
    from tecb_data.build import READERS, build
    from tecb_data.demo import demo_input

    reader = READERS[args.source]
    for name, other in READERS.items():
        misplaced = [dest for dest in other.own_options if getattr(args, dest) not in (None, False)]
        if other is not reader and misplaced:
            raise UserError(f"{_flag(misplaced[0])} is for --source {name} only")
    given = getattr(args, reader.input)
    if reader.demo:  # exactly one of its input and the demo sample
        wrong = args.demo == (given is not None)
    else:
        wrong = given is None or args.demo
    # --input beside a source that names its input otherwise, or --view where the views come together.
    if wrong or (reader.input != "input" and args.input is not None) or (not reader.views and args.view):
        raise UserError(reader.usage)
    input_path = demo_input(args.source) if args.demo else given
    views = tuple(dict.fromkeys(args.view)) if args.view else None
    for view in sorted({v for v in args.view or () if args.view.count(v) > 1}):
        # As `tecb-eval run --data` does with a dataset given twice: one build of it, said.
        print(f"note: --view {view} given {args.view.count(view)} times; it is built once", file=sys.stderr)
    options = {keyword: getattr(args, dest) for dest, keyword in reader.options.items() if getattr(args, dest) is not None}
    run: dict = {}
    built = build(args.source, input_path, args.out, seed=args.seed, views=views, paired=args.paired,
                  progress=not args.quiet, run_info=run, **options)
    report = _print_built(built)["report"]
    print("report: " + ", ".join(f"{k} {v}" for k, v in report.items() if not isinstance(v, list)))
    if run:
        print(
            f"rehydration: {run['ids_fetched']:,} ids fetched in {run['requests']:,} requests "
            f"({run['batches']:,} batches of up to 100 + {run['retries']} retries), "
            f"{run['ids_from_cache']:,} from the cache {run['cache']}"
        )
    if args.report is not None:
        print(f"removed rows with examples: {args.report}")
    if not views:
        _say_skipped_views(args.source, input_path, built)
    for problem in report.get("malformed_records", []):
        print(f"warning: skipped malformed record {problem}", file=sys.stderr)
    return 0


def _say_skipped_views(source: str, input_path, built) -> None:
    """A source whose input holds only some views (a 10kGNAD csv has no titles: P2P only) builds
    those; say which dataset was not built, so `--data out/<it>` is no surprise later."""
    from tecb_data.recipes import datasets_of

    made = {manifest.get("view") for _, manifest in built}
    for spec in datasets_of(source):
        if spec.view not in made:
            print(f"note: {spec.name} was not built: {input_path} holds no text for its {spec.view.upper()} view "
                  f"(built: {', '.join(sorted(v.upper() for v in made if v))})"
                  + ("; One Million Posts' corpus.sqlite3 has titles and builds both" if source == "tenkgnad" else ""),
                  file=sys.stderr)


def _cmd_collect(args) -> int:
    from tecb_data.sources import reddit_collect

    listings = tuple(name.strip() for name in args.listings.split(",") if name.strip())
    reports = reddit_collect.collect(
        args.subreddits, args.out, listings=listings, language=args.language, praw_site=args.praw_site,
        limit=args.limit, progress=not args.quiet,
    )
    for r in reports:
        mixed = f"mixes languages: {r.in_language} of {r.listed - r.gone} in {args.language!r}" if r.mixed else "monolingual"
        print(f"r/{r.name}: {r.listed} listed, {r.gone} already gone, {mixed}, {r.kept} kept")
    total = reddit_collect.summary(reports)
    print(f"{args.out}: {total['kept']:,} ids of {len(reports)} subreddits ({total['listed']:,} listed, "
          f"{total['gone']:,} already gone, {total['mixed']} subreddits filtered by language)")
    return 0


def _cmd_verify(args) -> int:
    from tecb_data.layout import verify

    manifest = verify(args.folder)
    print(f"{args.folder}: OK, {len(manifest['files'])} files match, fingerprint {manifest['fingerprint']}")
    return 0


def _cmd_stats(args) -> int:
    from tecb_data.layout import read_split_rows, verify
    from tecb_data.stats import TABLE1_COLUMNS, table1

    # Statistics of a folder that differs from its manifest would describe a dataset nobody published.
    manifest = verify(args.folder)
    if manifest.get("view") == "ids":
        raise UserError(f"{args.folder}: ids only, no texts to describe; rehydrate it first with "
                        f"`tecb-data build --source reddit --ids {args.folder} --out DIR`")
    stats = table1(read_split_rows(args.folder))
    print(f"{manifest.get('dataset', args.folder)}")
    width = max(len(title) for _, title in TABLE1_COLUMNS)
    for key, title in TABLE1_COLUMNS:
        value = stats[key]
        print(f"  {title:<{width}}  {value:,}" if isinstance(value, int) else f"  {title:<{width}}  {value}")
    # Which average is which is easy to mix up; named by what each matches, for any dataset (an example
    # naming one dataset read as a mistake under another's statistics).
    print("  (avg chars, all rows: MTEB's legacy average_text_length, the figure the paper prints; "
          "unique texts: MTEB's v2 figure)")
    return 0


def _cmd_push(args) -> int:
    from tecb_data.hub import push

    result = push(
        args.folder, args.repo_id, branch=args.revision, private=args.private, dry_run=args.dry_run, message=args.message,
        allow_synthetic=args.allow_synthetic,
    )
    where = f"{result.repo_id}@{result.branch}"
    if result.synthetic:
        # First: whoever reads the plan or the log learns before anything else that these are not real data.
        print("synthetic demo data (built from tecb's embedded demo sample): "
              + ("allowed by --allow-synthetic; the card says so in its first line"
                 if args.allow_synthetic else "a real push is refused unless --allow-synthetic is given"))
    if result.note:
        print(f"note: {result.note}", file=sys.stderr)
    if result.outcome == "unchanged":
        print(f"{where}: unchanged (the remote manifest has fingerprint {result.fingerprint[:16]}); no commit made")
        print(f"revision: {result.commit_oid}")
        return 0
    if result.outcome == "offline-plan":
        print(f"dry run without the Hub ({result.offline}): {args.folder} is verified, publishable and its card is "
              f"valid; a first commit to {where} would send (fingerprint {result.fingerprint[:16]}):")
        for change in result.changes:
            print(f"  {'send':<7} {change.path}  {change.size:,} bytes")
        print(f"token: {'found' if result.token else 'none (set HF_TOKEN or run `hf auth login` before pushing)'}")
        print("needs the Hub: whether the repository and branch exist, which of these files it already holds (kept, "
              "updated, deleted), whether anything changed at all, and whether the token may write there")
        print("dry run: nothing was sent")
        return 0
    if result.outcome == "dry-run":
        if result.create_repo:
            print(f"dry run: would create the dataset repository {result.repo_id} ({'private' if args.private else 'public'})")
        print(f"dry run: would commit to {where} in one commit (fingerprint {result.fingerprint[:16]}):")
    for change in result.changes:
        size = f"{change.size:,} bytes" if change.size is not None else ""
        print(f"  {change.action:<7} {change.path}  {size}".rstrip())
    if result.outcome == "dry-run":
        print("dry run: nothing was sent")
        return 0
    print(f"{where}: committed {len(result.sent)} file change(s), fingerprint {result.fingerprint[:16]}")
    print(f"commit: {result.commit_url}")
    print(f"revision: {result.commit_oid}")
    return 0


def parser() -> argparse.ArgumentParser:
    from tecb_data.build import READERS
    from tecb_data.seeding import DEFAULT_SEED

    root = root_parser("tecb-data", __doc__.splitlines()[0], epilog=_EXAMPLES["tecb-data"])
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND")

    build = commands.add_parser(
        "build", help="build the datasets of one source into OUT/<dataset>/",
        description="Build the datasets of one source (both views, S2S and P2P, where the source has both) "
                    "into OUT/<dataset>/, each with its card and manifest, published together or not at all.",
        epilog=_EXAMPLES["build"])
    build.add_argument("--source", required=True, choices=sorted(READERS),
                       help="blurbs: GermEval 2019 Task 1 files; tenkgnad: One Million Posts corpus.sqlite3 (S2S "
                            "and P2P) or a 10kGNAD articles.csv (P2P only); reddit: rehydrate an id list (--ids); "
                            "table: your own labelled CSV/TSV, JSON Lines, Parquet or datasets folder")
    build.add_argument("--input", type=Path, help="source files: a file, their folder, or the release zip")
    build.add_argument("--demo", action="store_true", help="build from the small embedded demo sample")
    build.add_argument("--out", type=Path, required=True, help="output folder (one sub-folder per dataset)")
    build.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"recipe seed (default {DEFAULT_SEED})")
    build.add_argument("--view", action="append", choices=["s2s", "p2p"], help="build only this view (repeatable)")
    build.add_argument(
        "--paired", action="store_true",
        help="one set of split members for S2S and P2P (default: each view draws its own, as published; "
             "reddit's views always share the members of its ids dataset)",
    )
    build.add_argument("--quiet", action="store_true", help="no progress bars")
    build.add_argument("--ids", help="reddit: id list file, its http(s) URL, or a reddit-clustering-ids folder")
    build.add_argument("--cache", type=Path, help="reddit: rehydration cache folder (default ~/.cache/tecb/reddit)")
    build.add_argument("--praw-site", help="reddit: praw.ini site with your API credentials (default $praw_site)")
    build.add_argument("--refresh", action="store_true", help="reddit: re-check every id with Reddit")
    tab = build.add_argument_group("--source table (a labelled CSV/TSV, JSON Lines, Parquet or datasets folder)")
    tab.add_argument("--name", help="datasets NAME-s2s / NAME-p2p (lower case, e.g. german-news-clustering)")
    tab.add_argument("--text", help="S2S view: text column(s), comma-separated, joined by a space")
    tab.add_argument("--text-p2p", help="P2P view: text column(s), comma-separated, joined by a space")
    tab.add_argument("--label", help="label column (the child label with --label-parent); without any label "
                     "option the table is a corpus without labels: one split, scored by label-free criteria")
    tab.add_argument("--sample", type=int, metavar="N",
                     help="without labels: a seeded random sample of N texts instead of every text")
    tab.add_argument("--label-parent", help="parent label column: Blurbs-style splits over parent and child")
    tab.add_argument("--label-path", help="one column 'parent > child' (or a list): Blurbs-style splits")
    tab.add_argument("--path-sep", help="separator of --label-path levels (default '>')")
    tab.add_argument("--id", dest="id_column", help="record id column (default: a digest of texts and labels)")
    tab.add_argument("--columns", help="CSV/TSV without a header row: its column names, comma-separated")
    tab.add_argument("--delimiter", help="CSV delimiter (default: sniffed among , ; tab |)")
    tab.add_argument("--quotechar", help="CSV quote character (default: sniffed among \" and ')")
    tab.add_argument("--format", dest="input_format", choices=["csv", "tsv", "jsonl", "parquet", "datasets"],
                     help="input format (default: from the extension; a folder is a datasets save_to_disk folder)")
    tab.add_argument("--input-split", help="the split of a datasets DatasetDict folder")
    tab.add_argument("--language", help="ISO 639-1 language of the texts (default de)")
    tab.add_argument("--language-filter", action="store_true", default=None,
                     help="drop rows langdetect does not find in --language (counted as other_language)")
    tab.add_argument("--similar-labels", choices=["keep", "merge"],
                     help="labels that read as one (case, ligatures, look-alike letters) stop the build; "
                          "keep: leave them separate labels, merge: make them their most frequent spelling")
    tab.add_argument("--licence", "--license", dest="licence", help="Hub licence id of the data, e.g. cc-by-4.0 "
                     "(needed to push)")
    tab.add_argument("--citation", type=Path, help="file with the source's BibTeX entry (needed to push)")
    tab.add_argument("--description", help="one sentence for the card (default: made from the columns)")
    tab.add_argument("--pretty-name", help="card title without the view (default: from --name)")
    tab.add_argument("--source-url", help="where the source table comes from, for the card")
    tab.add_argument("--splits", type=int, help="sampled splits (per level) (default 10, as in the paper)")
    tab.add_argument("--min-fraction", type=float, help="smallest sampled split, a fraction of the records (default 0.1)")
    tab.add_argument("--max-fraction", type=float, help="largest sampled split (default 1.0)")
    tab.add_argument("--min-chars", type=int, help="remove texts shorter than this (default 1: only empty ones)")
    tab.add_argument("--min-per-label", type=int, help="remove rows of labels with fewer texts (default 1: none)")
    tab.add_argument("--report", type=Path, help="write the removed rows' counts and examples as JSON here")
    build.set_defaults(func=_cmd_build)

    collect = commands.add_parser("collect", help="list subreddits' hot and top submissions into an id list",
                                  description="List the hot and top submissions of subreddits into an id list "
                                              "(id,subreddit) that `build --source reddit --ids` rehydrates.",
                                  epilog=_EXAMPLES["collect"])
    collect.add_argument("--source", required=True, choices=["reddit"], help="where to list from (reddit only)")
    collect.add_argument("--subreddits", type=Path, required=True, help="file with one subreddit name per line")
    collect.add_argument("--out", type=Path, required=True, help="id list to write (header id,subreddit)")
    collect.add_argument("--listings", default="hot,top", help="comma-separated listings (default hot,top)")
    collect.add_argument("--language", default="de",
                         help="keep this language where a subreddit mixes languages (default de)")
    collect.add_argument("--limit", type=int, help="submissions per listing (default: all Reddit lists, up to 1000)")
    collect.add_argument("--praw-site", help="praw.ini site with your API credentials (default $praw_site)")
    collect.add_argument("--quiet", action="store_true", help="no progress bars")
    collect.set_defaults(func=_cmd_collect)

    verify = commands.add_parser(
        "verify", help="recompute the hashes of a dataset folder",
        description="Recompute the SHA-256 of every file of a dataset folder and its fingerprint, against its "
                    "manifest.json; exit 1 naming the first file that differs.", epilog=_EXAMPLES["verify"])
    verify.add_argument("folder", type=Path, help="a dataset folder written by `tecb-data build` (holds manifest.json)")
    verify.set_defaults(func=_cmd_verify)

    stats = commands.add_parser(
        "stats", help="the paper's Table-1 statistics of a dataset folder",
        description="Print the paper's Table-1 statistics of a dataset folder (splits, samples, labels, both "
                    "average text lengths), after verifying it.", epilog=_EXAMPLES["stats"])
    stats.add_argument("folder", type=Path, help="a dataset folder written by `tecb-data build`")
    stats.set_defaults(func=_cmd_stats)

    push = commands.add_parser(
        "push", help="publish a dataset folder to the Hugging Face Hub in one commit (HF_TOKEN / HF_ENDPOINT)",
        description="Publish a dataset folder to a Hugging Face Hub dataset repository in one commit; unchanged "
                    "data makes no commit. --dry-run plans offline as far as it can.", epilog=_EXAMPLES["push"])
    push.add_argument("folder", type=Path, help="a dataset folder written by `tecb-data build`")
    push.add_argument("--repo-id", required=True, help="dataset repository, ORG/NAME")
    push.add_argument("--revision", help="branch to commit to (default main; created from main if missing)")
    push.add_argument("--private", action="store_true", help="create the repository as private (if it is new)")
    push.add_argument("--dry-run", action="store_true", help="list what would be sent; send nothing")
    push.add_argument("--message", help="commit message (default: dataset, fingerprint and package version)")
    push.add_argument("--allow-synthetic", action="store_true",
                      help="push a folder built from the demo sample (refused otherwise); its card says it is synthetic")
    push.set_defaults(func=_cmd_push)
    return root


def main(argv: list[str] | None = None) -> int:
    from tecb_data.publication import interrupted_state

    if argv is None:  # the installed command; in-process callers (tests) keep their own settings
        quiet_libraries(argv)
    return run_command("tecb-data", parser(), argv, interrupted=interrupted_state)


if __name__ == "__main__":
    sys.exit(main())
