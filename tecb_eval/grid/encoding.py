"""The grid's encoding: which texts each model still needs, encoded once and written to the
embedding store (:class:`~tecb_eval.grid.cache.EmbeddingStore`, in chunks saved as they finish).

A model is opened once per run; a per-dataset encoder (tfidf-lsa's fit, a prompt bound to the
dataset's MTEB task) once per dataset; every text a pending cell needs and the store lacks is
encoded in one pass per encoder, across datasets and seeds.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from tecb_data.progress import Progress
from tecb_eval.grid.cache import EmbeddingStore
from tecb_eval.grid.cluster_encode import binding, runs_on_cluster
from tecb_eval.grid.ledger import Ledger
from tecb_eval.grid.plan import Pending
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

    def open(self, spec: ModelSpec) -> ModelRun:
        opened, self._opened = self._opened, None
        if opened is not None and opened.spec == spec:
            return opened
        return open_model(spec, self.seed)

    def encoder_for(self, run: ModelRun, bench):
        if bench.fingerprint not in run.dataset_encoders:
            run.dataset_encoders[bench.fingerprint] = encoder_for_dataset(run.encoder, bench, self.protocol)
        return run.dataset_encoders[bench.fingerprint]

    def embedding_store(self, encoder) -> EmbeddingStore:
        persistent = getattr(encoder, "persistent", True)
        return EmbeddingStore(self.cache_dir if persistent else None, encoder.identity)

    def encode_pending(self, run: ModelRun, work: list[Pending]) -> dict:
        """Encode what ``work`` needs and the stores lack; the embeddings per encoder identity."""
        stores: dict[str, EmbeddingStore] = {}
        needed: dict[str, list[str]] = {}
        for item in work:
            if item.encoder.identity not in stores:
                stores[item.encoder.identity] = self.embedding_store(item.encoder)
            needed.setdefault(item.encoder.identity, []).extend(t for unit, _, _ in item.cells for t in unit.base_texts)
        # Which of each dataset's texts this run encodes and which the cache holds (the summary says both).
        missing_before: dict[str, set] = {}
        wanted: dict[str, set] = {}
        for item in work:
            texts = {t for unit, _, _ in item.cells for t in unit.base_texts}
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
        if not todo:
            return
        started = time.perf_counter()
        counted = getattr(encoder, "truncated", None)
        before = dict(counted) if isinstance(counted, dict) else None
        with Progress(total=len(todo), desc=f"encoding with {run.spec.name}", unit="texts",
                      enabled=self.progress) as bar:
            if self.cluster is not None and runs_on_cluster(run.spec, encoder):
                bound_to = binding(run.encoder, item.bench, self.protocol)
                self.cluster.encode(run.spec, self.seed, bound_to, encoder, todo, store, progress=bar.update)
            else:
                store.encode_missing(todo, encoder.encode, progress=bar.update)
        if before is not None and counted["texts"] > before["texts"]:
            # Text past the model's max_length is not encoded: said, never silent.
            prompt = " with its prompt" if getattr(encoder, "prompt", None) else ""
            self.log(f"note: {run.spec.name}: {counted['texts'] - before['texts']:,} of {len(todo):,} texts were "
                     f"longer{prompt} than the model's max_length and were cut ({counted['tokens'] - before['tokens']:,} "
                     "tokens not encoded)")
        self.ledger.add_encoding(run.spec.name, time.perf_counter() - started, len(todo))
