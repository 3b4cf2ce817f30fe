"""Encode tasks on a Dask cluster: a model's missing texts in shards cut on the
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

from tecb_data.errors import UserError
from tecb_eval.grid.cache import EmbeddingStore
from tecb_eval.grid.cluster_encode import shards
from tecb_eval.grid.run import run_grid
from tecb_eval.grid.store import cell_key
from tecb_eval.grid.worker_models import held_keys, models_of

import distributed  # noqa: E402  (the [test] extra)

METRICS = ["v_measure", "homogeneity", "completeness", "ami", "ari", "n_clusters_found"]
ORDER = ["model", "dataset", "reduction", "algorithm", "split", "seed"]
CONFIGS = ["minibatch_kmeans:none", "agglomerative:none"]


@pytest.fixture(scope="module")
def folder(demo_datasets):
    return demo_datasets / "tenkgnad-clustering-s2s"


@pytest.fixture(scope="module")
def cluster(dask_cluster):
    return dask_cluster


# The module's own LocalClusters (the shared one, and a GPU-labelled one) leave the environment as they found it.
pytestmark = pytest.mark.usefixtures("kept_environment")


@pytest.fixture(scope="module")
def serial(folder, tmp_path_factory):
    """The reference: the grid in this process, encoding with one torch thread as a
    single-threaded Dask worker does (a vector's float sums follow the thread count)."""
    cache = tmp_path_factory.mktemp("serial-cache")
    return _in_process(folder, ["minilm-l6"], cache), cache


@pytest.fixture(scope="module")
def tiny_model(tiny_sentence_transformer):
    """The session's tiny sentence-transformers model, for the tests whose point is where the work
    goes, not which model does it."""
    return str(tiny_sentence_transformer)


@pytest.fixture(scope="module")
def tiny_serial(folder, tiny_model, tmp_path_factory):
    """:func:`serial` for the tiny model."""
    return _in_process(folder, [tiny_model], tmp_path_factory.mktemp("tiny-serial-cache"))


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
    # Where the work ran, in the rows and in the summary: the workers encoded and clustered.
    address = cluster.scheduler_address
    assert set(frame.encoded_on) == {f"Dask workers of {address}"} and set(reference.encoded_on) == {"this process"}
    assert all(where.startswith("Dask worker tcp://127.0.0.1:") for where in frame.clustered_on)
    assert not any(where.startswith("Dask") for where in reference.clustered_on)
    assert any(m.startswith(f"minilm-l6: encoded ") and f"on the Dask cluster at {address}: " in m and " shards on "
               in m for m in messages), messages
    assert any(m.startswith("reduced and clustered ") and f"on the Dask cluster at {address}, " in m
               for m in messages), messages
    texts = _texts(folder)
    assert np.array_equal(_vectors(serial_cache, identity, texts), _vectors(tmp_path / "cache", identity, texts))

    with distributed.Client(cluster.scheduler_address, timeout=10) as client:
        # The workers keep the model they loaded: a second run loads nothing again.
        assert any(models for models in client.run(held_keys).values())


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


def test_encode_on_gpu_goes_only_to_workers_with_the_gpu_resource(folder, tiny_model, tiny_serial, tmp_path):
    """A CPU worker and a worker started as a GPU machine's is (``dask worker --resources GPU=1``):
    every shard (and the model's description) goes to the GPU one; the units go anywhere."""
    import subprocess
    import sys

    reference = tiny_serial
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  host="127.0.0.1", silence_logs=40) as mixed:
        gpu_worker = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", mixed.scheduler_address, "--nworkers", "1",
             "--nthreads", "1", "--resources", "GPU=1", "--preload", "tecb_eval.grid.worker_models",
             "--host", "127.0.0.1", "--dashboard-address", ":0", "--name", "gpu-machine"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            with distributed.Client(mixed.scheduler_address, timeout=30) as client:
                client.wait_for_workers(2, timeout=120)
                gpu = [w for w, info in client.scheduler_info()["workers"].items() if info["resources"].get("GPU")]
                with distributed.get_task_stream(client) as stream:
                    frame = run_grid([folder], [tiny_model], configurations=CONFIGS, limit_splits=2,
                                     encode_on="gpu", scheduler=mixed.scheduler_address, cache_dir=tmp_path / "cache",
                                     progress=False, log=lambda m: None)
                ran = [(task["key"], task["worker"]) for task in stream.data]
        finally:
            gpu_worker.terminate()
            gpu_worker.wait(timeout=60)
    assert _same_scores(reference, frame)
    encoded = [worker for key, worker in ran if "encode_shard" in str(key) or str(key).startswith("tecb-encode-")]
    described = [worker for key, worker in ran if "describe_model" in str(key) or "check_on_worker" in str(key)]
    assert len(gpu) == 1 and encoded and described
    assert set(encoded) == set(described) == set(gpu)
    with pytest.raises(UserError, match="--encode-on gpu sends encode tasks to Dask workers"):
        run_grid([folder], ["minilm-l6"], configurations=CONFIGS, encode_on="gpu", progress=False)


