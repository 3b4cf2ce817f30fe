"""Outputs are owned and whole, through the real commands: an export folder holds exactly one
export; `export`, `run --out`, `demo`, `layers`, `finetune` and `pretrain` write only into a folder
they wrote (their marker) and never into a dataset, a pre-training output or a user's folder;
`tecb-data build` never writes its --report or --out onto its input or into a dataset, nor replaces
a file or folder that is not a dataset, and `collect` never writes its id list over its input or a
foreign file; Ctrl-C during an export (even one a library swallows) leaves the earlier export as it
was; a full disk cuts the results store back to its last whole row, leaves no work folder, and is
one line; an early error leaves no empty store; every file follows the umask.

The full-disk cases run on a real small tmpfs (skipped where mounting is not permitted) and, for
the store's short write, under a file-size limit (RLIMIT_FSIZE in a child process: the kernel
writes what fits below the limit and fails the rest with EFBIG, as a filling disk does).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from helpers import eval_error as _one_line_error
from helpers import draws_in_this_process, error_line, finetune_args, one_error_line, run_cli, run_cli_here
from helpers import run_args as _run
from helpers import REPO, offline_one_job
from tablefiles import NAME, table_build, table_rows, write_tsv
from tecb_data.demo import demo_input
from tecb_data.outputs import MARKER
from tecb_eval.cli import main
from tecb_eval.grid.store import ResultsStore

@pytest.fixture(scope="module")
def stores(tenkgnad_folder, tmp_path_factory):
    """Complete stores: legacy and fast protocol (seed 42) in one, legacy with seed 1 in another.
    The fast protocol's samples are drawn in this process (where they are drawn is
    tests/test_caches.py's subject; the exports below import MTEB here anyway)."""
    root = tmp_path_factory.mktemp("owned-stores")
    both, seed1, cache = root / "both.jsonl", root / "seed1.jsonl", root / "cache"
    assert main(_run(tenkgnad_folder, both, cache)) == 0
    with draws_in_this_process():
        assert main(_run(tenkgnad_folder, both, cache, "--protocol", "fast")) == 0
    assert main(_run(tenkgnad_folder, seed1, cache, "--seed", "1")) == 0
    return {"both": both, "seed1": seed1, "cache": cache}


@pytest.fixture(scope="module")
def legacy_export(stores, tmp_path_factory):
    """`export --protocol legacy` of the store "both", made once: the earlier export that several
    tests replace or must keep. Its marker lists relative names, so a copy is that export elsewhere."""
    out = tmp_path_factory.mktemp("owned-legacy-export") / "report"
    assert main(["export", str(stores["both"]), "--out", str(out), "--protocol", "legacy"]) == 0
    return out


def _earlier_export(legacy_export: Path, out: Path) -> None:
    """OUT as `export --protocol legacy` of the store "both" leaves it (a copy of the export made once)."""
    shutil.copytree(legacy_export, out, symlinks=True)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _mteb_files(out: Path) -> list[str]:
    return sorted(p.relative_to(out / "mteb" / "results").as_posix() for p in (out / "mteb").rglob("*.json"))


# -- an export folder holds exactly one export --------------------------------------------------

@pytest.mark.slow
def test_a_second_export_replaces_the_first_whole(stores, legacy_export, tmp_path, capsys):
    out = tmp_path / "report"
    _earlier_export(legacy_export, out)
    (legacy,) = [f for f in _mteb_files(out) if f.endswith("/TenKGnadClusteringS2S.json")]
    # The fast protocol's export: its v2 JSON, and no legacy JSON left from the first export.
    assert main(["export", str(stores["both"]), "--out", str(out), "--protocol", "fast"]) == 0
    files = _mteb_files(out)
    assert [f.rsplit("/", 1)[1] for f in files] == ["TenKGnadClusteringS2S.v2.json", "model_meta.json"], files
    # Another model identity (seed 1): one revision folder, not the old one beside the new.
    assert main(["export", str(stores["seed1"]), "--out", str(out)]) == 0
    revisions = sorted(p.name for p in (out / "mteb" / "results" / "tfidf-lsa").iterdir())
    assert len(revisions) == 1 and revisions[0] != legacy.split("/")[1], revisions
    import mteb

    loaded = mteb.ResultCache(out / "mteb").load_results(include_remote=False, require_model_meta=True)
    assert [len(m.task_results) for m in loaded.model_results] == [1]
    marker = json.loads((out / MARKER).read_text())
    assert marker["written_by"] == "tecb-eval export" and sorted(marker["files"]) == sorted(
        f for f in _snapshot(out) if f != MARKER)
    assert not (tmp_path / "report.partial").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["report"]
    capsys.readouterr()


