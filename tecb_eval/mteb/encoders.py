"""MTEB calling our encoders: :class:`MtebEncoder` wraps any tecb encoder in MTEB's encoder face;
:class:`HashingEncoder` is a batch-independent encoder for checking that two evaluations agree exactly."""

from __future__ import annotations

import re

import numpy as np


class MtebEncoder:
    """Any tecb encoder (``encode(list[str]) -> array``) as an MTEB encoder.

    >>> mteb.evaluate(MtebEncoder(tecb_eval.get_encoder("minilm-l6")), tasks=tecb_eval.mteb_tasks([...]))

    Args:
        encoder (object): Any object with ``encode(list[str]) -> array``, e.g. ``get_encoder(...)``.
        name (str | None): The model name MTEB files results under; None: from the encoder's identity.
        revision (str | None): The model revision MTEB records; None: from the encoder's identity.
    """

    def __init__(self, encoder, name: str | None = None, revision: str | None = None):
        self.encoder = encoder
        identity = getattr(encoder, "identity", None) or type(encoder).__name__
        self.name = name or model_name(identity)
        self.revision = revision or revision_of(identity)

    @property
    def mteb_model_meta(self):
        from mteb.models.model_meta import ModelMeta

        return ModelMeta.create_empty(overwrites={"name": self.name, "revision": self.revision})

    def encode(self, inputs, *, task_metadata=None, hf_split=None, hf_subset=None, prompt_type=None, **kwargs):
        texts = [text for batch in inputs for text in batch["text"]]
        return np.asarray(self.encoder.encode(texts))

    def similarity(self, embeddings1, embeddings2):
        a = np.asarray(embeddings1, dtype=float)
        b = np.asarray(embeddings2, dtype=float)
        a = a / np.clip(np.linalg.norm(a, axis=1, keepdims=True), 1e-12, None)
        b = b / np.clip(np.linalg.norm(b, axis=1, keepdims=True), 1e-12, None)
        return a @ b.T

    def similarity_pairwise(self, embeddings1, embeddings2):
        return np.diag(self.similarity(embeddings1, embeddings2))


class HashingEncoder:
    """Signed character-trigram hashing into ``dims`` dimensions, L2-normalised.

    Each text's vector depends on that text alone, so it is the same whatever batch MTEB or our
    grid put it in: the encoder for checking that two evaluations agree exactly (a neural
    encoder's CPU float sums move by ~1e-7 with batch composition, which k-means can amplify).
    """

    def __init__(self, dims: int = 64):
        self.dims = dims
        self.identity = f"tecb:char-trigram-hash-{dims}"
        self.calls = 0

    def encode(self, texts) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for i, text in enumerate(texts):
            b = np.frombuffer(f"  {text.lower()} ".encode("utf-8"), dtype=np.uint8).astype(np.uint64)
            if len(b) < 3:
                continue
            # A trigram's hash in integer arithmetic (the same on every machine), then mixed.
            h = (b[:-2] << np.uint64(16)) | (b[1:-1] << np.uint64(8)) | b[2:]
            h = (h * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)
            signs = np.where(h & np.uint64(1 << 20), 1.0, -1.0).astype(np.float32)
            np.add.at(out[i], (h % np.uint64(self.dims)).astype(np.int64), signs)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


def model_name(identity: str) -> str:
    # MTEB names models "org/name"; its results folder replaces "/" by "__".
    return identity.split("|", 1)[0].removeprefix("st:").removeprefix("hf:") or "model"


def revision_of(identity: str) -> str:
    from tecb_eval.files import short_hash

    # A per-dataset fitted encoder (tfidf-lsa) is one model: its revision leaves the corpus out, and
    # so for a model prompted per task, the task and its prompt (the export names the prompt).
    identity = re.sub(r'\|prompt="(?:[^"\\]|\\.)*"', "", re.sub(r"\|task=[^|]*", "", identity))
    return short_hash(re.sub(r"\|corpus=[^|]*", "", identity))[:16]


def encoder_for_dataset(encoder, bench, protocol: str = "legacy"):
    """The encoder itself, or for one fitted per dataset (tfidf-lsa), its fit on all the
    dataset's unique texts, or for one that encodes per MTEB task (prompts, MTEB models), the
    encoder bound to the dataset's task under ``protocol`` (legacy: ``BlurbsClusteringS2S``,
    fast: ``BlurbsClusteringS2S.v2``), whose prompt MTEB chooses as on its leaderboard."""
    if encoder.per_task:
        return bound_to_task(encoder, task_binding(bench, protocol))
    if not encoder.per_dataset:
        return encoder
    return encoder.fit_corpus(sorted({t for s in bench.splits for t in s.texts}))


def task_binding(bench, protocol: str = "legacy") -> tuple:
    """The MTEB task a per-task encoder is bound to for ``bench`` under ``protocol``: its
    ``task_class`` arguments (name, version, language), small enough to send to a Dask worker."""
    from tecb_eval.mteb.tasks import mteb_language

    return (bench.mteb_name, "v2" if protocol == "fast" else "legacy", mteb_language(bench))


def bound_to_task(encoder, binding: tuple):
    """``encoder`` bound to the task ``binding`` names (:func:`task_binding`): its prompt for it."""
    from tecb_eval.mteb.tasks import task_class

    return encoder.for_task(task_class(*binding).metadata)
