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

With the authors' CSV (``reference``), Table 3 gets the paper's printed row under each of ours
(``source`` ours / paper), and Table 2 under each model the paper printed. ``demo=True`` marks
every table and the Table 3 plot as synthetic demo data that is not comparable with the paper.

A store may hold several versions of a result (dataset builds, seed sets, protocols, profiles,
model identities): every file is written from one version per table, the newest unless
``selection`` asks for another (:func:`tecb_eval.reports.versions.select`); what was left out is logged and
said in the tables' notes, so tables, CSV and MTEB JSON always show the same figures.
"""

from __future__ import annotations

import re
from pathlib import Path

from tecb_eval.mteb import results as mteb_results
from tecb_eval.reports import figures, tables as report, versions
from tecb_eval.models.encoders import get_encoder
from tecb_eval.benchmark import load_dataset
from tecb_eval.grid.run import encoder_for_dataset, model_spec


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "model"


def _write_table(stem: Path, table, note: str | None) -> list[Path]:
    return [report.write_text(stem.with_suffix(".md"), report.format_table(table, "md", note=note)),
            report.write_text(stem.with_suffix(".csv"), report.format_table(table, "csv"))]


def export_all(frame, out: Path, *, reference: Path | None = None, log=print, demo: bool = False,
               selection: dict | None = None) -> list[Path]:
    out = Path(out)
    # Read first: a wrong --reference fails before anything in OUT is replaced.
    ref = report.read_reference(reference) if reference is not None else None
    # The tables' notes say what `tecb-eval table` says: the versions left out, the cells not every
    # model has, the datasets not covered in full.
    shown = report.tables(frame, ref, demo=demo, selection=selection)
    frame, left_out = versions.select(frame, **(selection or {}))
    if left_out:
        log(left_out)
    written = [report.write_reference_csv(frame, out / "results.csv")]
    for name, (table, note) in shown.items():
        written += _write_table(out / name, table, note)
    t3 = report.table3(frame)
    # MTEB's JSON claims MTEB's score: a mean over part of a dataset's splits is not, so it stays out
    # (results.csv and the tables keep it, marked incomplete).
    partial = versions.incomplete(frame)
    for dataset, (covered, total) in partial.items():
        log(f"{dataset}: left out of the MTEB results export: {covered} of {total} splits ran")
    written += mteb_results.write_results(frame[~frame.mteb_name.isin(list(partial))], out / "mteb")
    ref_t3 = report.paper_table3(ref) if ref is not None else None
    demo_title = report.DEMO_TITLE if demo else None
    if "table2" in shown:
        written.append(figures.plot_table2_dots(frame, out / "table2.png", demo_title))
    written.append(figures.plot_table3(t3, out / "table3.png", ref_t3, report.PAPER_BARS_LABEL, demo_title))
    if ref is not None:
        means = report.split_means(frame)
        for model in sorted(frame.model.unique()):
            # The per-model plots use every model the authors ran, sentence-t5-large included.
            theirs = report.paper_model(model, ref.model.unique())
            if theirs is None:
                log(f"{model}: not in the authors' table; no side-by-side plot for it")
                continue
            path = figures.plot_model_comparison(
                means[means.model == model], ref[ref.model == theirs], model, out / f"vs-authors-{_slug(model)}.png",
                demo_title,
            )
            if path is not None:
                written.append(path)
    return written


def figure1(datasets, model, out: Path, *, seed: int = 42, cache_dir: Path | None = None, split: str | None = None) -> Path:
    """The paper's Figure 1 for one model: a UMAP panel per dataset (its largest split by default)."""
    spec = model_spec(model)
    encoder = get_encoder(spec.spec, seed=seed, **spec.options)
    panels = []
    for item in datasets:
        bench = load_dataset(item)
        name, coords, labels = figures.umap_coordinates(bench, encoder_for_dataset(encoder, bench), split, seed, cache_dir)
        panels.append((f"{bench.mteb_name} / {name}", coords, labels))
    return figures.plot_umap_scatter(panels, Path(out) / f"figure1-{_slug(spec.name)}.png",
                                     f"UMAP of {spec.name} embeddings, coloured by gold label")
