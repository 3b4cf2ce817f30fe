"""What a Reddit submission contributes: its texts, or the reason it must be dropped.

Works on plain field values (what praw parsed from Reddit's JSON), so the rules can be read and
tested without a network. Nothing here keeps or returns an author's name: only whether the account
is still there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tecb_data.sources import collapse_spaces

# Why an id is dropped, in the order the checks run; the build report counts each.
NOT_RETURNED = "not_returned"  # Reddit did not return the id at all (purged, or never existed)
DELETED = "deleted"  # deleted by its author
REMOVED = "removed"  # removed by moderators, admins or Reddit
AUTHOR_GONE = "author_gone"  # the author's account was deleted or suspended
EMPTY_TITLE = "empty_title"  # nothing left of the title once links and URLs are removed
DROP_REASONS = (NOT_RETURNED, DELETED, REMOVED, AUTHOR_GONE, EMPTY_TITLE)

# What Reddit puts in place of a title or body once a post is gone. Compared with the whole
# (stripped) text, so a post that merely quotes "[removed]" is kept.
_DELETED_MARKERS = ("[deleted]", "[deleted by user]")
_REMOVED_MARKERS = ("[removed]", "[removed by reddit]", "[ removed by reddit ]")
# removed_by_category values that mean the author deleted the post; every other value is a removal.
_DELETED_CATEGORIES = ("deleted", "author")

# [text](url "title") and ![alt](url): keep the text. The url may itself hold one level of parentheses.
_MARKDOWN_LINK = re.compile(r"!?\[([^\]]*)\]\(\s*<?(?:[^()\s]|\([^()\s]*\))*>?(?:\s+\"[^\"]*\")?\s*\)")
# A URL ends before trailing punctuation, so "siehe https://x.de." keeps its full stop.
_URL = re.compile(r"<?\b(?:https?://|www\.)[^\s<>\]]*[^\s<>\].,;:!?)'\"]>?", re.IGNORECASE)


@dataclass(frozen=True)
class Fetched:
    """The fields of one returned submission that decide whether and how it is kept."""

    id: str
    subreddit: str
    title: str
    body: str
    removed_by_category: str | None
    author_gone: bool


def clean(text: str) -> str:
    """Markdown links reduced to their text, URLs removed, whitespace collapsed to single spaces."""
    text = _MARKDOWN_LINK.sub(lambda m: m.group(1), text or "")
    text = _URL.sub(" ", text)
    return collapse_spaces(text)


def views(title: str, body: str) -> dict[str, str]:
    """S2S is the title, P2P the title and the body joined by a space (just the title for link posts)."""
    title, body = clean(title), clean(body)
    return {"s2s": title, "p2p": f"{title} {body}" if body else title}


def _is_marker(text: str, markers: tuple[str, ...]) -> bool:
    return (text or "").strip().lower() in markers


def drop_reason(post: Fetched | None) -> str | None:
    """Why this submission must not be used, or None when it is kept."""
    if post is None:
        return NOT_RETURNED
    category = (post.removed_by_category or "").strip().lower()
    if category in _DELETED_CATEGORIES or _is_marker(post.title, _DELETED_MARKERS) or _is_marker(post.body, _DELETED_MARKERS):
        return DELETED
    if category or _is_marker(post.title, _REMOVED_MARKERS) or _is_marker(post.body, _REMOVED_MARKERS):
        return REMOVED
    if post.author_gone:
        return AUTHOR_GONE
    if not clean(post.title):
        return EMPTY_TITLE
    return None


def from_praw(submission) -> Fetched:
    """The deciding fields of a praw ``Submission`` parsed from a listing or ``/api/info``.

    Reads the parsed attributes directly: ``getattr`` on a field Reddit left out would make praw
    fetch the submission again, one request per post.
    """
    fields = vars(submission)
    author = fields.get("author")
    # praw turns the author "[deleted]" into None; a suspended account keeps its name but Reddit
    # no longer sends the account id (author_fullname).
    author_gone = author is None or not fields.get("author_fullname")
    subreddit = fields.get("subreddit")
    return Fetched(
        id=str(fields["id"]),
        subreddit=str(getattr(subreddit, "display_name", subreddit or "")),
        title=str(fields.get("title") or ""),
        body=str(fields.get("selftext") or ""),
        removed_by_category=fields.get("removed_by_category"),
        author_gone=author_gone,
    )
