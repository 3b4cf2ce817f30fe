"""One Million Posts Corpus (``corpus.sqlite3``) and the 10kGNAD ``articles.csv`` made from it.

The category of an article is the path element after ``Newsroom/``; the benchmark keeps the nine
categories of 10kGNAD. P2P text is title, subheadline and article body taken from the HTML, without
the trailing author line ("(APA, 1.6.2016)") that 10kGNAD strips too.
"""

from __future__ import annotations

import csv
import hashlib
import re
import sqlite3
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

from tecb_data import inputs
from tecb_data.errors import UserError
from tecb_data.recipes import Item
from tecb_data.sources import InputFile, SourceResult, collapse_spaces, csv_reader

CATEGORIES = ("Etat", "Inland", "International", "Kultur", "Panorama", "Sport", "Web", "Wirtschaft", "Wissenschaft")
SQLITE_MAGIC = b"SQLite format 3\x00"
# The closing byline of a DER STANDARD article: a parenthesised author/agency and date.
_AUTHOR_LINE = re.compile(r"^\(.{1,200}\d{1,2}\.\s?\d{1,2}\.\s?\d{2,4}\)$|^\([^()]{1,80}\)$")


class _ArticleHTML(HTMLParser):
    """Collects the subheadline (<h2 itemprop="description">) and the paragraphs of the copytext."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.subheadline: list[str] = []
        self.paragraphs: list[list[str]] = []
        self._in_h2 = False
        self._in_p = False
        self._div_depth = 0  # depth inside <div class="copytext">, 0 outside

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "h2" and attrs.get("itemprop") == "description":
            self._in_h2 = True
        elif tag == "div":
            if self._div_depth or "copytext" in (attrs.get("class") or "").split():
                self._div_depth += 1
        elif tag == "p" and self._div_depth:
            self._in_p = True
            self.paragraphs.append([])

    def handle_endtag(self, tag):
        if tag == "h2":
            self._in_h2 = False
        elif tag == "div" and self._div_depth:
            self._div_depth -= 1
        elif tag == "p":
            self._in_p = False

    def handle_data(self, data):
        if self._in_h2:
            self.subheadline.append(data)
        elif self._in_p and self.paragraphs:
            self.paragraphs[-1].append(data)


def article_text(html: str) -> tuple[str, str]:
    """(subheadline, body) of an article's HTML, without the trailing author line."""
    parser = _ArticleHTML()
    parser.feed(html or "")
    parser.close()
    paragraphs = [p for p in (collapse_spaces("".join(parts)) for parts in parser.paragraphs) if p]
    if paragraphs and _AUTHOR_LINE.match(paragraphs[-1]):
        paragraphs.pop()
    return collapse_spaces("".join(parser.subheadline)), " ".join(paragraphs)


def category_of(path: str) -> str | None:
    parts = (path or "").split("/")
    if len(parts) < 2 or parts[0] != "Newsroom" or parts[1].startswith("User"):
        return None
    return parts[1]


def _read_sqlite(path: Path) -> tuple[list[Item], dict]:
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = connection.execute(
                "SELECT ID_Article, Path, Title, Body FROM Articles ORDER BY ID_Article"
            ).fetchall()
        finally:
            connection.close()
    except sqlite3.DatabaseError as exc:
        raise UserError(
            f"{path}: not a One Million Posts Corpus database ({exc}); expected table Articles "
            "with ID_Article, Path, Title, Body"
        ) from None
    items, skipped = [], Counter()
    for article_id, article_path, title, body in rows:
        category = category_of(article_path)
        if category is None:
            skipped["not_newsroom_or_user"] += 1
            continue
        if category not in CATEGORIES:
            skipped[f"category_{category}"] += 1
            continue
        title = collapse_spaces(title or "")
        subheadline, text = article_text(body)
        if not title or not text:
            skipped["empty_title_or_body"] += 1
            continue
        p2p = " ".join(part for part in (title, subheadline, text) if part)
        items.append(
            Item(
                id=str(article_id),
                views={"s2s": title, "p2p": p2p},
                labels={"category": category},
                path=(article_path,),
            )
        )
    report = {"articles_read": len(rows), "selected": len(items)}
    report.update({f"skipped_{k}": v for k, v in sorted(skipped.items())})
    return items, report


