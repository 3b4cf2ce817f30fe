"""The grid on several cores and on a Dask cluster: the serial scores bit for bit, several seeds
with one encoding, a worker killed mid-grid, memory budgets, Ctrl-C, and the one-line errors.

The grids compare tfidf-lsa's dense vectors and degenerate ones: a signed hashing bag of words of a
four-fold replica of the demo Blurbs, whose UMAP start needs a seeded restart vector
(tests/degenerate_inputs.py, tests/test_degenerate_determinism.py).

Dask runs for real: a ``distributed.LocalCluster`` with worker processes on 127.0.0.1, and for
the worker without tecb, a ``dask worker`` process whose Python cannot import it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import tecb_data
from helpers import CountingEncoder as Counting
from helpers import computed_once, unit_holding_plugin, wait_for_claim
from degenerate_inputs import HashingEncoder, replicate_books
from tecb_data.build import build
from tecb_data.demo import demo_input
from tecb_data.errors import UserError
from tecb_eval.reports import tables as report
from tecb_eval.cli import main as eval_main
from tecb_eval.models.encoders import get_encoder
from tecb_eval.grid.run import run_grid
from tecb_eval.grid.store import cell_key
from tecb_eval.grid.work import WORKER_BASELINE_BYTES, Cell, WorkUnit, run_unit

import distributed  # noqa: E402  (the [test] extra)

METRICS = ["v_measure", "homogeneity", "completeness", "ami", "ari", "noise_fraction", "n_clusters_found"]
# The label-free criteria, the spectrum's k, the kept assignment, DBCV and the topic words: a labelled
# grid computes none of them unless asked (--label-free), so its rows have none, whichever executor ran them.
LABEL_FREE = ["silhouette", "calinski_harabasz", "davies_bouldin", "size_balance", "spectral_k", "spectral_k_fit",
              "assignment", "dbcv", "npmi", "topic_diversity", "topic_words", "label_free_s", "topics_s"]
ORDER = ["model", "dataset", "reduction", "algorithm", "split", "seed"]
CONFIGS = ["minibatch_kmeans:none", "agglomerative:none", "minibatch_kmeans:pca", "hdbscan:pca",
           "dbstream:pca", "minibatch_kmeans:umap", "agglomerative:umap"]
MODELS = ["tfidf-lsa", HashingEncoder()]
# The grid a worker is killed in: the configurations without UMAP. Which cells are run again is the
# point there, not UMAP's bits (the grids above compare those); a restarted worker then runs
# minutes less of UMAP on the four-fold replica.
KILL_CONFIGS = [c for c in CONFIGS if "umap" not in c]


@pytest.fixture(scope="module")
def demo(demo_datasets):
    return [demo_datasets / "blurbs-clustering-s2s", demo_datasets / "tenkgnad-clustering-s2s"]


@pytest.fixture(scope="module")
def grid_data(demo, tmp_path_factory):
    """What the serial and parallel grids run on: Blurbs with four copies of every demo book (its
    second split, 677 texts, is where UMAP's start broke down on hashing vectors) and 10kGNAD.
    Built once for the test processes, as the serial grid that runs on them (:func:`serial`)."""

    def make():
        root = tmp_path_factory.mktemp("blurbs-x4")
        replica = root / "input"  # beside the output, not holding it: a build refuses to write into its input
        replica.mkdir()
        for part in sorted(Path(demo_input("blurbs")).iterdir()):
            (replica / part.name).write_text(replicate_books(part.read_text(encoding="utf-8"), 4), encoding="utf-8")
        return [build("blurbs", replica, root / "data", views=("s2s",))[0][0], demo[1]]

    return computed_once(tmp_path_factory, "parallel-grid-data", make)


@pytest.fixture(scope="module")
def cluster(dask_cluster):
    return dask_cluster


# Every LocalCluster of this module (the shared one, and a bare one a test starts) leaves the
# environment as it found it.
pytestmark = pytest.mark.usefixtures("kept_environment", "one_thread")


@pytest.fixture(scope="module")
def serial(grid_data, tmp_path_factory):
    """The reference: the same grid in one test process, two seeds, computed once for the test
    processes (pytest-xdist can split this module between two; each compares it with grids it runs)."""
    return computed_once(tmp_path_factory, "parallel-serial", lambda: run_grid(
        grid_data, MODELS, configurations=CONFIGS, seeds=(42, 7), limit_splits=2, jobs=1,
        cache_dir=tmp_path_factory.mktemp("serial-cache"), progress=False))


def _same_scores(a, b) -> bool:
    a, b = a.sort_values(ORDER).reset_index(drop=True), b.sort_values(ORDER).reset_index(drop=True)
    return (a[ORDER].equals(b[ORDER]) and a[METRICS].equals(b[METRICS])
            and not set(LABEL_FREE) & (set(a.columns) | set(b.columns)))


def _tables(frame) -> str:
    return "\n".join(report.format_table(table, "md", note=note) for table, note in report.tables(frame).values())


def test_seeds_give_a_row_per_cell_and_seed_with_one_encoding(demo, grid_data, serial, tmp_path):
    cells = serial.groupby(["model", "dataset", "split", "reduction", "algorithm"]).seed.apply(sorted)
    assert len(cells) == len(MODELS) * len(grid_data) * 2 * len(CONFIGS) and all(seeds == [7, 42] for seeds in cells)
    assert set(serial.seeds) == {"7,42"}
    # The seeds really vary the clustering: not every score of seed 7 equals seed 42's.
    by_seed = {s: part.sort_values(ORDER[:5]).v_measure.to_numpy() for s, part in serial.groupby("seed")}
    assert (by_seed[7] != by_seed[42]).any()
    counting = Counting(get_encoder("tfidf-lsa").fit_corpus(["ein text", "noch ein text"]), "counting-tfidf")
    run_grid(demo[:1], [counting], configurations=["minibatch_kmeans:pca"], seeds=(1, 2, 3), limit_splits=2,
             jobs=1, cache_dir=None, progress=False)
    assert set(Counter(counting.calls).values()) == {1}


def test_jobs_give_the_serial_scores_and_tables_bit_for_bit(grid_data, serial, tmp_path):
    parallel = run_grid(grid_data, MODELS, configurations=CONFIGS, seeds=(42, 7), limit_splits=2, jobs=2,
                        cache_dir=tmp_path / "cache", results=tmp_path / "r.jsonl", progress=False)
    assert _same_scores(serial, parallel)
    assert _tables(serial) == _tables(parallel)
    # The store holds every cell once, whatever order the workers finished in.
    keys = [cell_key(json.loads(line)) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert len(keys) == len(set(keys)) == len(serial)


def test_dask_cluster_gives_the_serial_scores(grid_data, serial, cluster, tmp_path):
    messages = []
    frame = run_grid(grid_data, MODELS, configurations=CONFIGS, seeds=(42, 7), limit_splits=2,
                     scheduler=cluster.scheduler_address, cache_dir=tmp_path / "cache", progress=False,
                     log=messages.append)
    assert _same_scores(serial, frame)
    assert any(line.startswith("peak RSS per worker") for line in messages)


def test_a_worker_killed_mid_grid_is_survived(grid_data, serial, cluster, tmp_path):
    """SIGKILL one worker while it runs a unit: Dask (and the grid, for an input that died with
    it) run its units again; every cell ends up in the store exactly once, with the serial score.
    One seed of the serial grid, its smallest (the grid's encoders take the smallest seed of the
    run): a worker is killed and its units run again with one seed as with two, at half the cells;
    and its configurations without UMAP (:data:`KILL_CONFIGS`), each unit's cells the serial ones."""
    results = tmp_path / "r.jsonl"
    claim = tmp_path / "held-unit"
    killed = []
    grid_ended = threading.Event()

    def kill_the_held_worker():
        held = wait_for_claim(claim, grid_ended)
        if held is not None:
            os.kill(held[0], signal.SIGKILL)
            killed.append(held[1])

    with distributed.Client(cluster.scheduler_address, timeout=10) as client:
        # A worker holds the first unit it starts once 3 cells are stored, until it is killed.
        client.register_plugin(unit_holding_plugin(results, claim, 3), name="hold-one-unit")
        try:
            killer = threading.Thread(target=kill_the_held_worker, daemon=True)
            killer.start()
            frame = run_grid(grid_data, MODELS, configurations=KILL_CONFIGS, seeds=(7,), limit_splits=2,
                             scheduler=cluster.scheduler_address, cache_dir=tmp_path / "cache", results=results,
                             progress=False, log=lambda m: None)
            grid_ended.set()
            killer.join(timeout=600)
        finally:
            client.unregister_worker_plugin("hold-one-unit")
    assert killed, "no worker started a unit once the store held 3 cells: the test did not kill anything"
    configured = serial.algorithm + ":" + serial.reduction
    reference = serial[(serial.seed == 7) & configured.isin(KILL_CONFIGS)]
    assert len(reference) == len(MODELS) * len(grid_data) * 2 * len(KILL_CONFIGS)
    assert _same_scores(reference, frame)
    keys = [cell_key(json.loads(line)) for line in results.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == len(reference)
    # The cluster recovers its worker (the nanny restarts it) for the tests that follow.
    with distributed.Client(cluster.scheduler_address, timeout=10) as client:
        client.wait_for_workers(2, timeout=60)


@pytest.mark.slow
def test_unreachable_or_silent_scheduler_is_one_line_and_writes_nothing(demo, tmp_path):
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    results = tmp_path / "r.jsonl"
    started = time.monotonic()
    with pytest.raises(UserError, match=rf"the Dask scheduler at tcp://127.0.0.1:{port} refused the connection"):
        run_grid(demo[:1], ["tfidf-lsa"], configurations=["minibatch_kmeans:none"], limit_splits=1,
                 scheduler=f"tcp://127.0.0.1:{port}", scheduler_timeout=2, results=results, progress=False)
    # A server that accepts and never answers: the same line, in bounded time.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = "tcp://127.0.0.1:%d" % silent.getsockname()[1]
        with pytest.raises(UserError, match="sent no handshake within 2 s.*higher --scheduler-timeout"):
            run_grid(demo[:1], ["tfidf-lsa"], configurations=["minibatch_kmeans:none"], limit_splits=1,
                     scheduler=address, scheduler_timeout=2, results=results, progress=False)
    assert time.monotonic() - started < 30
    assert not results.exists()


BLOCK_TECB = """
# A worker environment without tecb: its imports fail as they would where it is not installed.
import importlib.abc, sys

class _NoTecb(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tecb_eval", "tecb_data"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoTecb())
"""


def test_worker_without_tecb_is_one_line_and_writes_nothing(demo, tmp_path):
    preload = tmp_path / "no_tecb.py"
    preload.write_text(BLOCK_TECB)
    results = tmp_path / "r.jsonl"
    with distributed.LocalCluster(n_workers=0, processes=True, dashboard_address=":0", host="127.0.0.1",
                                  silence_logs=40) as bare:
        worker = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", bare.scheduler_address, "--nthreads", "1",
             "--no-nanny", "--preload", str(preload), "--no-dashboard"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            with distributed.Client(bare.scheduler_address, timeout=10) as client:
                client.wait_for_workers(1, timeout=60)
            with pytest.raises(UserError, match=r"cannot run tecb: .*No module named 'tecb_eval'.*; install tecb=="):
                run_grid(demo[:1], ["tfidf-lsa"], configurations=["minibatch_kmeans:none"], limit_splits=1,
                         scheduler=bare.scheduler_address, results=results, progress=False)
        finally:
            worker.kill()
            worker.wait(timeout=30)
    assert not results.exists()


def test_memory_budget_skips_what_cannot_fit_and_refuses_a_limit_below_every_unit(demo, tmp_path):
    results = tmp_path / "r.jsonl"
    with pytest.raises(UserError, match="below the smallest unit of this grid.*raise --memory-limit"):
        run_grid(demo[:1], ["tfidf-lsa"], configurations=["minibatch_kmeans:pca"], limit_splits=2,
                 memory_limit="1MB", results=results, progress=False, jobs=1)
    assert not results.exists() or results.read_text() == ""  # the store may exist (its lock), without rows
    # A limit between the units' estimated peaks: those above it are skipped, one line each, the
    # rest run (and a limit this small leaves room for one worker process, not the two asked for).
    bench = tecb_data.load(demo[0])
    dim = get_encoder("tfidf-lsa").fit_corpus([t for s in bench.splits for t in s.texts]).encode(["x"]).shape[1]
    peaks = {}
    for split in bench.splits[:2]:
        for algorithm, reduction in (("agglomerative", "none"), ("minibatch_kmeans", "pca")):
            cell = Cell(split.name, None, tuple(split.labels), len(set(split.labels)), algorithm)
            peaks[(split.name, algorithm)] = WorkUnit("k", "l", "d", reduction, 42, "legacy", "current", (cell,),
                                                      len(split.texts), dim).memory
    low, high = sorted(peaks.values())[1:3]
    assert low < high
    messages = []
    frame = run_grid(demo[:1], ["tfidf-lsa"], configurations=["agglomerative:none", "minibatch_kmeans:pca"],
                     limit_splits=2, memory_limit=WORKER_BASELINE_BYTES + (low + high) // 2, results=results,
                     progress=False, jobs=2, log=messages.append)
    too_big = {key for key, value in peaks.items() if value > (low + high) // 2}
    assert any(m.startswith("note: 2 worker processes would hold") and "running 1 " in m for m in messages)
    skipped = [m for m in messages if m.startswith("skipped ")]
    assert len(skipped) == len(too_big) == 2 and all("raise --memory-limit" in m for m in skipped)
    assert {f"/ {split} /" for split, _ in too_big} == {f"/ {m.split(' / ')[2]} /" for m in skipped}
    assert set(zip(frame.split, frame.algorithm)) == set(peaks) - too_big


@pytest.mark.parametrize("argv, message", [
    (["--seeds", "42,42"], "seeds repeat 42; give each seed once"),
    (["--seeds", "-1"], "every seed must be an integer from 0 to 4294967295"),
    (["--seeds", "4294967296"], "every seed must be an integer from 0 to 4294967295"),
    (["--seed", "4294967296"], "seed must be an integer from 0 to 4294967295"),
    (["--jobs", "0"], "jobs must be a positive number of worker processes"),
    (["--jobs", "2", "--scheduler", "tcp://127.0.0.1:1"], "either jobs (local worker processes) or a Dask scheduler"),
    (["--memory-limit", "lots"], "memory limit 'lots': not a size"),
])
def test_bad_parallel_options_are_one_line(demo, tmp_path, capsys, argv, message):
    code = eval_main(["run", "--data", str(demo[0]), "--model", "tfidf-lsa", "--config", "minibatch_kmeans:none",
                      "--results", str(tmp_path / "r.jsonl"), "--cache-dir", str(tmp_path / "c"), "--quiet",
                      "--limit-splits", "1", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err
    assert not (tmp_path / "r.jsonl").exists() or (tmp_path / "r.jsonl").read_text() == ""


def test_empty_seeds_is_a_usage_error(demo, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        eval_main(["run", "--data", str(demo[0]), "--model", "tfidf-lsa", "--results", str(tmp_path / "r.jsonl"),
                   "--seeds", ""])
    assert exit_info.value.code == 2 and "give seeds separated by commas" in capsys.readouterr().err


def _children(pid: int) -> list[int]:
    import psutil

    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.slow
def test_ctrl_c_stops_the_grid_and_its_workers(demo, tmp_path, jobs):
    import psutil

    results = tmp_path / "r.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "tecb_eval.cli", "run", "--data", str(demo[0]), "--data", str(demo[1]),
         "--model", "tfidf-lsa", "--config", "minibatch_kmeans:umap", "--config", "agglomerative:pca50+umap",
         "--results", str(results), "--cache-dir", str(tmp_path / "cache"), "--quiet", "--jobs", jobs],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "TECB_JOBS": ""})
    # Until the first cell is stored: the store can come and go before that (a store the grid opened
    # and closed unwritten is removed), so a missing file is "not yet", never an error.
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and _stored_lines(results) < 1 and process.poll() is None:
        time.sleep(0.05)
    assert _stored_lines(results) >= 1, "the grid wrote no cell in 600 s"
    workers = _children(process.pid)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130 and "interrupted; finished cells are in the results store" in err, err
    done = results.read_text().count("\n")
    assert 1 <= done < 2 * 10 * 2  # stopped before the end (10 splits per dataset, 2 configurations)
    # The workers end with the grid: wait for that (generously), rather than for a fixed second.
    alive = []
    for pid in workers:
        try:
            alive.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    _, still_running = psutil.wait_procs(alive, timeout=60)
    assert not [p.pid for p in still_running if _running(p)]


def _stored_lines(results: Path) -> int:
    try:
        return results.read_text().count("\n")
    except FileNotFoundError:
        return 0


def _running(process) -> bool:
    import psutil

    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _misaligned(X, offset: int = 33):
    """``X`` at ``offset`` bytes past a 64-byte boundary, as Dask can hand a scattered array over."""
    buffer = np.empty(X.nbytes + 64 + offset, dtype=np.uint8)
    start = (-buffer.ctypes.data) % 64 + offset
    out = buffer[start:start + X.nbytes].view(X.dtype).reshape(X.shape)
    out[...] = X
    return out


def test_a_unit_gives_the_same_bits_wherever_its_input_lies_in_memory():
    from sklearn.decomposition import PCA
    from threadpoolctl import threadpool_limits

    X = np.random.default_rng(0).standard_normal((15350, 384)).astype(np.float32)
    with threadpool_limits(1):  # the premise: numpy sums a misaligned copy by another path
        premise = not np.array_equal(PCA(2, random_state=42).fit_transform(X),
                                     PCA(2, random_state=42).fit_transform(_misaligned(X)))
    labels = tuple(str(i % 7) for i in range(len(X)))
    unit = WorkUnit("k", "l", "d", "pca", 42, "legacy", "current",
                    (Cell("s", None, labels, 7, "minibatch_kmeans"), Cell("s", None, labels, 7, "hdbscan")),
                    len(X), X.shape[1])
    here, there = run_unit(unit, X, False), run_unit(unit, _misaligned(X), False)
    assert np.array_equal(here.reduced, there.reduced)
    assert [m["v_measure"] for m in here.metrics] == [m["v_measure"] for m in there.metrics]
    if not premise:
        # Whether a misaligned copy takes another summation path depends on the CPU, numpy and
        # BLAS; where it does not, the equality above holds trivially and proves nothing.
        pytest.skip(f"premise does not hold here (numpy {np.__version__}): PCA gives the same bits on a "
                    "misaligned copy, so this machine cannot show that run_unit aligns its input")


# -- a unit's cells side by side in this process -----------------------------------------------------

def test_a_units_cells_side_by_side_give_the_one_thread_scores_bit_for_bit(monkeypatch):
    """A unit run in the coordinator with idle cores runs its k-means, HDBSCAN and DBSTREAM cells in
    threads (Ward's alone, in this thread): every score, per-level ones included, is the same bit
    for bit as one cell after the other, and the cells really ran in more than one thread."""
    import threading

    from tecb_eval.clustering.levels import Level
    from tecb_eval.grid import work

    rng = np.random.default_rng(3)
    centres = rng.standard_normal((12, 24)) * 4
    X = (centres[rng.integers(0, 12, 900)] + rng.standard_normal((900, 24))).astype(np.float32)
    gold = tuple(str(i % 12) for i in range(len(X)))
    top = tuple(str(int(g) % 3) for g in gold)
    cells = []
    for b in range(6):  # bootstrap-like draws, each with a per-level score on its own rows
        rows = rng.integers(0, len(X), 700)
        level_rows = rng.integers(0, len(X), 600)
        levels = (Level(0, level_rows, tuple(top[i] for i in level_rows), 3),)
        cells.append(Cell(f"draw-{b}", rows, tuple(gold[i] for i in rows), 12, "minibatch_kmeans", levels))
    cells += [Cell("all", None, gold, 12, algorithm) for algorithm in ("hdbscan", "dbstream", "agglomerative")]
    unit = WorkUnit("k", "l", "d", "none", 42, "legacy", "current", tuple(cells), len(X), X.shape[1])

    where: dict[str, str] = {}
    real = work._run_cell

    def noted(unit, cell, reduced, *rest):
        where[f"{cell.split}/{cell.algorithm}"] = threading.current_thread().name
        return real(unit, cell, reduced, *rest)

    monkeypatch.setattr(work, "_run_cell", noted)  # our own function, watched to see where each cell ran
    one = run_unit(unit, X, False, threads=1)
    assert set(where.values()) == {threading.current_thread().name}
    where.clear()
    two = run_unit(unit, X, False, threads=2)
    # Every value but the timings (cluster_s, levels_s, dbcv_s, label_free_s, ...: seconds, not scores).
    assert [{k: v for k, v in m.items() if not k.endswith("_s")} for m in one.metrics] == \
           [{k: v for k, v in m.items() if not k.endswith("_s")} for m in two.metrics]
    assert any(m.get("levels") for m in two.metrics) and len(two.metrics) == len(cells)
    side = {name for key, name in where.items() if not key.endswith("agglomerative")}
    assert len(side) == 2 and threading.current_thread().name not in side, where
    assert where["all/agglomerative"] == threading.current_thread().name


def test_gold_labels_as_codes_give_the_scores_of_the_labels_bit_for_bit():
    from sklearn import metrics

    from tecb_eval.grid.work import clustering_metrics, label_codes

    rng = np.random.default_rng(5)
    names = ["Sport", "Kultur", "Ökonomie", "10", "9", "Politik/Inland", ""]  # sorted as strings, not numbers
    gold = tuple(names[i] for i in rng.integers(0, len(names), 3000))
    predicted = rng.integers(-1, 6, 3000)  # -1: a density clustering's noise
    codes = label_codes(gold)
    assert codes.dtype.kind == "i" and sorted(set(codes.tolist())) == list(range(len(set(gold))))
    scored = clustering_metrics(gold, predicted)
    assert scored["v_measure"] == metrics.v_measure_score(gold, predicted)
    assert scored["ami"] == metrics.adjusted_mutual_info_score(gold, predicted)
    assert scored["ari"] == metrics.adjusted_rand_score(gold, predicted)
    assert (scored["homogeneity"], scored["completeness"]) == metrics.homogeneity_completeness_v_measure(
        gold, predicted)[:2]


def test_cells_run_side_by_side_only_where_that_many_unit_peaks_fit_the_memory_budget(monkeypatch):
    from tecb_eval.grid import executors
    from tecb_eval.grid.scheduling import Task

    labels = tuple(str(i % 3) for i in range(300))
    unit = WorkUnit("k", "l", "d", "none", 42, "legacy", "current",
                    tuple(Cell(f"s{i}", None, labels, 3, "minibatch_kmeans") for i in range(2)), 300, 8)
    asked = []
    monkeypatch.setattr(executors, "run_unit", lambda unit, X, is_reduced, threads: asked.append(threads))
    X = np.zeros((300, 8), dtype=np.float32)
    for budget, threads in ((WORKER_BASELINE_BYTES + 2 * unit.memory, 2), (WORKER_BASELINE_BYTES + unit.memory, 1)):
        executors.SerialExecutor(budget, print, threads=2).run([Task(unit, "x", False)], lambda key: X,
                                                                lambda unit, result: None)
        assert asked.pop() == threads
