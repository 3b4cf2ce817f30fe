"""The model x dataset x reduction x algorithm grid: plan, encode once, reduce once, cluster, store.

Per model: every text that any remaining cell needs and the embedding cache lacks is encoded in
one pass (chunks saved as they finish). Per (split, reduction): the reduction is computed once
(or read from the reduction cache) and every algorithm clusters it. Every finished cell is one
fsynced line in the results store; a rerun skips the cells the store already holds.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from sklearn import metrics
from tqdm.auto import tqdm

import tecb_data
from tecb_data.errors import UserError
from tecb_eval import algorithms as algo, encoders, protocols
from tecb_eval.profiles import DEFAULT_PROFILE, get_profile
from tecb_eval.cache import EmbeddingStore, ReductionCache
from tecb_eval.store import ResultsStore, cell_key, rows_frame, seed_set_name

DEFAULT_SEED = 42


@dataclass(frozen=True)
class ModelSpec:
    """One grid row: what to encode with, and under which name tables show it."""

    spec: object  # built-in name, folder, Hub id, or an encoder object
    name: str
    options: dict = field(default_factory=dict)  # layer, max_length, batch_size, device, ...


def model_spec(item) -> ModelSpec:
    """Accepts a spec, (name, spec), a dict {spec, name, layer, ...} or a ModelSpec."""
    if isinstance(item, ModelSpec):
        return item
    if isinstance(item, tuple) and len(item) == 2:
        return ModelSpec(item[1], str(item[0]))
    if isinstance(item, dict):
        options = {k: v for k, v in item.items() if k not in ("spec", "name")}
        name = item.get("name") or encoders.display_name(item["spec"])
        if "layer" in options and "name" not in item:
            name = f"{name}-layer{options['layer']}"
        return ModelSpec(item["spec"], name, options)
    return ModelSpec(item, encoders.display_name(item))


def load_dataset(item):
    """A Benchmark, a folder, or ``repo_id[@revision]``: anything tecb_data.load accepts."""
    if isinstance(item, tecb_data.Benchmark):
        return item
    text = str(item)
    if not Path(text).exists() and "@" in text:
        repo_id, _, revision = text.partition("@")
        return tecb_data.load(repo_id, revision=revision)
    return tecb_data.load(text)


def encoder_for_dataset(encoder, bench):
    """The encoder itself, or for one fitted per dataset (tfidf-lsa), its fit on all the
    dataset's unique texts."""
    if not getattr(encoder, "per_dataset", False):
        return encoder
    return encoder.fit_corpus(sorted({t for s in bench.splits for t in s.texts}))


def clustering_metrics(gold: Sequence[str], predicted: np.ndarray) -> dict:
    homogeneity, completeness, v_measure = metrics.homogeneity_completeness_v_measure(gold, predicted)
    return {
        "v_measure": float(v_measure),
        "homogeneity": float(homogeneity),
        "completeness": float(completeness),
        "ami": float(metrics.adjusted_mutual_info_score(gold, predicted)),
        "ari": float(metrics.adjusted_rand_score(gold, predicted)),
        "noise_fraction": float(np.mean(predicted == -1)) if len(predicted) else 0.0,
        "n_clusters_found": int(len(set(predicted.tolist()) - {-1})),
    }


def _jsonable_params(estimator) -> dict:
    if estimator is None:
        return {}
    params = estimator.get_params(deep=False)
    return {k: v if isinstance(v, (int, float, str, bool, type(None))) else repr(v) for k, v in sorted(params.items())}


@dataclass
class _ModelRun:
    """One model's encoders and embeddings (per-dataset encoders get one per dataset)."""

    spec: ModelSpec
    encoder: object
    dataset_encoders: dict = field(default_factory=dict)  # dataset fingerprint -> fitted encoder


