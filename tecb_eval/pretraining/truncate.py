"""Truncated models: the first k transformer layers of a checkpoint, as a checkpoint of its own.

Rep et al. (2024) repair ELECTRA's sentence embeddings by cutting the model at a good layer and
fine-tuning what is left (TMFT). A truncated model is written as an ordinary checkpoint (config
with ``num_hidden_layers = k``, the kept weights, the tokenizer), so every later step reads it as
it reads any model: WWM's masked-LM head, TSDAE's tied decoder (which sentence-transformers
builds from the encoder's own folder, so it has k layers too) and ``get_encoder`` of the saved
checkpoints. Its last hidden state is the original model's ``hidden_states[k]``.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from tecb_data.errors import UserError
from tecb_eval.training.checkpoints import drop_loading_options


def layer_count(folder: Path) -> int:
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(folder))
    count = getattr(config, "num_hidden_layers", None)
    if not isinstance(count, int):
        raise UserError(f"{folder}: the model's config names no num_hidden_layers, so it cannot be truncated")
    return count


def check_truncation(folder: Path, k: int) -> int:
    """The model's number of layers, once ``k`` is known to keep at least one and at most all."""
    n_layers = layer_count(folder)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= n_layers:
        raise UserError(f"truncate_at={k!r}: this model has {n_layers} layers; keep between 1 and {n_layers} "
                        f"(--truncate-at 1..{n_layers})")
    return n_layers


@contextlib.contextmanager
def _quiet_transformers():
    """The dropped layers are reported as unexpected weights on loading: expected here."""
    from transformers.utils import logging

    previous = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(previous)


def truncate_checkpoint(folder: Path, k: int, into: Path) -> Path:
    """Write the first ``k`` layers of the checkpoint in ``folder`` (with its heads and tokenizer)
    into ``into`` and return it. The checkpoint's own architecture class loads it, so a masked-LM
    head it has is kept; weights it lacks are left to the objective to initialise, as for the
    full model."""
    import torch
    import transformers
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    check_truncation(folder, k)
    config = AutoConfig.from_pretrained(str(folder))
    architecture = (getattr(config, "architectures", None) or [None])[0]
    model_class = getattr(transformers, architecture, None) if architecture else None
    model_class = model_class or AutoModel
    into = Path(into)
    into.mkdir(parents=True, exist_ok=True)
    # A weight the checkpoint lacks (e.g. a pooler) is initialised on loading; a fixed generator,
    # apart from the global one, keeps that the same from run to run.
    with torch.random.fork_rng(devices=[]), _quiet_transformers():
        torch.manual_seed(0)
        model = model_class.from_pretrained(str(folder), num_hidden_layers=k)
    kept = _layer_modules(model)
    if kept is not None and len(kept) != k:
        raise RuntimeError(f"truncating {folder} to {k} layers left {len(kept)}")
    model.save_pretrained(str(into))
    AutoTokenizer.from_pretrained(str(folder)).save_pretrained(str(into))
    drop_loading_options(into)
    return into


def _layer_modules(model):
    """The model's stack of transformer layers (``encoder.layer`` for BERT, ELECTRA, XLM-R), if found."""
    base = getattr(model, "base_model", model)
    encoder = getattr(base, "encoder", None)
    return getattr(encoder, "layer", None)
