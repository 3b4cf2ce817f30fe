"""What several `tecb-eval` commands share, said once: model and seed syntax, dataset folders, the
options that pick a version of the results, the grid's options, and printing the tables."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from tecb_data.errors import UserError
from tecb_data.repeats import refuse_repeat
from tecb_eval.reports.formats import DEFAULT_TABLE_FORMAT, TABLE_FORMATS

DEFAULT_CACHE = Path(".tecb-cache")
SCHEDULER_TIMEOUT = 30.0  # seconds; tecb_eval.grid.scheduling.DASK_CONNECT_TIMEOUT, without importing it here


def _option_names() -> tuple[str, ...]:
    """Every option some model kind named by text takes (the model registry's, read when a --model
    is parsed), and the table name; prompt comes last."""
    from tecb_eval.models import registry

    taken = {option for kind in registry.MODEL_KINDS if isinstance(kind.example, str) for option in kind.options}
    return ("name", *sorted(taken - {"prompt"}))


def model_help() -> str:
    """``--model``'s help: each kind of model a command line names, as the model registry has it,
    with the options it takes (name= and prompt= last: a prompt may hold commas)."""
    from tecb_eval.models import registry

    kinds = []
    for kind in registry.MODEL_KINDS:
        if not isinstance(kind.example, str):
            continue  # an encoder object: Python only
        named = kind.spec_name or (f"{kind.spec_prefix}NAME" if kind.spec_prefix else "FOLDER or HUB_ID[@REVISION]")
        options = ",".join(f"{key}=" for key in sorted(set(kind.options) - {"prompt"}))
        kinds.append(f"{named} ({kind.description}; options: {options or 'none'}"
                     f"{',prompt=TEXT' if 'prompt' in kind.options else ''})")
    return ("a model and its options, SPEC[,OPTION=VALUE...][,name=NAME]: " + "; ".join(kinds)
            + " (repeatable)")


def _option_pattern() -> re.Pattern:
    return re.compile(rf",({'|'.join(_option_names())})=([^,]*)")
_UNKNOWN_OPTION = re.compile(r",([A-Za-z_][\w-]*)=")
# A prompt is text that may hold commas: it takes the rest of the model argument, so it comes last.
_PROMPT = re.compile(r",prompt=(.*)\Z", re.S)



def parse_model(text: str, defaults: dict | None = None):
    """``SPEC[,layer=K][,max_length=N][,batch_size=B][,name=NAME][,device=D][,backend=B][,dtype=T]
    [,prompt_name=P][,prompt=TEXT]`` -> a run_grid model item (``mteb:NAME`` runs a model as MTEB
    does). ``defaults`` (``--prompt``, ``--device``, ``--dtype``) apply where the model takes them
    and names none of its own."""
    found = _PROMPT.search(text)
    options = {} if found is None else {"prompt": found.group(1)}
    rest = text if found is None else text[:found.start()]
    option = _option_pattern()
    pairs = option.findall(rest)
    repeated = sorted({key for key, _ in pairs if sum(1 for k, _ in pairs if k == key) > 1})
    if repeated:
        # The last value alone would run, the others dropped without a word.
        shown = ", ".join(f"{key}=" for key in repeated)
        raise UserError(f"--model {text!r}: {shown} given more than once; give each option once")
    options.update(dict(pairs))
    spec = option.sub("", rest)
    if spec and defaults:
        from tecb_eval.models.encoders import options_taken

        taken = options_taken(spec)
        chosen = "prompt" in options or "prompt_name" in options
        for key, value in defaults.items():
            if value is not None and key in taken and key not in options and not (key == "prompt" and chosen):
                options[key] = value
    if not spec:
        raise UserError(f"--model {text!r}: no model named before the options")
    unknown = _UNKNOWN_OPTION.search(spec)
    if unknown and not Path(spec).expanduser().exists():
        # Left in the spec it would be read as part of a folder or Hub id; name it instead.
        raise UserError(f"--model {text!r}: no option {unknown.group(1)!r}; the options are "
                        f"{', '.join(_option_names())}, prompt (last)")
    from tecb_eval.models.encoders import options_taken

    # Each option's text as the type its kind declares; one the kind does not take stays text, and
    # get_encoder's check names it.
    declared = options_taken(spec)
    for key in sorted(set(options) & set(declared)):
        try:
            options[key] = declared[key].read(options[key])
        except ValueError:
            wanted = "an integer" if declared[key].type is int else "a number"
            raise UserError(f"--model {text!r}: {key} must be {wanted}") from None
    return {"spec": spec, **options} if options else spec


def encoding_defaults(args) -> dict:
    """``--prompt``, ``--device`` and ``--dtype`` as model options; one no model takes is refused
    (it would be ignored), naming it."""
    from tecb_eval.models.encoders import options_taken

    given = {"prompt": getattr(args, "prompt", None), "device": getattr(args, "device", None),
             "dtype": getattr(args, "dtype", None)}
    option = _option_pattern()
    specs = [option.sub("", _PROMPT.sub("", m)) for m in getattr(args, "model", None) or ()]
    for key, value in given.items():
        if value is not None and not any(key in options_taken(spec) for spec in specs):
            flag = "--" + key.replace("_", "-")
            raise UserError(f"{flag} {value}: none of the models takes it ({', '.join(specs)}); leave it out")
    return given


def parse_seeds(text: str) -> tuple[int, ...]:
    """``--seeds 42,1,2`` -> (42, 1, 2); run_grid checks range and repeats."""
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or not all(items):
        raise argparse.ArgumentTypeError(f"{text!r}: give seeds separated by commas or spaces, e.g. 42,1,2 or 42 1 2")
    try:
        return tuple(int(item) for item in items)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: every seed must be an integer, e.g. 42,1,2") from None


class SeedsAction(argparse.Action):
    """``--seeds 42,1,2``, ``--seeds 42 1 2`` or both (every command takes both, as `pretrain` does);
    given again it adds to the seeds, as a repeated ``--data`` adds datasets: the last one alone
    winning would drop the others without a word."""

    accumulates = True  # tecb_data.repeats: a repeated option adds up or is refused

    def __call__(self, parser, namespace, values, option_string=None):
        before = getattr(namespace, self.dest, None) or ()
        setattr(namespace, self.dest, tuple(before) + tuple(seed for items in values for seed in items))
        _given(namespace, self.dest)


class _SeedSet(argparse.Action):
    """The tables' ``--seeds``: the same spellings, kept as the text ``42,1,2`` that names a seed set;
    given again it adds to the set, as the run's ``--seeds`` does."""

    accumulates = True

    def __call__(self, parser, namespace, values, option_string=None):
        before = getattr(namespace, self.dest, None)
        seeds = ",".join(str(seed) for items in values for seed in items)
        setattr(namespace, self.dest, f"{before},{seeds}" if before else seeds)


