"""`tecb-eval report`: a static site from results stores that works offline from ``file://``.

::

    OUT/index.html            a leaderboard per dataset and view, the figures, the provenance; the
                              label-free scores of corpora without labels and of k ranges
    OUT/models/<model>.html   per model: the algorithm x reduction heat table, every configuration's
                              V-measure, AMI, ARI and noise fraction (the paper's figure beside ours
                              where it ran the same), per-split scores
    OUT/figures/*.png         Table 2 as dots with intervals, Table 3 as bars one per dataset (sized
                              to be read at their own size on a page 1280 px wide), per model
                              against the authors (with ``reference``), and the PNGs of other
                              outputs given with ``figures`` that show these results (an export's,
                              matched by the digest of its rows) or none (layers, pre-training)

Every V-measure, AMI and ARI is shown x100 (the library's scores are 0..1), and every header says so.

The pages are Jinja2 templates (``templates/`` beside this module) with autoescape on: any text a
store holds (a model name, a path) is escaped by Jinja2, never by string formatting. Nothing is
fetched: the CSS and the small sorting script are inline, the images are files beside the pages,
and the tables are complete and ordered without JavaScript. The folder is written whole or not at
all, and only over an earlier report (:func:`tecb_data.outputs.staged_output`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd

from tecb_data import inputs
from tecb_data.errors import UserError
from tecb_data.outputs import NAME_BYTES, inside
from tecb_eval.files import WriteError, file_slug, one_line, write_text
from tecb_eval.clustering import registry
from tecb_eval.reports import figures, label_free, leaderboard, ranking, tables, versions, working

REPORT = "tecb-eval report"  # the marker of a report folder
# Up to this many models, every page links every model page and names every model's identity; a
# model page of a larger report names its own model, and the leaderboards link every model.
NAV_MODELS = 50
TEMPLATES = Path(__file__).with_name("templates")
# The row fields a page shows or a table needs; the rest (parameters, timings) only slows every
# selection of rows down on a large store.
SHOWN = ("model", "mteb_name", "dataset", "algorithm", "reduction", "split", "seed", "seeds", "protocol", "profile",
         "v_measure", "ami", "ari", "noise_fraction", "n_clusters_found", "dataset_fingerprint", "dataset_location",
         "dataset_splits", "model_identity", "synthetic", "api_tokens", "api_cost", "price_per_million_tokens",
         versions.ORDER)


def _environment():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True)
    env.globals["TABLE2_WORDS"] = registry.in_words(*registry.TABLE2_CONFIGURATION)  # the ranked configuration, as the registry words it
    env.filters["x100"] = leaderboard.shown
    env.filters["heat"] = leaderboard.heat_colour
    env.filters["num"] = _sort_value
    env.filters["config"] = lambda c: f"{c[0]} / {c[1]}" if c else tables.NO_SPREAD
    env.filters["fraction"] = lambda v: f"{v:.2f}" if leaderboard.finite(v) else tables.NO_SPREAD
    # An API model's tokens and cost; a model that runs here shows none ("–"), never a cost of 0.
    env.filters["usage"] = lambda u: tables.NO_SPREAD if u is None else u.words()
    env.filters["cost_value"] = lambda u: "" if u is None else _sort_value(u.tokens if u.cost is None else u.cost)
    return env


def _sort_value(value) -> str:
    """What the sorting script sorts a numeric cell by (empty for none: sorted last)."""
    return repr(float(value)) if leaderboard.finite(value) else ""


def _figures(frame: pd.DataFrame, folder: Path, reference, demo: bool, extra: list[Path], draw: bool = True,
             exported: str | None = None, log=print) -> list[dict]:
    """The report's plots of ``frame`` (unless not ``draw``) and the PNGs of ``extra`` folders that
    show these results, in ``folder``; each as {file, caption, model: the model whose page shows it
    too, or None}. ``exported``: the :func:`tecb_eval.reports.figures.results_digest` of the rows an
    export of the same stores draws; a PNG recording other results (an older export, another store)
    or none (another program, an older tecb) is left out, in one line."""
    out = _drawn(frame, folder, reference, demo) if draw else []
    drawn = {f["file"] for f in out}
    # An export's Figure 1 of a model (figure1-<model>.png) goes on that model's page as well.
    figure1 = {f"figure1-{leaderboard.slug(m)}.png": m for m in sorted(frame.model.unique())}
    skipped: dict[str, list[str]] = {}
    for index, source in enumerate(extra):
        for png in sorted(source.rglob("*.png")):
            shown_as = f"{source.name}/{png.relative_to(source).as_posix()}"
            recorded = figures.recorded_results(png)
            if recorded is None:
                skipped.setdefault("it records no results (another program or an older tecb)", []).append(shown_as)
                continue
            if recorded not in (exported, figures.NOT_FROM_RESULTS):
                skipped.setdefault("drawn from other results than these stores", []).append(shown_as)
                continue
            # The report draws the export's Table 2 / 3 and authors' plots itself (Table 3 one per dataset).
            if recorded == exported and (png.name in drawn or png.name == "table3.png" and draw):
                skipped.setdefault("the report draws it itself", []).append(shown_as)
                continue
            name = f"extra-{index}-{'-'.join(png.relative_to(source).parts)}"
            if len(name.encode("utf-8")) > NAME_BYTES:  # a deep path: one file name may not hold it all
                name = f"extra-{index}-{file_slug('-'.join(png.relative_to(source).with_suffix('').parts))}.png"
            shutil.copyfile(png, inside(folder, name, what=f"--figures {source}"))
            out.append({"file": name, "caption": f"{png.relative_to(source)} from {source.name}/",
                        "model": figure1.get(png.name)})
    if skipped:
        log(one_line("--figures: left out " + "; ".join(
            f"{len(v)} PNG{'s' if len(v) != 1 else ''}, {why}: {', '.join(v)}" for why, v in skipped.items())))
    return out


def _drawn(frame: pd.DataFrame, folder: Path, reference, demo: bool) -> list[dict]:
    """The export's plots, Table 3 one per dataset (a page 1280 px wide shows each at its own size):
    Table 2 as dots, Table 3 as bars, each model beside the authors'."""
    demo_title = tables.DEMO_TITLE if demo else None
    out = []
    kmeans = registry.table2_rows(frame)
    if not kmeans.empty:
        figures.plot_table2_dots(frame, folder / "table2.png", demo_title)
        out.append({"file": "table2.png", "caption": "Table 2 as dots: per dataset, each ranked model's mean "
                    "V-measure x100 of k-means on the embeddings, with its 95 % bootstrap interval over splits; "
                    "the marker says whether the gap to the best holds"})
    t3 = tables.table3(frame, stats=True)
    ref_t3 = tables.paper_table3(reference) if reference is not None else None
    t3_models, _ = tables.table3_models(tables.one_version(frame))
    paper_drawn = ref_t3 is not None and not demo
    for dataset in tables.dataset_columns([c for c in tables.means_of(t3).columns if c != "avg"]):
        name = f"table3-{leaderboard.slug(dataset)}.png"
        figures.plot_table3(t3, inside(folder, name, what="a dataset's name"), ref_t3, tables.PAPER_BARS_LABEL,
                            demo_title, frame, models=t3_models.model.nunique(), datasets=[dataset])
        out.append({"file": name, "caption": f"Table 3 on {dataset} as bars: V-measure x100 per algorithm / "
                    "reduction, averaged over the ranked models, whiskers ± the SD over splits"
                    + (", the paper's figure beside ours where this run covered the dataset as the paper did"
                       if paper_drawn else "")})
    if reference is not None:
        means = tables.split_means(frame)
        for model in sorted(frame.model.unique()):
            theirs = tables.paper_model(model, reference.model.unique())
            if theirs is None:
                continue
            name = f"vs-authors-{leaderboard.slug(model)}.png"
            if figures.plot_model_comparison(means[means.model == model], reference[reference.model == theirs],
                                             model, inside(folder, name, what="a model's name"), demo_title,
                                             frame) is not None:
                out.append({"file": name, "caption": f"{model}: V-measure x100 of our configurations beside the "
                            f"authors' ({theirs})", "model": model})
    return out


