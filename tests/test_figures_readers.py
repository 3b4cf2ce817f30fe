"""Figures a reader trusts: Figure 1's labels keep their own colours and its dense points
show their overlap; the layer plot keeps its labels inside its axes and promises no band it does
not draw; synthetic data say so in the layer sweep's outputs. (Table 3 beside the paper only like
with like: tests/test_figures.py.)"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from tecb_eval.reports import figures


def test_figure1_gives_twenty_labels_twenty_colours_and_lets_dense_points_overlap():
    rng = np.random.default_rng(0)
    names = [f"genre {i:02d}" for i in range(25)]
    labels = [names[i] for i in rng.integers(0, 25, 1500)]
    fig = figures.umap_figure([("Blurbs / fine_1", rng.normal(size=(1500, 2)), labels)], "Figure 1")
    (ax,) = fig.get_axes()
    drawn = ax.collections
    colours = [tuple(np.round(c.get_facecolor()[0][:3], 4)) for c in drawn]
    assert len(set(colours[:20])) == 20  # no colour repeats before the 21st label
    styles = {(colour, c.get_paths()[0].vertices.round(3).tobytes()) for colour, c in zip(colours, drawn)}
    assert len(styles) == 25  # past twenty the marker tells them apart
    assert all(c.get_alpha() <= 0.5 for c in drawn)  # 1,500 points: translucent
    legend = fig.subfigs[0].legends[0]
    assert all(h.get_alpha() == 1 for h in legend.legend_handles)  # the key stays readable
    few = figures.umap_figure([("A / s", rng.normal(size=(40, 2)), ["x", "y"] * 20)], "Figure 1")
    assert {tuple(c.get_facecolor()[0][:3]) for c in few.get_axes()[0].collections} == {
        tuple(int(h[i:i + 2], 16) / 255 for i in (1, 3, 5)) for h in figures.OKABE_ITO[:2]}


def _table(splits: dict[str, int], best_last: bool = True):
    from tecb_eval.layers import _summarise

    rows = [dict(model=f"m-layer{k}", dataset=d, mteb_name=d, split=f"s{i}",
                 v_measure=0.15 + 0.03 * (k if best_last else 6 - k) + 0.1 * (i % 2), ami=0.1, ari=0.1,
                 homogeneity=0.1, completeness=0.1)
            for d, n in splits.items() for k in range(7) for i in range(n)]
    return _summarise(pd.DataFrame(rows), {f"m-layer{k}": k for k in range(7)}, {k: f"id{k}" for k in range(7)})


@pytest.mark.parametrize("best_last", [True, False], ids=["best-last-layer", "best-first-layer"])
def test_layer_plot_keeps_its_best_layer_label_inside_its_axes(best_last):
    from tecb_eval.layers import layers_figure

    fig = layers_figure(_table({"blurbs-clustering-s2s": 3, "tenkgnad-clustering-s2s": 3}, best_last), title="m")
    (ax,) = fig.get_axes()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = ax.get_window_extent(renderer)
    labels = [t for t in ax.texts if str(t.get_gid()).startswith("best:")]
    assert len(labels) == 2
    for text in labels:
        inner = text.get_window_extent(renderer)
        assert box.x0 <= inner.x0 and inner.x1 <= box.x1 and box.y0 <= inner.y0 and inner.y1 <= box.y1, text.get_text()
    first, second = (t.get_window_extent(renderer) for t in labels)
    assert not first.overlaps(second)


def test_layer_plot_promises_no_band_over_one_split():
    from tecb_eval.layers import layers_figure

    fig = layers_figure(_table({"blurbs-clustering-s2s": 1}), title="m")
    (ax,) = fig.get_axes()
    assert len(ax.collections) == 0  # no band
    (text,) = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert "one split: no band" in text and "± SD" not in text


def test_layer_sweep_on_demo_data_says_synthetic_in_its_summary_and_figure_title(blurbs, tiny_bert, tmp_path,
                                                                                    monkeypatch):
    import tecb_eval
    from tecb_eval import layers
    from tecb_eval.reports.tables import DEMO_NOTE, DEMO_TITLE

    bench = dataclasses.replace(blurbs, splits=blurbs.splits[:2])
    model = tiny_bert
    titles = []
    real = layers.plot_layers
    monkeypatch.setattr(layers, "plot_layers", lambda table, path, *, title: titles.append(title) or real(
        table, path, title=title))
    tecb_eval.layer_sweep(str(model), [bench], output_dir=tmp_path / "out", cache_dir=tmp_path / "cache",
                          progress=False, log=lambda message: None)
    summary = (tmp_path / "out" / layers.SUMMARY_MD).read_text(encoding="utf-8")
    assert summary.startswith(DEMO_NOTE)
    assert titles and titles[0].endswith(DEMO_TITLE)


def test_table2_promises_no_whiskers_over_one_split():
    pd_rows = [dict(model=m, mteb_name=d, dataset=d.lower(), algorithm="minibatch_kmeans", reduction="none",
                    split="s0", seed=42, v_measure=v, protocol="legacy", profile="current", dataset_splits=10,
                    dataset_fingerprint=d, model_identity=m)
               for d in ("BlurbsClusteringS2S",) for m, v in (("a", 0.3), ("b", 0.2))]
    fig = figures.table2_figure(pd.DataFrame(pd_rows))
    title = " ".join(fig._suptitle.get_text().split())  # as wrapped to the figure's width
    assert "no interval over one split" in title and "bootstrap interval" not in title
