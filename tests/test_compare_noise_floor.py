"""`compare` and UMAP's noise floor: a difference no larger than what a 1e-7 move of the vectors
gives through a configuration (the registry's floor, measured by bench/bench_reduction_noise_floor.py)
is never a win, however consistent over the splits; the manual gives the figure where it compares
models. Frames are built by hand; the floor is read from the registry, never recomputed here."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from tecb_eval.clustering import registry
from tecb_eval.reports import compare

DATASET = "BlurbsClusteringS2S"


def frame(algorithm: str, reduction: str, lead: float) -> pd.DataFrame:
    """Models a and b on 10 splits, a ahead of b by ``lead`` on every split (a consistent lead)."""
    rows = []
    for i in range(10):
        base = 0.30 + 0.01 * (i % 4)
        for model, value in (("a", base + lead), ("b", base)):
            rows.append({"model": model, "mteb_name": DATASET, "algorithm": algorithm, "reduction": reduction,
                         "split": f"s{i:02d}", "seed": 42, "v_measure": value, "protocol": "legacy"})
    return pd.DataFrame(rows)


def test_umap_has_a_floor_and_the_embeddings_none():
    assert registry.noise_floor("minibatch_kmeans", "umap") > 0
    assert registry.noise_floor("hdbscan", "umap") > 0
    assert registry.noise_floor(*registry.TABLE2_CONFIGURATION) == 0
    assert all(a in registry.ALGORITHMS and r in registry.REDUCTIONS for a, r in registry.NOISE_FLOORS)


def test_a_consistent_lead_inside_umaps_floor_is_not_a_win():
    floor = registry.noise_floor("minibatch_kmeans", "umap")
    (result,) = compare.compare(frame("minibatch_kmeans", "umap", floor * 0.9), "a", "b",
                                algorithm="minibatch_kmeans", reduction="umap", resamples=999)
    assert result.low > 0 and result.p_value < 0.05  # the paired test alone would call it a win
    assert not result.holds and result.record()["holds"] is False
    assert "noise floor" in result.sentence() and "not a win" in result.sentence()
    assert f"{100 * floor:.2f} points" in result.sentence()


def test_the_same_lead_holds_on_the_embeddings_and_a_lead_past_the_floor_holds_through_umap():
    floor = registry.noise_floor("minibatch_kmeans", "umap")
    (plain,) = compare.compare(frame("minibatch_kmeans", "none", floor * 0.9), "a", "b", resamples=999)
    assert plain.holds and plain.sentence().endswith("the ranking holds.")
    (past,) = compare.compare(frame("minibatch_kmeans", "umap", floor * 2), "a", "b",
                              algorithm="minibatch_kmeans", reduction="umap", resamples=999)
    assert past.holds


def test_the_compare_table_has_the_floor_column():
    results = compare.compare(frame("hdbscan", "umap", 0.001), "a", "b", algorithm="hdbscan", reduction="umap",
                              resamples=999)
    table = compare.comparison_table(results)
    assert table.loc[DATASET, "floor"] == pytest.approx(registry.noise_floor("hdbscan", "umap"))
    assert not table.loc[DATASET, "holds"]


def test_the_manual_gives_each_floor_where_it_compares_models():
    from helpers import REPO

    page = (REPO / "docs" / "comparing.md").read_text(encoding="utf-8")
    assert "bench/bench_reduction_noise_floor.py" in page
    shown = {tuple(m[0].split(":")): tuple(map(float, m[1:4]))
             for m in re.findall(r"\| `(\w+:[\w+]+)` \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|", page)}
    assert set(shown) == set(registry.NOISE_FLOORS)
    for (algorithm, reduction), figures in shown.items():
        assert figures == tuple(round(100 * registry.noise_floor(algorithm, reduction, m), 2)
                                for m in ("v_measure", "ami", "ari")), (algorithm, reduction)
