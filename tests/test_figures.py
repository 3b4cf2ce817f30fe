"""Every figure drawn from a small real store and read back without eyes: the plotted values equal the table they come from, compared panels share their axis from
0, there is a legend, the title says what was run, and no text lies outside the figure.

The store is a real grid (`tecb-eval run`, tfidf-lsa and minilm-l6 on the demo TenKGnad datasets,
the first 3 of their 10 splits, UMAP among the reductions) whose export draws Figure 1 as well.
"""

from __future__ import annotations

import math
import shutil

import numpy as np
import pandas as pd
import pytest

from tecb_eval.cli import main
from tecb_eval.grid.store import read_results
from tecb_eval.reports import compare, figures, tables as report
from helpers import SHARED

SHARED_REFERENCE = SHARED / "reference" / report.REFERENCE_CSV
CONFIGS = ["minibatch_kmeans:none", "agglomerative:pca", "hdbscan:umap", "dbstream:pca"]
SPLITS = 3


@pytest.fixture(autouse=True)
def _close_the_figures_a_test_drew():
    """The tests here draw figures to inspect them and never save them (saving closes a figure):
    closed after each test, so they do not pile up in pyplot's registry for the tests after."""
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.fixture(scope="module")
def store(demo_datasets, tmp_path_factory):
    root = tmp_path_factory.mktemp("figures")
    for name in ("tenkgnad-clustering-s2s", "tenkgnad-clustering-p2p"):  # a folder of the two TenKGnad datasets
        shutil.copytree(demo_datasets / name, root / "data" / name)
    args = ["run", "--data", str(root / "data"), "--model", "tfidf-lsa", "--model", "minilm-l6",
            "--results", str(root / "results.jsonl"), "--cache-dir", str(root / "cache"), "--quiet",
            "--limit-splits", str(SPLITS), "--out", str(root / "out")]
    for config in CONFIGS:
        args += ["--config", config]
    assert main(args) == 0
    return root, read_results(root / "results.jsonl")


def _inside(fig) -> None:
    """Everything ``fig`` draws (titles, labels, legends, tick labels in view) lies inside the figure:
    nothing is cut at its edge. Matplotlib's tight box holds exactly the drawn artists."""
    fig.canvas.draw()
    tight = fig.get_tightbbox(fig.canvas.get_renderer())
    width, height = fig.get_size_inches()
    slack = 1 / fig.dpi  # one pixel
    assert tight.x0 >= -slack and tight.y0 >= -slack, tight
    assert tight.x1 <= width + slack and tight.y1 <= height + slack, (tight, width, height)


def _legend_texts(fig) -> list[str]:
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.get_axes() if ax.get_legend() is not None]
    for sub in getattr(fig, "subfigs", []):
        legends += list(sub.legends)
    return [t.get_text() for legend in legends for t in legend.get_texts()]


def _shown_axes(fig):
    return [ax for ax in fig.get_axes() if ax.get_visible()]


def _title(fig) -> str:
    return fig._suptitle.get_text()


# -- Table 2 -------------------------------------------------------------------------------------
@pytest.mark.slow
def test_table2_dots_are_the_table_on_one_shared_axis(store):
    _, frame = store
    fig = figures.table2_figure(frame)
    table = report.table2(frame, stats=True, markers=True)
    axes = _shown_axes(fig)
    datasets = [ax.get_title() for ax in axes]
    assert datasets == ["TenKGnadClusteringS2S", "TenKGnadClusteringP2P"]
    for ax, dataset in zip(axes, datasets):
        # An errorbar container's first line is its dot (its caps carry the same gid).
        dots = {c.lines[0].get_gid()[4:]: c.lines[0].get_xydata()[0] for c in ax.containers}
        assert sorted(dots) == ["minilm-l6", "tfidf-lsa"]
        for model, (x, y) in dots.items():
            assert x == pytest.approx(100 * table.at[model, (dataset, "mean")], abs=1e-9)
        # The interval around each dot is the bootstrap interval compare.mean_interval gives.
        of = frame[(frame.mteb_name == dataset) & (frame.algorithm == "minibatch_kmeans") & (frame.reduction == "none")]
        for container in ax.containers:
            model = container.lines[0].get_gid()[4:]
            scores = of[of.model == model].set_index(["split", "seed"]).v_measure.sort_index()
            _, low, high = compare.mean_interval(scores, name=f"{dataset}\x1f{model}")
            (start, _), (end, _) = container.lines[2][0].get_segments()[0]
            assert (start, end) == pytest.approx((100 * low, 100 * high))
    limits = {ax.get_xlim() for ax in axes}
    assert len(limits) == 1 and next(iter(limits))[0] == 0
    legend = _legend_texts(fig)
    marks = {m: table.at[m, (d, "marker")] for m in table.index for d in datasets}
    assert figures.TABLE2_MARKS["*"][3] in legend and len(legend) == len(set(legend))
    assert all(figures.TABLE2_MARKS[marks[m]][3] in legend for m in marks)
    title = _title(fig)
    assert "2 models" in title and f"{SPLITS} of 10 splits per dataset" in title and "seed 42" in title
    assert "seeds" not in title and "NOT comparable" not in title
    _inside(fig)


