"""Source -> selection -> seeded splits -> one published folder per text view."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Callable

from tqdm.auto import tqdm

from tecb_data import layout
from tecb_data.card import render_card
from tecb_data.errors import UserError
from tecb_data.recipes import (
    DATASETS,
    MEMBERS_PAIRED,
    RECIPES,
    DatasetSpec,
    Item,
    Split,
    datasets_of,
    label_counts,
)
from tecb_data.sources import SourceResult, blurbs, tenkgnad
from tecb_data.stats import table1
from tecb_data.version import __version__

READERS: dict[str, Callable[..., SourceResult]] = {"blurbs": blurbs.read, "tenkgnad": tenkgnad.read}
DEFAULT_SEED = 42


def split_texts(split: Split, items: dict[str, Item], view: str) -> list[str]:
    return [items[i].views[view] for i in split.ids]


def _clustering_rows(splits: list[Split], items: dict[str, Item], view: str):
    for split in splits:
        yield layout.json_line({"sentences": split_texts(split, items, view), "labels": list(split.labels)})


def _sample_rows(splits: list[Split], items: dict[str, Item], view: str):
    for split in splits:
        for item_id, label in zip(split.ids, split.labels):
            item = items[item_id]
            yield layout.json_line(
                {"id": item_id, "split": split.name, "text": item.views[view], "label": label, "path": list(item.path)}
            )


def prepare(
    spec: DatasetSpec,
    splits: list[Split],
    items: dict[str, Item],
    *,
    seed: int,
    inputs: list,
    report: dict,
    extra_files: dict | None = None,
    data_files: dict | None = None,
    manifest_extra: dict | None = None,
    paired: bool = False,
) -> layout.Dataset:
    """One dataset folder's contents (card, clustering rows, sample table, manifest), to be written
    with :func:`publish_all` together with the other views of the same build.

    ``data_files`` replaces the clustering rows and sample table (for a dataset without texts, such as
    reddit-clustering-ids); ``manifest_extra`` adds top-level manifest fields. ``paired`` says the
    splits are shared with the source's other views, against the recipe's default ``members``.
    """
    recipe = RECIPES[spec.recipe]
    if paired:
        # As a recipe parameter, the choice reaches the manifest's recipe entry and the card's template.
        recipe = dataclasses.replace(recipe, params={**recipe.params, "members": MEMBERS_PAIRED})
    stats = table1((split_texts(s, items, spec.view), s.labels) for s in splits)
    split_entries = [
        {"name": s.name, "level": s.level, "size": len(s.ids), "labels": label_counts(s)} for s in splits
    ]

    def card(data_hashes: dict[str, str]) -> list[str]:
        return [render_card(spec, recipe, version=__version__, seed=seed, stats=stats, splits=split_entries,
                            data_digest=layout.fingerprint(data_hashes))]

    if data_files is None:
        data_files = {
            layout.DATA_FILE: _clustering_rows(splits, items, spec.view),
            layout.SAMPLES_FILE: _sample_rows(splits, items, spec.view),
        }
    files = {layout.CARD: card, **data_files, **(extra_files or {})}
    manifest = {
        "dataset": spec.name,
        "source": spec.source,
        "view": spec.view,
        "mteb_name": spec.mteb_name,
        "publishable": spec.publishable,
        "package_version": __version__,
        "seed": seed,
        "recipe": {"name": recipe.name, "version": recipe.version, **recipe.params},
        "inputs": sorted(
            ({"name": i.name, "sha256": i.sha256, "bytes": i.bytes} for i in inputs),
            key=lambda i: (i["name"], i["sha256"]),
        ),
        "splits": split_entries,
        "statistics": stats,
        "report": report,
        **(manifest_extra or {}),
    }
    return layout.Dataset(spec.name, files, manifest)


def publish_all(out: Path, datasets: list[layout.Dataset]) -> list[tuple[Path, dict]]:
    """Write every dataset of one build and publish them together: all of them or none."""
    return [(folder, layout.read_manifest(folder)) for folder in layout.write_datasets(Path(out), datasets)]


def publish(spec: DatasetSpec, splits: list[Split], items: dict[str, Item], *, out: Path, **options) -> tuple[Path, dict]:
    """Write one dataset folder on its own (see :func:`prepare` for the options)."""
    return publish_all(out, [prepare(spec, splits, items, **options)])[0]


def build(
    source: str,
    input_path: Path,
    out: Path,
    *,
    seed: int = DEFAULT_SEED,
    views: tuple[str, ...] | None = None,
    paired: bool = False,
    progress: bool = False,
) -> list[tuple[Path, dict]]:
    """Build every dataset of ``source`` (or only ``views``) from ``input_path`` into ``out``.

    Each text view draws its own split members (same split sizes), as the published datasets did;
    ``paired`` draws one set of members for all views instead (the data of recipe version 1).
    """
    if source == "reddit":  # no source files: the ids are rehydrated through Reddit's API
        raise UserError("reddit is built from submission ids: `tecb-data build --source reddit --ids PATH_OR_URL` "
                        "or tecb_data.sources.reddit.build_from_ids")
    if source not in READERS:
        raise UserError(f"unknown source {source!r}; choose one of {', '.join(sorted(READERS))}")
    if seed < 0:
        raise UserError(f"--seed must be a non-negative integer, got {seed}")
    layout.check_out(Path(out))
    with tqdm(desc=f"reading {source} records", unit=" records", disable=None if progress else True) as bar:
        result = READERS[source](Path(input_path), progress=bar)
    wanted = views or result.views
    missing = [v for v in wanted if v not in result.views]
    if missing:
        raise UserError(
            f"{input_path}: this input cannot build the {'/'.join(missing).upper()} view "
            f"(it has no titles: a 10kGNAD csv holds only subheadline and body); "
            f"it can build: {', '.join(result.views)}; pass corpus.sqlite3 for both"
        )
    recipe = RECIPES[source]
    specs = [spec for spec in datasets_of(source) if spec.view in wanted]
    shared = recipe.make_splits(result.items, seed) if paired else None
    # Every view's splits before any folder is written: a view without splits fails the whole build.
    splits = {spec.view: shared if paired else recipe.make_splits(result.items, seed, view=spec.view) for spec in specs}
    if not all(splits.values()):
        raise UserError(f"{input_path}: too few labelled records to make any split with two or more labels")
    items = {item.id: item for item in result.items}
    prepared = [
        prepare(spec, splits[spec.view], items, seed=seed, inputs=result.inputs,
                report=result.report, paired=paired)
        for spec in specs
    ]
    if progress:
        print(f"writing {', '.join(spec.name for spec in specs)} into {out}", file=sys.stderr)
    return publish_all(Path(out), prepared)


def dataset_spec(name: str) -> DatasetSpec:
    if name not in DATASETS:
        raise UserError(f"unknown dataset {name!r}; known: {', '.join(sorted(DATASETS))}")
    return DATASETS[name]
