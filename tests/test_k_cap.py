"""The cap on the label-free pick's clusters: at most those of the partition the grid agrees on
most (highest consensus), in the calibration's figures and in `recommend`."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import adjusted_mutual_info_score

from helpers import eval_error
from tablefiles import unlabelled_corpus
from tecb_eval.clustering import consensus
from tecb_eval.reports import calibration


def test_the_cap_is_the_clusters_of_the_most_agreed_partition_ties_to_the_fewer():
    assert calibration.consensus_clusters([4, 8, 12], [0.2, 0.5, 0.3]) == 8
    assert calibration.consensus_clusters([12, 8, 4], [0.5, 0.2, 0.5]) == 4  # a tie: the fewer clusters
    assert np.isnan(calibration.consensus_clusters([4, 8], [np.nan, np.nan]))
    assert calibration.within_cap([4, 8, 12], [0.2, 0.5, 0.3], "consensus").tolist() == [True, True, False]
    assert calibration.within_cap([4, 8, 12], [0.2, 0.5, 0.3], "none").all()
    assert calibration.within_cap([4, 8, 12], [np.nan] * 3, "consensus").all()  # nothing to cap by


def _hierarchy(texts: int = 240, groups: int = 4) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The true labels (``groups`` groups) and partitions of the same texts from 2 to 16 clusters:
    the groups merged in pairs, the groups themselves, each group halved and quartered."""
    rng = np.random.default_rng(3)
    truth = np.repeat(np.arange(groups), texts // groups)
    within = np.tile(np.arange(texts // groups), groups)
    noisy = truth.copy()
    moved = rng.choice(texts, 12, replace=False)
    noisy[moved] = (noisy[moved] + 1) % groups
    return truth, {"merged": truth // 2, "groups": truth, "noisy": noisy, "halves": truth * 2 + within % 2,
                   "quarters": truth * 4 + within % 4}


def _cell(dataset: str = "D") -> pd.DataFrame:
    """One split's rows: each partition as a pipeline of its own with its AMI against the truth, its
    kept assignment, and an NPMI that grows with the clusters (as NPMI and consensus together do on
    our titles)."""
    truth, partitions = _hierarchy()
    rows = []
    for name, labels in partitions.items():
        k = len(np.unique(labels))
        rows.append({"mteb_name": dataset, "dataset_fingerprint": dataset, "split": "s0", "seed": 42,
                     "model": f"m-{name}", "reduction": "none", "algorithm": "minibatch_kmeans", "setting": f"k={k}",
                     "ami": adjusted_mutual_info_score(truth, labels), "n_clusters_found": k, "n_labels": 4,
                     "npmi": k / 100, "assignment": consensus.encode(labels)})
    return pd.DataFrame(rows)


def test_calibration_measures_the_pick_among_partitions_within_the_cap():
    frame = _cell()
    truth, partitions = _hierarchy()
    labels = list(partitions.values())
    # The referee: each partition's mean AMI with the others by scikit-learn (one pipeline each: equal weights).
    agreement = [np.mean([adjusted_mutual_info_score(a, b) for j, b in enumerate(labels) if j != i])
                 for i, a in enumerate(labels)]
    clusters = [len(np.unique(p)) for p in labels]
    cap = clusters[int(np.argmax(agreement))]
    assert cap == 4 and max(clusters) == 16
    capped = calibration.cell_statistics(frame).set_index("criterion").loc["npmi"]
    free = calibration.cell_statistics(frame, k_cap="none").set_index("criterion").loc["npmi"]
    best = frame.ami.max()
    # Without the cap NPMI picks the 16 quarters; with it, the most clusters it allows: the 4 true groups.
    assert free.k_ratio == 4.0 and free.regret == pytest.approx(100 * (best - frame.ami.iloc[-1]))
    assert capped.k_ratio == 1.0 and capped.regret == pytest.approx(0.0)
    assert capped.rho == pytest.approx(free.rho)  # the ranking's correlation is over every pipeline
    table = calibration.calibrate(frame, resamples=50)
    assert calibration.document(table, frame)["k_cap"] == "consensus"
    assert calibration.document(table, frame.drop(columns="assignment"), k_cap="consensus")["k_cap"] == "none"


@pytest.fixture(scope="module")
def corpus_store(tmp_path_factory):
    from tecb_eval.cli import main

    root = tmp_path_factory.mktemp("capped-corpus")
    store = root / "corpus.jsonl"
    assert main(["run", "--data", str(unlabelled_corpus(root / "corpus")), "--model", "tfidf-lsa", "--config",
                 "minibatch_kmeans:none", "--config", "agglomerative:none", "--k", "2:12:2", "--stability", "0",
                 "--results", str(store), "--cache-dir", str(root / "c"), "--quiet"]) == 0
    return store


def test_recommend_picks_within_the_cap_and_says_which_partition_sets_it(corpus_store, capsys):
    from tecb_eval.cli import main
    from tecb_eval.grid.store import read_setting
    from tecb_eval.reports.versions import read_store

    capsys.readouterr()
    assert main(["recommend", str(corpus_store), "--criterion", "topic_diversity", "--format", "json"]) == 0
    found = json.loads(capsys.readouterr().out)["recommendations"][0]
    rows = consensus.with_consensus(read_store(corpus_store))
    top = rows.assign(c=pd.to_numeric(rows.consensus)).sort_values(["c", "n_clusters_found"],
                                                                    ascending=[False, True]).iloc[0]
    assert found["k_cap"]["clusters"] == top.n_clusters_found
    assert found["k_cap"]["pipeline"]["setting"] == top.setting and found["k_cap"]["rule"] == "consensus"
    allowed = [p for p in found["pipelines"] if not p["above_cap"]]
    assert 0 < len(allowed) < len(found["pipelines"])  # the cap leaves some out here
    assert found["pipelines"][:len(allowed)] == allowed  # the allowed ones first, in the criterion's order
    assert all(read_setting(p["setting"])[1] <= top.n_clusters_found for p in allowed)
    assert all(read_setting(p["setting"])[1] > top.n_clusters_found for p in found["pipelines"][len(allowed):])
    assert main(["recommend", str(corpus_store), "--criterion", "topic_diversity", "--format", "json", "--k-cap",
                 "none"]) == 0
    free = json.loads(capsys.readouterr().out)["recommendations"][0]
    assert free["k_cap"] is None and not any(p["above_cap"] for p in free["pipelines"])
    assert main(["recommend", str(corpus_store), "--criterion", "topic_diversity"]) == 0
    said = capsys.readouterr().out
    assert f"at most {top.n_clusters_found:g} clusters: those of the partition the grid agrees on most" in said


def test_a_store_without_assignments_is_one_line_naming_the_way_out(corpus_store, tmp_path, capsys):
    from tecb_eval.cli import main

    older = tmp_path / "older.jsonl"
    older.write_text("".join(json.dumps({k: v for k, v in json.loads(line).items() if k != "assignment"}) + "\n"
                             for line in corpus_store.read_text(encoding="utf-8").splitlines()), encoding="utf-8")
    line = eval_error(capsys, ["recommend", str(older), "--criterion", "npmi"])
    assert "keep no cluster assignments" in line and "--k-cap none" in line
    assert main(["recommend", str(older), "--criterion", "npmi", "--k-cap", "none"]) == 0
