"""`tecb-data`: build, verify and describe the benchmark datasets.

Thin: each command parses its arguments, calls one library function and prints the outcome.
User errors end in one line on stderr and exit 2 (a failed verification exits 1); --debug shows
the traceback instead.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tecb_data.errors import UserError


def _cmd_build(args) -> int:
    from tecb_data.build import build
    from tecb_data.demo import demo_input

    if args.demo == (args.input is not None):
        raise UserError("pass exactly one of --input PATH or --demo")
    input_path = demo_input(args.source) if args.demo else args.input
    views = tuple(args.view) if args.view else None
    for folder, manifest in build(args.source, input_path, args.out, seed=args.seed, views=views, progress=not args.quiet):
        stats = manifest["statistics"]
        print(
            f"{folder}: {stats['splits']} splits, {stats['samples']:,} samples, "
            f"{stats['unique_texts']:,} unique texts, {stats['unique_labels']} labels; "
            f"fingerprint {manifest['fingerprint'][:16]}"
        )
    report = manifest["report"]
    print("report: " + ", ".join(f"{k} {v}" for k, v in report.items() if not isinstance(v, list)))
    for problem in report.get("malformed_records", []):
        print(f"warning: skipped malformed record {problem}", file=sys.stderr)
    return 0


def _cmd_verify(args) -> int:
    from tecb_data.layout import verify

    manifest = verify(args.folder)
    print(f"{args.folder}: OK, {len(manifest['files'])} files match, fingerprint {manifest['fingerprint']}")
    return 0


def _cmd_stats(args) -> int:
    from tecb_data.layout import read_manifest, read_split_rows
    from tecb_data.stats import TABLE1_COLUMNS, table1

    manifest = read_manifest(args.folder)
    stats = table1(read_split_rows(args.folder))
    print(f"{manifest.get('dataset', args.folder)}")
    width = max(len(title) for _, title in TABLE1_COLUMNS)
    for key, title in TABLE1_COLUMNS:
        value = stats[key]
        print(f"  {title:<{width}}  {value:,}" if isinstance(value, int) else f"  {title:<{width}}  {value}")
    return 0


def parser() -> argparse.ArgumentParser:
    from tecb_data.build import DEFAULT_SEED, READERS

    root = argparse.ArgumentParser(prog="tecb-data", description=__doc__.splitlines()[0])
    root.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    commands = root.add_subparsers(dest="command", required=True)

    build = commands.add_parser("build", help="build the datasets of one source into OUT/<dataset>/")
    build.add_argument("--source", required=True, choices=sorted(READERS))
    build.add_argument("--input", type=Path, help="source files: a file, their folder, or the release zip")
    build.add_argument("--demo", action="store_true", help="build from the small embedded demo sample")
    build.add_argument("--out", type=Path, required=True, help="output folder (one sub-folder per dataset)")
    build.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"recipe seed (default {DEFAULT_SEED})")
    build.add_argument("--view", action="append", choices=["s2s", "p2p"], help="build only this view (repeatable)")
    build.add_argument("--quiet", action="store_true", help="no progress bars")
    build.set_defaults(func=_cmd_build)

    verify = commands.add_parser("verify", help="recompute the hashes of a dataset folder")
    verify.add_argument("folder", type=Path)
    verify.set_defaults(func=_cmd_verify)

    stats = commands.add_parser("stats", help="the paper's Table-1 statistics of a dataset folder")
    stats.add_argument("folder", type=Path)
    stats.set_defaults(func=_cmd_stats)
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except UserError as exc:
        if args.debug:
            raise
        print(f"tecb-data: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tecb-data: interrupted; nothing was published", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