# -- the client that only plans and writes, prompts, two models, placement, Ctrl-C ------------------
# What the caller does without on a cluster: the encoders' libraries and MTEB, and
# scikit-learn (2.7 s of a warm-cluster run's 13 s: only the workers score), and scipy.stats (1 to
# 2 s, for Table 2's ranking tests, which a table of one model per dataset has none of).
FORBIDDEN = ("torch", "transformers", "sentence_transformers", "mteb", "sklearn", "scipy.stats")


def _imported(stderr: str) -> set[str]:
    """The modules a PYTHONPROFILEIMPORTTIME log says the process imported, and their top-level packages."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            names |= {name, name.split(".")[0]}
    return names


def test_the_client_of_a_cluster_run_imports_no_torch_transformers_mteb_or_sklearn(folder, tiny_model, tiny_serial,
                                                                                  cluster, tmp_path):
    import subprocess
    import sys

    reference = tiny_serial
    results = tmp_path / "r.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "tecb_eval.cli", "run", "--data", str(folder), "--model", tiny_model, "--limit-splits",
         "2", *(a for c in CONFIGS for a in ("--config", c)), "--scheduler", cluster.scheduler_address,
         "--cache-dir", str(tmp_path / "cache"), "--results", str(results), "--quiet", "--no-figure1"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1", "TECB_JOBS": ""})
    assert done.returncode == 0, done.stderr[-3000:]
    imported = _imported(done.stderr)
    assert "distributed" in imported and "numpy" in imported  # the log is read right: what it did import shows
    # A package's own line may be missing (scipy imports its subpackages lazily): its modules show.
    assert not {f for f in FORBIDDEN for name in imported if name == f or name.startswith(f + ".")}, sorted(imported)
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    expected = {(r.dataset, r.algorithm, r.split): r.v_measure for r in reference.itertuples()}
    assert {(r["dataset"], r["algorithm"], r["split"]): r["v_measure"] for r in rows} == expected
    assert {r["model_identity"] for r in rows} == set(reference.model_identity)


@pytest.fixture(scope="module")
def prompted_model(tmp_path_factory, tiny_sentence_transformer):
    """The tiny model's files with prompts in its configuration: a model bound per MTEB task (its
    prompt chosen per dataset, as MTEB's wrapper chooses it)."""
    source = tiny_sentence_transformer
    out = tmp_path_factory.mktemp("prompted-model")
    for item in source.iterdir():
        (out / item.name).symlink_to(item)
    config = json.loads((source / "config_sentence_transformers.json").read_text())
    config.update(prompts={"Clustering": "Ordne den Text ein: ", "query": "", "document": ""}, default_prompt_name=None)
    (out / "config_sentence_transformers.json").unlink()
    (out / "config_sentence_transformers.json").write_text(json.dumps(config))
    return out


