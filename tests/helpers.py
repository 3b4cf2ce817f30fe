"""What tests call, as opposed to the fixtures in conftest.py: the repository's root and the
shared data beside it, running the commands (in this process or a fresh interpreter) and reading
their one-line errors, the arguments of the small runs tests poke at, results stores, tiny models
and test inputs."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SHARED_DATA = SHARED / "data"


def offline_one_job() -> dict:
    """The environment of a command in a fresh interpreter: offline (the Hub is never asked), one
    worker process, and what conftest.py set for the session (read when called, after it)."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TECB_JOBS": "1"}


def b36(n: int) -> str:
    """``n`` in base 36 as Reddit writes its ids (``"1a2b"``)."""
    return np.base_repr(n, 36).lower()


# pytest-timeout's per-test limit for `slow` tests (the others get pyproject.toml's `timeout`).
SLOW_TIMEOUT_S = 2400


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


def eval_error(capsys, argv: list[str], *, notes: bool = False) -> str:
    """`tecb-eval argv` fails as a user error: exit 2 and one line (transformers' own "Loading
    weights" bar aside), whatever earlier commands of the test printed. ``notes``: besides it, only
    lines that are notes (an endpoint's: the texts leaving the machine, a wait)."""
    from tecb_eval.cli import main

    capsys.readouterr()
    code = main(argv)
    error = capsys.readouterr().err
    lines = [line for line in error.splitlines() if line.strip() and "Loading weights" not in line]
    errors = [line for line in lines if line.startswith("tecb-eval: error: ")]
    others = [line for line in lines if line not in errors]
    assert code == 2 and len(errors) == 1 and all(notes and line.startswith("note: ") for line in others), error
    return errors[0]


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
