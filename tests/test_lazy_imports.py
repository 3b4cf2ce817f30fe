"""A run imports only what its work needs: `--help` imports no model or clustering stack, and a fast
run whose MTEB sample is already in the cache imports neither torch nor MTEB (each in a fresh
interpreter under PYTHONPROFILEIMPORTTIME, which reaches the run's child processes too)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

HEAVY = ("torch", "transformers", "sentence_transformers", "mteb")


def _imported(stderr: str) -> set[str]:
    """Top-level packages a run under ``PYTHONPROFILEIMPORTTIME`` imported, in its own process or in
    a child it started (the environment variable, unlike ``-X importtime``, reaches the children, and
    they write to the run's stderr): a cold fast run draws MTEB's sample in a child."""
    return {m.group(1).split(".")[0] for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s*([\w.]+)\s*$",
                                                           stderr, re.MULTILINE)}


def _run(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TECB_JOBS": "", "PYTHONPROFILEIMPORTTIME": "1"}
    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=600)


def _scores(results: Path) -> list[tuple]:
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    return sorted((r["split"], r["v_measure"], r["ami"], r["ari"], r["n_samples"]) for r in rows)


# Each model once, and each kind of dataset once: Blurbs is built with genre paths, so its fast runs
# also read MTEB's per-level draws from the cache; 10kGNAD has flat labels only. The cheap model takes
# the dataset with levels (each cell scores every level of its 16384 draws), the 512-d one the flat
# dataset: the same paths, without the costliest pairing.
@pytest.mark.parametrize(("model", "dataset"), [("tfidf-lsa", "blurbs-clustering-s2s"),
                                                ("use-multilingual", "tenkgnad-clustering-s2s")])
@pytest.mark.slow
def test_a_run_on_a_cached_sample_imports_no_torch_nor_mteb(demo_datasets, tmp_path, model, dataset):
    cache = tmp_path / "cache"
    data = demo_datasets / dataset

    def run(name: str) -> subprocess.CompletedProcess:
        done = _run("tecb_eval.cli", "run", "--data", str(data), "--model", model, "--protocol", "fast",
                    "--config", "minibatch_kmeans:none", "--results", str(tmp_path / f"{name}.jsonl"),
                    "--cache-dir", str(cache), "--quiet", "--no-figure1")
        assert done.returncode == 0, done.stderr[-2000:]
        return done

    first = run("first")  # MTEB draws the sample (and the model encodes)
    assert "mteb" in _imported(first.stderr)
    second = run("second")
    imported = _imported(second.stderr)
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))
    # The stored sample gives MTEB's draws: the same cells, bit for bit.
    assert _scores(tmp_path / "first.jsonl") == _scores(tmp_path / "second.jsonl")


@pytest.mark.parametrize("command", ["tecb_eval.cli", "tecb_data.cli"])
def test_help_imports_no_model_or_clustering_stack(command):
    done = _run(command, "--help")
    assert done.returncode == 0
    imported = _imported(done.stderr)
    assert not imported & {*HEAVY, "sklearn", "datasets", "pandas"}, sorted(imported & {*HEAVY, "sklearn", "datasets"})
