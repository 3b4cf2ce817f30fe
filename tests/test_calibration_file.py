"""The calibration file `recommend --calibration` and `report --calibration` read: a regular file,
read with a bound, its content checked; anything else is one line naming it."""

from __future__ import annotations

import json
import os
import threading

import pytest

from helpers import eval_error, tfidf_rows, write_store
from tablefiles import unlabelled_corpus
from tecb_data.errors import UserError
from tecb_eval.reports import calibration


@pytest.fixture(scope="module")
def corpus_store(tmp_path_factory):
    from tecb_eval.cli import main

    root = tmp_path_factory.mktemp("corpus-store")
    store = root / "corpus.jsonl"
    assert main(["run", "--data", str(unlabelled_corpus(root / "corpus")), "--model", "tfidf-lsa", "--config",
                 "minibatch_kmeans:none", "--k", "3,6", "--results", str(store), "--cache-dir", str(root / "c"),
                 "--quiet"]) == 0
    return store


def _packaged() -> dict:
    return calibration.read_calibration()


def _written(tmp_path, document) -> str:
    path = tmp_path / "cal.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document), encoding="utf-8")
    return str(path)


def _wrong_documents():
    good = _packaged()
    row = good["table"][0]
    return {
        "unknown best": dict(good, best="nonsense"),
        "best of a wrong type": dict(good, best=["silhouette"]),
        "a list": [good],
        "no table": {k: v for k, v in good.items() if k != "table"},
        "a table of text": dict(good, table="rows"),
        "a row's number as text": dict(good, table=[dict(row, rho="high")]),
        "a row's criterion unknown": dict(good, table=[dict(row, criterion="vibes")]),
        "a row's count as a float": dict(good, table=[dict(row, cells=2.5)]),
        "datasets of text": dict(good, datasets="all"),
        "a cap this tecb does not know": dict(good, k_cap="median"),
        "nested too deep": "[" * 200_000,
        "not JSON": "{",
        "not UTF-8": b"\xff\xfe{}".decode("latin-1"),
    }


@pytest.mark.parametrize("case", list(_wrong_documents()))
def test_a_wrong_calibration_document_is_one_line_naming_it(case, tmp_path):
    path = tmp_path / "cal.json"
    if case == "not UTF-8":
        path.write_bytes(b"\xff\xfe{}")
    else:
        _written(tmp_path, _wrong_documents()[case])
    with pytest.raises(UserError) as refused:
        calibration.read_calibration(path)
    line = str(refused.value)
    assert "\n" not in line and line.startswith(f"--calibration {path}: ") and "tecb-eval calibrate" in line


def test_recommend_refuses_a_wrong_calibration_in_one_line(corpus_store, tmp_path, capsys):
    path = _written(tmp_path, dict(_packaged(), best="nonsense"))
    line = eval_error(capsys, ["recommend", str(corpus_store), "--calibration", path])
    assert f"--calibration {path}" in line and "'nonsense'" in line


def test_a_fifo_a_device_and_a_folder_are_refused_before_a_byte_is_read(corpus_store, tmp_path, capsys):
    fifo = tmp_path / "cal.fifo"
    os.mkfifo(fifo)

    def unblock():
        # Without the check the read would wait for a writer for ever: one comes after a while, so
        # that the test fails instead of hanging.
        threading.Event().wait(5)
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return  # no reader: the FIFO was refused
        os.write(fd, b"{}")
        os.close(fd)

    threading.Thread(target=unblock, daemon=True).start()
    folder = tmp_path / "calibration"
    folder.mkdir()
    for path, kind in ((fifo, "FIFO"), ("/dev/zero", "character device"), (folder, "folder")):
        for command in (["recommend", str(corpus_store)],
                        ["report", str(corpus_store), "--out", str(tmp_path / "page"), "--no-figures"]):
            line = eval_error(capsys, [*command, "--calibration", str(path)])
            assert f"--calibration {path}: is a {kind}" in line, line
    assert not (tmp_path / "page").exists()


def test_report_refuses_a_wrong_calibration_and_writes_nothing(corpus_store, tmp_path, capsys):
    path = _written(tmp_path, dict(_packaged(), best="nonsense"))
    line = eval_error(capsys, ["report", str(corpus_store), "--out", str(tmp_path / "page"), "--no-figures",
                               "--calibration", path])
    assert f"--calibration {path}" in line and "'nonsense'" in line
    assert not (tmp_path / "page").exists()


