"""Encode tasks on a Dask cluster (``run_grid(scheduler=...)``, ``--scheduler``): each (model,
shard of the unique texts the embedding store lacks) is one Dask task.

Shards are cut on the encoder's own batch boundaries, in its own order: the texts go in chunks of
:data:`~tecb_eval.grid.cache.ENCODE_CHUNK` as an in-process run sends them, each chunk is put in
the order sentence-transformers puts it (longest first, ``numpy.argsort`` of the negated lengths,
as ``SentenceTransformer.encode`` does), and a shard is a run of whole batches of that order. A
worker encodes each batch by itself, so every batch holds the texts it holds in-process and the
vectors are those of the same model in-process on the same device, dtype and thread count.

Workers keep the models they loaded (:mod:`tecb_eval.grid.worker_models`, the worker's side: a
worker plugin this module registers), so a second model, a second dataset, a second run or a
second client on a warm cluster loads nothing again. A worker's model must have the identity the
coordinator was given (by the first worker that opened it), or the task fails: a vector under one
identity is never another model's. The coordinator alone writes the embedding store, one
atomic shard per finished task: a worker killed mid-shard leaves no half shard, and Dask runs the
shard again elsewhere.

The coordinator never loads such a model: a worker opens it and says what the plan, the stores and
the rows read of it (its identity, computed by the same code a run in-process uses, its batch size,
its prompt per dataset), so a client that plans, reads the stores and writes results imports no
torch, transformers, sentence-transformers or mteb (:class:`RemoteEncoder`). A model's shards may
start while the model before it is still clustering (:meth:`ClusterEncoder.start`, at a lower
priority than the units), and they prefer the workers that hold the model already.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from tecb_data.errors import UserError
from tecb_eval.files import short_hash
from tecb_eval.grid.cache import ENCODE_CHUNK, EmbeddingStore, text_key
from tecb_eval.grid.silent_workers import SILENCE_SECONDS, SilentWorkers
from tecb_eval.models.kinds.common import Encoder
from tecb_eval.models.spec import ModelSpec

# Seconds to wait for the workers to say which models they hold: a quick question for a worker that answers.
_HOLDERS_TIMEOUT = 10.0
ENCODE_ON = (None, "any", "gpu")  # --encode-on: any worker, or only those with Dask's GPU resource
NEXT_MODEL_PRIORITY = -1  # the next model's shards fill the slots the current model's units leave free
SHARDS_PER_WORKER = 8  # enough shards that a slow or lost worker, or a shard of long texts, holds up little
MAX_ATTEMPTS = 4  # per shard: its worker may die 3 times


def opens_on_a_worker(spec: ModelSpec) -> bool:
    """Whether a worker opens ``spec`` and the coordinator only describes it, as its kind says (a
    sentence-transformers model named by text, told from its files alone: no torch here). The
    others (a layer's mean pooling in torch, the built-in non-neural models, ``mteb:`` models,
    encoder objects) open where the grid runs."""
    from tecb_eval.models import registry

    return registry.kind_of(spec.spec).opens_on_a_worker(spec.spec, spec.options)


def on_cluster(encoder) -> str:
    """" on the Dask workers of ADDRESS" where a cluster encodes ``encoder``'s texts, else ""."""
    return f" on the Dask workers of {encoder.scheduler}" if encoder.scheduler else ""


def binding(encoder, bench, protocol: str) -> tuple | None:
    """What a worker needs to bind the model to the dataset's MTEB task (its prompt), as
    :func:`tecb_eval.mteb.encoders.encoder_for_dataset` does here; None for a model without one."""
    from tecb_eval.mteb.encoders import task_binding

    return task_binding(bench, protocol) if encoder.per_task else None


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


def worker_side():
    """:mod:`tecb_eval.grid.worker_models`, the workers' side, imported once a cluster encodes
    (it imports distributed, which a run without a scheduler never needs)."""
    from tecb_eval.grid import worker_models

    return worker_models


def for_workers(spec: ModelSpec) -> ModelSpec:
    """``spec`` as the workers get it: a model folder this machine holds by its absolute path and
    the fingerprint of its files, so that a worker opens the folder the user named (never one of
    the same relative name in its own working folder) and keeps it by what it holds (files
    replaced in place are another model)."""
    from pathlib import Path

    from tecb_eval.models.kinds.common import folder_digest

    if spec.files or not isinstance(spec.spec, (str, Path)):
        return spec
    folder = Path(str(spec.spec)).expanduser()
    if not folder.is_dir():
        return spec  # a built-in name or a Hub id: the worker resolves it as this process would
    return dataclasses.replace(spec, spec=str(folder.resolve()), files=folder_digest(folder))


