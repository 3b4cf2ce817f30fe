"""The one registry of label-free criteria: what a clustering of a corpus without labels is judged by.

Each entry is data: its name, the words tables and pages use, which way is better, what it needs,
what it costs, where its score can lie and what it is refereed against. What it needs decides
where it is computed:

- ``vectors``: the vectors the algorithm clustered, in the work unit beside the clustering
  (:mod:`tecb_eval.clustering.label_free`, :mod:`tecb_eval.clustering.spectrum`);
- ``reruns``: the clustering run again on subsamples, in the unit, where the run asks for it
  (:mod:`tecb_eval.clustering.stability`);
- ``texts``: the texts of the split and the cluster assignment, in the process that writes the
  store (:mod:`tecb_eval.clustering.topics`);
- ``partitions``: every partition of the same texts in the store, after the run, from the kept
  assignments (:mod:`tecb_eval.clustering.consensus`).

The results store's checks, the label-free table, the curves, ``calibrate`` and ``recommend`` read
this registry, so a new criterion is one entry here and its function. This module imports nothing
heavy.

Comparable across vector spaces (``across_spaces``): a grid's pipelines cluster different spaces (a
model's embedding space, a reduction's space), and a criterion computed from distances in the
space the pipeline clustered (silhouette, Calinski-Harabasz, Davies-Bouldin, DBCV) has a scale set
by that space, so comparing it across models and reductions compares the spaces, not the
partitions. Consensus (AMI between partitions), NPMI and topic diversity (from the texts), size
balance (from the cluster sizes), the fit to the spectrum's k (a ratio of cluster counts) and
stability (agreement between reruns) do not depend on the space's scale. Only these are
candidates for the criterion calibration chooses for ``recommend`` (alone or in a rank average);
the space-bound ones stay in its tables as information and ``recommend --criterion`` still takes
them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tecb_data.errors import UserError

NEEDS = ("vectors", "reruns", "texts", "partitions")


@dataclass(frozen=True)
class Criterion:
    name: str  # the results store's field
    title: str  # for tables, pages and the command line's output
    direction: int  # +1: higher is better; -1: lower is better
    needs: str  # one of NEEDS
    cost: str  # what one score costs, in words
    referee: str  # what it is tested equal to (tests/test_criteria.py and the older score tests)
    low: float  # where its score can lie
    high: float
    # Whether its scores compare partitions made in different vector spaces (another model, another
    # reduction): only such a criterion can rank a grid's pipelines against each other, so only such
    # criteria are candidates for the one calibration chooses (see the module docstring).
    across_spaces: bool
    # Whether a grid on labelled data computes it without being asked: a labelled run ranks by
    # V-measure and AMI, and every criterion here costs more than scoring against the labels (on
    # the vectors, more than the clustering itself), so each waits for --label-free (what
    # calibration needs). A corpus without labels gets them all.
    labelled_default: bool = False

    @property
    def panel(self) -> str:
        return f"{self.title}, {'higher' if self.direction > 0 else 'lower'} is better"


_ENTRIES = (
    Criterion("silhouette", "silhouette (cosine)", 1, "vectors",
              "k dot products per text with the clusters' sums of unit vectors (a seeded sample above 2,000 texts)",
              "sklearn.metrics.silhouette_score", -1.0, 1.0, across_spaces=False),
    Criterion("calinski_harabasz", "Calinski-Harabasz", 1, "vectors", "one pass over the vectors",
              "sklearn.metrics.calinski_harabasz_score", 0.0, math.inf, across_spaces=False),
    Criterion("davies_bouldin", "Davies-Bouldin", -1, "vectors", "one pass over the vectors, k x k centroids",
              "sklearn.metrics.davies_bouldin_score", 0.0, math.inf, across_spaces=False),
    Criterion("dbcv", "DBCV", 1, "vectors", "density clusterings only: the mutual reachability graph",
              "hdbscan.validity.validity_index", -1.0, 1.0, across_spaces=False),
    Criterion("size_balance", "size balance", 1, "vectors", "the cluster sizes",
              "a hand-computed entropy", 0.0, 1.0, across_spaces=True),
    Criterion("spectral_k_fit", "fit to the spectrum's k", 1, "vectors",
              "one cosine k-NN graph and its top eigenvalues per split and reduction",
              "scipy.sparse.csgraph.laplacian, scipy.linalg.eigh on a hand-built block case", -math.inf, 0.0,
              across_spaces=True),
    Criterion("stability_ari", "stability (ARI)", 1, "reruns", "N reruns of the clustering on subsamples",
              "sklearn.metrics.adjusted_rand_score", -1.0, 1.0, across_spaces=True),
    Criterion("stability_ami", "stability (AMI)", 1, "reruns", "N reruns of the clustering on subsamples",
              "sklearn.metrics.adjusted_mutual_info_score", -1.0, 1.0, across_spaces=True),
    Criterion("npmi", "topic coherence (NPMI)", 1, "texts",
              "a document-term matrix per split, top-10 word pairs per cluster",
              "gensim CoherenceModel(coherence='c_npmi')", -1.0, 1.0, across_spaces=True),
    Criterion("topic_diversity", "topic diversity", 1, "texts", "the top-10 words of each cluster",
              "a hand-computed share of unique words", 0.0, 1.0, across_spaces=True),
    Criterion("consensus", "consensus (weighted AMI)", 1, "partitions",
              "AMI between every pair of partitions of a split, after the run",
              "sklearn.metrics.adjusted_mutual_info_score", -1.0, 1.0, across_spaces=True),
)

CRITERIA_BY_NAME = {c.name: c for c in _ENTRIES}
# Which way each criterion points (+1 higher is better, -1 lower): what calibration and `recommend` rank by.
CRITERIA = {c.name: c.direction for c in _ENTRIES}
CRITERION_NAMES = {c.name: c.title for c in _ENTRIES}
# The criteria calibration may choose from, alone or in rank averages (``across_spaces``), in registry order.
ACROSS_SPACES = tuple(c.name for c in _ENTRIES if c.across_spaces)
# The ranges the results store checks a written score against.
CRITERION_RANGES = {c.name: (c.low, c.high) for c in _ENTRIES}
# How the label-free pick's number of clusters is bounded: by the clusters of the partition the
# grid agrees on most (the highest consensus), or not at all (tecb_eval.reports.calibration.within_cap).
CONSENSUS_CAP = "consensus"
NO_CAP = "none"
K_CAPS = (CONSENSUS_CAP, NO_CAP)


def criterion(name: str) -> Criterion:
    try:
        return CRITERIA_BY_NAME[name]
    except KeyError:
        raise UserError(f"criterion {name!r}: choose one of {', '.join(CRITERIA)}") from None


def needing(needs: str) -> tuple[Criterion, ...]:
    """The criteria computed from what ``needs`` names (one of :data:`NEEDS`), in registry order."""
    return tuple(c for c in _ENTRIES if c.needs == needs)
