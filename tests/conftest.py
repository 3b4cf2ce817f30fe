import atexit
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
    """The four demo datasets, built once per test session."""
    from tecb_data.build import build
    from tecb_data.demo import demo_input

    out = tmp_path_factory.mktemp("demo")
    for source in ("blurbs", "tenkgnad"):
        build(source, demo_input(source), out)
    return out


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
