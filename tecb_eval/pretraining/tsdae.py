"""TSDAE: a decoder, tied to the encoder, rebuilds each text from the pooled embedding of a copy
with most of its words deleted (sentence-transformers' DenoisingAutoEncoderLoss)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from tecb_data import seeding
from tecb_data.errors import UserError
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

    def __init__(self, folder: Path, settings: PretrainSettings, seed: int, device: str, profile=None, *,
                 sentence_model: Path | None = None):
        """``folder``: the transformers checkpoint; ``sentence_model``: the sentence-transformers
        folder it belongs to, if the model is one. The profile changes only TSDAE's epochs and
        evaluation schedule (its settings), not the objective."""
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.base.modules import Transformer
        from sentence_transformers.sentence_transformer.losses import DenoisingAutoEncoderLoss
        from sentence_transformers.sentence_transformer.modules import Pooling

        if sentence_model is not None:
            # The model's own modules (pooling, normalisation): the decoder sees the embedding that
            # evaluation and the grid see, and the kept checkpoint is the same kind of model.
            self.model = SentenceTransformer(str(sentence_model), device=device)
            check_first_module(self.model, sentence_model)
            width = self.model.get_embedding_dimension()
            hidden = self.model.transformers_model.config.hidden_size
            if width != hidden:
                raise UserError(f"{sentence_model}: its sentence embeddings have {width} dimensions, its transformer "
                                f"{hidden}; the TSDAE decoder needs them equal (use --method wwm, or the plain "
                                "transformers checkpoint)")
        else:
            # A plain checkpoint gets the pooling of the settings (mean by default, as evaluation pools).
            transformer = Transformer(str(folder), max_seq_length=settings.max_length)
            pooling = Pooling(transformer.get_embedding_dimension(), settings.pooling)
            self.model = SentenceTransformer(modules=[transformer, pooling], device=device)
        self.sentence_model = self.model if sentence_model is not None else None
        # The decoder is loaded from the same folder; tying makes it share the encoder's weights.
        self.module = DenoisingAutoEncoderLoss(self.model, tie_encoder_decoder=True).to(device)
        self.encoder = self.model.transformers_model
        self.tokenizer = self.model.tokenizer
        self.max_length = settings.max_length
        self.deletion_ratio = settings.deletion_ratio
        self.noise = seeding.rng(seed, "pretrain", "tsdae", "noise")

    def make_batch(self, texts: list[str]) -> list[dict]:
        noisy = [delete_words(t, self.deletion_ratio, self.noise) for t in texts]
        # The training length is the settings'; the model's own (which evaluation uses) stays as it is.
        return [dict(self.model.preprocess(noisy, max_length=self.max_length)),
                dict(self.model.preprocess(texts, max_length=self.max_length))]

    def loss(self, batch: list[dict]):
        return self.module(batch, None)

    def save(self, folder: Path) -> None:
        if self.sentence_model is not None:
            self.sentence_model.save(str(folder), create_model_card=False)
            return
        self.encoder.save_pretrained(str(folder))
        self.tokenizer.save_pretrained(str(folder))


def check_first_module(model, folder: Path) -> None:
    """The first module of a sentence-transformers model must be the transformer that is trained."""
    from sentence_transformers.base.modules import Transformer

    if not isinstance(model[0], Transformer):
        raise UserError(f"{folder}: its first module is a {type(model[0]).__name__}, not a transformers model; "
                        "pre-training needs a transformer to train")
