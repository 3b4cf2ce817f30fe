"""Source -> selection -> seeded splits -> one published folder per text view."""

from __future__ import annotations

import dataclasses
from contextlib import closing
import json
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tecb_data.heartbeat import Heartbeat
from tecb_data.progress import LINE_INTERVAL, Progress

from tecb_data import layout
from tecb_data.contents import prepare, publish_all
from tecb_data.demo import is_demo_records
from tecb_data import inputs
from tecb_data.errors import UserError
from tecb_data.outputs import check_output_file
from tecb_data.seeding import DEFAULT_SEED
from tecb_data.recipes import DATASETS, MEMBERS_PAIRED, RECIPES, DatasetSpec, datasets_of, table_recipe, unlabelled_recipe
from tecb_data.sources import SourceResult, blurbs, table, tenkgnad


def build(
    source: str,
    input_path: Path | str,
    out: Path,
    *,
    seed: int = DEFAULT_SEED,
    views: tuple[str, ...] | None = None,
    paired: bool = False,
    progress: bool = False,
    run_info: dict | None = None,
    **options,
) -> list[tuple[Path, dict]]:
    """Build every dataset of ``source`` (one of :data:`READERS`; or only ``views``) from
    ``input_path`` into ``out``.

    Each text view draws its own split members (same split sizes), as the published datasets did;
    ``paired`` draws one set of members for all views instead (the data of recipe version 1).
    ``input_path`` is the source's files (blurbs, tenkgnad), the table (``table``: ``options`` are
    the fields of :class:`~tecb_data.sources.table.TableSettings` and ``report``, see
    :func:`build_table`) or the id list, its URL or an ids folder (``reddit``: ``options`` are
    ``cache``, ``praw_site``, ``refresh`` and ``retry``, see
    :func:`tecb_data.sources.reddit.build_from_ids`; its views always share their members).
    ``run_info``, when given, receives what this run did beside its deterministic manifests
    (Reddit's requests, retries and cache use).

    Args:
        source (str): Which reader builds it: ``"blurbs"``, ``"tenkgnad"``, ``"reddit"`` or ``"table"``.
        input_path (Path | str): The source's input: its files (blurbs, tenkgnad), the table
            (``table``), or the id list, its http(s) URL or an ids folder (``reddit``).
        out (Path): Folder that receives one dataset folder per view.
        seed (int): Seed of the split recipe; the same seed and inputs give byte-identical folders.
        views (tuple[str, ...] | None): Only these views (``"s2s"``, ``"p2p"``); None builds every
            view the source has.
        paired (bool): Draw one set of split members for all views (recipe version 1) instead of one
            per view.
        progress (bool): Show a progress bar on a terminal (plain lines in a log).
        run_info (dict | None): Filled, when given, with what this run did beside its deterministic
            manifests (Reddit's requests, retries and cache use).
        **options (Any): The source's own options: for ``table`` the fields of ``TableSettings`` and
            ``report``; for ``reddit`` ``cache``, ``praw_site``, ``refresh`` and ``retry``.

    Returns:
        list[tuple[Path, dict]]: One ``(folder, manifest)`` per dataset written.

    Raises:
        UserError: An unknown source or view, an input that is missing or unreadable (named with its
            line or record), or an output folder that is not ours to write; nothing is left half-written.
    """
    if source not in READERS:
        raise UserError(f"unknown source {source!r}; choose one of {', '.join(sorted(READERS))}")
    return READERS[source].build(source, input_path, out, seed=seed, views=views, paired=paired, progress=progress,
                                 run_info=run_info, **options)