# -- a command writes only into a folder it wrote -----------------------------------------------

@pytest.mark.slow
def test_export_run_and_demo_never_write_into_a_folder_they_did_not_write(tenkgnad_folder, stores, tmp_path, capsys):
    store = str(stores["both"])
    from tecb_data.layout import verify

    dataset_copy = tmp_path / "datasets"
    shutil.copytree(tenkgnad_folder, dataset_copy / tenkgnad_folder.name)
    dataset = dataset_copy / tenkgnad_folder.name
    before = _snapshot(dataset)
    assert "is a dataset folder" in _one_line_error(capsys, ["export", store, "--out", str(dataset)])
    assert _snapshot(dataset) == before
    verify(dataset)

    # A pre-training output and a user's folder: refused, left as they were.
    pretrained = tmp_path / "pretrained"
    pretrained.mkdir()
    (pretrained / MARKER).write_text(json.dumps({"written_by": "tecb-eval pretrain"}))
    (pretrained / "summary.md").write_text("the pre-training summary\n")
    users = tmp_path / "mine"
    users.mkdir()
    (users / "summary.md").write_text("my notes\n")
    for folder, says in ((pretrained, "holds the output of `tecb-eval pretrain`"), (users, "did not write")):
        kept = _snapshot(folder)
        assert says in _one_line_error(capsys, ["export", store, "--out", str(folder)])
        results = tmp_path / "never.jsonl"
        # `run --out` refuses before its grid: no cell is computed, no store is created.
        assert says in _one_line_error(capsys, _run(tenkgnad_folder, results, stores["cache"], "--out", str(folder)))
        assert not results.exists() and _snapshot(folder) == kept

    # An export folder the user has since put a file into is no longer only ours: refused.
    report = tmp_path / "report"
    assert main(["export", store, "--out", str(report)]) == 0
    (report / "notes.txt").write_text("mine\n")
    assert "notes.txt" in _one_line_error(capsys, ["export", store, "--out", str(report)])
    assert (report / "notes.txt").read_text() == "mine\n"
    (report / "notes.txt").unlink()
    # `run --out` and `export` write the same kind of folder: each replaces the other's.
    assert main(_run(tenkgnad_folder, tmp_path / "r.jsonl", stores["cache"], "--limit-splits", "0", "--out", str(report))) == 0
    assert main(["export", store, "--out", str(report)]) == 0
    capsys.readouterr()

    # The swap would delete what the run reads or keeps there: the store, the cache, the reference.
    inside = tmp_path / "both-in-one"
    assert "holds the input" in _one_line_error(
        capsys, _run(tenkgnad_folder, inside / "results.jsonl", stores["cache"], "--out", str(inside)))
    assert not inside.exists()
    assert "holds the input" in _one_line_error(capsys, _run(tenkgnad_folder, tmp_path / "x.jsonl", inside / "cache",
                                                             "--out", str(inside)))
    assert "holds the input" in _one_line_error(capsys, ["export", store, "--out", str(Path(store).parent)])

    # A symbolic link loop is one line; a link to an export folder writes the folder it names.
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert "symbolic link" in _one_line_error(capsys, ["export", store, "--out", str(loop)])
    assert "symbolic link" in _one_line_error(capsys, _run(tenkgnad_folder, tmp_path / "y.jsonl", stores["cache"],
                                                           "--out", str(loop)))
    link = tmp_path / "link"
    link.symlink_to(report)
    assert main(["export", store, "--out", str(link), "--protocol", "legacy"]) == 0
    assert link.is_symlink() and any(f.endswith("S2S.json") for f in _mteb_files(report))

    # The demo's folder keeps its own results store across a rerun (the same file, not a copy).
    demo = ["demo", "--data", str(tenkgnad_folder), "--model", "tfidf-lsa", "--out", str(tmp_path / "demo"), "--limit-splits", "1",
            "--cache-dir", str(stores["cache"]), "--quiet", "--no-figure1"]
    assert main(demo) == 0
    inode = (tmp_path / "demo" / "results.jsonl").stat().st_ino
    assert main(demo) == 0
    assert (tmp_path / "demo" / "results.jsonl").stat().st_ino == inode
    assert "holds the output of `tecb-eval demo`" in _one_line_error(capsys, ["export", str(stores["seed1"]), "--out",
                                                                              str(tmp_path / "demo")])
    capsys.readouterr()


