"""Publishing a build's folders (``tecb_data.publication``): an interrupted rebuild leaves all old
views or all new ones, a signal during the publication step waits for it to end, a build killed
half-way is rolled back (or, once committed, finished) by the next command, published files get
the mode the umask gives, and ``datasets.load_dataset`` reads a rebuilt folder anew."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import book, run_cli, run_cli_here
from tecb_data import layout, publication

VIEWS = ("blurbs-clustering-p2p", "blurbs-clustering-s2s")


def synthetic_blurbs(folder: Path, books: int = 2000) -> Path:
    """A GermEval-format input big enough that reading, splitting and writing each take a good part
    of a build (about 40 MB written), small enough that the many builds of a test stay cheap."""
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
    """An input, and the fingerprints of its builds with seed 1 ("old") and seed 2 ("new"). The
    reference builds run in this process: what they publish, not how they end, is what is kept."""
    base = tmp_path_factory.mktemp("publication")
    source = synthetic_blurbs(base / "in")
    known = {}
    for seed in (1, 2):
        done = run_cli_here(*build_cmd(source, base / f"ref{seed}", seed)[3:])
        assert done.returncode == 0, done.stderr
        known[seed] = fingerprints(base / f"ref{seed}")
    assert known[1] != known[2] and None not in known[1] + known[2]
    return source, known


def old_build(source: Path, out: Path) -> None:
    """OUT as the build with seed 1 leaves it: a copy of the reference build (a test's starting
    point, not what it tests)."""
    shutil.copytree(source.parent / "ref1", out)


def settled_state(out: Path, known: dict) -> int:
    """Which build OUT holds, all views verified; fails if views come from different builds."""
    for name in VIEWS:
        layout.verify(out / name)
    state = fingerprints(out)
    assert state in (known[1], known[2]), f"views of different builds were published: {state}"
    assert not [p.name for p in out.iterdir() if p.name.startswith((layout.TMP_PREFIX, publication.JOURNAL_PREFIX))]
    return 1 if state == known[1] else 2


@pytest.mark.slow
def test_sigint_at_any_moment_of_a_rebuild_leaves_all_old_or_all_new_views(rebuild_setup, tmp_path):
    source, known = rebuild_setup
    out = tmp_path / "out"
    old_build(source, out)
    started = time.monotonic()
    subprocess.run(build_cmd(source, out, 2), check=True, timeout=300)
    whole = time.monotonic() - started
    current = 2
    outcomes = []
    # From import time to past the end: the moments of reading, splitting, writing and publishing.
    # (a loaded machine stretches a build: the late moments make sure the sweep passes its end)
    # Eight moments, denser near the end where writing and publishing happen; the two sides of the
    # publication itself are held on purpose below, whatever the machine's speed.
    for fraction in (0.3, 0.6, 0.8, 0.9, 0.97, 1.05, 1.3, 2.5):
        wanted = 1 if current == 2 else 2
        process = subprocess.Popen(build_cmd(source, out, wanted), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
        # The moment, or the build's own end if that comes first: a signal to a finished build
        # changes nothing, so waiting for the moment past that end would only waste it.
        try:
            process.wait(timeout=whole * fraction)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=300)
        state = settled_state(out, known)
        if process.returncode == 130:
            if "nothing was published" in stderr:
                assert state == current, stderr
            else:
                assert "had been published" in stderr and state == wanted, stderr
                assert all(str(out / name) in stderr for name in VIEWS)
        elif process.returncode == -signal.SIGINT:
            # Outside the command: Python's own exit. Either still importing (nothing written yet) or
            # already exiting after a finished build (which printed its summary).
            finished = all(f"{out / name}:" in stdout for name in VIEWS)
            assert state == (wanted if finished else current), (stdout, stderr)
        else:
            assert process.returncode == 0 and state == wanted, stderr
        outcomes.append((fraction, process.returncode, state == wanted))
        current = state
    # Which moments a timed sweep hits depends on the machine; both sides of the publication are
    # therefore also hit on purpose, each held at its moment until the signal arrives.
    for moment in ("before", "after"):
        wanted = 1 if current == 2 else 2
        marker = tmp_path / f"held-{moment}-publication"
        process = subprocess.Popen([sys.executable, "-c", HELD_AT_PUBLICATION, moment, str(marker),
                                    *build_cmd(source, out, wanted)[3:]],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for_file(marker, process)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=300)
        state = settled_state(out, known)
        assert process.returncode == 130, stderr
        if moment == "before":
            assert "nothing was published" in stderr and state == current, stderr
        else:
            assert "had been published" in stderr and state == wanted, stderr
        current = state


# A build held just before or just after its publication step (argv[1]), until a signal ends it; it
# says it is there by creating the file argv[2].
HELD_AT_PUBLICATION = """
import sys, time
from pathlib import Path
from tecb_data import publication
moment, marker = sys.argv[1], Path(sys.argv[2])
_publish = publication.publish
def held_publish(*args, **kwargs):
    if moment == "after":
        _publish(*args, **kwargs)
    marker.touch()
    time.sleep(300)
    if moment == "before":
        _publish(*args, **kwargs)
