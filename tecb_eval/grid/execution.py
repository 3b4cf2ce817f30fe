"""The grid's execution: a model's pending cells as units on an executor (this process, local
workers or a Dask cluster: :mod:`tecb_eval.grid.executors`), and each finished unit's rows into the
results store. Only this process writes the store and the reduction cache; a unit's input is its
base set's embeddings, or the cached reduction where there is one.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time
from dataclasses import replace

from tecb_data.demo import is_demo_manifest
from tecb_eval.clustering import algorithms as algo
from tecb_eval.clustering import consensus, topics
from tecb_eval.clustering.cluster_counts import setting_name
from tecb_eval.clustering.label_free import LABEL_FREE_FIELDS
from tecb_eval.clustering.stability import STABILITY_FIELDS
from tecb_eval.files import short_hash
from tecb_eval.grid import scheduling, work as work_module
from tecb_eval.grid.extra import EXTRA_FIELDS
from tecb_eval.grid.ledger import Ledger
from tecb_eval.grid.plan import Pending, Plan, by_base, work_cells
from tecb_eval.grid.work import UnitResult, WorkUnit
from tecb_eval.models import encoders
from tecb_eval.models.spec import ModelRun


def encoded_on(encoder) -> str:
    """Where this run encodes ``encoder``'s texts: the Dask workers of a scheduler, or this process."""
    return f"Dask workers of {encoder.scheduler}" if encoder.scheduler else "this process"


class Execution:
    def __init__(self, plan: Plan, *, store, reductions, ledger: Ledger, rows: list):
        self.plan, self.store, self.reductions, self.ledger, self.rows = plan, store, reductions, ledger, rows
        # Each split's texts analysed once for the topic words of all its partitions (this process
        # computes them: it holds the texts, and the workers get vectors only).
        self._corpora: dict = {}

    def topic_scores(self, ctx: dict, cell, assignment: str) -> dict:
        """The criteria that need the texts (tecb_eval.clustering.topics) of one cell, timed."""
        started = time.perf_counter()
        key = (ctx["fingerprint"], cell.split)
        if key not in self._corpora:
            texts = ctx["base_texts"] if cell.rows is None else [ctx["base_texts"][i] for i in cell.rows]
            self._corpora = {key: topics.Corpus(texts)}  # one split at a time: its cells arrive together
        scores = topics.topic_scores(self._corpora[key], consensus.decode(assignment))
        scores["topics_s"] = time.perf_counter() - started
        return scores

    def run(self, executor, run: ModelRun, work: list[Pending], embeddings: dict, bar, interrupt) -> None:
        tasks, inputs, context = self.tasks(run, work, embeddings, slots=getattr(executor, "slots", 1))

        def finished(unit: WorkUnit, result: UnitResult) -> None:
            self.finish(context[unit.key], unit, result, bar)
            interrupt.check()

        executor.run(tasks, lambda key: inputs[key](), finished)

    def tasks(self, run: ModelRun, work: list[Pending], embeddings: dict, slots: int = 1) -> tuple[list, dict, dict]:
        """One task per (dataset, base set, reduction, seed). Its input is the base set's
        embeddings, or the cached reduction where there is one. ``slots``: the tasks a cluster runs
        at once; where this model has fewer units, a unit without a reduction to compute is cut
        into pieces of whole cells (each cell is computed alone, so the scores stay the same)."""
        seconds_per_text = self.ledger.seconds_per_text(run.spec.name)
        tasks, inputs, context = [], {}, {}
        for item in work:
            vectors = embeddings[item.encoder.identity]
            for (base_name, reduction), cells in by_base(item.cells).items():
                base_texts = cells[0][0].base_texts
                fingerprint = vectors.fingerprint(base_texts)
                reduced = (self.reductions.lookup(fingerprint, reduction, item.seed)
                           if algo.reduction_entry(reduction).reduces else None)
                key = short_hash(run.spec.name, item.encoder.identity, item.bench.fingerprint, base_name, reduction,
                                 str(item.seed))
                if reduced is not None:
                    input_key = "reduced-" + key
                    inputs[input_key] = lambda value=reduced: value
                else:
                    # Shared by the base set's reductions: on a cluster it travels once.
                    input_key = "base-" + fingerprint
                    inputs[input_key] = lambda texts=base_texts, v=vectors: v.rows(texts)
                unit = WorkUnit(
                    key=key, label=f"{run.spec.name} / {item.bench.name} / {base_name} / {reduction} / seed {item.seed}",
                    dataset=item.bench.name, reduction=reduction, seed=item.seed, n=len(base_texts),
                    dim=int(vectors.matrix.shape[1]), cells=work_cells(cells), **self.plan.unit_options(item.bench))
                tasks.append(scheduling.Task(unit, input_key, reduced is not None))
                context[key] = dict(run=run, bench=item.bench, fingerprint=fingerprint, cached=reduced is not None,
                                    base_texts=base_texts,
                                    encoding={**encoders.encoding_fields(item.encoder),
                                              **encoders.usage_fields(item.encoder, vectors.tokens_of(base_texts))},
                                    encoded_on=encoded_on(item.encoder),
                                    identity=vectors.identity, encode_s=seconds_per_text * len(set(base_texts)))
        if slots > len(tasks):
            # Two pieces per free thread: cells differ in cost, and the last piece should be short.
            tasks = [piece for task in tasks for piece in _pieces(task, math.ceil(2 * slots / len(tasks)), context)]
        return tasks, inputs, context

    def finish(self, ctx: dict, unit: WorkUnit, result: UnitResult, bar) -> None:
        """Store a finished unit's rows; only this process writes the store and the caches."""
        if result.reduced is not None:
            self.reductions.put(ctx["fingerprint"], unit.reduction, unit.seed, result.reduced)
        self.ledger.add_worker(result.pid, result.max_rss, result.cpu_s, result.worker)
        clustered_on = (f"Dask worker {result.worker}" if result.worker else
                        "this process" if result.pid == os.getpid() else "a local worker process")
        bench = ctx["bench"]
        reduction_params = algo.params_json(algo.make_reduction(unit.reduction, unit.seed))
        reduce_cached = ctx["cached"]
        if algo.reduction_entry(unit.reduction).reduces:
            self.ledger.of(bench.name)["reduce_cached" if reduce_cached else "reduced"] += 1
        dataset_splits = self.plan.dataset_splits(bench, unit.seed)
        for cell, scores in zip(unit.cells, result.metrics):
            row = {
                "model": ctx["run"].spec.name,
                "model_identity": ctx["identity"],
                **ctx["encoding"],  # the prompt, backend and dtype it was encoded with; an endpoint's usage
                # Where this run encodes the model's texts (those in the embedding cache were
                # encoded earlier) and where this cell was reduced and clustered.
                "encoded_on": ctx["encoded_on"],
                "clustered_on": clustered_on,
                "dataset": bench.name,
                "mteb_name": bench.mteb_name,
                "language": bench.manifest.get("language", "de"),
                "dataset_fingerprint": bench.fingerprint,
                "dataset_location": bench.location,
                # Built from the embedded demo sample: every table of these rows says it is synthetic.
                "synthetic": is_demo_manifest(bench.manifest),
                "protocol": self.plan.protocol,
                "profile": self.plan.profile.name,
                "seeds": self.plan.seed_set,
                "seed": unit.seed,
                "split": cell.split,
                "dataset_splits": dataset_splits,
                "n_samples": scores["n_samples"],
                # A corpus without labels has no count of labels: the row says it is unlabelled instead.
                **({"n_labels": int(cell.k)} if cell.labels is not None else {"labelled": False}),
                "reduction": unit.reduction,
                "algorithm": cell.algorithm,
                # A point of a range of cluster counts named ("k=10"); "" at the algorithm's own
                # setting, which is what a stored row without the field reads as.
                "setting": setting_name(cell.setting),
                **{k: scores[k] for k in work_module.METRIC_FIELDS},
                **{k: scores[k] for k in LABEL_FREE_FIELDS + ("label_free_s",) if k in scores},
                # Where the run asked for reruns (tecb_eval.clustering.stability); a row without
                # them reads as "not measured".
                **{k: scores[k] for k in STABILITY_FIELDS + ("stability_s",) if k in scores},
                **(self.topic_scores(ctx, cell, scores["assignment"]) if self.plan.topics_for(bench) else {}),
                "algorithm_params": scores["algorithm_params"],
                "reduction_params": reduction_params,
                # Encoding is shared by every cell of a text; each cell carries its split's share.
                "encode_s": ctx["encode_s"],
                # The reduction's time is counted once, with the first algorithm that used it.
                "reduce_s": 0.0 if reduce_cached else result.reduce_s,
                "reduce_cached": bool(reduce_cached),
                "cluster_s": scores["cluster_s"],
                # Per-level scores (label hierarchies) and DBCV (density clusterings), where they apply:
                # a row without them, or written before them, reads as "not measured" (tecb_eval.grid.extra).
                **{k: scores[k] for k in EXTRA_FIELDS if k in scores},
            }
            reduce_cached = True
            self.store.append(row)
            self.rows.append(row)
            self.ledger.new_rows.append(row)
            bar.update(1)