class Grid:
    def __init__(self, datasets, models, *, configurations, protocol, seed, cache_dir, store,
                 limit_splits=None, profile=DEFAULT_PROFILE, progress=True, log: Callable[[str], None] | None = None):
        self.benchmarks = [load_dataset(d) for d in datasets]
        self.models = [model_spec(m) for m in models]
        self.configurations = configurations
        self.protocol = protocol
        self.seed = seed
        self.profile = get_profile(profile)
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self.store = store
        self.progress = progress
        self.log = log or (lambda message: print(message, file=sys.stderr))
        self.units = {
            b.fingerprint: protocols.units_for(b, protocol, seed, limit_splits=limit_splits)
            for b in self.benchmarks
        }
        self.reductions = ReductionCache(self.cache_dir)
        self.encode_seconds: dict[str, float] = {}
        self.encoded_texts: dict[str, int] = {}
        self.rows: list[dict] = []

    # -- planning ---------------------------------------------------------------------------
    def _key(self, name: str, identity: str, bench, unit, reduction: str, algorithm: str) -> tuple:
        return cell_key({
            "protocol": self.protocol, "profile": self.profile.name, "seeds": seed_set_name([self.seed]), "seed": self.seed, "model": name, "model_identity": identity,
            "dataset_fingerprint": bench.fingerprint, "reduction": reduction, "algorithm": algorithm,
            "split": unit.name,
        })

    def total_cells(self) -> int:
        return len(self.models) * sum(len(u) for u in self.units.values()) * len(self.configurations)

    # -- encoding ---------------------------------------------------------------------------
    def _open_model(self, spec: ModelSpec) -> _ModelRun:
        options = {"seed": self.seed, **spec.options}
        encoder = encoders.get_encoder(spec.spec, **options)
        return _ModelRun(spec, encoder)

    def _encoder_for(self, run: _ModelRun, bench):
        if bench.fingerprint not in run.dataset_encoders:
            run.dataset_encoders[bench.fingerprint] = encoder_for_dataset(run.encoder, bench)
        return run.dataset_encoders[bench.fingerprint]

    def _embedding_store(self, encoder) -> EmbeddingStore:
        persistent = getattr(encoder, "persistent", True)
        return EmbeddingStore(self.cache_dir if persistent else None, encoder.identity)

    def _encode(self, run: _ModelRun, encoder, texts: list[str], store: EmbeddingStore) -> None:
        todo = store.missing(texts)
        if not todo:
            return
        started = time.perf_counter()
        with tqdm(total=len(todo), desc=f"encoding with {run.spec.name}", unit=" texts",
                  disable=not self.progress, leave=False) as bar:
            store.encode_missing(todo, encoder.encode, progress=bar.update)
        seconds = time.perf_counter() - started
        self.encode_seconds[run.spec.name] = self.encode_seconds.get(run.spec.name, 0.0) + seconds
        self.encoded_texts[run.spec.name] = self.encoded_texts.get(run.spec.name, 0) + len(todo)

    # -- running ----------------------------------------------------------------------------
    def run(self) -> pd.DataFrame:
        total = self.total_cells()
        with tqdm(total=total, desc="grid cells", unit=" cells", disable=not self.progress, smoothing=0.05) as bar:
            for spec in self.models:
                self._run_model(spec, bar)
        return rows_frame(self.rows)

    def _pending(self, name: str, identity: str, bench) -> list[tuple]:
        return [
            (unit, reduction, algorithm)
            for unit in self.units[bench.fingerprint]
            for algorithm, reduction in self.configurations
            if self._key(name, identity, bench, unit, reduction, algorithm) not in self.store
        ]

    def _run_model(self, spec: ModelSpec, bar) -> None:
        run = self._open_model(spec)
        work = []  # (bench, encoder, embedding store, pending cells)
        for bench in self.benchmarks:
            encoder = self._encoder_for(run, bench)
            pending = self._pending(spec.name, encoder.identity, bench)
            done = len(self.units[bench.fingerprint]) * len(self.configurations) - len(pending)
            for unit in self.units[bench.fingerprint]:
                for algorithm, reduction in self.configurations:
                    row = self.store.get(self._key(spec.name, encoder.identity, bench, unit, reduction, algorithm))
                    if row is not None:
                        self.rows.append(row)
            bar.update(done)
            work.append((bench, encoder, pending))
        # One encoding pass per encoder over every text a pending cell needs, across datasets.
        stores: dict[str, EmbeddingStore] = {}
        needed: dict[str, list[str]] = {}
        for bench, encoder, pending in work:
            if not pending:
                continue
            if encoder.identity not in stores:
                stores[encoder.identity] = self._embedding_store(encoder)
            needed.setdefault(encoder.identity, []).extend(t for unit, _, _ in pending for t in unit.base_texts)
        for bench, encoder, pending in work:
            if encoder.identity in needed:
                self._encode(run, encoder, needed.pop(encoder.identity), stores[encoder.identity])
        for bench, encoder, pending in work:
            if pending:
                self._run_cells(run, bench, stores[encoder.identity], pending, bar)

    def _run_cells(self, run: _ModelRun, bench, store: EmbeddingStore, pending, bar) -> None:
        embeddings = store.embeddings()
        seconds_per_text = (
            self.encode_seconds.get(run.spec.name, 0.0) / self.encoded_texts[run.spec.name]
            if self.encoded_texts.get(run.spec.name) else 0.0
        )
        by_base: dict[tuple, list] = {}
        for unit, reduction, algorithm in pending:
            by_base.setdefault((unit.base_name, reduction), []).append((unit, algorithm))
        for (base_name, reduction), cells in by_base.items():
            unit0 = cells[0][0]
            base = embeddings.rows(unit0.base_texts)
            fingerprint = embeddings.fingerprint(unit0.base_texts)
            started = time.perf_counter()
            before = self.reductions.computed
            reduced = base if reduction == "none" else self.reductions.get(
                fingerprint, reduction, self.seed, lambda: algo.reduce(reduction, base, self.seed)
            )
            reduce_seconds = time.perf_counter() - started
            reduce_cached = self.reductions.computed == before
            for unit, algorithm in cells:
                X = reduced if unit.rows is None else reduced[unit.rows]
                k = min(unit.k, X.shape[0])
                estimator = algo.make_algorithm(algorithm, k, self.seed, self.protocol, profile=self.profile)
                started = time.perf_counter()
                predicted = algo.cluster(estimator, X)
                cluster_seconds = time.perf_counter() - started
                row = {
                    "model": run.spec.name,
                    "model_identity": store.identity,
                    "dataset": bench.name,
                    "mteb_name": bench.mteb_name,
                    "dataset_fingerprint": bench.fingerprint,
                    "dataset_location": bench.location,
                    "protocol": self.protocol,
                    "profile": self.profile.name,
                    "seeds": seed_set_name([self.seed]),
                    "seed": self.seed,
                    "split": unit.name,
                    "n_samples": int(X.shape[0]),
                    "n_labels": int(unit.k),
                    "reduction": reduction,
                    "algorithm": algorithm,
                    **clustering_metrics(unit.labels, predicted),
                    "algorithm_params": json.dumps(_jsonable_params(estimator), sort_keys=True),
                    "reduction_params": json.dumps(
                        _jsonable_params(algo.make_reduction(reduction, self.seed)), sort_keys=True
                    ),
                    # Encoding is shared by every cell of a text; each cell carries its split's share.
                    "encode_s": seconds_per_text * len(set(unit0.base_texts)),
                    "reduce_s": 0.0 if reduce_cached else reduce_seconds,
                    "reduce_cached": bool(reduce_cached),
                    "cluster_s": cluster_seconds,
                }
                self.store.append(row)
                self.rows.append(row)
                bar.update(1)
                # The reduction's time is counted once, with the first algorithm that used it.
                reduce_cached = True


