"""Options and inputs a user can get wrong, through the real `tecb-eval` command: bad arguments,
non-finite or absurd numbers, --limit-splits 0, options ignored beside others, a dataset given
twice, the Reddit ids folder where texts are needed, results rows of the right shape with wrong
values, and a Dask cluster that goes away mid-run. Each is refused in one line naming the option
(exit code 2), honoured, or skipped with a line saying so."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from helpers import run_args as _run, one_line_error as _one_line_error
from helpers import unit_holding_plugin, wait_for_claim
from tecb_data import layout
from tecb_data.errors import UserError
from tecb_data.load import REDDIT_IDS_DATASET
from tecb_eval.cli import main, parser
from tecb_eval.grid.run import run_grid
from tecb_eval.grid.scheduling import parse_memory
from tecb_eval.grid.store import ResultsStore
from tecb_eval.pretraining.settings import settings_for

DATASET = "tenkgnad-clustering-s2s"


@pytest.fixture(scope="module")
def data(demo_datasets, tmp_path_factory) -> Path:
    """The demo TenKGnad S2S, alone in its folder (a test gives that folder as --data too)."""
    out = tmp_path_factory.mktemp("options-data")
    shutil.copytree(demo_datasets / DATASET, out / DATASET)
    return out / DATASET


@pytest.fixture(scope="module")
def store(data, tmp_path_factory) -> Path:
    """A results store of three cells, written by the grid."""
    results = tmp_path_factory.mktemp("options-store") / "results.jsonl"
    assert main(_run(data, results, results.parent / "cache", "--limit-splits", "3", "--jobs", "1")) == 0
    return results


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -- numbers that are no number the grid can use ----------------------------------------------

@pytest.mark.parametrize("value, says", [
    ("inf", "not a finite size"), ("1e400", "not a finite size"), ("nan", "not a finite size"),
    ("1e400GB", "not a finite size"),
    ("2.0", "without a unit is ambiguous"), ("1e9", "without a unit is ambiguous"),
    ("2", "2 bytes cannot be meant"),
])
def test_a_memory_limit_that_is_no_size_is_one_line(data, tmp_path, capsys, value, says):
    results = tmp_path / "r.jsonl"
    error = _one_line_error(capsys, _run(data, results, tmp_path / "cache", "--limit-splits", "1",
                                         "--memory-limit", value))
    assert says in error and "--memory-limit" in error and repr(value) in error
    assert not results.exists()


def test_memory_limits_with_a_unit_a_share_or_whole_bytes_still_read():
    assert parse_memory("8GB") == 8 * 10**9 and parse_memory("512MiB") == 512 * 2**20
    assert parse_memory(8 * 2**30) == parse_memory("8589934592") == 8 * 2**30
    assert 0 < parse_memory("0.5") == parse_memory(0.5) < parse_memory("1")


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-5"])
def test_a_scheduler_timeout_that_is_no_wait_is_one_line(data, tmp_path, capsys, value):
    results = tmp_path / "r.jsonl"
    started = time.monotonic()
    error = _one_line_error(capsys, _run(data, results, tmp_path / "cache", "--scheduler", "tcp://127.0.0.1:1",
                                         "--scheduler-timeout", value))
    assert f"--scheduler-timeout {float(value)!r}" in error and "seconds above 0" in error
    assert time.monotonic() - started < 30 and not results.exists()  # refused, not waited for
    # The library checks it too, before it connects.
    with pytest.raises(UserError, match="--scheduler-timeout"):
        run_grid([data], ["tfidf-lsa"], configurations=["minibatch_kmeans:none"], limit_splits=1, progress=False,
                 scheduler="tcp://127.0.0.1:1", scheduler_timeout=float(value), results=results)
    assert not results.exists()


@pytest.mark.parametrize("option, value, says", [
    ("--learning-rate", "inf", "finite number in (0, 1]"),
    ("--learning-rate", "nan", "finite number in (0, 1]"),
    ("--learning-rate", "1e12", "finite number in (0, 1]"),
    ("--weight-decay", "nan", "finite number in [0, 1]"),
    ("--weight-decay", "inf", "finite number in [0, 1]"),
    ("--warmup-ratio", "nan", "finite number in [0, 1)"),
    ("--mlm-probability", "inf", "finite number in [0, 1)"),
    ("--deletion-ratio", "nan", "finite number in [0, 1)"),
    ("--max-grad-norm", "nan", "finite number in (0, inf)"),
    ("--max-grad-norm", "0", "finite number in (0, inf)"),
])
def test_a_pretraining_setting_that_is_no_number_is_one_line(data, tmp_path, capsys, option, value, says):
    out = tmp_path / "out"
    error = _one_line_error(capsys, ["pretrain", "--model", "minilm-l6", "--data", str(data), "--out", str(out),
                                     "--quiet", option, value])
    assert option in error and says in error
    assert not out.exists() and not Path(f"{out}.partial").exists()
    with pytest.raises(UserError, match=option):
        settings_for("wwm", **{option[2:].replace("-", "_"): float(value)})


def test_pretrain_seeds_read_as_run_reads_them_and_add_up(data, tmp_path, capsys):
    def seeds(*argv):
        return parser().parse_args(["pretrain", "--model", "m", "--data", "d", "--out", "o", *argv]).seeds

    assert seeds("--seeds", "42", "1", "2") == seeds("--seeds", "42,1,2") == (42, 1, 2)
    assert seeds("--seeds", "1", "--seeds", "2,3") == (1, 2, 3) and seeds() is None  # None: 42 1 2
    # Given twice, no seed is dropped without a word: a repeat is the one-line error it always was.
    base = ["pretrain", "--model", "minilm-l6", "--data", str(data), "--out", str(tmp_path / "out"), "--quiet"]
    assert "seeds repeat 7" in _one_line_error(capsys, base + ["--seeds", "7", "--seeds", "1,7"])


# -- user errors are one line ------------------------------------------------------------------

def test_bad_arguments_are_one_line(data, tmp_path, capsys):
    results, cache = tmp_path / "results.jsonl", tmp_path / "cache"
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    run = lambda *extra: _run(data, results, cache, *extra)  # noqa: E731
    assert "4294967295" in _one_line_error(capsys, run("--seed", str(2**32)))
    assert "does not take layer=3" in _one_line_error(capsys, ["run", "--data", str(data), "--model", "tfidf-lsa,layer=3",
                                                               "--results", str(results), "--quiet"])
    assert "tpu9" in _one_line_error(capsys, ["run", "--data", str(data), "--model", "minilm-l6,device=tpu9",
                                              "--results", str(results), "--quiet"])
    assert "limit_splits" in _one_line_error(capsys, run("--limit-splits", "-1"))
    assert "is a file" in _one_line_error(capsys, _run(data, results, a_file))
    assert "is a folder" in _one_line_error(capsys, _run(data, tmp_path, cache))
    assert "is a file" in _one_line_error(capsys, run("--out", str(a_file)))
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    assert str(broken / "config.json") in _one_line_error(
        capsys, ["run", "--data", str(data), "--model", str(broken), "--results", str(results), "--quiet"])
    not_csv = tmp_path / "reference.csv"
    not_csv.write_text("a;b\n1;2\n")
    assert str(not_csv) in _one_line_error(capsys, run("--out", str(tmp_path / "out"), "--reference", str(not_csv)))
    assert not results.exists() or results.read_bytes() == b""  # none of them ran a cell
    # export's --out
    assert main(run("--limit-splits", "1")) == 0
    capsys.readouterr()
    assert "is a file" in _one_line_error(capsys, ["export", str(results), "--out", str(a_file)])


def test_limit_splits_zero_means_all_as_in_demo(data, tmp_path, capsys):
    results = tmp_path / "results.jsonl"
    assert main(_run(data, results, tmp_path / "cache", "--limit-splits", "0")) == 0
    assert len(_rows(results)) == 10  # every split of the dataset
    from tecb_data.errors import UserError
    from tecb_eval.grid.run import run_grid

    frame = run_grid([data], ["tfidf-lsa"], configurations=["minibatch_kmeans:none"], limit_splits=0, progress=False)
    assert len(frame) == 10
    for bad in (-1, True, 1.5):
        with pytest.raises(UserError, match="or 0 for all of them"):
            run_grid([data], ["tfidf-lsa"], configurations=["minibatch_kmeans:none"], limit_splits=bad, progress=False)


# -- options that would be ignored -------------------------------------------------------------

@pytest.mark.parametrize("order", [("--seed", "7", "--seeds", "1,2"), ("--seeds", "1,2", "--seed", "42")])
def test_seed_with_seeds_is_refused(data, tmp_path, capsys, order):
    results = tmp_path / "r.jsonl"
    error = _one_line_error(capsys, _run(data, results, tmp_path / "cache", "--limit-splits", "1", *order))
    assert "--seed" in error and "--seeds 1,2" in error and "give one of them" in error
    assert not results.exists()


def test_seeds_given_twice_add_up(data, tmp_path, capsys):
    results = tmp_path / "r.jsonl"
    assert main(_run(data, results, tmp_path / "cache", "--limit-splits", "1", "--jobs", "1",
                     "--seeds", "1", "--seeds", "2")) == 0
    assert sorted((r["seed"], r["seeds"]) for r in _rows(results)) == [(1, "1,2"), (2, "1,2")]


def test_limit_splits_with_the_fast_protocol_is_refused(data, tmp_path, capsys):
    results = tmp_path / "r.jsonl"
    error = _one_line_error(capsys, _run(data, results, tmp_path / "cache", "--protocol", "fast",
                                         "--limit-splits", "2"))
    assert "--limit-splits 2 with --protocol fast" in error and not results.exists()


def test_a_scheduler_timeout_without_a_scheduler_is_refused(data, tmp_path, capsys):
    error = _one_line_error(capsys, _run(data, tmp_path / "r.jsonl", tmp_path / "cache", "--scheduler-timeout", "5"))
    assert "--scheduler-timeout applies to a Dask cluster only" in error


def test_the_same_dataset_twice_is_evaluated_once_with_a_note(data, tmp_path, capsys):
    copy = tmp_path / "copy" / DATASET
    shutil.copytree(data, copy)  # another folder, the same dataset (one fingerprint)
    results = tmp_path / "r.jsonl"
    argv = _run(data, results, tmp_path / "cache", "--limit-splits", "1", "--jobs", "1", "--data", str(data),
                "--data", str(data.parent), "--data", str(copy))
    assert main(argv) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "the same dataset given twice" in line]
    assert len(notes) == 3 and all("it is evaluated once" in n for n in notes)
    assert len(_rows(results)) == 1  # one cell, computed and stored once


def test_table_versions_honours_latex_and_refuses_what_it_would_ignore(store, capsys):
    assert main(["table", str(store), "--versions", "--format", "latex"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("% Versions in the store") and r"\begin{tabular}" in out and "tfidf-lsa" in out
    assert main(["table", str(store), "--versions", "--format", "csv"]) == 0
    assert capsys.readouterr().out.startswith("model,dataset,protocol")
    for extra in (["--protocol", "legacy"], ["--seeds", "42"], ["--table", "2"], ["--demo"]):
        error = _one_line_error(capsys, ["table", str(store), "--versions", *extra])
        assert f"whatever {extra[0]} would choose" in error


# -- the Reddit ids dataset where texts are needed ---------------------------------------------

@pytest.fixture
def reddit_build(tmp_path) -> Path:
    """What `tecb-data build --source reddit --out OUT` leaves: the ids and a rehydrated view."""
    out = tmp_path / "reddit-out"
    layout.write_dataset(out, REDDIT_IDS_DATASET, {"data/submissions.jsonl": ['{"id":"abc","subreddit":"de"}\n']},
                         {"dataset": REDDIT_IDS_DATASET, "seed": 42, "splits": []})
    texts = [f"Ein Titel über Thema {i % 3}, Beitrag {i}" for i in range(30)]
    row = json.dumps({"sentences": texts, "labels": [f"sub{i % 3}" for i in range(30)]}, ensure_ascii=False)
    layout.write_dataset(out, "reddit-clustering-s2s", {layout.DATA_FILE: [row + "\n"]},
                         {"dataset": "reddit-clustering-s2s", "view": "s2s", "splits": [{"name": "subreddits-00"}]})
    return out


def test_the_parent_folder_of_a_reddit_build_evaluates_its_views(reddit_build, tmp_path, capsys):
    results = tmp_path / "r.jsonl"
    assert main(_run(reddit_build, results, tmp_path / "cache", "--jobs", "1")) == 0
    assert f"{reddit_build / REDDIT_IDS_DATASET}: Reddit ids only, passed over" in capsys.readouterr().err
    assert {r["dataset"] for r in _rows(results)} == {"reddit-clustering-s2s"}


def test_the_reddit_ids_folder_says_what_to_give_the_command_line(reddit_build, tmp_path, capsys):
    ids = reddit_build / REDDIT_IDS_DATASET
    error = _one_line_error(capsys, _run(ids, tmp_path / "r.jsonl", tmp_path / "cache"))
    assert f"give a rehydrated view instead ({reddit_build / 'reddit-clustering-s2s'}) as --data" in error
    shutil.rmtree(reddit_build / "reddit-clustering-s2s")
    error = _one_line_error(capsys, ["layers", "--model", "tfidf-lsa", "--data", str(reddit_build),
                                     "--out", str(tmp_path / "layers")])
    assert f"tecb-data build --source reddit --ids {ids} --out DIR" in error and "as --data" in error


# -- results rows of the right shape with wrong values -----------------------------------------

@pytest.mark.parametrize("field, value, says", [
    ("seed", "abc", 'seed "abc" is not a seed'),
    ("seed", 4.5, "seed 4.5 is not a seed"),
    ("split", [1, 2], "split [1, 2] is not text"),
    ("v_measure", "high", 'v_measure "high" is not a finite number'),
    ("v_measure", None, "v_measure null is not a finite number"),
    ("v_measure", float("nan"), "v_measure NaN is not a finite number"),
    ("mteb_name", KeyError, "no mteb_name"),
    ("model", None, "model null is not text"),
    ("seeds", 42, "seeds 42 is not a seed set"),
])
def test_a_row_with_wrong_values_is_skipped_with_a_line_and_rerun(store, data, tmp_path, capsys, field, value, says):
    rows = _rows(store)
    edited = tmp_path / "edited.jsonl"
    if value is KeyError:
        del rows[1][field]
    else:
        rows[1][field] = value
    edited.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows), encoding="utf-8")
    before = edited.read_bytes()
    assert main(["table", str(edited), "--table", "2", "--format", "csv"]) == 0
    captured = capsys.readouterr()
    warnings = [line for line in captured.err.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and f"{edited}: skipped 1 row(s)" in warnings[0] and f"line 2: {says}" in warnings[0]
    assert "tfidf-lsa" in captured.out and edited.read_bytes() == before  # the rest is shown; nothing changed
    # The grid counts that cell as not run: it computes it again, and the store holds it once more.
    assert main(_run(data, edited, store.parent / "cache", "--limit-splits", "3", "--jobs", "1")) == 0
    assert edited.read_bytes().startswith(before) and len(_rows(edited)) == 4
    assert len(ResultsStore(edited).rows) == 3 and len(ResultsStore(edited).skipped) == 1
    capsys.readouterr()


def test_a_store_of_nothing_but_wrong_rows_is_one_error(store, tmp_path, capsys):
    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join(json.dumps({**row, "seed": "abc"}) + "\n" for row in _rows(store)), encoding="utf-8")
    assert main(["table", str(edited)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and err[0].startswith("warning: ") and "skipped 3 row(s)" in err[0]
    assert err[1].startswith("tecb-eval: error: ") and "holds no usable results" in err[1]


# -- a Dask cluster that goes away mid-run -----------------------------------------------------

def _free_port() -> int:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        return free.getsockname()[1]


def _dask_cli(module: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", f"distributed.cli.{module}", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.parametrize("lost", ["scheduler", "worker", "restarted"])
@pytest.mark.slow
def test_a_cluster_lost_mid_run_is_one_line_and_keeps_the_finished_cells(data, tmp_path, capsys, lost):
    """A scheduler, and a worker without a nanny (nothing restarts it), each in its own process;
    one of them is killed once the first cells are stored ("restarted": the scheduler, and a new
    one started at once at its address, which its worker rejoins)."""
    import distributed  # the [test] extra: a missing package is a failure, not a skip
    address = f"tcp://127.0.0.1:{_free_port()}"
    scheduler = _dask_cli("dask_scheduler", "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1],
                          "--no-dashboard")
    worker = _dask_cli("dask_worker", address, "--nthreads", "1", "--no-nanny", "--no-dashboard")
    results = tmp_path / "r.jsonl"
    claim = tmp_path / "held-unit"
    killed = []
    grid_ended = threading.Event()

    def kill_after_the_first_cells():
        # The worker holds the first unit it starts once 2 cells are stored (an event, not a race
        # with the grid's speed); then the scheduler or that worker is killed.
        nonlocal scheduler
        if wait_for_claim(claim, grid_ended) is not None:
            (worker if lost == "worker" else scheduler).send_signal(signal.SIGKILL)
            if lost == "restarted":
                scheduler.wait(timeout=30)
                scheduler = _dask_cli("dask_scheduler", "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1],
                                      "--no-dashboard")
            killed.append(lost)

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with distributed.Client(address, timeout=5) as client:
                    client.wait_for_workers(1, timeout=60)
                    client.register_plugin(unit_holding_plugin(results, claim, 2), name="hold-one-unit")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        killer = threading.Thread(target=kill_after_the_first_cells)
        killer.start()
        started = time.monotonic()
        code = main(_run(data, results, tmp_path / "cache", "--config", "minibatch_kmeans:pca",
                         "--config", "agglomerative:pca", "--scheduler", address, "--scheduler-timeout", "3"))
        took = time.monotonic() - started
        grid_ended.set()
        killer.join()
    finally:
        for process in (worker, scheduler):
            process.kill()
            process.wait(timeout=30)
    assert killed == [lost], "the grid finished before anything was killed: the test tried nothing"
    err = capsys.readouterr().err.splitlines()
    errors = [line for line in err if line.startswith("tecb-eval: error: ")]
    assert code == 2 and len(errors) == 1 and not any("Traceback" in line for line in err), err
    assert all(line.startswith(("tecb-eval: error: ", "note: ")) for line in err), err
    # A restarted scheduler is said as such once it answers; until then it is a lost one.
    expected = {"scheduler": ("lost the Dask scheduler",), "worker": ("lost its workers mid-run",),
                "restarted": ("was restarted mid-run and knows none of this run's tasks", "lost the Dask scheduler")}
    assert any(words in errors[0] for words in expected[lost]), errors
    assert address in errors[0] and "rerun the same command to resume" in errors[0]
    assert took < 300  # bounded: --scheduler-timeout 3, not a hang (generous for a loaded machine)
    kept = _rows(results)  # every stored line is a whole row
    # Fewer than the whole grid (10 splits x 2 configurations): the run stopped mid-way.
    whole = 2 * len(json.loads((data / layout.MANIFEST).read_text())["splits"])
    assert whole == 20 and 2 <= len(kept) < whole and len(ResultsStore(results).rows) == len(kept)


# -- the library's run_grid refuses what the CLI refuses --------------------------------------------
def test_run_grid_refuses_seed_with_seeds_and_limit_splits_with_fast(demo_datasets, tmp_path):
    from tecb_eval.grid.run import run_grid

    data = [demo_datasets / "tenkgnad-clustering-s2s"]
    common = dict(configurations=["minibatch_kmeans:none"], cache_dir=tmp_path, progress=False, log=lambda m: None)
    with pytest.raises(UserError, match="seeds replaces seed"):
        run_grid(data, ["tfidf-lsa"], seed=1, seeds=(1, 2), **common)
    with pytest.raises(UserError, match="limit_splits=2 .*fast protocol samples from all"):
        run_grid(data, ["tfidf-lsa"], protocol="fast", limit_splits=2, **common)


def test_run_grid_evaluates_a_build_given_twice_once(demo_datasets, tmp_path):
    from tecb_eval.grid.run import run_grid

    folder = demo_datasets / "tenkgnad-clustering-s2s"
    copy = tmp_path / "copy" / "tenkgnad-clustering-s2s"
    shutil.copytree(folder, copy)
    said = []
    frame = run_grid([folder, copy, folder], ["tfidf-lsa"], configurations=["minibatch_kmeans:none"],
                     cache_dir=tmp_path / "cache", limit_splits=2, progress=False, log=said.append)
    assert len(frame) == 2 and frame.split.is_unique
    assert sum("same dataset build" in line for line in said) == 2
