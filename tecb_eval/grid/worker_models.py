"""What a Dask worker does for the grid's encode tasks, on the worker: the models it keeps loaded
between tasks (:class:`WorkerModels`, a ``distributed`` worker plugin the coordinator's
:class:`~tecb_eval.grid.cluster_encode.ClusterEncoder` registers), and the tasks it runs with them:
checking a model's files and device, describing a model to the coordinator, encoding a shard.

A worker keeps the models it loaded (least recently used first out, within the worker's memory
limit), so a second model, a second dataset, a second run or a second client on a warm cluster
loads nothing again. A model is kept by what it is (its spec, options, seed and the fingerprint of
its folder's files), and a copy whose identity is not the one the coordinator was given is read
from its files again, once, or the task fails in one line: a vector under one identity is never
another model's.

``dask worker --preload tecb_eval.grid.worker_models`` imports torch and sentence-transformers as
the worker starts (:func:`dask_setup`), before its first task.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np
from distributed.diagnostics.plugin import WorkerPlugin

from tecb_data.errors import UserError
from tecb_eval.models.spec import ModelSpec

PLUGIN_NAME = "tecb-worker-models"
MODEL_SHARE = 0.6  # of a worker's memory limit that loaded models may hold before the oldest goes


def model_key(spec: ModelSpec, seed: int) -> tuple:
    """What a worker keeps a model by: spec, options, seed and the fingerprint of its folder's files."""
    return (str(spec.spec), repr(sorted(spec.options.items())), int(seed), spec.files)


class WorkerModels(WorkerPlugin):
    """The models one Dask worker holds, oldest first. Registered by the coordinator once per
    cluster (``idempotent``: a second client, or a second run, finds the models the first loaded);
    made by hand (not set up on a worker), it holds the models of this process alone, with no
    memory limit: what a test of the worker's side uses."""

    name = PLUGIN_NAME
    idempotent = True

    def __init__(self):
        self.worker = None
        self.loaded: OrderedDict[tuple, object] = OrderedDict()
        self.lock = threading.Lock()

    def __reduce__(self):
        # Sent to the scheduler and the workers empty: a lock and loaded models stay where they are.
        return (WorkerModels, ())

    def setup(self, worker) -> None:
        self.worker = worker

    def teardown(self, worker) -> None:
        with self.lock:
            self.loaded.clear()

    def where(self) -> str:
        return f"Dask worker {self.worker.address}" if self.worker is not None else "this process"

    def model(self, spec: ModelSpec, seed: int):
        """This worker's encoder for ``spec``, loaded once and kept; the least recently used go first
        once the process holds more than :data:`MODEL_SHARE` of the worker's memory limit."""
        from tecb_eval.models.spec import open_model

        key = model_key(spec, seed)
        with self.lock:
            if key in self.loaded:
                self.loaded.move_to_end(key)
                return self.loaded[key]
            encoder = open_model(spec, seed).encoder
            self._check_files(spec, encoder)
            self.loaded[key] = encoder
            self._evict()
            return encoder

    def forget(self, spec: ModelSpec, seed: int) -> None:
        """Drop this worker's copy of ``spec``; the next use loads it from its files again."""
        with self.lock:
            self.loaded.pop(model_key(spec, seed), None)

    def clear(self) -> None:
        with self.lock:
            self.loaded.clear()

    def keys(self) -> list[tuple]:
        with self.lock:
            return list(self.loaded)

    def _check_files(self, spec: ModelSpec, encoder) -> None:
        """A worker's copy of a model folder holds the files the coordinator fingerprinted."""
        if spec.files and f"#{spec.files}" not in encoder.identity:
            raise UserError(f"model {spec.name}: {self.where()}'s copy of {spec.spec} holds other files than the "
                            f"coordinator's (fingerprint {spec.files}); put the same model folder at that path on "
                            "every worker, or restart the workers after replacing it")

    def _evict(self) -> None:
        limit = self.worker.memory_manager.memory_limit if self.worker is not None else None
        if not limit:
            return  # not set up on a worker, or a worker without a limit: keep them all
        import gc

        import psutil

        while len(self.loaded) > 1 and psutil.Process().memory_info().rss > MODEL_SHARE * limit:
            self.loaded.popitem(last=False)
            gc.collect()

    def bound(self, spec: ModelSpec, seed: int, bound_to: tuple | None):
        from tecb_eval.mteb.encoders import bound_to_task

        encoder = self.model(spec, seed)
        return encoder if bound_to is None else bound_to_task(encoder, bound_to)

    def describe(self, spec: ModelSpec, seed: int, bound_to: tuple | None) -> dict:
        """What the coordinator reads of ``spec`` (bound to a dataset's task): the identity an
        in-process run computes, by the same code, its batch size and what its rows say."""
        from tecb_eval.models.encoders import encoding_fields

        encoder = self.bound(spec, seed, bound_to)
        if not encoder.length_sorted_batches:
            raise RuntimeError(f"{spec.name}: the worker opened a {type(encoder).__name__}, not a "
                               "sentence-transformers model; its files differ from the coordinator's")
        return {"identity": encoder.identity, "batch_size": int(encoder.batch_size),
                "per_task": encoder.per_task, "fields": encoding_fields(encoder)}

    def encode_shard(self, spec: ModelSpec, seed: int, bound_to: tuple | None, identity: str,
                     batches: list[list[str]]):
        """``batches`` encoded one call each by this worker's copy of the model, bound to the
        dataset's task: the vectors in the batches' order and what the model's max_length cut of
        the shard's texts (``{"texts", "tokens"}``)."""
        encoder = self.bound(spec, seed, bound_to)
        if encoder.identity != identity:
            # The copy held may be older than its files (a Hub id whose cached snapshot moved, a
            # package upgraded under a running worker): they are read again, once.
            self.forget(spec, seed)
            encoder = self.bound(spec, seed, bound_to)
        if encoder.identity != identity:
            raise UserError(f"model {spec.name}: {self.where()} loads it from its files as {encoder.identity}, the "
                            f"coordinator as {identity}; install the same model files and package versions on "
                            "every worker")
        # This shard's own count: the model's shared one is another task's too on a multi-threaded worker.
        encoder = copy.copy(encoder)
        encoder.truncated = {"texts": 0, "tokens": 0}
        vectors = np.concatenate([np.asarray(encoder.encode(batch)) for batch in batches])
        return vectors, encoder.truncated


