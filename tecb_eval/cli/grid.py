"""`tecb-eval run` and `tecb-eval demo`: run or resume a grid, print Tables 2 and 3, export."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tecb_data.errors import UserError
from tecb_data.repeats import CommaList
from tecb_eval.cli.options import (check_grid_options, dataset_folders, encoding_defaults, format_option, grid_options,
                                   model_help, parse_model, print_tables)

DEMO_MODELS = ("tfidf-lsa", "minilm-l6")
DEMO_SPLITS = 4


def _output_rules(args, models, datasets) -> dict:
    """How `--out` is written (tecb_data.outputs.staged_output): the demo's folder keeps its own
    results store; `run --out` is an export folder, which may not hold anything the run reads or
    keeps (the store, the cache, datasets, model folders): replacing the folder would delete them."""
    from tecb_eval.reports.export import DEMO, EXPORT

    inputs = [*_local_inputs(models, datasets), args.cache_dir, args.reference]
    if getattr(args, "demo", False):
        return {"command": DEMO, "inputs": inputs, "keep": [args.results]}
    return {"command": EXPORT, "inputs": [*inputs, args.results], "keep": []}


def _local_inputs(models, datasets) -> list:
    """The dataset and model folders a grid reads."""
    local = [d for d in datasets if Path(d).exists()]
    return local + [spec for spec in (m["spec"] if isinstance(m, dict) else m for m in models) if Path(spec).is_dir()]


def _stability_pipelines(frame):
    # Imported only where a corpus without labels asks for it: recommend's modules cost a labelled
    # run half a second of imports.
    from tecb_eval.reports.unlabelled import stability_pipelines

    return stability_pipelines(frame)


def _run_grid(args, models, datasets, configurations=None):
    from tecb_data.outputs import check_output, refuse_nested
    from tecb_eval.grid.run import run_config

    if args.cache_dir is not None:
        # The cache is written into, never replaced: not a dataset's folder, another output's, or an input.
        refuse_nested(args.cache_dir, option="--cache-dir", itself=True, inputs=_local_inputs(models, datasets))
    if getattr(args, "out", None) is not None:
        # A read-only, foreign or file-typed --out fails now, not after the grid; nothing is created yet.
        check_output(args.out, **_output_rules(args, models, datasets))
    return run_config(datasets, grid_config(args, models, configurations), results=args.results,
                      stability_ranking=_stability_pipelines)


def grid_config(args, models, configurations=None):
    """The grid's options of `run` or `demo`, checked once (:class:`~tecb_eval.grid.plan.GridConfig`)."""
    from tecb_eval.grid.plan import GridConfig

    fraction = getattr(args, "stability_fraction", None)
    return GridConfig(
        models=models, algorithms=args.algorithm, reductions=args.reduction or None, configurations=configurations,
        protocol=args.protocol, profile=args.profile, seed=None if args.seeds else args.seed, seeds=args.seeds,
        cache_dir=args.cache_dir, limit_splits=args.limit_splits or None, progress=not args.quiet,  # 0: all
        jobs=args.jobs, scheduler=args.scheduler, scheduler_timeout=args.scheduler_timeout,
        memory_limit=args.memory_limit, metrics=(getattr(args, "metrics", None) or "").split(","),
        encode_on=getattr(args, "encode_on", None), k=getattr(args, "k", None),
        min_cluster_size=getattr(args, "min_cluster_size", None), stability=getattr(args, "stability", None),
        topics=getattr(args, "topics", None), label_free=getattr(args, "label_free", None),
        time_limit=_time_limit(args), **({"stability_fraction": fraction} if fraction is not None else {}))


def _time_limit(args) -> float | None:
    """``--time-limit`` where the command has it (0: none); the grid's default where it has not (``demo``)."""
    from tecb_eval.clustering.settings import DEFAULT_TIME_LIMIT

    given = getattr(args, "time_limit", DEFAULT_TIME_LIMIT)
    return None if given == 0 else given


def _export(args, frame, datasets, models, said: frozenset = frozenset()) -> int:
    from tecb_data.outputs import published
    from tecb_eval.reports.export import export_all, figure1, interrupted_state

    since = len(published())
    # ``said``: notes the tables printed above already (the demo's); the export does not repeat them.
    log = lambda message: None if message in said else print(message, file=sys.stderr)  # noqa: E731

    def figures1(folder: Path) -> list[Path]:
        if args.no_figure1:
            return []
        from tecb_eval.reports.tables import DEMO_TITLE, synthetic_datasets

        # The grid's rows: the splits it ran (--limit-splits), its seed, and the cached vectors' identity.
        demo_note = DEMO_TITLE if getattr(args, "demo", False) or synthetic_datasets(frame) else None
        said_once = set()

        def once(message: str) -> None:
            if message not in said_once:
                said_once.add(message)
                log(message)

        drawn = [figure1(datasets, model, folder, seed=args.seed, cache_dir=args.cache_dir, frame=frame,
                         demo_note=demo_note, log=once) for model in models]
        return [path for path in drawn if path is not None]

    args.interrupted = lambda: f"every cell is in the results store; {interrupted_state(args.out, since)}"
    # Only `demo` sets args.demo: its synthetic data must not pass for the paper's.
    written = export_all(frame, args.out, reference=args.reference, log=log, demo=getattr(args, "demo", False),
                         extra=figures1, **_output_rules(args, models, datasets))
    print(f"wrote {len(written)} files to {args.out}/ ({_what(written, args.out)})", file=sys.stderr)
    return 0