# -- on the coordinator -----------------------------------------------------------------------
class RemoteEncoder(Encoder):
    """The coordinator's stand-in for a model a worker holds: what the plan, the stores and the rows
    read of an encoder (identity, batch size, prompt, backend, dtype, folder), as a worker described
    it. It encodes nothing here; :class:`ClusterEncoder` sends its texts to the cluster."""

    def __init__(self, spec: ModelSpec, seed: int, bound_to: tuple | None, described: dict, truncated: dict):
        self.spec, self.seed, self.bound_to = spec, seed, bound_to
        self.identity = described["identity"]
        self.batch_size = described["batch_size"]
        self.per_task = described["per_task"]
        fields = described["fields"]
        # encoders.encoding_fields reads these, so a row says what an in-process run's row says.
        self.prompt, self.backend, self.dtype = fields.get("prompt"), fields.get("backend"), fields.get("dtype")
        if fields.get("model_location"):
            self.location = fields["model_location"]
        self.truncated = truncated  # shared by the per-dataset copies, as the model's own count is

    def encode(self, texts):
        raise RuntimeError(f"{self.spec.name} is held by the Dask workers: its texts are encoded there")


@dataclass
class Started:
    """A model's shards on the cluster, not yet written to its store."""

    spec: ModelSpec
    encoder: RemoteEncoder
    pieces: list
    running: dict = field(default_factory=dict)  # future -> shard index
    attempts: list = field(default_factory=list)


def _offering(client, resources: dict) -> list[str]:
    """The workers that offer every resource encode tasks ask for."""
    workers = client.scheduler_info(n_workers=-1).get("workers", {})
    return sorted(w for w, info in workers.items()
                  if all(float((info.get("resources") or {}).get(k, 0)) >= v for k, v in resources.items()))


