"""Exact Ward on the vectors (fastcluster) against scikit-learn's Ward on the matrix: the same
labels, number for number, on real vectors and on inputs full of ties; and the memory planner's
choice of path."""

import numpy as np
import pytest
from sklearn.cluster import AgglomerativeClustering

import tecb_data
from helpers import computed_once
from tecb_eval.clustering import algorithms as algo
from tecb_eval.grid import scheduling, work
from tecb_eval.grid.work import Cell, WorkUnit, run_unit


def matrix_labels(X, k):
    return AgglomerativeClustering(n_clusters=k, linkage="ward").fit_predict(X)


def vector_labels(X, k):
    return algo.WardVectors(n_clusters=k).fit_predict(X)


# The LSA fits and minilm's encoding at one thread (a second finds no free core under pytest-xdist).
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def dev_build(germeval_dev_datasets):
    """The GermEval dev set's Blurbs S2S build (the session's, tests/conftest.py). Read-only."""
    return germeval_dev_datasets["blurbs-clustering-s2s"][0]


@pytest.fixture(scope="module")
def dev_vectors(dev_build, tmp_path_factory, request):
    """minilm-l6 (the session's) on the largest split of the GermEval dev set's Blurbs S2S build,
    encoded once for the test processes (read-only)."""
    def encode():
        split = max(tecb_data.load(dev_build).splits, key=lambda s: len(s.texts))
        return request.getfixturevalue("minilm_encoder").encode(list(split.texts)), len(set(split.labels))

    return computed_once(tmp_path_factory, "ward-dev-vectors", encode)


@pytest.mark.slow  # real shared data, minilm-l6 and UMAP
@pytest.mark.parametrize("reduction", algo.REDUCTIONS)
def test_same_labels_on_real_vectors_every_reduction(dev_vectors, reduction):
    X, k = dev_vectors
    reduced = algo.reduce(reduction, X, 42)
    for clusters in (k, 2, 50):
        expected = matrix_labels(reduced, clusters)
        got = vector_labels(reduced, clusters)
        assert np.array_equal(got, expected), (reduction, clusters)
        assert len(set(got.tolist())) == clusters


def same_partition(a, b) -> bool:
    """Equal up to renaming: the pairs (a, b) define a one-to-one map."""
    pairs = set(zip(a.tolist(), b.tolist()))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


def test_same_partition_on_duplicated_rows():
    """Ten copies of each of 150 rows: the zero-height merges tie. Above them both chains build the
    same tree (the same numbers); cut among them (k near 150) the same partition, numbered otherwise."""
    X = np.repeat(np.random.default_rng(7).normal(size=(150, 8)), 10, axis=0)
    for k in (2, 3, 7, 40):
        assert np.array_equal(vector_labels(X, k), matrix_labels(X, k)), k
    for k in (100, 150):
        assert same_partition(vector_labels(X, k), matrix_labels(X, k)), k


@pytest.mark.parametrize("name", ["integer grid", "evenly spaced line"])
def test_exact_ties_can_part_the_two_paths(name):
    """What the README states and why the planner runs the vectors only where the matrix cannot run:
    on exactly tied distances the chains pick different tied pairs. Both are valid Ward trees (k
    clusters each, every row labelled), not the same one. Should this ever agree, README and
    work.ward_path can let the vectors run where they are faster (8x in 2-d)."""
    if name == "integer grid":
        X = np.random.default_rng(7).integers(0, 4, size=(1500, 3)).astype(np.float32)
    else:
        X = np.arange(400, dtype=float)[:, None]
    for k in (2, 7):
        vector, matrix = vector_labels(X, k), matrix_labels(X, k)
        assert sorted(set(vector.tolist())) == sorted(set(matrix.tolist())) == list(range(k))
    assert not np.array_equal(vector_labels(X, 7), matrix_labels(X, 7))


def test_too_few_rows_refused_as_scikit_learn_refuses():
    with pytest.raises(ValueError) as vector:
        vector_labels(np.zeros((1, 3)), 1)
    with pytest.raises(ValueError) as matrix:
        matrix_labels(np.zeros((1, 3)), 1)
    assert str(vector.value) == str(matrix.value).replace("AgglomerativeClustering", "WardVectors")
    with pytest.raises(ValueError, match="n_clusters"):
        vector_labels(np.zeros((5, 3)), 6)


def unit(n, dim, reduction="none", profile="current", rows=None):
    labels = tuple(str(i % 3) for i in range(n if rows is None else len(rows)))
    return WorkUnit(key="u", label="m / d / s / r / seed 1", dataset="d", reduction=reduction, seed=1,
                    protocol="legacy", profile=profile, cells=(Cell("s", rows, labels, 3, "agglomerative"),),
                    n=n, dim=dim)