def _what(written: list[Path], out: Path) -> str:
    """The files and folders an export wrote, by name: only what is there (no mteb/ when every
    dataset ran part of its splits, no Figure 1 with --no-figure1)."""
    names = set()
    for path in written:
        try:
            parts = Path(path).relative_to(out).parts
        except ValueError:
            parts = (Path(path).name,)
        names.add(parts[0] + "/" if len(parts) > 1 else parts[0])
    return ", ".join(sorted(names, key=lambda name: (name.endswith("/"), name)))


def _cmd_run(args) -> int:
    check_grid_options(args)
    from tecb_eval.clustering.names import REDUCTIONS

    if args.config and (args.algorithm or args.reduction):
        beside = " and ".join(flag for flag, given in (("--algorithm", args.algorithm), ("--reduction", args.reduction))
                              if given)
        raise UserError(f"--config names the exact configurations to run, so {beside} beside it would be ignored; "
                        f"give --config alone, or {beside} alone")
    if args.reduction is None:
        args.reduction = list(REDUCTIONS)
    models = [parse_model(m, encoding_defaults(args)) for m in args.model]
    datasets = dataset_folders(args.data)
    if args.reference is not None:
        from tecb_eval.reports.tables import read_reference

        read_reference(args.reference)  # a wrong file fails now, not after the grid
    frame = _run_grid(args, models, datasets, args.config)
    print_tables(frame, args.format)
    if args.out:
        return _export(args, frame, datasets, models)
    return 0


def _cmd_demo(args) -> int:
    """A small grid with the offline encoders on the demo datasets, Tables 2 and 3, and the plots."""
    check_grid_options(args)
    from tecb_eval.clustering.names import REDUCTIONS
    from tecb_eval.reports.tables import DEMO_NOTE, read_reference

    if args.reference is not None:
        read_reference(args.reference)  # a wrong file fails now, not after the grid
    args.reduction = list(REDUCTIONS)
    args.algorithm, args.protocol = None, "legacy"
    args.results = args.results or args.out / "results.jsonl"
    args.limit_splits = args.limit_splits or None
    models = list(args.model or DEMO_MODELS)
    datasets = dataset_folders(args.data)
    frame = _run_grid(args, [parse_model(m) for m in models], datasets)
    print(f"Note: {DEMO_NOTE}\n")
    said = {DEMO_NOTE}  # each note once: not again above each table, nor in the export's log
    print_tables(frame, said=said)
    code = _export(args, frame, datasets, [parse_model(m) for m in models], said=frozenset(said))
    print(f"Note: {DEMO_NOTE}", file=sys.stderr)
    return code


