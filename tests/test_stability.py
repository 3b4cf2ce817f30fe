"""Stability: each cell's clustering run again on seeded subsamples of the vectors it clustered and
compared with the cell's own clusters by scikit-learn's ARI and AMI, with a 90 % percentile
interval; by default on a corpus without labels for the pipelines `recommend` lists first, on every
cell with --stability N, on request for labelled data, the same bit for
bit on Dask workers, and shown by `recommend` and the corpus's own report page."""

from __future__ import annotations

import contextlib
import io

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn import metrics
from sklearn.cluster import AgglomerativeClustering, KMeans
from sklearn.datasets import make_blobs

from helpers import eval_error, store_rows
from tablefiles import unlabelled_corpus

import tecb_eval
from tecb_eval.clustering.stability import draws, stability

FIELDS = ("stability_runs", "stability_fraction", "stability_ari", "stability_ari_low", "stability_ari_high",
          "stability_ami", "stability_ami_low", "stability_ami_high", "stability_note")


# What the module's runs printed (the fixture's run, for its summary line).
SAID: dict[str, str] = {}


def referee(predicted, reruns) -> dict:
    """The agreements as scikit-learn scores them, their mean and 5th / 95th percentiles."""
    out = {}
    for name, score in (("ari", metrics.adjusted_rand_score), ("ami", metrics.adjusted_mutual_info_score)):
        values = [score(predicted[rows], found) for rows, found in reruns]
        out.update({f"stability_{name}": np.mean(values), f"stability_{name}_low": np.percentile(values, 5),
                    f"stability_{name}_high": np.percentile(values, 95)})
    return out


def test_agreement_is_scikit_learns_over_seeded_subsamples_without_replacement():
    X, _ = make_blobs(n_samples=150, centers=4, cluster_std=3.0, random_state=0)
    predicted = KMeans(4, n_init=1, random_state=0).fit_predict(X)
    calls = []

    def fit(rows, seed):
        found = KMeans(4, n_init=1, random_state=seed).fit_predict(X[rows])
        calls.append((rows, found, seed))
        return found

    got = stability(predicted, fit, 6, 0.8, 42, "all", "minibatch_kmeans", "k=4")
    assert len(calls) == 6 and len({seed for *_, seed in calls}) == 6
    assert all(len(rows) == 120 == len(set(rows.tolist())) for rows, *_ in calls)
    assert len({tuple(rows.tolist()) for rows, *_ in calls}) == 6
    expected = referee(predicted, [(rows, found) for rows, found, _ in calls])
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, abs=1e-12), name
    assert got["stability_runs"] == 6 and got["stability_fraction"] == 0.8 and got["stability_note"] is None
    assert got["stability_ari_low"] < got["stability_ari_high"]  # the seeds and subsamples do differ
    again = stability(predicted, lambda rows, seed: KMeans(4, n_init=1, random_state=seed).fit_predict(X[rows]),
                      6, 0.8, 42, "all", "minibatch_kmeans", "k=4")
    assert again == got


def newest(store: Path) -> list[dict]:
    """The store's rows, the last of each cell (a rerun appends the row that replaces it)."""
    rows = {}
    for r in store_rows(store):
        rows[(r["model"], r["reduction"], r["algorithm"], r["setting"])] = r
    return list(rows.values())


def test_a_corpus_without_labels_reruns_the_pipelines_recommend_lists_and_matches_the_referee(corpus, tmp_path):
    from tecb_eval.grid.cache import EmbeddingStore
    from tecb_eval.grid.store import rows_frame
    from tecb_eval.reports.unlabelled import stability_pipelines

    store, cache, folder = corpus
    rows = newest(store)
    # By default only the pick and the runner-ups `recommend` lists are rerun, once every cell has run.
    chosen = {p[1:] for p in stability_pipelines(rows_frame(rows))}
    assert 0 < len(chosen) < len(rows)
    # The run's summary counts each cell once and says which ran again for their stability.
    assert f": {len(rows)} cells computed, {len(chosen)} of them run again for their stability;" in SAID["run"]
    for r in rows:
        measured = (r["model"], r["reduction"], r["algorithm"], r["setting"]) in chosen
        assert (r.get("stability_runs"), r.get("stability_fraction")) == ((5, 0.8) if measured else (None, None))
    # The referee: the cell and its reruns clustered by scikit-learn itself on the cached vectors.
    (row,) = [r for r in rows if r["algorithm"] == "agglomerative" and r["setting"] == "k=6"]
    assert row["stability_runs"] == 5
    import tecb_data

    texts = tecb_data.load(folder).splits[0].texts
    X = EmbeddingStore(cache, row["model_identity"]).embeddings().rows(texts)
    predicted = AgglomerativeClustering(6).fit_predict(X)
    reruns = [(rows_, AgglomerativeClustering(6).fit_predict(X[rows_]))
              for rows_, _ in draws(len(texts), 5, 0.8, row["seed"], "all", "agglomerative", "k=6")]
    for name, value in referee(predicted, reruns).items():
        assert row[name] == pytest.approx(value, abs=1e-9), name