def models_here() -> WorkerModels:
    """The models of the Dask worker this task runs on (the plugin the coordinator registered)."""
    from distributed import get_worker

    worker = get_worker()
    plugin = models_of(worker)
    if plugin is None:  # the coordinator registers it before its first task: a bug if missing
        raise RuntimeError(f"Dask worker {worker.address} has no {PLUGIN_NAME} plugin")
    return plugin


# -- the tasks the coordinator submits ------------------------------------------------------------
def check_on_worker(specs: list[ModelSpec]) -> None:
    """What the coordinator left to a worker of its preflight: each model's device and files, as this
    worker's torch and transformers see them (one line per problem, as a run in-process says it)."""
    from tecb_eval.models import encoders

    for spec in specs:
        if spec.files and not Path(str(spec.spec)).is_dir():
            raise UserError(f"model {spec.name}: {_where()} has no folder {spec.spec} (the model folder is on the "
                            "coordinator's machine); put the same folder at that path on every worker, or name a "
                            "Hub id")
        encoders.preflight(spec.spec, **spec.options)


def _where() -> str:
    try:
        from distributed import get_worker

        return f"Dask worker {get_worker().address}"
    except ValueError:
        return "this process"


def describe_model(spec: ModelSpec, seed: int, bound_to: tuple | None) -> dict:
    """:meth:`WorkerModels.describe` on the worker this task runs on."""
    return models_here().describe(spec, seed, bound_to)


def encode_shard(spec: ModelSpec, seed: int, bound_to: tuple | None, identity: str, batches: list[list[str]]):
    """One encode task: :meth:`WorkerModels.encode_shard` on the worker it runs on, and that worker's address."""
    from tecb_eval.grid.work import dask_worker_address

    vectors, truncated = models_here().encode_shard(spec, seed, bound_to, identity, batches)
    return vectors, truncated, dask_worker_address()


def models_of(dask_worker) -> WorkerModels | None:
    """``dask_worker``'s models (what ``client.run`` passes a function that names it); None before
    a coordinator registered the plugin there."""
    return dask_worker.plugins.get(PLUGIN_NAME)


def held_keys(dask_worker) -> list[tuple]:
    """The keys of the models a worker holds (``client.run(held_keys)``): where a model's shards go first."""
    plugin = models_of(dask_worker)
    return [] if plugin is None else plugin.keys()


def warm_up_worker() -> None:
    """Import what encoding needs, once, when a worker starts (``dask worker --preload``)."""
    import sentence_transformers  # noqa: F401
    import torch  # noqa: F401


def dask_setup(worker) -> None:  # the hook `dask worker --preload tecb_eval.grid.worker_models` calls
    from tecb_eval.grid.worker_memory import reuse_freed_memory

    reuse_freed_memory()
    warm_up_worker()