# -- `layers`, on the tiny BERT of conftest.py ---------------------------------------------------

def _layers(model, tenkgnad_folder, out, cache) -> list[str]:
    return ["layers", "--model", str(model), "--data", str(tenkgnad_folder), "--layers", "0-1", "--out", str(out),
            "--cache-dir", str(cache), "--quiet"]


def test_layers_replaces_only_its_own_sweep(tiny_bert, tenkgnad_folder, tmp_path, capsys):
    pretrained = tmp_path / "pretrained"
    pretrained.mkdir()
    (pretrained / MARKER).write_text(json.dumps({"written_by": "tecb-eval pretrain"}))
    (pretrained / "summary.md").write_text("the pre-training summary\n")
    (pretrained / "figure.png").write_bytes(b"not ours")
    kept = _snapshot(pretrained)
    cache = tmp_path / "cache"
    assert "tecb-eval pretrain" in _one_line_error(capsys, _layers(tiny_bert, tenkgnad_folder, pretrained, cache))
    assert _snapshot(pretrained) == kept and not cache.exists()  # refused before anything was encoded
    users = tmp_path / "mine"
    users.mkdir()
    (users / "summary.md").write_text("my notes\n")
    assert "did not write" in _one_line_error(capsys, _layers(tiny_bert, tenkgnad_folder, users, cache))
    assert (users / "summary.md").read_text() == "my notes\n"
    assert "holds the input" in _one_line_error(capsys, _layers(tiny_bert, tenkgnad_folder, tmp_path, cache))
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert "symbolic link" in _one_line_error(capsys, _layers(tiny_bert, tenkgnad_folder, loop, cache))

    out = tmp_path / "sweep"
    assert main(_layers(tiny_bert, tenkgnad_folder, out, cache)) == 0
    first = _snapshot(out)
    assert main(_layers(tiny_bert, tenkgnad_folder, out, cache)) == 0  # a rerun replaces its own sweep
    assert _snapshot(out) == first and json.loads((out / MARKER).read_text())["written_by"] == "tecb-eval layers"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "loop", "mine", "pretrained", "sweep"]
    capsys.readouterr()


# -- `finetune` and `pretrain` replace only the files they wrote -----------------------------------