def _build_files(source: str, input_path: Path, out: Path, *, seed: int, views, paired: bool, progress: bool,
                 run_info: dict | None) -> list[tuple[Path, dict]]:
    """A source read from its files (:attr:`Reader.read`), one dataset per text view."""
    if seed < 0:
        raise UserError(f"--seed must be a non-negative integer, got {seed}")
    layout.check_out(Path(out))
    check_out_beside_inputs(out, [spec.name for spec in datasets_of(source) if not views or spec.view in views],
                            [input_path])
    # Plain lines off a terminal (tqdm's frames would be one endless line in a log), one at least every 30 s;
    # not entered as a context (its first line at once): a wrong input stays one line of error.
    with closing(Progress(desc=f"reading {source} records", unit="records", enabled=progress, delay=LINE_INTERVAL)) as bar, \
            Heartbeat(bar):
        result = READERS[source].read(Path(input_path), progress=bar)
    wanted = views or result.views
    missing = [v for v in wanted if v not in result.views]
    if missing:
        raise UserError(
            f"{input_path}: this input cannot build the {'/'.join(missing).upper()} view "
            f"(it has no titles: a 10kGNAD csv holds only subheadline and body); "
            f"it can build: {', '.join(result.views)}; pass corpus.sqlite3 for both"
        )
    recipe = RECIPES[source]
    specs = [spec for spec in datasets_of(source) if spec.view in wanted]
    shared = recipe.make_splits(result.items, seed) if paired else None
    # Every view's splits before any folder is written: a view without splits fails the whole build.
    splits = {spec.view: shared if paired else recipe.make_splits(result.items, seed, view=spec.view) for spec in specs}
    if not all(splits.values()):
        raise UserError(f"{input_path}: too few labelled records to make any split with two or more labels")
    items = {item.id: item for item in result.items}
    # Built from the embedded demo sample (its files, or its records copied or reordered): every
    # folder's card and manifest say so.
    synthetic = is_demo_records(source, items.values(), result.inputs)
    prepared = [
        prepare(spec, splits[spec.view], items, seed=seed, inputs=result.inputs,
                report=result.report, synthetic=synthetic, paired=paired)
        for spec in specs
    ]
    if progress:
        print(f"writing {', '.join(spec.name for spec in specs)} into {out}", file=sys.stderr)
    return publish_all(Path(out), prepared)


