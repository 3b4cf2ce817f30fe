"""A model as a grid row names it: what to encode with (a built-in name, a folder, a Hub id, an
encoder object), the name tables show, and its options; and how a run opens and finds it.

The grid, the exports and training's live evaluation share these, so a model is read the same way
wherever it is named.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field

from tecb_data.errors import UserError
from tecb_eval.models import encoders, registry


@dataclass(frozen=True)
class ModelSpec:
    """One grid row: what to encode with, and under which name tables show it."""

    spec: object  # built-in name, folder, Hub id, or an encoder object
    name: str
    options: dict = field(default_factory=dict)  # layer, max_length, batch_size, device, ...
    # A model folder's fingerprint as the coordinator read its files, where a Dask worker opens it:
    # a worker keeps and checks its copy by what the model is, never by its path alone.
    files: str = ""


def model_spec(item) -> ModelSpec:
    """Accepts a spec, (name, spec), a dict {spec, name, layer, ...} or a ModelSpec; a name with a
    control character (a newline would split a table's row or a snippet's line) is refused."""
    spec = _named(item)
    if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in spec.name):
        raise UserError(f"model name {spec.name!r}: holds a control character (a newline, a tab); give the model "
                        "a plain name with ,name=NAME (a folder: rename it, or name it so)")
    return spec


def _named(item) -> ModelSpec:
    if isinstance(item, ModelSpec):
        return item
    if isinstance(item, tuple) and len(item) == 2:
        return ModelSpec(item[1], str(item[0]))
    if isinstance(item, dict):
        options = {k: v for k, v in item.items() if k not in ("spec", "name")}
        name = item.get("name") or encoders.display_name(item["spec"])
        if "layer" in options and "name" not in item:
            name = f"{name}-layer{options['layer']}"
        if "name" not in item:
            name += encoders.name_suffix(options)  # a prompt, backend or dtype: its own row in the tables
        return ModelSpec(item["spec"], name, options)
    return ModelSpec(item, encoders.display_name(item))


@dataclass
class ModelRun:
    """One model opened for a run: its encoder, and per dataset the encoder fitted or bound to it."""

    spec: ModelSpec
    encoder: object
    dataset_encoders: dict = field(default_factory=dict)  # dataset fingerprint -> fitted encoder


def open_model(spec: ModelSpec, seed: int) -> ModelRun:
    """``spec``'s encoder, seeded by ``seed`` (a grid's smallest seed) where it takes one."""
    return ModelRun(spec, encoders.get_encoder(spec.spec, **{"seed": seed, **spec.options}))


def known_identity(spec: ModelSpec) -> str | None:
    """The identity opening ``spec`` would give, told from its files without loading it (its kind
    says how); None where only opening it tells."""
    return registry.identity_from_files(spec.spec, dict(spec.options))


def find_model(spec) -> None:
    """Make sure a model named by text is there to load: the built-in one's package, or the Hub
    model in huggingface_hub's cache (downloaded now if the Hub can be reached). Loading the
    weights waits for the model's turn; this only finds them."""
    registry.kind_of(spec).find(spec)
