import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SHARED_DATA = SHARED / "data"
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


# pytest-timeout's per-test limit for `slow` tests (the others get pyproject.toml's `timeout`).
SLOW_TIMEOUT_S = 2400


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


def shared_file(relative: str) -> Path:
    """A file of ../shared/data, or skip the test with the reason."""
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(f"{path} is absent: the integration tests need ../shared beside the repository")
    return path


class CountingEncoder:
    """An encoder object that records every text it is asked to encode."""

    def __init__(self, inner, identity):
        self.inner, self.identity, self.calls = inner, identity, []

    def encode(self, texts):
        self.calls.extend(texts)
        return self.inner.encode(texts)


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run `tecb-data` in a fresh interpreter, as a user would."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "tecb_data.cli", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=300,
    )


def run_cli_here(*args: str, main=None) -> subprocess.CompletedProcess:
    """`tecb-data` (or another CLI's ``main``) in this process, its output captured, as
    :func:`run_cli` returns it: for what a command says, writes and refuses. What needs a fresh
    interpreter (imports, signals, Python's own exit) goes through :func:`run_cli`."""
    import contextlib
    import io

    from tecb_data import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = (main or cli.main)(list(args))
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


BOOK = """<book date="2019-01-04" xml:lang="de">
<title>{title}</title>
<body>{blurb}</body>
{categories}<isbn>{isbn}</isbn>
</book>
"""


def book(isbn: str, title: str, paths, blurb: str = "Ein Klappentext.") -> str:
    """One record in the GermEval 2019 format; ``paths`` are genre paths, top-level first."""
    if paths:
        categories = "<categories>\n" + "".join(
            "<category>\n" + "".join(f'<topic d="{d}">{name}</topic>\n' for d, name in enumerate(path)) + "</category>\n"
            for path in paths
        ) + "</categories>\n"
    else:
        categories = ""
    return BOOK.format(isbn=isbn, title=title, blurb=blurb, categories=categories)


SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def text_vocabulary(texts, *, words: bool = True) -> list[str]:
    """A WordPiece vocabulary for a tiny test model: the special tokens, every character of the
    lower-cased texts (word-initial and ##-continuation), and, with ``words``, every word seen twice
    or more (longer than one letter): every text is tokenizable and most words take one or two pieces."""
    import re
    from collections import Counter

    lowered = [t.lower() for t in texts]
    chars = sorted({c for t in lowered for c in t if not c.isspace()})
    vocab = SPECIAL_TOKENS + chars + ["##" + c for c in chars]
    if words:
        counts = Counter(w for t in lowered for w in re.findall(r"\w+", t))
        vocab += sorted(w for w, n in counts.items() if n >= 2 and len(w) > 1)
    return vocab


def save_tiny_bert(folder: Path, vocab: list[str], *, hidden_size: int = 32, layers: int = 2, **config) -> Path:
    """A randomly initialised BERT (torch seed 0) with ``vocab`` as its vocabulary, saved like a
    checkpoint (weights, config, fast tokenizer) in ``folder``: the tests' stand-in for a real model."""
    import torch
    import transformers

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = transformers.BertTokenizerFast(vocab=str(folder / "vocab.txt"))
    settings = transformers.BertConfig(vocab_size=len(tokenizer), hidden_size=hidden_size, num_hidden_layers=layers,
                                       num_attention_heads=2, intermediate_size=2 * hidden_size,
                                       max_position_embeddings=64, **config)
    torch.manual_seed(0)
    transformers.BertModel(settings).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


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


def store_rows(path: Path) -> list[dict]:
    """The rows of a results store (or any JSON Lines file)."""
    import json

    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def write_store(path: Path, rows: list[dict]) -> Path:
    """``rows`` as a results store at ``path``."""
    import json

    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
    return path


def tfidf_rows(data: Path, root: Path, splits: int) -> list[dict]:
    """The rows of a cheap run (tfidf-lsa, k-means, the first ``splits`` splits of ``data``) in a
    store under ``root``: what tests copy under other names or scores."""
    import json

    from tecb_eval.cli import main

    store = root / "r.jsonl"
    assert main(run_args(data, store, root / "cache", "--limit-splits", str(splits))) == 0
    return [json.loads(line) for line in store.read_text(encoding="utf-8").splitlines()]