def test_stability_n_reruns_every_cell_of_a_corpus_without_labels(corpus, tmp_path):
    from tecb_eval.cli import main

    store, cache, folder = corpus
    results = tmp_path / "every.jsonl"
    results.write_text(store.read_text())
    assert main(["run", "--data", str(folder), *CONFIGS, "--stability", "2", "--results", str(results), "--cache-dir",
                 str(cache), "--quiet"]) == 0
    rows = newest(results)
    assert len(rows) == len(newest(store)) and all(r["stability_runs"] == 2 for r in rows)


def test_labelled_rows_get_stability_on_request_and_keep_their_scores(blurbs_folder, tmp_path):
    from tecb_eval.cli import main

    results = tmp_path / "r.jsonl"
    argv = ["run", "--data", str(blurbs_folder), "--model", "tfidf-lsa", "--config", "minibatch_kmeans:none",
            "--limit-splits", "1", "--results", str(results), "--cache-dir", str(tmp_path / "c"), "--quiet",
            "--label-free"]
    assert main(argv) == 0
    (before,) = [json.loads(line) for line in results.read_text().splitlines()]
    assert not any(name.startswith("stability") for name in before)  # off by default on labelled data
    assert main([*argv, "--stability", "3"]) == 0
    after = [json.loads(line) for line in results.read_text().splitlines()][-1]
    assert after["stability_runs"] == 3 and -1 <= after["stability_ari"] <= 1
    assert after["v_measure"] == before["v_measure"] and after["silhouette"] == before["silhouette"]


@pytest.mark.slow  # a Dask cluster's start and its workers' imports: 10 to 15 s on a loaded 2-core machine
def test_stability_is_the_same_bytes_on_dask_workers(corpus, dask_cluster, tmp_path):
    from tecb_eval.cli import main

    store, cache, folder = corpus
    results = tmp_path / "dask.jsonl"
    # The algorithms without numba (HDBSCAN's import on a fresh worker costs seconds); the store's
    # rows of them were computed in this process.
    assert main(["run", "--data", str(folder), *CONFIGS[:6], "--k", "3,6", "--results", str(results), "--cache-dir",
                 str(cache), "--quiet", "--scheduler", dask_cluster.scheduler_address]) == 0

    def stabilities(path):
        return {(r["algorithm"], r["setting"]): json.dumps([r[f] for f in FIELDS]) for r in newest(path)
                if r["algorithm"] != "hdbscan" and r.get("stability_runs")}

    on_workers = [json.loads(line) for line in results.read_text().splitlines()]
    assert all(r["clustered_on"].startswith("Dask worker") for r in on_workers)
    # Each run reran the pipelines it ranked first (these configurations are a part of the store's).
    here, there = stabilities(store), stabilities(results)
    assert set(here) & set(there) and all(there[cell] == here[cell] for cell in set(here) & set(there))


@pytest.mark.parametrize("extra, says", [
    (("--stability", "-1", "--k", "3"), "--stability -1: give the number of reruns"),
    (("--stability-fraction", "0", "--k", "3"), "--stability-fraction 0.0: give the share"),
    # 120 texts: each rerun clusters 96, too few for 100 clusters.
    (("--stability", "2", "--k", "100"), "each rerun clusters 96 of the 120 texts of split 'all' of corpus-s2s"),
])
def test_bad_stability_options_are_one_line(corpus, tmp_path, capsys, extra, says):
    store, cache, folder = corpus
    results = tmp_path / "r.jsonl"
    argv = ["run", "--data", str(folder), "--model", "tfidf-lsa", "--config", "minibatch_kmeans:none",
            "--results", str(results), "--cache-dir", str(cache), "--quiet", *extra]
    assert says in eval_error(capsys, argv)
    assert not results.exists()