def _pieces(task: scheduling.Task, count: int, context: dict) -> list:
    """``task`` as up to ``count`` tasks of whole cells, in order, sharing its input and context; a
    unit that computes a reduction stays whole (its pieces would each compute it)."""
    unit = task.unit
    count = min(count, len(unit.cells))
    if count < 2 or algo.reduction_entry(unit.reduction).reduces:
        return [task]
    # Sizes that differ by one at most (10 cells in 4: 3, 3, 2, 2, not 3, 3, 3, 1): two workers
    # then finish together instead of one waiting on a worker's third piece.
    size, more = divmod(len(unit.cells), count)
    pieces, start = [], 0
    for index in range(count):
        cells = unit.cells[start:start + size + (index < more)]
        piece = replace(unit, key=f"{unit.key}-cells{start}", cells=cells,
                        label=f"{unit.label} (cells {start + 1} to {start + len(cells)} of {len(unit.cells)})")
        context[piece.key] = context[unit.key]
        pieces.append(scheduling.Task(piece, task.input_key, task.is_reduced))
        start += len(cells)
    return pieces


class Interruptible:
    """Ctrl-C stops the grid after the unit at hand even where a library swallows the
    KeyboardInterrupt (numba did, inside UMAP): the signal is remembered and checked after every
    unit, as well as raised."""

    def __init__(self):
        self.seen = False
        self._previous = None

    def _handler(self, signum, frame):
        self.seen = True
        raise KeyboardInterrupt

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def check(self) -> None:
        if self.seen:
            raise KeyboardInterrupt

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        return False
