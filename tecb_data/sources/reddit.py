"""Reddit: rehydrating the published submission ids through praw into the benchmark's datasets.

The benchmark publishes ids only (``reddit-clustering-ids``); everyone rehydrates them with their
own API credentials. Rehydration asks ``/api/info`` for 100 ids at a time, keeps the answers in a
local SQLite cache (:mod:`tecb_data.sources.reddit_cache`) so that a killed run resumes, drops every
submission that is gone, deleted, removed or whose author is gone (:mod:`.reddit_text`), and
publishes three folders: ``reddit-clustering-s2s`` and ``-p2p`` with texts (private: never to be
republished) and ``reddit-clustering-ids`` without texts (the publishable one).

Collection, how the id list was made in the first place, is in :mod:`.reddit_collect`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tecb_data.heartbeat import Heartbeat
from tecb_data.progress import Progress

from tecb_data import layout
from tecb_data.contents import prepare, publish_all as publish_together
from tecb_data.errors import UserError
from tecb_data.recipes import DATASETS, Item, Split, reddit_splits
from tecb_data.seeding import DEFAULT_SEED
from tecb_data.sources import reddit_api, reddit_ids
from tecb_data.sources.reddit_api import INFO_BATCH, RetryPolicy
from tecb_data.sources.reddit_cache import KEPT, RehydrationCache
from tecb_data.sources.reddit_text import DROP_REASONS, views

TEXT_DATASETS = ("reddit-clustering-s2s", "reddit-clustering-p2p")
IDS_DATASET = reddit_ids.IDS_DATASET


@dataclass
class Rehydrated:
    items: list[Item]  # kept submissions, in numeric id order
    universe: tuple[str, ...]  # the subreddits the splits draw from
    report: dict  # deterministic counts, for the manifest
    run: dict = field(default_factory=dict)  # what this run did (requests, retries): printed, not published


def _batches(ids: list[str]) -> list[list[str]]:
    return [ids[start : start + INFO_BATCH] for start in range(0, len(ids), INFO_BATCH)]


def rehydrate(
    id_list: reddit_ids.IdList,
    cache: RehydrationCache,
    *,
    praw_site: str | None = None,
    refresh: bool = False,
    retry: RetryPolicy = RetryPolicy(),
    progress: bool = False,
) -> Rehydrated:
    """Fetch the ids the cache does not know yet (all of them with ``refresh``), then read them all from the cache."""
    ids = list(id_list.ids)
    cache.start(refresh)
    due = cache.due(ids)
    session = reddit_api.CountingSession()
    if due:
        reddit = reddit_api.connect(praw_site, session)
        batches = _batches(due)
        with Progress(total=len(ids), initial=len(ids) - len(due), desc="rehydrating Reddit submissions", unit="ids",
                      enabled=progress) as bar, Heartbeat(bar):  # a slow answer still gets a line every 30 s
            for number, batch in enumerate(batches, start=1):
                fetched = reddit_api.with_retries(
                    lambda batch=batch: reddit_api.fetch_batch(reddit, batch),
                    f"/api/info request {number} of {len(batches)} (ids {batch[0]} to {batch[-1]})",
                    site=praw_site,
                    policy=retry,
                    timeout_s=reddit.config.timeout,
                )
                cache.store_batch(batch, fetched)
                bar.update(len(batch))
    cache.finish()

    entries = cache.entries(ids)
    statuses: Counter = Counter()
    items = []
    reported_subreddits = set(id_list.subreddits.values())
    for item_id in ids:
        entry = entries[item_id]
        statuses[entry.status] += 1
        if entry.subreddit:
            reported_subreddits.add(id_list.subreddits.get(item_id, entry.subreddit))
        if entry.status != KEPT:
            continue
        label = id_list.subreddits.get(item_id) or entry.subreddit
        items.append(Item(id=item_id, views=views(entry.title, entry.body), labels={"subreddit": label}, path=(label,)))
    # A list with subreddits fixes the draws; a bare id list draws from what Reddit reported for
    # any of its ids, removed ones included (Reddit still names their subreddit).
    universe = id_list.universe if id_list.universe is not None else tuple(sorted(reported_subreddits))
    report = {
        "ids_in_list": len(ids),
        "duplicate_ids_in_list": id_list.report.get("duplicate_ids", 0),
        "kept": statuses[KEPT],
        **{f"dropped_{reason}": statuses[reason] for reason in DROP_REASONS},
        "subreddits": len(universe),
    }
    run = {
        "ids_fetched": len(due),
        "ids_from_cache": len(ids) - len(due),
        "batches": len(_batches(due)),
        "requests": session.api_requests,  # HTTP requests to /api/info, every retry included
        "retries": session.api_requests - len(_batches(due)),
        "token_requests": session.token_requests,
        "cache": str(cache.path),
    }
    return Rehydrated(items, universe, report, run)


def _id_rows(splits: list[Split]):
    for split in splits:
        yield layout.json_line({"ids": list(split.ids), "labels": list(split.labels)})


def _id_sample_rows(splits: list[Split]):
    for split in splits:
        for item_id, label in zip(split.ids, split.labels):
            yield layout.json_line({"id": item_id, "split": split.name, "label": label})


def _submission_rows(items: list[Item]):
    for item in items:
        yield layout.json_line({"id": item.id, "subreddit": item.labels["subreddit"]})


def publish_all(result: Rehydrated, out: Path, *, seed: int, inputs: list) -> list[tuple[Path, dict]]:
    """The two text datasets and the ids dataset, from the same splits."""
    splits = reddit_splits(result.items, seed, result.universe)
    if not splits:
        raise UserError(
            f"only {len(result.items)} submission(s) of {len(result.universe)} subreddit(s) are left after "
            "rehydration: too few to make a split with two or more subreddits"
        )
    items = {item.id: item for item in result.items}
    extra = {"subreddits": list(result.universe)}
    # Rehydrated from Reddit: never the embedded demo sample.
    prepared = [
        prepare(DATASETS[name], splits, items, seed=seed, inputs=inputs, report=result.report, synthetic=False,
                manifest_extra=extra)
        for name in TEXT_DATASETS
    ]
    id_items = {i: Item(id=i, views={"ids": i}, labels=item.labels, path=item.path) for i, item in items.items()}
    data_files = {
        layout.DATA_FILE: _id_rows(splits),
        layout.SAMPLES_FILE: _id_sample_rows(splits),
        reddit_ids.SUBMISSIONS_FILE: _submission_rows(result.items),
    }
    prepared.append(
        prepare(DATASETS[IDS_DATASET], splits, id_items, seed=seed, inputs=inputs, report=result.report,
                synthetic=False, data_files=data_files, manifest_extra=extra)
    )
    # The three folders come from one rehydration: published together, or none of them.
    return publish_together(Path(out), prepared)


def build_from_ids(
    ids: str | Path,
    out: Path,
    *,
    cache: Path | None = None,
    seed: int = DEFAULT_SEED,
    praw_site: str | None = None,
    refresh: bool = False,
    progress: bool = False,
    retry: RetryPolicy = RetryPolicy(),
    run_info: dict | None = None,
) -> list[tuple[Path, dict]]:
    """Rehydrate ``ids`` (an id list file, its http(s) URL, or a ``reddit-clustering-ids`` folder)
    and write ``reddit-clustering-s2s``, ``-p2p`` and ``-ids`` into ``out``.

    Reddit is asked through praw, configured by the praw.ini site ``praw_site`` (else the
    ``praw_site`` environment variable, else ``DEFAULT``) and ``praw_*`` variables. ``cache`` is the
    folder of the rehydration cache (default ``~/.cache/tecb/reddit``); ``refresh`` re-checks every
    id with Reddit; ``retry`` bounds the retries of failed requests. Returns (folder, manifest) per
    dataset; ``run_info``, when given, receives what this run did (requests, retries, cache use),
    which is not part of the deterministic manifest.

    Args:
        ids (str | Path): An id list file, its http(s) URL, or a ``reddit-clustering-ids`` folder.
        out (Path): Folder that receives the three dataset folders.
        cache (Path | None): Folder of the rehydration cache; None: ``~/.cache/tecb/reddit``.
        seed (int): Seed of the split recipe.
        praw_site (str | None): The praw.ini site to read Reddit's credentials from; None: the
            ``praw_site`` environment variable, else ``DEFAULT``.
        refresh (bool): Ask Reddit about every id again instead of trusting the cache.
        progress (bool): Show a progress bar on a terminal.
        retry (RetryPolicy): How often and how patiently a failed request is retried.
        run_info (dict | None): Filled, when given, with the requests, retries and cache use of this run.

    Returns:
        list[tuple[Path, dict]]: One ``(folder, manifest)`` per dataset written.

    Raises:
        UserError: An unreadable id list (named by line), missing or rejected credentials, Reddit
            unreachable after the retries, or an output that is not ours to write.
    """
    if seed < 0:
        raise UserError(f"--seed must be a non-negative integer, got {seed}")
    layout.check_out(Path(out))
    id_list = reddit_ids.read(ids)
    if id_list.seed is not None and id_list.seed != seed:
        raise UserError(
            f"{ids}: this {IDS_DATASET} folder was built with seed {id_list.seed}; pass --seed {id_list.seed} "
            "to rebuild its splits"
        )
    with RehydrationCache(cache) as store:
        result = rehydrate(id_list, store, praw_site=praw_site, refresh=refresh, retry=retry, progress=progress)
    if run_info is not None:
        run_info.update(result.run)
    return publish_all(result, Path(out), seed=seed, inputs=[id_list.input])
