"""The model fine-tuning trains: a sentence-transformers model, loaded fresh for each unit.

A sentence-transformers folder (``minilm-l6``, any folder with ``modules.json``) is trained through
its own modules (pooling, ``Normalize``), as the grid encodes it; a plain transformers checkpoint is
wrapped in a Transformer + mean Pooling model, which is what the grid's mean pooling computes. The
saved checkpoint is an ordinary sentence-transformers folder: ``tecb-eval run --model FOLDER``
scores it.
"""

from __future__ import annotations

from tecb_eval.pretraining.encoding import model_source


def describe(model) -> dict:
    source = model_source(model)
    return {"model": str(model), "model_id": source.model_id,
            "folder": str(source.sentence_model or source.checkpoint),
            "kind": "sentence-transformers" if source.sentence_model is not None else "transformers (mean pooling added)"}


def load_model(model, *, device: str, max_length: int | None = None):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    source = model_source(model)
    if source.sentence_model is not None:
        st = SentenceTransformer(str(source.sentence_model), device=device)
    else:
        word = Transformer(str(source.checkpoint), max_seq_length=max_length or 512)
        st = SentenceTransformer(modules=[word, Pooling(word.get_embedding_dimension(), "mean")], device=device)
    if max_length is not None:
        st.max_seq_length = max_length
    return st
