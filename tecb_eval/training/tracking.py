"""Evaluation during training: V-measure of the live encoder on every split, logged to CSV, and
the best checkpoint per seed kept on disk.

The model being trained is encoded as ``tecb-eval run`` encodes that model (``get_encoder``): a
sentence-transformers model through its own modules (pooling, normalisation, ...), a plain
transformers checkpoint by the attention-masked mean of its last layer; in fp32, in the grid's
batch size and in the grid's chunks and order of texts, so the vectors (and the V-measure of the
model without pre-training) are the grid's bit for bit, and a kept checkpoint scores in the grid
what its evaluation here scored.
"""

from __future__ import annotations

import csv
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from tecb_eval.clustering.evaluation import evaluate_kmeans, unique_texts
from tecb_eval.files import csv_cell, csv_value
from tecb_eval.grid.cache import EmbeddingStore
from tecb_eval.grid.work import one_thread
from tecb_eval.models.kinds.mean_pooling import MeanPoolingEncoder
from tecb_eval.models.kinds.sentence_transformer import SentenceTransformerEncoder
from tecb_eval.training.checkpoints import save_checkpoint
from tecb_eval.training.errors import NonFiniteVectors

EVALUATION_FIELDS = ("method", "seed", "epoch", "step", "dataset", "v_measure")
SPLIT_FIELDS = ("method", "seed", "epoch", "step", "dataset", "split", "v_measure")
LOSS_FIELDS = ("method", "seed", "epoch", "step", "loss", "learning_rate")
EVALUATIONS_CSV = "evaluations.csv"
SPLITS_CSV = "evaluations_splits.csv"
LOSSES_CSV = "losses.csv"


class LiveMeanPoolingEncoder(MeanPoolingEncoder):
    """The grid's mean pooling (last layer, attention-masked) over a model still in memory.

    It reuses the grid's encode so that a saved checkpoint, reloaded through
    ``tecb_eval.models.encoders.get_encoder``, encodes the same way. Dropout is switched off for
    the pass and the training mode restored afterwards.
    """

    def __init__(self, model, tokenizer, *, max_length: int, batch_size: int, device: str, autocast=None):
        import torch

        self._torch = torch
        self.model = model
        self.tokenizer = tokenizer
        self.layer = None
        self.n_layers = int(getattr(model.config, "num_hidden_layers", 0))
        self.max_length = max_length
        self.batch_size = batch_size
        self.device = device
        self.autocast = autocast
        self.identity = f"live:{type(model).__name__}|pooling=mean|layer=last|max_length={max_length}"

    pooling = "hidden"

    def encode(self, texts: list[str]) -> np.ndarray:
        was_training = self.model.training
        self.model.eval()
        try:
            if self.autocast is None:
                return self._pooled(texts)
            with self.autocast():
                return self._pooled(texts)
        finally:
            self.model.train(was_training)

    def _pooled(self, texts: list[str]) -> np.ndarray:
        return MeanPoolingEncoder.encode(self, texts)


class LiveSentenceTransformerEncoder(SentenceTransformerEncoder):
    """A sentence-transformers model still in memory (its transformer the one being trained),
    encoded by the grid's ``SentenceTransformerEncoder.encode``: its own modules, its own maximum
    length, and, for a model whose configuration has prompts, each dataset's texts with the prompt
    MTEB chooses for its task (``for_task``, bound per dataset by :func:`timed_evaluation`)."""

    pooling = "model"

    def __init__(self, model, *, batch_size: int):
        # The grid's encoder keeps its model as ``_model`` (behind a ``model`` property that exports
        # it to ONNX on first use); a live model is never exported.
        self._model = model
        self._export = {"pending": False, "quantize": False}
        self.truncated = {"texts": 0, "tokens": 0}
        self.batch_size = batch_size
        self.modules = "+".join(type(m).__name__ for m in model)
        self.max_length = model.max_seq_length
        self.base_identity = f"live:st|modules={self.modules}|max_length={self.max_length}"
        self.backend = self.route = "torch"
        self.dtype = None
        self._take_prompts(None)

    @property
    def model(self):
        return self._model

    def encode(self, texts: list[str]) -> np.ndarray:
        # SentenceTransformer.encode leaves the model in eval mode, and its transformer is shared with
        # the training objective (whose own mode may differ from the wrapper's): every module gets
        # its mode back.
        modes = [(module, module.training) for module in self.model.modules()]
        try:
            return SentenceTransformerEncoder.encode(self, texts)
        finally:
            for module, training in modes:
                module.training = training


