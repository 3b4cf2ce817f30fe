"""How the model under training is encoded: one model, one encoding everywhere.

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

MODULES = "model"  # evaluated through the sentence-transformers model's own modules
HIDDEN = "hidden"  # mean of the last hidden layer (plain transformers checkpoints)
LOGITS = "logits"  # mean of the masked-LM logits (WWM under the paper profile)


def grid_max_length(config) -> int:
    """The tokens ``get_encoder`` gives a plain checkpoint by default (``MeanPoolingEncoder``)."""
    from tecb_eval.models.kinds.common import DEFAULT_MAX_LENGTH

    return min(DEFAULT_MAX_LENGTH, getattr(config, "max_position_embeddings", None) or DEFAULT_MAX_LENGTH)


def grid_encoder(objective, *, batch_size: int, device: str):
    """The model ``objective`` trains, encoded as the grid encodes it (see the module docstring)."""
    from tecb_eval.training.tracking import LiveMeanPoolingEncoder, LiveSentenceTransformerEncoder

    if objective.sentence_model is not None:
        return LiveSentenceTransformerEncoder(objective.sentence_model, batch_size=batch_size)
    return LiveMeanPoolingEncoder(objective.encoder, objective.tokenizer, max_length=grid_max_length(objective.encoder.config),
                                  batch_size=batch_size, device=device)


def describe(encoder) -> str:
    """How ``encoder`` (from :func:`grid_encoder`) encodes, in words, for the summary and run.json."""
    if encoder.pooling == MODULES:
        prompts = ", each dataset with the prompt MTEB gives its task" if encoder.per_task else ""
        return (f"the sentence-transformers model's own modules ({encoder.modules}), at most {encoder.max_length} "
                f"tokens{prompts}")
    return f"the attention-masked mean of the last hidden layer, at most {encoder.max_length} tokens"
