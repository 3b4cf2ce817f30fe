"""The first hour of a new user (issue 22): what a typo, a missing model, a log file, a missing
option, an offline machine look like. Commands run as a user runs them (a fresh interpreter, stderr
into a file where the point is the log), against the local stand-ins for the Hub and Reddit."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import REPO, run_cli, save_tiny_bert, text_vocabulary
from hubserver import FakeHub
import tecb_data
from tecb_data.progress import Progress

OFFLINE = {"HF_HUB_OFFLINE": "1"}


def tecb_eval(*args: str, env: dict | None = None, cwd: Path | None = None, stderr_file: Path | None = None,
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


def one_error(result: subprocess.CompletedProcess, prog: str = "tecb-eval") -> str:
    errors = [line for line in result.stderr.splitlines() if line.startswith(f"{prog}")]
    assert result.returncode == 2, result.stderr
    assert len(errors) == 1 and result.stderr.strip().splitlines()[-1] == errors[0], result.stderr
    assert "Traceback" not in result.stderr
    return errors[0]


@pytest.fixture
def hub():
    server = FakeHub()
    server.start()
    yield server
    server.stop()


def hub_env(tmp_path: Path, endpoint: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(HF_ENDPOINT=endpoint, HF_HOME=str(tmp_path / "hf-home"), HF_HUB_OFFLINE="0", HF_HUB_DISABLE_XET="1",
               HF_HUB_DISABLE_TELEMETRY="1", TECB_NETWORK_TIMEOUT="5")
    return env


def grid_args(data: str, tmp_path: Path, *extra: str) -> list[str]:
    return ["run", "--data", data, "--model", "tfidf-lsa", "--config", "minibatch_kmeans:none",
            "--results", str(tmp_path / "r.jsonl"), "--cache-dir", str(tmp_path / "cache"), *extra]


# --- 1. a typo in a local path is a missing folder, not a Hub problem ------------------------------

@pytest.mark.slow
def test_a_mistyped_folder_is_said_to_be_missing_and_the_hub_is_never_asked(demo_datasets, hub, tmp_path):
    typo = f"{demo_datasets}/blurbs-clustering-s2"  # one letter short
    result = tecb_eval(*grid_args(typo, tmp_path), env=hub_env(tmp_path, hub.url))
    line = one_error(result)
    assert "no such dataset folder" in line and f"{demo_datasets}/blurbs-clustering-s2s" in line, line
    assert hub.requests == []  # not one request: a folder path never goes to the Hub
    # Relative, under a folder that is here: `out/blurbs-clustering-s2` in the folder holding out/.
    relative = tecb_eval(*grid_args(f"{demo_datasets.name}/blurbs-clustering-s2", tmp_path), cwd=demo_datasets.parent,
                         env=hub_env(tmp_path, hub.url))
    assert "did you mean" in one_error(relative) and hub.requests == []
    assert not (tmp_path / "r.jsonl").exists()


def test_the_library_s_load_takes_a_mistyped_folder_for_a_folder_too(demo_datasets, hub, tmp_path):
    # tecb_data.load() called directly (a notebook), not through tecb-eval: the same one line, and
    # the Hub (here the stand-in, in a child process pointed at it) is never asked.
    script = ("import sys, tecb_data\n"
              "try:\n    tecb_data.load(sys.argv[1])\n"
              "except tecb_data.UserError as exc:\n    print(exc)\n")
    for name, cwd in [(f"{demo_datasets}/blurbs-clustering-s2", tmp_path),
                      (f"{demo_datasets.name}/blurbs-clustering-s2", demo_datasets.parent)]:
        said = subprocess.run([sys.executable, "-c", script, name], cwd=cwd, env=hub_env(tmp_path, hub.url),
                              capture_output=True, text=True, timeout=120)
        assert said.returncode == 0 and said.stderr == "", said.stderr
        assert said.stdout.startswith(f"{name}: no such dataset folder") and "did you mean" in said.stdout, said.stdout
    assert hub.requests == []
    # A Path is always a folder, whatever it looks like; a file is said to be one.
    with pytest.raises(tecb_data.UserError, match="no such dataset folder"):
        tecb_data.load(Path("org-like/name"))
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(tecb_data.UserError, match="is a file, not a dataset folder"):
        tecb_data.load(tmp_path / "notes.txt")


@pytest.mark.slow
def test_a_name_that_is_neither_a_folder_nor_a_repo_names_both(hub, tmp_path):
    online = one_error(tecb_eval(*grid_args("nobody-has/this-dataset", tmp_path), env=hub_env(tmp_path, hub.url)))
    assert "no dataset folder of that name here" in online and "no such dataset repository" in online, online
    offline = one_error(tecb_eval(*grid_args("nobody-has/this-dataset", tmp_path),
                                  env={**hub_env(tmp_path, hub.url), **OFFLINE}))
    assert "no dataset folder of that name here" in offline and "HF_HUB_OFFLINE is set" in offline, offline
    assert "An error happened" not in offline  # huggingface_hub's own sentence says neither why nor what to do


# --- 3. a build that cannot make every view says which it skipped ---------------------------------

def test_a_10kgnad_csv_build_says_that_s2s_was_not_built(tmp_path):
    from conftest import shared_file

    csv = shared_file("10kgnad/test.csv")
    result = run_cli("build", "--source", "tenkgnad", "--input", str(csv), "--out", str(tmp_path / "out"), "--quiet")
    assert result.returncode == 0, result.stderr
    assert "note: tenkgnad-clustering-s2s was not built" in result.stderr and "S2S" in result.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["tenkgnad-clustering-p2p"]


# --- 2. everything is found before the first text is encoded ---------------------------------------

@pytest.mark.slow
def test_a_model_missing_from_the_offline_cache_stops_the_run_before_any_encoding(demo_datasets, tmp_path):
    env = {**OFFLINE, "HF_HOME": str(tmp_path / "empty-hf-home")}
    data = str(demo_datasets / "blurbs-clustering-s2s")
    result = tecb_eval("run", "--data", data, "--model", "minilm-l6", "--model", "nobody-has/this-model,layer=6",
                       "--results", str(tmp_path / "r.jsonl"), "--cache-dir", str(tmp_path / "cache"),
                       "--jobs", "2", env=env)
    line = one_error(result)
    assert "nobody-has/this-model" in line and "not in the local Hugging Face cache" in line, line
    assert "encoding" not in result.stderr and "leaked semaphore" not in result.stderr
    assert not (tmp_path / "r.jsonl").exists()
    assert not any(p.is_file() for p in (tmp_path / "cache").rglob("*"))  # no embedding was computed


# --- 4, 5. a log file: plain lines, what it does, what the run spent -------------------------------

@pytest.mark.slow
def test_the_grid_writes_plain_lines_into_a_log_and_says_what_it_spent(demo_datasets, tmp_path):
    args = grid_args(str(demo_datasets / "blurbs-clustering-s2s"), tmp_path, "--limit-splits", "3")
    first = tecb_eval(*args, stderr_file=tmp_path / "first.log")
    assert first.returncode == 0, first.stderr
    log = first.stderr
    assert "\r" not in log and "\x1b" not in log  # no tqdm frames, no escape codes
    assert max(len(line) for line in log.splitlines()) < 400
    assert "encoding with tfidf-lsa" in log  # what it does while no cell moves
    assert "grid cells: 3/3 cells" in log
    summary = next(line for line in log.splitlines() if line.startswith("blurbs-clustering-s2s:"))
    assert "3 cells computed" in summary and "encoded" in summary, summary
    again = tecb_eval(*args, stderr_file=tmp_path / "again.log")
    assert again.returncode == 0, again.stderr
    resumed = next(line for line in again.stderr.splitlines() if line.startswith("blurbs-clustering-s2s:"))
    assert resumed == "blurbs-clustering-s2s: all 3 cells from the results store; nothing computed", resumed


class FakeClock:
    """A monotonic clock the test moves by hand: the ETA is then a figure, not a race."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_progress_gives_an_eta_only_once_it_means_something_and_leaves_pauses_out():
    clock = FakeClock()
    stream = io.StringIO()  # not a terminal
    bar = Progress(total=100, desc="cells", unit="cells", stream=stream, interval=0, clock=clock)
    bar.status("encoding", working=False)
    clock.now += 600  # encoding: ten minutes in which no cell moves, and this time is no cell's
    bar.status("clustering")
    bar.update(50, timed=False)  # from the store: took no time, tells nothing about the rest
    assert bar.eta() is None
    for _ in range(4):
        clock.now += 2
        bar.update(1)
    assert bar.eta() is None  # 4 timed cells: too few
    clock.now += 2
    bar.update(1)
    # 5 timed cells in 10 s: 2 s a cell, 45 cells left. Were the 600 s of encoding counted, or the
    # 50 cells from the store, this would be 5,490 s or 8 s.
    assert bar.eta() == pytest.approx(90.0)
    bar.status("evaluating", working=False)
    clock.now += 300
    bar.status("clustering")
    assert bar.eta() == pytest.approx(90.0)  # a pause in the middle is left out too
    bar.close()
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert lines[0].startswith("cells: 0/100 cells (0 %); encoding") and lines[-1].startswith("cells: 55/100")
    assert any(line.endswith("about 1:30 left") for line in lines), lines


