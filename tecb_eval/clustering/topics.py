"""Topic words per cluster, their coherence on the corpus and their diversity.

- Words: the texts as BERTopic's vectorizer sees them in ``recommend``'s snippet
  (scikit-learn's ``CountVectorizer`` with German stop words from the ``stop-words`` package),
  lower-cased, words of letters only (umlauts and ß kept; digits and punctuation are no words).
- Topic words: per cluster (noise left out), the :data:`TOP_WORDS` words of highest c-TF-IDF
  (BERTopic's ``ClassTfidfTransformer``: each cluster's word counts as a share of its words,
  times log(1 + the mean words per cluster / the word's count over all clusters)), ties by word.
- ``npmi``: the mean over clusters of the mean normalised pointwise mutual information of every
  ordered pair of a cluster's topic words, with probabilities from boolean sliding windows of
  :data:`WINDOW` words over the texts: gensim's ``CoherenceModel(coherence='c_npmi')`` on the same
  words and texts (tests/test_criteria.py holds them equal).
- ``topic_diversity``: the share of unique words among all clusters' topic words (Dieng et al. 2020).
"""

from __future__ import annotations

import numpy as np

TOP_WORDS = 10
WINDOW = 10  # gensim's window for c_npmi
_EPSILON = 1e-12  # gensim's, inside the logarithms
# The words whose window counts a split's Corpus keeps for its partitions (an int64 table of this
# many squared: 32 MiB; 60 partitions of 5,000 Blurbs texts have about 1,100 topic words between
# them); a partition with words beyond is counted alone.
KNOWN_WORDS = 2048
TOKENS = r"(?u)\b[^\W\d_]{2,}\b"  # two or more letters: "Ära", "Straße", not "2019" or "_"


def vectorizer():
    from sklearn.feature_extraction.text import CountVectorizer
    from stop_words import get_stop_words

    return CountVectorizer(stop_words=sorted(get_stop_words("german")), token_pattern=TOKENS, lowercase=True)


class Corpus:
    """The texts of one split, analysed once for every partition of them: the word counts per text
    and each text's words in order (for the sliding windows)."""

    def __init__(self, texts, known_words: int = KNOWN_WORDS):
        import warnings

        maker = vectorizer()
        with warnings.catch_warnings():
            # scikit-learn notes that stop words written with umlauts tokenise alike: nothing to act on.
            warnings.simplefilter("ignore", UserWarning)
            analyse = maker.build_analyzer()
            self.tokens = [analyse(t) for t in texts]
        from scipy import sparse

        self.vocabulary = sorted({w for doc in self.tokens for w in doc})
        self.index = {w: i for i, w in enumerate(self.vocabulary)}
        rows = np.repeat(np.arange(len(self.tokens)), [len(d) for d in self.tokens])
        cols = np.fromiter((self.index[w] for d in self.tokens for w in d), dtype=np.int64, count=len(rows))
        self.counts = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)),
                                        shape=(len(self.tokens), len(self.vocabulary)))
        self.counts.sum_duplicates()
        self._ids, self._lengths = cols, np.array([len(d) for d in self.tokens], dtype=np.int64)
        self._windows = None
        self._windows_by_row = None
        # Window counts of the pairs of words asked for so far (see :meth:`joint`): a partition's
        # topic words are mostly words an earlier partition of the same texts had.
        self._known: dict[int, int] = {}  # word id -> its row and column in _table
        self._known_words = known_words
        self._table = np.zeros((0, 0), dtype=np.int64)

    def windows(self):
        """Windows x words, 1 where gensim's ``boolean_sliding_window`` counts the word in the window
        (:func:`_presence`), and each window's text."""
        if self._windows is None:
            from scipy import sparse

            counts = np.maximum(self._lengths - WINDOW + 1, 1)
            rows, cols = _presence(self._ids, self._lengths, counts)
            start = int(counts.sum())
            matrix = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(start, len(self.vocabulary)))
            matrix.data[:] = 1.0  # duplicates summed by the constructor: presence only
            self._windows = matrix.tocsc()
        return self._windows

    def joint(self, words) -> np.ndarray:
        """Words x words (``words``: ids, in order): the windows holding both words, on the diagonal
        the windows holding the word; whole numbers as floats. Each word's counts with the words asked
        for before are counted once, when it is first asked for, up to ``known_words`` words;
        counts are whole numbers, so any order of counting gives the same floats."""
        words = np.asarray(words, dtype=np.int64)
        windows = self.windows()
        new = sorted(set(words.tolist()) - set(self._known))
        if len(self._known) + len(new) > self._known_words:
            sub = windows[:, words]
            return np.asarray((sub.T @ sub).todense(), dtype=np.float64)
        if new:
            if self._windows_by_row is None:
                self._windows_by_row = windows.tocsr()
            known = list(self._known) + new
            # Each new word's windows against every word's (one sparse product), then the columns asked for.
            block = (windows[:, new].T @ self._windows_by_row)[:, known].toarray().astype(np.int64)
            size = len(known)
            if size > self._table.shape[0]:
                grown = np.zeros((min(max(size, 2 * self._table.shape[0]), self._known_words),) * 2, dtype=np.int64)
                grown[:len(self._known), :len(self._known)] = self._table[:len(self._known), :len(self._known)]
                self._table = grown
            start = len(self._known)
            self._table[start:size, :size] = block
            self._table[:size, start:size] = block.T
            self._known.update((w, start + i) for i, w in enumerate(new))
        at = np.array([self._known[w] for w in words.tolist()], dtype=np.int64)
        return self._table[np.ix_(at, at)].astype(np.float64)