def run_args(data, results, cache, *extra) -> list[str]:
    """`tecb-eval run` of tfidf-lsa / k-means on one dataset: the grid the CLI tests poke at."""
    return ["run", "--data", str(data), "--model", "tfidf-lsa", "--config", "minibatch_kmeans:none",
            "--results", str(results), "--cache-dir", str(cache), "--quiet", *extra]


def one_line_error(capsys, argv: list[str]) -> str:
    """`tecb-eval argv` fails as a user error: exit 2 and exactly one line on stderr."""
    from tecb_eval.cli import main

    code = main(argv)
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1 and error.startswith("tecb-eval: error: "), error
    return error


def eval_error(capsys, argv: list[str]) -> str:
    """`tecb-eval argv` fails as a user error: exit 2 and one line (transformers' own "Loading
    weights" bar aside), whatever earlier commands of the test printed."""
    from tecb_eval.cli import main

    capsys.readouterr()
    code = main(argv)
    error = capsys.readouterr().err
    lines = [line for line in error.splitlines() if line.strip() and "Loading weights" not in line]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("tecb-eval: error: "), error
    return lines[0]


def one_error_line(done: subprocess.CompletedProcess, prog: str = "tecb-data") -> str:
    """A finished command failed as a user error: exit 2 and one non-blank line on stderr."""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), done.stderr
    return lines[0]


def error_line(stderr: str, prog: str = "tecb-data") -> str:
    """The one error line of a command's stderr: its last line, no traceback, no test token."""
    errors = [line for line in stderr.splitlines() if line.startswith(f"{prog}: error:")]
    assert len(errors) == 1 and stderr.splitlines()[-1] == errors[0], stderr
    assert "Traceback" not in stderr and "hf_tecbTestSecret" not in stderr
    return errors[0]


def one_error(result: subprocess.CompletedProcess, prog: str = "tecb-eval") -> str:
    """A command run as a user runs it failed with exit 2, its last line the one line naming the
    program, and no traceback."""
    errors = [line for line in result.stderr.splitlines() if line.startswith(f"{prog}")]
    assert result.returncode == 2, result.stderr
    assert len(errors) == 1 and result.stderr.strip().splitlines()[-1] == errors[0], result.stderr
    assert "Traceback" not in result.stderr
    return errors[0]


