"""The grid on the embedded demo datasets: one encoding per unique text, V-measures equal to a
direct scikit-learn computation, resuming after a hard kill, the DBSTREAM adapter, the fast
protocol against MTEB v2's procedure, and the results store."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
from sklearn.cluster import AgglomerativeClustering, MiniBatchKMeans
from sklearn.metrics import v_measure_score

import tecb_data
from helpers import CountingEncoder as Counting
from tecb_data.errors import UserError
from tecb_eval.clustering.algorithms import PAPER_CONFIGURATIONS, DBSTREAMClusterer, configurations
from tecb_eval.models.encoders import get_encoder
from tecb_eval.grid.run import run_grid
from tecb_eval.grid.store import ResultsStore
from helpers import REPO

METRICS = ["v_measure", "homogeneity", "completeness", "ami", "ari", "noise_fraction"]
FAST_CONFIGS = ["minibatch_kmeans:none", "agglomerative:none", "minibatch_kmeans:pca", "hdbscan:pca", "dbstream:pca"]


@pytest.fixture(scope="module")
def demo(demo_datasets):
    return demo_datasets


def _texts(folders, limit=None):
    return {t for f in folders for s in tecb_data.load(f).splits[:limit] for t in s.texts}


@pytest.mark.slow
def test_each_unique_text_is_encoded_once_across_the_grid_and_runs(demo, tmp_path):
    folders = [demo / "blurbs-clustering-s2s", demo / "tenkgnad-clustering-s2s"]
    counting = Counting(get_encoder("minilm-l6"), "counting-minilm")
    frame = run_grid(folders, [counting], configurations=FAST_CONFIGS, cache_dir=tmp_path / "cache",
                     results=tmp_path / "a.jsonl", limit_splits=6, progress=False)
    assert len(frame) == 2 * 6 * len(FAST_CONFIGS)
    counts = Counter(counting.calls)
    assert set(counts) == _texts(folders, 6) and set(counts.values()) == {1}
    # Another run, another configuration and results file: everything comes from the disk cache.
    again = Counting(counting.inner, "counting-minilm")
    run_grid(folders, [again], configurations=["agglomerative:pca"], cache_dir=tmp_path / "cache",
             results=tmp_path / "b.jsonl", limit_splits=6, progress=False)
    assert again.calls == []


@pytest.mark.slow
def test_legacy_v_measures_equal_direct_scikit_learn(demo, tmp_path):
    folder = demo / "blurbs-clustering-p2p"
    frame = run_grid([folder], ["tfidf-lsa"], configurations=["minibatch_kmeans:none", "agglomerative:none",
                     "minibatch_kmeans:pca"], seed=7, cache_dir=tmp_path, limit_splits=5, progress=False)
    bench = tecb_data.load(folder)
    encoder = get_encoder("tfidf-lsa", seed=7).fit_corpus([t for s in bench.splits for t in s.texts])
    for split in bench.splits[:5]:
        X = encoder.encode(list(split.texts))
        k = len(set(split.labels))
        expected = {
            "minibatch_kmeans": v_measure_score(split.labels, MiniBatchKMeans(
                n_clusters=k, batch_size=500, n_init="auto", random_state=7).fit_predict(X)),
            "agglomerative": v_measure_score(split.labels, AgglomerativeClustering(k, linkage="ward").fit_predict(X)),
        }
        for algorithm, value in expected.items():
            got = frame[(frame.split == split.name) & (frame.algorithm == algorithm) & (frame.reduction == "none")]
            assert got.v_measure.tolist() == [value]
    # Every computed reduction (a fresh cache: none is read) and every clustering says what it took.
    pca = frame[frame.reduction == "pca"]
    assert len(pca) == 5 and not pca.reduce_cached.any() and (pca.reduce_s > 0).all()
    assert set(frame.seed) == {7} and (frame.cluster_s > 0).all()


@pytest.mark.slow
def test_minilm_grid_matches_scikit_learn_on_its_embeddings(demo, tmp_path):
    folder = demo / "tenkgnad-clustering-s2s"
    frame = run_grid([folder], ["minilm-l6"], configurations=["minibatch_kmeans:none"], cache_dir=tmp_path,
                     progress=False)
    bench = tecb_data.load(folder)
    model = get_encoder("minilm-l6").model
    for split in bench.splits:
        X = model.encode(list(split.texts))  # the authors' way: each split on its own
        labels = MiniBatchKMeans(n_clusters=len(set(split.labels)), batch_size=500, n_init="auto",
                                 random_state=42).fit_predict(X)
        got = frame[frame.split == split.name].v_measure.item()
        assert got == pytest.approx(v_measure_score(split.labels, labels), abs=1e-9)


def _killed_run(folder, cache, results, kill_after):
    """Run the grid in a child process that SIGKILLs itself while writing cell ``kill_after``."""
    script = f"""
