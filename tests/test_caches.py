"""The grid's caches on disk (``--cache-dir``): MTEB's sample for the fast protocol and its
per-level draws are drawn by MTEB once, stored, and read back as what MTEB draws afresh; drawn
ahead in a child process, they are stored only when taken; a sample file copied over another
key's is discarded; a damaged embedding, reduction or sample file is recomputed with a warning
naming it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tecb_data
from tecb_eval.cli import main
from tecb_eval.grid import samples as samples_module
from tecb_eval.grid.samples import SampleCache, same_sample, sample_key


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _without_paths(bench):
    import dataclasses

    return dataclasses.replace(bench, splits=tuple(dataclasses.replace(s, label_paths=None) for s in bench.splits))


# -- embeddings and reductions ---------------------------------------------------------------------

def test_a_damaged_cache_file_is_recomputed_with_a_warning_naming_it(demo_datasets, tmp_path, capsys):
    data = demo_datasets / "tenkgnad-clustering-s2s"
    cache = tmp_path / "cache"
    args = ["run", "--data", str(data), "--model", "tfidf-lsa", "--config", "minibatch_kmeans:pca",
            "--limit-splits", "2", "--cache-dir", str(cache), "--quiet"]
    assert main(args + ["--results", str(tmp_path / "first.jsonl")]) == 0
    shards = sorted(cache.glob("embeddings/*/shard-*.npz"))
    reductions = sorted(cache.glob("reductions/*.npy"))
    assert len(shards) == 1 and len(reductions) == 2
    shards[0].write_bytes(shards[0].read_bytes()[:100])  # cut short, as a full disk leaves it
    reductions[0].write_bytes(b"\x93NUMPY garbage")
    np.save(reductions[1], np.zeros(3))  # a valid file with the wrong content (1-D)
    capsys.readouterr()
    assert main(args + ["--results", str(tmp_path / "second.jsonl")]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert sorted(w.split(": ")[1] for w in warnings) == sorted(str(p) for p in [shards[0], *reductions])
    scores = lambda name: [(r["split"], r["v_measure"]) for r in _lines(tmp_path / name)]  # noqa: E731
    assert scores("second.jsonl") == scores("first.jsonl")
    # Recomputed and written back: a third run reads them without a word.
    assert main(args + ["--results", str(tmp_path / "third.jsonl")]) == 0
    assert "warning" not in capsys.readouterr().err


# -- MTEB's draws for the fast protocol --------------------------------------------------------------

@pytest.fixture(scope="module")
def mteb_draws():
    """What MTEB draws afresh for a dataset and seed, each drawn once for the module: the flat sample
    (``mteb_draws.sample(bench, seed)``) and the per-level draws (``mteb_draws.levels(bench, seed,
    texts)``), each by its own function (never through the cache under test). Read-only."""
    from tecb_eval.mteb.levels import fast_levels
    from tecb_eval.mteb.sampling import fast_sample

    class Draws:
        def __init__(self):
            self._samples, self._levels = {}, {}

        def sample(self, bench, seed):
            key = (bench.location, bench.fingerprint, seed)
            if key not in self._samples:
                self._samples[key] = fast_sample(bench, seed)
            return self._samples[key]

        def levels(self, bench, seed, texts):
            key = (bench.location, bench.fingerprint, seed, tuple(texts))
            if key not in self._levels:
                self._levels[key] = fast_levels(bench, seed, texts)
            return self._levels[key]

    return Draws()


@pytest.mark.slow
def test_the_stored_sample_is_the_one_mteb_draws(blurbs_folder, tmp_path, monkeypatch, capsys, mteb_draws):
    bench = tecb_data.load(blurbs_folder)
    cache = SampleCache(tmp_path)
    cache.get(bench, 42)
    assert cache.drawn == 1 and len(list((tmp_path / "samples").glob("*.npz"))) == 1
    # Read back by a new cache (a later run), it is what MTEB draws afresh: texts, labels and the
    # bootstrap rows, in order and as int64.
    later = SampleCache(tmp_path)
    stored = later.lookup(bench, 42)
    fresh = mteb_draws.sample(bench, 42)
    assert stored is not None and later.drawn == 0
    assert same_sample(stored, fresh) and len(fresh.bootstraps) == 10
    assert all(rows.dtype == np.int64 for rows in stored.bootstraps)
    # Another seed is another draw, and it too equals MTEB's.
    assert later.lookup(bench, 7) is None
    assert same_sample(later.get(bench, 7), mteb_draws.sample(bench, 7)) and later.drawn == 1
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
def test_the_stored_per_level_draws_are_the_ones_mteb_draws(blurbs_folder, tmp_path, capsys, mteb_draws):
    bench = tecb_data.load(blurbs_folder)
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
        fresh = mteb_draws.levels(bench, seed, sample.texts)
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
    fresh = mteb_draws.levels(bench, 42, base)
    for damage in (lambda: path.write_bytes(b"not a zip"),
                   lambda: np.savez(path.open("wb"), rows=np.full((1, 10, 4), len(base), dtype=np.int32))):
        damage()
        again = SampleCache(tmp_path)
        assert samples_module.same_levels(again.levels(bench, 42, base), fresh) and again.levels_drawn == 1
        assert "damaged cache file" in capsys.readouterr().err
    # A dataset without genre paths has no per-level draws, and nothing is drawn for it.
    assert SampleCache(tmp_path).levels(_without_paths(bench), 42, base) is None


@pytest.mark.slow
def test_one_run_of_mtebs_transform_gives_both_the_flat_and_the_per_level_draws(blurbs_folder, monkeypatch,
                                                                                 mteb_draws):
    from tecb_eval.mteb import levels as levels_module
    from tecb_eval.mteb import sampling

    bench = tecb_data.load(blurbs_folder)
    calls = []
    real = sampling.embedded_set
    # Our own helper around MTEB's task, counted: MTEB's transform runs once per embedded_set call.
    monkeypatch.setattr(sampling, "embedded_set", lambda *a: calls.append(a) or real(*a))
    sample, levels = levels_module.fast_draws(bench, 42)
    assert len(calls) == 1
    monkeypatch.undo()
    # The same draws as MTEB's flat sample and its per-level draws, each made on its own.
    assert same_sample(sample, mteb_draws.sample(bench, 42))
    assert samples_module.same_levels(levels, mteb_draws.levels(bench, 42, sample.texts)) and len(levels[0]) >= 2
    # A dataset without genre paths: the flat sample alone.
    flat, none = levels_module.fast_draws(_without_paths(bench), 42)
    assert none is None and same_sample(flat, sample)


@pytest.mark.slow
def test_draws_made_ahead_in_a_child_are_mtebs_and_stored_here_only_when_taken(blurbs_folder, tmp_path, mteb_draws):
    import psutil

    def drawing_children() -> set[int]:  # loky's worker processes (its resource trackers stay)
        return {c.pid for c in psutil.Process().children()
                if "popen_loky_posix" in " ".join(c.cmdline()) and c.status() != psutil.STATUS_ZOMBIE}

    bench = tecb_data.load(blurbs_folder)
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
    assert same_sample(sample, mteb_draws.sample(bench, 42))
    assert samples_module.same_levels(levels, mteb_draws.levels(bench, 42, sample.texts))
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
def test_ctrl_c_while_mteb_draws_ahead_stops_the_child_and_leaves_no_sample(blurbs_folder, tmp_path):
    import signal
    import time

    import psutil

    cache, results = tmp_path / "cache", tmp_path / "r.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "tecb_eval.cli", "run", "--data", str(blurbs_folder), "--model", "tfidf-lsa", "--protocol",
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


def test_a_sample_copied_over_another_key_is_discarded_and_drawn_again(demo_datasets, tmp_path, capsys, mteb_draws):
    from tecb_eval.mteb.levels import first_paths

    bench = tecb_data.load(demo_datasets / "blurbs-clustering-s2s")
    cache = SampleCache(tmp_path)
    seven = cache.get(bench, 7)
    cache.levels(bench, 7, seven.texts)
    folder = tmp_path / "samples"
    # Seed 7's draws copied over seed 42's names: their row numbers index this dataset's rows as well.
    for suffix in ("", ".levels"):
        shutil.copyfile(folder / f"{sample_key(bench, 7)}{suffix}.npz", folder / f"{sample_key(bench, 42)}{suffix}.npz")
    capsys.readouterr()
    later = SampleCache(tmp_path)
    assert later.lookup(bench, 42) is None
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "drawn for key" in error and sample_key(bench, 42) in error
    assert later.lookup_levels(bench, 42, seven.texts, first_paths(bench)) is None
    assert "drawn for key" in capsys.readouterr().err
    assert same_sample(later.get(bench, 42), mteb_draws.sample(bench, 42)) and later.drawn == 1
    assert same_sample(SampleCache(tmp_path).lookup(bench, 7), mteb_draws.sample(bench, 7))  # the original stays


def test_mtebs_downsampling_reads_a_label_column_in_batches_as_the_same_values():
    """MTEB's stratified downsampling iterates a `datasets` column and hands numpy another: while
    MTEB's transform runs in tecb (tecb_eval.mteb.sampling) each is read in batches, to the values
    and arrays that reading row by row gives, and the class is put back as it was after."""
    from datasets import ClassLabel, Dataset
    from datasets import arrow_dataset

    from tecb_eval.mteb.sampling import _columns_read_whole

    names = ["Krimi", "Lyrik", "Sachbuch"]
    data = Dataset.from_dict({"labels": [names[i % 3] for i in range(300)], "sentences": [f"t{i}" for i in range(300)]})
    data = data.cast_column("labels", ClassLabel(names=names))
    kept = (arrow_dataset.Column.__iter__, hasattr(arrow_dataset.Column, "__array__"))

    def read():
        return {(f, c): (np.asarray(data.with_format(f)[c]), list(data.with_format(f)[c]))
                for f in ("numpy", None) for c in ("labels", "sentences")}

    by_rows = read()
    with _columns_read_whole():
        batched = read()
    for key, (array, values) in by_rows.items():
        assert batched[key][0].dtype == array.dtype and np.array_equal(batched[key][0], array), key
        assert batched[key][1] == values and [type(v) for v in batched[key][1]] == [type(v) for v in values], key
    assert (arrow_dataset.Column.__iter__, hasattr(arrow_dataset.Column, "__array__")) == kept