publication.publish = held_publish
from tecb_data.cli import main
sys.exit(main(sys.argv[3:]))
"""


def wait_for_file(path: Path, process: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None and not path.exists():
        time.sleep(0.01)
    assert path.exists(), f"{path.name} never appeared (exit {process.poll()}): {process.stderr.read() if process.poll() is not None else ''}"


# A build held half-way through its publication step: the first view moved into place, the second
# not yet. It says so by creating argv[1] and holds until argv[2] exists, so that a signal or a kill
# lands inside the step whatever the machine's speed (an event, not a sleep and a guess).
HELD_MID_PUBLICATION = """
import os, sys, time
from pathlib import Path
held, release = Path(sys.argv[1]), Path(sys.argv[2])
_replace = os.replace
def held_replace(src, dst, *a, **k):
    _replace(src, dst, *a, **k)
    if os.path.basename(str(dst)).startswith("blurbs-clustering") and not held.exists():
        held.touch()
        deadline = time.monotonic() + 600
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
os.replace = held_replace
from tecb_data.cli import main
sys.exit(main(sys.argv[3:]))
"""


def start_held(source: Path, out: Path, seed: int, held: Path, release: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", HELD_MID_PUBLICATION, str(held), str(release), *build_cmd(source, out, seed)[3:]],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.slow
def test_a_signal_during_the_publication_step_waits_for_it_to_end(rebuild_setup, tmp_path, signum):
    source, known = rebuild_setup
    out = tmp_path / "out"
    old_build(source, out)
    held, release = tmp_path / "mid-publication", tmp_path / "release"
    process = start_held(source, out, 2, held, release)
    try:
        wait_for_file(held, process)
        assert any(out.glob(publication.JOURNAL_PREFIX + "*.json"))  # inside the step: the journal is there
        process.send_signal(signum)  # delivered before the build can see the release below
    finally:
        release.touch()
    _, stderr = process.communicate(timeout=300)
    assert settled_state(out, known) == 2
    if signum == signal.SIGINT:
        assert process.returncode == 130 and "had been published" in stderr, stderr
    else:
        assert process.returncode == -signal.SIGTERM


@pytest.mark.slow
def test_a_build_killed_during_publication_is_rolled_back_by_the_next_command(rebuild_setup, tmp_path):
    source, known = rebuild_setup
    out = tmp_path / "out"
    old_build(source, out)
    process = start_held(source, out, 2, tmp_path / "mid-publication", tmp_path / "never-released")
    try:
        wait_for_file(tmp_path / "mid-publication", process)
    finally:
        process.kill()
        process.wait()
    # half-way: the journal is there, the first view moved
    assert any(out.glob(publication.JOURNAL_PREFIX + "*.json"))
    result = run_cli("verify", str(out / VIEWS[0]))
    assert result.returncode == 0, result.stderr
    assert "rolled back an interrupted publication" in result.stderr
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
    previous = os.umask(umask)  # this process's, for the build's duration
    try:
        result = run_cli_here("build", "--source", "tenkgnad", "--demo", "--out", str(out), "--quiet")
    finally:
        os.umask(previous)
    assert result.returncode == 0, result.stderr
    for name in ("tenkgnad-clustering-s2s", "tenkgnad-clustering-p2p"):
        folder = out / name
        for path in [folder, *folder.rglob("*")]:
            mode = stat.S_IMODE(path.stat().st_mode)
            expected = (0o777 if path.is_dir() else 0o666) & ~umask
            assert mode == expected, f"{path}: {mode:o} != {expected:o}"


# --- datasets.load_dataset(folder) never serves another build's rows ----------------------------


@pytest.mark.slow
def test_datasets_load_dataset_of_a_rebuilt_folder_reads_the_new_build(tmp_path):
    """datasets caches a local folder by its card metadata and file names; the card names a digest of
    the data, so a rebuild under the same name and path (another seed) is a new cache entry. One
    cache folder for the three loads, in one process: what a notebook that rebuilds does."""
    import datasets

    out = tmp_path / "out"
    folder = out / "tenkgnad-clustering-s2s"
    loaded = {}
    for seed in ("1", "2", "1"):
        assert run_cli_here("build", "--source", "tenkgnad", "--demo", "--view", "s2s", "--out", str(out), "--seed",
                            seed, "--quiet").returncode == 0
        on_disk = [json.loads(line)["labels"] for line in (folder / layout.DATA_FILE).read_text().splitlines()]
        rows = datasets.load_dataset(str(folder), split="test", cache_dir=str(tmp_path / "datasets-cache"))
        assert list(rows["labels"]) == on_disk, f"seed {seed}: datasets returned another build's rows"
        loaded.setdefault(seed, on_disk)
    assert loaded["1"] != loaded["2"]


# --- the rows a build writes are put together from parts encoded once ----------------------------


def test_published_rows_are_the_bytes_json_line_writes(demo_datasets):
    """Each text is JSON-encoded once and its rows are assembled from the parts: every line of the
    clustering rows and of the sample table is byte for byte what ``layout.json_line`` writes for it
    (sorted keys, no spaces, UTF-8 as is), in a view with genre paths and one without."""
    for name in ("blurbs-clustering-p2p", "tenkgnad-clustering-s2s"):
        for data_file in (layout.DATA_FILE, layout.SAMPLES_FILE):
            lines = (demo_datasets / name / data_file).read_text(encoding="utf-8").splitlines(keepends=True)
            assert lines and all(line == layout.json_line(json.loads(line)) for line in lines), (name, data_file)
