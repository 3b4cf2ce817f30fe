"""Reading the GermEval 2019 blurbs format and the paper's selection rule."""

import gzip
import zipfile

import pytest

from helpers import book, error_line, run_cli
from tecb_data.errors import UserError
from tecb_data.sources import blurbs

LIT = "Literatur & Unterhaltung"


def write(path, *records, root=True):
    text = "".join(records)
    path.write_text(f"<root>\n{text}</root>\n" if root else text, encoding="utf-8")
    return path


def test_raw_ampersands_and_optional_root(tmp_path):
    write(tmp_path / "blurbs_train.txt", book("1", "Krimi & Co", [(LIT, "Krimi & Thriller")]), root=False)
    write(tmp_path / "blurbs_dev.txt", book("2", "Tom &amp; Jerry", [(LIT, "Fantasy")]), root=True)
    books, inputs, report = blurbs.read_books(tmp_path)
    assert [(b.isbn, b.title) for b in books] == [("1", "Krimi & Co"), ("2", "Tom & Jerry")]
    assert books[0].genre_paths == ((LIT, "Krimi & Thriller"),)
    assert [i.name for i in inputs] == ["blurbs_dev.txt", "blurbs_train.txt"]
    assert report["malformed"] == 0


def test_gzip_zip_and_single_file_inputs_read_the_same_books(tmp_path):
    records = book("1", "Eins", [(LIT, "Fantasy")]) + book("2", "Zwei", [("Ratgeber", "Garten")])
    plain = write(tmp_path / "blurbs_dev.txt", records)
    gz = tmp_path / "gz" / "blurbs_dev.txt.gz"
    gz.parent.mkdir()
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    archive = tmp_path / "release.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(plain, "germeval/blurbs_dev.txt")
        zf.writestr("germeval/hierarchy.txt", "x\ty\n")
    results = [blurbs.read_books(p)[0] for p in (plain, gz, gz.parent, archive)]
    # The same books field for field; only where each was read (its file, in ``location``) differs.
    content = [[(b.isbn, b.title, b.blurb, b.genre_paths) for b in r] for r in results]
    assert content == [content[0]] * 4
    assert [(b.isbn, b.title) for b in results[0]] == [("1", "Eins"), ("2", "Zwei")]
    assert [b.location.split(":")[-1] for r in results for b in r] == [results[0][0].location.split(":")[-1],
                                                                        results[0][1].location.split(":")[-1]] * 4


def test_malformed_record_is_reported_with_file_and_line_and_the_rest_counts(tmp_path):
    broken = '<book date="x">\n<title>Kaputt</title>\n<body>a < b</body>\n<isbn>9</isbn>\n</book>\n'
    path = write(tmp_path / "blurbs_dev.txt", book("1", "Gut", [(LIT, "Fantasy")]), broken)
    books, _, report = blurbs.read_books(path)
    assert [b.isbn for b in books] == ["1"]
    assert report["malformed"] == 1
    # <root> is line 1, the good book lines 2-12, the broken one starts at 13; its "<" is on line 15
    assert report["malformed_records"][0].startswith("blurbs_dev.txt:15: not parseable")


def test_record_without_isbn_is_malformed(tmp_path):
    path = write(tmp_path / "blurbs_dev.txt", '<book>\n<title>Ohne</title>\n</book>\n', book("1", "Mit", [(LIT, "Fantasy")]))
    books, _, report = blurbs.read_books(path)
    assert [b.isbn for b in books] == ["1"]
    assert report["malformed_records"] == ["blurbs_dev.txt:2: book without <isbn>"]


def test_unlabelled_books_are_skipped_and_counted(tmp_path):
    path = write(tmp_path / "blurbs_test.txt", book("1", "Ohne Genre", []), book("2", "Mit", [(LIT, "Fantasy")]))
    books, _, report = blurbs.read_books(path)
    assert [b.isbn for b in books] == ["2"]
    assert report["skipped_unlabelled"] == 1


def test_truncated_file_is_an_error_naming_file_and_line(tmp_path):
    text = "<root>\n" + book("1", "Eins", [(LIT, "Fantasy")]) + '<book date="x">\n<title>Abgeschn'
    (tmp_path / "blurbs_dev.txt").write_text(text, encoding="utf-8")
    with pytest.raises(UserError, match=r"blurbs_dev\.txt:13: file ends inside a <book> record; it is truncated"):
        blurbs.read_books(tmp_path / "blurbs_dev.txt")