def _corpus_figures(corpus: dict, folder: Path, demo: bool) -> list[dict]:
    """A dataset without labels' criteria over each range it ran (k, min_cluster_size), one PNG each."""
    out = []
    for parameter in ("k", "min_cluster_size"):
        name = f"corpus-{corpus['slug']}-{parameter.replace('_', '-')}.png"
        title = (f"{corpus['mteb_name']} ({corpus['dataset']}, no labels): label-free criteria over {parameter}, "
                 "means over splits and seeds" + (f"\n{tables.DEMO_TITLE}" if demo and corpus["synthetic"] else ""))
        if figures.plot_label_free_curves(corpus["points"], parameter, inside(folder, name, what="a dataset's name"),
                                          title) is not None:
            out.append({"file": name, "caption": f"{corpus['mteb_name']}: each label-free criterion, the stability "
                        f"(its band: the mean 5th to 95th percentile of the reruns' agreement) and the noise over "
                        f"{parameter}, one line per model / reduction / algorithm"})
    return out


def _calibration(path: Path | None) -> dict:
    """The calibration a page of a dataset without labels shows: its table as text and what it says."""
    from tecb_eval.reports import calibration as calib

    found = calib.read_calibration(path)
    table = pd.DataFrame(found["table"])
    # The single criteria and the one chosen; the file holds every rank average of two as well.
    table = table[~table.criterion.str.startswith(calib.COMBINED) | (table.criterion == found.get("best"))]
    shown = calib.shown_table(table.reset_index(drop=True))
    return {"columns": list(shown.columns), "rows": shown.values.tolist(), "date": found.get("date"),
            "on": [d["mteb_name"] for d in found.get("datasets", [])],
            "best": calib.title(str(found.get("best"))),
            # Leave one dataset out: what the choice made on the other datasets lost on the one left out.
            "held_out": [[r["held_out"], calib.title(r["chosen"]), f"{r['regret']:.2f}", f"{r['rho']:+.2f}",
                          f"{r['k_error']:.2f}"] for r in found.get("held_out", [])
                         if all(isinstance(r.get(k), (int, float)) for k in ("regret", "rho", "k_error"))],
            "source": "shipped with tecb" if path is None else f"from {Path(path).name}", "note": calib.NOTE,
            "has_stability": any(str(row.get("criterion", "")).startswith("stability") for row in found["table"])}


