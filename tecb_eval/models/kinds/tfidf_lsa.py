"""``tfidf-lsa``: the scikit-learn baseline, TF-IDF then truncated SVD (LSA), fitted per dataset."""

from __future__ import annotations

import hashlib
import json
from typing import Sequence

import numpy as np

from tecb_data.seeding import DEFAULT_SEED
from tecb_eval.models.kinds.common import EmbeddingSnippet, Encoder, Load, identity_parts, package_version


class TfidfLsaEncoder(Encoder):
    """The scikit-learn baseline: TF-IDF then truncated SVD (LSA), L2-normalised.

    It learns its vocabulary from a corpus, so the grid fits one per dataset (``fit_corpus``);
    the fitted identity includes a hash of that corpus. Unfitted, ``encode`` fits on its input.
    """

    per_dataset = True

    def __init__(self, *, n_components: int = 256, seed: int = DEFAULT_SEED, max_features: int = 100_000):
        self.n_components = n_components
        self.seed = seed
        self.max_features = max_features
        self.pipeline = None
        self.identity = self._identity("unfitted")

    def _identity(self, corpus: str) -> str:
        return (
            f"tfidf-lsa:sklearn=={package_version('scikit-learn')}|dim={self.n_components}|"
            f"max_features={self.max_features}|seed={self.seed}|corpus={corpus}"
        )

    def fit_corpus(self, texts: Sequence[str]) -> "TfidfLsaEncoder":
        """A new encoder fitted on the sorted unique ``texts`` (input order does not matter)."""
        from sklearn.decomposition import TruncatedSVD
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import Normalizer

        corpus = sorted(set(texts))
        digest = hashlib.blake2b(json.dumps(corpus, ensure_ascii=False).encode("utf-8"), digest_size=10).hexdigest()
        fitted = TfidfLsaEncoder(n_components=self.n_components, seed=self.seed, max_features=self.max_features)
        tfidf = TfidfVectorizer(sublinear_tf=True, max_features=self.max_features, dtype=np.float64)
        n_terms = tfidf.fit(corpus).transform(corpus[:1]).shape[1]
        # LSA needs fewer components than terms and documents; tiny corpora get what they allow.
        dim = max(1, min(self.n_components, n_terms - 1, len(corpus) - 1))
        fitted.pipeline = make_pipeline(
            tfidf, TruncatedSVD(n_components=dim, random_state=self.seed), Normalizer(copy=False)
        ).fit(corpus)
        fitted.identity = fitted._identity(digest)
        return fitted

    def encode(self, texts: list[str]) -> np.ndarray:
        encoder = self if self.pipeline is not None else self.fit_corpus(texts)
        return np.asarray(encoder.pipeline.transform(list(texts)), dtype=np.float64)


def load(load: Load) -> TfidfLsaEncoder:
    return TfidfLsaEncoder(seed=load.seed, **load.options)


def snippet(identity: str, location: str | None) -> EmbeddingSnippet:
    """The same pipeline in scikit-learn, with the parameters the identity names; a ValueError
    where it names one that is not a number."""
    parts = identity_parts(identity)
    dim, features, seed = (int(parts.get(k, default)) for k, default in
                           (("dim", "256"), ("max_features", "100000"), ("seed", str(DEFAULT_SEED))))
    return EmbeddingSnippet(
        ["from sklearn.decomposition import TruncatedSVD",
         "from sklearn.feature_extraction.text import TfidfVectorizer", "from sklearn.pipeline import make_pipeline", "from sklearn.preprocessing import Normalizer"],
        ["# tfidf-lsa as the grid ran it: TF-IDF, LSA (at most one component fewer than texts), unit length",
         f"embedding_model = make_pipeline(TfidfVectorizer(sublinear_tf=True, max_features={features!r}),",
         f"                                TruncatedSVD(n_components=min({dim!r}, len(docs) - 1), "
         f"random_state={seed!r}), Normalizer())"], False, f"dims = min({dim!r}, len(docs) - 1)")