def test_a_calibration_calibrate_wrote_is_read_back(tmp_path):
    document = _packaged()
    assert calibration.read_calibration(_written(tmp_path, document)) == document


def test_calibrate_out_over_a_file_it_cannot_read_as_a_calibration_is_one_line(corpus_store, tmp_path, capsys):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000, encoding="utf-8")
    line = eval_error(capsys, ["calibrate", str(corpus_store), "--out", str(deep)])
    assert f"--out {deep}: already exists and was not written by this command" in line
    assert deep.read_text(encoding="utf-8") == "[" * 200_000


def test_the_outputs_of_calibrate_and_report_stay_out_of_a_corpus_dataset_folder(corpus_store, tmp_path, capsys):
    corpus = next(corpus_store.parent.glob("corpus/out/*"))  # the dataset folder the store was run on
    for argv in (["calibrate", str(corpus_store), "--out", str(corpus / "cal.json")],
                 ["report", str(corpus_store), "--out", str(corpus / "page"), "--no-figures"]):
        line = eval_error(capsys, argv)
        assert f"lies inside the dataset folder {corpus}" in line, line
    assert not (corpus / "cal.json").exists() and not (corpus / "page").exists()


# Ranks (8 best) of eight pipelines by three criteria comparable across vector spaces: each single
# criterion and each pair ranks a decoy first, only the rank average of all three ranks "best" first.
ROLES = {"best": (6, 6, 6), "ab": (8, 8, 1), "ac": (7, 1, 8), "bc": (1, 7, 7),
         "e1": (5, 5, 5), "e2": (4, 4, 4), "e3": (3, 3, 3), "e4": (2, 2, 2)}
AMI = {"best": 0.6, "ab": 0.1, "ac": 0.1, "bc": 0.1, "e1": 0.3, "e2": 0.25, "e3": 0.2, "e4": 0.15}
TRIPLE = "rank:size_balance+npmi+topic_diversity"


def test_a_rank_average_of_three_round_trips_through_calibrate_its_file_and_recommend(
        demo_datasets, corpus_store, tmp_path, capsys):
    from tecb_eval.cli import main
    from tecb_eval.clustering.criteria import CRITERIA

    rows = []
    for row in tfidf_rows(demo_datasets / "blurbs-clustering-s2s", tmp_path, 3):
        for role, (a, b, c) in ROLES.items():
            # Silhouette follows AMI exactly: it would win, but it is bound to each pipeline's vector space.
            rows.append({**row, **{name: None for name in CRITERIA}, "model": f"m-{role}", "assignment": None,
                         "ami": AMI[role], "v_measure": AMI[role], "silhouette": AMI[role], "size_balance": a / 10,
                         "npmi": b / 10, "topic_diversity": c / 10})
    store, out = write_store(tmp_path / "lab.jsonl", rows), tmp_path / "cal.json"
    capsys.readouterr()
    assert main(["calibrate", str(store), "--out", str(out), "--resamples", "200"]) == 0
    assert f"best-calibrated criterion: {TRIPLE} " in capsys.readouterr().out
    document = json.loads(out.read_text(encoding="utf-8"))
    assert document["best"] == TRIPLE and "silhouette" not in document["candidates"]
    assert len(document["candidates"]) == 7  # 3 criteria + 3 pairs + 1 triple
    assert calibration.read_calibration(out)["best"] == TRIPLE
    assert main(["recommend", str(corpus_store), "--calibration", str(out), "--format", "json"]) == 0
    found = json.loads(capsys.readouterr().out)["recommendations"][0]
    assert found["criterion"] == TRIPLE and not found["named_by_user"]
    assert found["criterion_name"] == "rank average of size balance, topic coherence (NPMI) and topic diversity"
    four = "rank:npmi+topic_diversity+size_balance+consensus"
    assert main(["recommend", str(corpus_store), "--criterion", four]) == 0
    # A part this tecb does not know: one line naming it, in a --criterion and in a calibration file.
    line = eval_error(capsys, ["recommend", str(corpus_store), "--criterion", "rank:npmi+nonsense+size_balance"])
    assert "--criterion rank:npmi+nonsense+size_balance: 'nonsense' is not a criterion" in line
    bad = _written(tmp_path, dict(document, best="rank:size_balance+npmi+nonsense"))
    line = eval_error(capsys, ["recommend", str(corpus_store), "--calibration", bad])
    assert f"--calibration {bad}: its chosen criterion 'rank:size_balance+npmi+nonsense'" in line
    assert "(nonsense)" in line