def _in_process(folder, models, cache, messages=None):
    """The grid in this process with one torch thread, as a single-threaded worker encodes (a
    vector's float sums follow the thread count)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return run_grid([folder], models, configurations=CONFIGS, limit_splits=2, jobs=1, cache_dir=cache,
                        progress=False, log=(messages.append if messages is not None else lambda m: None))
    finally:
        torch.set_num_threads(threads)


ENCODING = ["model_identity", "prompt", "backend", "dtype", "model_location"]


def test_a_prompted_model_with_cut_texts_gives_the_in_process_rows_and_note_on_the_cluster(
        folder, prompted_model, cluster, tmp_path):
    model = {"spec": str(prompted_model), "name": "prompted", "max_length": 12}
    said_here, said_there = [], []
    here = _in_process(folder, [model], tmp_path / "here", said_here)
    there = run_grid([folder], [model], configurations=CONFIGS, limit_splits=2, scheduler=cluster.scheduler_address,
                     cache_dir=tmp_path / "there", progress=False, log=said_there.append)
    assert _same_scores(here, there)
    assert here[ENCODING].equals(there[ENCODING])  # the worker's identity, prompt and folder are ours
    assert here.prompt.iloc[0] == "Ordne den Text ein: "
    cut = [m for m in said_here if "max_length and were cut" in m]
    assert cut and cut == [m for m in said_there if "max_length and were cut" in m]


def test_the_next_models_shards_start_before_this_models_units(folder, tiny_model, cluster, tmp_path, monkeypatch):
    from tecb_eval.grid.encoding import Encoding
    from tecb_eval.grid.execution import Execution

    models = [{"spec": tiny_model, "name": "tiny"}, {"spec": tiny_model, "name": "tiny-short", "max_length": 16}]
    started_ahead = []
    init, prefetch, run_units = Encoding.__init__, Encoding.prefetch, Execution.run
    encodings = []

    def remembering_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        encodings.append(self)

    def recording_prefetch(self, run, work):
        prefetch(self, run, work)
        started_ahead.append((run.spec.name, len(self._started)))

    def recording_run(self, executor, run, work, embeddings, bar, interrupt):
        started_ahead.append((f"units of {run.spec.name}", len(encodings[-1]._started)))
        return run_units(self, executor, run, work, embeddings, bar, interrupt)

    monkeypatch.setattr(Encoding, "__init__", remembering_init)
    monkeypatch.setattr(Encoding, "prefetch", recording_prefetch)
    monkeypatch.setattr(Execution, "run", recording_run)
    frame = run_grid([folder], models, configurations=CONFIGS, limit_splits=2, scheduler=cluster.scheduler_address,
                     cache_dir=tmp_path / "cache", progress=False, log=lambda m: None)
    monkeypatch.undo()
    # The short model's shards were on the cluster when the first model's units were sent, and were
    # written (none left) by the time its own units ran.
    assert started_ahead == [("tiny-short", 1), ("units of tiny", 1), ("units of tiny-short", 0)]
    here = _in_process(folder, models, tmp_path / "here")
    assert _same_scores(here, frame)


def test_shards_prefer_the_workers_that_hold_the_model(folder, tiny_model, cluster, tmp_path):
    from tecb_eval.grid import cluster_encode
    from tecb_eval.models.spec import model_spec

    run_grid([folder], [tiny_model], configurations=CONFIGS, limit_splits=2, scheduler=cluster.scheduler_address,
             cache_dir=tmp_path / "cache", progress=False, log=lambda m: None)
    spec = model_spec(tiny_model)
    with distributed.Client(cluster.scheduler_address, timeout=10) as client:
        workers = sorted(client.scheduler_info()["workers"])
        encoder = cluster_encode.ClusterEncoder(client, log=lambda m: None)
        client.run(lambda dask_worker: models_of(dask_worker).model(spec, 42) and None)  # every worker holds it now
        assert encoder._prefer(spec, 42) == {}  # nothing to prefer
        remote = encoder.describe(spec, 42)
        client.run(lambda dask_worker: models_of(dask_worker).clear(), workers=[workers[0]])
        assert encoder._prefer(spec, 42) == {"workers": [workers[1]], "allow_other_workers": True}
        # A model's shards: the holder is preferred for its share (every other one), the rest go to
        # whoever is free, so the worker without the model loads it rather than wait.
        started = encoder.start(remote, [f"Satz {i} " + "x" * (i % 50) for i in range(2000)])
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # the submissions reach the scheduler in batches
                restricted = client.run_on_scheduler(lambda dask_scheduler: [
                    sorted(ts.worker_restrictions or ()) for key, ts in dask_scheduler.tasks.items()
                    if str(key).startswith("tecb-encode-")])
                if len(restricted) >= len(started.pieces):
                    break
                time.sleep(0.05)
        finally:
            encoder.cancel(started)
            _wait_until_no_worker_computes(client)  # the shards begun before the cancel run to their end
        assert len(restricted) == len(started.pieces) > 2
        assert sorted(map(tuple, restricted)) == sorted([(workers[1],)] * (len(restricted) // 2)
                                                        + [()] * (len(restricted) - len(restricted) // 2))
        client.run(lambda dask_worker: models_of(dask_worker).clear())
        assert encoder._prefer(spec, 42) == {}  # no worker holds it: any may take it


@pytest.mark.slow
def test_ctrl_c_while_encoding_on_the_cluster_leaves_no_task_there(folder, cluster, tmp_path):
    import subprocess
    import sys

    p2p = folder.parent / "tenkgnad-clustering-p2p"  # longer texts: a shard runs long enough to be caught
    with distributed.Client(cluster.scheduler_address, timeout=10) as client:
        process = subprocess.Popen(
            [sys.executable, "-m", "tecb_eval.cli", "run", "--data", str(p2p), "--model", "minilm-l6", "--config",
             "minibatch_kmeans:none", "--scheduler", cluster.scheduler_address, "--cache-dir", str(tmp_path / "c"),
             "--results", str(tmp_path / "r.jsonl"), "--quiet"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "TECB_JOBS": ""})

        def encoding() -> bool:
            return any(str(k).startswith("tecb-encode-") for keys in client.processing().values() for k in keys)

        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not encoding() and process.poll() is None:
            time.sleep(0.02)
        assert encoding(), f"no shard was seen on the cluster: {process.poll() is not None and process.communicate()}"
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
        assert process.returncode == 130, err
        assert "Traceback" not in err, err
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and encoding():
            time.sleep(0.1)
        assert not encoding(), "the interrupted run's shards still run on the cluster"
        # Dask cannot stop a thread: the shard its worker had begun runs to its end, unseen by the
        # scheduler. The module's other tests share these workers, so wait until it has ended.
        _wait_until_no_worker_computes(client)


def _executing(dask_worker) -> int:
    return len(dask_worker.state.executing)


def _wait_until_no_worker_computes(client, timeout: float = 300) -> None:
    """Until no worker's thread runs a task, the scheduler's own or one it has forgotten (a
    cancelled task still occupies its thread while the scheduler counts the worker as free)."""
    deadline = time.monotonic() + timeout
    while any(client.run(_executing).values()):
        assert time.monotonic() < deadline, "a worker still computes a task no one waits for"
        time.sleep(0.1)


@pytest.mark.usefixtures("draws_here")  # where the samples are drawn is tests/test_caches.py's subject
def test_a_models_one_unit_is_cut_into_pieces_so_no_worker_waits(folder, cluster, tmp_path):
    """The fast protocol's one unit per model (10 draws) on two single-threaded workers: four pieces
    of whole cells (3, 3, 2 and 2: no worker waits on another's third piece), with the scores of
    the unit run whole in this process. The pieces' input went to both workers when it was
    scattered: both workers ran pieces, and neither waited for the input to travel before its
    first piece (a piece stolen later, by an idle worker, fetches the other worker's copy)."""
    common = dict(configurations=["minibatch_kmeans:none"], protocol="fast", progress=False, log=lambda m: None)
    whole = run_grid([folder], ["tfidf-lsa"], jobs=1, cache_dir=tmp_path / "here", **common)
    with distributed.Client(cluster.scheduler_address, timeout=10) as client:
        # Where a piece runs is the scheduler's choice by load: start from two free workers.
        client.wait_for_workers(2, timeout=60)
        _wait_until_no_worker_computes(client)
        with distributed.get_task_stream(client) as stream:
            pieces = run_grid([folder], ["tfidf-lsa"], scheduler=cluster.scheduler_address,
                              cache_dir=tmp_path / "there", **common)
        workers = set(client.scheduler_info()["workers"])
    ran = [task for task in stream.data if str(task["key"]).startswith("tecb-unit-")]
    units = {str(task["key"]) for task in ran}
    assert len(units) == 4 and len(whole) == 10
    assert sorted(int(k.split("-cells")[1].split("-")[0]) for k in units) == [0, 3, 6, 8]
    assert {task["worker"] for task in ran} == workers and len(workers) == 2
    def start(task) -> float:
        return min(s["start"] for s in task["startstops"])

    firsts = [min((t for t in ran if t["worker"] == worker), key=start) for worker in workers]
    assert not [s for task in firsts for s in task["startstops"] if s["action"] == "transfer"]
    columns = ORDER + METRICS + ["v_measure_levels", "dbcv"]
    columns = [c for c in columns if c in whole.columns]
    assert whole[columns].equals(pieces[columns])


def test_a_stopped_worker_is_named_and_the_encoding_goes_on_when_it_answers(tiny_model, cluster, tmp_path):
    from tecb_eval.grid.cluster_encode import ClusterEncoder
    from tecb_eval.models.spec import model_spec

    silence = 2.0  # seconds: the minute of a real run, short for the test
    said: list[str] = []
    with distributed.Client(cluster.scheduler_address, timeout=10) as client:
        # Opened (torch imported, the model loaded) before any worker stops: a load is no silence.
        remote = ClusterEncoder(client, log=lambda m: None).describe(model_spec(tiny_model), 42)
        encoder = ClusterEncoder(client, log=said.append, silence=silence)
        pids = client.run(os.getpid)
        texts = [f"Satz Nummer {i}" for i in range(96)]
        store = EmbeddingStore(tmp_path / "cache", remote.identity)
        for pid in pids.values():  # every worker: whichever gets the shards is stopped
            os.kill(pid, signal.SIGSTOP)

        def wake_once_named():
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not any("does not answer" in line for line in said):
                time.sleep(0.05)
            for pid in pids.values():
                os.kill(pid, signal.SIGCONT)

        waker = threading.Thread(target=wake_once_named, daemon=True)
        waker.start()
        try:
            encoder.encode(remote, texts, store)
        finally:
            for pid in pids.values():
                os.kill(pid, signal.SIGCONT)
            waker.join(timeout=60)
    named = [line for line in said if "does not answer" in line]
    assert named and all("encoding with" in line and any(w in line for w in pids) for line in named), said
    again = [line for line in said if "answers again" in line]
    assert again and all(any(w in line for w in pids) for line in again), said
    assert EmbeddingStore(tmp_path / "cache", remote.identity).embeddings().rows(texts).shape[0] == len(texts)
