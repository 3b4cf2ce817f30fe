"""UMAP's exact neighbours from our compiled loop are umap-learn's own: the distance matrix equals
scikit-learn's per-pair loop with umap-learn's metric bit for bit, and the embedding equals
umap-learn's own small-input path bit for bit."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.sparse import csr_matrix

from tecb_eval.clustering import umap_neighbours
from tecb_eval.clustering.estimators import Umap, _seeded_spectral_umap
from tecb_eval.clustering.settings import UMAP_NEIGHBOURS


def _awkward_vectors(n: int, d: int, seed: int) -> np.ndarray:
    """Clustered vectors with what distances treat specially: a zero row, a row and its opposite
    (cosine distance 2, UMAP's disconnection distance), and a duplicate."""
    rng = np.random.RandomState(seed)
    centres = rng.randn(6, d)
    X = centres[rng.randint(0, 6, n)] + 0.4 * rng.randn(n, d)
    X[3] = 0.0
    X[10] = -X[11]
    X[20] = X[21]
    return X


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
@pytest.mark.parametrize("d", [3, 50, 384])
def test_the_matrix_is_scikit_learns_loop_with_umaps_metric_bit_for_bit(metric, d):
    from sklearn.metrics import pairwise_distances
    from umap import distances

    X = _awkward_vectors(120, d, seed=d).astype(np.float64)  # the loop converts as UMAP.fit does
    theirs = pairwise_distances(X.astype(np.float32), metric=getattr(distances, metric))
    ours = umap_neighbours.distance_matrix(X, metric)
    assert ours.dtype == theirs.dtype == np.float32
    assert ours.tobytes() == theirs.tobytes()


@pytest.mark.parametrize("n, d", [(40, 8), (600, 40)])
def test_the_embedding_is_umap_learns_own_small_input_path_bit_for_bit(n, d):
    X = _awkward_vectors(n, d, seed=n).astype(np.float32)
    ours = Umap(n_components=5, random_state=3).fit_transform(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = _seeded_spectral_umap()(n_components=5, metric="cosine", n_neighbors=min(UMAP_NEIGHBOURS, n - 1),
                                         random_state=3).fit_transform(X)
    assert ours.tobytes() == theirs.tobytes()


def test_the_loop_is_taken_only_where_umap_computes_every_distance():
    dense = np.ones((10, 3), dtype=np.float32)
    assert umap_neighbours.takes(dense, "cosine")
    assert not umap_neighbours.takes(csr_matrix(dense), "cosine")  # UMAP's sparse path
    assert not umap_neighbours.takes(np.ones((umap_neighbours.EXACT_BELOW, 3)), "cosine")  # NN-descent
    assert not umap_neighbours.takes(dense, "manhattan")  # no loop of ours for it
    assert not umap_neighbours.takes(dense, "minkowski", {"p": 3})
