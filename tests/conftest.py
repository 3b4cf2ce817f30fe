import atexit
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

# Grids in tests run in the test's process unless a test asks for workers (tests/test_parallel.py):
# a pool of worker processes per tiny grid would only add start-up time. Users get every core.
os.environ.setdefault("TECB_JOBS", "1")
# One test process per core (pytest-xdist): a second BLAS, OpenMP or torch thread in a test process,
# or in a command it starts, finds no free core and spins waiting for the other. Every process of
# the session computes at one thread unless a test sets another count (so numbers compared across
# processes are computed alike), and an idle OpenMP thread sleeps rather than spins.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# `datasets` caches every folder it reads (load_dataset, MTEB's tasks) under ~/.cache/huggingface/datasets
# unless told otherwise: the tests keep theirs in a folder of their own, removed when they end. Set
# before anything imports `datasets` (it reads the variable once), inherited by the CLI subprocesses.
_DATASETS_CACHE = tempfile.mkdtemp(prefix="tecb-tests-hf-datasets-")
os.environ["HF_DATASETS_CACHE"] = _DATASETS_CACHE
atexit.register(shutil.rmtree, _DATASETS_CACHE, ignore_errors=True)
# A shell that starts the suite in the background (`make test &` in a script) ignores SIGINT, and
# every child inherits that: the tests that send Ctrl-C to a command they started would see it
# ignored. A Python handler is reset to the default in the children (exec), so theirs is restored.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# After the environment above: numpy reads its thread counts as it is first imported.
from helpers import (  # noqa: E402
    REPO, SLOW_TIMEOUT_S, draws_in_this_process, run_args, save_tiny_bert, shared_file, text_vocabulary,
)


def _untracked_in_repo() -> set[str] | None:
    """Untracked, not ignored files in the working tree (None outside a git checkout)."""
    if shutil.which("git") is None:
        return None
    result = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        return None
    return {line[3:] for line in result.stdout.splitlines() if line.startswith("?? ")}


def pytest_sessionstart(session):
    session.config._tecb_untracked_before = _untracked_in_repo()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """pytest-randomly's seed, printed even under -q (its header line is not): a failure in a
    random order is replayed with ``make test PYTEST_FLAGS=--randomly-seed=N``."""
    seed = getattr(config.option, "randomly_seed", None)
    if seed is not None and config.pluginmanager.hasplugin("randomly"):
        terminalreporter.write_line(f"tests ran in random order: replay it with --randomly-seed={seed}")