def register(commands) -> None:
    from tecb_eval.clustering.names import ALGORITHMS, REDUCTIONS
    from tecb_eval.clustering.settings import DEFAULT_TIME_LIMIT
    from tecb_eval.grid.protocols import PROTOCOLS

    run = commands.add_parser(
        "run", help="run or resume a grid; prints Tables 2 and 3",
        description="Run models x datasets x clustering algorithms x reductions (the paper's 14 configurations by "
                    "default), one stored line per finished cell: the same command again resumes.",
        epilog="examples:\n  tecb-eval run --data out/blurbs-clustering-s2s --model minilm-l6 --limit-splits 2 "
               "--results results.jsonl\n"
               "  tecb-eval run --data out/ --model minilm-l6 --model deepset/gbert-base,layer=6 --results r.jsonl "
               "--out report/")
    run.add_argument("--data", action="append", required=True,
                     help="dataset folder, folder of dataset folders, or Hub repo_id@revision (repeatable)")
    run.add_argument("--model", action="append", required=True,
                     help=model_help())
    run.add_argument("--algorithm", action="append", choices=ALGORITHMS,
                     help="repeatable; default: all (legacy) or minibatch_kmeans (fast)")
    run.add_argument("--reduction", action="append", choices=REDUCTIONS, help="repeatable; default: all")
    run.add_argument("--config", action="append", metavar="ALGORITHM:REDUCTION",
                     help="run exactly these configurations (repeatable), e.g. hdbscan:none")
    run.add_argument("--protocol", choices=PROTOCOLS, default="legacy",
                     help="legacy: per split (the paper, MTEB v1); fast: MTEB v2 bootstrapped k-means "
                          "(default legacy)")
    run.add_argument("--results", type=Path, required=True, help="results store (JSONL); a rerun resumes it")
    run.add_argument("--limit-splits", type=int, help="only the first N splits of each dataset (legacy; 0 = all)")
    run.add_argument("--metrics", metavar="level,dbcv", action=CommaList,
                     help="also fill in these scores (repeatable: they add up) on rows the results store already holds without them (rows "
                          "written before them): per-level scores (level) and DBCV (dbcv); those cells are run "
                          "again from the caches, the rest are kept")
    run.add_argument("--encode-on", choices=["any", "gpu"],
                     help="with --scheduler: encode on any Dask worker (default), or only on workers started with "
                          "--resources GPU=1")
    run.add_argument("--k", metavar="RANGE",
                     help="numbers of clusters for k-means and agglomerative: A:B (every 5th from A to B, e.g. 5:60), "
                          "A:B:STEP, a list 5,10,20 or one number; each is a row (default: the number of labels; a "
                          "corpus without labels needs it)")
    run.add_argument("--min-cluster-size", metavar="RANGE",
                     help="HDBSCAN's min_cluster_size, as --k takes its range (default: HDBSCAN's 5)")
    run.add_argument("--stability", type=int, metavar="N",
                     help="rerun every cell's clustering N times, each with its own seed on a subsample of the "
                          "texts, and store its agreement with the cell (ARI and AMI, mean and 5th-95th percentile); "
                          "0: none (default: on a corpus without labels 5 reruns of the pipelines `recommend` lists "
                          "first, once the grid has run; none on labelled data); stored rows without it are run "
                          "again from the caches")
    run.add_argument("--time-limit", type=float, metavar="SECONDS", default=DEFAULT_TIME_LIMIT,
                     help="refuse, before any work, a configuration whose cells on one split (every point of its "
                          "range) are estimated to take longer than this on one core, in one line with the estimate "
                          f"(default {DEFAULT_TIME_LIMIT:g}; 0: no limit)")
    run.add_argument("--stability-fraction", type=float, metavar="F",
                     help="the share of the texts each --stability rerun clusters, above 0 and at most 1 (default 0.8)")
    run.add_argument("--label-free", action=argparse.BooleanOptionalAction, default=None,
                     help="store each cell's label-free criteria: silhouette, Calinski-Harabasz, Davies-Bouldin, "
                          "DBCV, size balance, the spectrum's k, the cluster assignment (for consensus) and the "
                          "topic words (default: on for a corpus without labels, off on labelled data, where they "
                          "cost more than the clustering; `tecb-eval calibrate` needs them on labelled data); "
                          "stored rows without them are run again from the caches")
    run.add_argument("--topics", action=argparse.BooleanOptionalAction, default=None,
                     help="store each cell's topic words (c-TF-IDF), their NPMI coherence and topic diversity "
                          "(default: as --label-free; --no-topics leaves them out of a --label-free run)")
    format_option(run, "format of the tables printed")
    run.add_argument("--out", type=Path, help="also write CSV, tables, MTEB JSON and plots here: a new or empty "
                                              "folder or an earlier export's, replaced whole")
    run.add_argument("--prompt", metavar="TEXT",
                     help="encode with this prompt every model that takes one and names none of its own (default: "
                          "the prompt MTEB would choose for each dataset from the model's configured prompts; "
                          "--prompt '' for none)")
    run.add_argument("--device", help="cpu, cuda, cuda:1, ... for every model that takes it (default: CUDA when present)")
    run.add_argument("--dtype", choices=["float32", "float16", "bfloat16", "int8"],
                     help="precision of the torch weights (float16 needs --device cuda; default float32); int8: "
                          "the ONNX export quantized (with backend=onnx)")
    grid_options(run)
    run.set_defaults(func=_cmd_run, protocol="legacy")

    demo = commands.add_parser(
        "demo", help="small grid with the offline encoders; tables and plots",
        description=f"A small grid on the demo datasets with the offline encoders ({', '.join(DEMO_MODELS)}), "
                    f"the first {DEMO_SPLITS} splits of each dataset by default; synthetic data, not comparable "
                    "with the paper.",
        epilog="example:\n  tecb-eval demo --data demo-out --out demo-out/eval --limit-splits 0   # every split")
    demo.add_argument("--data", action="append", required=True, help="dataset folder or folder of them (repeatable)")
    demo.add_argument("--out", type=Path, required=True, help="where results.jsonl, tables and plots go")
    demo.add_argument("--model", action="append", help=f"default: {', '.join(DEMO_MODELS)}")
    demo.add_argument("--results", type=Path, help="results store (default OUT/results.jsonl)")
    demo.add_argument("--limit-splits", type=int, default=DEMO_SPLITS,
                      help=f"first N splits of each dataset (default {DEMO_SPLITS}: a quick look; 0 = all)")
    grid_options(demo)
    demo.set_defaults(func=_cmd_demo, demo=True)