def test_truncated_gzip_is_an_error_naming_the_file(tmp_path):
    data = gzip.compress((book("1", "Eins", [(LIT, "Fantasy")]) * 50).encode())
    (tmp_path / "blurbs_dev.txt.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match=r"blurbs_dev\.txt\.gz: damaged gzip file"):
        blurbs.read_books(tmp_path / "blurbs_dev.txt.gz")


@pytest.mark.parametrize(
    "content, message",
    [
        (b"label;text\nSport;'Tor'\n", "no <book> records"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", "not UTF-8 text"),
    ],
)
def test_foreign_file_is_an_error_naming_the_file(tmp_path, content, message):
    (tmp_path / "blurbs_dev.txt").write_bytes(content)
    with pytest.raises(UserError, match=rf"blurbs_dev\.txt: not a GermEval blurbs file \({message}"):
        blurbs.read_books(tmp_path / "blurbs_dev.txt")


def test_missing_path_and_folder_without_blurbs_files(tmp_path):
    with pytest.raises(UserError, match="no such file or directory"):
        blurbs.read_books(tmp_path / "nope")
    with pytest.raises(UserError, match="no blurbs_"):
        blurbs.read_books(tmp_path)


def test_duplicate_isbns_are_kept_once_whatever_the_file_order(tmp_path):
    write(tmp_path / "blurbs_a_train.txt", book("1", "Zweite Fassung", [(LIT, "Fantasy")]))
    write(tmp_path / "blurbs_b_dev.txt", book("1", "Erste Fassung", [(LIT, "Fantasy")]))
    books, _, report = blurbs.read_books(tmp_path)
    assert [b.title for b in books] == ["Erste Fassung"]
    assert report["duplicate_isbns"] == 1


def _books(*specs):
    return [blurbs.Book(isbn, isbn, "", tuple(sorted(paths)), "x:1") for isbn, paths in specs]


def test_selection_rule_one_top_level_at_most_two_second_level():
    books = _books(
        ("a", [(LIT, "Fantasy")]),
        ("b", [(LIT, "Fantasy"), ("Ratgeber", "Garten")]),  # two top-level genres
        ("c", [(LIT, "Fantasy"), (LIT, "Krimi"), (LIT, "Liebe")]),  # three second-level genres
        ("d", [(LIT,)]),  # top-level only
        ("e", [(LIT, "Fantasy", "High Fantasy"), (LIT, "Fantasy", "Epos")]),  # one second-level via two paths
    )
    items, report = blurbs.select(books)
    assert [(i.id, i.labels["top"], i.labels["fine"]) for i in items] == [
        ("a", LIT, "Fantasy"),
        ("d", LIT, None),
        ("e", LIT, "Fantasy"),
    ]
    assert report == {
        "selected": 3,
        "rejected_more_than_two_second_level_genres": 1,
        "rejected_several_top_level_genres": 1,
    }
    assert items[2].path == (f"{LIT} > Fantasy > Epos", f"{LIT} > Fantasy > High Fantasy")


def test_two_second_level_genres_take_the_less_frequent_with_ties_by_name():
    books = _books(
        ("1", [(LIT, "Krimi")]),
        ("2", [(LIT, "Krimi")]),
        ("3", [(LIT, "Fantasy")]),
        ("4", [(LIT, "Krimi"), (LIT, "Fantasy")]),  # Krimi 3x, Fantasy 2x -> Fantasy
        ("5", [(LIT, "Zeitreise"), (LIT, "Abenteuer")]),  # both once -> Abenteuer by name
        # frequency counts books whatever the selection rule later does with them
        ("6", [(LIT, "Fantasy"), ("Ratgeber", "Garten")]),
    )
    labels = {i.id: i.labels["fine"] for i in blurbs.select(books)[0]}
    # Fantasy: books 3, 4, 6 = 3; Krimi: books 1, 2, 4 = 3 -> tie -> "Fantasy" by name
    assert labels["4"] == "Fantasy"
    assert labels["5"] == "Abenteuer"


def test_less_frequent_genre_wins_over_name_order():
    books = _books(
        ("1", [(LIT, "Abenteuer")]),
        ("2", [(LIT, "Abenteuer")]),
        ("3", [(LIT, "Abenteuer"), (LIT, "Zeitreise")]),
    )
    labels = {i.id: i.labels["fine"] for i in blurbs.select(books)[0]}
    assert labels["3"] == "Zeitreise"


def test_views_are_title_and_title_plus_blurb(tmp_path):
    path = write(tmp_path / "blurbs_dev.txt", book("1", "Der Titel", [(LIT, "Fantasy")], blurb="Der Text."))
    item = blurbs.read(path).items[0]
    assert item.views == {"s2s": "Der Titel", "p2p": "Der Titel Der Text."}


def test_only_unlabelled_books_is_an_error(tmp_path):
    path = write(tmp_path / "blurbs_test.txt", book("1", "Ohne", []))
    with pytest.raises(UserError, match="no labelled books"):
        blurbs.read(path)


def test_a_truncated_zip_is_called_a_damaged_zip(tmp_path):
    archive = tmp_path / "germeval.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("blurbs_dev.txt", book("1", "Eins", [("A", "B")]) * 50)
    data = archive.read_bytes()
    for cut_at in (len(data) // 2, len(data) - 10):
        archive.write_bytes(data[:cut_at])
        result = run_cli("build", "--source", "blurbs", "--input", str(archive), "--out", str(tmp_path / "out"))
        line = error_line(result.stderr)
        assert result.returncode == 2 and "damaged or truncated zip" in line and "UTF-8" not in line, line
