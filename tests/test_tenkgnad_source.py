"""The One Million Posts Corpus database and the 10kGNAD csv."""

import csv
import html
import re
import sqlite3

import pytest

from helpers import error_line, run_cli, shared_file
from tecb_data.build import build
from tecb_data.errors import UserError
from tecb_data.sources import tenkgnad

ARTICLE = (
    '<div class="section"><h2 itemprop="description">Die Unterzeile &amp; mehr.</h2></div>'
    '<div class="copytext"><p>Erster <b>Absatz</b>.</p><div class="inline"><p>Zweiter Absatz.</p></div>'
    "<p>(APA, 1.6.2016)</p></div><p>Nicht im Text.</p>"
)


def make_corpus(path, rows):
    connection = sqlite3.connect(path)
    connection.execute(
        "CREATE TABLE Articles (ID_Article INTEGER PRIMARY KEY, Path TEXT, publishingDate TIMESTAMP, Title TEXT, Body TEXT)"
    )
    connection.executemany("INSERT INTO Articles VALUES (?, ?, '2016-06-01 10:00:00.00', ?, ?)", rows)
    connection.commit()
    connection.close()
    return path


def test_article_text_takes_subheadline_and_copytext_without_author_line():
    assert tenkgnad.article_text(ARTICLE) == ("Die Unterzeile & mehr.", "Erster Absatz. Zweiter Absatz.")


@pytest.mark.parametrize("byline", ["(APA, 1.6.2016)", "(Maria Huber, 12. 3. 2016)", "(red)", "(sid, APA)"])
def test_author_lines_are_dropped(byline):
    body = f'<div class="copytext"><p>Text.</p><p>{byline}</p></div>'
    assert tenkgnad.article_text(body)[1] == "Text."


def test_a_closing_sentence_in_parentheses_that_is_long_is_kept():
    long = "(" + "Ein langer Satz, der zufällig in Klammern steht und kein Autorenvermerk ist. " * 3 + ")"
    body = f'<div class="copytext"><p>Text.</p><p>{long}</p></div>'
    assert tenkgnad.article_text(body)[1].endswith("ist. )")


@pytest.mark.parametrize(
    "path, category",
    [
        ("Newsroom/Sport/Fussball/Bundesliga", "Sport"),
        ("Newsroom/Wirtschaft", "Wirtschaft"),
        ("Newsroom/User/Blogs", None),
        ("Newsroom/Userinnen/Forum", None),
        ("Diskurs/Kommentare", None),
        ("", None),
    ],
)
def test_category_is_the_element_after_newsroom(path, category):
    assert tenkgnad.category_of(path) == category


def test_sqlite_reader_selects_the_nine_categories(tmp_path):
    corpus = make_corpus(
        tmp_path / "corpus.sqlite3",
        [
            (3, "Newsroom/Sport/Fussball", "Tor!", ARTICLE),
            (1, "Newsroom/User/Blog", "Mein Blog", ARTICLE),
            (2, "Newsroom/Lifestyle/Mode", "Mode", ARTICLE),
            (4, "Newsroom/Kultur", "   ", ARTICLE),
        ],
    )
    result = tenkgnad.read(corpus)
    assert [(i.id, i.labels["category"]) for i in result.items] == [("3", "Sport")]
    assert result.items[0].views == {"s2s": "Tor!", "p2p": "Tor! Die Unterzeile & mehr. Erster Absatz. Zweiter Absatz."}
    assert result.report == {
        "articles_read": 4,
        "selected": 1,
        "skipped_category_Lifestyle": 1,
        "skipped_empty_title_or_body": 1,
        "skipped_not_newsroom_or_user": 1,
    }
    assert result.views == ("s2s", "p2p")


def test_a_database_without_the_articles_table_is_a_clear_error(tmp_path):
    path = tmp_path / "corpus.sqlite3"
    sqlite3.connect(path).execute("CREATE TABLE Posts (ID_Post INTEGER)").connection.close()
    with pytest.raises(UserError, match=r"corpus\.sqlite3: not a One Million Posts Corpus database"):
        tenkgnad.read(path)


def test_foreign_and_missing_inputs(tmp_path):
    (tmp_path / "notes.txt").write_text("hallo")
    with pytest.raises(UserError, match="neither a SQLite database nor a .csv file"):
        tenkgnad.read(tmp_path / "notes.txt")
    with pytest.raises(UserError, match="no such file"):
        tenkgnad.read(tmp_path / "corpus.sqlite3")
    with pytest.raises(UserError, match="no corpus.sqlite3 or 10kGNAD .csv"):
        tenkgnad.read(tmp_path)


def test_csv_builds_p2p_only_and_s2s_is_a_clear_error(tmp_path):
    path = tmp_path / "articles.csv"
    path.write_text("".join(f"{c};'Text {i} über {c}.'\n" for i, c in enumerate(tenkgnad.CATEGORIES * 3)), encoding="utf-8")
    built = build("tenkgnad", path, tmp_path / "out")
    assert [f.name for f, _ in built] == ["tenkgnad-clustering-p2p"]
    with pytest.raises(UserError, match=r"articles\.csv: this input cannot build the S2S view \(it has no titles"):
        build("tenkgnad", path, tmp_path / "out", views=("s2s",))
    result = run_cli("build", "--source", "tenkgnad", "--input", str(path), "--out", str(tmp_path / "o"), "--view", "s2s")
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "cannot build the S2S view" in result.stderr


