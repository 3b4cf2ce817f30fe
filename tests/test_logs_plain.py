"""Logs sent to a file are plain lines: no carriage return, no escape code, no library warning, no
resource_tracker line, no "Retrying", no "Falling back", no library's chatter. The commands run as a user
runs them (a fresh interpreter, the installed entry point), their stderr into a file; --verbose
shows what the libraries say, which proves the quiet run had something to hide."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import REPO, grid_args, run_eval_cli

FORBIDDEN = [
    ("a carriage return", re.compile(r"\r")),
    ("an escape code", re.compile(r"\x1b")),
    ("a Python warning", re.compile(r"\w*Warning:")),
    ("the resource tracker", re.compile(r"resource_tracker")),
    ("a retry of a library", re.compile(r"Retrying")),
    ("UMAP's fallback", re.compile(r"Falling back")),
    ("torch's glog lines", re.compile(r"^[WIE]\d{4} ", re.M)),
]


def problems(log: str) -> list[str]:
    return [what for what, pattern in FORBIDDEN if pattern.search(log)]


def run_logged(tmp_path: Path, module: str, *args: str, env: dict | None = None, name: str = "log",
               timeout: float = 600) -> tuple[subprocess.CompletedProcess, str, float]:
    """``python -m module args`` with stderr into a file (not a terminal), as `cmd 2> log` does."""
    log = tmp_path / f"{name}.txt"
    started = time.monotonic()
    with open(log, "w", encoding="utf-8") as handle:
        result = subprocess.run([sys.executable, "-m", module, *args], stdout=subprocess.PIPE, stderr=handle,
                                text=True, env={**os.environ, **(env or {})}, timeout=timeout)
    return result, log.read_text(encoding="utf-8"), time.monotonic() - started


def test_python_warnings_go_through_logging_here_and_stay_quiet_in_child_processes(tmp_path):
    """UMAP's "Spectral initialisation failed ... Falling back" is a Python warning, raised in this
    process or in a grid worker; the resource tracker's is one in its own process."""
    code = ("import subprocess, sys, warnings\n"
            "from tecb_data.commandline import quiet_libraries\n"
            "quiet_libraries(None)\n"
            "warnings.warn('Spectral initialisation failed! Falling back to random initialisation!')\n"
            "subprocess.run([sys.executable, '-c', \"import warnings; warnings.warn('worker: Falling back')\"])\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    quiet = subprocess.run([sys.executable, "-c", code, "run"], capture_output=True, text=True, env=env, timeout=120)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    verbose = subprocess.run([sys.executable, "-c", code, "--verbose"], capture_output=True, text=True, env=env,
                             timeout=120)
    assert verbose.stderr.count("Falling back") == 2, verbose.stderr