def run_eval_cli(*args: str, env: dict | None = None, cwd: Path | None = None, stderr_file: Path | None = None,
                 timeout: float = 300) -> subprocess.CompletedProcess:
    """`tecb-eval ARGS` in a fresh interpreter; with ``stderr_file``, stderr goes into that file (a
    log, not a terminal) and the result's stderr is read back from it."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    command = [sys.executable, "-c", "import sys; from tecb_eval.cli import main; sys.exit(main())", *args]
    if stderr_file is None:
        return subprocess.run(command, capture_output=True, text=True, env=full_env, cwd=cwd, timeout=timeout)
    with open(stderr_file, "w") as log:
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=log, text=True, env=full_env, cwd=cwd,
                                timeout=timeout)
    result.stderr = stderr_file.read_text()
    return result


def finetune_args(model, data, out, *extra) -> list[str]:
    """`tecb-eval finetune` of COB for one step on one fold, scored with one seed."""
    return ["finetune", "--model", str(model), "--data", str(data), "--method", "cob", "--folds", "1",
            "--max-steps", "1", "--instance-size", "20", "--score-seeds", "42", "--out", str(out), "--quiet", *extra]


def grid_args(data: str, tmp_path: Path, *extra: str) -> list[str]:
    """`tecb-eval run` of tfidf-lsa / k-means on ``data``, its store and cache in ``tmp_path``, not
    quiet: for the tests that read what a run says."""
    return ["run", "--data", data, "--model", "tfidf-lsa", "--config", "minibatch_kmeans:none",
            "--results", str(tmp_path / "r.jsonl"), "--cache-dir", str(tmp_path / "cache"), *extra]


def unit_holding_plugin(results: Path, claim: Path, min_cells: int):
    """A Dask worker plugin: on the first grid unit a worker starts once the results store holds
    ``min_cells`` rows, it writes ``claim`` (whole: "pid unit-key") and holds that unit in its thread,
    so a test can kill a worker that is certainly busy with a unit, whatever the machine's speed.
    The hold is in the task's thread, not the worker's event loop, so the worker still talks to the
    scheduler and the client meanwhile, as a busy worker does. Only one worker ever holds (the claim
    is taken by a hard link); a restarted worker finds it taken. Built in a function so that Dask
    ships the classes by value to workers that cannot import the tests."""
    import distributed

    class HoldingThreadPoolExecutor:  # the worker runs tasks in executors named ...ThreadPoolExecutor
        def __init__(self, inner, plugin):
            self._inner, self._plugin = inner, plugin

        def submit(self, fn, *args, **kwargs):
            plugin = self._plugin

            def run(*a, **k):
                import time

                if plugin.hold:
                    plugin.hold = False
                    time.sleep(600)  # until the test kills this process
                return fn(*a, **k)

            return self._inner.submit(run, *args, **kwargs)

        def __getattr__(self, name):
            return getattr(self._inner, name)

    class HoldOneUnit(distributed.WorkerPlugin):
        def __init__(self, results: str, claim: str, min_cells: int):
            self.results, self.claim, self.min_cells = results, claim, min_cells
            self.hold = False

        def setup(self, worker):
            worker.executors["default"] = HoldingThreadPoolExecutor(worker.executors["default"], self)

        def transition(self, key, start, finish, **kwargs):
            import os

            if finish != "executing" or not str(key).startswith("tecb-unit-") or os.path.exists(self.claim):
                return
            try:
                with open(self.results, "rb") as store:
                    if len(store.read().splitlines()) < self.min_cells:
                        return
            except FileNotFoundError:
                return
            partial = f"{self.claim}.{os.getpid()}"
            with open(partial, "w") as out:
                out.write(f"{os.getpid()} {key}")
            try:
                os.link(partial, self.claim)
            except FileExistsError:
                return
            self.hold = True  # the task about to run in the executor is this unit

    return HoldOneUnit(str(results), str(claim), min_cells)


def wait_for_claim(claim: Path, stop, timeout: float = 600) -> tuple[int, str] | None:
    """(pid, unit) of the worker holding a unit (see :func:`unit_holding_plugin`); None if ``stop``
    (a threading.Event) is set or the time is up first."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not claim.exists() and not stop.is_set():
        time.sleep(0.05)
    if not claim.exists():
        return None
    pid, key = claim.read_text().split(" ", 1)
    return int(pid), key


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


@contextlib.contextmanager
def draws_in_this_process():
    """The grid's fast protocol draws MTEB's samples here instead of ahead in a child process: the
    child's head start is a fresh interpreter importing MTEB (about 10 s on a busy machine), which a
    test process that has MTEB imported already does not need, and what it draws is the same
    (SampleCache.get draws with the same function when nothing was drawn ahead). Drawing ahead is
    tests/test_caches.py's subject."""
    from tecb_eval.grid.samples import SampleCache

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SampleCache, "draw_ahead", lambda self, benches, seeds: 0)
        yield


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

def computed_once(tmp_path_factory, name: str, compute):
    """``compute()``, once per test session however many pytest-xdist processes ask: the first to ask
    computes it and pickles it beside the processes' temporary folders, the others wait for that and
    read it (a module's tests split between two processes would compute its fixtures twice). ``name``
    names the value within the session; the value must not depend on the asking process, and a
    path in it must lie under the first process's temporary folder, which lasts the session."""
    import fcntl
    import pickle

    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return compute()
    path = tmp_path_factory.getbasetemp().parent / f"computed-once-{name}.pickle"
    with open(f"{path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.is_file():
            return pickle.loads(path.read_bytes())
        value = compute()
        partial = path.with_suffix(".partial")
        partial.write_bytes(pickle.dumps(value))
        partial.replace(path)
        return value


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