class _Given(argparse.Action):
    """Stores the value as argparse's "store" does (refused when given twice, tecb_data.repeats) and
    notes that the option was on the command line: a default is no choice of the user's, so only a
    given option can be refused as ignored."""

    def __call__(self, parser, namespace, values, option_string=None):
        refuse_repeat(self, namespace, values, option_string)
        setattr(namespace, self.dest, values)
        _given(namespace, self.dest)


def _given(namespace, dest: str) -> None:
    namespace.given = (*getattr(namespace, "given", ()), dest)


def check_grid_options(args) -> None:
    """Options of `run` and `demo` that would be ignored, or are no number the grid can use,
    refused in one line before anything runs."""
    from tecb_eval.grid.scheduling import check_timeout

    given = set(getattr(args, "given", ()))
    if {"seed", "seeds"} <= given:
        raise UserError(f"--seed {args.seed} and --seeds {','.join(map(str, args.seeds))} given together: --seeds "
                        "replaces --seed, so give one of them (--seeds with the seed set to run)")
    if getattr(args, "protocol", "legacy") == "fast" and getattr(args, "limit_splits", None):
        raise UserError(f"--limit-splits {args.limit_splits} with --protocol fast: the fast protocol samples from "
                        "every split at once (MTEB v2), so there is no split to leave out; drop --limit-splits, or "
                        "use --protocol legacy")
    check_timeout(args.scheduler_timeout)
    if args.scheduler is None:
        warn_beyond_machine(jobs=args.jobs, memory_limit=args.memory_limit)
    if "scheduler_timeout" in given and args.scheduler is None:
        raise UserError("--scheduler-timeout applies to a Dask cluster only: add --scheduler ADDRESS, or leave "
                        "--scheduler-timeout out (local workers need no timeout)")