@pytest.mark.slow
def test_finetune_overwrite_removes_only_the_files_it_wrote(tiny_bert, blurbs_folder, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(finetune_args(tiny_bert, blurbs_folder, out)) == 0
    (out / "notes.txt").write_text("mine\n", encoding="utf-8")
    error = _one_line_error(capsys, finetune_args(tiny_bert, blurbs_folder, out, "--overwrite"))
    assert "notes.txt" in error and (out / "notes.txt").read_text(encoding="utf-8") == "mine\n"
    (out / "notes.txt").unlink()
    assert main(finetune_args(tiny_bert, blurbs_folder, out, "--overwrite")) == 0
    assert (out / "summary.md").is_file()


def test_pretrain_overwrite_removes_only_the_files_it_wrote(tiny_bert, tenkgnad_folder, tmp_path, capsys):
    # The demo TenKGnad S2S (10 splits, not Blurbs' 28): each run evaluates every split twice.
    out = tmp_path / "out"
    args = ["pretrain", "--model", str(tiny_bert), "--data", str(tenkgnad_folder), "--method", "tsdae", "--seeds", "7",
            "--max-steps", "1", "--eval-every", "1", "--batch-size", "8", "--quiet", "--out", str(out)]
    assert main(args) == 0
    (out / "notes.txt").write_text("mine\n", encoding="utf-8")
    error = _one_line_error(capsys, args + ["--overwrite"])
    assert "notes.txt" in error and (out / "notes.txt").read_text(encoding="utf-8") == "mine\n"
    assert not (tmp_path / "out.partial").exists()  # refused before any work
    (out / "notes.txt").unlink()
    assert main(args + ["--overwrite"]) == 0
    assert (out / "summary.md").is_file()


# -- Ctrl-C during an export ---------------------------------------------------------------------

def _child(script: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], cwd=REPO, env=offline_one_job(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_ctrl_c_during_an_export_leaves_the_earlier_one_as_it_was(stores, legacy_export, tmp_path):
    out = tmp_path / "report"
    _earlier_export(legacy_export, out)
    before = _snapshot(out)
    # Once the new tables are written (the plots still to come), Ctrl-C, twice. The export is held at
    # its Table 3 plot until the Ctrl-C comes (an event, not a race with how fast it plots).
    held = tmp_path / "plotting"
    child = _child(f"""
        import sys, time
        from pathlib import Path
        from tecb_eval.cli import main
        from tecb_eval.reports import figures

        real = figures.plot_table3

        def held(*args, **kwargs):
            Path({str(held)!r}).touch()
            time.sleep(600)  # until Ctrl-C
            return real(*args, **kwargs)

        figures.plot_table3 = held
        sys.exit(main(["export", {str(stores["both"])!r}, "--out", {str(out)!r}, "--protocol", "fast"]))
    """)
    work = tmp_path / "report.partial"
    deadline = time.monotonic() + 120
    while not held.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert held.exists() and (work / "table3.md").exists(), child.communicate(timeout=120) if child.poll() is not None else ""
    child.send_signal(signal.SIGINT)
    child.send_signal(signal.SIGINT)
    stdout, stderr = child.communicate(timeout=120)
    assert child.returncode == 130, (stdout, stderr)
    assert "wrote" not in stdout and "results store" not in stderr, stderr
    assert stderr.strip().splitlines()[-1] == (
        f"tecb-eval: interrupted; nothing in {out} was changed (an export is written whole or not at all); "
        "run the same command again")
    assert _snapshot(out) == before and not work.exists()


@pytest.mark.slow
def test_a_ctrl_c_that_a_library_swallows_still_stops_the_export(stores, legacy_export, tmp_path):
    out = tmp_path / "report"
    _earlier_export(legacy_export, out)
    before = _snapshot(out)
    # A stand-in for a library that catches KeyboardInterrupt (numba did, inside UMAP): the Ctrl-C
    # arrives while it plots and it carries on.
    child = _child(f"""
        import os, signal, sys
        from tecb_eval.cli import main
        from tecb_eval.reports import figures

        real = figures.plot_table3

        def swallowing(*args, **kwargs):
            try:
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(10**6):
                    pass
            except KeyboardInterrupt:
                print("swallowed", file=sys.stderr)
            return real(*args, **kwargs)

        figures.plot_table3 = swallowing
        sys.exit(main(["export", {str(stores["both"])!r}, "--out", {str(out)!r}, "--protocol", "fast"]))
    """)
    stdout, stderr = child.communicate(timeout=300)
    assert "swallowed" in stderr and child.returncode == 130 and "wrote" not in stdout, (stdout, stderr)
    assert _snapshot(out) == before and not (tmp_path / "report.partial").exists()


# -- a full disk ---------------------------------------------------------------------------------

@pytest.fixture
def small_fs(tmp_path):
    """Mount a small tmpfs (as root); skip where this machine does not allow it."""
    mounted = []

    def mount(size: str) -> Path:
        where = tmp_path / f"fs{len(mounted)}"
        where.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}); "
                        "test_a_short_write_under_a_file_size_limit covers the store's short write")
        mounted.append(where)
        return where

    yield mount
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _fill(folder: Path, leave: int = 0) -> None:
    """Fill the file system of ``folder`` to the last byte, then free ``leave`` bytes."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            try:
                os.write(fd, b"\0" * 4096)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
        if leave:
            os.ftruncate(fd, max(0, os.fstat(fd).st_size - leave))
    finally:
        os.close(fd)


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("tecb-eval: error: ")]


def test_a_full_disk_keeps_every_whole_row_and_no_part_of_one_and_is_one_line(tenkgnad_folder, stores, small_fs, capsys):
    fs = small_fs("64k")
    store = fs / "results.jsonl"
    cache = stores["cache"]  # holds every vector already: only the store is written on the small disk
    assert main(_run(tenkgnad_folder, store, cache, "--limit-splits", "1")) == 0
    _fill(fs)
    before = store.read_bytes()
    # The rows fill the rest of the store's last page; the one that fits only in part is a short
    # write, then ENOSPC.
    code = main(_run(tenkgnad_folder, store, cache, "--limit-splits", "0"))
    errors = _error_lines(capsys.readouterr().err)
    assert code == 2 and len(errors) == 1 and "No space left on device" in errors[0] and str(store) in errors[0]
    rows = ResultsStore(store).rows
    assert 1 < len(rows) < 10 and store.read_bytes().startswith(before) and store.read_bytes().endswith(b"}\n")
    assert store.read_bytes() == b"".join(
        (json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n").encode() for row in rows)
    (fs / "filler").unlink()
    assert main(_run(tenkgnad_folder, store, cache, "--limit-splits", "0")) == 0  # resumes: every split
    assert len(ResultsStore(store).rows) == 10
    capsys.readouterr()


def test_a_short_write_under_a_file_size_limit_is_cut_back(tenkgnad_folder, stores, tmp_path):
    store = tmp_path / "results.jsonl"
    assert main(_run(tenkgnad_folder, store, stores["cache"], "--limit-splits", "1")) == 0
    before = store.read_bytes()
    # RLIMIT_FSIZE: the kernel writes up to the limit (100 bytes of the next row), then fails with
    # EFBIG; Python ignores the SIGXFSZ that comes with it.
    child = _child(f"""
        import resource, sys
        from tecb_eval.cli import main

        resource.setrlimit(resource.RLIMIT_FSIZE, ({len(before) + 100}, resource.RLIM_INFINITY))
        sys.exit(main({_run(tenkgnad_folder, store, stores["cache"], "--limit-splits", "3")!r}))
    """)
    stdout, stderr = child.communicate(timeout=300)
    errors = _error_lines(stderr)
    assert child.returncode == 2 and len(errors) == 1 and "File too large" in errors[0], stderr
    assert store.read_bytes() == before


def test_an_export_on_a_full_disk_names_out_and_keeps_the_earlier_export(stores, legacy_export, small_fs, capsys):
    fs = small_fs("256k")
    out = fs / "report"
    _earlier_export(legacy_export, out)
    before = _snapshot(out)
    _fill(fs, leave=8192)
    error = _one_line_error(capsys, ["export", str(stores["both"]), "--out", str(out), "--protocol", "fast"])
    assert f"--out {out}" in error and "No space left on device" in error and "--cache-dir" not in error, error
    assert _snapshot(out) == before and not (fs / "report.partial").exists()


def test_an_export_onto_a_full_disk_leaves_no_work_folder_and_says_the_disk_is_full(tenkgnad_folder, tmp_path, small_fs, capsys):
    results = tmp_path / "results.jsonl"
    assert main(_run(tenkgnad_folder, results, tmp_path / "cache", "--limit-splits", "2")) == 0
    fs = small_fs("256k")
    _fill(fs)  # not a byte left: not even the work folder's marker fits
    capsys.readouterr()
    assert main(["export", str(results), "--out", str(fs / "ex")]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("tecb-eval: error: ")]
    assert len(errors) == 1, errors
    error = errors[0]
    assert "disk is full" in error and f"--out {fs / 'ex'}" in error, error
    assert sorted(p.name for p in fs.iterdir()) == ["filler"]
    (fs / "filler").unlink()
    capsys.readouterr()
    assert main(["export", str(results), "--out", str(fs / "ex")]) == 0, capsys.readouterr().err


def test_finetuning_onto_a_full_disk_is_one_line(tiny_bert, blurbs_folder, small_fs, capsys):
    fs = small_fs("1m")
    _fill(fs, leave=96 * 1024)  # room for the work folder and logs, not for a checkpoint
    capsys.readouterr()
    code = main(finetune_args(tiny_bert, blurbs_folder, fs / "out"))
    errors = [line for line in capsys.readouterr().err.splitlines() if "Loading weights" not in line and line.strip()]
    assert code == 2 and len(errors) == 1 and "disk is full" in errors[0], errors


# -- nothing is created before there is something to write --------------------------------------

class _Stops:
    """An encoder whose encoding is interrupted (Ctrl-C) or fails."""

    identity = "stops-while-encoding"

    def __init__(self, error):
        self.error = error

    def encode(self, texts):
        raise self.error


def test_an_early_error_leaves_no_empty_store(tenkgnad_folder, tmp_path, capsys):
    from tecb_eval.grid.run import run_grid

    results = tmp_path / "results.jsonl"
    # A memory limit below the smallest unit is found once the grid is planned, after the store is opened.
    capsys.readouterr()
    assert main(_run(tenkgnad_folder, results, tmp_path / "cache", "--memory-limit", "1MB", "--jobs", "2")) == 2
    errors = _error_lines(capsys.readouterr().err)
    assert len(errors) == 1 and "raise --memory-limit" in errors[0] and not results.exists()
    for error in (KeyboardInterrupt(), ValueError("the encoder failed")):
        with pytest.raises(type(error)):
            run_grid([tenkgnad_folder], [("stops", _Stops(error))], configurations=["minibatch_kmeans:none"], results=results,
                     progress=False, log=lambda m: None)
        assert not results.exists()
    # A file that was there before is the user's: left as it was, even empty.
    results.write_bytes(b"")
    with pytest.raises(KeyboardInterrupt):
        run_grid([tenkgnad_folder], [("stops", _Stops(KeyboardInterrupt()))], configurations=["minibatch_kmeans:none"],
                 results=results, progress=False, log=lambda m: None)
    assert results.read_bytes() == b""


def _blocked_flock_waiters(path: Path) -> int:
    """How many flock requests on ``path`` the kernel holds waiting (Linux's /proc/locks: "->" lines)."""
    st = os.stat(path)
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    return sum(1 for line in Path("/proc/locks").read_text().splitlines() if "->" in line and inode in line)


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux's /proc/locks to see a waiting flock")
def test_a_run_waiting_on_a_store_that_is_removed_opens_it_again(tenkgnad_folder, tmp_path):
    results = tmp_path / "results.jsonl"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        from tecb_eval.grid.store import ResultsStore

        store = ResultsStore({str(results)!r}, lock=True)
        print("locked", flush=True)
        sys.stdin.readline()  # until the other store waits on the lock
        store.close()  # created here and never written: removed
    """)], cwd=REPO, env=offline_one_job(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    seen = {}

    def open_and_append():  # waits for the holder, then finds its file gone
        with ResultsStore(results, lock=True) as store:
            store.append({"algorithm": "a", "protocol": "legacy", "profile": "current", "seeds": "42", "seed": 42,
                          "model": "m", "model_identity": "i", "dataset_fingerprint": "f", "reduction": "none",
                          "split": "s", "dataset": "d", "mteb_name": "D", "v_measure": 0.5})
            seen["same file"] = os.stat(results).st_ino == os.fstat(store._fd).st_ino

    waiter = threading.Thread(target=open_and_append)
    waiter.start()
    deadline = time.monotonic() + 120
    while _blocked_flock_waiters(results) == 0:  # the kernel says the second store is waiting
        assert time.monotonic() < deadline and waiter.is_alive(), "the second store never waited on the lock"
        time.sleep(0.01)
    holder.stdin.write("release\n")
    holder.stdin.flush()
    waiter.join(timeout=120)
    assert holder.wait(timeout=60) == 0 and not waiter.is_alive()
    assert seen == {"same file": True}
    assert len(ResultsStore(results).rows) == 1


# -- files follow the umask -------------------------------------------------------------------------

def _modes(*folders: Path) -> Counter:
    found = Counter()
    for folder in folders:
        for path in [folder, *folder.rglob("*")]:
            kind = "dir" if path.is_dir() else "file"
            found[(kind, oct(stat.S_IMODE(path.stat().st_mode)))] += 1
    return found


@pytest.mark.parametrize("umask", [0o022, 0o027])
@pytest.mark.slow
def test_outputs_and_caches_follow_the_umask(tenkgnad_folder, stores, tiny_bert, tmp_path, capsys, umask):
    previous = os.umask(umask)
    try:
        results, cache = tmp_path / "results.jsonl", tmp_path / "cache"
        assert main(_run(tenkgnad_folder, results, cache, "--limit-splits", "1", "--config", "minibatch_kmeans:pca",
                         "--out", str(tmp_path / "run"))) == 0
        assert main(["export", str(stores["both"]), "--out", str(tmp_path / "export")]) == 0
        assert main(_layers(tiny_bert, tenkgnad_folder, tmp_path / "sweep", tmp_path / "layer-cache")) == 0
    finally:
        os.umask(previous)
    capsys.readouterr()
    folders = [tmp_path / name for name in ("run", "export", "sweep", "cache", "layer-cache")]
    assert any(p.suffix == ".npy" for p in (tmp_path / "cache").rglob("*"))  # a reduction was cached
    modes = _modes(*folders, results)
    assert set(modes) == {("dir", oct(0o777 & ~umask)), ("file", oct(0o666 & ~umask))}, modes


# --- staged_output: the one way a command publishes its folder ----------------------------------

def _stage(out: Path, body, **options) -> None:
    from tecb_data.outputs import staged_output

    with staged_output(out, "tecb-eval sample", overwrite=False, **options) as stage:
        body(stage)


def test_staged_output_resumes_the_partial_folder_begun_for_the_same_key(tmp_path):
    out = tmp_path / "out"
    key = {"model": "m", "settings": {"steps": 2}}

    def first(stage):
        assert not stage.resumed
        (stage.work / "unit-1.txt").write_text("done\n")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _stage(out, first, resume=key, keep_partial=(KeyboardInterrupt,))
    partial = out.with_name("out.partial")
    assert (partial / "unit-1.txt").is_file() and not out.exists()

    def other_key(stage):  # another key is not resumed: its partial folder is begun again
        assert not stage.resumed and not (stage.work / "unit-1.txt").exists()
        (stage.work / "unit-1.txt").write_text("again\n")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _stage(out, other_key, resume={**key, "model": "n"}, keep_partial=(KeyboardInterrupt,))

    def resumed(stage):
        assert not stage.resumed  # the partial folder now belongs to key "n"
        (stage.work / "unit-1.txt").write_text("done\n")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _stage(out, resumed, resume=key, keep_partial=(KeyboardInterrupt,))

    def finish(stage):
        assert stage.resumed and (stage.work / "unit-1.txt").read_text() == "done\n"
        (stage.work / "unit-2.txt").write_text("done\n")

    _stage(out, finish, resume=key)
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "unit-1.txt", "unit-2.txt"]  # no key.json left
    assert json.loads((out / MARKER).read_text())["files"] == ["unit-1.txt", "unit-2.txt"]
    assert not partial.exists()


def test_staged_output_keeps_the_partial_folder_only_where_the_command_asks(tmp_path):
    class Diverged(Exception):
        pass

    def fails(stage):
        (stage.work / "checkpoint").write_text("x")
        raise Diverged

    for keep, left in (((Diverged,), True), ((), False)):
        out = tmp_path / f"out-{left}"
        with pytest.raises(Diverged):
            _stage(out, fails, keep_partial=keep)
        assert out.with_name(out.name + ".partial").joinpath("checkpoint").is_file() is left
        assert not out.exists()


def test_overwrite_replaces_only_what_the_marker_lists_and_names_another_command(tmp_path):
    from tecb_data.errors import UserError
    from tecb_data.outputs import staged_output

    out = tmp_path / "out"
    _stage(out, lambda stage: (stage.work / "a.txt").write_text("1"))
    with pytest.raises(UserError, match="pass --overwrite"):
        _stage(out, lambda stage: None)
    with staged_output(out, "tecb-eval sample", overwrite=True) as stage:
        (stage.work / "b.txt").write_text("2")
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "b.txt"]
    # A report's folder given to another command: the refusal names who wrote it, not a missing marker.
    report = tmp_path / "site"
    _stage(report, lambda stage: (stage.work / "index.html").write_text("<p>"))
    with pytest.raises(UserError) as refused:
        with staged_output(report, "tecb-eval finetune", overwrite=True):
            pass
    assert "`tecb-eval sample` wrote it" in str(refused.value) and f"no {MARKER}" not in str(refused.value)


def test_a_full_disk_in_a_staged_output_leaves_no_folder_it_created(tmp_path):
    from tecb_data.errors import UserError

    out = tmp_path / "new" / "deeper" / "out"

    def full(stage):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(stage.work / "model.safetensors"))

    with pytest.raises(UserError, match="the disk is full"):
        _stage(out, full)
    assert list(tmp_path.iterdir()) == []


def test_a_build_on_a_full_disk_leaves_no_empty_out_folder(tmp_path, monkeypatch, capsys):
    """The disk fills while the first data file is written (our own writer fails as a full disk
    makes it fail): one line naming --out and the full disk, and no OUT folder the build created."""
    from tecb_data import cli as data_cli
    from tecb_data import layout

    def full(path, chunks):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(layout, "_write_text", full)
    out = tmp_path / "new" / "out"
    assert data_cli.main(["build", "--source", "blurbs", "--input", str(demo_input("blurbs")), "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"tecb-data: error: --out {out}: ") and "the disk is full" in error, error
    assert list(tmp_path.iterdir()) == []


# -- `tecb-data build` and `collect`: an output never overwrites an input or lands inside a dataset --

@pytest.mark.slow
def test_report_onto_the_input_or_the_new_manifest_is_refused_before_work(tmp_path):
    source = write_tsv(tmp_path / "in.tsv", table_rows())
    before = source.read_bytes()
    error = one_error_line(table_build(source, tmp_path / "out", "--report", str(source)))
    assert "--report" in error and "is the input" in error and source.read_bytes() == before
    assert not (tmp_path / "out").exists()
    assert table_build(source, tmp_path / "out").returncode == 0
    manifest = tmp_path / "out" / f"{NAME}-s2s" / "manifest.json"
    kept = manifest.read_bytes()
    error = one_error_line(table_build(source, tmp_path / "out", "--seed", "5", "--report", str(manifest)))
    assert "--report" in error and manifest.read_bytes() == kept
    assert run_cli_here("verify", str(tmp_path / "out" / f"{NAME}-s2s")).returncode == 0
    # A file the build did not write is never replaced; its own earlier report is.
    notes = tmp_path / "notes.json"
    notes.write_text('{"mine": 1}\n', encoding="utf-8")
    error = one_error_line(table_build(source, tmp_path / "out", "--report", str(notes)))
    assert "was not written by this command" in error and notes.read_text(encoding="utf-8") == '{"mine": 1}\n'
    report = tmp_path / "report.json"
    assert table_build(source, tmp_path / "out", "--report", str(report)).returncode == 0
    assert table_build(source, tmp_path / "out", "--report", str(report), "--seed", "3").returncode == 0


@pytest.mark.slow
def test_build_out_holding_its_input_or_inside_a_dataset_is_refused(tmp_path):
    source = write_tsv(tmp_path / "in.tsv", table_rows())
    assert table_build(source, tmp_path / "out").returncode == 0
    published = tmp_path / "out" / f"{NAME}-s2s" / "data" / "samples.jsonl"
    kept = published.read_bytes()
    error = one_error_line(run_cli_here("build", "--source", "table", "--input", str(published), "--name", NAME,
                                        "--text", "text", "--label", "label", "--out", str(tmp_path / "out"), "--quiet"))
    assert "holds the input" in error and published.read_bytes() == kept
    error = one_error_line(table_build(source, tmp_path / "out" / f"{NAME}-s2s"))
    assert "inside the dataset folder" in error


def test_a_file_or_foreign_folder_at_out_dataset_is_not_replaced(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "tenkgnad-clustering-s2s").write_text("my notes\n")
    result = run_cli_here("build", "--source", "tenkgnad", "--demo", "--out", str(out), "--quiet")
    assert result.returncode == 2 and "a file, not a dataset folder, is in the way" in error_line(result.stderr)
    assert (out / "tenkgnad-clustering-s2s").read_text() == "my notes\n"
    assert sorted(p.name for p in out.iterdir()) == ["tenkgnad-clustering-s2s"]  # nothing else published
    (out / "tenkgnad-clustering-s2s").unlink()
    (out / "tenkgnad-clustering-p2p").mkdir()
    (out / "tenkgnad-clustering-p2p" / "thesis.tex").write_text("\\begin{document}")
    result = run_cli_here("build", "--source", "tenkgnad", "--demo", "--out", str(out), "--quiet")
    assert result.returncode == 2 and "without manifest.json" in error_line(result.stderr)
    assert sorted(p.name for p in out.rglob("*")) == ["tenkgnad-clustering-p2p", "thesis.tex"]


def test_collect_never_writes_its_id_list_over_its_input_or_a_foreign_file(tmp_path):
    subreddits = tmp_path / "subreddits.txt"
    subreddits.write_text("de\nfinanzen\n", encoding="utf-8")
    for out in (subreddits, tmp_path / "notes.csv"):
        if out != subreddits:
            out.write_text("my,own\n", encoding="utf-8")
        before = out.read_bytes()
        done = run_cli("collect", "--source", "reddit", "--subreddits", str(subreddits), "--out", str(out),
                       env={"praw_client_id": "x", "praw_client_secret": "y"})
        assert "--out" in one_error_line(done) and out.read_bytes() == before