@pytest.mark.parametrize(
    "content, message",
    [
        ("Sport;'Tor';'extra'\n", r"articles\.csv:1: expected two fields"),
        ("Sport;'Tor'\nMode;'Kleid'\n", r"articles\.csv:2: unknown category 'Mode'"),
        ("", r"articles\.csv: empty 10kGNAD csv"),
    ],
)
def test_bad_csv_rows_are_named_by_line(tmp_path, content, message):
    path = tmp_path / "articles.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UserError, match=message):
        tenkgnad.read(path)


def _ompc_from_10kgnad(csv_path, db_path):
    """A corpus.sqlite3 in the OMPC schema holding the 10kGNAD test articles: the first sentence
    becomes the subheadline, the rest paragraphs of the copytext, closed by an author line."""
    rows, expected = [], {}
    with open(csv_path, encoding="utf-8") as fh:
        records = list(csv.reader(fh, delimiter=";", quotechar="'"))
    for number, (label, text) in enumerate(records):
        text = re.sub(r"\s+", " ", text).strip()
        sentences = re.split(r"(?<=\.) ", text)
        sub, paragraphs = (sentences[0], sentences[1:]) if len(sentences) > 1 else ("", sentences)
        body = (
            f'<h2 itemprop="description">{html.escape(sub)}</h2><div class="copytext">'
            + "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
            + "<p>(APA, 1.6.2016)</p></div>"
        )
        article_id = 1000 + (number * 7919) % 100_003  # not in file order
        title = f"Meldung {number}: {label}"
        rows.append((article_id, f"Newsroom/{label}/Thema{number % 5}", title, body))
        expected[str(article_id)] = (label, f"{title} {text}".strip())
    rows.append((1, "Newsroom/User/Blog", "Leserbrief", "<p>x</p>"))
    make_corpus(db_path, rows)
    return expected


@pytest.mark.slow
def test_integration_corpus_made_from_the_real_10kgnad_test_set(tmp_path):
    expected = _ompc_from_10kgnad(shared_file("10kgnad/test.csv"), tmp_path / "corpus.sqlite3")
    result = tenkgnad.read(tmp_path / "corpus.sqlite3")
    assert len(result.items) == 1028
    assert {i.id: (i.labels["category"], i.views["p2p"]) for i in result.items} == expected
    built = dict((f.name, m) for f, m in build("tenkgnad", tmp_path / "corpus.sqlite3", tmp_path / "out"))
    manifest = built["tenkgnad-clustering-p2p"]
    assert manifest["statistics"]["splits"] == 10 and manifest["statistics"]["unique_labels"] == 9
    assert all(s["size"] >= 103 for s in manifest["splits"])
    s2s = built["tenkgnad-clustering-s2s"]["splits"]
    assert [s["size"] for s in s2s] == [s["size"] for s in manifest["splits"]]
    assert [s["labels"] for s in s2s] != [s["labels"] for s in manifest["splits"]], "each view draws its own members"


def test_a_10kgnad_csv_cut_mid_record_is_rejected_with_its_file_and_line(tmp_path):
    whole = "Sport;'Ein ganzer Artikel.'\nWeb;'Noch einer, mit ''Zitat''.'\nKultur;'Der letzte\nmit zwei Zeilen.'\n"
    (tmp_path / "whole.csv").write_text(whole, encoding="utf-8")
    out = tmp_path / "out"
    # The control: the whole file is read, all three records, multi-line and quoted ones included.
    whole_build = run_cli("build", "--source", "tenkgnad", "--input", str(tmp_path / "whole.csv"), "--out", str(out),
                          "--quiet")
    assert whole_build.returncode == 0, whole_build.stderr
    assert "articles_read 3" in whole_build.stdout and "selected 3" in whole_build.stdout, whole_build.stdout
    cut = tmp_path / "cut.csv"
    cut.write_text(whole[: whole.index("mit zwei")], encoding="utf-8")
    result = run_cli("build", "--source", "tenkgnad", "--input", str(cut), "--out", str(out), "--quiet")
    line = error_line(result.stderr)
    assert result.returncode == 2 and f"{cut}:3:" in line and "truncated" in line, line


def test_a_10kgnad_csv_build_says_that_s2s_was_not_built(tmp_path):
    csv = shared_file("10kgnad/test.csv")
    result = run_cli("build", "--source", "tenkgnad", "--input", str(csv), "--out", str(tmp_path / "out"), "--quiet")
    assert result.returncode == 0, result.stderr
    assert "note: tenkgnad-clustering-s2s was not built" in result.stderr and "S2S" in result.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["tenkgnad-clustering-p2p"]
