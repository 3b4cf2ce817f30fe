"""Which model pre-training trains, and how it is encoded: one model, one encoding everywhere.

``tecb-eval run`` (``tecb_eval.models.encoders.get_encoder``) encodes a sentence-transformers
model with its own modules (its pooling, a Normalize, a Dense, ...) and a plain transformers
checkpoint by the attention-masked mean of its last layer. Pre-training evaluates the model it
trains the same way, the model without pre-training included, and keeps each checkpoint as the same
kind of model (a sentence-transformers folder, with modules.json, when the input was one), so the
grid scores a kept checkpoint as its evaluation here scored it.

A truncated model (``truncate_at``) is a layer of the model, which the grid mean-pools whatever
the model's modules (``get_encoder(model, layer=k)``); it is trained, evaluated and kept as a plain
checkpoint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tecb_data.errors import UserError

MODULES = "model"  # evaluated through the sentence-transformers model's own modules
HIDDEN = "hidden"  # mean of the last hidden layer (plain transformers checkpoints)
LOGITS = "logits"  # mean of the masked-LM logits (WWM under the paper profile)


@dataclass(frozen=True)
class ModelSource:
    """The model to pre-train: its transformers checkpoint and, if it is one, its sentence-transformers folder."""

    checkpoint: Path  # the folder with config.json: what is trained
    model_id: str
    sentence_model: Path | None  # the sentence-transformers folder (modules.json) around it, or None


def model_source(model) -> ModelSource:
    """The checkpoint to train and, for a sentence-transformers model, its folder."""
    from tecb_eval.models.encoders import check_model_folder, is_sentence_transformers_folder, minilm_folder, resolve_model

    if str(model) == "minilm-l6":
        folder, model_id = minilm_folder(), "minilm-l6"
    else:
        folder, model_id = resolve_model(str(model))
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


def grid_max_length(config) -> int:
    """The tokens ``get_encoder`` gives a plain checkpoint by default (``MeanPoolingEncoder``)."""
    from tecb_eval.models.encoders import DEFAULT_MAX_LENGTH

    return min(DEFAULT_MAX_LENGTH, getattr(config, "max_position_embeddings", None) or DEFAULT_MAX_LENGTH)


def grid_encoder(objective, *, batch_size: int, device: str):
    """The model ``objective`` trains, encoded as the grid encodes it (see the module docstring)."""
    from tecb_eval.pretraining.tracking import LiveMeanPoolingEncoder, LiveSentenceTransformerEncoder

    if objective.sentence_model is not None:
        return LiveSentenceTransformerEncoder(objective.sentence_model, batch_size=batch_size)
    return LiveMeanPoolingEncoder(objective.encoder, objective.tokenizer, max_length=grid_max_length(objective.encoder.config),
                                  batch_size=batch_size, device=device)


def describe(encoder) -> str:
    """How ``encoder`` (from :func:`grid_encoder`) encodes, in words, for the summary and run.json."""
    if getattr(encoder, "pooling", None) == MODULES:
        prompts = ", each dataset with the prompt MTEB gives its task" if getattr(encoder, "per_task", False) else ""
        return (f"the sentence-transformers model's own modules ({encoder.modules}), at most {encoder.max_length} "
                f"tokens{prompts}")
    return f"the attention-masked mean of the last hidden layer, at most {encoder.max_length} tokens"
