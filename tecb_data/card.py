"""Rendering dataset cards from the templates in cards/ (shipped as the package tecb_data.cards)."""

from __future__ import annotations

from importlib import resources

import jinja2

from tecb_data.recipes import BENCHMARK_CITATION, DatasetSpec, Recipe
from tecb_data.stats import markdown_table, size_category


def _environment() -> jinja2.Environment:
    loader = jinja2.FunctionLoader(
        lambda name: resources.files("tecb_data.cards").joinpath(name).read_text(encoding="utf-8")
    )
    return jinja2.Environment(loader=loader, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


def render_card(spec: DatasetSpec, recipe: Recipe, *, version: str, seed: int, stats: dict, splits: list[dict]) -> str:
    template = _environment().get_template(spec.card_template)
    return template.render(
        spec=spec,
        recipe=recipe,
        version=version,
        seed=seed,
        stats_table=markdown_table(stats),
        size_category=size_category(stats["samples"]),
        splits=splits,
        benchmark_citation=BENCHMARK_CITATION,
    )
