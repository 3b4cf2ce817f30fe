"""Encode tasks on a Dask cluster (issue 44): a model's missing texts in shards cut on the
encoder's own batch boundaries give the in-process vectors and scores bit for bit; a worker
killed mid-shard loses no row, doubles none, and leaves no half shard in the embedding store;
the GPU resource and the shards' cut.

Dask runs for real: a ``distributed.LocalCluster`` with worker processes on 127.0.0.1, started and
closed by these tests.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import numpy as np
import pytest

from tecb_data.build import build
from tecb_data.demo import demo_input
from tecb_data.errors import UserError
from tecb_eval.grid.cache import EmbeddingStore
from tecb_eval.grid.cluster_encode import shards
from tecb_eval.grid.run import run_grid
from tecb_eval.grid.store import cell_key

import distributed  # noqa: E402  (the [test] extra)

METRICS = ["v_measure", "homogeneity", "completeness", "ami", "ari", "n_clusters_found"]
ORDER = ["model", "dataset", "reduction", "algorithm", "split", "seed"]
CONFIGS = ["minibatch_kmeans:none", "agglomerative:none"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo-data")
    build("tenkgnad", demo_input("tenkgnad"), out)
    return out / "tenkgnad-clustering-s2s"


@pytest.fixture(scope="module")
def cluster(dask_cluster):
    return dask_cluster


# The module's own LocalClusters (the shared one, and a GPU-labelled one) leave the environment as they found it.
pytestmark = pytest.mark.usefixtures("kept_environment")


@pytest.fixture(scope="module")
def serial(folder, tmp_path_factory):
    """The reference: the grid in this process, encoding with one torch thread as a
    single-threaded Dask worker does (a vector's float sums follow the thread count)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cache = tmp_path_factory.mktemp("serial-cache")
        frame = run_grid([folder], ["minilm-l6"], configurations=CONFIGS, limit_splits=2, jobs=1, cache_dir=cache,
                         progress=False, log=lambda m: None)
    finally:
        torch.set_num_threads(threads)
    return frame, cache


def _same_scores(a, b) -> bool:
    a, b = a.sort_values(ORDER).reset_index(drop=True), b.sort_values(ORDER).reset_index(drop=True)
    return a[ORDER].equals(b[ORDER]) and a[METRICS].equals(b[METRICS])


def _vectors(cache, identity: str, texts) -> np.ndarray:
    return EmbeddingStore(cache, identity).embeddings().rows(texts)


def test_shards_are_whole_batches_of_sentence_transformers_order():
    texts = sorted((f"text {'x' * (i % 7)} {i}" for i in range(300)), key=len)
    cut = shards(texts, batch_size=32, workers=2)
    assert all(len(batch) == 32 for shard in cut for batch in shard[:-1])
    flat = [t for shard in cut for batch in shard for t in batch]
    assert sorted(flat) == sorted(texts) and len(flat) == len(set(flat))  # every text once
    assert flat == [texts[i] for i in np.argsort([-len(t) for t in texts])]  # SentenceTransformer.encode's order
    assert len(cut) > 2  # more than one shard per worker: a lost worker holds up little


def test_cluster_encodes_with_the_in_process_vectors_and_scores(folder, serial, cluster, tmp_path):
    reference, serial_cache = serial
    messages = []
    frame = run_grid([folder], ["minilm-l6"], configurations=CONFIGS, limit_splits=2,
                     scheduler=cluster.scheduler_address, cache_dir=tmp_path / "cache", progress=False,
                     log=messages.append)
    assert _same_scores(reference, frame)
    identity = frame.model_identity.iloc[0]
    assert identity == reference.model_identity.iloc[0]
    texts = _texts(folder)
    assert np.array_equal(_vectors(serial_cache, identity, texts), _vectors(tmp_path / "cache", identity, texts))

    def held():
        from tecb_eval.grid.cluster_encode import held_models

        return held_models()

    with distributed.Client(cluster.scheduler_address, timeout=10) as client:
        # The workers keep the model they loaded: a second run loads nothing again.
        assert any(models for models in client.run(held).values())


def _texts(folder) -> list[str]:
    import tecb_data

    bench = tecb_data.load(folder)
    return sorted({t for split in bench.splits[:2] for t in split.texts})


def test_a_worker_killed_while_encoding_loses_no_row_and_leaves_no_half_shard(folder, serial, cluster, tmp_path):
    reference, _ = serial
    results = tmp_path / "r.jsonl"
    killed = []
    ended = threading.Event()

    def kill_a_worker_encoding():
        with distributed.Client(cluster.scheduler_address, timeout=10) as client:
            pids = client.run(os.getpid)
            while not ended.is_set() and not killed:
                for worker, keys in client.processing().items():
                    if any(str(k).startswith("tecb-encode-") for k in keys) and worker in pids:
                        time.sleep(0.3)  # into the shard's encoding
                        os.kill(pids[worker], signal.SIGKILL)
                        killed.append(worker)
                        break
                time.sleep(0.02)

    killer = threading.Thread(target=kill_a_worker_encoding, daemon=True)
    killer.start()
    frame = run_grid([folder], ["minilm-l6"], configurations=CONFIGS, limit_splits=2,
                     scheduler=cluster.scheduler_address, cache_dir=tmp_path / "cache", results=results,
                     progress=False, log=lambda m: None)
    ended.set()
    killer.join(timeout=60)
    assert killed, "no worker was seen encoding: the test did not kill anything"
    assert _same_scores(reference, frame)
    keys = [cell_key(json.loads(line)) for line in results.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == len(reference)
    identity = frame.model_identity.iloc[0]
    store = EmbeddingStore(tmp_path / "cache", identity)  # every shard reads whole (a damaged one would warn)
    assert store.missing(_texts(folder)) == [] and len(store.embeddings().matrix) == len(_texts(folder))
    with distributed.Client(cluster.scheduler_address, timeout=10) as client:
        client.wait_for_workers(2, timeout=60)  # the nanny restarts the killed worker


def test_encode_on_gpu_goes_only_to_workers_with_the_gpu_resource(folder, serial, tmp_path):
    reference, _ = serial
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  host="127.0.0.1", silence_logs=40, resources={"GPU": 1}) as gpu_cluster:
        frame = run_grid([folder], ["minilm-l6"], configurations=CONFIGS, limit_splits=2, encode_on="gpu",
                         scheduler=gpu_cluster.scheduler_address, cache_dir=tmp_path / "cache", progress=False,
                         log=lambda m: None)
    assert _same_scores(reference, frame)
    with pytest.raises(UserError, match="--encode-on gpu sends encode tasks to Dask workers"):
        run_grid([folder], ["minilm-l6"], configurations=CONFIGS, encode_on="gpu", progress=False)
