"""What a published dataset folder holds, made from a build's splits: its card, clustering rows,
sample table and manifest (:func:`prepare`), and one build's folders written together
(:func:`publish_all`). Every source's build ends here: the file sources', the table's and Reddit's.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tecb_data import layout
from tecb_data.card import render_card
from tecb_data.recipes import (MEMBERS_PAIRED, RECIPES, UNLABELLED_LEVEL, DatasetSpec, Item, Recipe, Split,
                               label_counts)
from tecb_data.stats import table1
from tecb_data.version import __version__


def split_texts(split: Split, items: dict[str, Item], view: str) -> list[str]:
    return [items[i].views[view] for i in split.ids]


def label_path(item: Item, hierarchy) -> list[str]:
    """The item's labels down the recipe's ``hierarchy`` of levels (``["top", "fine"]``), to its
    deepest labelled level."""
    path = []
    for level in hierarchy:
        if not item.labels.get(level):
            break
        path.append(item.labels[level])
    return path


def _clustering_rows(splits: list[Split], items: dict[str, Item], view: str, hierarchy=()):
    for split in splits:
        row = {"sentences": split_texts(split, items, view)}
        if split.level != UNLABELLED_LEVEL:
            # A corpus without labels has no "labels" column: an empty or made-up one would be scored.
            row["labels"] = list(split.labels)
        if hierarchy:
            # Beside "labels", which MTEB reads: its loaders ignore a column they do not name.
            row["label_paths"] = [label_path(items[i], hierarchy) for i in split.ids]
        yield layout.json_line(row)


def _sample_rows(splits: list[Split], items: dict[str, Item], view: str):
    for split in splits:
        for item_id, label in zip(split.ids, split.labels or [None] * len(split.ids)):
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
    synthetic: bool,
    extra_files: dict | None = None,
    data_files: dict | None = None,
    manifest_extra: dict | None = None,
    paired: bool = False,
    recipe: Recipe | None = None,
    card_context: dict | None = None,
) -> layout.Dataset:
    """One dataset folder's contents (card, clustering rows, sample table, manifest), to be written
    with :func:`publish_all` together with the other views of the same build.

    ``data_files`` replaces the clustering rows and sample table (for a dataset without texts, such as
    reddit-clustering-ids); ``manifest_extra`` adds top-level manifest fields. ``paired`` says the
    splits are shared with the source's other views, against the recipe's default ``members``.
    ``recipe`` is the recipe object of a build whose recipe has parameters (a table build), and
    ``card_context`` more values for the card's template. ``synthetic`` says the records come from the
    embedded demo sample (:func:`tecb_data.demo.is_demo_records`): the card's first line and the
    manifest say so, and from the manifest every row, table, figure and push.
    """
    recipe = recipe or RECIPES[spec.recipe]
    if paired:
        # As a recipe parameter, the choice reaches the manifest's recipe entry and the card's template.
        recipe = dataclasses.replace(recipe, params={**recipe.params, "members": MEMBERS_PAIRED})
    stats = table1((split_texts(s, items, spec.view), s.labels) for s in splits)
    split_entries = [
        {"name": s.name, "level": s.level, "size": len(s.ids), "labels": label_counts(s)} for s in splits
    ]

    input_entries = sorted(
        ({"name": i.name, "sha256": i.sha256, "bytes": i.bytes} for i in inputs),
        key=lambda i: (i["name"], i["sha256"]),
    )

    def card(data_hashes: dict[str, str]) -> list[str]:
        return [render_card(spec, recipe, version=__version__, seed=seed, stats=stats, splits=split_entries,
                            data_digest=layout.fingerprint(data_hashes), extra=card_context, synthetic=synthetic)]

    if data_files is None:
        data_files = {
            layout.DATA_FILE: _clustering_rows(splits, items, spec.view, recipe.params.get("hierarchy", ())),
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
        "inputs": input_entries,
        **({"synthetic": True} if synthetic else {}),
        "splits": split_entries,
        "statistics": stats,
        "report": report,
        **(manifest_extra or {}),
    }
    return layout.Dataset(spec.name, files, manifest)


def publish_all(out: Path, datasets: list[layout.Dataset]) -> list[tuple[Path, dict]]:
    """Write every dataset of one build and publish them together: all of them or none."""
    return [(folder, layout.read_manifest(folder)) for folder in layout.write_datasets(Path(out), datasets)]