def pytest_sessionfinish(session, exitstatus):
    """No run writes into the working directory: a file the suite left in the tree fails the run."""
    before = getattr(session.config, "_tecb_untracked_before", None)
    if before is None or hasattr(session.config, "workerinput"):  # not git, or an xdist worker
        return
    left = sorted((_untracked_in_repo() or set()) - before)
    if left:
        session.config.get_terminal_writer().line(
            f"the test run left files in the working tree (tests write under tmp_path only): {', '.join(left)}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("slow") is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))
    # The modules that hold a slow test run first, the others after, each group in pytest-randomly's
    # order (a stable sort on its shuffle, as its docs advise, so the seed still replays the run):
    # the test processes end on short tests instead of one waiting while the other runs a long one.
    heavy = {item.module.__name__ for item in items
             if getattr(item, "module", None) is not None and item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: getattr(getattr(item, "module", None), "__name__", None) not in heavy)


@pytest.fixture(scope="session")
def demo_datasets(tmp_path_factory):
    """The four demo datasets, built once per test session. Read-only: a test that writes into a
    dataset folder copies it into its tmp_path first (shutil.copytree)."""
    from tecb_data.build import build
    from tecb_data.demo import demo_input

    out = tmp_path_factory.mktemp("demo")
    for source in ("blurbs", "tenkgnad"):
        build(source, demo_input(source), out)
    return out


@pytest.fixture(scope="session")
def blurbs_folder(demo_datasets) -> Path:
    """The demo's Blurbs S2S folder (read-only)."""
    return demo_datasets / "blurbs-clustering-s2s"


@pytest.fixture(scope="session")
def tenkgnad_folder(demo_datasets) -> Path:
    """The demo's 10kGNAD S2S folder (read-only)."""
    return demo_datasets / "tenkgnad-clustering-s2s"


@pytest.fixture(scope="session")
def blurbs(blurbs_folder):
    """The demo's Blurbs S2S, loaded (28 splits, genre paths)."""
    import tecb_data

    return tecb_data.load(blurbs_folder)


@pytest.fixture(scope="session")
def blurbs_small(blurbs):
    """The first six of the demo Blurbs S2S's 28 splits: an evaluation during training clusters six
    splits, not 28, to keep the tests fast."""
    import dataclasses

    return dataclasses.replace(blurbs, splits=blurbs.splits[:6])


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory, blurbs) -> Path:
    """A tiny random BERT (2 layers of 32, torch seed 0) whose vocabulary is the demo Blurbs S2S's,
    dropout off, so that a training run's bytes depend on the seeded data order alone. Read-only: a
    test that changes the model folder copies it into its tmp_path first (shutil.copytree)."""
    from tecb_eval.clustering.evaluation import unique_texts

    return save_tiny_bert(tmp_path_factory.mktemp("tiny-bert"), text_vocabulary(unique_texts([blurbs])),
                          hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


@pytest.fixture(scope="session")
def tiny_bert_with_dropout(tmp_path_factory, blurbs) -> Path:
    """:func:`tiny_bert` with BERT's own dropout (0.1), as a checkpoint from the Hub has it. Read-only."""
    from tecb_eval.clustering.evaluation import unique_texts

    return save_tiny_bert(tmp_path_factory.mktemp("tiny-bert-dropout"), text_vocabulary(unique_texts([blurbs])))


@pytest.fixture(scope="session")
def tiny_sentence_transformer(tmp_path_factory, demo_datasets) -> Path:
    """A sentence-transformers model around a tiny random BERT (max_seq_length 32, mean pooling,
    Normalize) whose vocabulary is the demo TenKGnad S2S's and a prompt's. Read-only."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Normalize, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    import tecb_data

    texts = [t for split in tecb_data.load(demo_datasets / "tenkgnad-clustering-s2s").splits for t in split.texts]
    root = tmp_path_factory.mktemp("tiny-st")
    save_tiny_bert(root / "bert", text_vocabulary(texts + ["Ordne den Text ein"] * 2))
    model = SentenceTransformer(modules=[Transformer(str(root / "bert"), max_seq_length=32), Pooling(32, "mean"),
                                         Normalize()], device="cpu")
    model.save(str(root / "st"), create_model_card=False)
    return root / "st"


@pytest.fixture(scope="session")
def minilm_encoder():
    """The built-in minilm-l6 encoder, loaded once per session (what a stand-in server serves). Read-only."""
    from tecb_eval.models.encoders import get_encoder

    return get_encoder("minilm-l6")


@pytest.fixture(scope="session")
def small_store(demo_datasets, tmp_path_factory) -> Path:
    """A results store: tfidf-lsa, k-means and HDBSCAN on PCA, 4 splits of the demo's Blurbs S2S
    (synthetic rows, with per-level scores). Read-only: a test that edits it writes an edited copy."""
    from tecb_eval.cli import main

    folder = tmp_path_factory.mktemp("small-store")
    results = folder / "results.jsonl"
    assert main(run_args(demo_datasets / "blurbs-clustering-s2s", results, folder / "cache", "--limit-splits", "4",
                         "--config", "hdbscan:pca")) == 0
    return results


@pytest.fixture(scope="module")
def kept_environment():
    """This process's environment as it was, put back when the module is done: a Dask LocalCluster
    sets OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, ... in it, which every later subprocess of the test
    session would inherit (and BLAS threads change tfidf-lsa's vectors)."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(scope="module")
def dask_cluster(kept_environment):
    """A real Dask LocalCluster: two single-threaded worker processes on 127.0.0.1."""
    import distributed

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  host="127.0.0.1", silence_logs=40) as local:
        yield local


# -- one thread per test process ---------------------------------------------------------------

_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@pytest.fixture(scope="module")
def one_thread():
    """torch, BLAS (OpenBLAS) and OpenMP at one thread in this process and in the processes the
    module's tests start, put back as they were when the module is done.

    `make test` runs one test process per core (pytest-xdist): a second thread per process finds no
    free core, and OpenMP's and OpenBLAS's threads spin waiting for each other. On a 2-core machine
    under load a tiny BERT's forward passes took 3 times, an LSA fit 8 to 15 times as long at two
    threads as at one. Every number a module compares is computed at one thread, here and in its
    subprocesses alike (thread counts change float sums, not what the tests assert)."""
    import scipy.linalg  # noqa: F401  (scipy's own OpenBLAS)
    import sklearn  # noqa: F401  (its OpenMP)
    import torch
    from threadpoolctl import threadpool_limits

    # The libraries are loaded before the limit, so leaving it puts each back exactly.
    saved = {name: os.environ.get(name) for name in _THREAD_VARIABLES}
    torch_threads = torch.get_num_threads()
    os.environ.update(dict.fromkeys(_THREAD_VARIABLES, "1"))
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        torch.set_num_threads(torch_threads)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture
def draws_here():
    """:func:`draws_in_this_process` for one test."""
    with draws_in_this_process():
        yield


# -- the test session's own settings and read-only inputs built once per session ------------------

# What keeps an idle Dask cluster busy, for no test: its statistical profiler (each worker's threads
# sampled every 10 ms for the dashboard) off, and the check that an event loop is not blocked (every
# 20 ms in each scheduler, nanny, worker and client; it only logs) once a second. An idle cluster
# then costs a third of the CPU time; in the clusters the tests start, here and in subprocesses.
os.environ.setdefault("DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED", "False")
os.environ.setdefault("DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL", "1s")


@pytest.fixture(scope="session")
def germeval_dev_datasets(tmp_path_factory):
    """Both views of the real GermEval 2019 dev set, built with the default seed once per test
    session: {folder name: (folder, manifest)}. Tests read them and never write into them."""
    from tecb_data.build import build

    out = tmp_path_factory.mktemp("germeval-dev")
    return {f.name: (f, m) for f, m in build("blurbs", shared_file("germeval2019/blurbs_dev.txt.gz"), out)}


# -- shared by tests/test_report.py and tests/test_report_browser.py ------------------------------

@pytest.fixture(scope="session")
def mixed_seed_results(demo_datasets, tmp_path_factory) -> Path:
    """``reportstore.mixed_seed_store`` of the demo datasets (two models over seeds 42 and 1, a third
    later over seed 42), built once per session. Read-only: a test that adds rows copies it."""
    from reportstore import mixed_seed_store

    return mixed_seed_store(demo_datasets, tmp_path_factory.mktemp("mixed"))


# -- values computed once for every pytest-xdist process (tests/test_parallel.py) -------------------


# -- the MTEB referee's inputs shared by tests/test_mteb_referee.py and tests/test_levels.py ---------

@pytest.fixture(scope="session")
def mteb_loaded_task():
    """``mteb_loaded_task(folder, version)``: MTEB's own task for a dataset folder (tecb_eval.mteb.tasks),
    its data loaded by MTEB itself (``load_data``: its loading, transform and downsampling) once per
    session and folder, handed out as a fresh copy each time: evaluating draws from the task's
    ``rng_state``, so every caller starts where a task it loaded itself would. ``mteb.evaluate``
    takes a loaded task as it is and leaves it loaded."""
    import copy

    from tecb_eval.mteb import tasks as mteb_bridge

    loaded = {}

    def task(folder, version):
        key = (str(folder), version)
        if key not in loaded:
            (loaded[key],) = mteb_bridge.mteb_tasks([folder], version=version)
            loaded[key].load_data()
        return copy.deepcopy(loaded[key])

    return task


@pytest.fixture(scope="session")
def dev_s2s_fast_hashing(germeval_dev_datasets, tmp_path_factory):
    """Our fast protocol's scores (a frame, read-only) of the hashing encoder with k-means on the
    GermEval dev set's Blurbs S2S, MTEB's draws made in this process: what the referee
    (tests/test_mteb_referee.py) and the per-level check (tests/test_levels.py) compare with MTEB."""
    from tecb_eval.grid.run import run_grid
    from tecb_eval.mteb.encoders import HashingEncoder

    with draws_in_this_process():
        return run_grid([germeval_dev_datasets["blurbs-clustering-s2s"][0]], [HashingEncoder()],
                        configurations=["minibatch_kmeans:none"], protocol="fast",
                        cache_dir=tmp_path_factory.mktemp("dev-s2s-fast"), progress=False, log=lambda m: None)
