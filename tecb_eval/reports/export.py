"""Everything a finished grid gives a reader, written into one folder.

::

    OUT/results.csv           the authors' full-results layout (model x configuration x dataset)
    OUT/table2.md, .csv       the paper's Table 2 (k-means per model; V-measure x100 in .md, 0..1 in .csv)
    OUT/table3.md, .csv       the paper's Table 3 (algorithm x reduction, averaged over models)
    OUT/mteb/results/<model>/<rev>/<Task>.json + model_meta.json   MTEB's results layout
                              (k-means on the embeddings; ``mteb.ResultCache(OUT/mteb)`` reads it)
    OUT/table2.png            Table 2 as a dot plot: per dataset and model the figure with its
                              bootstrap interval over splits and seeds; the best per dataset filled
    OUT/table3.png            Table 3 as bars (beside the paper's with a reference CSV)
    OUT/vs-authors-<model>.png  per model the authors also ran: our configurations vs theirs
    OUT/figure1-<model>.png   2-D UMAP of one split per dataset, coloured by label
    OUT/label_free.md, .csv   the label-free scores of corpora without labels and of k ranges, per
                              pipeline and cluster setting (a store of corpora without labels only
                              gets these, and a line saying what needs labels)

With the authors' CSV (``reference``), Table 3 gets the paper's printed row under each of ours
(``source`` ours / paper), and Table 2 under each model the paper printed. ``demo=True`` marks
every table and the Table 3 plot as synthetic demo data that is not comparable with the paper.

The folder is written whole or not at all and holds exactly one export (see :func:`export_all`):
a second export into it replaces the first, and OUT is never a folder something else wrote.

A store may hold several versions of a result (dataset builds, seed sets, protocols, profiles,
model identities): every file is written from one version per table, the newest unless
``selection`` asks for another (:func:`tecb_eval.reports.versions.select`); what was left out is logged and
said in the tables' notes, so tables, CSV and MTEB JSON always show the same figures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from tecb_data.errors import UserError
from tecb_data.outputs import inside, staged_output
from tecb_data.seeding import DEFAULT_SEED
from tecb_eval.files import WriteError, file_slug, one_line
from tecb_eval.mteb import results as mteb_results
from tecb_eval.reports import figures, label_free, tables as report, versions
from tecb_eval.models.encoders import get_encoder
from tecb_eval.benchmark import load_dataset
from tecb_eval.models.spec import model_spec
from tecb_eval.mteb.encoders import encoder_for_dataset

# The marker of an export folder, whichever command wrote it (`export`, `run --out`): each replaces
# the other's. The demo's folder also holds its results store, so it is a kind of its own.
EXPORT = "tecb-eval export"
DEMO = "tecb-eval demo"
LABEL_FREE = "label_free"  # OUT/label_free.md, .csv: the label-free scores of corpora without labels and k ranges


def _write_table(stem: Path, table, note: str | None) -> list[Path]:
    return [report.write_text(stem.with_suffix(".md"), report.format_table(table, "md", note=note)),
            report.write_text(stem.with_suffix(".csv"), report.format_table(table, "csv"))]


def export_all(frame, out: Path, *, reference: Path | None = None, log=print, demo: bool = False,
               selection: dict | None = None, inputs=(), command: str = EXPORT, keep=(),
               extra: Callable[[Path], list[Path]] | None = None) -> list[Path]:
    """Write the export of ``frame`` into the folder ``out``, whole or not at all; returns the files.

    The folder holds exactly one export: it is written as ``OUT.partial`` and swapped in when
    complete, so no file of an earlier export stays beside the new one, and an error or Ctrl-C
    leaves OUT as it was. OUT may be new, empty, or an earlier output of ``command`` (its marker
    ``.tecb-output.json``); anything else (a dataset folder, a pre-training output, a user's files)
    is refused in one line, as is an OUT that holds ``reference`` or one of ``inputs`` (the results
    store, a cache, the datasets), which the swap would delete. ``keep``: files inside OUT that
    belong to it and survive the swap (the demo's own results store). ``extra(folder)`` writes more
    files into the folder before it is swapped in (the Figure 1 plots) and returns them.

    Args:
        frame (pandas.DataFrame): Results rows to export.
        out (Path): The export's folder: new, empty or an earlier output of ``command``.
        reference (Path | None): The authors' CSV, for the paper's rows beside ours.
        log (Callable[[str], None]): Receives the lines saying what was left out; default ``print``.
        demo (bool): Mark every output as synthetic demo data.
        selection (dict | None): Which version to export; None: the newest.
        inputs (Sequence[Path]): Files the export reads (the results store, a cache, the datasets),
            refused as part of ``out``.
        command (str): The command whose output ``out`` may be (its marker).
        keep (Sequence[Path]): Files inside ``out`` that belong to it and survive the swap.
        extra (Callable[[Path], list[Path]] | None): Writes more files into the staged folder and
            returns them.

    Returns:
        list[Path]: The files written.

    Raises:
        UserError: An ``out`` that is another command's output, a dataset or a user's folder, or that
            holds ``reference`` or one of ``inputs``; nothing is changed.
    """
    out = Path(out)
    # Read first: a wrong --reference fails before anything in OUT is replaced.
    ref = report.read_reference(reference) if reference is not None else None
    # The tables' notes say what `tecb-eval table` says: the versions left out, the cells not every
    # model has, the datasets not covered in full.
    labelled, points, unlabelled = label_free.label_free_points(frame, selection)
    if labelled.empty:
        # Only label-free points: what needs labels is left out in one line, the rest is written.
        what = ", ".join(unlabelled) + ": without labels" if unlabelled else "every row is a point of a k range"
        log(one_line(f"{what}: the export holds the label-free scores ({LABEL_FREE}.md, .csv); results.csv, "
                     "Tables 2 and 3, their plots and MTEB's results need V-measure and are not written"))
        shown, left_out = {}, None
    else:
        shown = report.tables(frame, ref, demo=demo, selection=selection)
        frame, left_out = versions.select(frame, **(selection or {}))
    # Rows of the demo sample's datasets mark themselves, with or without --demo.
    demo = demo or bool(report.synthetic_datasets(frame if not labelled.empty else points))
    if left_out:
        log(left_out)

    def write(folder: Path, check) -> list[Path]:
        written = []
        if not points.empty:
            table = label_free.label_free_table(label_free.task_named(points))
            note = report.DEMO_NOTE if demo else None
            written += [report.write_text(folder / f"{LABEL_FREE}.md", label_free.format_label_free(table, "md", note)),
                        report.write_text(folder / f"{LABEL_FREE}.csv", label_free.format_label_free(table, "csv"))]
        if labelled.empty:
            return written
        written.append(report.write_reference_csv(frame, folder / "results.csv"))
        for name, (table, note) in shown.items():
            written += _write_table(folder / name, table, note)
            check()
        t3 = report.table3(frame, stats=True)
        # MTEB's JSON claims MTEB's score: a mean over part of a dataset's splits is not, so it stays out
        # (results.csv and the tables keep it, marked incomplete).
        partial = versions.incomplete(frame)
        for dataset, (covered, total) in partial.items():
            log(one_line(f"{dataset}: left out of the MTEB results export: {covered} of {total} splits ran"))
        written += mteb_results.write_results(frame[~frame.mteb_name.isin(list(partial))], folder / "mteb")
        check()
        ref_t3 = report.paper_table3(ref) if ref is not None else None
        demo_title = report.DEMO_TITLE if demo else None
        if "table2" in shown:
            written.append(figures.plot_table2_dots(frame, folder / "table2.png", demo_title))
        t3_models, _ = report.table3_models(report.one_version(frame))
        written.append(figures.plot_table3(t3, folder / "table3.png", ref_t3, report.PAPER_BARS_LABEL, demo_title,
                                           frame, models=t3_models.model.nunique()))
        if ref is not None:
            means = report.split_means(frame)
            for model in sorted(frame.model.unique()):
                # The per-model plots use every model the authors ran, sentence-t5-large included.
                theirs = report.paper_model(model, ref.model.unique())
                if theirs is None:
                    log(one_line(f"{model}: not in the authors' table; no side-by-side plot for it"))
                    continue
                path = figures.plot_model_comparison(
                    means[means.model == model], ref[ref.model == theirs], model,
                    inside(folder, f"vs-authors-{file_slug(model)}.png", what="a model's name"),
                    demo_title, frame,
                )
                if path is not None:
                    written.append(path)
        return written

    work = None
    try:
        with staged_output(out, command, inputs=[reference, *inputs], keep=keep) as stage:
            work = stage.work
            written = write(stage.work, stage.check)
            stage.check()
            if extra is not None:
                written += extra(stage.work)
            written = [out / path.relative_to(stage.work) for path in written]  # where they are once swapped in
    except WriteError as exc:
        if work is None or not exc.path.is_relative_to(work):
            raise  # a cache file (Figure 1 reads through the caches): its own line names --cache-dir
        raise UserError(f"--out {out}: writing {exc.path.name} failed ({exc.reason}); nothing in {out} was changed: "
                        "free space or choose another --out") from None
    return written


def figure1(datasets, model, out: Path, *, seed: int = DEFAULT_SEED, cache_dir: Path | None = None, split: str | None = None,
            frame=None, demo_note: str | None = None, log=None) -> Path | None:
    """The paper's Figure 1 for one model: a UMAP panel per dataset (its largest split by default).

    A panel colours the texts by their gold label, so a corpus without labels has none (``log``
    says so in a line); with no labelled dataset there is no figure and None is returned.

    ``frame``: the grid's rows. Then the panel shows the largest split the grid ran (so
    ``--limit-splits`` is honoured), with the grid's first seed, and the vectors and the UMAP come
    from the grid's caches under the identity the rows name: the model is loaded only for texts the
    cache lacks (no ``cache_dir``, or an encoder object without an identity)."""
    spec = model_spec(model)
    rows = None
    if frame is not None and not frame.empty:
        rows = frame[frame.model == spec.name]
        if not rows.empty:
            seed = int(rows.seed.min())
    loaded = {}

    def encoder():
        # Loaded at most once, and only when the cache cannot serve a panel.
        if "encoder" not in loaded:
            loaded["encoder"] = get_encoder(spec.spec, seed=seed, **spec.options)
        return loaded["encoder"]

    panels = []
    for item in datasets:
        bench = load_dataset(item)
        if not getattr(bench, "labelled", True):
            if log is not None:
                log(f"{bench.mteb_name}: without labels: no Figure 1 panel (it colours the texts by their gold label)")
            continue
        identity, ran, protocol = None, None, "legacy"
        if rows is not None:
            mine = rows[rows.dataset_fingerprint == bench.fingerprint]
            if not mine.empty:
                identity, ran = str(mine.model_identity.iloc[0]), set(mine.split)
                protocol = str(mine.protocol.iloc[0])  # a model prompted per task: the task the rows ran
        name, coords, labels = figures.umap_coordinates(
            bench, lambda b=bench, p=protocol: encoder_for_dataset(encoder(), b, p), split, seed, cache_dir,
            identity=identity, splits=ran)
        panels.append((f"{bench.mteb_name} / {name}", coords, labels))
    if not panels:
        return None
    title = f"Figure 1: UMAP (2-D, cosine, seed {seed}) of {spec.name} embeddings, coloured by gold label"
    if demo_note:
        title += "\n" + demo_note
    return figures.plot_umap_scatter(panels, inside(out, f"figure1-{file_slug(spec.name)}.png", what="a model's name"),
                                     title)


def interrupted_state(out: Path, since: int = 0, what: str = "export") -> str:
    """What Ctrl-C during an export (or another output written whole, ``what``: a report) left in
    ``out``, in words; ``since``: how many outputs this process had published before it began
    (``len(tecb_data.outputs.published())``)."""
    from tecb_data.outputs import output_target, published

    try:
        done = output_target(out) in published()[since:]
    except UserError:
        done = False
    if done:
        return f"the new {what} in {out} is complete"
    article = "an" if what[0] in "aeiou" else "a"
    return f"nothing in {out} was changed ({article} {what} is written whole or not at all); run the same command again"