def _presence(ids: np.ndarray, lengths: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(window, word) pairs where gensim's sliding window holds the word, for all texts at once:
    ``ids`` the word ids of the texts one after another, ``lengths`` each text's words, ``counts``
    each text's windows; windows are numbered across the texts, in order.

    gensim slides the window by marking the word that enters present and the word that leaves
    absent, even where the word that leaves occurs again inside the window; a word is then absent
    until its next occurrence enters. So a word is present from the window its occurrence enters
    (the first window, for the first WINDOW words) until the window after one of its occurrences
    leaves in the same text, the leaving before the entering within one step."""
    if len(ids) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    text = np.repeat(np.arange(len(lengths)), lengths)
    positions = np.arange(len(ids)) - (np.cumsum(lengths) - lengths)[text]
    offset = (np.cumsum(counts) - counts)[text]  # the text's first window
    end = offset + counts[text]  # one past its last
    enters = np.maximum(positions - WINDOW + 1, 0) + offset
    leaves = positions + 1
    has_leave = leaves <= counts[text] - 1
    leaves = leaves + offset
    words = np.concatenate([ids[has_leave], ids])
    times = np.concatenate([leaves[has_leave], enters])
    ends = np.concatenate([end[has_leave], end])
    kinds = np.concatenate([np.zeros(int(has_leave.sum()), dtype=np.int64), np.ones(len(ids), dtype=np.int64)])
    order = np.lexsort((kinds, times, words))
    words, times, kinds, ends = words[order], times[order], kinds[order], ends[order]
    big = int(counts.sum()) + 1
    key = np.where(kinds == 0, words * big + times, np.iinfo(np.int64).max)
    following = np.minimum.accumulate(key[::-1])[::-1]  # the next leave at or after each event
    sets = kinds == 1
    nxt, first, word, stop = following[sets], times[sets], words[sets], ends[sets]
    # A leave of the same word counts only in the same text: its window lies before the text's end.
    same = (nxt != np.iinfo(np.int64).max) & (nxt // big == word) & (nxt % big < stop)
    last = np.where(same, nxt % big, stop)  # exclusive
    spans = np.maximum(last - first, 0)
    window = np.repeat(first, spans) + (np.arange(spans.sum()) - np.repeat(np.cumsum(spans) - spans, spans))
    return window.astype(np.int64), np.repeat(word, spans)


def topic_words(corpus: Corpus, predicted, top: int = TOP_WORDS) -> dict[int, list[str]]:
    """Each cluster's (noise left out) ``top`` words by c-TF-IDF, best first."""
    from scipy import sparse

    predicted = np.asarray(predicted)
    clusters = sorted(set(predicted.tolist()) - {-1})
    if not clusters or not corpus.vocabulary:
        return {}
    position = {c: i for i, c in enumerate(clusters)}
    kept = np.flatnonzero(predicted != -1)
    members = sparse.csr_matrix((np.ones(len(kept)), ([position[c] for c in predicted[kept]], kept)),
                                shape=(len(clusters), len(predicted)))
    # Clusters x words, sparse: only a cluster's own words get a weight (the others weigh 0 and are
    # never topic words). The sums are of whole counts, exact in any order, and each weight is the
    # same two steps on the same numbers as over a dense table, so the same floats.
    # The product holds each (cluster, word) once, in no particular order within a row: the order
    # of the words is decided below, by weight and word.
    per_cluster = sparse.csr_matrix(members @ corpus.counts)
    # Sums of whole counts straight from the entries (scipy's own sums would sort each row first).
    lengths = np.diff(per_cluster.indptr)
    frequency = np.bincount(per_cluster.indices, weights=per_cluster.data, minlength=per_cluster.shape[1])
    totals = np.bincount(np.repeat(np.arange(len(clusters)), lengths), weights=per_cluster.data,
                         minlength=len(clusters))
    mean_words = per_cluster.data.sum() / len(clusters)
    used = frequency > 0
    idf = np.zeros(len(frequency))
    idf[used] = np.log(1 + mean_words / frequency[used])
    weights = per_cluster.data / np.repeat(totals, lengths) * idf[per_cluster.indices]
    out = {}
    for i, c in enumerate(clusters):
        start, stop = per_cluster.indptr[i], per_cluster.indptr[i + 1]
        row, words = weights[start:stop], per_cluster.indices[start:stop]
        # Best first; among equal weights the word first in alphabetical order (the columns are in
        # that order): the same words everywhere. Weights are never negative: only positive ones count.
        positive = row > 0
        row, words = row[positive], words[positive]
        if 0 < top < len(row):
            # Only words weighing at least the top-th weight can be among the top: sorted alone,
            # ties at that weight included, they give the same words in the same order.
            candidates = row >= np.partition(row, len(row) - top)[len(row) - top]
            row, words = row[candidates], words[candidates]
        order = words[np.lexsort((words, -row))]
        out[int(c)] = [corpus.vocabulary[w] for w in order[:top]]
    return out


def npmi(corpus: Corpus, topics: list[list[str]]) -> float | None:
    """gensim's c_npmi of ``topics`` (lists of words of ``corpus``) on the corpus; None without a pair."""
    topics = [t for t in topics if len(t) >= 2]
    if not topics:
        return None
    windows = corpus.windows()
    total = windows.shape[0]
    if total == 0:
        return None
    relevant = sorted({corpus.index[w] for t in topics for w in t})
    joint = corpus.joint(relevant)
    single = np.diag(joint)
    column = {w: i for i, w in enumerate(relevant)}
    scores = []
    for t in topics:
        ids = np.array([column[corpus.index[w]] for w in t])
        # Every ordered pair of distinct words, a before b, in the order of the words: gensim's order.
        a, b = np.repeat(ids, len(ids)), np.tile(ids, len(ids))
        a, b = a[a != b], b[a != b]
        p_ab, p_a, p_b = joint[a, b] / total, single[a] / total, single[b] / total
        pmi = np.log((p_ab + _EPSILON) / (p_a * p_b))
        scores.append(float(np.mean(pmi / -np.log(p_ab + _EPSILON))))
    return float(np.mean(scores))


def diversity(topics: list[list[str]]) -> float | None:
    """The share of unique words among all topics' words; None without a word."""
    words = [w for t in topics for w in t]
    return len(set(words)) / len(words) if words else None


def topic_scores(corpus: Corpus, predicted) -> dict:
    """``npmi``, ``topic_diversity`` and ``topic_words`` (JSON text: each cluster's words, by
    cluster) of one partition of ``corpus``'s texts."""
    import json

    words = topic_words(corpus, predicted)
    topics = [words[c] for c in sorted(words)]
    return {"npmi": npmi(corpus, topics), "topic_diversity": diversity(topics),
            "topic_words": json.dumps({str(c): words[c] for c in sorted(words)}, ensure_ascii=False)}
