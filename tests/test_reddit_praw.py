"""Rehydration and collection through the real praw, against a local stand-in for Reddit's API.

praw reads praw.ini once per process, so every run is a subprocess with its own HOME whose
``.config/praw.ini`` points at the server (see tests/redditserver.py); nothing of praw is patched.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

import redditserver as rs
from helpers import b36
from tecb_data import layout
from tecb_data.card import card_problems
from tecb_data.recipes import reddit_splits
from tecb_data.sources.reddit_text import views


IDS = [b36(60_000_000 + i * 7919) for i in range(400)]
SUBS = [f"Thema{k:02d}" for k in range(12)]
SUBREDDIT_OF = {item_id: SUBS[i % len(SUBS)] for i, item_id in enumerate(IDS)}
GONE = {
    IDS[0]: "deleted",
    IDS[1]: "deleted_by_user_title",
    IDS[2]: "removed",
    IDS[3]: "removed_body_only",
    IDS[4]: "author_deleted",
    IDS[5]: "author_suspended",
    IDS[6]: "missing",
}
UNKNOWN = "zzzzzz1"  # in the list, never known to Reddit


@pytest.fixture
def home(tmp_path):
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


@pytest.fixture
def reddit(home):
    state = rs.RedditState([i for i in IDS if GONE.get(i) != "missing"], subreddits=SUBREDDIT_OF)
    state.gone.update({k: v for k, v in GONE.items() if v != "missing"})
    with rs.RedditServer(state) as server:
        rs.praw_ini(home / ".config", server.url)
        yield server


def id_list(home: Path) -> Path:
    path = home / "ids.txt"
    path.write_text("id,subreddit\n" + "".join(f"{i},{SUBREDDIT_OF[i]}\n" for i in reversed(IDS)) + f"{UNKNOWN},Thema00\n")
    return path


def all_bytes(*folders: Path) -> bytes:
    return b"".join(p.read_bytes() for folder in folders for p in sorted(folder.rglob("*")) if p.is_file())


def assert_no_secrets(*blobs: bytes | str) -> None:
    for blob in blobs:
        data = blob.encode() if isinstance(blob, str) else blob
        for secret in rs.SECRETS:
            assert secret.encode() not in data


def rows(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / layout.SAMPLES_FILE).read_text().splitlines()]


@pytest.mark.slow
def test_rehydration_drops_what_is_gone_retries_and_leaks_nothing(home, reddit):
    state = reddit.state
    # 429 (praw waits out the rate-limit reset), 500 and a dropped connection (prawcore retries),
    # an expired token (prawcore fetches a new one), 524 (prawcore gives up, the batch is retried).
    state.faults[:] = ["429", "500", "", "drop", "", "401", "", "524"]  # "": answered normally
    out, cache = home / "out", home / "cache"
    proc = rs.rehydrate(home, ids=id_list(home), out=out, cache=cache, praw_site="tecbscript", debug_log=True)
    assert proc.returncode == 0, proc.stderr
    assert "Fetching: GET" in proc.stderr  # prawcore's debug log was on, and holds no secret (below)
    run = json.loads(proc.stdout)["run"]
    batches = math.ceil((len(IDS) + 1) / 100)
    # What the code guarantees, whatever the scheduler does: every fault was served once and cost
    # exactly one more /api/info request at the server; every id was asked for, and none again once
    # it had been answered. The client's own count can only be higher: a request that a connection
    # failure stops before the server reads it is counted (and retried) by the client alone.
    assert state.faults == [] and all(state.counts[f"fault_{f}"] == 1 for f in ("429", "500", "drop", "401", "524"))
    assert state.counts["info"] == batches + 5
    assert set(state.served_ids) == set(IDS) | {UNKNOWN}  # the missing and unknown ones asked for too
    assert max(state.served_ids.values()) == 1, [i for i, n in state.served_ids.items() if n > 1]
    assert run["requests"] >= state.counts["info"] and run["retries"] == run["requests"] - batches >= 5
    assert state.counts["grant_password"] == 2  # the script app's account; again after the 401

    manifests = {d: layout.verify(out / d) for d in ("reddit-clustering-s2s", "reddit-clustering-p2p", "reddit-clustering-ids")}
    report = manifests["reddit-clustering-s2s"]["report"]
    assert report == {
        "ids_in_list": 401, "duplicate_ids_in_list": 0, "kept": 393, "subreddits": 12,
        "dropped_not_returned": 2, "dropped_deleted": 2, "dropped_removed": 2, "dropped_author_gone": 2,
        "dropped_empty_title": 0,
    }
    assert [m["publishable"] for m in manifests.values()] == [False, False, True]
    for name, manifest in manifests.items():  # cards the Hub accepts; the text ones say not to republish
        card = (out / name / layout.CARD).read_text()
        assert card_problems(card, manifest) == []
        assert ("do not republish" in card) == (not manifest["publishable"])
    assert all(m["report"] == report for m in manifests.values())

    # Dropped submissions are nowhere: not in any output file, not in the cache.
    written = all_bytes(out, cache)
    for item_id in GONE:
        assert f"({item_id})".encode() not in written  # synthetic titles end in "(id)"
        assert f'"{item_id}"'.encode() not in all_bytes(out)
    assert_no_secrets(written, proc.stdout, proc.stderr)
    assert b"user_" not in written  # no author names

    kept = IDS[100]
    expected = rs.synthetic_post(kept, SUBREDDIT_OF[kept])
    p2p = {r["id"]: r for r in rows(out / "reddit-clustering-p2p")}
    assert p2p[kept]["text"] == views(expected["title"], expected["selftext"])["p2p"] and p2p[kept]["label"] == SUBREDDIT_OF[kept]
    assert "http" not in (out / "reddit-clustering-p2p" / layout.DATA_FILE).read_text()
    assert "sentences" not in (out / "reddit-clustering-ids" / layout.DATA_FILE).read_text()

    # A second build is served from the cache, byte for byte, through the command line.
    state.counts.clear()
    cli = rs.run(["build", "--source", "reddit", "--ids", str(home / "ids.txt"), "--out", str(home / "again"),
                  "--cache", str(cache), "--quiet"], home)
    assert cli.returncode == 0, cli.stderr
    assert state.counts["info"] == 0 and "0 ids fetched in 0 requests" in cli.stdout
    assert "dropped_deleted 2" in cli.stdout
    assert all_bytes(home / "again") == all_bytes(out)
    assert_no_secrets(cli.stdout, cli.stderr)

    # The publishable ids folder rehydrates (with a fresh cache) into the same datasets.
    again = rs.run(["build", "--source", "reddit", "--ids", str(out / "reddit-clustering-ids"), "--out", str(home / "from-ids"),
                    "--cache", str(home / "cache2"), "--praw-site", "tecbtest", "--quiet"], home)
    assert again.returncode == 0, again.stderr
    assert state.counts["info"] == math.ceil(393 / 100)
    for name, manifest in manifests.items():
        assert layout.verify(home / "from-ids" / name)["fingerprint"] == manifest["fingerprint"]


@pytest.mark.slow
def test_deleting_k_submissions_removes_exactly_their_rows(home, reddit):
    state = reddit.state
    out, cache = home / "out", home / "cache"
    assert rs.rehydrate(home, ids=id_list(home), out=out, cache=cache, praw_site="tecbtest").returncode == 0
    before = {d: rows(out / d) for d in ("reddit-clustering-s2s", "reddit-clustering-ids")}
    # k more submissions go, every way they can, among them all of one subreddit's
    newly_gone = {IDS[50]: "deleted", IDS[77]: "removed", IDS[123]: "author_deleted", IDS[200]: "missing"}
    newly_gone.update({i: "deleted" for i in IDS[7:] if SUBREDDIT_OF[i] == "Thema05"})
    kept_text = (out / "reddit-clustering-p2p" / layout.SAMPLES_FILE).read_text()
    assert all(f"({i})" in kept_text or SUBREDDIT_OF[i] == "Thema05" for i in [IDS[50], IDS[77]])
    for item_id, how in newly_gone.items():
        if how == "missing":
            state.known.discard(item_id)
        else:
            state.gone[item_id] = how
    proc = rs.rehydrate(home, ids=id_list(home), out=out, cache=cache, praw_site="tecbtest", refresh=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["run"]["ids_fetched"] == 401
    for name, old in before.items():
        new = rows(out / name)
        assert new == [row for row in old if row["id"] not in newly_gone]
        assert len(old) - len(new) == sum(row["id"] in newly_gone for row in old) > len(newly_gone) - 4
    # their texts are purged from the cache as well
    cached = all_bytes(cache)
    assert not any(f"({i})".encode() in cached for i in newly_gone)
    # the draws are made over the id list's subreddits, so Thema05 keeps its place in them
    manifest = layout.verify(out / "reddit-clustering-ids")
    assert "Thema05" in manifest["subreddits"]
    assert manifest["report"]["kept"] == 393 - len(newly_gone)


@pytest.mark.slow
def test_refused_credentials_and_unknown_sites_end_in_one_line(home, reddit):
    ids = id_list(home)
    common = ["build", "--source", "reddit", "--ids", str(ids), "--out", str(home / "out"), "--quiet"]
    bad = rs.run([*common, "--cache", str(home / "c1"), "--praw-site", "tecbbad"], home)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and "tecb-data: error: Reddit refused the credentials of praw site [tecbbad]" in bad.stderr
    reddit.state.faults[:] = ["403"]
    forbidden = rs.run([*common, "--cache", str(home / "c2")], home, praw_site="tecbtest")  # site from $praw_site
    assert forbidden.returncode == 2 and "praw site [tecbtest] (HTTP 403)" in forbidden.stderr
    assert forbidden.stderr.count("\n") == 1
    missing = rs.run([*common, "--cache", str(home / "c3"), "--praw-site", "nosuch"], home)
    assert missing.returncode == 2 and "praw.ini has no site [nosuch]" in missing.stderr
    no_secret = rs.run([*common, "--cache", str(home / "c4"), "--praw-site", "tecbenv"], home)
    assert no_secret.returncode == 2
    assert "praw site [tecbenv] lacks client_secret; set it in the [tecbenv] section of praw.ini or as the " \
           "environment variable praw_client_secret" in no_secret.stderr
    assert not (home / "out").exists()
    assert_no_secrets(bad.stderr, forbidden.stderr, missing.stderr, all_bytes(home / "c1", home / "c2"))
    # praw_* variables complete a site, as praw documents
    from_env = rs.run([*common, "--cache", str(home / "c5"), "--praw-site", "tecbenv"], home,
                      praw_client_secret=rs.CLIENT_SECRET)
    assert from_env.returncode == 0, from_env.stderr
    assert_no_secrets(from_env.stdout, from_env.stderr, all_bytes(home / "out", home / "c5"))
    stats = rs.run(["stats", str(home / "out" / "reddit-clustering-ids")], home)
    assert stats.returncode == 2 and "ids only, no texts" in stats.stderr


def test_persistent_failures_are_bounded_and_the_next_run_resumes(home, reddit):
    state = reddit.state
    state.faults[:] = ["", "524", "524", "524"]  # batch 1 answers, batch 2 fails three times
    kwargs = dict(ids=id_list(home), out=home / "out", cache=home / "cache", praw_site="tecbtest", attempts=3)
    failed = rs.rehydrate(home, **kwargs)
    assert failed.returncode == 2
    assert "Reddit kept failing (HTTP 524) for /api/info request 2 of 5" in failed.stderr and "after 3 tries" in failed.stderr
    assert state.counts["info"] == 4 and not (home / "out").exists()
    state.counts.clear()
    resumed = rs.rehydrate(home, **kwargs)
    assert resumed.returncode == 0, resumed.stderr
    run = json.loads(resumed.stdout)["run"]
    assert run["ids_from_cache"] == 100 and state.counts["info"] == 4 == run["batches"]


@pytest.mark.slow
def test_stalled_answer_times_out_and_is_retried(home, reddit):
    reddit.state.faults[:] = ["stall"]
    # Far apart, so that only the stalled answer can time out, however loaded the machine: a timeout
    # of 2 s (prawcore's own variable) for every other local answer (each is served in milliseconds),
    # a stall of 40 s for that one. The test waits out that timeout once: it is kept short.
    reddit.stall_s = 40
    proc = rs.rehydrate(home, ids=id_list(home), out=home / "out", cache=home / "cache", praw_site="tecbtest",
                        env={"prawcore_timeout": "2"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["run"]["requests"] == 5 + 1


def test_id_list_by_url(home, reddit):
    reddit.files["ids.txt"] = id_list(home).read_bytes()
    proc = rs.run(["build", "--source", "reddit", "--ids", f"{reddit.url}/files/ids.txt", "--out", str(home / "out"),
                   "--cache", str(home / "cache"), "--praw-site", "tecbtest", "--quiet"], home)
    assert proc.returncode == 0, proc.stderr
    manifest = layout.verify(home / "out" / "reddit-clustering-ids")
    assert manifest["inputs"][0]["name"] == "ids.txt" and manifest["report"]["kept"] == 393


@pytest.mark.slow
def test_collect_lists_deduplicates_and_selects_the_language(home, reddit):
    state = reddit.state
    german_a = [b36(90_000_000 + i) for i in range(150)]  # more than one page of 100
    german_b = [b36(91_000_000 + i) for i in range(30)]
    mixed = [b36(92_000_000 + i) for i in range(40)]
    state.add_listing("GermanA", "hot", german_a[:120])
    state.add_listing("GermanA", "top", german_a[100:])  # overlaps hot
    state.add_listing("GermanB", "hot", german_b)
    state.add_listing("GermanB", "top", german_b[:5])
    state.add_listing("Mixed", "hot", mixed)
    state.add_listing("Mixed", "top", [])
    state.english.update(mixed[::2])
    state.gone.update({german_a[3]: "deleted", german_b[0]: "removed"})
    subs = home / "subs.txt"
    subs.write_text("# test subreddits\nGermanA\nr/GermanB\nMixed\n")
    out = home / "ids.txt"
    proc = rs.run(["collect", "--source", "reddit", "--subreddits", str(subs), "--out", str(out), "--praw-site", "tecbtest",
                   "--quiet"], home)
    assert proc.returncode == 0, proc.stderr
    lines = out.read_text().splitlines()
    assert lines[0] == "id,subreddit"
    got = dict(line.split(",") for line in lines[1:])
    expected = {i: "GermanA" for i in german_a if i != german_a[3]}
    expected.update({i: "GermanB" for i in german_b[1:]})
    expected.update({i: "Mixed" for i in mixed[1::2]})
    assert got == expected
    assert "r/Mixed: 40 listed, 0 already gone, mixes languages" in proc.stdout
    assert_no_secrets(proc.stdout, proc.stderr, out.read_bytes())

    subs.write_text("GermanA\nNoSuchSub\n")
    missing = rs.run(["collect", "--source", "reddit", "--subreddits", str(subs), "--out", str(home / "x.txt"),
                      "--praw-site", "tecbtest", "--quiet"], home)
    assert missing.returncode == 2 and "r/NoSuchSub does not exist" in missing.stderr
    assert not (home / "x.txt").exists()


def test_splits_of_a_build_follow_the_recipe(home, reddit):
    out = home / "out"
    assert rs.rehydrate(home, ids=id_list(home), out=out, cache=home / "cache", praw_site="tecbtest", seed=7).returncode == 0
    manifest = layout.verify(out / "reddit-clustering-ids")
    from tecb_data.recipes import Item

    submissions = [json.loads(line) for line in (out / "reddit-clustering-ids" / "data" / "submissions.jsonl").read_text().splitlines()]
    items = [Item(r["id"], {}, {"subreddit": r["subreddit"]}) for r in submissions]
    splits = reddit_splits(items, 7, manifest["subreddits"])
    published = [json.loads(line) for line in (out / "reddit-clustering-ids" / layout.DATA_FILE).read_text().splitlines()]
    assert [{"ids": list(s.ids), "labels": list(s.labels)} for s in splits] == published
    # a folder built with seed 7 is not silently re-split with another seed
    shutil.rmtree(home / "cache")
    other = rs.run(["build", "--source", "reddit", "--ids", str(out / "reddit-clustering-ids"), "--out", str(home / "o2"),
                    "--praw-site", "tecbtest", "--quiet"], home)
    assert other.returncode == 2 and "built with seed 7; pass --seed 7" in other.stderr