# -- Table 3 -------------------------------------------------------------------------------------
def _bars(ax, starts: str):
    (container,) = [c for c in ax.containers if c.get_label().startswith(starts)]
    return container


def test_table3_bars_and_whiskers_are_the_table(store):
    _, frame = store
    table = report.table3(frame, stats=True)
    fig = figures.table3_figure(table, frame=frame, models=2)
    axes = _shown_axes(fig)
    assert [ax.get_title() for ax in axes] == ["TenKGnadClusteringS2S", "TenKGnadClusteringP2P"]
    means, sds = table.xs("mean", axis=1, level="stat"), table.xs("sd_splits", axis=1, level="stat")
    for ax in axes:
        dataset = ax.get_title()
        bars = _bars(ax, "this run")
        assert [p.get_height() for p in bars.patches] == pytest.approx(list(100 * means[dataset]))
        whiskers = bars.errorbar.lines[2][0].get_segments()
        assert [(top[1] - bottom[1]) / 2 for bottom, top in whiskers] == pytest.approx(list(100 * sds[dataset]))
    assert len({ax.get_ylim() for ax in axes}) == 1 and axes[0].get_ylim()[0] == 0
    assert any("SD over splits" in text for text in _legend_texts(fig))
    title = _title(fig)
    assert "averaged over 2 models" in title and f"{SPLITS} of 10 splits per dataset" in title
    _inside(fig)


def test_table3_says_which_bar_is_zero_and_which_is_missing(store):
    _, frame = store
    table = report.table3(frame, stats=True)
    table.loc[("dbstream", "pca"), ("TenKGnadClusteringS2S", "mean")] = 0.0
    table.loc[("agglomerative", "pca"), ("TenKGnadClusteringP2P", "mean")] = np.nan
    fig = figures.table3_figure(table, frame=frame, models=2)
    configs = list(table.index)
    means = table.xs("mean", axis=1, level="stat")
    for ax in _shown_axes(fig):
        bars = _bars(ax, "this run").patches
        centre = {c: bars[i].get_x() + bars[i].get_width() / 2 for i, c in enumerate(configs)}
        values = means[ax.get_title()]
        labelled = sorted((round(t.get_position()[0], 6), t.get_text()) for t in ax.texts)
        expected = sorted([(round(centre[c], 6), "0") for c in configs if round(100 * values[c], 1) == 0]
                          + [(round(centre[c], 6), figures.MISSING) for c in configs if np.isnan(values[c])])
        assert labelled == expected
    s2s, p2p = _shown_axes(fig)
    assert (round(centre[("agglomerative", "pca")], 6), figures.MISSING) in expected  # p2p, the last panel
    assert any(t.get_text() == "0" for t in s2s.texts)


def test_table3_beside_the_paper_and_never_beside_synthetic_scores(store):
    if not SHARED_REFERENCE.is_file():
        pytest.skip(f"{SHARED_REFERENCE} is absent")
    _, partial = store
    # Like with like: the store's datasets taken as if they had only the splits it ran (--limit-splits).
    frame = partial.assign(dataset_splits=SPLITS)
    table = report.table3(frame, stats=True)
    paper = report.paper_table3(report.read_reference(SHARED_REFERENCE))
    fig = figures.table3_figure(table, paper, report.PAPER_BARS_LABEL, frame=frame, models=2)
    for ax in _shown_axes(fig):
        theirs = _bars(ax, "paper's Table 3")
        assert [p.get_height() for p in theirs.patches] == pytest.approx(list(100 * paper.loc[table.index, ax.get_title()]))
    _inside(fig)
    # Our mean over 3 of a dataset's splits is not the paper's mean over all of them: no bars beside
    # it, and the panel says what it covers.
    unlike = figures.table3_figure(report.table3(partial, stats=True), paper, report.PAPER_BARS_LABEL, frame=partial,
                                   models=2)
    for ax in _shown_axes(unlike):
        assert not [c for c in ax.containers if c.get_label().startswith("paper's")]
        assert f"{SPLITS} of " in ax.get_title() and "not drawn" in ax.get_title()
    assert "drawn only beside a dataset this run covered alike" in _title(unlike)
    _inside(unlike)
    demo = figures.table3_figure(table, paper, report.PAPER_BARS_LABEL, report.DEMO_TITLE, frame=frame, models=2)
    assert all([c.get_label() for c in ax.containers if not c.get_label().startswith("_")] == [c.get_label()
               for c in ax.containers if c.get_label().startswith("this run")] for ax in _shown_axes(demo))
    assert "not drawn beside synthetic scores" in _title(demo) and "NOT comparable" in _title(demo)
    _inside(demo)