def test_planner_picks_matrix_where_it_fits_and_vectors_where_not():
    budget = 24 * 2**30
    big = unit(200_000, 384)
    # 200k texts: the matrix needs ~410 GiB, so Ward runs on the vectors and the unit fits 24 GiB.
    assert work.ward_matrix_bytes(200_000) > 400 * 2**30
    planned = scheduling.plan_ward(scheduling.Task(big, "x", False), budget).unit
    assert planned.ward_path(200_000) == "vector"
    assert planned.memory < 4 * 2**30
    # A dev-set split on 384-d: the matrix fits, and it stays the matrix (today's path, today's bits).
    small = scheduling.plan_ward(scheduling.Task(unit(2_000, 384), "x", False), budget).unit
    assert small.ward_path(2_000) == "matrix"
    assert small.memory == work.estimate_memory(unit(2_000, 384))
    # Reduced to 2-d the vectors would be faster, but where the matrix fits it stays (ties, above).
    reduced = scheduling.plan_ward(scheduling.Task(unit(20_000, 384, "umap"), "x", False), budget).unit
    assert reduced.ward_path(20_000) == "matrix"
    assert unit(200_000, 384).ward_path(200_000) == "matrix"  # no budget given: today's behaviour
    # Profile paper keeps the matrix, and a unit that cannot hold it is skipped in one line.
    paper = unit(200_000, 384, profile="paper")
    assert paper.ward_path(200_000) == "matrix"
    lines = []
    kept = scheduling.fit_or_skip([scheduling.Task(paper, "x", False), scheduling.Task(big, "y", False)],
                                  budget, "", lines.append)
    assert [t.input_key for t in kept] == ["y"]
    assert len(lines) == 1 and "skipped m / d / s / r / seed 1" in lines[0] and "--memory-limit" in lines[0]


def test_unit_scores_identical_on_either_path():
    """A whole unit through run_unit: the budget that forces the vectors changes no score."""
    rng = np.random.default_rng(3)
    X = np.vstack([rng.normal(loc=c, size=(200, 32)) for c in (0.0, 0.6, 1.2)]).astype(np.float32)
    plain = unit(600, 32)
    matrix = run_unit(scheduling.plan_ward(scheduling.Task(plain, "x", False), 2**40).unit, X, False)
    vector = run_unit(scheduling.plan_ward(scheduling.Task(plain, "x", False), work.WORKER_BASELINE_BYTES).unit,
                      X, False)
    assert '"linkage": "ward"' in matrix.metrics[0]["algorithm_params"]
    assert vector.metrics[0]["algorithm_params"] == '{"n_clusters": 3}'
    for a, b in zip(matrix.metrics, vector.metrics):  # every value but the timings (*_s) and Ward's parameters
        assert {k: v for k, v in a.items() if not k.endswith("_s") and k != "algorithm_params"} == \
               {k: v for k, v in b.items() if not k.endswith("_s") and k != "algorithm_params"}


@pytest.mark.slow  # real shared data, three grids
def test_a_grid_runs_ward_on_the_vectors_where_the_matrix_does_not_fit(dev_build, tmp_path):
    """Through run_grid: a budget below Ward's matrix but above its vectors runs every Ward cell
    (profile current), with the same scores as on the matrix; profile paper skips them in one line each."""
    from tecb_eval.grid.run import run_grid
    from tecb_eval.models.encoders import get_encoder

    data = [dev_build]
    common = dict(configurations=["agglomerative:none"], limit_splits=2, progress=False, jobs=1)
    free = run_grid(data, ["tfidf-lsa"], results=tmp_path / "free.jsonl", cache_dir=tmp_path / "cache", **common)
    n = max(free.n_samples)
    dim = get_encoder("tfidf-lsa").fit_corpus(sorted({t for s in tecb_data.load(dev_build).splits for t in s.texts})
                                             ).encode(["x"]).shape[1]
    matrix, vector = (WorkUnit("k", "l", "d", "none", 42, "legacy", profile, (Cell("s", None, (), 3, "agglomerative"),),
                               n, dim, ward_budget=0).memory for profile in ("paper", "current"))
    assert vector < matrix, (n, dim)
    limit = work.WORKER_BASELINE_BYTES + (matrix + vector) // 2
    messages = []
    tight = run_grid(data, ["tfidf-lsa"], results=tmp_path / "tight.jsonl", cache_dir=tmp_path / "cache",
                     memory_limit=limit, log=messages.append, **common)
    assert not [m for m in messages if m.startswith("skipped ")]
    on_vectors = tight[tight.n_samples == n]
    assert len(on_vectors) == 1 and set(on_vectors.algorithm_params) == {f'{{"n_clusters": {on_vectors.n_labels.iloc[0]}}}'}
    order = ["split"]
    scores = ["v_measure", "homogeneity", "completeness", "ami", "ari", "n_clusters_found"]
    assert tight.sort_values(order)[scores].reset_index(drop=True).equals(
        free.sort_values(order)[scores].reset_index(drop=True))
    messages.clear()
    paper = run_grid(data, ["tfidf-lsa"], results=tmp_path / "paper.jsonl", cache_dir=tmp_path / "cache",
                     memory_limit=limit, log=messages.append, profile="paper", **common)
    skipped = [m for m in messages if m.startswith("skipped ")]
    assert len(skipped) == 1 and "raise --memory-limit" in skipped[0] and n not in set(paper.n_samples)