def build_table(
    input_path: Path,
    out: Path,
    settings: table.TableSettings,
    *,
    seed: int = DEFAULT_SEED,
    views: tuple[str, ...] | None = None,
    paired: bool = False,
    report: Path | None = None,
    progress: bool = False,
) -> list[tuple[Path, dict]]:
    """Build ``NAME``-s2s and/or ``NAME``-p2p from a labelled table (see :mod:`tecb_data.sources.table`),
    as ``settings`` (a :class:`~tecb_data.sources.table.TableSettings`, the command's options) says::

        from tecb_data.build import build_table
        from tecb_data.sources.table import TableSettings

        build_table("corpus.parquet", "out", TableSettings(name="german-news", text="title", label="label"))

    ``label`` alone gives flat labels and the TenKGnad-style recipe, ``label_parent`` (with ``label``
    as the child) or ``label_path`` (``"parent > child"``) the Blurbs-style one. ``splits`` and the
    fraction range default to the paper's. ``licence`` (a Hub licence id) and ``citation`` (a BibTeX
    file) are needed to push, not to build. ``seed``, ``views``, ``paired`` and ``progress`` are
    :func:`build`'s; ``report`` writes the removed records' examples as JSON.

    Args:
        input_path (Path): The labelled table: CSV, TSV, JSON Lines or Parquet.
        out (Path): Folder that receives ``NAME-s2s`` and/or ``NAME-p2p``.
        settings (TableSettings): Name, columns, recipe, licence and citation (the fields below).
        seed (int): Seed of the split recipe.
        views (tuple[str, ...] | None): Only these views (``"s2s"``, ``"p2p"``); None: every view
            whose text column is given.
        paired (bool): One set of split members for both views instead of one per view.
        report (Path | None): A JSON file that receives examples of the records the cleaning removed.
        progress (bool): Show a progress bar on a terminal.

    Returns:
        list[tuple[Path, dict]]: One ``(folder, manifest)`` per dataset written.

    Raises:
        UserError: A missing column, an unreadable row (named by its line), too few texts or labels
            for the recipe, an unknown licence or language, or an output that is not ours to write.
    """
    if settings.name is None:
        raise UserError("--source table needs --name NAME: the datasets are NAME-s2s and/or NAME-p2p")
    name, language, citation = settings.name, settings.language, settings.citation
    source = settings.table_source()
    source.check()
    table.check_no_control("--name", name, "a dataset name")
    if seed < 0:
        raise UserError(f"--seed must be a non-negative integer, got {seed}")
    wanted = tuple(views) if views else source.views
    missing = [v for v in wanted if v not in source.views]
    if missing:
        raise UserError(f"--view {'/'.join(missing)}: no text columns for it; "
                        f"give --text COL for S2S and --text-p2p COL for P2P")
    table.check_name(name, wanted)
    licence = table.check_licence(settings.licence)
    table.check_language(language)
    for option, value in (("--pretty-name", settings.pretty_name), ("--description", settings.description),
                          ("--source-url", settings.source_url)):
        table.check_one_line(option, value)
    citation_text = table.read_citation(citation)
    if source.labelled:
        if settings.sample is not None:
            raise UserError("--sample draws from a corpus without labels; with --label the recipe's splits are "
                            "drawn (--splits, --min-fraction, --max-fraction)")
        try:
            recipe = table_recipe(source.hierarchical, splits=settings.splits, min_fraction=settings.min_fraction,
                                  max_fraction=settings.max_fraction)
        except ValueError as exc:
            raise UserError(f"--splits / --min-fraction / --max-fraction: {exc}") from None
    else:
        drawn = [option for option, value in (("--splits", settings.splits), ("--min-fraction", settings.min_fraction),
                                              ("--max-fraction", None if settings.max_fraction == 1.0 else 1))
                 if value is not None]
        if drawn or paired:
            raise UserError(f"{(drawn or ['--paired'])[0]}: a corpus without labels (no --label) is one split of every "
                            "text; give --sample N for a seeded sample instead")
        try:
            recipe = unlabelled_recipe(sample=settings.sample)
        except ValueError as exc:
            raise UserError(f"--sample {settings.sample}: {exc}") from None
    layout.check_out(Path(out))
    check_out_beside_inputs(out, [f"{name}-{view}" for view in wanted], [input_path, citation])
    if report is not None:
        check_output_file(report, option="--report", inputs=[input_path, citation],
                          outputs=[Path(out) / f"{name}-{view}" for view in wanted], ours=_is_report)
    with closing(Progress(desc="reading table rows", unit="rows", enabled=progress)) as bar, Heartbeat(bar):
        result, examples = table.read_table(Path(input_path), source, progress=bar)
    if not source.labelled:
        kept = result.report["kept"]
        if kept < 2:
            raise UserError(f"{input_path}: {kept} text{'s' if kept != 1 else ''} left after cleaning "
                            f"({result.report['rows_read']:,} rows read); clustering needs two or more")
        if settings.sample is not None and settings.sample > kept:
            raise UserError(f"--sample {settings.sample:,}: larger than the {kept:,} texts kept after cleaning; "
                            f"give at most {kept:,}, or leave --sample out for every text")
    _say_few_texts(result.items, source.min_per_label)
    shared = recipe.make_splits(result.items, seed) if paired else None
    made = {view: shared if paired else recipe.make_splits(result.items, seed, view=view) for view in wanted}
    if not all(made.values()):
        raise UserError(f"{input_path}: after cleaning ({result.report['kept']:,} of {result.report['rows_read']:,} "
                        "rows kept) too few labelled records to make any split with two or more labels")
    specs = table.dataset_specs(name, wanted, source, input_name=Path(input_path).name, recipe_name=recipe.name,
                                licence=licence, citation=citation_text, description=settings.description,
                                pretty_name=settings.pretty_name, source_url=settings.source_url)
    definition = {
        "format": table.input_format(Path(input_path), source.format),
        "text": list(source.text), "text_p2p": list(source.text_p2p),
        **({} if source.labelled else {"labelled": False, "sample": settings.sample}),
        "label": None if source.label_path else (source.label or None),
        "label_parent": source.label_parent, "label_path": source.label_path,
        "path_sep": source.path_sep if source.label_path else None, "id": source.id,
        "min_chars": source.min_chars, "min_per_label": source.min_per_label,
        "language_filter": source.language_filter, "similar_labels": source.similar_labels,
    }
    command = table_command(Path(input_path).name, settings, source, licence=licence, seed=seed, views=views,
                            paired=paired)
    extra = {"language": language, "license": licence, "citation": citation_text, "table": definition,
             **({} if source.labelled else {"labelled": False})}
    items = {item.id: item for item in result.items}
    if paired:
        recipe = dataclasses.replace(recipe, params={**recipe.params, "members": MEMBERS_PAIRED})
    synthetic = is_demo_records("table", items.values(), result.inputs)
    prepared = [
        prepare(spec, made[spec.view], items, seed=seed, inputs=result.inputs, report=result.report,
                synthetic=synthetic, manifest_extra=extra, recipe=recipe,
                card_context={"table": definition, "report": result.report, "language": language,
                              "command": shlex.join(command)})
        for spec in specs
    ]
    if progress:
        print(f"writing {', '.join(spec.name for spec in specs)} into {out}", file=sys.stderr)
    built = publish_all(Path(out), prepared)
    if report is not None:
        document = {"report": result.report, "examples": examples,
                    "datasets": [manifest["dataset"] for _, manifest in built]}
        _write_report(Path(report), layout.json_document(document))
    return built