def test_off_a_terminal_a_line_comes_at_least_every_interval_of_work():
    clock = FakeClock()
    stream = io.StringIO()
    with Progress(total=1000, desc="encoding", unit="texts", stream=stream, interval=30, clock=clock) as bar:
        for _ in range(1000):
            clock.now += 0.7  # a slow item: 700 s of work in all
            bar.update(1)
    lines = stream.getvalue().splitlines()
    # the first line, one each 30 s of the 700 s (23), the last: never 30 s without a word
    assert len(lines) == 1 + 700 // 30 + 1, lines
    assert lines[-1] == "encoding: 1,000/1,000 texts (100 %); done"


def test_on_a_terminal_progress_is_a_bar():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    stream = Terminal()
    with Progress(total=10, desc="cells", unit="cells", stream=stream) as bar:
        bar.status("encoding", working=False)
        bar.update(10)
    assert "\r" in stream.getvalue() and "cells" in stream.getvalue()


@pytest.mark.slow
def test_library_chatter_is_kept_out_unless_verbose(tmp_path):
    # What pre-training does first: an MLM head on a checkpoint saved without one. transformers
    # answers with its LOAD REPORT table (ANSI codes included) and its own progress bars.
    code = ("import sys\n"
            "from tecb_data.commandline import quiet_libraries\n"
            "quiet_libraries(sys.argv[1:])\n"
            "from transformers import AutoModelForMaskedLM, BertConfig, BertModel\n"
            "config = BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=1, "
            "intermediate_size=8)\n"
            f"BertModel(config).save_pretrained({str(tmp_path / 'bert')!r})\n"
            f"AutoModelForMaskedLM.from_pretrained({str(tmp_path / 'bert')!r})\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRANSFORMERS_VERBOSITY", "HF_HUB_DISABLE_PROGRESS_BARS", "HF_DATASETS_DISABLE_PROGRESS_BARS")}
    quiet = subprocess.run([sys.executable, "-c", code, "pretrain"], capture_output=True, text=True, env=env, cwd=REPO)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    verbose = subprocess.run([sys.executable, "-c", code, "pretrain", "--verbose"], capture_output=True, text=True,
                             env=env, cwd=REPO)
    assert verbose.returncode == 0 and "LOAD REPORT" in verbose.stderr  # the referee: the chatter is real


