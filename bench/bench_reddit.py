"""Figures of Reddit rehydration, printed (not a timed test).

    .venv/bin/python bench/bench_reddit.py

Runs the real praw against the local Reddit stand-in of tests/redditserver.py (in a separate
process, so its work does not share this interpreter) with the benchmark's real id list:

- requests to /api/info = ceil(n/100) + retries (a 429, a 500 and a dropped connection injected);
- local overhead per 100-id batch (everything but the server's own time: loopback HTTP, praw's
  parsing, deletion checks, the cache transaction), target < 20 ms;
- split building for 40,000 submissions, target < 2 s.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import random
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import redditserver as rs  # noqa: E402
from tecb_data.recipes import Item, reddit_splits  # noqa: E402
from tecb_data.sources import reddit, reddit_ids  # noqa: E402
from tecb_data.sources.reddit_api import RetryPolicy  # noqa: E402
from tecb_data.sources.reddit_cache import RehydrationCache  # noqa: E402
from tecb_data.sources.reddit_text import Fetched  # noqa: E402

REAL_IDS = REPO.parent / "shared" / "data" / "reddit" / "submission_ids.txt"


def _serve(ids: list[str], faults: list[str], port_queue) -> None:
    state = rs.RedditState(ids)
    state.faults[:] = faults
    with rs.RedditServer(state) as server:
        port_queue.put(server.url)
        while True:
            time.sleep(3600)


def _stats(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/stats") as response:
        return json.loads(response.read())


def _rehydrate(home: Path, id_list, cache_name: str, url: str):
    before = _stats(url)
    started = time.perf_counter()
    with RehydrationCache(home / cache_name) as cache:
        result = reddit.rehydrate(id_list, cache, praw_site="tecbtest", retry=RetryPolicy(backoff_s=0.01))
    wall = time.perf_counter() - started
    after = _stats(url)
    counts = {k: v - before["counts"].get(k, 0) for k, v in after["counts"].items()}
    return result, wall, counts, after["info_seconds"] - before["info_seconds"]


def rehydration_figures(home: Path) -> None:
    id_list = reddit_ids.read(REAL_IDS)
    n = len(id_list.ids)
    sample = reddit_ids.IdList(id_list.ids[:10_000], {}, None, id_list.input)
    # the first 100 requests (the fault-free sample run) are answered normally
    faults = [""] * 150 + ["429-bare"] + [""] * 50 + ["500"] + [""] * 50 + ["drop"]
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    server = context.Process(target=_serve, args=(list(id_list.ids), faults, queue), daemon=True)
    server.start()
    try:
        url = queue.get(timeout=60)
        rs.praw_ini(home / ".config", url)  # praw reads it once per process: one server for both runs
        for key in [k for k in os.environ if k.lower().startswith("praw")]:
            del os.environ[key]
        os.environ.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
        clean, clean_wall, _, clean_server = _rehydrate(home, sample, "cache-sample", url)
        full, wall, counts, server_s = _rehydrate(home, id_list, "cache-full", url)
    finally:
        server.terminate()

    batches = clean.run["batches"]
    print(f"fault-free run of 10,000 ids: {clean_wall / batches * 1000:.1f} ms per batch in all, of which the server "
          f"{clean_server / batches * 1000:.1f} ms; local overhead {(clean_wall - clean_server) / batches * 1000:.1f} ms "
          "per 100-id batch (target < 20 ms)")
    run, batches, info = full.run, math.ceil(n / 100), counts["info"]
    print(f"ids: {len(REAL_IDS.read_text().split()) - 1:,} lines, {n:,} unique ids, {batches} batches of up to 100")
    print(f"requests to /api/info: {info} = ceil(n/100) {batches} + retries {info - batches} "
          f"(faults injected: {sum(v for k, v in counts.items() if k.startswith('fault_'))}; "
          f"client counted {run['requests']} = {run['batches']} + {run['retries']})")
    print(f"full run wall time {wall:.1f} s (server {server_s:.1f} s, prawcore's retry sleeps included); "
          f"local overhead {(wall - server_s) / batches * 1000:.1f} ms per batch")


def cache_only(home: Path) -> None:
    """Deletion checks and the cache transaction alone, per 100-id batch."""
    posts = [Fetched(f"x{i}", "de", f"Titel {i}", "Text " * 50, None, False) for i in range(20_000)]
    with RehydrationCache(home / "cache-only") as cache:
        cache.start(refresh=False)
        started = time.perf_counter()
        for start in range(0, len(posts), 100):
            batch = posts[start : start + 100]
            cache.store_batch([p.id for p in batch], batch)
        elapsed = time.perf_counter() - started
    print(f"deletion checks + cache transaction alone: {elapsed / 200 * 1000:.2f} ms per batch")


def split_figures() -> None:
    rng = random.Random(0)
    names = [f"sub{k:02d}" for k in range(80)]
    items = [Item(id=format(10**6 + i * 37, "x"), views={}, labels={"subreddit": rng.choice(names)}) for i in range(40_000)]
    times = []
    for _ in range(3):
        started = time.perf_counter()
        splits = reddit_splits(items, 42, names)
        times.append(time.perf_counter() - started)
    sizes = [len(s.ids) for s in splits]
    print(f"split building for 40,000 submissions: {min(times):.2f} s best of 3 (target < 2 s); "
          f"10 splits of {min(sizes):,} to {max(sizes):,} rows")


def main() -> int:
    if not REAL_IDS.is_file():
        print(f"skipped: {REAL_IDS} is absent (the benchmark needs ../shared beside the repository)")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        rehydration_figures(home)
        cache_only(home)
    split_figures()
    return 0


if __name__ == "__main__":
    sys.exit(main())
