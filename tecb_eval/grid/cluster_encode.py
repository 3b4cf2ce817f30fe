"""Encode tasks on a Dask cluster (``run_grid(scheduler=...)``, ``--scheduler``): each (model,
shard of the unique texts the embedding store lacks) is one Dask task.

Shards are cut on the encoder's own batch boundaries, in its own order: the texts go in chunks of
:data:`~tecb_eval.grid.cache.ENCODE_CHUNK` as an in-process run sends them, each chunk is put in
the order sentence-transformers puts it (longest first, ``numpy.argsort`` of the negated lengths,
as ``SentenceTransformer.encode`` does), and a shard is a run of whole batches of that order. A
worker encodes each batch by itself, so every batch holds the texts it holds in-process and the
vectors are those of the same model in-process on the same device, dtype and thread count.

Workers keep the models they loaded (least recently used first out, within the worker's memory
limit), so a second model, a second dataset or a second run on a warm cluster loads nothing again.
A worker's model must have the identity this process computed, or the task fails: a vector under
one identity is never another model's. The coordinator alone writes the embedding store, one
atomic shard per finished task: a worker killed mid-shard leaves no half shard, and Dask runs the
shard again elsewhere.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

from tecb_data.errors import UserError
from tecb_eval.files import short_hash
from tecb_eval.grid.cache import ENCODE_CHUNK, EmbeddingStore, text_key
from tecb_eval.models.spec import ModelSpec

ENCODE_ON = (None, "any", "gpu")  # --encode-on: any worker, or only those with Dask's GPU resource
SHARDS_PER_WORKER = 4  # enough shards that a slow or lost worker holds up little of a model's encoding
MAX_ATTEMPTS = 4  # per shard: its worker may die 3 times
MODEL_SHARE = 0.6  # of a worker's memory limit that loaded models may hold before the oldest goes


def runs_on_cluster(spec: ModelSpec, encoder) -> bool:
    """Whether a worker can open ``spec`` itself and batch as we cut: a model named by text (an
    encoder object cannot travel) that sentence-transformers encodes, one batch of ``batch_size``
    at a time. Other encoders (tfidf-lsa's fit per dataset, plain transformers) encode here."""
    from tecb_eval.models.encoders import SentenceTransformerEncoder

    return isinstance(spec.spec, (str, Path)) and isinstance(encoder, SentenceTransformerEncoder)


def binding(encoder, bench, protocol: str) -> tuple | None:
    """What a worker needs to bind the model to the dataset's MTEB task (its prompt), as
    :func:`tecb_eval.mteb.encoders.encoder_for_dataset` does here; None for a model without one."""
    if not getattr(encoder, "per_task", False):
        return None
    from tecb_eval.mteb.tasks import mteb_language

    return (bench.mteb_name, "v2" if protocol == "fast" else "legacy", mteb_language(bench))


def shards(texts: list[str], batch_size: int, workers: int) -> list[list[list[str]]]:
    """``texts`` (sorted as the embedding store sorts them) cut into shards of whole batches:
    per chunk, sentence-transformers' own order, batches of ``batch_size``, and about
    :data:`SHARDS_PER_WORKER` shards per worker."""
    out = []
    for start in range(0, len(texts), ENCODE_CHUNK):
        chunk = texts[start:start + ENCODE_CHUNK]
        order = np.argsort([-len(t) for t in chunk])  # SentenceTransformer.encode's own call
        ordered = [chunk[i] for i in order]
        batches = [ordered[i:i + batch_size] for i in range(0, len(ordered), batch_size)]
        per_shard = max(1, math.ceil(len(batches) / (SHARDS_PER_WORKER * max(1, workers))))
        out.extend(batches[i:i + per_shard] for i in range(0, len(batches), per_shard))
    return out


# -- on a worker ------------------------------------------------------------------------------
_loaded: "OrderedDict[tuple, object]" = OrderedDict()  # (spec, options, seed) -> encoder, oldest first
_lock = threading.Lock()


def _model_key(spec: ModelSpec, seed: int) -> tuple:
    return (str(spec.spec), repr(sorted(spec.options.items())), int(seed))


def loaded_model(spec: ModelSpec, seed: int):
    """This worker's encoder for ``spec``, loaded once and kept; the least recently used go first
    once the process holds more than :data:`MODEL_SHARE` of the worker's memory limit."""
    from tecb_eval.models.spec import open_model

    key = _model_key(spec, seed)
    with _lock:
        if key in _loaded:
            _loaded.move_to_end(key)
            return _loaded[key]
        encoder = open_model(spec, seed).encoder
        _loaded[key] = encoder
        _evict()
        return encoder


def _evict() -> None:
    try:
        import psutil
        from distributed import get_worker

        limit = get_worker().memory_manager.memory_limit
    except (ImportError, ValueError, AttributeError):
        return  # not on a worker (a test calling this directly), or no limit: keep them all
    while limit and len(_loaded) > 1 and psutil.Process().memory_info().rss > MODEL_SHARE * limit:
        _loaded.popitem(last=False)
        import gc

        gc.collect()


def held_models() -> list[str]:
    """The models this worker holds, oldest first (what the tests ask a worker)."""
    return [key[0] for key in _loaded]


def encode_shard(spec: ModelSpec, seed: int, bound_to: tuple | None, identity: str, batches: list[list[str]]):
    """One encode task: ``batches`` encoded one call each by the worker's copy of the model, bound
    to the dataset's task; the vectors in the batches' order."""
    encoder = loaded_model(spec, seed)
    if bound_to is not None:
        from tecb_eval.mteb.tasks import task_class

        encoder = encoder.for_task(task_class(*bound_to).metadata)
    if encoder.identity != identity:
        raise RuntimeError(f"the worker's {spec.name} is {encoder.identity}, the coordinator's {identity}: install "
                           "the same model files and packages on every worker")
    return np.concatenate([np.asarray(encoder.encode(batch)) for batch in batches])


def warm_up_worker() -> None:
    """Import what encoding needs, once, when a worker starts (``dask worker --preload``)."""
    import sentence_transformers  # noqa: F401
    import torch  # noqa: F401


def dask_setup(worker) -> None:  # the hook `dask worker --preload tecb_eval.grid.cluster_encode` calls
    warm_up_worker()


# -- on the coordinator -----------------------------------------------------------------------
class ClusterEncoder:
    """Sends a model's missing texts to the cluster as shard tasks and writes each finished shard."""

    def __init__(self, client, log, resources: dict | None = None):
        self.client, self.log, self.resources = client, log, resources or {}

    def workers(self) -> int:
        return max(1, len(self.client.scheduler_info(n_workers=-1).get("workers", {})))

    def encode(self, spec: ModelSpec, seed: int, bound_to, encoder, todo: list[str], store: EmbeddingStore,
               progress=None) -> None:
        """Encode ``todo`` (distinct texts the store lacks) on the cluster into ``store``."""
        from distributed import as_completed

        from tecb_eval.grid.dask_executor import worker_lost

        ordered = sorted(todo)
        ordered.sort(key=len)  # as EmbeddingStore.encode_missing orders an in-process encoding
        pieces = shards(ordered, int(encoder.batch_size), self.workers())
        attempts = [0] * len(pieces)
        running = {}

        def submit(index: int) -> None:
            name = short_hash(encoder.identity, *(t for batch in pieces[index] for t in batch[:1]))
            try:
                future = self.client.submit(encode_shard, spec, seed, bound_to, encoder.identity, pieces[index],
                                            key=f"tecb-encode-{name}-{index}-{attempts[index]}", pure=False,
                                            resources=self.resources)
            except OSError as exc:
                raise UserError(f"the Dask cluster stopped taking work while encoding with {spec.name} "
                                f"({type(exc).__name__}); the shards finished before are stored: rerun to resume") from None
            running[future] = index
            return future

        for index in range(len(pieces)):
            submit(index)
        completed = as_completed(list(running), loop=self.client.loop, raise_errors=False)
        for future in completed:
            index = running.pop(future)
            try:
                vectors = future.result()
            except Exception as exc:  # noqa: BLE001 -- a lost worker is retried, the task's own error is not
                if not (worker_lost(exc) or isinstance(exc, OSError)):
                    raise
                attempts[index] += 1
                if attempts[index] >= MAX_ATTEMPTS:
                    raise UserError(f"encoding with {spec.name}: a shard's Dask worker was lost {MAX_ATTEMPTS} times "
                                    "(out of memory?); the shards finished before are stored: rerun to resume") from None
                self.log(f"note: encoding with {spec.name}: a shard's worker was lost; encoding it again")
                completed.add(submit(index))
                continue
            texts = [t for batch in pieces[index] for t in batch]
            if vectors.ndim != 2 or len(vectors) != len(texts):
                raise ValueError(f"a worker returned shape {vectors.shape} for {len(texts)} texts")
            rows = {text_key(t): i for i, t in enumerate(texts)}
            # One atomic store shard per task: the store's own writer, handed the worker's vectors.
            store.encode_missing(texts, lambda batch: vectors[[rows[text_key(t)] for t in batch]],
                                 chunk=len(texts))
            if progress is not None:
                progress(len(texts))