def _read_csv(path: Path) -> tuple[list[Item], dict]:
    """10kGNAD's ``label;'text'`` files: no titles and no article ids, so an article's id is a hash of
    its text (input order must not matter, and removing one article must not renumber the others)."""
    raw = inputs.read_bytes(path, what=str(path), limit=None)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not a 10kGNAD csv file (not UTF-8 text at byte {exc.start})") from None
    rows: dict[str, tuple[str, str]] = {}
    duplicates = empty = 0
    # strict: a quote that is never closed (a file cut mid-record) is an error, not a shorter last article
    reader = csv_reader(text, delimiter=";", quotechar="'", strict=True)
    while True:
        number = reader.line_num + 1  # the line the next record starts on
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            if "unexpected end of data" in str(exc):
                raise UserError(
                    f"{path}:{number}: the file ends inside this record's quoted text; it is truncated: "
                    "download or copy it again"
                ) from None
            raise UserError(f"{path}:{reader.line_num}: not a 10kGNAD csv record ({exc}); expected label;'text'") from None
        if not row:
            continue
        if len(row) != 2:
            raise UserError(f"{path}:{number}: expected two fields label;'text', found {len(row)}; is this a 10kGNAD csv?")
        label, body = row[0].strip(), collapse_spaces(row[1])
        if label not in CATEGORIES:
            raise UserError(f"{path}:{number}: unknown category {label!r}; expected one of {', '.join(CATEGORIES)}")
        if not body:
            empty += 1
            continue
        article_id = hashlib.blake2b(body.encode("utf-8"), digest_size=8).hexdigest()
        if article_id in rows:
            duplicates += 1
            # keep one deterministic label should a text appear twice with different labels
            label = min(label, rows[article_id][0])
        rows[article_id] = (label, body)
    if not rows:
        raise UserError(f"{path}: empty 10kGNAD csv file")
    items = [
        Item(id=article_id, views={"p2p": body}, labels={"category": label}, path=(label,))
        for article_id, (label, body) in rows.items()
    ]
    # Counted only when it happens, as the database's skipped articles are.
    return items, {"articles_read": len(items) + duplicates + empty, "duplicate_texts": duplicates,
                   **({"skipped_empty_text": empty} if empty else {}), "selected": len(items)}


def read(path: Path, progress=None) -> SourceResult:
    path = Path(path)
    if path.is_dir():
        candidates = [path / "corpus.sqlite3", *sorted(path.glob("*.csv"))]
        found = [p for p in candidates if p.is_file()]
        if not found:
            raise UserError(f"{path}: no corpus.sqlite3 or 10kGNAD .csv file in this folder")
        path = found[0]
    if not path.exists():
        raise UserError(f"{path}: no such file; pass corpus.sqlite3 of the One Million Posts Corpus or a 10kGNAD csv")
    with inputs.open_regular(path, what=str(path)) as fh:
        head = fh.read(len(SQLITE_MAGIC))
    if head == SQLITE_MAGIC:
        items, report = _read_sqlite(path)
        views = ("s2s", "p2p")
    elif path.suffix == ".csv":
        items, report = _read_csv(path)
        views = ("p2p",)
    else:
        raise UserError(f"{path}: neither a SQLite database nor a .csv file; pass corpus.sqlite3 or articles.csv")
    if progress is not None:
        progress.update(len(items))
    if not items:
        raise UserError(f"{path}: no articles of the categories {', '.join(CATEGORIES)} found")
    return SourceResult(items=sorted(items, key=lambda it: it.id), inputs=[InputFile.of(path)], views=views, report=report)