def _pick(corpus: dict, path: Path | None) -> dict:
    """What ``recommend`` picks for a corpus, as its page names it: the pick, the criterion, the
    clusters of the pick and of its first runner-ups, and which table rows to highlight; or why
    there is no pick (``pick_note``)."""
    from tecb_eval.reports import calibration as calib, unlabelled

    try:
        record = unlabelled.recommend_unlabelled(corpus["points"], corpus["mteb_name"],
                                                 calibration=calib.read_calibration(path))
    except UserError as exc:
        return {"pick": None, "pick_note": str(exc), "pick_clusters": [], "pick_rows": []}
    best = record["pipelines"][0]
    shown = [best["model"], best["reduction"], best["algorithm"], best["setting"] or "default"]
    cap = record.get("k_cap")
    cap_words = None if not cap else (
        f"{cap['clusters']:g} clusters, as many as the partition the grid agrees on most has "
        f"({cap['pipeline']['model']}, {cap['pipeline']['reduction']} reduction, {cap['pipeline']['algorithm']} "
        f"with {unlabelled.setting_words(cap['pipeline']['setting'])})")
    return {"pick": {**best, "criterion": record["criterion_name"], "setting_words": unlabelled.setting_words(
                best["setting"]), "spectral_k": record.get("spectral_k"), "cap_words": cap_words},
            "pick_note": None, "pick_clusters": unlabelled.pipelines_with_clusters(corpus["points"], record),
            "pick_rows": [i for i, row in enumerate(corpus["rows"]) if [str(v) for v in row[:4]] == shown]}