def _build_table(source: str, input_path: Path, out: Path, *, seed: int, views, paired: bool, progress: bool,
                 run_info: dict | None, report: Path | None = None, **settings) -> list[tuple[Path, dict]]:
    return build_table(input_path, out, table.TableSettings(**settings), seed=seed, views=views, paired=paired,
                       report=report, progress=progress)


def _build_reddit(source: str, ids, out: Path, *, seed: int, views, paired: bool, progress: bool,
                  run_info: dict | None, **options) -> list[tuple[Path, dict]]:
    # Imported here: requests and praw are needed only by those who rehydrate.
    from tecb_data.sources import reddit

    if views:  # the three datasets come from one rehydration, always together
        raise UserError(READERS[source].usage)
    return reddit.build_from_ids(ids, out, seed=seed, progress=progress, run_info=run_info, **options)


@dataclass(frozen=True)
class Reader:
    """One source as :func:`build` builds it and `tecb-data build --source NAME` offers it."""

    # (source, input, out, *, seed, views, paired, progress, run_info, **options) -> (folder, manifest) per dataset
    build: Callable[..., list[tuple[Path, dict]]]
    read: Callable[..., SourceResult] | None = None  # a source read from files: its input -> its records
    # Its own command-line options (argparse dest -> keyword of build): another source refuses them.
    options: dict[str, str] = field(default_factory=dict)
    input: str = "input"  # the command-line option (argparse dest) that names its input
    demo: bool = False  # the embedded demo sample can stand in for the input (--demo)
    views: bool = True  # --view picks among its views
    usage: str = "pass exactly one of --input PATH or --demo"  # the line a wrong choice of input gets

    @property
    def own_options(self) -> tuple[str, ...]:
        """The command-line options (argparse dests) only this source takes: its input's, if that is
        not --input, and its options."""
        return ((self.input,) if self.input != "input" else ()) + tuple(self.options)


READERS: dict[str, Reader] = {
    "blurbs": Reader(_build_files, read=blurbs.read, demo=True),
    "tenkgnad": Reader(_build_files, read=tenkgnad.read, demo=True),
    # No source files: the ids are rehydrated through Reddit's API.
    "reddit": Reader(_build_reddit, options={"cache": "cache", "praw_site": "praw_site", "refresh": "refresh"},
                     input="ids", views=False,
                     usage="--source reddit takes --ids PATH_OR_URL (an id list or a reddit-clustering-ids folder), "
                           "not --input, --demo or --view"),
    # A table needs its columns named: text, label, id. Each option is a TableSettings field, but --report.
    "table": Reader(_build_table, options={
        "name": "name", "text": "text", "text_p2p": "text_p2p", "label": "label", "label_parent": "label_parent",
        "label_path": "label_path", "path_sep": "path_sep", "id_column": "id", "columns": "columns",
        "delimiter": "delimiter", "quotechar": "quotechar", "input_format": "input_format", "input_split": "split",
        "language": "language", "licence": "licence", "citation": "citation", "description": "description",
        "pretty_name": "pretty_name", "source_url": "source_url", "splits": "splits", "min_fraction": "min_fraction",
        "max_fraction": "max_fraction", "min_chars": "min_chars", "min_per_label": "min_per_label",
        "language_filter": "language_filter", "similar_labels": "similar_labels", "report": "report",
        "sample": "sample",
    }, usage="--source table takes --input FILE (CSV/TSV, JSON Lines, Parquet or a datasets folder), not --demo"),
}


