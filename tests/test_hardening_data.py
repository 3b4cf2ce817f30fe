"""Issue 11, data side: interrupted builds publish all views or none; published folders follow the
umask; bad inputs and outputs end in one line; network clients never hang."""

from __future__ import annotations

import json
import os
import random
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, book, run_cli
from tecb_data import layout, publication

VIEWS = ("blurbs-clustering-p2p", "blurbs-clustering-s2s")


def synthetic_blurbs(folder: Path, books: int = 4000) -> Path:
    """A GermEval-format input big enough that a build takes a few seconds to write."""
    rng = random.Random(7)
    tops = {f"Top{t}": [f"Fine{t}{f}" for f in range(4)] for t in range(6)}
    records = []
    for n in range(books):
        top = rng.choice(sorted(tops))
        fine = rng.choice(tops[top])
        blurb = " ".join(rng.choice(["Wald", "Stadt", "Liebe", "Krieg", "Zeit", "Meer"]) for _ in range(120))
        records.append(book(str(9780000000000 + n), f"Titel {n} {fine}", [(top, fine)], blurb=blurb))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "blurbs_train.txt").write_text("".join(records), encoding="utf-8")
    return folder


def build_cmd(input_path: Path, out: Path, seed: int) -> list[str]:
    return [sys.executable, "-m", "tecb_data.cli", "build", "--source", "blurbs", "--input", str(input_path),
            "--out", str(out), "--seed", str(seed), "--quiet"]


def fingerprints(out: Path) -> tuple[str | None, ...]:
    return tuple(
        json.loads((out / name / layout.MANIFEST).read_text())["fingerprint"] if (out / name).is_dir() else None
        for name in VIEWS
    )


@pytest.fixture(scope="module")
def rebuild_setup(tmp_path_factory):
    """An input, and the fingerprints of its builds with seed 1 ("old") and seed 2 ("new")."""
    base = tmp_path_factory.mktemp("publication")
    source = synthetic_blurbs(base / "in")
    known = {}
    for seed in (1, 2):
        subprocess.run(build_cmd(source, base / f"ref{seed}", seed), check=True, timeout=300)
        known[seed] = fingerprints(base / f"ref{seed}")
    assert known[1] != known[2] and None not in known[1] + known[2]
    return source, known


def settled_state(out: Path, known: dict) -> int:
    """Which build OUT holds, all views verified; fails if views come from different builds."""
    for name in VIEWS:
        layout.verify(out / name)
    state = fingerprints(out)
    assert state in (known[1], known[2]), f"views of different builds were published: {state}"
    assert not [p.name for p in out.iterdir() if p.name.startswith((layout.TMP_PREFIX, publication.JOURNAL_PREFIX))]
    return 1 if state == known[1] else 2


def test_sigint_at_any_moment_of_a_rebuild_leaves_all_old_or_all_new_views(rebuild_setup, tmp_path):
    source, known = rebuild_setup
    out = tmp_path / "out"
    subprocess.run(build_cmd(source, out, 1), check=True, timeout=300)
    started = time.monotonic()
    subprocess.run(build_cmd(source, out, 2), check=True, timeout=300)
    whole = time.monotonic() - started
    current = 2
    outcomes = []
    # From import time to past the end: the moments of reading, splitting, writing and publishing.
    # (a loaded machine stretches a build: the late moments make sure the sweep passes its end)
    for fraction in (0.3, 0.5, 0.65, 0.75, 0.82, 0.88, 0.93, 0.97, 1.0, 1.05, 1.15, 1.3, 1.6, 2.5):
        wanted = 1 if current == 2 else 2
        process = subprocess.Popen(build_cmd(source, out, wanted), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
        time.sleep(whole * fraction)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=300)
        state = settled_state(out, known)
        if process.returncode == 130:
            if "nothing was published" in stderr:
                assert state == current, stderr
            else:
                assert "had been published" in stderr and state == wanted, stderr
                assert all(str(out / name) in stderr for name in VIEWS)
        elif process.returncode == -signal.SIGINT:  # still importing: Python's own exit, nothing written yet
            assert state == current and "KeyboardInterrupt" in stderr, stderr
        else:
            assert process.returncode == 0 and state == wanted, stderr
        outcomes.append((fraction, process.returncode, state == wanted))
        current = state
    # the sweep saw both outcomes: interrupted before publishing and after (or finished)
    assert {changed for _, _, changed in outcomes} == {True, False}, outcomes


