"""A worker's loaded copy of a model is checked against the identity the coordinator gives it: a
copy older than the worker's files (a Hub id whose cached snapshot moved on while the worker held
the old one) is loaded again from the files, and a worker whose files differ is one line naming it.

The worker side runs in a fresh interpreter: huggingface_hub reads HF_HUB_CACHE when it is
imported, so the Hub id resolves in a temporary cache, as on a user's worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ID = "tecb-tests/tiny-st"

ELSEWHERE = f"st:{REPO_ID}@{'c' * 40}|pooling=Pooling+Normalize|layer=last|max_length=32"

# Loads the model as a warm worker does and moves the cache's `main` to the other snapshot; encodes
# a shard the coordinator describes by the identity it gives the model now, then one it describes
# by files this worker does not hold.
WORKER_SIDE = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from tecb_data.errors import UserError
    from tecb_eval.grid.cluster_encode import for_workers
    from tecb_eval.grid.worker_models import WorkerModels
    from tecb_eval.models.spec import model_spec, open_model

    refs, moved_to, elsewhere = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    spec = for_workers(model_spec({repo!r}))
    models = WorkerModels()
    seen = {{"held": models.model(spec, 7).identity}}
    refs.write_text(moved_to)
    seen["coordinator"] = open_model(spec, 7).encoder.identity
    vectors, truncated = models.encode_shard(spec, 7, None, seen["coordinator"], [["Ein Buch"]])
    seen.update(rows=len(vectors), kept=models.model(spec, 7).identity)
    try:
        models.encode_shard(spec, 7, None, elsewhere, [["Ein Buch"]])
    except UserError as error:
        seen["error"] = str(error)
    print(json.dumps(seen))
""").format(repo=REPO_ID)


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory, tiny_sentence_transformer):
    """Two snapshots of one Hub id: the tiny model as saved, and the same weights cut at 16 tokens
    (another identity); `main` names the first."""
    root = tmp_path_factory.mktemp("hf-cache") / "hub"
    repo = root / ("models--" + REPO_ID.replace("/", "--"))
    for revision, max_length in (("a" * 40, None), ("b" * 40, 16)):
        snapshot = repo / "snapshots" / revision
        for path in sorted(tiny_sentence_transformer.rglob("*")):
            if path.is_file():
                target = snapshot / path.relative_to(tiny_sentence_transformer)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.symlink_to(path)
        if max_length:
            config = snapshot / "sentence_bert_config.json"
            settings = json.loads(config.read_text(encoding="utf-8"))
            config.unlink()
            config.write_text(json.dumps({**settings, "max_seq_length": max_length}), encoding="utf-8")
    (repo / "refs").mkdir()
    return root


@pytest.fixture(scope="module")
def worker_saw(hub_cache, tmp_path_factory) -> dict:
    refs = next(hub_cache.glob("models--*")) / "refs" / "main"
    refs.write_text("a" * 40)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(hub_cache), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", WORKER_SIDE, str(refs), "b" * 40, ELSEWHERE], env=env,
                          cwd=tmp_path_factory.mktemp("worker"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_copy_older_than_the_workers_files_is_loaded_again(worker_saw):
    assert "max_length=32" in worker_saw["held"] and "max_length=16" in worker_saw["coordinator"]
    assert worker_saw["rows"] == 1 and worker_saw["kept"] == worker_saw["coordinator"]


def test_a_worker_whose_files_differ_is_one_line_naming_it(worker_saw):
    error = worker_saw["error"]
    assert "\n" not in error
    assert error.startswith(f"model tiny-st: this process loads it from its files as st:{REPO_ID}@{'b' * 40}")
    assert f"the coordinator as {ELSEWHERE}; install the same model files and package versions on every worker" in error
