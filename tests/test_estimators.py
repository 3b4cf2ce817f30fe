"""scikit-learn's own ``check_estimator`` on every estimator we expose.

The referee is scikit-learn's estimator-check suite (``sklearn.utils.estimator_checks``), run as it
runs on scikit-learn's own estimators: parameters in ``__init__``, input validation in ``fit`` (NaN
and inf, empty, 1-D, complex and sparse input refused with scikit-learn's messages),
``n_features_in_``, ``NotFittedError`` before ``fit``, pickling, idempotent fits, sample-order
invariance of ``predict``.

Every check passes for every estimator listed here; none is skipped by us (scikit-learn skips its
array-API checks itself unless ``SCIPY_ARRAY_API=1``: we take numpy input only). Should a check ever
have to be skipped on purpose, it goes into :data:`EXPECTED_FAILED` with its reason.

UMAP-based reducers (``Umap``, ``PcaUmap``) are marked slow: each UMAP fit compiles numba code first.
"""

from __future__ import annotations

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from tecb_eval.clustering.algorithms import DBSTREAMClusterer, PcaUmap, WardVectors, Umap

# estimator class name -> {check name: why it is expected to fail}; empty: every check passes.
EXPECTED_FAILED: dict[str, dict[str, str]] = {}

FAST = [DBSTREAMClusterer(), DBSTREAMClusterer(cleanup="river-0.14"), WardVectors()]
SLOW = [Umap(random_state=0), PcaUmap(random_state=0)]


def _expected_failed(estimator) -> dict:
    return EXPECTED_FAILED.get(type(estimator).__name__, {})


@parametrize_with_checks(FAST, expected_failed_checks=_expected_failed)
def test_clusterers_follow_scikit_learns_conventions(estimator, check):
    check(estimator)


@pytest.mark.slow
@parametrize_with_checks(SLOW, expected_failed_checks=_expected_failed)
def test_reducers_follow_scikit_learns_conventions(estimator, check):
    check(estimator)


def test_dbstream_refuses_bad_input_with_scikit_learns_messages():
    import numpy as np
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        DBSTREAMClusterer().predict(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="NaN"):
        DBSTREAMClusterer().fit(np.array([[0.0, np.nan], [1.0, 1.0]]))
    fitted = DBSTREAMClusterer().fit(np.zeros((3, 2)))
    assert fitted.n_features_in_ == 2
    with pytest.raises(ValueError, match="features"):
        fitted.predict(np.zeros((2, 3)))