import os, signal
from tecb_eval.grid import store
from tecb_eval.grid.run import run_grid
count = [0]
original = store.ResultsStore.append
def append(self, row):
    count[0] += 1
    if count[0] == {kill_after}:
        with open(self.path, "ab") as fh:  # die in the middle of writing a line
            fh.write(b'{{"model": "torn')
        os.kill(os.getpid(), signal.SIGKILL)
    original(self, row)
store.ResultsStore.append = append
run_grid([{str(folder)!r}], ["tfidf-lsa"], configurations={FAST_CONFIGS!r}, cache_dir={str(cache)!r},
         results={str(results)!r}, limit_splits=8, progress=False)
"""
    return subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True)


@pytest.mark.slow
def test_killed_grid_resumes_without_redoing_cells_and_gives_the_same_table(demo, tmp_path):
    folder = demo / "blurbs-clustering-s2s"
    results = tmp_path / "killed.jsonl"
    child = _killed_run(folder, tmp_path / "cache", results, kill_after=17)
    assert child.returncode == -9, child.stderr.decode()
    finished = [json.loads(line) for line in results.read_bytes().split(b"\n")[:-1]]
    assert len(finished) == 16 and results.read_bytes().endswith(b'"torn')

    resumed = run_grid([folder], ["tfidf-lsa"], configurations=FAST_CONFIGS, cache_dir=tmp_path / "cache",
                       results=results, limit_splits=8, progress=False)
    lines = results.read_text().splitlines()
    assert len(lines) == 8 * len(FAST_CONFIGS)  # the torn line was dropped, no cell written twice
    assert [json.loads(line) for line in lines[:16]] == finished  # finished cells untouched
    fresh = run_grid([folder], ["tfidf-lsa"], configurations=FAST_CONFIGS, cache_dir=tmp_path / "other",
                     results=tmp_path / "fresh.jsonl", limit_splits=8, progress=False)
    keys = ["dataset", "split", "algorithm", "reduction"]
    assert resumed[keys + METRICS].equals(fresh[keys + METRICS])
    # A third run finds everything done: no new lines.
    run_grid([folder], ["tfidf-lsa"], configurations=FAST_CONFIGS, cache_dir=tmp_path / "cache",
             results=results, limit_splits=8, progress=False)
    assert len(results.read_text().splitlines()) == len(lines)


def test_dbstream_adapter_labels_equal_rivers_own_predictions():
    from river.cluster import DBSTREAM

    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(c, 0.3, size=(40, 2)) for c in (0.0, 3.0, 6.0)])
    rng.shuffle(X)
    river_model = DBSTREAM()
    rows = [dict(enumerate(x.tolist())) for x in X]
    for row in rows:
        river_model.learn_one(row)
    expected = [river_model.predict_one(row) for row in rows]
    adapter = DBSTREAMClusterer()
    assert adapter.fit_predict(X).tolist() == expected
    assert adapter.labels_.tolist() == expected and adapter.predict(X).tolist() == expected
    assert len(set(expected)) > 1
    assert adapter.get_params()["clustering_threshold"] == 1.0  # river's defaults


def test_paper_configurations_and_explicit_unreduced_density(demo, tmp_path):
    assert len(PAPER_CONFIGURATIONS) == 14
    pairs, skipped = configurations()
    assert skipped == [("hdbscan", "none"), ("dbstream", "none")] and ("hdbscan", "none") not in pairs
    messages = []
    frame = run_grid([demo / "tenkgnad-clustering-s2s"], ["tfidf-lsa"], algorithms=["hdbscan"], reductions=["none", "pca"],
                     limit_splits=2, cache_dir=tmp_path, progress=False, log=messages.append)
    assert set(frame.reduction) == {"pca"} and "hdbscan on none" in messages[0] and "as in the paper" in messages[0]
    asked = run_grid([demo / "tenkgnad-clustering-s2s"], ["tfidf-lsa"], configurations=["hdbscan:none", "dbstream:-"],
                     limit_splits=2, cache_dir=tmp_path, progress=False)
    assert set(zip(asked.algorithm, asked.reduction)) == {("hdbscan", "none"), ("dbstream", "none")}
    assert ((asked.noise_fraction >= 0) & (asked.noise_fraction <= 1)).all()
    with pytest.raises(UserError, match="ALGORITHM:REDUCTION"):
        run_grid([demo / "tenkgnad-clustering-s2s"], ["tfidf-lsa"], configurations=["kmeans:none"], progress=False)


def test_umap_reductions_are_computed_once_and_shared(demo, tmp_path):
    from tecb_eval.grid import run as grid_module
    from tecb_eval.grid.plan import GridConfig

    pairs = configurations(explicit=["minibatch_kmeans:umap", "agglomerative:umap", "minibatch_kmeans:pca50+umap"])[0]
    config = GridConfig(models=("tfidf-lsa",), configurations=pairs, protocol="legacy", seed=42, cache_dir=tmp_path,
                        limit_splits=2, progress=False)
    first = grid_module.Grid([demo / "tenkgnad-clustering-s2s"], config, store=ResultsStore(None))
    frame = first.run()
    assert first.reductions.computed == 2 * 2  # (umap, pca50+umap) x 2 splits, shared by both algorithms
    assert frame.groupby(["split", "reduction"]).reduce_cached.sum().max() == 1  # timed once, then shared
    second = grid_module.Grid([demo / "tenkgnad-clustering-s2s"], config, store=ResultsStore(None))
    assert second.run()[METRICS].equals(frame[METRICS]) and second.reductions.computed == 0


@pytest.mark.slow
@pytest.mark.usefixtures("draws_here")  # where the samples are drawn is tests/test_caches.py's subject
def test_fast_protocol_rows_are_mteb_v2_bootstraps_and_rows_name_their_profile(demo, tmp_path):
    # The scores themselves are refereed by MTEB in test_mteb_referee.py; here: the grid's shape.
    folder = demo / "tenkgnad-clustering-s2s"
    frame = run_grid([folder], ["tfidf-lsa"], protocol="fast", reductions=["none"], cache_dir=tmp_path, progress=False)
    assert sorted(frame.split) == [f"bootstrap-{i:02d}" for i in range(10)]
    assert set(frame.algorithm) == {"minibatch_kmeans"} and set(frame.profile) == {"current"}
    paper = run_grid([folder], ["tfidf-lsa"], protocol="fast", reductions=["none"], cache_dir=tmp_path,
                     profile="paper", progress=False)
    # k-means is the same in both profiles: only DBSTREAM's clean-up and pre-training differ.
    assert set(paper.profile) == {"paper"} and paper.v_measure.tolist() == frame.v_measure.tolist()
    with pytest.raises(UserError, match="unknown profile 'papr'"):
        run_grid([folder], ["tfidf-lsa"], profile="papr", progress=False)


def test_store_rejects_foreign_files_and_bad_inputs(tmp_path):
    import tecb_eval

    assert tecb_eval.run_grid is run_grid and tecb_eval.get_encoder is get_encoder
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n{}\n")
    with pytest.raises(UserError, match="bad.jsonl:1: not a results line"):
        ResultsStore(bad)
    with pytest.raises(UserError, match="no such dataset folder"):
        run_grid([tmp_path / "missing"], ["tfidf-lsa"], progress=False)


def test_profiles_differ_only_in_dbstream_and_old_stores_read_as_current(demo, tmp_path):
    import json as _json

    folder = demo / "tenkgnad-clustering-s2s"
    common = dict(configurations=["dbstream:pca", "minibatch_kmeans:pca"], cache_dir=tmp_path, limit_splits=2,
                  progress=False)
    current = run_grid([folder], ["tfidf-lsa"], results=tmp_path / "r.jsonl", **common)
    paper = run_grid([folder], ["tfidf-lsa"], results=tmp_path / "r.jsonl", profile="paper", **common)
    for frame, cleanup in ((current, "river"), (paper, "river-0.14")):
        db = frame[frame.algorithm == "dbstream"]
        assert {_json.loads(p)["cleanup"] for p in db.algorithm_params} == {cleanup}
    km = [f[f.algorithm == "minibatch_kmeans"].v_measure.tolist() for f in (current, paper)]
    assert km[0] == km[1]
    # One store holds both profiles apart.
    assert len(ResultsStore(tmp_path / "r.jsonl").rows) == len(current) + len(paper)
    # A store written before profiles existed: its rows are today's libraries' and resume as such.
    old = tmp_path / "old.jsonl"
    old.write_text("".join(_json.dumps({k: v for k, v in row.items() if k != "profile"}) + "\n"
                           for row in current.to_dict("records")))
    again = run_grid([folder], ["tfidf-lsa"], results=old, **common)
    assert set(again.profile) == {"current"} and len(ResultsStore(old).rows) == len(current)


def test_metrics_on_a_store_of_another_build_says_so_instead_of_running_a_new_grid(demo, tmp_path):
    """--metrics fills in stored rows; a store whose rows of the dataset are all of
    another build has none to fill in, and a full new grid is not what was asked."""
    folder = demo / "tenkgnad-clustering-s2s"
    store = tmp_path / "r.jsonl"
    args = dict(configurations=["minibatch_kmeans:none"], limit_splits=1, results=store, progress=False,
                log=lambda line: None)
    run_grid([folder], ["tfidf-lsa"], **args)
    rows = [json.loads(line) for line in store.read_text(encoding="utf-8").splitlines()]
    store.write_text("".join(json.dumps({**r, "dataset_fingerprint": "0" * 64}, sort_keys=True) + "\n" for r in rows),
                     encoding="utf-8")
    before = store.read_bytes()
    with pytest.raises(UserError, match=r"^--metrics level: the results store holds \S+ only from another build"):
        run_grid([folder], ["tfidf-lsa"], metrics=["level"], **args)
    assert store.read_bytes() == before
    assert len(run_grid([folder], ["tfidf-lsa"], **args)) == 1  # without --metrics: this build's grid, as before