def table_command(input_name: str, settings: table.TableSettings, source: table.TableSource, *, licence: str,
                  seed: int, views, paired: bool) -> list[str]:
    """The `tecb-data build` command (as argv) that builds this table again from a copy of the input
    and the citation file in the current folder, for the card: every option that shapes the data or
    the card, never a machine's path (the card of the same table and seed is the same file anywhere).
    ``source`` is ``settings``' reading part, ``licence`` its checked licence."""
    language, citation, max_fraction = settings.language, settings.citation, settings.max_fraction
    argv = ["tecb-data", "build", "--source", "table", "--input", _as_argument(input_name), "--name", settings.name]
    if source.text:
        argv += ["--text", ",".join(source.text)]
    if source.text_p2p:
        argv += ["--text-p2p", ",".join(source.text_p2p)]
    if not source.labelled:
        argv += ["--sample", str(settings.sample)] if settings.sample is not None else []
    elif source.label_path:
        argv += ["--label-path", source.label_path] + (["--path-sep", source.path_sep] if source.path_sep != ">" else [])
    else:
        argv += ["--label", source.label] + (["--label-parent", source.label_parent] if source.label_parent else [])
    given = [("--id", source.id), ("--columns", ",".join(source.columns) if source.columns is not None else None),
             ("--delimiter", source.delimiter), ("--quotechar", source.quotechar), ("--format", source.format),
             ("--input-split", source.split), ("--language", language if language != "de" else None),
             ("--similar-labels", source.similar_labels if source.similar_labels != "stop" else None),
             ("--min-chars", source.min_chars if source.min_chars != 1 else None),
             ("--min-per-label", source.min_per_label if source.min_per_label != 1 else None),
             ("--splits", settings.splits), ("--min-fraction", settings.min_fraction),
             ("--max-fraction", max_fraction if max_fraction != 1.0 else None),
             ("--licence", licence if licence != "unknown" else None),
             ("--citation", _as_argument(Path(citation).name) if citation is not None else None),
             ("--description", settings.description), ("--pretty-name", settings.pretty_name),
             ("--source-url", settings.source_url)]
    for option, value in given:
        if value is not None:
            argv += [option, str(value)]
    if source.language_filter:
        argv.append("--language-filter")
    argv += ["--seed", str(seed)]
    for view in views or ():
        argv += ["--view", view]
    if paired:
        argv.append("--paired")
    return argv + ["--out", "out"]


def _as_argument(file_name: str) -> str:
    """A file name as a command's argument: one that starts with '-' would read as an option."""
    return f"./{file_name}" if file_name.startswith("-") else file_name


def check_out_beside_inputs(out: Path, names, inputs) -> None:
    """Before any work: the dataset folders OUT/NAME that a build replaces whole must not be, hold or
    lie inside one of its inputs, and OUT must not lie inside a dataset folder (whose manifest lists
    its files)."""
    from tecb_data.outputs import is_dataset_folder, refuse_overlap

    present = [item for item in inputs if item is not None and Path(item).exists()]
    for name in names:
        refuse_overlap(Path(out) / name, present, option="--out")
    resolved = Path(out).expanduser().resolve()
    for folder in [resolved, *resolved.parents]:
        if is_dataset_folder(folder):
            raise UserError(f"--out {out}: lies inside the dataset folder {folder}, whose files its manifest lists; "
                            "choose an output folder outside it")


# A label with fewer texts than this is kept (unless --min-per-label says otherwise), with a note.
FEW_TEXTS = 5


def _say_few_texts(items, min_per_label: int) -> None:
    """A note naming the labels kept with fewer than :data:`FEW_TEXTS` texts: a cluster of three
    texts is a thin target, and whether to keep it is the user's choice (``--min-per-label``)."""
    from collections import Counter

    if min_per_label >= FEW_TEXTS:
        return
    counts = Counter((level, value) for item in items for level, value in item.labels.items() if value)
    few = sorted(((level, value), n) for (level, value), n in counts.items() if n < FEW_TEXTS)
    if few:
        listed = ", ".join(f"{value!r} {n}" for (_, value), n in few[:5])
        more = f" and {len(few) - 5} more" if len(few) > 5 else ""
        print(f"note: {len(few)} label(s) kept with fewer than {FEW_TEXTS} texts ({listed}{more}); "
              f"pass --min-per-label {FEW_TEXTS} to remove their rows", file=sys.stderr)


def _is_report(path: Path) -> bool:
    """Whether ``path`` is a removed-rows report an earlier build wrote (what --report may replace)."""
    try:
        document = json.loads(inputs.read_text(path, what=f"--report {path}"))
    except (OSError, UnicodeDecodeError, ValueError, UserError):
        return False
    return isinstance(document, dict) and set(document) == {"report", "examples", "datasets"}


def _write_report(path: Path, text: str) -> None:
    """Written beside its target and renamed over it: a reader sees the old report or the new one."""
    import os
    import tempfile

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.chmod(tmp, 0o666 & ~layout.current_umask())
        os.replace(tmp, path)
    except OSError as exc:
        raise UserError(f"--report {path}: cannot write it ({exc.strerror}); the datasets were written") from None


def dataset_spec(name: str) -> DatasetSpec:
    if name not in DATASETS:
        raise UserError(f"unknown dataset {name!r}; known: {', '.join(sorted(DATASETS))}")
    return DATASETS[name]
