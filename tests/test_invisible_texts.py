"""Texts a reader sees nothing of (zero-width spaces, word joiners, BOMs, soft hyphens, bidi
controls, every other format character and Default_Ignorable code point, blanks) are empty texts
in every source, folded as labels are."""

import json
import sys
import unicodedata

import regex

from helpers import book
from tablefiles import NAME, samples, table_build, table_rows, write_tsv
from tecb_data.sources import blurbs, collapse_spaces, reddit_text, tenkgnad

NAMED = "\u200b\u2060\ufeff\u00ad\u202e\u200d"


def _invisible() -> list[str]:
    ignorable = regex.compile(r"\p{Default_Ignorable_Code_Point}")
    return [c for c in map(chr, range(sys.maxunicode + 1))
            if unicodedata.category(c) == "Cf" or ignorable.match(c)]


def test_every_format_and_ignorable_character_alone_is_an_empty_text():
    invisible = _invisible()
    assert set(NAMED) <= set(invisible)
    assert [c for c in invisible if collapse_spaces(f" {c}{c} \u2800{c}")] == []
    assert collapse_spaces("Haus\u200bbau \u00ad") == "Haus\u200bbau \u00ad"  # visible text is kept as written


def test_a_table_counts_invisible_texts_as_removed_empty_text(tmp_path):
    rows = table_rows(200)
    rows += [(c * 3, "Sport") for c in NAMED] + [(f"{rows[0][0]}\u200b", rows[0][1])]
    done = table_build(write_tsv(tmp_path / "t.tsv", rows), tmp_path / "out")
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "out" / f"{NAME}-s2s" / "manifest.json").read_text())["report"]
    assert report["removed_empty_text"] == len(NAMED)
    assert report["removed_exact_duplicate"] == 1  # one zero-width space apart: the same text to a reader
    assert not any(set(row["text"]) <= set(NAMED + " ") for row in samples(tmp_path / "out" / f"{NAME}-s2s"))


def test_the_10kgnad_csv_skips_an_invisible_article(tmp_path):
    path = tmp_path / "articles.csv"
    path.write_text("Sport;'Ein Tor in der letzten Minute.'\nKultur;'\u200b\u2060 \ufeff'\n", encoding="utf-8")
    result = tenkgnad.read(path)
    assert [item.labels["category"] for item in result.items] == ["Sport"]
    assert result.report["skipped_empty_text"] == 1


def test_a_blurbs_title_of_invisible_characters_is_no_title(tmp_path):
    path = tmp_path / "blurbs_dev.txt"
    path.write_text("<root>\n" + book("1", "\u200b\u00ad", [("Literatur & Unterhaltung", "Fantasy")])
                    + book("2", "Mit", [("Literatur & Unterhaltung", "Fantasy")], blurb="\u2060") + "</root>\n",
                    encoding="utf-8")
    books, _, report = blurbs.read_books(path)
    assert [(b.isbn, b.blurb) for b in books] == [("2", "")]
    assert report["malformed_records"][0].endswith("book 1 without <title>")


def test_a_reddit_title_of_invisible_characters_is_an_empty_title():
    post = reddit_text.Fetched(id="abc", subreddit="de", title="\u200b\u202e\u200d", body="Text",
                               removed_by_category=None, author_gone=False)
    assert reddit_text.drop_reason(post) == reddit_text.EMPTY_TITLE