def test_side_by_side_with_the_authors_plots_both_sides_values(store):
    if not SHARED_REFERENCE.is_file():
        pytest.skip(f"{SHARED_REFERENCE} is absent")
    _, frame = store
    frame = frame.assign(model=frame.model.replace({"minilm-l6": "GBERT-base"}),  # a model the authors ran
                         dataset_splits=SPLITS)  # as if the store ran every split: like with like
    reference = report.read_reference(SHARED_REFERENCE)
    ours = report.split_means(frame)
    ours = ours[ours.model == "GBERT-base"]
    theirs = reference[reference.model == "GBERT-base"]
    fig = figures.model_comparison_figure(ours, theirs, "GBERT-base", frame=frame)
    for ax in _shown_axes(fig):
        dataset = ax.get_title()
        mine = ours[ours.mteb_name == dataset].set_index(["algorithm", "reduction"])
        paper = theirs[theirs.mteb_name == dataset].set_index(["algorithm", "reduction"]).v_measure
        configs = [c for c in figures.algo.PAPER_CONFIGURATIONS if c in mine.index]
        assert [p.get_height() for p in _bars(ax, "this run").patches] == pytest.approx(list(100 * mine.loc[configs, "mean"]))
        assert [p.get_height() for p in _bars(ax, "authors").patches] == pytest.approx(list(100 * paper.loc[configs]))
    assert len({ax.get_ylim() for ax in _shown_axes(fig)}) == 1
    _inside(fig)


# -- Figure 1 ------------------------------------------------------------------------------------
def test_figure1_is_drawn_from_the_grid_cache_on_the_splits_it_ran(store):
    from tecb_eval.benchmark import load_dataset

    root, frame = store
    assert {p.name for p in (root / "out").glob("figure1-*.png")} == {"figure1-tfidf-lsa.png", "figure1-minilm-l6.png"}
    bench = load_dataset(root / "data" / "tenkgnad-clustering-p2p")
    rows = frame[(frame.model == "minilm-l6") & (frame.dataset_fingerprint == bench.fingerprint)]
    ran = set(rows.split)
    assert len(ran) == SPLITS
    # The largest split the grid ran (--limit-splits 3), not the dataset's largest.
    expected = max((s for s in bench.splits if s.name in ran), key=lambda s: (len(s.texts), s.name))
    largest = max(bench.splits, key=lambda s: (len(s.texts), s.name))
    assert largest.name not in ran  # else this test would not tell the two apart

    def never():
        raise AssertionError("Figure 1 loaded the model although the grid's cache holds its vectors")

    name, coords, labels = figures.umap_coordinates(bench, never, None, 42, root / "cache",
                                                    identity=rows.model_identity.iloc[0], splits=ran)
    assert name == expected.name and labels == list(expected.labels) and coords.shape == (len(labels), 2)
    fig = figures.umap_figure([(f"{bench.mteb_name} / {name}", coords, labels)], "Figure 1")
    (ax,) = fig.get_axes()
    counts = pd.Series(labels).value_counts()
    plotted = {c.get_label(): c.get_offsets() for c in ax.collections}
    assert set(plotted) == set(labels)
    for label, points in plotted.items():
        mask = np.array([lab == label for lab in labels])
        assert np.array_equal(np.asarray(points), coords[mask])
    assert sorted(_legend_texts(fig)) == sorted(f"{label} ({counts[label]})" for label in counts.index)
    assert f"{len(labels)} texts" in ax.get_title()
    _inside(fig)


