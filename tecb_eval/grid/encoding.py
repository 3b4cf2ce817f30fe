"""The grid's encoding: which texts each model still needs, encoded once and written to the
embedding store (:class:`~tecb_eval.grid.cache.EmbeddingStore`, in chunks saved as they finish).

A model is opened once per run; a per-dataset encoder (tfidf-lsa's fit, a prompt bound to the
dataset's MTEB task) once per dataset; every text a pending cell needs and the store lacks is
encoded in one pass per encoder, across datasets and seeds.

On a Dask cluster (:mod:`tecb_eval.grid.cluster_encode`) a sentence-transformers model is opened
by the workers, not here, and its texts are encoded there; the next model's shards may be started
(:meth:`Encoding.prefetch`) while this one's units cluster.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from tecb_data.progress import Progress
from tecb_eval.grid.cache import EmbeddingStore, text_key
from tecb_eval.grid.cluster_encode import NEXT_MODEL_PRIORITY, binding, on_cluster, opens_on_a_worker
from tecb_eval.grid.ledger import Ledger
from tecb_eval.grid.plan import Pending
from tecb_eval.models import encoders
from tecb_eval.models.spec import ModelRun, ModelSpec, open_model
from tecb_eval.mteb.encoders import encoder_for_dataset


class Encoding:
    def __init__(self, *, cache_dir: Path | None, protocol: str, seed: int, ledger: Ledger, progress: bool,
                 log: Callable[[str], None], opened: ModelRun | None = None):
        """``opened``: a model already opened (run_grid's first, loaded while MTEB drew)."""
        self.cache_dir, self.protocol, self.seed = cache_dir, protocol, seed
        self.ledger, self.progress, self.log = ledger, progress, log
        self._opened = opened
        self.cluster = None  # a ClusterEncoder (tecb_eval.grid.cluster_encode): encode tasks on Dask
        self._started: dict = {}  # encoder identity -> its shards started ahead (prefetch), not yet stored
        self._stores: dict = {}  # encoder identity -> the store prefetch read, for encode_pending to write

    def open(self, spec: ModelSpec) -> ModelRun:
        opened, self._opened = self._opened, None
        if opened is not None and opened.spec == spec:
            return opened
        if self.cluster is not None and opens_on_a_worker(spec):
            return ModelRun(spec, self.cluster.describe(spec, self.seed))  # no torch here: a worker opens it
        return open_model(spec, self.seed)

    def encoder_for(self, run: ModelRun, bench):
        if bench.fingerprint not in run.dataset_encoders:
            if run.encoder.scheduler:  # held by the Dask workers: they bind it
                bound = self.cluster.bind(run.encoder, binding(run.encoder, bench, self.protocol))
            else:
                bound = encoder_for_dataset(run.encoder, bench, self.protocol)
            run.dataset_encoders[bench.fingerprint] = bound
        return run.dataset_encoders[bench.fingerprint]

    def prefetch(self, run: ModelRun, work: list[Pending]) -> None:
        """Start ``work``'s encoding on the cluster now, below the running units' priority, so that
        this model's shards fill the workers the model before it leaves idle while it clusters;
        :meth:`encode_pending` writes them."""
        if self.cluster is None:
            return
        for identity, (encoder, texts) in self._needed(work).items():
            if identity in self._started or not encoder.scheduler:
                continue
            store = self._stores[identity] = self.embedding_store(encoder)
            todo = store.missing(texts)
            if todo:
                self._started[identity] = self.cluster.start(encoder, todo, priority=NEXT_MODEL_PRIORITY)

    def cancel_started(self) -> None:
        """Take the shards started ahead off the cluster (a run that ends early leaves no work there)."""
        while self._started:
            self.cluster.cancel(self._started.popitem()[1])

    @staticmethod
    def _needed(work: list[Pending]) -> dict:
        """Per encoder identity: the encoder and every text its pending cells need."""
        needed: dict[str, tuple] = {}
        for item in work:
            _, texts = needed.setdefault(item.encoder.identity, (item.encoder, []))
            texts.extend(t for unit, *_ in item.cells for t in unit.base_texts)
        return needed

    def embedding_store(self, encoder) -> EmbeddingStore:
        return EmbeddingStore(self.cache_dir if encoder.persistent else None, encoder.identity)

    def encode_pending(self, run: ModelRun, work: list[Pending]) -> dict:
        """Encode what ``work`` needs and the stores lack; the embeddings per encoder identity."""
        needed = {identity: texts for identity, (_, texts) in self._needed(work).items()}
        stores: dict[str, EmbeddingStore] = {}
        for item in work:
            if item.encoder.identity not in stores:
                # The store prefetch read already, if it did: the cache is read once per model.
                ahead = self._stores.pop(item.encoder.identity, None)
                stores[item.encoder.identity] = ahead if ahead is not None else self.embedding_store(item.encoder)
        # Which of each dataset's texts this run encodes and which the cache holds (the summary says both).
        missing_before: dict[str, set] = {}
        wanted: dict[str, set] = {}
        for item in work:
            texts = {t for unit, *_ in item.cells for t in unit.base_texts}
            wanted.setdefault(item.bench.name, set()).update(texts)
            missing_before.setdefault(item.bench.name, set()).update(stores[item.encoder.identity].missing(texts))
        for name, texts in wanted.items():
            self.ledger.of(name)["texts"] += len(texts)  # this model's; each model encodes its own
        started = time.perf_counter()
        for item in work:
            if item.encoder.identity in needed:
                self._encode(run, item, needed.pop(item.encoder.identity), stores[item.encoder.identity])
        self.ledger.add_wall("encode", time.perf_counter() - started)
        for name, todo in missing_before.items():
            self.ledger.of(name)["encoded"] += len(todo)
        return {identity: store.embeddings() for identity, store in stores.items()}

    def _encode(self, run: ModelRun, item: Pending, texts: list[str], store: EmbeddingStore) -> None:
        encoder = item.encoder
        todo = store.missing(texts)
        encoder.note_cache_hits(len(set(texts)) - len(todo))  # a paid endpoint counts what it was spared
        missing = set(todo)
        # An endpoint whose model may change under its name is asked again for one cached text.
        encoders.check_cache(encoder, [t for t in set(texts) if t not in missing],
                             lambda text: store.embeddings().rows([text])[0], text_key)
        if not todo:
            return
        started = time.perf_counter()
        counted = encoder.truncated
        before = dict(counted) if counted is not None else None
        where = on_cluster(encoder)
        with Progress(total=len(todo), desc=f"encoding with {run.spec.name}{where}", unit="texts",
                      enabled=self.progress) as bar:
            ahead = self._started.pop(encoder.identity, None)
            if ahead is not None:  # its shards ran while the model before clustered
                self.cluster.finish(ahead, store, progress=bar.update)
            rest = store.missing(todo)
            if rest and encoder.scheduler:
                self.cluster.encode(encoder, rest, store, progress=bar.update)
            elif rest and encoder.in_batches:
                # An endpoint answers batch by batch: each is stored before more is sent.
                store.save_batches(rest, encoder.encode_batches, progress=bar.update)
            elif rest:
                store.encode_missing(rest, encoder.encode, progress=bar.update)
        if before is not None and counted["texts"] > before["texts"]:
            # Text past the model's max_length is not encoded: said, never silent.
            prompt = " with its prompt" if encoder.prompt else ""
            self.log(f"note: {run.spec.name}: {counted['texts'] - before['texts']:,} of {len(todo):,} texts were "
                     f"longer{prompt} than the model's max_length and were cut ({counted['tokens'] - before['tokens']:,} "
                     "tokens not encoded)")
        self.ledger.add_encoding(run.spec.name, time.perf_counter() - started, len(todo))
