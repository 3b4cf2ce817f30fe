"""recommend's BERTopic snippet names topics with whole German words: run as printed on German book
titles, for each way a snippet builds its embeddings (a scikit-learn pipeline, a
sentence-transformers model, vectors computed ahead), its topic words keep their umlauts and ß."""

from __future__ import annotations

import json
from importlib.util import find_spec

import pytest

from tecb_eval.clustering import algorithms as algo

# Found, not imported: importing BERTopic costs seconds, and only the process that runs a snippet needs it.
pytestmark = pytest.mark.skipif(find_spec("bertopic") is None, reason="BERTopic is not installed")

GERMAN = set("äöüß")


def _titles(demo_datasets) -> list[str]:
    from tecb_eval.benchmark import load_dataset

    texts = sorted({t for s in load_dataset(demo_datasets / "blurbs-clustering-s2s").splits for t in s.texts})
    with_umlauts = [t for t in texts if GERMAN & set(t.lower())]
    return (with_umlauts + [t for t in texts if t not in with_umlauts])[:80]


def _snippet(identity: str) -> str:
    from tecb_eval.reports.recommend import Recommendation, bertopic_snippet

    r = Recommendation(
        dataset="BlurbsClusteringS2S", synthetic=True, model=identity.split(":")[0], model_identity=identity,
        algorithm="minibatch_kmeans", reduction="none",
        algorithm_params=json.loads(algo.params_json(algo.make_algorithm("minibatch_kmeans", 4, 42))),
        reduction_params=json.loads(algo.params_json(algo.make_reduction("none", 42))),
        n_clusters=[4], mean=0.3, low=0.2, high=0.4, sd=0.05, splits=1, seeds=1, noise_fraction=None,
        confidence=0.95, runner_up=None, lead=None, lead_sentence="no runner-up")
    return bertopic_snippet(r)


@pytest.mark.parametrize("model", ["tfidf-lsa", "minilm-l6", "use-multilingual"])
def test_the_snippets_topic_words_keep_umlauts(demo_datasets, model):
    from tecb_eval.models.encoders import get_encoder

    docs = _titles(demo_datasets)
    encoder = get_encoder(model, seed=42)
    identity = (encoder.fit_corpus(docs) if hasattr(encoder, "fit_corpus") else encoder).identity
    code = _snippet(identity)
    assert "language='multilingual'" in code
    namespace = {"docs": docs}
    exec(compile(code, f"snippet-{model}", "exec"), namespace)
    topic_model = namespace["topic_model"]
    words = {word for topic in set(namespace["topics"]) for word, _ in topic_model.get_topic(topic) or ()}
    assert any(GERMAN & set(word) for word in words), sorted(words)
