"""Everything a finished grid gives a reader, written into one folder.

::

    OUT/results.csv           the authors' full-results layout (model x configuration x dataset)
    OUT/table2.md, table3.md  the paper's Tables 2 and 3 (V-measure x100)
    OUT/mteb/<model>/<rev>/<Task>.json   MTEB result files (k-means on the embeddings)
    OUT/table3.png            Table 3 as bars (beside the authors' with a reference CSV)
    OUT/vs-authors-<model>.png  per model the authors also ran: our configurations vs theirs
    OUT/figure1-<model>.png   2-D UMAP of one split per dataset, coloured by label
"""

from __future__ import annotations

import re
from pathlib import Path

import tecb_data
from tecb_eval import figures, report
from tecb_eval.encoders import get_encoder
from tecb_eval.grid import encoder_for_dataset, load_dataset, model_spec


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "model"


def _matching(reference, model: str):
    wanted = model.lower()
    names = {n.lower(): n for n in reference.model.unique()}
    return names.get(wanted) or names.get(wanted.rsplit("/", 1)[-1])


def export_all(frame, out: Path, *, reference: Path | None = None, log=print) -> list[Path]:
    out = Path(out)
    written = [report.write_reference_csv(frame, out / "results.csv")]
    has_table2 = ((frame.algorithm == "minibatch_kmeans") & (frame.reduction == "none")).any()
    if has_table2:
        written.append(report.write_text(out / "table2.md", report.format_table(report.table2(frame))))
    t3 = report.table3(frame)
    written.append(report.write_text(out / "table3.md", report.format_table(t3)))
    written += report.write_mteb_results(frame, out / "mteb", tecb_data.__version__)
    ref = report.read_reference(reference) if reference is not None else None
    ref_t3 = report.reference_table3(ref) if ref is not None else None
    label = f"authors (average over their {ref.model.nunique()} models)" if ref is not None else "authors"
    written.append(figures.plot_table3(t3, out / "table3.png", ref_t3, label))
    if ref is not None:
        means = report.split_means(frame)
        for model in sorted(frame.model.unique()):
            theirs = _matching(ref, model)
            if theirs is None:
                log(f"{model}: not in the authors' table; no side-by-side plot for it")
                continue
            path = figures.plot_model_comparison(
                means[means.model == model], ref[ref.model == theirs], model, out / f"vs-authors-{_slug(model)}.png"
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