def test_figure1_panels_with_the_same_labels_share_one_legend(store):
    rng = np.random.default_rng(0)
    labels_a = ["x"] * 3 + ["y"] * 2
    labels_b = ["x"] * 1 + ["y"] * 4
    panels = [("A / s1", rng.normal(size=(5, 2)), labels_a), ("B / s1", rng.normal(size=(5, 2)), labels_b),
              ("C / s1", rng.normal(size=(3, 2)), ["p", "q", "r"])]
    fig = figures.umap_figure(panels, "Figure 1")
    legends = [legend for sub in fig.subfigs for legend in sub.legends]
    assert len(legends) == 2  # A and B share one, C has its own
    assert [t.get_text() for t in legends[0].get_texts()] == ["x (3 | 1)", "y (2 | 4)"]
    # Up to 56 labels keep distinct (colour, marker) pairs; yellow is never used.
    assert len({figures.style(i) for i in range(56)}) == 56 and "#F0E442" not in figures.OKABE_ITO
    _inside(fig)


# -- layer sweep and pre-training ----------------------------------------------------------------
def test_layer_plot_has_its_spread_band_and_the_whole_scale():
    from tecb_eval.layers import _summarise, layers_figure

    rows = [dict(model=f"m-layer{k}", dataset="blurbs-clustering-s2s", mteb_name="BlurbsClusteringS2S", split=f"s{i}",
                 v_measure=0.15 + 0.01 * k + 0.1 * (i % 2), ami=0.1, ari=0.1, homogeneity=0.1, completeness=0.1)
            for k in range(4) for i in range(4)]
    table = _summarise(pd.DataFrame(rows), {f"m-layer{k}": k for k in range(4)}, {k: f"id{k}" for k in range(4)})
    fig = layers_figure(table, title="m: V-measure per layer")
    (ax,) = fig.get_axes()
    (line,) = [line for line in ax.get_lines() if line.get_gid() == "line:blurbs-clustering-s2s"]
    assert list(line.get_ydata()) == pytest.approx(list(100 * table.v_measure))
    (band,) = ax.collections
    top = band.get_paths()[0].vertices[:, 1].max()
    assert top == pytest.approx(100 * (table.v_measure + table.v_measure_sd).max())
    assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] >= top
    assert any("SD over splits" in t and "4 splits" in t for t in _legend_texts(fig))
    _inside(fig)


def _evaluations(seeds, datasets=("blurbs-clustering-s2s", "tenkgnad-clustering-s2s")):
    return [dict(seed=s, step=step, epoch=step / 4, dataset=d, method="wwm",
                 v_measure=0.28 + 0.002 * step + 0.001 * s + (0.1 if d.startswith("t") else 0))
            for s in seeds for step in range(0, 9, 2) for d in datasets]


@pytest.mark.parametrize("seeds", [(42,), (42, 1, 2)])
def test_pretraining_curves_plot_the_mean_over_seeds_without_exaggeration(seeds):
    from tecb_eval.pretraining.report import curves_figure

    rows = _evaluations(seeds)
    fig = curves_figure(rows, title="WWM pre-training of m on two datasets (profile current)")
    axes = _shown_axes(fig)
    assert [ax.get_title() for ax in axes] == ["blurbs-clustering-s2s", "tenkgnad-clustering-s2s", "avg"]
    for ax in axes[:2]:
        (line,) = [line for line in ax.get_lines() if (line.get_gid() or "").startswith("line:")]
        expected = [100 * np.mean([r["v_measure"] for r in rows if r["dataset"] == ax.get_title() and r["step"] == s])
                    for s in range(0, 9, 2)]
        assert list(line.get_ydata()) == pytest.approx(expected)
        assert len(ax.collections) == (1 if len(seeds) > 1 else 0)  # the min-max band only with several seeds
    assert len({ax.get_ylim() for ax in axes}) == 1
    low, high = axes[0].get_ylim()
    assert high - low >= 10  # a 1.6-point change is not stretched over the panel
    title = _title(fig)
    assert (f"{len(seeds)} seeds" in title) if len(seeds) > 1 else ("seed 42" in title)
    assert _legend_texts(fig)
    _inside(fig)


# -- the tables' small untruths ------------------------------------------------------------------
@pytest.mark.slow
def test_an_sd_of_one_split_prints_as_a_dash_not_zero(store):
    _, frame = store
    one = frame[frame.split == sorted(frame.split.unique())[0]]
    shown = report.tables(one)
    table, note = shown["table2"]
    text = report.format_table(table, "md", note=note)
    assert "(–)" in text and "(0.00)" not in text and "one split, no spread" in note
    csv = report.format_table(table, "csv").splitlines()
    assert "sd_splits" not in csv[0]  # no spread to give: no column (as one seed has no sd_seeds)
    # Several splits keep their SD.
    assert "(–)" not in report.format_table(*report.tables(frame)["table2"][:1])


