"""The fast protocol's samples: what MTEB v2 clusters for one of our datasets, taken from the task's
own ``dataset_transform``, downsampling and bootstrap draws (see :mod:`tecb_eval.mteb`)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

from tecb_eval.mteb.tasks import SPLIT, dataset_reference, mteb_language, task_for


@dataclass(frozen=True)
class FastSample:
    """What MTEB v2 clusters for one dataset: the embedded texts and the bootstrap row indices."""

    texts: tuple[str, ...]
    labels: tuple[str, ...]
    bootstraps: tuple[np.ndarray, ...]


def _in_memory(bench):
    """The benchmark as the DatasetDict ``datasets.load_dataset`` gives for its folder's test.jsonl."""
    from datasets import Dataset, DatasetDict

    return DatasetDict({SPLIT: Dataset.from_dict({
        "sentences": [list(s.texts) for s in bench.splits],
        "labels": [list(s.labels) for s in bench.splits],
    })})


@contextlib.contextmanager
def _quiet_datasets():
    """No "Casting the dataset" bars from inside the grid's own progress bar."""
    from datasets.utils import logging as ds_logging

    shown = ds_logging.is_progress_bar_enabled()
    ds_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            ds_logging.enable_progress_bar()


@contextlib.contextmanager
def _columns_read_whole():
    """A ``datasets`` column read in batches, not row by row, while MTEB's transform runs here.

    MTEB's downsampling (``stratified_subsampling``) lists the label column's names (a set over
    the column) and hands ``np.asarray`` the lazy ``Column`` of a numpy-formatted dataset
    (``train_test_split`` stratified by the label). ``Column`` has no ``__array__`` and iterates
    one row at a time, each read out of Arrow and formatted on its own: 24,131 rows each way for
    the GermEval dev set (13.5 s of a busy machine; 1.8 s read whole). Read in batches, with the
    dataset's own format, the values are the same, so the draws are. A column already read
    otherwise (an ``__array__`` of its own) is left as it is; only unformatted and numpy-formatted
    datasets take the batches."""
    from datasets import arrow_dataset

    column = getattr(arrow_dataset, "Column", None)
    if column is None or hasattr(column, "__array__") or "__iter__" not in vars(column):
        yield
        return
    rows = column.__iter__

    def batched(self):
        source = self.source
        if not (isinstance(source, arrow_dataset.Dataset) and source._format_type is None):
            yield from rows(self)
            return
        for batch in source._fast_select_column(self.column_name).iter(batch_size=1024):
            yield from batch[self.column_name]

    def whole(self, dtype=None, copy=None):
        values = self.source[:][self.column_name] if isinstance(self.source, arrow_dataset.Dataset) else None
        if not (isinstance(values, np.ndarray) and values.dtype.kind in "biuf"):
            values = list(self)  # strings, nested rows: as numpy reads the sequence
        return np.asarray(values, dtype=dtype)

    column.__iter__, column.__array__ = batched, whole
    try:
        yield
    finally:
        column.__iter__ = rows
        del column.__array__


def fast_sample(bench, seed: int) -> FastSample:
    """MTEB v2's sample of ``bench``: the task's own transform, downsampling and bootstrap draws."""
    task, texts, labels = embedded_set(bench, seed)
    return bootstrapped(task, texts, labels)


def bootstrapped(task, texts, labels) -> FastSample:
    """The flat sample from ``task``'s ``rng_state`` as it stands after the transform and the
    downsampling draw that gave the embedded ``texts`` and ``labels``."""
    # ... then _evaluate_clustering_bootstrapped draws n_clusters samples with replacement.
    bootstraps = tuple(
        np.array(task.rng_state.choices(range(len(texts)), k=task.max_documents_per_cluster), dtype=np.int64)
        for _ in range(task.n_clusters)
    )
    return FastSample(tuple(texts), tuple(labels), bootstraps)


def embedded_set(bench, seed: int) -> tuple:
    """``(task, texts, labels)``: MTEB v2's task for ``bench`` after its transform and downsampling
    draw, its ``rng_state`` where the bootstrap draws begin, and the texts it embeds with their labels."""
    task = task_for(bench.mteb_name, "v2", dataset_reference(bench), seed, mteb_language(bench))
    # The rows are already loaded and verified; the transform is MTEB's (tested equal to MTEB
    # loading the folder itself).
    task.dataset = _in_memory(bench)
    with _quiet_datasets(), _columns_read_whole():
        task.dataset_transform()
    task.data_loaded = True
    data = task.dataset[SPLIT]
    # A list, not datasets' lazy column: the downsampling below indexes it once per text, and a
    # column reads each row out of Arrow on its own (seconds for 2,048 texts).
    texts = list(data[task.input_column_name])
    feature = data.features[task.label_column_name]
    labels = [feature.int2str(v) if hasattr(feature, "int2str") else str(v) for v in data[task.label_column_name]]
    # AbsTaskClustering._evaluate_subset: the downsampling draw is made whenever a cap is set (it
    # reorders the texts and advances rng_state even when nothing is dropped) ...
    n = len(texts)
    cap = task.max_document_to_embed
    if task.max_fraction_of_documents_to_embed is not None:
        cap = int(task.max_fraction_of_documents_to_embed * n)
    if cap is not None:
        chosen = task.rng_state.sample(range(n), k=min(n, cap))
        texts, labels = [texts[i] for i in chosen], [labels[i] for i in chosen]
    return task, texts, labels