SLOW_RENAMES = """
import os, sys, time
_replace = os.replace
def slow_replace(src, dst, *a, **k):
    _replace(src, dst, *a, **k)
    if os.path.basename(str(dst)).startswith("blurbs-clustering") or str(src).endswith("-old") or str(dst).endswith("-old"):
        time.sleep(0.4)   # a slow file system: the publication step takes seconds
os.replace = slow_replace
from tecb_data.cli import main
sys.exit(main(sys.argv[1:]))
"""


def start_slow(source: Path, out: Path, seed: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", SLOW_RENAMES, *build_cmd(source, out, seed)[3:]],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def wait_for_journal(out: Path, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        if any(p.suffix == ".json" for p in out.glob(publication.JOURNAL_PREFIX + "*")):
            time.sleep(0.5)  # inside the publication step, between renames
            return
        time.sleep(0.002)
    pytest.fail("the build never reached its publication step")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_publication_step_waits_for_it_to_end(rebuild_setup, tmp_path, signum):
    source, known = rebuild_setup
    out = tmp_path / "out"
    subprocess.run(build_cmd(source, out, 1), check=True, timeout=300)
    process = start_slow(source, out, 2)
    wait_for_journal(out, process)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=300)
    assert settled_state(out, known) == 2
    if signum == signal.SIGINT:
        assert process.returncode == 130 and "had been published" in stderr, stderr
    else:
        assert process.returncode == -signal.SIGTERM


def test_a_build_killed_during_publication_is_rolled_back_by_the_next_command(rebuild_setup, tmp_path):
    source, known = rebuild_setup
    out = tmp_path / "out"
    subprocess.run(build_cmd(source, out, 1), check=True, timeout=300)
    process = start_slow(source, out, 2)
    wait_for_journal(out, process)
    process.kill()
    process.wait()
    # half-way: the journal is there, some views moved
    assert any(out.glob(publication.JOURNAL_PREFIX + "*.json"))
    result = run_cli("verify", str(out / VIEWS[0]))
    assert result.returncode == 0, result.stderr
    assert settled_state(out, known) == 1


def test_a_committed_publication_of_a_killed_build_is_finished(tmp_path):
    """The journal says committed, the process is gone: the next build only removes the old folders."""
    out = tmp_path / "out"
    layout.write_dataset(out, "x", {"a.txt": ["new\n"]}, {"dataset": "x"})
    dead = 999999999
    aside = out / f"{layout.TMP_PREFIX}{dead}-x-abc-old"
    aside.mkdir()
    (aside / "a.txt").write_text("old\n")
    entries = [{"new": f"{layout.TMP_PREFIX}{dead}-x-abc", "target": "x", "aside": aside.name, "had_old": True}]
    (out / f"{publication.JOURNAL_PREFIX}{dead}-abc.json").write_text(json.dumps({"state": "committed", "entries": entries}))
    assert layout.verify(out / "x")
    assert sorted(p.name for p in out.iterdir()) == ["x"] and (out / "x" / "a.txt").read_text() == "new\n"


# --- folders follow the umask ----------------------------------------------------------------


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_published_folders_and_files_get_the_mode_mkdir_would_give(tmp_path, umask):
    out = tmp_path / f"out{umask:o}"
    code = f"import os, sys; os.umask({umask}); from tecb_data.cli import main; sys.exit(main(sys.argv[1:]))"
    result = subprocess.run([sys.executable, "-c", code, "build", "--source", "tenkgnad", "--demo", "--out", str(out),
                             "--quiet"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    for name in ("tenkgnad-clustering-s2s", "tenkgnad-clustering-p2p"):
        folder = out / name
        for path in [folder, *folder.rglob("*")]:
            mode = stat.S_IMODE(path.stat().st_mode)
            expected = (0o777 if path.is_dir() else 0o666) & ~umask
            assert mode == expected, f"{path}: {mode:o} != {expected:o}"
