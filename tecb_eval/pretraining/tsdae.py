"""TSDAE: a decoder, tied to the encoder, rebuilds each text from the pooled embedding of a copy
with most of its words deleted (sentence-transformers' DenoisingAutoEncoderLoss)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from tecb_data import seeding
from tecb_eval.pretraining.settings import PretrainSettings

# Words and punctuation marks apart, like the nltk word tokenizer of the TSDAE recipe (nltk is not
# needed: the BERT pre-tokenizer splits punctuation anyway, so the joined spaces change nothing).
_TOKEN = re.compile(r"\w+|[^\w\s]+")


def delete_words(text: str, ratio: float, rng: np.random.Generator) -> str:
    """``text`` with each word dropped with probability ``ratio``, keeping at least one."""
    words = _TOKEN.findall(text)
    if not words:
        return text
    keep = rng.random(len(words)) > ratio
    if not keep.any():
        keep[int(rng.integers(len(words)))] = True
    return " ".join(w for w, k in zip(words, keep) if k)


class Tsdae:
    name = "tsdae"

    def __init__(self, folder: Path, settings: PretrainSettings, seed: int, device: str, profile=None):
        # The profile changes only TSDAE's epochs and evaluation schedule (its settings), not the objective.
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.base.modules import Transformer
        from sentence_transformers.sentence_transformer.losses import DenoisingAutoEncoderLoss
        from sentence_transformers.sentence_transformer.modules import Pooling

        # Built from the plain checkpoint, whatever pooling a sentence-transformers folder declares:
        # the decoder must see the pooling that evaluation uses.
        transformer = Transformer(str(folder), max_seq_length=settings.max_length)
        pooling = Pooling(transformer.get_embedding_dimension(), settings.pooling)
        self.model = SentenceTransformer(modules=[transformer, pooling], device=device)
        # The decoder is loaded from the same folder; tying makes it share the encoder's weights.
        self.module = DenoisingAutoEncoderLoss(self.model, tie_encoder_decoder=True).to(device)
        self.encoder = self.model.transformers_model
        self.tokenizer = self.model.tokenizer
        self.deletion_ratio = settings.deletion_ratio
        self.noise = seeding.rng(seed, "pretrain", "tsdae", "noise")

    def make_batch(self, texts: list[str]) -> list[dict]:
        noisy = [delete_words(t, self.deletion_ratio, self.noise) for t in texts]
        return [dict(self.model.preprocess(noisy)), dict(self.model.preprocess(texts))]

    def loss(self, batch: list[dict]):
        return self.module(batch, None)

    def save(self, folder: Path) -> None:
        self.encoder.save_pretrained(str(folder))
        self.tokenizer.save_pretrained(str(folder))
