"""The benchmark's real id list through praw and the local Reddit stand-in: a run killed midway and
resumed makes ceil(n/100) requests plus retries plus at most the one batch in flight, and loses nothing."""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections import Counter
from contextlib import ExitStack

import pytest

import redditserver as rs
from tecb_data import layout
from helpers import SHARED

SHARED = SHARED
REAL_IDS = SHARED / "data" / "reddit" / "submission_ids.txt"


def _end(process) -> None:
    """A run that a failed assertion left running is not left behind."""
    if process.poll() is None:
        process.kill()
        process.communicate()


@pytest.mark.slow
def test_real_ids_survive_a_kill_and_resume(tmp_path):
    if not REAL_IDS.is_file():
        pytest.skip(f"shared data not found at {REAL_IDS}")
    lines = REAL_IDS.read_text().split()[1:]
    assert len(lines) == 47_794
    unique = sorted(set(lines))  # the list repeats some ids; Reddit is asked once per id
    missing = set(unique[::701])

    def reddit() -> rs.RedditState:
        state = rs.RedditState([i for i in unique if i not in missing])
        state.gone.update({i: "deleted" for i in unique[3::500]})
        state.gone.update({i: "author_deleted" for i in unique[5::997]})
        return state

    state = reddit()
    state.faults[:] = [""] * 20 + ["429"] + [""] * 30 + ["500"] + [""] * 30 + ["drop"] + [""] * 200 + ["524"]
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    kwargs = dict(ids=REAL_IDS, out=home / "out", cache=home / "cache", praw_site="tecbtest")
    # The same list, never interrupted, with a cache of its own, against a Reddit of its own that
    # knows the same submissions: it runs beside the killed and resumed runs, and the requests it
    # makes are not counted with theirs.
    with rs.RedditServer(state) as server, rs.RedditServer(reddit()) as other_server, ExitStack() as running:
        rs.praw_ini(home / ".config", server.url)
        rs.praw_ini(elsewhere / ".config", other_server.url)
        reference = rs.start_rehydrate(elsewhere, **{**kwargs, "out": home / "reference", "cache": home / "cache-reference"})
        running.callback(_end, reference)
        killed = rs.start_rehydrate(home, **kwargs)
        running.callback(_end, killed)
        # Killed once 150 batches were served (an event of the server's, not a time): generous
        # bounds, since a loaded machine serves slowly and 478 batches make the whole list.
        deadline = time.monotonic() + 600
        while state.counts["info"] < 150 and killed.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert state.counts["info"] >= 150 and killed.poll() is None, "the run was not caught mid-list"
        killed.kill()  # SIGKILL: no cleanup of any kind
        killed.communicate()
        assert killed.returncode == -9 and not (home / "out").exists()
        with sqlite3.connect(home / "cache" / "reddit-rehydration.sqlite3") as db:
            cached = db.execute("SELECT COUNT(*) FROM submissions").fetchone()[0]
        assert 100 <= cached < len(unique) and cached % 100 == 0

        resumed = rs.rehydrate(home, **kwargs)
        assert resumed.returncode == 0, resumed.stderr
        run = json.loads(resumed.stdout)["run"]
        counts = dict(state.counts)
        served = dict(state.served_ids)
        _, reference_errors = reference.communicate(timeout=600)
        assert reference.returncode == 0, reference_errors

    faults = sum(v for k, v in counts.items() if k.startswith("fault_"))
    batches = math.ceil(len(unique) / 100)
    assert faults == 4
    # requests = ceil(n/100) + retries, plus the batch the kill interrupted (if one was in flight)
    assert counts["info"] - faults - batches in (0, 1)
    assert run["ids_from_cache"] == cached and run["requests"] == run["batches"] + run["retries"]
    twice = [i for i, n in served.items() if n > 1]
    assert len(twice) <= 100 and max(served.values()) <= 2

    # Nothing lost: every id has its status, and the published ids are exactly the surviving ones.
    with sqlite3.connect(home / "cache" / "reddit-rehydration.sqlite3") as db:
        statuses = Counter(dict(db.execute("SELECT status, COUNT(*) FROM submissions GROUP BY status").fetchall()))
    gone = set(state.gone) | missing
    assert sum(statuses.values()) == len(unique) and statuses["kept"] == len(unique) - len(gone)
    manifest = layout.verify(home / "out" / "reddit-clustering-ids")
    submissions = [json.loads(line) for line in (home / "out" / "reddit-clustering-ids" / "data" / "submissions.jsonl").open()]
    assert {r["id"] for r in submissions} == set(unique) - gone
    assert all(r["subreddit"] == rs.synthetic_post(r["id"])["subreddit"] for r in submissions)
    assert manifest["report"]["duplicate_ids_in_list"] == len(lines) - len(unique)
    assert manifest["report"]["dropped_not_returned"] == len(missing)
    assert 10 <= min(len(s["labels"]) for s in manifest["splits"]) and max(len(s["labels"]) for s in manifest["splits"]) <= 50
    assert layout.verify(home / "out" / "reddit-clustering-p2p")["statistics"]["samples"] == manifest["statistics"]["samples"]
    for name in ("reddit-clustering-s2s", "reddit-clustering-p2p", "reddit-clustering-ids"):
        for path in sorted((home / "reference" / name).rglob("*")):
            if path.is_file():  # byte-identical to the run that was never killed, manifest included
                assert path.read_bytes() == (home / "out" / name / path.relative_to(home / "reference" / name)).read_bytes()
