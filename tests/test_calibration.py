"""The calibration of label-free criteria against V-measure on labelled data, and `recommend` on a
corpus without labels ranking by the calibrated criterion and saying how far it can be trusted."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from helpers import eval_error
from tablefiles import unlabelled_corpus
from tecb_eval.reports import calibration


def synthetic_rows(good: float) -> pd.DataFrame:
    """Six splits x five pipelines; silhouette follows V-measure, size balance is noise around it."""
    rng = np.random.default_rng(0)
    rows = []
    for split in range(6):
        v = rng.uniform(0.1, 0.6, size=5)
        for p in range(5):
            rows.append({"mteb_name": "D", "split": f"s{split}", "seed": 42, "model": f"m{p}", "reduction": "none",
                         "algorithm": "minibatch_kmeans", "setting": "", "v_measure": v[p],
                         "silhouette": good * v[p] + rng.normal(0, 0.001), "davies_bouldin": 2 - v[p],
                         "size_balance": rng.uniform(), "dataset_fingerprint": "f"})
    return pd.DataFrame(rows)


def test_rho_tau_and_regret_are_measured_per_split_and_averaged():
    frame = synthetic_rows(1.0)
    cells = calibration.cell_statistics(frame, "v_measure")
    one = frame[frame.split == "s0"]
    mine = cells[(cells.split == "s0") & (cells.criterion == "size_balance")].iloc[0]
    assert mine.rho == pytest.approx(stats.spearmanr(one.size_balance, one.v_measure).statistic)
    assert mine.tau == pytest.approx(stats.kendalltau(one.size_balance, one.v_measure).statistic)
    assert mine.regret == pytest.approx(100 * (one.v_measure.max() - one.v_measure[one.size_balance.idxmax()]))
    table = calibration.calibrate(frame, resamples=200, target="v_measure")
    sil = table[(table.scope == calibration.ALL) & (table.criterion == "silhouette")].iloc[0]
    assert sil.rho == pytest.approx(1.0) and sil.regret == pytest.approx(0.0)
    # Davies-Bouldin is lower-better: pointed the other way, it ranks as V-measure does.
    assert table[(table.scope == "D") & (table.criterion == "davies_bouldin")].iloc[0].rho == pytest.approx(1.0)
    # Silhouette and Davies-Bouldin follow V-measure here, but are bound to each pipeline's vector space.
    assert calibration.best_criterion(table) == "size_balance"
    assert calibration.calibrate(frame, resamples=200, target="v_measure").equals(table)  # seeded: the same intervals


def test_the_packaged_calibration_names_its_date_data_and_best_criterion():
    found = calibration.read_calibration()
    assert found["date"] and found["datasets"] and all(d["fingerprint"] for d in found["datasets"])
    assert found["best"] in {row["criterion"] for row in found["table"]}


def test_calibrate_and_recommend_on_a_corpus_without_labels(blurbs_folder, tmp_path, capsys):
    from tecb_eval.cli import main

    labelled, corpus_store = tmp_path / "lab.jsonl", tmp_path / "corpus.jsonl"
    common = ["--model", "tfidf-lsa", "--config", "minibatch_kmeans:none", "--config", "agglomerative:pca",
              "--cache-dir", str(tmp_path / "c"), "--quiet"]
    assert main(["run", "--data", str(blurbs_folder), *common, "--k", "2:10:4", "--limit-splits", "3",
                 "--results", str(labelled), "--label-free"]) == 0
    out = tmp_path / "cal.json"
    capsys.readouterr()
    assert main(["calibrate", str(labelled), "--out", str(out), "--resamples", "200"]) == 0
    printed = capsys.readouterr().out
    assert "Spearman rho" in printed and "best-calibrated criterion" in printed
    document = json.loads(out.read_text())
    assert document["datasets"][0]["mteb_name"] == "BlurbsClusteringS2S"
    corpus = unlabelled_corpus(tmp_path / "corpus")
    assert main(["run", "--data", str(corpus), *common, "--k", "3,6", "--results", str(corpus_store)]) == 0
    capsys.readouterr()
    assert main(["recommend", str(corpus_store), "--calibration", str(out), "--criterion", "silhouette"]) == 0
    said = capsys.readouterr().out
    assert "ranked by silhouette (cosine), the criterion you named" in said
    assert "with k = " in said and "calibration (" in said and "on BlurbsClusteringS2S" in said
    assert "hdbscan_model = " in said and "n_clusters=" in said
    assert "V-measure x100:" not in said and "v_measure_x100" not in said
    # Calibration on a store without labels has nothing to measure: one line.
    assert "nothing to calibrate" in eval_error(capsys, ["calibrate", str(corpus_store)])


def three_datasets() -> pd.DataFrame:
    """Three datasets x four splits x six pipelines: NPMI follows AMI on two of them and is noise on
    the third; size balance is noise everywhere; Calinski-Harabasz, bound to each pipeline's vector
    space, follows AMI everywhere."""
    rng = np.random.default_rng(1)
    rows = []
    for dataset, follows in (("A", True), ("B", True), ("C", False)):
        for split in range(4):
            ami = rng.uniform(0.1, 0.6, size=6)
            for p in range(6):
                rows.append({"mteb_name": dataset, "split": f"s{split}", "seed": 42, "model": f"m{p}",
                             "reduction": "none", "algorithm": "minibatch_kmeans", "setting": f"k={4 + p}",
                             "ami": ami[p], "v_measure": ami[p] + 0.01 * p, "n_clusters_found": 4 + p, "n_labels": 6,
                             "npmi": ami[p] if follows else rng.uniform(), "calinski_harabasz": 1000 * ami[p],
                             "size_balance": rng.uniform(), "dataset_fingerprint": dataset})
    return pd.DataFrame(rows)


def test_leave_one_dataset_out_chooses_on_the_others_and_reports_the_one_left_out():
    frame = three_datasets()
    cells = calibration.cell_statistics(frame)
    # Space-bound criteria are measured alone, never inside a rank average.
    assert {"calinski_harabasz", "npmi", "size_balance", "rank:size_balance+npmi"} == set(cells.criterion)
    held = calibration.held_out(cells).set_index("held_out")
    # Chosen on A and B (where it follows AMI), NPMI is what C is judged by.
    assert held.loc["C", "chosen"] == "npmi" and held.loc["C", "chosen_on"] == "A, B"
    mine = cells[(cells.mteb_name == "C") & (cells.criterion == "npmi")]
    assert held.loc["C", "regret"] == pytest.approx(mine.regret.mean())
    assert held.loc["C", "k_error"] == pytest.approx(mine.k_error.mean())
    assert held.loc["C", "k_ratio"] == pytest.approx(np.exp(np.mean(np.log(mine.k_ratio))))
    one = frame[(frame.mteb_name == "A") & (frame.split == "s0")].reset_index(drop=True)
    first = int(one.npmi.idxmax())
    row = cells[(cells.mteb_name == "A") & (cells.split == "s0") & (cells.criterion == "npmi")].iloc[0]
    assert row.regret == pytest.approx(100 * (one.ami.max() - one.ami[first]))
    assert row.k_error == pytest.approx(abs(one.n_clusters_found[first] - 6) / 6)
    assert row.k_ratio == pytest.approx(one.n_clusters_found[first] / 6)
    table = calibration.calibrate(frame, resamples=200, cells=cells)
    document = calibration.document(table, frame, cells=cells)
    # Calinski-Harabasz follows AMI on every dataset, lowest regret of all, and is shown but never chosen:
    # its scale is each pipeline's own vector space's.
    overall = table[table.scope == calibration.ALL].set_index("criterion")
    assert overall.regret.idxmin() == "calinski_harabasz" and overall.loc["calinski_harabasz", "regret"] == 0
    assert document["target"] == "ami" and document["best"] == "npmi"
    assert "calinski_harabasz" not in set(calibration.held_out(cells).chosen)
    assert document["candidates"] == ["size_balance", "npmi", "rank:size_balance+npmi"]
    assert calibration.trust_of(document, "npmi")["rows"][0]["held_out"] == "A"
    assert "| C | topic coherence (NPMI) |" in calibration.format_held_out(calibration.held_out(cells))


def test_the_candidates_are_the_criteria_comparable_across_vector_spaces_and_every_subset_of_them():
    from tecb_eval.clustering.criteria import ACROSS_SPACES, CRITERIA_BY_NAME

    assert {c.name for c in CRITERIA_BY_NAME.values() if not c.across_spaces} == {
        "silhouette", "calinski_harabasz", "davies_bouldin", "dbcv"}
    frame = pd.DataFrame({name: [0.5] for name in CRITERIA_BY_NAME} | {"stability_ari": [None],
                                                                       "stability_ami": [None]})
    held = [c for c in ACROSS_SPACES if not c.startswith("stability")]
    found = calibration.candidates(frame)
    assert len(found) == 2 ** len(held) - 1 == 31 and found[:len(held)] == held
    assert all(calibration.candidate(c) for c in found)
    assert not calibration.candidate("rank:npmi+silhouette") and not calibration.candidate("rank:npmi")
    assert calibration.measured(frame) == ["silhouette", "calinski_harabasz", "davies_bouldin", "dbcv", *found]


def test_a_calibration_from_one_split_prints_no_nan_and_recommend_and_report_use_it(blurbs_folder, tmp_path, capsys):
    from tecb_eval.cli import main

    labelled, corpus_store, out = tmp_path / "lab.jsonl", tmp_path / "corpus.jsonl", tmp_path / "cal.json"
    common = ["--model", "tfidf-lsa", "--config", "minibatch_kmeans:none", "--cache-dir", str(tmp_path / "c"), "--quiet"]
    run = ["run", "--data", str(blurbs_folder), *common, "--k", "2:10:4", "--limit-splits", "1",
           "--results", str(labelled)]
    assert main(run) == 0
    # A labelled run computes no label-free score by default: calibrate says, in one line, what to run.
    said = eval_error(capsys, ["calibrate", str(labelled), "--out", str(out)])
    assert f"{labelled}: nothing to calibrate" in said and "run the grid again with --label-free" in said, said
    assert not out.exists()
    assert main([*run, "--label-free", "--no-topics"]) == 0
    capsys.readouterr()
    assert main(["calibrate", str(labelled), "--out", str(out), "--resamples", "200"]) == 0
    printed = capsys.readouterr().out
    assert "nan" not in printed.lower() and "one split: no interval" in printed
    # What calibration needs and the run left out is said, with the option that gives it.
    assert "not calibrated: the labelled run had no topic words; run it again with --label-free" in printed
    assert "NaN" not in out.read_text()
    corpus = unlabelled_corpus(tmp_path / "corpus")
    assert main(["run", "--data", str(corpus), *common, "--k", "3,6", "--results", str(corpus_store)]) == 0
    capsys.readouterr()
    assert main(["recommend", str(corpus_store), "--calibration", str(out), "--criterion", "size_balance"]) == 0
    said = capsys.readouterr().out
    assert "one split: no interval" in said and "nan" not in said.lower()
    assert "the spectrum suggests about" in said and "cluster 0 (" in said
    assert main(["recommend", str(corpus_store), "--calibration", str(out), "--format", "json",
                 "--criterion", "rank:size_balance+consensus"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["labelled"] is False and found["recommendations"][0]["criterion"] == "rank:size_balance+consensus"
    assert main(["report", str(corpus_store), "--out", str(tmp_path / "site"), "--calibration", str(out)]) == 0
    assert "one split: no interval" in (tmp_path / "site" / "corpora" / "corpus-s2s.html").read_text()


def test_recommend_on_a_labelled_store_of_k_ranges_names_the_pick_with_its_k(tmp_path, capsys):
    from tablefiles import table_build, table_rows, write_tsv
    from tecb_eval.cli import main

    assert table_build(write_tsv(tmp_path / "t.tsv", table_rows(120)), tmp_path / "out").returncode == 0
    store = tmp_path / "r.jsonl"
    assert main(["run", "--data", str(tmp_path / "out" / "news-s2s"), "--model", "tfidf-lsa", "--config",
                 "minibatch_kmeans:none", "--k", "2,4,8", "--limit-splits", "2", "--results", str(store),
                 "--cache-dir", str(tmp_path / "c"), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["recommend", str(store)]) == 0
    said = capsys.readouterr().out
    assert "ranked by AMI" in said and "minibatch_kmeans with k = " in said and "the labels number 4" in said
    assert main(["recommend", str(store), "--format", "json"]) == 0
    found = json.loads(capsys.readouterr().out)["recommendations"][0]
    assert found["setting"].startswith("k=") and found["labels"] == [4]


def test_recommend_names_the_pipelines_its_criterion_cannot_tell_apart_as_a_group(tmp_path, capsys):
    from tecb_eval.cli import main
    from tecb_eval.reports import unlabelled

    corpus, store = unlabelled_corpus(tmp_path / "corpus"), tmp_path / "r.jsonl"
    assert main(["run", "--data", str(corpus), "--model", "tfidf-lsa", "--config", "minibatch_kmeans:none", "--k",
                 "3,4,5,6", "--seeds", "1,2,3", "--stability", "0", "--results", str(store), "--cache-dir",
                 str(tmp_path / "c"), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["recommend", str(store), "--criterion", "silhouette"]) == 0
    said = capsys.readouterr().out
    assert "cannot be told apart from the pick (within two standard errors over 3 splits and seeds): " in said
    assert "treat them as one group" in said
    # The spread is the criterion's own: a pipeline more than two standard errors behind is not in the group.
    ranked = pd.DataFrame({"model": ["a", "b", "c"], "reduction": "none", "algorithm": "x", "setting": "",
                           "score": [1.0, 0.99, 0.5], "pointed": [1.0, 0.99, 0.5], "sd": [0.02, 0.02, 0.02],
                           "n": [4, 4, 4], "splits": 1})
    assert [m["model"] for m in unlabelled.indistinguishable(ranked)["members"]] == ["b"]