def run_grid(
    datasets,
    models,
    algorithms: Sequence[str] | None = None,
    reductions: Sequence[str] = algo.REDUCTIONS,
    *,
    configurations: Sequence | None = None,
    protocol: str = "legacy",
    seed: int = DEFAULT_SEED,
    cache_dir: str | Path | None = None,
    results: str | Path | None = None,
    limit_splits: int | None = None,
    profile: str = DEFAULT_PROFILE,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """Run (or resume) the grid and return one row per (model, dataset, reduction, algorithm, split).

    ``datasets``: folders, ``repo_id@revision`` strings or loaded benchmarks. ``models``: built-in
    names, model folders, Hub ids, encoder objects, ``(name, spec)`` pairs or dicts
    ``{"spec": ..., "name": ..., "layer": k, "max_length": n}``. ``configurations`` (pairs or
    ``"algorithm:reduction"`` strings) overrides the algorithms x reductions product, which skips
    HDBSCAN and DBSTREAM on unreduced embeddings as the paper did. The legacy protocol runs all
    four algorithms by default, the fast one (MTEB v2's bootstrapped k-means) only k-means.
    ``cache_dir`` keeps embeddings and reductions across runs; ``results`` is the JSONL store that
    makes the run resumable. ``profile`` is ``"current"`` (today's libraries) or ``"paper"`` (what
    the authors ran, e.g. river 0.14's DBSTREAM; see :mod:`tecb_eval.profiles`); every
    row names it.
    """
    say = log or (lambda message: print(message, file=sys.stderr))
    if protocol not in protocols.PROTOCOLS:
        raise UserError(f"unknown protocol {protocol!r}; choose from {', '.join(protocols.PROTOCOLS)}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise UserError(f"seed must be a non-negative integer, got {seed!r}")
    if algorithms is None:
        algorithms = algo.ALGORITHMS if protocol == "legacy" else ("minibatch_kmeans",)
    pairs, skipped = algo.configurations(algorithms, reductions, configurations)
    if skipped:
        say("skipping " + ", ".join(f"{a} on {r}" for a, r in skipped)
            + " (unreduced embeddings, as in the paper); ask for them explicitly with "
            + "configurations=[...] / --config ALGORITHM:none")
    if not pairs:
        raise UserError("no configuration left to run; name at least one algorithm and reduction")
    if not datasets:
        raise UserError("no datasets given")
    if not models:
        raise UserError("no models given")
    grid = Grid(datasets, models, configurations=pairs, protocol=protocol, seed=int(seed),
                cache_dir=cache_dir, store=ResultsStore(results), limit_splits=limit_splits,
                profile=profile, progress=progress, log=say)
    frame = grid.run()
    for name, seconds in grid.encode_seconds.items():
        say(f"{name}: encoded {grid.encoded_texts[name]:,} new unique texts in {seconds:.1f} s")
    return frame
