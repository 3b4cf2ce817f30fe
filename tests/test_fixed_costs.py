"""A run pays for its work, not for fixed costs (issue 37): the fast protocol's sample is drawn by
MTEB once and read back from the cache folder, a grid with one unit runs in this process, and a
run imports only what its work needs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tecb_data
from tecb_eval.grid import executors, samples as samples_module
from tecb_eval.grid.run import run_grid
from tecb_eval.grid.samples import SampleCache, same_sample, sample_key

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "sentence_transformers", "mteb")


@pytest.fixture(scope="module")
def blurbs(demo_datasets):
    return demo_datasets / "blurbs-clustering-s2s"


@pytest.mark.slow
def test_the_stored_sample_is_the_one_mteb_draws(blurbs, tmp_path, monkeypatch, capsys):
    from tecb_eval.mteb.sampling import fast_sample

    bench = tecb_data.load(blurbs)
    cache = SampleCache(tmp_path)
    cache.get(bench, 42)
    assert cache.drawn == 1 and len(list((tmp_path / "samples").glob("*.npz"))) == 1
    # Read back by a new cache (a later run), it is what MTEB draws afresh: texts, labels and the
    # bootstrap rows, in order and as int64.
    later = SampleCache(tmp_path)
    stored = later.lookup(bench, 42)
    fresh = fast_sample(bench, 42)
    assert stored is not None and later.drawn == 0
    assert same_sample(stored, fresh) and len(fresh.bootstraps) == 10
    assert all(rows.dtype == np.int64 for rows in stored.bootstraps)
    # Another seed is another draw, and it too equals MTEB's.
    assert later.lookup(bench, 7) is None
    assert same_sample(later.get(bench, 7), fast_sample(bench, 7)) and later.drawn == 1
    # Another MTEB version is another key: drawn again, never read from the old file.
    key = sample_key(bench, 42)
    real = samples_module._version
    monkeypatch.setattr(samples_module, "_version", lambda p: "0.0.0-other" if p == "mteb" else real(p))
    assert sample_key(bench, 42) != key
    other = SampleCache(tmp_path)
    assert other.lookup(bench, 42) is None
    other.get(bench, 42)
    assert other.drawn == 1
    monkeypatch.undo()
    # A damaged file is said, removed and drawn again.
    path = tmp_path / "samples" / f"{key}.npz"
    path.write_bytes(b"not a zip")
    again = SampleCache(tmp_path)
    assert same_sample(again.get(bench, 42), fresh) and again.drawn == 1
    assert "damaged cache file" in capsys.readouterr().err
    assert np.load(path)["chosen"].dtype == np.int32


@pytest.mark.slow
def test_the_stored_per_level_draws_are_the_ones_mteb_draws(blurbs, tmp_path, capsys):
    from tecb_eval.mteb.levels import fast_levels

    bench = tecb_data.load(blurbs)
    cache = SampleCache(tmp_path)
    for seed in (42, 7):
        sample = cache.get(bench, seed)
        cache.levels(bench, seed, sample.texts)
    assert cache.levels_drawn == 2
    assert len(list((tmp_path / "samples").glob("*.levels.npz"))) == 2
    for seed in (42, 7):
        # Read back by a new cache (a later run), without MTEB, they are what MTEB draws afresh:
        # per draw and level the same rows of the flat sample, labels and k.
        later = SampleCache(tmp_path)
        sample = later.lookup(bench, seed)
        stored = later.levels(bench, seed, sample.texts)
        fresh = fast_levels(bench, seed, sample.texts)
        assert later.drawn == 0 and later.levels_drawn == 0
        assert len(fresh) == 10 and len(fresh[0]) >= 2  # the demo's paths have two levels or more
        assert samples_module.same_levels(stored, fresh)
        assert all(lv.rows.dtype == np.int64 for draw in stored for lv in draw)
    # The two seeds' draws differ (the referee can tell draws apart).
    assert not samples_module.same_levels(SampleCache(tmp_path).levels(bench, 7, cache.lookup(bench, 7).texts),
                                          SampleCache(tmp_path).levels(bench, 42, cache.lookup(bench, 42).texts))
    # A damaged file (unreadable, or rows outside the flat sample) is said, removed and drawn again.
    key = sample_key(bench, 42)
    path = tmp_path / "samples" / f"{key}.levels.npz"
    base = cache.lookup(bench, 42).texts
    fresh = fast_levels(bench, 42, base)
    for damage in (lambda: path.write_bytes(b"not a zip"),
                   lambda: np.savez(path.open("wb"), rows=np.full((1, 10, 4), len(base), dtype=np.int32))):
        damage()
        again = SampleCache(tmp_path)
        assert samples_module.same_levels(again.levels(bench, 42, base), fresh) and again.levels_drawn == 1
        assert "damaged cache file" in capsys.readouterr().err
    # A dataset without genre paths has no per-level draws, and nothing is drawn for it.
    assert SampleCache(tmp_path).levels(_without_paths(bench), 42, base) is None


@pytest.mark.slow
def test_one_run_of_mtebs_transform_gives_both_the_flat_and_the_per_level_draws(blurbs, monkeypatch):
    from tecb_eval.mteb import levels as levels_module
    from tecb_eval.mteb import sampling
    from tecb_eval.mteb.levels import fast_levels

    bench = tecb_data.load(blurbs)
    calls = []
    real = sampling.embedded_set
    # Our own helper around MTEB's task, counted: MTEB's transform runs once per embedded_set call.
    monkeypatch.setattr(sampling, "embedded_set", lambda *a: calls.append(a) or real(*a))
    sample, levels = levels_module.fast_draws(bench, 42)
    assert len(calls) == 1
    # The same draws as MTEB's flat sample and its per-level draws, each made on its own.
    assert same_sample(sample, sampling.fast_sample(bench, 42))
    assert samples_module.same_levels(levels, fast_levels(bench, 42, sample.texts)) and len(levels[0]) >= 2
    # A dataset without genre paths: the flat sample alone.
    flat, none = levels_module.fast_draws(_without_paths(bench), 42)
    assert none is None and same_sample(flat, sample)


@pytest.mark.slow
def test_draws_made_ahead_in_a_child_are_mtebs_and_stored_here_only_when_taken(blurbs, tmp_path):
    import psutil

    from tecb_eval.mteb.levels import fast_levels
    from tecb_eval.mteb.sampling import fast_sample

    def drawing_children() -> set[int]:  # loky's worker processes (its resource trackers stay)
        return {c.pid for c in psutil.Process().children()
                if "popen_loky_posix" in " ".join(c.cmdline()) and c.status() != psutil.STATUS_ZOMBIE}

    bench = tecb_data.load(blurbs)
    before = drawing_children()
    with SampleCache(tmp_path) as cache:
        assert cache.draw_ahead([bench, bench], [42, 7]) == 2  # the same build twice is drawn once
        child = drawing_children() - before
        assert len(child) == 1
        assert not (tmp_path / "samples").exists()  # the child writes nothing
        sample = cache.get(bench, 42)
        levels = cache.levels(bench, 42, sample.texts)
        assert cache.drawn == 1 and cache.levels_drawn == 1
    # Stopped with the cache, the child is gone; seed 7, never taken, left no file.
    assert not child & drawing_children()
    assert sorted(p.name for p in (tmp_path / "samples").iterdir()) == \
        sorted([f"{sample_key(bench, 42)}.npz", f"{sample_key(bench, 42)}.levels.npz"])
    assert same_sample(sample, fast_sample(bench, 42))
    assert samples_module.same_levels(levels, fast_levels(bench, 42, sample.texts))
    # Stored draws are not drawn ahead again.
    with SampleCache(tmp_path) as later:
        assert later.draw_ahead([bench], [42]) == 0 and later._pool is None
    # A child that dies (killed, out of memory) costs its head start, not the run: drawn here.
    with SampleCache(None) as fresh:
        before = drawing_children()
        fresh.draw_ahead([bench], [42])
        for pid in drawing_children() - before:
            psutil.Process(pid).kill()
        assert same_sample(fresh.get(bench, 42), sample) and fresh.drawn == 1


@pytest.mark.slow
def test_ctrl_c_while_mteb_draws_ahead_stops_the_child_and_leaves_no_sample(blurbs, tmp_path):
    import signal
    import time

    import psutil

    cache, results = tmp_path / "cache", tmp_path / "r.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "tecb_eval.cli", "run", "--data", str(blurbs), "--model", "tfidf-lsa", "--protocol",
         "fast", "--config", "minibatch_kmeans:none", "--results", str(results), "--cache-dir", str(cache), "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TECB_JOBS": ""})
    # Until the child that draws MTEB's sample is there (it starts once the dataset is read).
    deadline, child = time.monotonic() + 120, []
    while not child and time.monotonic() < deadline and process.poll() is None:
        child = [c for c in psutil.Process(process.pid).children(recursive=True)
                 if "popen_loky_posix" in " ".join(c.cmdline())]
        time.sleep(0.02)
    assert child, "no child drew the sample"
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130 and "interrupted" in err and "Traceback" not in err, err
    _, alive = psutil.wait_procs(child, timeout=30)
    assert not [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not list(cache.glob("samples/*.npz")) and not results.exists()


def _without_paths(bench):
    import dataclasses

    return dataclasses.replace(bench, splits=tuple(dataclasses.replace(s, label_paths=None) for s in bench.splits))


class _NoPool:
    def __init__(self, *args, **kwargs):
        raise AssertionError("a worker pool was started")


@pytest.mark.slow
def test_a_grid_of_one_unit_runs_in_this_process(blurbs, tmp_path, monkeypatch):
    monkeypatch.setattr(executors, "LocalExecutor", _NoPool)
    # Fast protocol, one configuration: one unit (the pooled sample), whatever jobs asks for.
    frame = run_grid([blurbs], ["tfidf-lsa"], configurations=["minibatch_kmeans:none"], protocol="fast", jobs=2,
                     cache_dir=tmp_path / "cache", progress=False, log=lambda m: None)
    assert len(frame) == 10
    # Legacy on one split, one configuration: one unit too.
    frame = run_grid([blurbs], ["tfidf-lsa"], configurations=["minibatch_kmeans:none"], limit_splits=1, jobs=2,
                     cache_dir=tmp_path / "cache", progress=False, log=lambda m: None)
    assert len(frame) == 1
    # Two splits are two units side by side: the pool is asked for.
    with pytest.raises(AssertionError, match="a worker pool was started"):
        run_grid([blurbs], ["tfidf-lsa"], configurations=["minibatch_kmeans:none"], limit_splits=2, jobs=2,
                 cache_dir=tmp_path / "cache", progress=False, log=lambda m: None)


@pytest.mark.slow
def test_a_grid_too_small_for_workers_runs_here_unless_workers_are_asked_for(blurbs, tmp_path, monkeypatch):
    monkeypatch.setattr(executors, "LocalExecutor", _NoPool)
    monkeypatch.delenv("TECB_JOBS", raising=False)
    # Two demo splits, UMAP among the reductions: 8 units, about a second of work; two worker
    # processes would spend more than that importing the stack.
    args = dict(configurations=["minibatch_kmeans:none", "minibatch_kmeans:umap", "hdbscan:umap",
                                "minibatch_kmeans:pca", "agglomerative:pca50+umap"], limit_splits=2,
                progress=False, log=lambda m: None)
    frame = run_grid([blurbs], ["tfidf-lsa"], cache_dir=tmp_path / "auto", **args)
    assert len(frame) == 2 * 5
    # Asked for, by jobs or by $TECB_JOBS, workers start whatever the size.
    with pytest.raises(AssertionError, match="a worker pool was started"):
        run_grid([blurbs], ["tfidf-lsa"], cache_dir=tmp_path / "jobs", jobs=2, **args)
    monkeypatch.setenv("TECB_JOBS", "2")
    with pytest.raises(AssertionError, match="a worker pool was started"):
        run_grid([blurbs], ["tfidf-lsa"], cache_dir=tmp_path / "env", **args)


def test_workers_start_only_for_work_that_pays_for_them():
    from tecb_eval.grid.scheduling import MIN_POOL_WORK_SECONDS, local_jobs

    big, small = 10 * MIN_POOL_WORK_SECONDS, MIN_POOL_WORK_SECONDS / 2
    assert local_jobs(8, chosen=False, side_by_side=3, work_seconds=big) == 3  # no idle workers
    assert local_jobs(2, chosen=False, side_by_side=10, work_seconds=big) == 2
    assert local_jobs(2, chosen=False, side_by_side=10, work_seconds=small) == 1
    assert local_jobs(2, chosen=True, side_by_side=10, work_seconds=small) == 2
    assert local_jobs(2, chosen=True, side_by_side=1, work_seconds=big) == 1  # one unit: here, asked or not


def test_the_work_estimate_grows_with_the_grid(blurbs, tmp_path):
    from tecb_eval.grid.run import Grid
    from tecb_eval.grid.store import ResultsStore

    def grid(splits, configurations, models=("tfidf-lsa",)):
        return Grid([blurbs], list(models), configurations=[tuple(c.split(":")) for c in configurations],
                    protocol="legacy", cache_dir=None, store=ResultsStore(None), limit_splits=splits,
                    progress=False, log=lambda m: None)

    one = grid(1, ["minibatch_kmeans:umap"])
    assert one.units_side_by_side() == 1
    assert 0 < one.estimated_work() < grid(3, ["minibatch_kmeans:umap"]).estimated_work()
    assert grid(3, ["minibatch_kmeans:umap"]).units_side_by_side() == 3
    # Two algorithms on one reduction share its unit; two models double the work, not the units.
    two = grid(3, ["minibatch_kmeans:umap", "agglomerative:umap"], models=("tfidf-lsa", "minilm-l6"))
    assert two.units_side_by_side() == 3
    assert two.estimated_work() > 2 * grid(3, ["minibatch_kmeans:umap"]).estimated_work()


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
# also read MTEB's per-level draws from the cache; 10kGNAD has flat labels only.
@pytest.mark.parametrize(("model", "dataset"), [("tfidf-lsa", "tenkgnad-clustering-s2s"),
                                                ("use-multilingual", "blurbs-clustering-s2s")])
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
