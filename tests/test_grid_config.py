"""The grid's options as one checked object: `GridConfig` is made once (by `tecb-eval run` or by
`run_grid` from its keywords), holds every option checked, and is what the plan and the grid read.
A cluster setting travels as a typed `Setting`; its text is made for a row and read back by the store."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from tecb_data.errors import UserError
from tecb_eval.clustering.cluster_counts import Setting, setting_name
from tecb_eval.grid.plan import GridConfig
from tecb_eval.grid.run import run_grid
from tecb_eval.grid.store import read_setting

# run_grid's keywords that are not options of the grid: what it runs on, where rows go, who hears it.
NOT_OPTIONS = {"datasets", "results", "log", "stability_ranking"}


def test_every_run_grid_keyword_is_one_field_of_the_config():
    keywords = set(inspect.signature(run_grid).parameters) - NOT_OPTIONS
    fields = {f.name for f in dataclasses.fields(GridConfig) if f.init}
    assert keywords == fields


def test_a_config_holds_its_options_checked():
    config = GridConfig(models=["tfidf-lsa"], configurations=["minibatch_kmeans:pca", "hdbscan:pca"], seed=7,
                        k="3:9:3", min_cluster_size=[10, 5], limit_splits=0, metrics=["dbcv", " "],
                        memory_limit="1GiB", cache_dir="cache")
    assert [spec.name for spec in config.models] == ["tfidf-lsa"]
    assert config.configurations == (("minibatch_kmeans", "pca"), ("hdbscan", "pca"))
    assert (config.seeds, config.seed) == ((7,), None)
    assert (config.k, config.min_cluster_size, config.limit_splits) == ((3, 6, 9), (5, 10), None)
    assert config.metrics == ("dbcv",) and config.memory_limit == 2**30 and config.cache_dir.name == "cache"
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.k = (4,)


def test_the_paper_s_skipped_configurations_are_named_by_the_config():
    config = GridConfig(models=["tfidf-lsa"], algorithms=["hdbscan"], reductions=["none", "pca"])
    assert config.configurations == (("hdbscan", "pca"),) and config.skipped == (("hdbscan", "none"),)


@pytest.mark.parametrize("options, says", [
    ({}, "no models given"),
    ({"models": ["tfidf-lsa"], "protocol": "slow"}, "unknown protocol 'slow'"),
    ({"models": ["tfidf-lsa"], "seed": 1, "seeds": [1, 2]}, "given together"),
    ({"models": ["tfidf-lsa"], "k": "9:3"}, "--k '9:3': an empty range"),
    ({"models": ["tfidf-lsa"], "encode_on": "gpu"}, "give --scheduler"),
    ({"models": ["tfidf-lsa"], "stability_fraction": 0}, "--stability-fraction 0"),
    ({"models": ["tfidf-lsa"], "time_limit": -1}, "--time-limit -1"),
    ({"models": ["tfidf-lsa"], "profile": "yesterday"}, "unknown profile 'yesterday'"),
])
def test_a_wrong_option_is_one_line_when_the_config_is_made(options, says):
    with pytest.raises(UserError, match=says):
        GridConfig(**options)


def test_a_setting_is_named_in_a_row_and_read_back_by_the_store():
    assert setting_name(Setting("k", 10)) == "k=10" and setting_name(None) == ""
    assert read_setting("min_cluster_size=15") == Setting("min_cluster_size", 15)
    assert read_setting("") is None and read_setting(None) is None
    for setting in (Setting("k", 2), Setting("min_cluster_size", 200), None):
        assert read_setting(setting_name(setting)) == setting
