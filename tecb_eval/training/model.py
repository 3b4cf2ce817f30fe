"""The model a training run starts from: where it is (:func:`model_source`: its transformers
checkpoint and, for a sentence-transformers model, the folder around it) and, for fine-tuning,
loading it as a sentence-transformers model, fresh for each unit.

A sentence-transformers folder (``minilm-l6``, any folder with ``modules.json``) is trained through
its own modules (pooling, ``Normalize``), as the grid encodes it; a plain transformers checkpoint is
wrapped in a Transformer + mean Pooling model, which is what the grid's mean pooling computes. The
saved checkpoint is an ordinary sentence-transformers folder: ``tecb-eval run --model FOLDER``
scores it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tecb_data.errors import UserError


@dataclass(frozen=True)
class ModelSource:
    """The model to train: its transformers checkpoint and, if it is one, its sentence-transformers folder."""

    checkpoint: Path  # the folder with config.json: what is trained
    model_id: str
    sentence_model: Path | None  # the sentence-transformers folder (modules.json) around it, or None


def model_source(model) -> ModelSource:
    """The checkpoint to train and, for a sentence-transformers model, its folder."""
    from tecb_eval.models import registry
    from tecb_eval.models.kinds.pretrained import check_model_folder, is_sentence_transformers_folder

    folder, model_id = registry.checkpoint(model)
    check_model_folder(folder)  # an unreadable config.json or modules.json is one line naming it
    if is_sentence_transformers_folder(folder):
        # A sentence-transformers folder keeps its transformer in the first module's folder ("" or
        # e.g. "0_Transformer").
        first = json.loads((folder / "modules.json").read_text(encoding="utf-8"))[0].get("path", "")
        if (folder / first / "config.json").is_file():
            return ModelSource(folder / first, model_id, folder)
        raise UserError(f"{folder}: its first sentence-transformers module has no config.json; pre-training needs a "
                        "transformers model to train")
    if not (folder / "config.json").is_file():
        raise UserError(f"{folder}: no config.json; pass the folder of a transformers checkpoint")
    return ModelSource(folder, model_id, None)


def describe_model(model) -> dict:
    source = model_source(model)
    return {"model": str(model), "model_id": source.model_id,
            "folder": str(source.sentence_model or source.checkpoint),
            "kind": "sentence-transformers" if source.sentence_model is not None else "transformers (mean pooling added)"}


def load_sentence_model(model, *, device: str, max_length: int | None = None):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    source = model_source(model)
    if source.sentence_model is not None:
        st = SentenceTransformer(str(source.sentence_model), device=device)
    else:
        word = Transformer(str(source.checkpoint), max_seq_length=max_length or 512)
        st = SentenceTransformer(modules=[word, Pooling(word.get_embedding_dimension(), "mean")], device=device)
    if max_length is not None:
        st.max_seq_length = max_length
    return st
