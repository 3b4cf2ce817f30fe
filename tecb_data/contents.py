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


class _Encoded:
    """Each item's id, path and text in ``view``, JSON-encoded once: an item is in many splits, and
    encoding its text anew for every row was most of the time a build spent writing its files."""

    def __init__(self, items: dict[str, Item], view: str):
        self.items, self.view = items, view
        self._parts: dict[str, tuple[str, str, str]] = {}
        self._values: dict = {}

    def parts(self, item_id: str) -> tuple[str, str, str]:
        parts = self._parts.get(item_id)
        if parts is None:
            item = self.items[item_id]
            parts = self._parts[item_id] = (layout.json_value(item_id), layout.json_value(list(item.path)),
                                            layout.json_value(item.views[self.view]))
        return parts

    def value(self, value) -> str:
        """A label or split name (few distinct values, many rows)."""
        encoded = self._values.get(value)
        if encoded is None:
            encoded = self._values[value] = layout.json_value(value)
        return encoded


def _json_object_line(fields: dict[str, str]) -> str:
    """The line :func:`layout.json_line` writes for an object whose values are already encoded: keys
    sorted, no spaces, the same bytes."""
    return "{" + ",".join(f"{layout.json_value(key)}:{fields[key]}" for key in sorted(fields)) + "}\n"


def _clustering_rows(splits: list[Split], items: dict[str, Item], view: str, hierarchy=(), encoded=None):
    encoded = encoded or _Encoded(items, view)
    for split in splits:
        row = {"sentences": "[" + ",".join(encoded.parts(i)[2] for i in split.ids) + "]"}
        if split.level != UNLABELLED_LEVEL:
            # A corpus without labels has no "labels" column: an empty or made-up one would be scored.
            row["labels"] = layout.json_value(list(split.labels))
        if hierarchy:
            # Beside "labels", which MTEB reads: its loaders ignore a column they do not name.
            row["label_paths"] = layout.json_value([label_path(items[i], hierarchy) for i in split.ids])
        yield _json_object_line(row)


def _sample_rows(splits: list[Split], items: dict[str, Item], view: str, encoded=None):
    encoded = encoded or _Encoded(items, view)
    for split in splits:
        name = encoded.value(split.name)
        for item_id, label in zip(split.ids, split.labels or [None] * len(split.ids)):
            item_json, path, text = encoded.parts(item_id)
            # The keys of layout.json_line's {"id", "split", "text", "label", "path"}, in its sorted order.
            yield f'{{"id":{item_json},"label":{encoded.value(label)},"path":{path},"split":{name},"text":{text}}}\n'


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
        encoded = _Encoded(items, spec.view)
        data_files = {
            layout.DATA_FILE: _clustering_rows(splits, items, spec.view, recipe.params.get("hierarchy", ()), encoded),
            layout.SAMPLES_FILE: _sample_rows(splits, items, spec.view, encoded),
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
