"""Integration on the real GermEval 2019 files in ../shared/data/germeval2019/."""

import zipfile

import pytest

from helpers import shared_file
from tecb_data import layout
from tecb_data.build import build
from tecb_data.sources import blurbs

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dev_build(germeval_dev_datasets):
    return {name: manifest for name, (_, manifest) in germeval_dev_datasets.items()}


def test_dev_set_reads_all_2079_books_and_applies_the_selection_rule():
    books, inputs, report = blurbs.read_books(shared_file("germeval2019/blurbs_dev.txt.gz"))
    assert len(books) == 2079 and report["malformed"] == 0 and report["duplicate_isbns"] == 0
    items, selection = blurbs.select(books)
    assert selection == {
        "selected": 1849,
        "rejected_more_than_two_second_level_genres": 89,
        "rejected_several_top_level_genres": 141,
    }
    tops = {it.labels["top"] for it in items}
    assert len(tops) == 8 and "Literatur & Unterhaltung" in tops
    assert any("&" in b.title for b in books), "raw ampersands survive parsing"


def test_dev_set_build_has_28_splits_of_the_same_sizes_in_both_views_with_their_own_members(dev_build):
    s2s, p2p = dev_build["blurbs-clustering-s2s"], dev_build["blurbs-clustering-p2p"]
    assert s2s["statistics"]["splits"] == 28
    assert [(s["name"], s["size"]) for s in s2s["splits"]] == [(s["name"], s["size"]) for s in p2p["splits"]]
    sampled = [(a["labels"], b["labels"]) for a, b in zip(s2s["splits"], p2p["splits"]) if not a["name"].startswith("within-")]
    assert sum(a != b for a, b in sampled) >= 15, "each view draws its own members, as the published datasets"
    assert s2s["statistics"]["avg_chars_unique_texts"] != s2s["statistics"]["avg_chars_all_rows"]
    names = [s["name"] for s in s2s["splits"]]
    assert sum(n.startswith("within-") for n in names) == 8
    coarse = [s for s in s2s["splits"] if s["name"].startswith("coarse")]
    assert all(185 <= s["size"] <= 1849 for s in coarse)
    # the dev set's two rarest top-level genres have 17 books each: a small coarse sample can miss one
    assert all(len(s["labels"]) in (7, 8) for s in coarse) and max(len(s["labels"]) for s in coarse) == 8
    assert s2s["statistics"]["unique_labels"] == p2p["statistics"]["unique_labels"]
    assert s2s["inputs"][0]["name"] == "blurbs_dev.txt.gz"


def test_release_zip_with_the_unlabelled_test_file_gives_the_same_datasets(dev_build, tmp_path):
    archive = tmp_path / "GermEval2019T1.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(shared_file("germeval2019/blurbs_dev.txt.gz"), "blurbs/blurbs_dev.txt.gz")
        zf.write(shared_file("germeval2019/blurbs_test_nolabel.txt.gz"), "blurbs/blurbs_test_nolabel.txt.gz")
        zf.write(shared_file("germeval2019/hierarchy.txt"), "blurbs/hierarchy.txt")
    built = dict((f.name, m) for f, m in build("blurbs", archive, tmp_path / "out"))
    for name, manifest in built.items():
        assert manifest["fingerprint"] == dev_build[name]["fingerprint"]
        assert manifest["report"]["skipped_unlabelled"] == 4157
        layout.verify(tmp_path / "out" / name)
