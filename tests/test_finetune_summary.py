"""What `tecb-eval finetune`'s summary and figure say: the untrained model named as such at step 0,
only the methods asked for, no interval over fewer than 2 splits ("–"), the figure's tracked
V-measure labelled apart from the table's score, no band promised over one fold, the synthetic
mark on demo data, and no "held out: None" for a transfer fold."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from tecb_eval.finetuning import report
from tecb_eval.finetuning.report import METRICS

SETTINGS = {"lambda": 90.0, "reg": 1.0, "triple_fraction": 25, "kmeans_seed": 42}
FOLDS = [{"id": "fold-01", "fold": "Kinderbuch", "held_out_genre": "Kinderbuch", "validation_genre": "Sachbuch",
          "train_texts": 100, "train_labels": 5}]


def _summary(methods, splits: int) -> list[dict]:
    return [{"dataset": "BlurbsClusteringS2S", "method": m, "metric": column, "mean": 0.314, "low": 0.2, "high": 0.4,
             "splits": splits, "pairs": splits} for m in ["none", *methods] for column, _, _ in METRICS]


def _markdown(methods, splits=3, **kwargs) -> str:
    compared = [{"dataset": "BlurbsClusteringS2S", "metric": METRICS[0][0], "model_a": m, "model_b": "none",
                 "difference": 0.01, "low": -0.02, "high": 0.03, "p_value": 0.5, "splits": splits, "seeds": 1,
                 "holds": False} for m in methods]
    return report.markdown(_summary(methods, splits), compared, model="tiny", protocol="leave-one-genre-out",
                           folds=FOLDS, settings=SETTINGS, seeds=(42,), score_seeds=(42, 1, 2), **kwargs)


def test_an_interval_over_one_split_is_a_dash():
    one = _markdown(["cob"], splits=1)
    assert "31.40 [–]" in one and "[20.00, 40.00]" not in one
    (row,) = [line for line in one.splitlines() if line.startswith("| BlurbsClusteringS2S | cob - none")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[4] == "–" and cells[5] == "–" and cells[7] == "n/a", row  # interval, p, holds
    three = _markdown(["cob"], splits=3)
    assert "31.40 [20.00, 40.00]" in three


def test_only_the_methods_asked_for_are_listed_and_described():
    text = _markdown(["cob"])
    methods = [line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| ") and "---" not in line
               and not line.startswith("| method") and not line.startswith("| dataset") and "BlurbsClustering" not in line]
    assert methods == ["none", "cob"], methods
    described = text[text.index("Methods:"):]
    assert "cob =" in described and "triplet" not in described and "contrastive" not in described
    assert "reg-only" not in described and "cob-r0" not in described


def test_at_step_0_the_method_is_said_to_be_the_untrained_model():
    text = _markdown(["cob"], untrained=("cob",))
    (row,) = [line for line in text.splitlines() if line.startswith("| cob")]
    assert "untrained" in row
    assert "the same model as `none`" in text
    assert "untrained" not in _markdown(["cob"]).split("Folds:")[0]


def test_the_summary_says_what_the_figure_tracks_and_the_demo_mark_comes_first():
    text = _markdown(["cob"], demo_note="Synthetic demo data: NOT comparable.")
    assert text.startswith("Synthetic demo data")
    assert "k-means seed 42" in text and "figure" in text  # the figure's number is another number


def _curves(folds: int) -> pd.DataFrame:
    return pd.DataFrame([{"method": "cob", "fold": f"fold-{f:02d}", "seed": 42, "step": step, "epoch": step / 4,
                          "validation_ari": 0.1 + 0.01 * step + 0.02 * f, "scored_v_measure": 0.4156 + 0.001 * f}
                         for f in range(folds) for step in range(0, 4)])


@pytest.mark.parametrize("folds", [1, 2])
def test_the_figure_labels_its_tracked_v_measure_and_draws_a_band_only_over_several_folds(folds, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figures = []
    real = report.figures.save_figure
    report.figures.save_figure = lambda fig, path: figures.append(fig) or real(fig, path)
    try:
        report.plot(_curves(folds), "fine-tuning tiny", tmp_path / "figure.png", kmeans_seed=42)
    finally:
        report.figures.save_figure = real
    (fig,) = figures
    left, right = fig.get_axes()
    assert "tracked" in right.get_ylabel() and "seed 42" in right.get_ylabel()
    legend = right.get_legend()
    title = legend.get_title().get_text()
    if folds == 1:
        assert len(right.collections) == 0 and "interval" not in title and "no band" in title, title
    else:
        assert len(right.collections) == 1 and "band" in title, title
    plt.close(fig)


@pytest.mark.slow
def test_a_transfer_fold_does_not_say_held_out_none(tiny_bert, blurbs_folder, demo_datasets, tmp_path):
    from tecb_eval.finetuning import finetune

    tenkgnad = demo_datasets / "tenkgnad-clustering-s2s"
    done = finetune(str(tiny_bert), [blurbs_folder, tenkgnad], method="cob", protocol="transfer", seeds=(42,),
                    score_seeds=(42,), output_dir=tmp_path / "out", progress=False, resamples=99, max_steps=1,
                    instance_size=20)
    summary = (done.output_dir / "summary.md").read_text(encoding="utf-8")
    assert "None" not in summary and "held out" not in summary.split("Folds: ")[1].split("\n")[0]