def warn_beyond_machine(*, jobs: int | None, memory_limit: str | None) -> list[str]:
    """A ``warning:`` line for ``--jobs`` above this machine's cores and ``--memory-limit`` above its
    memory (returned as well as printed). Not an error: the run works, only no faster (workers
    share the cores) or at the risk of the system killing a worker; a number far off is a typo."""
    import os

    from tecb_eval.grid.scheduling import machine_memory, parse_memory

    lines = []
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if jobs is not None and jobs > cores:
        lines.append(f"warning: --jobs {jobs} is more than the {cores} cores this machine gives the process; the "
                     "workers will share them (no faster, and more memory)")
    memory, total = parse_memory(memory_limit), machine_memory()
    if memory is not None and memory > total:
        lines.append(f"warning: --memory-limit {memory_limit} ({memory / 2**30:.1f} GiB) is more than this machine's "
                     f"{total / 2**30:.1f} GiB; units sized by it may be killed by the system (out of memory)")
    for line in lines:
        print(line, file=sys.stderr)
    return lines


def dataset_folders(paths: list[str]) -> list[str]:
    """Dataset folders as given; a folder that holds dataset folders stands for all of them.

    A dataset named twice (the same folder twice, or also inside a folder of them) is kept once,
    with a note: evaluated twice, it would be two rows of the same cells. In a folder of them, the
    Reddit ids dataset is passed over, with a note, when the views rehydrated from it lie beside
    it (what `tecb-data build --source reddit` writes): it holds no texts to evaluate."""
    from tecb_data.load import REDDIT_IDS_DATASET

    out, seen = [], {}
    for item in paths:
        path = Path(item)
        if path.is_dir() and not (path / "manifest.json").is_file():
            found = sorted(p for p in path.iterdir() if (p / "manifest.json").is_file())
            if not found:
                raise UserError(f"{path}: neither a dataset folder (no manifest.json) nor a folder of them")
            names = {folder: _dataset_name(folder) for folder in found}
            views = [f.name for f, name in names.items()
                     if name and name.startswith("reddit-clustering-") and name != REDDIT_IDS_DATASET]
            for folder, name in names.items():
                if views and name == REDDIT_IDS_DATASET:
                    print(f"note: {folder}: Reddit ids only, passed over; its texts are in {', '.join(views)} "
                          "beside it", file=sys.stderr)
                    continue
                _add(out, seen, str(folder), item)
        else:
            _add(out, seen, item, item)
    return out


def _manifest(folder: Path) -> dict:
    from tecb_data import layout

    try:
        return layout.read_manifest(folder)
    except (UserError, OSError, ValueError):
        return {}  # load() says what is wrong with it


def _dataset_name(folder: Path) -> str | None:
    return _manifest(folder).get("dataset")


def _add(out: list[str], seen: dict, item: str, given: str) -> None:
    path = Path(item)
    # A copy of a dataset folder is the same dataset: its fingerprint says so. A Hub repo id is its text.
    key = (_manifest(path).get("fingerprint") or path.resolve()) if path.is_dir() else item
    if key in seen:
        print(f"note: {item}: the same dataset given twice (--data {seen[key]} and --data {given}); it is "
              "evaluated once", file=sys.stderr)
        return
    seen[key] = given
    out.append(item)


def print_tables(frame, fmt: str = DEFAULT_TABLE_FORMAT, selection: dict | None = None, said: set | None = None) -> None:
    """Print the tables as `table` and `export` write them. ``said``: note lines already printed; each
    table leaves them out and adds its own, so that a command printing several tables says each note
    once (the demo). None: every table carries its whole note, as the files keep it."""
    from tecb_eval.reports import tables as report
    from tecb_eval.reports.label_free import format_label_free, label_free_table, task_named
    from tecb_eval.reports.versions import label_table_rows, range_rows, unlabelled_rows

    if not frame.empty and (unlabelled_rows(frame).any() or range_rows(frame).any()):
        # Datasets without labels and k ranges: their label-free scores, the curve down the column.
        points = frame[unlabelled_rows(frame) | range_rows(frame)]
        heading = "Label-free scores (means over splits and seeds; '-': undefined):"
        from tecb_eval.clustering.criteria import needing

        if not any(c.name in points.columns for c in needing("vectors")):
            # Labelled k ranges run without --label-free: the points' clusters and noise, and why no score.
            heading = ("Label-free scores: none in these rows (a labelled run computes them with --label-free); "
                       "clusters and noise per point:")
        if fmt == "csv":  # a CSV stays data only: what it says goes to stderr
            print(heading, file=sys.stderr)
        print(format_label_free(label_free_table(task_named(points)), fmt, note=None if fmt == "csv" else heading))
        labelled, note = label_table_rows(frame)
        if labelled.empty:
            if fmt == "latex":  # a comment, as the tables' own notes are
                note = "\n".join(f"% {line}" for line in note.splitlines())
            print(note, file=sys.stderr if fmt == "csv" else sys.stdout)
            return
    # The same tables as `table` and `export` write: one version, its seeds' spread, the markers.
    for table, note in report.tables(frame, selection=selection).values():
        if said is not None:
            note = "\n".join(line for line in (note or "").splitlines() if line not in said) or None
            said.update(note.splitlines() if note else ())
        print(report.format_table(table, fmt, note=note))


