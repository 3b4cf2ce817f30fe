"""Every output block the manual shows as a command's output still has the lines that command
prints today: the block's shape (its lines' labels, in order; tests/docoutputs.py) is the shape of
the command's output on data of the same kind. A block is an example of its date and commit (the
page says which); when the command's lines change, regenerate the block with the command the page
shows, and this test passes again."""

from __future__ import annotations

import pytest

from docoutputs import output_blocks, shape

# Lines `recommend` prints only for some data: where the leaderboard's first model differs from the
# pick, where a calibration is weak or the pick barely beats chance.
RECOMMEND_SOME_DATA = frozenset({"leaderboard", "warning", "note"})
# Each marked block: how the test prints today's output of the same command on data of its kind.
CHECKED = {"recommend-demo", "recommend-unlabelled"}


def test_every_marked_output_block_is_checked_here():
    assert set(output_blocks()) == CHECKED


@pytest.fixture(scope="module")
def labelled_store(demo_datasets, tmp_path_factory):
    from reportstore import two_model_store

    return two_model_store(demo_datasets, tmp_path_factory.mktemp("docs-outputs"))


def _recommend(capsys, *argv: str) -> str:
    from tecb_eval.cli import main

    capsys.readouterr()
    assert main(["recommend", *argv]) == 0
    return capsys.readouterr().out


def test_the_recommend_block_of_the_results_page_has_todays_lines(labelled_store, capsys):
    page, block = output_blocks()["recommend-demo"]
    today = _recommend(capsys, str(labelled_store), "--data", "BlurbsClusteringS2S")
    assert (shape(block, stop_at="BERTopic", leave_out=RECOMMEND_SOME_DATA)
            == shape(today, stop_at="BERTopic", leave_out=RECOMMEND_SOME_DATA)), (page, today)


@pytest.mark.slow
def test_the_recommend_block_of_the_unlabelled_page_has_todays_lines(tmp_path, capsys):
    from tablefiles import unlabelled_corpus
    from tecb_eval.cli import main

    page, block = output_blocks()["recommend-unlabelled"]
    corpus = unlabelled_corpus(tmp_path)
    store = tmp_path / "r.jsonl"
    assert main(["run", "--data", str(corpus), "--model", "tfidf-lsa", "--config", "minibatch_kmeans:none",
                 "--config", "hdbscan:none", "--k", "5:15:5", "--min-cluster-size", "5,10", "--results", str(store),
                 "--cache-dir", str(tmp_path / "cache"), "--quiet"]) == 0
    today = _recommend(capsys, str(store))
    # The page leaves out the BERTopic configuration after the runner-ups.
    assert (shape(block, leave_out=RECOMMEND_SOME_DATA)
            == shape(today, stop_at="runner-up", leave_out=RECOMMEND_SOME_DATA)[:len(shape(block))]), (page, today)