def test_grid_workers_leave_no_semaphore_to_the_resource_tracker(tmp_path):
    """UMAP's tqdm in a worker made a multiprocessing lock (a named semaphore); the pool stops its
    workers after the grid, and the tracker warned of "leaked semaphore objects" after the run."""
    # A loky worker is not forked: there a multiprocessing lock is a named semaphore, registered.
    code = ("import multiprocessing\n"
            "multiprocessing.set_start_method('spawn')\n"
            "from multiprocessing import resource_tracker\n"
            "made = []\n"
            "resource_tracker.register = lambda name, kind: made.append(kind)\n"
            "from tecb_eval.grid.children import quiet_child\n"
            "quiet_child()\n"
            "from tqdm import tqdm\n"
            "list(tqdm(range(3), disable=True)); list(tqdm(range(3), file=open('/dev/null', 'w')))\n"
            "print(made)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", result.stdout


@pytest.mark.slow
def test_run_into_a_log_file_is_plain(demo_datasets, tmp_path):
    """Two worker processes running the paper's configurations, UMAP's among them (what left
    semaphores behind); the grid's lines."""
    result, log, _ = run_logged(
        tmp_path, "tecb_eval.cli", "run", "--data", str(demo_datasets / "blurbs-clustering-s2s"), "--model", "tfidf-lsa",
        "--limit-splits", "2", "--jobs", "2", "--results",
        str(tmp_path / "r.jsonl"), "--cache-dir", str(tmp_path / "cache"), env={"TECB_JOBS": "2"})
    assert result.returncode == 0, log
    assert problems(log) == [], log
    assert "grid cells: 28/28 cells (100 %); done" in log, log


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_an_mteb_model_without_weights_and_network_is_one_line_within_30_s(demo_datasets, tmp_path):
    """Not HF_HUB_OFFLINE, just no network: one look at the Hub and one line, not huggingface_hub's
    retries of each file with backoff (15 "Retrying in ..." lines over 95 s)."""
    pytest.importorskip("mteb")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(HF_HOME=str(tmp_path / "hf-home"), HF_ENDPOINT=f"http://127.0.0.1:{_closed_port()}")
    log = tmp_path / "log.txt"
    started = time.monotonic()
    with open(log, "w") as handle:
        result = subprocess.run(
            [sys.executable, "-m", "tecb_eval.cli", "run", "--data", str(demo_datasets / "blurbs-clustering-s2s"),
             "--model", "mteb:intfloat/multilingual-e5-small", "--config", "minibatch_kmeans:none", "--results",
             str(tmp_path / "r.jsonl"), "--cache-dir", str(tmp_path / "cache")],
            stdout=subprocess.PIPE, stderr=handle, text=True, env=env, timeout=120)
    seconds = time.monotonic() - started
    text = log.read_text()
    assert result.returncode == 2, text
    assert seconds < 30, seconds
    assert len(text.splitlines()) <= 3 and problems(text) == [], text
    error = text.splitlines()[-1]
    assert "not in the local Hugging Face cache" in error and "cannot be reached" in error, error
    assert "the connection was refused" in error, error


# -- the longer runs (make test runs them; make test-fast skips them) ---------------------------

@pytest.mark.slow
def test_run_with_the_onnx_backend_into_a_log_file_is_plain(demo_datasets, tiny_sentence_transformer, tmp_path):
    """The export's chatter (torch's UserWarning, "W1126 ... torchvision is not installed" lines, a
    FutureWarning) stays out of the log; --verbose shows it."""
    args = ["run", "--data", str(demo_datasets / "blurbs-clustering-s2s"), "--model",
            f"{tiny_sentence_transformer},backend=onnx",
            "--config", "minibatch_kmeans:none", "--limit-splits", "1"]
    result, log, _ = run_logged(tmp_path, "tecb_eval.cli", *args, "--results", str(tmp_path / "r.jsonl"),
                                "--cache-dir", str(tmp_path / "cache"))
    assert result.returncode == 0, log
    assert problems(log) == [], log
    # Its own cache: the model is exported (and chatters) again.
    _, verbose, _ = run_logged(tmp_path, "tecb_eval.cli", *args, "--results", str(tmp_path / "v.jsonl"), "--verbose",
                               "--cache-dir", str(tmp_path / "cache-verbose"), name="verbose")
    assert "torchvision" in verbose, verbose


@pytest.mark.slow
def test_fast_protocol_with_umap_into_a_log_file_is_plain(demo_datasets, tmp_path):
    result, log, _ = run_logged(
        tmp_path, "tecb_eval.cli", "run", "--data", str(demo_datasets / "tenkgnad-clustering-s2s"), "--model",
        "tfidf-lsa", "--protocol", "fast", "--reduction", "umap", "--reduction", "pca50+umap", "--jobs", "2",
        "--results", str(tmp_path / "r.jsonl"), "--cache-dir", str(tmp_path / "cache"))
    assert result.returncode == 0, log
    assert problems(log) == [], log


@pytest.mark.slow
def test_demo_into_a_log_file_is_plain_and_names_only_what_it_wrote(demo_datasets, tmp_path):
    out = tmp_path / "eval"
    result, log, _ = run_logged(tmp_path, "tecb_eval.cli", "demo", "--data", str(demo_datasets / "blurbs-clustering-s2s"),
                                "--out", str(out), "--model", "tfidf-lsa", "--limit-splits", "1", "--no-figure1",
                                "--cache-dir", str(tmp_path / "cache"))
    assert result.returncode == 0, log
    assert problems(log) == [], log
    (closing,) = [line for line in log.splitlines() if line.startswith("wrote ")]
    named = re.search(r"\((.*)\)", closing).group(1).split(", ")
    for name in named:
        assert (out / name.rstrip("/")).exists(), (name, closing)
    assert "mteb/" not in named or (out / "mteb").is_dir()
    assert "synthetic" in result.stdout.lower() and "synthetic" in log.lower()


@pytest.mark.slow
def test_finetune_into_a_log_file_is_plain_and_its_summary_says_synthetic(demo_datasets, tiny_bert, tmp_path):
    """finetune into a log file writes no tqdm \\r frames, and on the demo sample its summary says the
    data are synthetic."""
    data = demo_datasets / "blurbs-clustering-s2s"
    out = tmp_path / "out"
    result, log, _ = run_logged(tmp_path, "tecb_eval.cli", "finetune", "--model", str(tiny_bert), "--data", str(data),
                                "--method", "cob", "--folds", "1", "--max-steps", "2", "--eval-every", "1",
                                "--instance-size", "20", "--score-seeds", "42", "--out", str(out))
    assert result.returncode == 0, log
    assert problems(log) == [], log
    assert "cob fold" in log or "cob " in log, log  # the training step's own lines
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert summary.splitlines()[0].startswith("Synthetic demo data"), summary
    assert result.stdout.startswith("Synthetic demo data"), result.stdout


@pytest.mark.slow
def test_the_grid_writes_plain_lines_into_a_log_and_says_what_it_spent(demo_datasets, tmp_path):
    args = grid_args(str(demo_datasets / "blurbs-clustering-s2s"), tmp_path, "--limit-splits", "3")
    first = run_eval_cli(*args, stderr_file=tmp_path / "first.log")
    assert first.returncode == 0, first.stderr
    log = first.stderr
    assert "\r" not in log and "\x1b" not in log  # no tqdm frames, no escape codes
    assert max(len(line) for line in log.splitlines()) < 400
    assert "encoding with tfidf-lsa" in log  # what it does while no cell moves
    assert "grid cells: 3/3 cells" in log
    summary = next(line for line in log.splitlines() if line.startswith("BlurbsClusteringS2S:"))
    assert "3 cells computed" in summary and "encoded" in summary, summary
    again = run_eval_cli(*args, stderr_file=tmp_path / "again.log")
    assert again.returncode == 0, again.stderr
    resumed = next(line for line in again.stderr.splitlines() if line.startswith("BlurbsClusteringS2S:"))
    assert resumed == "BlurbsClusteringS2S: all 3 cells from the results store; nothing computed", resumed


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


@pytest.mark.slow
def test_pretraining_into_a_log_has_plain_lines_and_no_library_chatter(demo_datasets, tiny_bert, tmp_path):
    data = demo_datasets / "blurbs-clustering-s2s"
    result = run_eval_cli("pretrain", "--model", str(tiny_bert), "--data", str(data), "--method", "tsdae", "--seeds",
                          "7", "--max-steps", "2", "--eval-every", "2", "--batch-size", "8", "--out",
                          str(tmp_path / "out"), stderr_file=tmp_path / "pretrain.log", env={"HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr
    log = result.stderr
    assert "\r" not in log and "\x1b" not in log and "LOAD REPORT" not in log, log
    assert "seed 7: TSDAE epoch 1/1: " in log  # the progress, as plain lines
