"""The names of the grid's algorithms and reductions, apart from their code: the command line lists
them in its help and choices without importing scikit-learn (seconds) to print a page."""

from __future__ import annotations

ALGORITHMS = ("minibatch_kmeans", "agglomerative", "hdbscan", "dbstream")
REDUCTIONS = ("none", "pca", "umap", "pca50+umap")