def test_recommend_and_the_corpus_page_show_stability_and_no_v_measure(corpus, tmp_path, capsys):
    from tecb_eval.cli import main

    store, _, _ = corpus
    capsys.readouterr()
    assert main(["recommend", str(store), "--criterion", "stability_ari"]) == 0
    said = capsys.readouterr().out
    assert "ranked by stability (ARI), the criterion you named" in said
    assert "over 5 reruns on 80% subsamples" in said
    # The shipped calibration ran without --stability: ranking by it is untested, and said so.
    assert "calibration: none for stability (ARI)" in said and "its ranking is untested" in said
    # A criterion the shipped calibration found ranking against AMI is said to.
    shipped = json.loads((Path(tecb_eval.__file__).parent / "data" / "calibration.json").read_text(encoding="utf-8"))
    row = next(r for r in shipped["table"] if r["scope"] == "all datasets" and not r["criterion"].startswith("rank:")
               and r["rho_high"] is not None and r["rho_high"] < 0)
    assert main(["recommend", str(store), "--criterion", row["criterion"]]) == 0
    said = capsys.readouterr().out
    assert f"Spearman rho {row['rho']:+.2f} [{row['rho_low']:+.2f}, {row['rho_high']:+.2f}] with AMI" in said
    assert ("  against: the whole interval of rho lies below 0, so on labelled data this criterion ranked pipelines "
            "against AMI") in said
    assert f"(`--criterion {shipped['best']}`)" in said
    assert main(["report", str(store), "--out", str(tmp_path / "site")]) == 0
    index = (tmp_path / "site" / "index.html").read_text()
    assert 'href="corpora/corpus-s2s.html"' in index
    page = (tmp_path / "site" / "corpora" / "corpus-s2s.html").read_text()
    assert "stability (ARI)</th>" in page and "ARI 5th pct</th>" in page and "noise %</th>" in page
    assert "run again 5 times" in page and "Spearman rho with " in page
    assert "V-measure x100</th>" not in page and "v_measure" not in page and "Table 2" not in page
    assert (tmp_path / "site" / "figures" / "corpus-corpus-s2s-k.png").stat().st_size > 10_000
    assert 'src="../figures/corpus-corpus-s2s-k.png"' in page


def test_calibration_measures_stability_where_rows_carry_it():
    from tecb_eval.reports.calibration import calibrate

    rows = [{"mteb_name": "D", "split": f"s{s}", "seed": 42, "model": "m", "reduction": "none", "algorithm": "a",
             "setting": f"k={k}", "labelled": True, "v_measure": 0.1 * k + 0.01 * s, "stability_ari": 0.1 * k,
             "silhouette": -0.1 * k} for s in range(3) for k in range(1, 5)]
    table = calibrate(pd.DataFrame(rows), resamples=50, target="v_measure")
    stab = table[(table.scope == "all datasets") & (table.criterion == "stability_ari")].iloc[0]
    assert stab.rho == pytest.approx(1.0) and stab.regret == pytest.approx(0.0)
    assert "stability_ami" not in set(table.criterion)  # not carried by these rows: not measured


CONFIGS = ("--model", "tfidf-lsa", "--config", "minibatch_kmeans:none", "--config", "agglomerative:none",
           "--config", "hdbscan:pca", "--k", "3,6")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A corpus without labels run once with stability's default: (store, cache, dataset folder)."""
    from tecb_eval.cli import main

    folder = tmp_path_factory.mktemp("stability")
    dataset = unlabelled_corpus(folder)
    results, cache = folder / "r.jsonl", folder / "c"
    said = io.StringIO()
    with contextlib.redirect_stderr(said):
        assert main(["run", "--data", str(dataset), *CONFIGS, "--results", str(results), "--cache-dir", str(cache),
                     "--quiet"]) == 0
    SAID["run"] = said.getvalue()
    return results, cache, dataset