def format_option(p: argparse.ArgumentParser, what: str) -> None:
    """``--format``: one of the table formats, ``what`` saying what it formats."""
    p.add_argument("--format", choices=list(TABLE_FORMATS), default=DEFAULT_TABLE_FORMAT,
                   help=f"{what} (default {DEFAULT_TABLE_FORMAT})")


def selection(args) -> dict:
    """Which version of each result a table shows (tecb_eval.reports.versions.select); default the newest."""
    return {"protocol": args.protocol, "profile": args.profile, "seeds": args.seeds,
            "fingerprints": args.fingerprint or (), "identities": args.model_identity or ()}


def selection_options(p: argparse.ArgumentParser) -> None:
    from tecb_eval.clustering.profiles import PROFILES
    from tecb_eval.grid.protocols import PROTOCOLS

    p.add_argument("--protocol", choices=PROTOCOLS, help="show this protocol's results (default: the newest's)")
    p.add_argument("--profile", choices=list(PROFILES), help="show this profile's results (default: the newest's)")
    p.add_argument("--seeds", type=parse_seeds, nargs="+", action=_SeedSet, metavar="SEED",
                   help="show the run with this seed set, e.g. 42,1,2 or 42 1 2 (default: the newest per dataset)")
    p.add_argument("--fingerprint", action="append",
                   help="show this dataset build (a fingerprint prefix; repeatable; default: the newest per dataset)")
    p.add_argument("--model-identity", action="append",
                   help="show this model identity (a prefix; repeatable; default: the newest per model and dataset)")


def grid_options(p: argparse.ArgumentParser) -> None:
    from tecb_data.seeding import DEFAULT_SEED
    from tecb_eval.clustering.profiles import DEFAULT_PROFILE, PROFILES
    from tecb_eval.grid.protocols import PROTOCOLS

    p.add_argument("--seed", type=int, default=DEFAULT_SEED, action=_Given,
                   help=f"k-means / UMAP seed (default {DEFAULT_SEED})")
    p.add_argument("--seeds", type=parse_seeds, nargs="+", metavar="SEED", action=SeedsAction,
                   help="run every reduction and clustering once per seed (encoding once), e.g. 42,1,2 or 42 1 2; "
                        "instead of --seed (repeatable: the seeds add up)")
    p.add_argument("--jobs", type=int, metavar="N",
                   help="local worker processes (default: every core, or $TECB_JOBS, and this process for a grid "
                        "too small to pay for workers; 1: in this process)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run on a Dask distributed cluster instead, e.g. tcp://host:8786 (see the manual's page "
                        "\"Scale and execution\")")
    p.add_argument("--scheduler-timeout", type=float, default=SCHEDULER_TIMEOUT, metavar="SECONDS", action=_Given,
                   help=f"with --scheduler: how long to wait for the Dask scheduler (default {SCHEDULER_TIMEOUT:g})")
    p.add_argument("--memory-limit", metavar="SIZE",
                   help="memory for units running side by side, e.g. 8GB, 512MiB or 0.5 (a share of RAM, at "
                        "most 1; a larger bare number needs a unit); per worker on a cluster (default: 70 %% of "
                        "RAM, of each worker's limit on a cluster)")
    p.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE,
                   help=f"embedding and reduction cache, shared by runs (default {DEFAULT_CACHE})")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--reference", type=Path, help="the authors' tecb-de-full-results.csv, to plot ours beside theirs")
    p.add_argument("--no-figure1", action="store_true", help="skip the UMAP scatter plots")
    p.add_argument("--profile", choices=list(PROFILES), default=DEFAULT_PROFILE,
                   help="current: today's libraries; paper: what the authors ran (river 0.14's DBSTREAM) "
                        f"(default {DEFAULT_PROFILE})")
    p.set_defaults(protocol=PROTOCOLS[0], given=())
