"""The names of the grid's algorithms and reductions, apart from their code: the command line lists
them in its help and choices without importing scikit-learn (seconds) to print a page. They are the
registry's (:mod:`tecb_eval.clustering.registry`), which imports no estimator until one is built."""

from __future__ import annotations

from tecb_eval.clustering.registry import ALGORITHMS, REDUCTIONS  # noqa: F401
