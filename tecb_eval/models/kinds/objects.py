"""An encoder object: anything with ``encode(list[str])``, used as it is; an MTEB model object
(what ``mteb.get_model`` returns, or a user's MTEB wrapper) is encoded per task through its own
MTEB ``encode`` call."""

from __future__ import annotations

import numpy as np

from tecb_data.errors import UserError
from tecb_eval.models.kinds import mteb_models
from tecb_eval.models.kinds.common import DEFAULT_BATCH_SIZE, Encoder, Load


class ObjectEncoder(Encoder):
    """Any object with ``encode(list[str])``; its identity is its own ``identity`` attribute if it
    has one. Without one nothing says when its vectors change, so the grid keeps them in memory
    only (``persistent`` is False)."""

    def __init__(self, obj, identity: str | None = None):
        self.obj = obj
        given = identity or getattr(obj, "identity", None)
        self.persistent = given is not None
        cls = type(obj)
        self.identity = given or f"object:{cls.__module__}.{cls.__qualname__}"
        self.per_dataset = bool(getattr(obj, "per_dataset", False))

    def fit_corpus(self, texts):
        return ObjectEncoder(self.obj.fit_corpus(texts))

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.obj.encode(list(texts)))


class Example:
    """The smallest encoder object ``get_encoder`` takes: an ``identity`` and ``encode(list[str])``."""

    identity = "example:zeros"

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.zeros((len(texts), 2), dtype=np.float32)


def load(load: Load):
    obj = load.spec
    if not callable(getattr(obj, "encode", None)):
        raise UserError(f"{obj!r}: an encoder object needs an encode(list[str]) method")
    if mteb_models.is_mteb_model(obj):
        # Anything mteb.get_model returns, or a user's MTEB wrapper: encoded per task through its own call.
        return mteb_models.MtebModelEncoder(obj, identity=load.options.get("identity"),
                                            batch_size=load.batch_size or DEFAULT_BATCH_SIZE)
    return ObjectEncoder(obj, load.options.get("identity"))


def display(obj) -> str:
    """MTEB's name of an MTEB model, else the object's ``name``, else its class's."""
    meta = getattr(obj, "mteb_model_meta", None)
    if getattr(meta, "name", None):
        return str(meta.name).rstrip("/").rsplit("/", 1)[-1]
    return getattr(obj, "name", None) or type(obj).__name__