class LiveLogitsPoolingEncoder(LiveMeanPoolingEncoder):
    """The authors' evaluation during WWM (profile ``paper``): the attention-masked mean over the
    masked-LM head's output, vocabulary logits (``AutoModelForMaskedLM(...)[0]`` in their
    ``run_fine_tuned_cteb_de.py``), one vector of vocabulary size per text."""

    pooling = "logits"

    def __init__(self, mlm_model, tokenizer, *, max_length: int, batch_size: int, device: str, autocast=None):
        super().__init__(mlm_model, tokenizer, max_length=max_length, batch_size=batch_size, device=device,
                         autocast=autocast)
        self.identity = f"live:{type(mlm_model).__name__}|pooling=mean-of-logits|max_length={max_length}"

    def _pooled(self, texts: list[str]) -> np.ndarray:
        torch = self._torch
        texts = list(texts)
        if not texts:
            return np.zeros((0, int(self.model.config.vocab_size)), dtype=np.float32)
        # Sorted by length so that each batch pads little, as the grid's encoder does.
        order = sorted(range(len(texts)), key=lambda i: (-len(texts[i]), i))
        out: list[np.ndarray | None] = [None] * len(texts)
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                idx = order[start:start + self.batch_size]
                batch = self.tokenizer([texts[i] for i in idx], padding=True, truncation=True,
                                       max_length=self.max_length, return_tensors="pt").to(self.device)
                logits = self.model(**batch).logits
                mask = batch["attention_mask"].unsqueeze(-1).to(logits.dtype)
                pooled = (logits * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                for i, vector in zip(idx, pooled.float().cpu().numpy()):
                    out[i] = vector
        return np.stack(out)


def encode_as_the_grid(encode, texts: Sequence[str]) -> np.ndarray:
    """The vectors ``encode`` gives ``texts`` when called as the grid calls an encoder: on the
    distinct texts in the grid's chunks and order (``EmbeddingStore.encode_missing``). A batch pads
    to its longest text, and other padding changes the last bits of a vector; so only the same
    batches give the grid's vectors exactly."""
    store = EmbeddingStore(None, "pre-training evaluation")  # in memory only
    store.encode_missing(texts, encode)
    return store.embeddings().rows(list(texts))


def encode_per_task(encoder, items: Sequence[tuple[object, Sequence[str]]]) -> tuple[list[dict], list[int]]:
    """``text -> vector`` for each ``(benchmark, texts)`` of ``items``, encoded as the grid encodes
    them, and the sizes of the chunks encoded. A model with per-task prompts encodes each
    benchmark's texts with the prompt MTEB gives its task (``encoder_for_dataset``); benchmarks
    whose encoders share an identity (any other model: all of them) share one encoding pass over
    their distinct texts, as the grid encodes one pass per identity."""
    bound = [encoder] * len(items)
    if encoder.per_task:
        from tecb_eval.mteb.encoders import encoder_for_dataset

        bound = [encoder_for_dataset(encoder, bench) for bench, _ in items]
    passes: dict[str, list[int]] = {}
    for i, each in enumerate(bound):
        passes.setdefault(each.identity, []).append(i)
    calls: list[int] = []
    out: list[dict] = [{}] * len(items)
    for members in passes.values():
        texts = sorted({t for i in members for t in items[i][1]})

        def encode(chunk: list[str], each=bound[members[0]]) -> np.ndarray:
            calls.append(len(chunk))
            return each.encode(chunk)

        by_text = dict(zip(texts, encode_as_the_grid(encode, texts)))
        for i in members:
            out[i] = by_text
    return out, calls


def non_finite_texts(per_item: list[dict]) -> int:
    """How many distinct texts of :func:`encode_per_task`'s answer have a vector that is not finite
    (items that share an encoding pass share one mapping: each is checked once)."""
    distinct = {id(by_text): by_text for by_text in per_item}.values()
    return len({t for by_text in distinct for t, v in by_text.items() if not np.isfinite(v).all()})


def _fmt(value) -> str:
    # repr round-trips floats exactly and is the same on every platform: byte-identical reruns.
    # A dataset or model name holding a formula must not run in a spreadsheet (read_csv gives it back).
    return repr(float(value)) if isinstance(value, (float, np.floating)) else csv_cell(str(value))


class CsvLog:
    """A CSV file written row by row and flushed, so a long run can be watched while it trains."""

    def __init__(self, path: Path, fields: Sequence[str]):
        self.path = path
        self.fields = tuple(fields)
        self._fh = open(path, "w", newline="", encoding="utf-8")
        self._writer = csv.writer(self._fh, lineterminator="\n")
        self._writer.writerow(self.fields)

    def write(self, row: dict) -> None:
        self._writer.writerow([_fmt(row[f]) for f in self.fields])
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        rows = [{k: csv_value(v) for k, v in row.items()} for row in csv.DictReader(fh)]
    for row in rows:
        for key in ("seed", "step"):
            if key in row:
                row[key] = int(row[key])
        for key in ("epoch", "v_measure", "loss", "learning_rate"):
            if key in row:
                row[key] = float(row[key])
    return rows


def dataset_means(split_rows: list[dict]) -> dict[str, float]:
    """V-measure per dataset: the mean over its splits, datasets in the order they were given."""
    scores: dict[str, list[float]] = {}
    for row in split_rows:
        scores.setdefault(row["dataset"], []).append(row["v_measure"])
    return {name: float(np.mean(values)) for name, values in scores.items()}


def timed_evaluation(benchmarks: Sequence, encoder, kmeans_seed: int) -> tuple[list[dict], dict]:
    """``evaluate_kmeans`` (one encoding pass over the unique texts, as the grid encodes them: per
    prompt for a model with per-task prompts, see :func:`encode_per_task`; then k-means per split),
    with the time spent encoding and clustering. Raises
    :class:`NonFiniteVectors` before clustering vectors that are NaN or infinite."""
    start = time.perf_counter()
    per_bench, calls = encode_per_task(encoder, [(bench, unique_texts([bench])) for bench in benchmarks])
    bad = non_finite_texts(per_bench)
    if bad:
        raise NonFiniteVectors(bad, len(unique_texts(benchmarks)))
    encode_s = time.perf_counter() - start
    start = time.perf_counter()
    rows = []
    # One thread, as each of the grid's units clusters: k-means then gives the grid's labels.
    with one_thread():
        for i, bench in enumerate(benchmarks):
            rows += evaluate_kmeans([bench], lambda asked, by_text=per_bench[i]: np.stack([by_text[t] for t in asked]),
                                    seed=kmeans_seed)
    kmeans_s = time.perf_counter() - start
    timing = {"encode_s": encode_s, "encode_calls": len(calls), "encoded_texts": sum(calls), "kmeans_s": kmeans_s,
              "total_s": encode_s + kmeans_s}
    return rows, timing


class Tracker:
    """Writes the evaluation and loss logs of one run and keeps each seed's best checkpoint."""

    def __init__(self, workdir: Path, benchmarks: Sequence, method: str, kmeans_seed: int, save_best: bool,
                 checkpoint_info: dict | None = None):
        self.workdir = workdir
        # Written into each kept checkpoint's pretraining.json (profile, evaluation pooling, datasets).
        self.checkpoint_info = checkpoint_info or {}
        self.benchmarks = benchmarks
        self.method = method
        self.kmeans_seed = kmeans_seed
        self.save_best = save_best
        self.evaluations = CsvLog(workdir / EVALUATIONS_CSV, EVALUATION_FIELDS)
        self.splits = CsvLog(workdir / SPLITS_CSV, SPLIT_FIELDS)
        self.losses = CsvLog(workdir / LOSSES_CSV, LOSS_FIELDS)
        self.best: dict[int, dict] = {}
        self.eval_timings: list[dict] = []

    def baseline(self, encoder, *, what: str = "evaluation") -> list[dict]:
        """Split rows of the model before any training (shared by all seeds: training has not
        touched the encoder yet, and the new heads do not take part in encoding). ``what`` names
        the evaluation in timings.json."""
        rows, timing = timed_evaluation(self.benchmarks, encoder, self.kmeans_seed)
        self.eval_timings.append({"seed": None, "step": 0, "what": what, **timing})
        return rows

    def score_as_the_grid(self, seed: int, encoder) -> None:
        """Add to ``seed``'s best checkpoint what the grid scores it (``encoder``: the checkpoint
        reloaded by ``get_encoder``): ``grid_v_measure`` and ``grid_datasets``."""
        rows, timing = timed_evaluation(self.benchmarks, encoder, self.kmeans_seed)
        self.eval_timings.append({"seed": seed, "step": self.best[seed]["step"], "what": "best checkpoint, as the grid",
                                  **timing})
        means = dataset_means(rows)
        self.best[seed]["grid_v_measure"] = float(np.mean(list(means.values())))
        self.best[seed]["grid_datasets"] = means

    def record(self, seed: int, step: int, epoch: float, split_rows: list[dict], objective=None) -> float:
        """Log one evaluation; save the checkpoint when its mean V-measure is the seed's best so far."""
        common = {"method": self.method, "seed": seed, "epoch": round(epoch, 4), "step": step}
        for row in split_rows:
            self.splits.write({**common, **row})
        means = dataset_means(split_rows)
        for dataset, score in means.items():
            self.evaluations.write({**common, "dataset": dataset, "v_measure": score})
        overall = float(np.mean(list(means.values())))
        best = self.best.get(seed)
        if best is None or overall > best["v_measure"]:
            self.best[seed] = {"step": step, "epoch": round(epoch, 4), "v_measure": overall, "datasets": means,
                               "path": None}
            if self.save_best and objective is not None:
                self.best[seed]["path"] = self._save(seed, objective)
        return overall

    def evaluate(self, seed: int, step: int, epoch: float, encoder, objective) -> float:
        rows, timing = timed_evaluation(self.benchmarks, encoder, self.kmeans_seed)
        self.eval_timings.append({"seed": seed, "step": step, **timing})
        return self.record(seed, step, epoch, rows, objective)

    def _save(self, seed: int, objective) -> str:
        target = self.workdir / f"seed-{seed}" / "best"
        info = {"method": self.method, "seed": seed, **self.checkpoint_info,
                **{k: v for k, v in self.best[seed].items() if k != "path"}}
        save_checkpoint(objective.save, target, "pretraining.json", info)
        return str(target.relative_to(self.workdir))

    def loss(self, seed: int, step: int, epoch: float, loss: float, learning_rate: float) -> None:
        self.losses.write({"method": self.method, "seed": seed, "epoch": round(epoch, 4), "step": step,
                           "loss": loss, "learning_rate": learning_rate})

    def close(self) -> None:
        for log in (self.evaluations, self.splits, self.losses):
            log.close()