def tiny_bert(folder: Path, texts: list[str]) -> Path:
    """A two-layer BERT with a character vocabulary: enough for pre-training to run for real."""
    return save_tiny_bert(folder, text_vocabulary(texts, words=False), hidden_size=16)


@pytest.mark.slow
def test_pretraining_into_a_log_has_plain_lines_and_no_library_chatter(demo_datasets, tmp_path):
    import tecb_data

    data = demo_datasets / "blurbs-clustering-s2s"
    texts = sorted({t for split in tecb_data.load(data).splits for t in split.texts})
    model = tiny_bert(tmp_path / "bert", texts)
    result = tecb_eval("pretrain", "--model", str(model), "--data", str(data), "--method", "tsdae", "--seeds", "7",
                       "--max-steps", "2", "--eval-every", "2", "--batch-size", "8", "--out", str(tmp_path / "out"),
                       stderr_file=tmp_path / "pretrain.log", env={"HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr
    log = result.stderr
    assert "\r" not in log and "\x1b" not in log and "LOAD REPORT" not in log, log
    assert "seed 7: TSDAE epoch 1/1: " in log  # the progress, as plain lines


# --- 7. command-line habits ------------------------------------------------------------------------

def test_debug_is_taken_after_the_command_too(tmp_path):
    result = run_cli("build", "--source", "blurbs", "--input", str(tmp_path / "absent"), "--out", str(tmp_path / "o"),
                     "--debug")
    assert result.returncode != 0 and "Traceback" in result.stderr and "UserError" in result.stderr
    plain = run_cli("build", "--source", "blurbs", "--input", str(tmp_path / "absent"), "--out", str(tmp_path / "o"))
    assert "Traceback" not in plain.stderr and plain.stderr.count("\n") == 1


def test_a_missing_option_is_one_line_naming_it_and_where_help_is(tmp_path):
    data = run_cli("build", "--source", "blurbs")
    assert data.returncode == 2 and data.stderr == ("tecb-data build: error: the following arguments are required: "
                                                    "--out; try `tecb-data build --help`\n")
    result = tecb_eval("run", "--data", "x", "--model", "tfidf-lsa")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "--results" in result.stderr and "try `tecb-eval run --help`" in result.stderr
    choice = tecb_eval("pretrain", "--model", "m", "--data", "d", "--out", str(tmp_path / "o"), "--profile", "papr")
    assert choice.returncode == 2 and choice.stderr.count("\n") == 1 and "'current', 'paper'" in choice.stderr


def test_seeds_take_commas_and_spaces_everywhere():
    from tecb_eval.cli import parser

    def seeds(*argv):
        return parser().parse_args(argv).seeds

    base = ("run", "--data", "d", "--model", "m", "--results", "r")
    assert seeds(*base, "--seeds", "42", "1", "2") == seeds(*base, "--seeds", "42,1,2") == (42, 1, 2)
    assert seeds(*base, "--seeds", "42,1", "2", "--seeds", "7") == (42, 1, 2, 7)
    assert seeds("pretrain", "--model", "m", "--data", "d", "--out", "o", "--seeds", "42", "1,2") == (42, 1, 2)
    assert seeds("table", "r", "--seeds", "42", "1", "2") == seeds("table", "r", "--seeds", "42,1,2") == "42,1,2"


@pytest.mark.parametrize("prog, command", [
    ("tecb-data", "build"), ("tecb-data", "verify"), ("tecb-data", "stats"), ("tecb-data", "push"),
    ("tecb-data", "collect"), ("tecb-eval", "run"), ("tecb-eval", "demo"), ("tecb-eval", "table"),
    ("tecb-eval", "export"), ("tecb-eval", "compare"), ("tecb-eval", "layers"), ("tecb-eval", "pretrain"),
])
def test_every_command_has_a_description_and_an_example(prog, command):
    from tecb_data.cli import parser as data_parser
    from tecb_eval.cli import parser as eval_parser

    root = data_parser() if prog == "tecb-data" else eval_parser()
    sub = next(a for a in root._actions if hasattr(a, "choices") and isinstance(a.choices, dict)).choices[command]
    text = sub.format_help()
    assert sub.description and "example" in text and f"{prog} {command}" in (sub.epilog or ""), text
    undocumented = [a.option_strings or [a.dest] for a in sub._actions if not a.help]
    assert undocumented == [], undocumented


def test_more_jobs_or_memory_than_the_machine_has_is_a_warning():
    from tecb_eval.cli.options import warn_beyond_machine
    from tecb_eval.grid.scheduling import machine_memory

    cores = len(os.sched_getaffinity(0))
    lines = warn_beyond_machine(jobs=cores + 1, memory_limit=f"{2 * machine_memory() // 2**30 + 1}GiB")
    assert len(lines) == 2 and all(line.startswith("warning: ") for line in lines)
    assert f"{cores} cores" in lines[0] and "GiB" in lines[1]
    assert warn_beyond_machine(jobs=1, memory_limit="0.5") == []


# --- 8. offline -----------------------------------------------------------------------------------

@pytest.mark.slow
def test_reddit_with_an_unresolvable_host_says_so_at_once(tmp_path):
    import redditserver as rs

    home = tmp_path / "home"
    home.mkdir()
    rs.praw_ini(home / ".config", "https://tecb-offline.invalid")  # .invalid never resolves (RFC 2606)
    ids = tmp_path / "ids.txt"
    ids.write_text("id\nabc1\nabc2\n")
    started = time.monotonic()
    result = rs.rehydrate(home, ids=ids, out=tmp_path / "out", cache=tmp_path / "cache", praw_site="tecbtest",
                          attempts=6)
    seconds = time.monotonic() - started
    line = one_error(result, "tecb-data")
    assert "cannot be resolved" in line and "tecb-offline.invalid" in line and "timeout" not in line, line
    assert "retrying" not in result.stderr  # no backoff for an answer that will not change
    # It used to take 84 s of backoff; about 6 s now. 60 s leaves room for a loaded machine's start-up.
    assert seconds < 60, seconds


class _Flaky(BaseHTTPRequestHandler):
    answers: list[int] = []

    def do_GET(self):
        status = self.answers.pop(0) if self.answers else 200
        body = b"id\nabc1\n" if status == 200 else b"busy"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.mark.slow
def test_an_id_list_retry_says_what_failed_in_words(tmp_path):
    _Flaky.answers = [503, 503, 503]
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/ids.txt"
        result = run_cli("build", "--source", "reddit", "--ids", url, "--out", str(tmp_path / "out"),
                         "--cache", str(tmp_path / "cache"), "--quiet")
    finally:
        server.shutdown()
        server.server_close()
    retries = [line for line in result.stderr.splitlines() if "retrying" in line]
    assert len(retries) == 2 and all("HTTP 503" in line for line in retries), result.stderr
    assert "_Transient" not in result.stderr
    unresolvable = run_cli("build", "--source", "reddit", "--ids", "https://tecb-offline.invalid/ids.txt",
                           "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "cache"), "--quiet")
    line = one_error(unresolvable, "tecb-data")
    assert "host name cannot be resolved" in line and "retrying" not in unresolvable.stderr, unresolvable.stderr


def test_push_dry_run_plans_offline_and_says_what_needs_the_hub(demo_datasets, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1")
    result = run_cli("push", str(demo_datasets / "blurbs-clustering-s2s"), "--repo-id", "me/blurbs", "--dry-run",
                     env=env)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "dry run without the Hub (HF_HUB_OFFLINE is set)" in out and "needs the Hub:" in out
    for name in ("README.md", "data/test.jsonl", "data/samples.jsonl", "manifest.json"):
        assert f"send    {name}" in out
    assert "token: none" in out and "nothing was sent" in out
    # A real push still needs the Hub, and says so in one line.
    pushed = run_cli("push", str(demo_datasets / "blurbs-clustering-s2s"), "--repo-id", "me/blurbs", "--allow-synthetic",
                     env=env)
    assert pushed.returncode == 2 and pushed.stderr.count("\n") == 1 and "HF_HUB_OFFLINE" in pushed.stderr


def test_the_tests_keep_their_own_datasets_cache():
    import datasets

    cache = Path(datasets.config.HF_DATASETS_CACHE).resolve()
    assert cache == Path(os.environ["HF_DATASETS_CACHE"]).resolve()
    assert not cache.is_relative_to(Path.home() / ".cache")


def test_a_delayed_progress_says_nothing_for_a_short_step_and_reports_a_long_one():
    clock = FakeClock()
    quick, slow = io.StringIO(), io.StringIO()
    with Progress(desc="reading", unit="records", stream=quick, delay=30, clock=clock) as bar:
        clock.now += 2
        bar.update(27)
    assert quick.getvalue() == ""  # a step that ends (or fails) within the delay leaves no line
    with Progress(desc="reading", unit="records", stream=slow, delay=30, interval=30, clock=clock) as bar:
        for _ in range(100):
            clock.now += 1
            bar.update(1)
    lines = slow.getvalue().splitlines()
    assert lines[0].startswith("reading: 30 records") and lines[-1] == "reading: 100 records", lines
