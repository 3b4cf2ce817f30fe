"""A plain transformers checkpoint, mean-pooled over one hidden layer's tokens (the paper's pooling)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Sequence

import numpy as np

from tecb_data.errors import UserError
from tecb_eval.models.kinds.common import DEFAULT_BATCH_SIZE, DEFAULT_MAX_LENGTH, Encoder


class MeanPoolingEncoder(Encoder):
    """A plain transformers checkpoint, attention-masked mean over one hidden layer's tokens.

    ``layer`` counts like ``hidden_states``: 0 is the embedding output, the model's number of
    layers is the last; negative values count from the end. None means the last layer.
    """

    sweeps_layers = True

    def __init__(self, folder: Path, model_id: str, *, layer: int | None = None,
                 max_length: int = DEFAULT_MAX_LENGTH, batch_size: int = DEFAULT_BATCH_SIZE,
                 device: str | None = None):
        import torch
        from transformers import AutoModel, AutoTokenizer

        self._torch = torch
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        self.model = AutoModel.from_pretrained(str(folder)).to(device).eval()
        n_layers = int(getattr(self.model.config, "num_hidden_layers", 0))
        if layer is not None and not -(n_layers + 1) <= layer <= n_layers:
            raise UserError(f"{model_id}: layer={layer} out of range; this model has layers 0..{n_layers} "
                            f"(or -{n_layers + 1}..-1, counted back from the last: -1 is layer {n_layers})")
        self.n_layers = n_layers
        self.model_id = model_id
        self.layer = None if layer is None or layer in (-1, n_layers) else layer % (n_layers + 1)
        model_max = getattr(self.model.config, "max_position_embeddings", None) or max_length
        self.max_length = min(max_length, model_max)
        self.batch_size = batch_size
        self.device = device
        self.identity = self.layer_identity(self.layer)

    def layer_identity(self, layer: int | None) -> str:
        """The identity this model has when pooled over ``layer`` (0..n_layers; None or n_layers: the last)."""
        shown_layer = "last" if layer is None or layer == self.n_layers else str(layer)
        return f"hf:{self.model_id}|pooling=mean|layer={shown_layer}|max_length={self.max_length}"

    def at_layer(self, layer: int) -> "MeanPoolingEncoder":
        """This encoder pooled over ``layer`` instead, sharing the loaded model (no second copy)."""
        if not 0 <= layer <= self.n_layers:
            raise UserError(f"{self.model_id}: layer={layer} out of range; this model has layers 0..{self.n_layers}")
        view = copy.copy(self)
        view.layer = None if layer == self.n_layers else layer
        view.identity = view.layer_identity(view.layer)
        return view

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.encode_layers(texts, [self.layer])[self.layer]

    def encode_layers(self, texts: list[str], layers: Sequence[int | None]) -> dict:
        """Vectors of ``texts`` pooled over each of ``layers`` from one forward pass per batch:
        {layer: matrix}. Layers count like ``hidden_states`` (0: the embeddings); the last one
        (None or n_layers) is read from ``last_hidden_state``, as a single-layer encode reads it,
        so each matrix equals that of ``at_layer(layer).encode(texts)`` bit for bit."""
        torch = self._torch
        texts = list(texts)
        layers = list(dict.fromkeys(layers))
        inner = [k for k in layers if k is not None and k != self.n_layers]
        # Sort by length so each batch pads little; results go back to the caller's order.
        order = sorted(range(len(texts)), key=lambda i: (-len(texts[i]), i))
        out: dict = {k: [None] * len(texts) for k in layers}
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                idx = order[start:start + self.batch_size]
                batch = self.tokenizer(
                    [texts[i] for i in idx], padding=True, truncation=True,
                    max_length=self.max_length, return_tensors="pt",
                ).to(self.device)
                output = self.model(**batch, output_hidden_states=bool(inner))
                for k in layers:
                    hidden = output.hidden_states[k] if k in inner else output.last_hidden_state
                    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                    for i, vector in zip(idx, pooled.float().cpu().numpy()):
                        out[k][i] = vector
        if not texts:
            empty = np.zeros((0, int(self.model.config.hidden_size)), dtype=np.float32)
            return {k: empty.copy() for k in layers}
        return {k: np.stack(vectors) for k, vectors in out.items()}
