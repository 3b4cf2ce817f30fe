"""A warm Dask cluster tells the truth: a worker keeps a model by what its files hold, opens the
folder the user named, runs the coordinator's code, and a run never waits in silence for a
resource no worker offers.

Dask runs for real: the shared ``LocalCluster`` of two worker processes (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from tecb_data.errors import UserError
from tecb_eval.grid.run import run_grid

distributed = pytest.importorskip("distributed")

pytestmark = pytest.mark.usefixtures("kept_environment")
CONFIG = ["minibatch_kmeans:none"]


def _model(source: Path, folder: Path, max_length: int) -> Path:
    """A copy of the sentence-transformers model ``source`` (the session's tiny one: what a worker
    holds is the point, not the model) that reads at most ``max_length`` tokens: another model (other
    files, other vectors for the longer texts). Its weights are a link to the source's (the folder
    reads, and hashes, the same through it); the small files are copies."""
    def link_the_weights(original: str, target: str) -> None:
        if Path(original).name == "model.safetensors":
            os.symlink(original, target)
        else:
            shutil.copy2(original, target)

    shutil.copytree(source, folder, dirs_exist_ok=True, copy_function=link_the_weights)
    config = folder / "sentence_bert_config.json"
    settings = json.loads(config.read_text())
    settings["max_seq_length"] = max_length
    config.write_text(json.dumps(settings))
    return folder


def _in_process_identity(folder: Path) -> str:
    from tecb_eval.models.encoders import get_encoder

    return get_encoder(str(folder)).identity


def _identities(frame) -> set[str]:
    return set(frame["model_identity"])


def _run(data: Path, model: str, cluster, tmp_path: Path, name: str, **options):
    return run_grid([data], [model], configurations=CONFIG, limit_splits=1, scheduler=cluster.scheduler_address,
                    results=tmp_path / f"{name}.jsonl", cache_dir=tmp_path / f"{name}-cache", progress=False,
                    log=lambda m: None, **options)


def test_files_replaced_in_a_folder_are_another_model_on_a_warm_worker(demo_datasets, dask_cluster, tmp_path,
                                                                      tiny_sentence_transformer):
    data = demo_datasets / "tenkgnad-clustering-s2s"
    current = _model(tiny_sentence_transformer, tmp_path / "models" / "cur", 32)
    first = _run(data, str(current), dask_cluster, tmp_path, "first")
    assert _identities(first) == {_in_process_identity(current)}

    shutil.rmtree(current)
    _model(tiny_sentence_transformer, current, 16)  # the same path, other files: the workers still hold the first
    second = _run(data, str(current), dask_cluster, tmp_path, "second")
    assert _identities(second) == {_in_process_identity(current)} != _identities(first)


def test_a_relative_model_folder_is_the_coordinators_not_the_workers(demo_datasets, dask_cluster, tmp_path,
                                                                     monkeypatch, tiny_sentence_transformer):
    data = demo_datasets / "tenkgnad-clustering-s2s"
    here, there = tmp_path / "client", tmp_path / "workers"
    ours = _model(tiny_sentence_transformer, here / "relm", 32)
    # The same relative name in the workers' working folder: another model.
    _model(tiny_sentence_transformer, there / "relm", 16)
    monkeypatch.chdir(here)
    with distributed.Client(dask_cluster.scheduler_address, timeout=30) as client:
        before = client.run(os.getcwd)
        client.run(os.chdir, str(there))
        try:
            frame = _run(data, "relm", dask_cluster, tmp_path, "relative")
        finally:
            for worker, folder in before.items():
                client.run(os.chdir, folder, workers=[worker])
    assert _identities(frame) == {_in_process_identity(ours)}


def test_a_folder_the_workers_lack_or_hold_otherwise_is_one_line_naming_it(tmp_path, tiny_sentence_transformer):
    from tecb_eval.grid.cluster_encode import for_workers
    from tecb_eval.grid.worker_models import WorkerModels, check_on_worker
    from tecb_eval.models.spec import model_spec

    folder = _model(tiny_sentence_transformer, tmp_path / "m", 32)
    sent = for_workers(model_spec(str(folder)))
    assert sent.spec == str(folder.resolve()) and sent.files
    elsewhere = sent.__class__(str(tmp_path / "not-here"), sent.name, {}, files=sent.files)
    with pytest.raises(UserError, match=r"has no folder .*not-here .*on the coordinator's machine"):
        check_on_worker([elsewhere])
    otherwise = sent.__class__(sent.spec, sent.name, {}, files="0" * 20)
    with pytest.raises(UserError, match="holds other files than the coordinator's"):
        WorkerModels().model(otherwise, 42)


def test_a_worker_running_other_code_of_the_same_version_is_refused(demo_datasets, dask_cluster, tmp_path):
    def pretend_other_code():
        import tecb_eval.files

        tecb_eval.files._SOURCE_DIGEST = "0123456789abcdef"

    def own_code():
        import tecb_eval.files

        tecb_eval.files._SOURCE_DIGEST = None

    with distributed.Client(dask_cluster.scheduler_address, timeout=30) as client:
        (worker, *_) = sorted(client.scheduler_info()["workers"])
        client.run(pretend_other_code, workers=[worker])
        try:
            with pytest.raises(UserError, match=rf"Dask worker {worker} runs other tecb code than this process"):
                _run(demo_datasets / "tenkgnad-clustering-s2s", "tfidf-lsa", dask_cluster, tmp_path, "other")
        finally:
            client.run(own_code, workers=[worker])


@pytest.mark.timeout(300)
def test_encode_on_gpu_without_a_gpu_worker_says_so_and_waits_only_the_scheduler_timeout(
        demo_datasets, dask_cluster, tmp_path):
    lines: list[str] = []
    started = time.monotonic()
    with pytest.raises(UserError, match=r"offers the resource GPU=1 after 2 s: start one with `dask worker .* "
                                        r"--resources GPU=1`"):
        run_grid([demo_datasets / "tenkgnad-clustering-s2s"], ["minilm-l6"], configurations=CONFIG, limit_splits=1,
                 scheduler=dask_cluster.scheduler_address, scheduler_timeout=2, encode_on="gpu",
                 results=tmp_path / "r.jsonl", cache_dir=tmp_path / "cache", progress=False, log=lines.append)
    assert time.monotonic() - started < 120
    assert any("offers the resource GPU=1" in line and "waiting up to 2 s" in line for line in lines), lines
    assert not (tmp_path / "r.jsonl").exists() or not (tmp_path / "r.jsonl").read_text().strip()


def test_one_clients_end_leaves_the_memory_budget_to_the_others_on_a_shared_cluster(dask_cluster):
    """Client B's run needs every worker, a restarted one too, to offer the MEMORY its units ask
    for; client A ending its run on the same cluster must not take that away."""
    from tecb_eval.grid.dask_executor import DaskExecutor, connect

    address = dask_cluster.scheduler_address
    second = DaskExecutor(connect(address, 30), address, 2**30, log=lambda m: None)
    try:
        first = DaskExecutor(connect(address, 30), address, 2**30, log=lambda m: None)
        first.close()
        (worker, *_) = sorted(second.client.scheduler_info(n_workers=-1)["workers"])
        second.client.restart_workers([worker], timeout=120)
        deadline = time.monotonic() + 120
        offered = {}
        while time.monotonic() < deadline:
            workers = second.client.scheduler_info(n_workers=-1)["workers"]
            offered = {w: info.get("resources", {}) for w, info in workers.items()}
            if len(offered) == 2 and all("MEMORY" in r for r in offered.values()):
                break
            time.sleep(0.2)
        assert len(offered) == 2 and all("MEMORY" in r for r in offered.values()), offered
    finally:
        second.close()
