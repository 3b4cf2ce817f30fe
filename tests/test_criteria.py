"""The registry of label-free criteria and the criteria it holds beside scikit-learn's: consensus
(scikit-learn's AMI and its expected mutual information), the spectrum's number of clusters
(scipy's Laplacian, a hand-built block case), topic words, NPMI (gensim's CoherenceModel) and topic
diversity; the kept assignments."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tecb_data.errors import UserError
from tecb_eval.clustering import consensus, criteria, expected_mi, spectrum, topics

GERMAN = [
    "Die Straße in München ist gesperrt, weil die Bahn streikt und die Straße voller Autos ist.",
    "Der Fußball-Verein aus München gewinnt das Spiel, der Trainer lobt die Mannschaft.",
    "Die Mannschaft verliert das Spiel, der Trainer ärgert sich über den Schiedsrichter.",
    "Die Bahn streikt wieder, Pendler in München stehen auf der Straße im Stau.",
    "Börse und Aktien: der Dax fällt, Anleger verkaufen Aktien in großer Zahl.",
    "Anleger hoffen auf die Börse, die Aktien steigen, der Dax erholt sich.",
    "Der Schiedsrichter pfeift das Spiel ab, die Mannschaft jubelt über den Sieg.",
    "Ärger über Größe der Straße: die Bahn baut, Pendler fluchen über den Stau.",
]
LABELS = np.array([0, 1, 1, 0, 2, 2, 1, 0])


def test_every_criterion_of_the_registry_reaches_the_store_checks_tables_and_curves():
    from tecb_eval.clustering.ranges import SCORE_RANGES
    from tecb_eval.grid.store import LABEL_FREE_SCORES
    from tecb_eval.reports.figures import CURVE_PANELS
    from tecb_eval.reports.label_free import COLUMNS

    panels = {name for name, _ in CURVE_PANELS}
    for c in criteria.CRITERIA_BY_NAME.values():
        assert c.needs in criteria.NEEDS and c.direction in (1, -1) and c.cost and c.referee
        assert SCORE_RANGES[c.name] == (c.low, c.high)
        assert c.name in COLUMNS and c.name in panels
        assert c.needs == "reruns" or c.name in LABEL_FREE_SCORES
    assert "npmi" in [c.name for c in criteria.needing("texts")]
    with pytest.raises(UserError, match="criterion 'nope': choose one of silhouette"):
        criteria.criterion("nope")


def test_consensus_is_the_pipeline_weighted_mean_of_scikit_learns_ami():
    from sklearn.metrics import adjusted_mutual_info_score as ami

    rng = np.random.default_rng(3)
    base = rng.integers(0, 4, size=60)
    parts = [base, np.where(rng.uniform(size=60) < 0.2, 0, base), rng.integers(0, 3, size=60),
             np.where(base == 3, -1, base)]
    groups = [("m", "none", "kmeans"), ("m", "none", "kmeans"), ("m", "none", "kmeans"), ("m", "pca", "hdbscan")]
    found = consensus.consensus(parts, groups)
    # By hand: the other k-means cells weigh 1/3 each, the HDBSCAN cell 1.
    weights = [1 / 3, 1 / 3, 1 / 3, 1.0]
    for i in range(4):
        others = [j for j in range(4) if j != i]
        expected = sum(weights[j] * ami(parts[i], parts[j]) for j in others) / sum(weights[j] for j in others)
        assert found[i] == pytest.approx(expected, abs=1e-12)
    assert consensus.consensus([base], [("m",)]) == [None]


def test_consensus_ami_of_every_pair_is_scikit_learns_including_noise_and_single_clusters():
    from sklearn.metrics import adjusted_mutual_info_score as ami

    rng = np.random.default_rng(5)
    base = rng.integers(0, 9, size=700)
    parts = [base, rng.integers(-1, 30, size=700), np.where(base > 6, -1, base), np.zeros(700, dtype=int),
             np.full(700, 4), rng.choice(40, 700, p=rng.dirichlet(np.full(40, 0.5))), base * 7 - 3]
    n = len(parts)
    codes = []
    for p in parts:
        code = np.unique(p, return_inverse=True)[1].ravel()
        codes.append((code, np.bincount(code), consensus._entropy(code)))
    for i in range(n):
        for j in range(i + 1, n):
            emi = expected_mi.expected_mutual_information(codes[i][1], codes[j][1], 700)
            assert consensus._ami(*codes[i], *codes[j], emi) == pytest.approx(ami(parts[i], parts[j]), abs=1e-12), (
                i, j)
    # Seven partitions, each its own pipeline: consensus is the plain mean of sklearn's AMI.
    found = consensus.consensus(parts, list(range(n)))
    for i in range(n):
        expected = np.mean([ami(parts[i], parts[j]) for j in range(n) if j != i])
        assert found[i] == pytest.approx(expected, abs=1e-12)


def _table(rows, columns, rng):
    """A contingency table with these row and column sums (what scikit-learn's EMI reads of it)."""
    first = np.repeat(np.arange(len(rows)), rows)
    second = rng.permutation(np.repeat(np.arange(len(columns)), columns))
    return np.bincount(first * len(columns) + second, minlength=len(rows) * len(columns)).reshape(len(rows),
                                                                                                  len(columns))


def test_consensus_expected_mutual_information_is_scikit_learns_on_grid_like_and_extreme_sizes():
    from sklearn.metrics.cluster import _expected_mutual_info_fast

    referee = _expected_mutual_info_fast.expected_mutual_information

    rng = np.random.default_rng(7)
    n = consensus.MAX_TEXTS
    # Cluster sizes of 2,000 texts as a grid's partitions have them: k-means-like, unbalanced, with
    # a noise cluster; then the extremes: one cluster, all singletons, a giant beside singletons,
    # two halves, tiny clusters, one text left over.
    sizes = []
    for k, alpha in ((3, 8.0), (12, 0.5), (30, 8.0), (45, 2.0), (60, 8.0), (200, 0.3)):
        counts = np.bincount(rng.choice(k, n, p=rng.dirichlet(np.full(k, alpha))), minlength=k)
        sizes.append(counts[counts > 0])
    sizes += [np.array([n]), np.ones(n, dtype=int), np.r_[np.ones(1000, dtype=int), 1000], np.array([1000, 1000]),
              np.array([1, 1, 1, n - 3]), np.full(400, 5), np.array([n - 1, 1]), np.array([667, 667, 666])]
    pairs = [(i, j) for i in range(len(sizes)) for j in range(len(sizes)) if i != j]
    found = expected_mi.expected_mutual_informations(sizes, pairs, n)
    for (i, j), value in zip(pairs, found):
        expected = referee(_table(sizes[i], sizes[j], rng), n)
        assert value == pytest.approx(expected, rel=1e-12, abs=1e-300), (sizes[i].size, sizes[j].size)
        # A pair's value is the same float whichever other pairs are computed with it.
        assert value == expected_mi.expected_mutual_information(sizes[i], sizes[j], n)
    # Few texts, many shapes; a table's sums with a size that occurs twice.
    for _ in range(30):
        m = int(rng.integers(2, 300))
        a = np.bincount(rng.integers(0, rng.integers(1, 40), m))
        b = np.bincount(rng.integers(0, rng.integers(1, 40), m))
        a, b = a[a > 0], b[b > 0]
        assert expected_mi.expected_mutual_information(a, b, m) == pytest.approx(referee(_table(a, b, rng), m),
                                                                                 rel=1e-12, abs=1e-300)


def test_kept_assignments_are_compact_deterministic_and_refuse_damage_in_one_line():
    labels = np.array([-1, 0, 3, 2, 2, 300, -1])
    text = consensus.encode(labels)
    assert text.startswith("u2:") and text == consensus.encode(labels.tolist())
    assert consensus.decode(text).tolist() == labels.tolist()
    assert consensus.encode(np.zeros(5000, dtype=int)).startswith("u1:") and len(consensus.encode(np.zeros(5000))) < 60
    with pytest.raises(UserError, match="the row of m / s: an assignment that is not one the grid writes"):
        consensus.decode("u2:!!", "the row of m / s")


def test_a_store_without_kept_assignments_is_one_line_for_consensus():
    import pandas as pd

    with pytest.raises(UserError, match="keep no cluster assignments"):
        consensus.require_assignments(pd.DataFrame({"model": ["m"]}), "--criterion consensus")


def test_the_spectrum_of_a_block_graph_is_scipys_and_its_eigengap_counts_the_blocks():
    from scipy import linalg
    from scipy.sparse import csgraph
    from sklearn.neighbors import kneighbors_graph

    rng = np.random.default_rng(0)
    # Four blocks of 30 points around orthogonal directions: four groups no 5-NN edge joins.
    X = np.vstack([np.eye(8)[i] * 10 + rng.normal(0, 0.3, size=(30, 8)) for i in range(4)])
    values = spectrum.laplacian_spectrum(X, 10, 42, neighbours=5)
    graph = kneighbors_graph(X, 5, mode="connectivity", metric="cosine", include_self=False)
    dense = csgraph.laplacian(graph.maximum(graph.T).toarray().astype(float), normed=True)
    assert values == pytest.approx(linalg.eigh(dense, eigvals_only=True)[:10], abs=1e-7)
    assert values[:4] == pytest.approx(np.zeros(4), abs=1e-8) and values[4] > 0.05
    assert spectrum.eigengap_k(values, 8) == 4
    # One connected graph larger than a dense solve: ARPACK's eigenvalues are scipy's dense ones.
    Y = rng.normal(size=(400, 6))
    graph = kneighbors_graph(Y, 15, mode="connectivity", metric="cosine", include_self=False)
    dense = csgraph.laplacian(graph.maximum(graph.T).toarray().astype(float), normed=True)
    assert spectrum.laplacian_spectrum(Y, 12, 42) == pytest.approx(linalg.eigh(dense, eigvals_only=True)[:12],
                                                                     abs=1e-7)
    assert spectrum.fit_to(8, 4) == pytest.approx(-np.log(2)) and spectrum.fit_to(4, None) is None
    # Too few texts for a graph: no estimate, not an error.
    assert spectrum.spectral_k(X[:10], None, 42, "s") is None


def test_topic_words_keep_umlauts_and_eszett_and_npmi_is_gensims():
    from gensim.corpora import Dictionary
    from gensim.models.coherencemodel import CoherenceModel

    corpus = topics.Corpus(GERMAN)
    assert "straße" in corpus.vocabulary and "ärger" in corpus.vocabulary and "größe" in corpus.vocabulary
    assert "die" not in corpus.vocabulary  # a German stop word
    words = topics.topic_words(corpus, LABELS, top=5)
    assert words[0][0] == "straße" and "börse" in words[2] or "aktien" in words[2]
    listed = [words[c] for c in sorted(words)]
    model = CoherenceModel(topics=listed, texts=corpus.tokens, dictionary=Dictionary(corpus.tokens),
                           coherence="c_npmi", processes=1)
    assert topics.npmi(corpus, listed) == pytest.approx(model.get_coherence(), abs=1e-12)
    assert topics.diversity([["a", "b"], ["b", "c"]]) == pytest.approx(3 / 4)
    scores = topics.topic_scores(corpus, np.where(LABELS == 2, -1, LABELS))
    assert set(json.loads(scores["topic_words"])) == {"0", "1"}  # noise has no topic


def test_npmi_matches_gensim_on_real_news_with_long_texts():
    from gensim.corpora import Dictionary
    from gensim.models.coherencemodel import CoherenceModel

    texts = [" ".join(GERMAN[i % 8].split()[::1 + i % 3]) + " " + GERMAN[(i * 3) % 8] for i in range(40)]
    corpus = topics.Corpus(texts)
    labels = np.arange(40) % 3
    listed = [w for _, w in sorted(topics.topic_words(corpus, labels).items())]
    model = CoherenceModel(topics=listed, texts=corpus.tokens, dictionary=Dictionary(corpus.tokens),
                           coherence="c_npmi", processes=1)
    assert topics.npmi(corpus, listed) == pytest.approx(model.get_coherence(), abs=1e-12)


def test_npmi_of_each_partition_of_one_corpus_is_gensims_with_the_corpus_counting_words_once():
    """A split's Corpus serves every partition of it and keeps the window counts of the words asked
    for before; each partition's NPMI stays gensim's, and the same float as from a fresh Corpus or
    one that keeps too few words to hold them (which counts each partition's words alone)."""
    from gensim.corpora import Dictionary
    from gensim.models.coherencemodel import CoherenceModel

    texts = [" ".join(GERMAN[i % 8].split()[::1 + i % 3]) + " " + GERMAN[(i * 5) % 8] for i in range(40)]
    shared, tight = topics.Corpus(texts), topics.Corpus(texts, known_words=6)
    dictionary = Dictionary(shared.tokens)
    for k in (2, 3, 5, 4):
        labels = (np.arange(40) * 7) % k
        labels[::9] = -1
        listed = [w for _, w in sorted(topics.topic_words(shared, labels, top=6).items())]
        value = topics.npmi(shared, listed)
        model = CoherenceModel(topics=listed, texts=shared.tokens, dictionary=dictionary, coherence="c_npmi",
                               processes=1)
        assert value == pytest.approx(model.get_coherence(), abs=1e-12)
        assert value == topics.npmi(topics.Corpus(texts), listed) == topics.npmi(tight, listed)


def test_a_calibration_naming_an_unknown_criterion_and_a_store_without_its_scores_are_one_line(tmp_path):
    import pandas as pd

    from tecb_eval.reports import calibration, unlabelled

    shipped = calibration.read_calibration()
    bad = tmp_path / "cal.json"
    bad.write_text(json.dumps({**shipped, "best": "rank:npmi+nonsense"}), encoding="utf-8")
    with pytest.raises(UserError, match="its chosen criterion 'rank:npmi\\+nonsense' is not one this tecb knows"):
        calibration.read_calibration(bad)
    rows = pd.DataFrame({"model": ["m", "m"], "reduction": "none", "algorithm": "a", "setting": ["k=2", "k=3"],
                         "split": "all", "silhouette": [0.1, 0.2]})
    with pytest.raises(UserError, match="criterion npmi: the results hold no topic coherence .* with --topics"):
        unlabelled.ranking(rows, "npmi")


def test_every_row_keeps_its_assignment_and_a_store_without_them_is_one_line_for_consensus(tmp_path, capsys):
    from helpers import eval_error
    from tablefiles import unlabelled_corpus
    from tecb_eval.cli import main

    corpus, store = unlabelled_corpus(tmp_path / "corpus"), tmp_path / "r.jsonl"
    assert main(["run", "--data", str(corpus), "--model", "tfidf-lsa", "--config", "minibatch_kmeans:none", "--k",
                 "3,5", "--stability", "0", "--results", str(store), "--cache-dir", str(tmp_path / "c"),
                 "--quiet"]) == 0
    rows = [json.loads(line) for line in store.read_text().splitlines()]
    assert all(len(consensus.decode(r["assignment"])) == r["n_samples"] for r in rows)
    assert all(r["spectral_k"] is None or r["spectral_k"] >= 2 for r in rows) and all("npmi" in r for r in rows)
    capsys.readouterr()
    assert main(["recommend", str(store), "--criterion", "consensus"]) == 0
    assert "ranked by consensus (weighted AMI)" in capsys.readouterr().out
    older = tmp_path / "older.jsonl"
    older.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "assignment"}) + "\n" for r in rows))
    assert "keep no cluster assignments" in eval_error(capsys, ["recommend", str(older), "--criterion", "consensus"])