class ClusterEncoder:
    """Describes models and sends their missing texts to the cluster as shard tasks; the
    coordinator writes each finished shard to the embedding store."""

    def __init__(self, client, log, resources: dict | None = None, silence: float = SILENCE_SECONDS):
        self.client, self.log, self.resources = client, log, resources or {}
        self.silence = silence  # seconds without a finished shard before a silent worker is named
        self.shards: dict[str, Counter] = {}  # model name -> {worker address: shards it encoded}
        self.address = str(getattr(client.scheduler, "address", "") or "")
        self._sent: dict[tuple, ModelSpec] = {}  # a run fingerprints each model folder once
        # Once per cluster: a second client finds the plugin, and the models, the first one left.
        client.register_plugin(worker_side().WorkerModels())

    def _for_workers(self, spec: ModelSpec) -> ModelSpec:
        key = (str(spec.spec), spec.name, repr(sorted(spec.options.items())))
        if key not in self._sent:
            self._sent[key] = for_workers(spec)
        return self._sent[key]

    def _call(self, what: str, function, *args, **options):
        """One task's result, a lost worker retried; a cluster that stops answering: one line."""
        from distributed import KilledWorker

        from tecb_eval.grid.dask_executor import worker_lost

        for attempt in range(MAX_ATTEMPTS):
            try:
                future = self.client.submit(function, *args, pure=False, resources=self.resources, **options)
                with SilentWorkers(self.client, self.log, what, self.silence, {future: None}):
                    return future.result()
            except KilledWorker:
                # Dask has tried it on several workers already, each of which died running it.
                raise UserError(f"{what}: every Dask worker that tried it died (Dask gave up after several); "
                                "most often the model does not fit a worker's memory: give the workers a higher "
                                "--memory-limit or more memory, or use a smaller model") from None
            except ImportError as exc:  # raised on the worker: a package it lacks or cannot load
                raise UserError(f"{what}: a Dask worker cannot import {exc.name or 'a module'} ({exc}); install "
                                "tecb with the same extras on every worker") from None
            except Exception as exc:  # noqa: BLE001 -- a lost worker is retried, the task's own error is not
                if worker_lost(exc) and attempt == MAX_ATTEMPTS - 1:
                    raise UserError(f"{what}: its Dask worker was lost {MAX_ATTEMPTS} times (out of memory?); give "
                                    "the workers more memory or use a smaller model") from None
                if not (worker_lost(exc) or isinstance(exc, OSError)) or attempt == MAX_ATTEMPTS - 1:
                    if isinstance(exc, OSError):
                        raise UserError(f"the Dask cluster stopped answering while {what} "
                                        f"({type(exc).__name__}); rerun to resume") from None
                    raise

    def wait_for_resources(self, timeout: float, address: str, poll: float = 0.5) -> None:
        """Encode tasks that ask for a resource (``--encode-on gpu``: Dask's ``GPU``) which no worker
        offers would wait on the scheduler for ever: one line at once, then at most ``timeout``
        seconds (``--scheduler-timeout``) for such a worker to join, else one line and no run."""
        if not self.resources or _offering(self.client, self.resources):
            return
        wanted = ", ".join(f"{k}={v:g}" for k, v in sorted(self.resources.items()))
        self.log(f"no Dask worker at {address} offers the resource {wanted} that --encode-on gpu asks for; "
                 f"waiting up to {timeout:g} s (--scheduler-timeout) for one to join")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
            if _offering(self.client, self.resources):
                return
        raise UserError(f"no Dask worker at {address} offers the resource {wanted} after {timeout:g} s: start one "
                        f"with `dask worker {address} --resources GPU=1` on a machine with a GPU, or leave "
                        "--encode-on gpu out")

    def preflight(self, specs: list[ModelSpec]) -> None:
        """The workers' share of the preflight (device, model files), before any model is opened."""
        if specs:
            self._call("checking the models", worker_side().check_on_worker, [self._for_workers(spec) for spec in specs])

    def describe(self, spec: ModelSpec, seed: int, bound_to: tuple | None = None,
                 truncated: dict | None = None) -> RemoteEncoder:
        """``spec`` as a worker opened it (and keeps it), bound to a dataset's task where it has one."""
        spec = self._for_workers(spec)
        described = self._call(f"opening {spec.name}", worker_side().describe_model, spec, seed, bound_to,
                               **self._prefer(spec, seed))
        encoder = RemoteEncoder(spec, seed, bound_to, described,
                                truncated if truncated is not None else {"texts": 0, "tokens": 0})
        encoder.scheduler = self.address
        return encoder

    def bind(self, encoder: RemoteEncoder, bound_to: tuple | None) -> RemoteEncoder:
        """``encoder`` for one dataset's task (its prompt, its identity), as a worker binds it."""
        if bound_to is None or not encoder.per_task:
            return encoder
        return self.describe(encoder.spec, encoder.seed, bound_to, encoder.truncated)

    def _holders(self, spec: ModelSpec, seed: int) -> tuple[list[str], int]:
        """The workers that hold ``spec`` loaded, and how many workers there are."""
        key = worker_side().model_key(spec, seed)
        try:
            # Bounded: a worker that stops answering (SIGSTOP) would hold this question for ever;
            # without the answer no worker is preferred, and the wait for the shards names it.
            held = self.client.run(worker_side().held_keys, on_error="return",
                                   callback_timeout=min(self.silence, _HOLDERS_TIMEOUT))
        except OSError:  # distributed's TimeoutError is one
            return [], _workers_known(self.client)
        holders = sorted(w for w, keys in held.items() if not isinstance(keys, BaseException) and key in map(tuple, keys))
        return holders, len(held)

    def _prefer(self, spec: ModelSpec, seed: int) -> dict:
        """Dask's own placement hint for one task: the workers already holding the model (loose, so
        that an idle worker still takes or steals it); none where no worker or every worker holds it."""
        return _hint(*self._holders(spec, seed))

    def start(self, encoder: RemoteEncoder, todo: list[str], *, priority: int = 0) -> Started:
        """Submit ``todo``'s shards (distinct texts the store lacks); :meth:`finish` writes them.
        Where some workers hold the model, they are preferred for their share of the shards (every
        n-th, so that they get long and short ones); the rest go to whoever is free, which loads the
        model once: a model's first run does not wait on the one worker that described it."""
        ordered = sorted(todo)
        ordered.sort(key=len)  # as EmbeddingStore.encode_missing orders an in-process encoding
        holders, workers = self._holders(encoder.spec, encoder.seed)
        workers = max(1, workers)
        pieces = shards(ordered, int(encoder.batch_size), workers)
        started = Started(encoder.spec, encoder, pieces, attempts=[0] * len(pieces))
        prefer = _hint(holders, workers)
        try:
            for index in range(len(pieces)):
                self._submit(started, index, priority, prefer if index % workers < len(holders) else {})
        except BaseException:
            self.cancel(started)
            raise
        return started

    def _submit(self, started: Started, index: int, priority: int = 0, prefer: dict | None = None):
        encoder = started.encoder
        name = short_hash(encoder.identity, *(t for batch in started.pieces[index] for t in batch[:1]))
        try:
            future = self.client.submit(worker_side().encode_shard, started.spec, encoder.seed, encoder.bound_to,
                                        encoder.identity, started.pieces[index],
                                        key=f"tecb-encode-{name}-{index}-{started.attempts[index]}", pure=False,
                                        resources=self.resources, priority=priority, **(prefer or {}))
        except OSError as exc:
            raise UserError(f"the Dask cluster stopped taking work while encoding with {started.spec.name} "
                            f"({type(exc).__name__}); the shards finished before are stored: rerun to resume") from None
        started.running[future] = index
        return future

    def cancel(self, started: Started) -> None:
        """Take ``started``'s shards off the cluster (an interrupted or failed run leaves no work there)."""
        if started.running:
            try:
                self.client.cancel(list(started.running))
            except Exception:  # noqa: BLE001 -- a cluster already gone holds nothing of ours
                pass
            started.running.clear()

    def finish(self, started: Started, store: EmbeddingStore, progress=None) -> None:
        """Wait for ``started``'s shards and write each to ``store`` as it comes (one atomic shard each)."""
        try:
            self._collect(started, store, progress)
        finally:
            self.cancel(started)  # after an error or Ctrl-C: nothing of ours keeps running

    def _collect(self, started: Started, store: EmbeddingStore, progress) -> None:
        from distributed import as_completed

        from tecb_eval.grid.dask_executor import worker_lost

        spec = started.spec
        completed = as_completed(list(started.running), loop=self.client.loop, raise_errors=False)
        with SilentWorkers(self.client, self.log, f"encoding with {spec.name}", self.silence, started.running) as watch:
            for future in completed:
                watch.progressed()
                index = started.running.pop(future)
                try:
                    vectors, truncated, worker = future.result()
                except Exception as exc:  # noqa: BLE001 -- a lost worker is retried, its own error is not
                    if not (worker_lost(exc) or isinstance(exc, OSError)):
                        raise
                    started.attempts[index] += 1
                    if started.attempts[index] >= MAX_ATTEMPTS:
                        raise UserError(f"encoding with {spec.name}: a shard's Dask worker was lost {MAX_ATTEMPTS} "
                                        "times (out of memory?); the shards finished before are stored: rerun to "
                                        "resume") from None
                    self.log(f"note: encoding with {spec.name}: a shard's worker was lost; encoding it again")
                    completed.add(self._submit(started, index))
                    continue
                texts = [t for batch in started.pieces[index] for t in batch]
                if vectors.ndim != 2 or len(vectors) != len(texts):
                    raise ValueError(f"a worker returned shape {vectors.shape} for {len(texts)} texts")
                rows = {text_key(t): i for i, t in enumerate(texts)}
                # One atomic store shard per task: the store's own writer, handed the worker's vectors.
                store.encode_missing(texts, lambda batch: vectors[[rows[text_key(t)] for t in batch]],
                                     chunk=len(texts))
                self.shards.setdefault(spec.name, Counter())[worker] += 1
                counted = started.encoder.truncated
                counted["texts"] += truncated["texts"]
                counted["tokens"] += truncated["tokens"]
                if progress is not None:
                    progress(len(texts))

    def encode(self, encoder: RemoteEncoder, todo: list[str], store: EmbeddingStore, progress=None) -> None:
        """Encode ``todo`` (distinct texts the store lacks) on the cluster into ``store``."""
        self.finish(self.start(encoder, todo), store, progress)


def _workers_known(client) -> int:
    """How many workers the scheduler lists (0 if it cannot be asked)."""
    try:
        return len(client.scheduler_info(n_workers=-1).get("workers", {}))
    except OSError:
        return 0


def _hint(holders: list[str], workers: int) -> dict:
    """Dask's ``submit`` options that prefer ``holders`` (loose: another worker may still take the
    task); none where no worker or every one of the ``workers`` holds the model."""
    return {"workers": holders, "allow_other_workers": True} if 0 < len(holders) < workers else {}
