"""Where each clustering score can lie, for every reader of scores written elsewhere (a results
store, the MTEB export): no scikit-learn is imported to check a number."""

from __future__ import annotations

import math

from tecb_eval.clustering.criteria import CRITERION_RANGES

# V-measure, its halves and the noise fraction are shares (0..1); the chance-adjusted ARI and AMI
# reach 1 and go below 0 for worse than chance (ARI no lower than -0.5, AMI's floor has no closed
# form, so both get -1). A value outside is an edited or foreign row that a mean would carry into
# every table without a word.
SCORE_RANGES = {"v_measure": (0.0, 1.0), "homogeneity": (0.0, 1.0), "completeness": (0.0, 1.0),
                "ami": (-1.0, 1.0), "ari": (-1.0, 1.0), "noise_fraction": (0.0, 1.0), "dbcv": (-1.0, 1.0),
                # The share of the texts each stability rerun clustered.
                "stability_fraction": (0.0, 1.0),
                # The label-free criteria, from their registry.
                **CRITERION_RANGES}
# Float round-off of the metrics' own arithmetic (1 - H(C|K)/H(C) a hair beyond 0 or 1: a perfect
# clustering's V-measure can be 1.0000000000000002), not a wrong score.
ROUND_OFF = 1e-9


def is_score(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def in_range(name: str, value) -> bool:
    """Whether ``value`` is a finite number where the score ``name`` can lie (:data:`SCORE_RANGES`)."""
    low, high = SCORE_RANGES[name]
    return is_score(value) and low - ROUND_OFF <= value <= high + ROUND_OFF
