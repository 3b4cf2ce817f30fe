"""Collection: how the benchmark's id list is made from the hot and top listings of subreddits.

Each subreddit's listings are read through praw (``hot``, and ``top`` of all time), merged by id,
and cleared of submissions that are already deleted or removed. Then the language: langdetect
(seeded, so the same text always gets the same answer) estimates the probability that each
submission's title and body are in the target language. A subreddit where at least
``MONOLINGUAL_SHARE`` (90 %) of the submissions are detected in the target language is taken as
monolingual and kept whole, because langdetect misjudges short titles ("Moin!") and dropping them
would bias the data towards long posts. In a subreddit below that share, which mixes languages, only
submissions with a target-language probability of at least ``MIN_PROBABILITY`` (0.5) are kept.
The language is a parameter, so the same tool builds the benchmark for another language.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tecb_data.progress import progress as progress_over

from tecb_data import inputs
from tecb_data.errors import UserError
from tecb_data.sources import reddit_api, reddit_ids
from tecb_data.sources.reddit_api import RetryPolicy
from tecb_data.sources.reddit_text import Fetched, drop_reason, views

LISTINGS = ("hot", "top")
MONOLINGUAL_SHARE = 0.9
MIN_PROBABILITY = 0.5
LANGDETECT_SEED = 0


@dataclass(frozen=True)
class SubredditReport:
    name: str
    listed: int  # distinct submissions over all listings
    gone: int  # already deleted or removed
    in_language: int  # detected in the target language
    mixed: bool  # below MONOLINGUAL_SHARE: only target-language submissions kept
    kept: int


def read_subreddits(path: Path) -> list[str]:
    """One subreddit per line (``r/`` prefix optional); blank lines and ``#`` comments are skipped."""
    path = Path(path)
    try:
        text = inputs.read_text(path, what=str(path))
    except FileNotFoundError:
        raise UserError(f"{path}: no such file; pass a file with one subreddit name per line") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read it ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text (byte {exc.start}); expected one subreddit name per line") from None
    names: list[str] = []
    first_line: dict[str, int] = {}  # lower-cased name -> line: Reddit's names ignore case
    for number, line in enumerate(text.splitlines(), start=1):
        name = line.split("#", 1)[0].strip().removeprefix("/").removeprefix("r/")
        if not name:
            continue
        if not reddit_ids.valid_subreddit(name):
            raise UserError(f"{path}:{number}: {name[:40]!r} is not a subreddit name (letters, digits, underscores)")
        if name.lower() in first_line:
            raise UserError(f"{path}:{number}: r/{name} is listed twice (first at line {first_line[name.lower()]})")
        first_line[name.lower()] = number
        names.append(name)
    if not names:
        raise UserError(f"{path}: no subreddit names in this file")
    return names


def language_probability(text: str, language: str) -> float:
    """langdetect's probability that ``text`` is in ``language`` (0 when it finds no letters)."""
    from langdetect import DetectorFactory, detect_langs
    from langdetect.lang_detect_exception import LangDetectException

    # langdetect samples at random; with a fixed seed each text gets the same answer in any run
    # and in any order.
    DetectorFactory.seed = LANGDETECT_SEED
    try:
        return next((guess.prob for guess in detect_langs(text) if guess.lang == language), 0.0)
    except LangDetectException:
        return 0.0


def check_language(language: str) -> None:
    from langdetect.detector_factory import PROFILES_DIRECTORY

    known = sorted(os.listdir(PROFILES_DIRECTORY))  # one language profile per file
    if language not in known:
        raise UserError(f"--language {language!r}: langdetect knows no such language; choose one of {', '.join(known)}")


def select_language(posts: list[Fetched], language: str) -> tuple[list[Fetched], int, bool]:
    """(kept posts, posts detected in ``language``, whether the subreddit mixes languages)."""
    probabilities = [language_probability(views(p.title, p.body)["p2p"], language) for p in posts]
    in_language = sum(p >= MIN_PROBABILITY for p in probabilities)
    mixed = bool(posts) and in_language < MONOLINGUAL_SHARE * len(posts)
    kept = [p for p, prob in zip(posts, probabilities) if prob >= MIN_PROBABILITY] if mixed else list(posts)
    return kept, in_language, mixed


def collect(
    subreddits_file: Path,
    out: Path,
    *,
    listings: tuple[str, ...] = LISTINGS,
    language: str = "de",
    praw_site: str | None = None,
    limit: int | None = None,
    retry: RetryPolicy = RetryPolicy(),
    progress: bool = False,
) -> list[SubredditReport]:
    """List, de-duplicate and language-filter the submissions of each subreddit; write ``out``."""
    unknown = [name for name in listings if name not in LISTINGS]
    if unknown or not listings:
        raise UserError(f"--listings: unknown listing {','.join(unknown) or '(none)'}; choose from {','.join(LISTINGS)}")
    check_language(language)
    names = read_subreddits(subreddits_file)
    # Before the first request: the id list never replaces the subreddit list, a file inside a
    # dataset folder, or a file that is not an id list an earlier collection wrote.
    from tecb_data.outputs import check_output_file

    check_output_file(out, option="--out", inputs=[subreddits_file], ours=_is_id_list)
    reddit = reddit_api.connect(praw_site)
    posts: dict[str, Fetched] = {}
    listed: dict[str, set[str]] = {}
    for name in progress_over(names, desc="listing subreddits", unit="subreddits", enabled=progress):
        for listing in listings:
            found = reddit_api.with_retries(
                lambda name=name, listing=listing: reddit_api.fetch_listing(reddit, name, listing, limit),
                f"{listing} listing of r/{name}",
                not_found=f"{subreddits_file}: r/{name} does not exist (or is banned); remove it from the list",
                refused=f"{subreddits_file}: r/{name} is private or quarantined; remove it from the list",
                site=praw_site,
                policy=retry,
                timeout_s=reddit.config.timeout,
            )
            for post in found:
                posts[post.id] = post
                listed.setdefault(name.lower(), set()).add(post.id)
    reports, rows = [], []
    for name in names:
        ids = sorted(listed.get(name.lower(), ()), key=reddit_ids.id_key)
        alive = [posts[i] for i in ids if drop_reason(posts[i]) is None]
        kept, in_language, mixed = select_language(alive, language)
        # The label is the subreddit as Reddit spells it, which may differ in case from the file.
        rows += [(p.id, p.subreddit or name) for p in kept]
        reports.append(SubredditReport(name, len(ids), len(ids) - len(alive), in_language, mixed, len(kept)))
    if not rows:
        raise UserError(f"{subreddits_file}: no submissions left to write (see the per-subreddit counts)")
    reddit_ids.write(out, sorted(set(rows)))
    return reports


def _is_id_list(path: Path) -> bool:
    """Whether ``path`` starts as the id lists ``collect`` writes start (header ``id,subreddit``)."""
    try:
        with inputs.open_regular(path, what=str(path)) as fh:
            return fh.readline(64).decode("utf-8").strip().lower() == "id,subreddit"
    except (OSError, UnicodeDecodeError, UserError):
        return False


def summary(reports: list[SubredditReport]) -> Counter:
    total: Counter = Counter()
    for report in reports:
        total.update({"listed": report.listed, "gone": report.gone, "kept": report.kept, "mixed": int(report.mixed)})
    return total