def test_fast_protocol_tables_say_the_spread_is_over_bootstrap_draws(store):
    _, frame = store
    fast = frame.assign(protocol="fast", split=frame.split.str.replace("sample", "bootstrap"))
    note = report.tables(fast)["table2"][1]
    assert "bootstrap draws" in note and "SD over those draws" in note and "mean over splits" not in note
    assert "no ranking test" in note


def test_demo_rows_keep_the_synthetic_note_when_tabulated_again(store, capsys):
    root, frame = store
    assert frame.synthetic.all()  # the grid marks the demo sample's rows
    assert main(["table", str(root / "results.jsonl")]) == 0
    assert capsys.readouterr().out.count(report.DEMO_NOTE) == 2
    # Rows written before the field existed: their dataset folder's manifest says it.
    old = frame.drop(columns="synthetic")
    assert report.synthetic_datasets(old) == ["TenKGnadClusteringS2S", "TenKGnadClusteringP2P"]
    assert report.synthetic_datasets(old.assign(dataset_location="/nowhere")) == []


def test_compare_table_has_p_and_holds(store, capsys):
    root, _ = store
    assert main(["compare", str(root / "results.jsonl"), "--model", "minilm-l6", "--model", "tfidf-lsa"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("| dataset"))
    assert header.split(" | ")[-2:] == ["p", "holds |"]
    rows = [line for line in out.splitlines() if line.startswith("| TenKGnad")]
    for line in rows:
        p, holds = [c.strip() for c in line.strip("|").split("|")][-2:]
        # 3 splits: the exact sign-flip p is a multiple of 1/4, and no ranking can hold.
        assert math.isclose(float(p) * 4, round(float(p) * 4)) and holds == "no"


def test_figure1_never_loads_the_model_when_the_grid_cached_it(store, tmp_path):
    """`figure1` with the grid's rows: a model that can no longer be loaded (its folder is gone) still
    gets its Figure 1, from the cached vectors and UMAP, on the splits the grid ran."""
    from tecb_eval.reports.export import figure1

    root, frame = store
    gone = tmp_path / "models" / "gone-model"
    rows = frame[frame.model == "minilm-l6"].assign(model="gone-model")
    datasets = [root / "data" / "tenkgnad-clustering-s2s", root / "data" / "tenkgnad-clustering-p2p"]
    path = figure1(datasets, str(gone), tmp_path, cache_dir=root / "cache", frame=rows)
    assert path == tmp_path / "figure1-gone-model.png" and path.read_bytes()[:4] == b"\x89PNG"
    # Without the rows it has to load the model, and says the folder is missing.
    from tecb_data.errors import UserError

    with pytest.raises((UserError, OSError)):
        figure1(datasets, str(gone), tmp_path / "again", cache_dir=root / "cache")


def test_a_single_panel_with_a_long_title_keeps_it_inside():
    from tecb_eval.pretraining.report import curves_figure

    rows = [r for r in _evaluations((42,)) if r["dataset"] == "blurbs-clustering-s2s"]
    title = "WWM pre-training of deepset/gbert-base truncated at layer 8 of 12 on blurbs-clustering-s2s (profile paper)"
    fig = curves_figure(rows, title=title)
    assert " ".join(_title(fig).split()).startswith(title)  # wrapped, every word kept
    _inside(fig)


def test_fast_protocol_dots_have_the_tables_sd_over_draws_and_no_ranking(store):
    _, frame = store
    fast = frame.assign(protocol="fast", split=frame.split.str.replace("sample", "bootstrap"))
    fig = figures.table2_figure(fast)
    table = report.table2(fast, stats=True)
    for ax in _shown_axes(fig):
        for container in ax.containers:
            model = container.lines[0].get_gid()[4:]
            (start, _), (end, _) = container.lines[2][0].get_segments()[0]
            assert (end - start) / 2 == pytest.approx(100 * table.at[model, (ax.get_title(), "sd_splits")])
    legend = _legend_texts(fig)
    assert "not ranked against the best (the draws give no test)" in legend
    assert not any("the gap" in text for text in legend)
    assert "bootstrap draws per dataset" in _title(fig)
    _inside(fig)


def test_a_one_dataset_legend_names_no_dataset():
    assert figures.legend_title(["BlurbsClusteringS2S"]) == "label (texts)"
    assert figures.legend_title(["BlurbsClusteringS2S", "BlurbsClusteringP2P"]) == \
        "label (texts: BlurbsClusteringS2S | BlurbsClusteringP2P)"