def _check_extra(extra: list[Path]) -> list[Path]:
    for folder in extra:
        if Path(folder).exists() and not Path(folder).is_dir():
            raise UserError(f"--figures {folder}: is a file, not a folder; name the folder that holds the PNG "
                            "figures (an export, a layer sweep or a pre-training output)")
        if not Path(folder).is_dir():
            raise UserError(f"--figures {folder}: no such folder; name a folder of PNG figures (an export, a layer "
                            "sweep or a pre-training output)")
        pngs = sorted(Path(folder).rglob("*.png"))
        if not pngs:
            raise UserError(f"--figures {folder}: holds no PNG figures; name an export, layer sweep or pre-training "
                            "output folder")
        for png in pngs:  # a FIFO would block the copy, a device would never end it
            inputs.check_regular(png, what=f"--figures {folder}: {png.relative_to(folder)}")
    return [Path(f) for f in extra]


def render(stores: list[Path], out: Path, *, reference: Path | None = None, selection: dict | None = None,
           figure_folders=(), draw_figures: bool = True, log=print, calibration: Path | None = None) -> list[Path]:
    """Write the report of the results ``stores`` into ``out``; returns the pages written.

    One version per table (:func:`tecb_eval.reports.versions.select` with ``selection``; the newest
    by default), the rows of later stores counted as newer. ``reference``: the authors' CSV, for the
    paper's figures beside ours. ``figure_folders``: folders whose PNGs are embedded too.

    Args:
        stores (list[Path]): Results stores (JSONL); a later store's rows count as newer.
        out (Path): The site's folder: new, empty or an earlier report's (replaced whole).
        reference (Path | None): The authors' ``tecb-de-full-results.csv``, or None.
        selection (dict | None): Which version to show (``protocol``, ``profile``, ``seeds``,
            ``fingerprints``, ``identities``); None: the newest.
        figure_folders (Sequence[Path]): Folders of PNGs to embed (an export of the same stores, a
            layer sweep, pre-training curves); a PNG drawn from other results is left out and named.
        draw_figures (bool): False leaves out the plots (``--no-figures``).
        log (Callable[[str], None]): Where the lines saying what was left out go; default ``print``.
        calibration (Path | None): The calibration a dataset without labels' page shows (one
            `tecb-eval calibrate --out` wrote); None: the one tecb ships.

    Returns:
        list[Path]: The pages written (``index.html`` and one page per model).

    Raises:
        UserError: A store that cannot be read, or an ``out`` that is not ours to replace.
    """
    from tecb_data.outputs import check_output, staged_output

    stores = [Path(s) for s in stores]
    inputs = [*stores, reference, calibration, *figure_folders]
    check_output(out, REPORT, inputs=inputs)  # before anything is read
    extra = _check_extra(list(figure_folders))
    # A calibration named is read first, as every other input: a wrong one is one line before any work.
    named_calibration = _calibration(calibration) if calibration is not None else None
    ref = tables.read_reference(reference) if reference is not None else None
    frame = leaderboard.combined([versions.read_store(s) for s in stores])
    labelled, points, unlabelled = label_free.label_free_points(frame, selection)
    if unlabelled:
        log(one_line(f"{', '.join(unlabelled)}: without labels: the report shows its label-free scores; the "
                     "leaderboards and model pages rank by V-measure and leave it out"))
    corpora = label_free.corpus_sections(points)
    calibrated = (named_calibration or _calibration(None)) if corpora else None
    for corpus in corpora:
        corpus["slug"] = leaderboard.slug(corpus["dataset"])
        corpus.update(_pick(corpus, calibration))
    if labelled.empty:
        frame = labelled  # nothing a leaderboard ranks: the report is the label-free table alone
    selection_ = ranking.shared_selection(frame, **(selection or {}))
    # What `tecb-eval export` of these stores draws (one version, like with like): its figures match.
    exported = (figures.results_digest(versions.select(frame, **(selection or {}))[0])
                if extra and not frame.empty else None)
    chosen = selection_.rows[[c for c in selection_.rows.columns if c in SHOWN]]
    every = selection_.every[[c for c in selection_.every.columns if c in SHOWN]]
    left_out = selection_.left_out
    if left_out:
        log(left_out)
    for line in selection_.notes():
        log(line)
    synthetic = set(tables.synthetic_datasets(every)) | set(tables.synthetic_datasets(points))
    boards = leaderboard.boards(selection_, synthetic)
    pages = leaderboard.model_pages(every, synthetic, ref)
    context = {
        "synthetic": bool(synthetic), "synthetic_datasets": sorted(synthetic), "SYNTHETIC": leaderboard.SYNTHETIC,
        "demo_note": tables.DEMO_NOTE, "left_out": left_out,
        # The provenance names every row shown: the label-free points' datasets and models too.
        "provenance": leaderboard.provenance(pd.concat([every, points[[c for c in points.columns if c in SHOWN]]]),
                                             stores, synthetic),
        "models": [{"model": p.model, "slug": p.slug} for p in pages],
        "models_elsewhere": 0,
        "legend": tables.legend("2", chosen) if not chosen.empty else "",
        "averages": leaderboard.averages(boards),
        "label_free": label_free.label_free_sections(label_free.task_named(points)),
        # A dataset without labels has a page of its own (corpora/<slug>.html), linked from its section.
        "corpus_pages": {c["mteb_name"]: f"corpora/{c['slug']}.html" for c in corpora},
    }
    env = _environment()
    written = []
    try:
        with staged_output(out, REPORT, inputs=inputs) as stage:
            folder = stage.work
            (folder / "figures").mkdir()
            (folder / "models").mkdir()
            if corpora:
                (folder / "corpora").mkdir()
            shown_figures = _figures(chosen, folder / "figures", ref, bool(synthetic), extra,
                                     draw_figures and not chosen.empty, exported, log)
            stage.check()
            index = env.get_template("index.html.j2").render(**context, boards=boards, figures=shown_figures, root="")
            written.append(write_text(folder / "index.html", index))
            # Past NAV_MODELS models a page does not list them all (every page listing every model
            # grows the report with the square of the models): the leaderboards link each.
            many = len(pages) > NAV_MODELS
            for page in working.per_model(pages, "writing the model pages"):
                own = {"models": [], "models_elsewhere": len(pages),
                       "provenance": {**context["provenance"], "models": [
                           m for m in context["provenance"]["models"] if m["model"] == page.model]}} if many else {}
                text = env.get_template("model.html.j2").render(
                    **{**context, **own}, page=page, root="../",
                    figures=[f for f in shown_figures if f.get("model") == page.model])
                written.append(write_text(inside(folder / "models", f"{page.slug}.html", what="a model's name"), text))
                stage.check()
            for corpus in corpora:
                drawn = _corpus_figures(corpus, folder / "figures", bool(synthetic)) if draw_figures else []
                text = env.get_template("corpus.html.j2").render(**context, page=corpus, figures=drawn,
                                                                 calibration=calibrated, root="../")
                written.append(write_text(inside(folder / "corpora", f"{corpus['slug']}.html",
                                                 what="a dataset's name"), text))
                stage.check()
            written = [out / p.relative_to(folder) for p in written]
    except WriteError as exc:
        raise UserError(f"--out {out}: writing {exc.path.name} failed ({exc.reason}); nothing in {out} was changed: "
                        "free space or choose another --out") from None
    return written
