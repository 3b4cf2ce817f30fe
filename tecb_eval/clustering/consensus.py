"""Agreement across the grid's partitions of the same texts, and the kept assignments it is read from.

Each cell of the grid keeps its cluster assignment in its row (``assignment``): the labels, noise
(-1) shifted to 0, as little-endian unsigned integers of the smallest width that holds them,
zlib-compressed (level 9) and base64-encoded, behind a prefix naming the width (``u1:``, ``u2:``,
``u4:``). The same labels give the same bytes on every machine, so the rows stay byte for byte the
same in process, in worker processes and on Dask.

After the run, the partitions of one (dataset, split, seed) are compared with each other:
a partition's consensus is its mean adjusted mutual information (scikit-learn's
``adjusted_mutual_info_score``, noise as a cluster of its own) with every other, each other
weighted by one over the number of partitions of its pipeline (model, reduction, algorithm), so
that a range of twelve k of one pipeline counts as much as one HDBSCAN run of another (Ohl and
Lindsten 2025 rank partitions by their agreement with the ensemble's consensus; Hoyle et al. 2022
find an ensemble of runs closer to human categories than its members). The expected mutual
information AMI subtracts is computed for every pair of the split at once
(:mod:`~tecb_eval.clustering.expected_mi`, scikit-learn's to about 1e-14). Above
:data:`MAX_TEXTS` texts the partitions are compared on a seeded uniform sample of that many, the
same for every partition of the split: AMI's expected mutual information grows with the texts,
and a grid of 60 pipelines has 1,770 pairs.
"""

from __future__ import annotations

import base64
import math
import zlib

import numpy as np

from tecb_data.errors import UserError
from tecb_eval.clustering import expected_mi

ASSIGNMENT = "assignment"
_WIDTHS = {"u1": np.dtype("<u1"), "u2": np.dtype("<u2"), "u4": np.dtype("<u4")}
GROUP = ("model", "reduction", "algorithm")
CELL = ("mteb_name", "dataset_fingerprint", "split", "seed")
MAX_TEXTS = 2000
_EPS = float(np.finfo(np.float64).eps)
_LOG = math.log


def encode(predicted) -> str:
    """The compact text of a cluster assignment (labels from -1)."""
    codes = np.asarray(predicted, dtype=np.int64) + 1
    top = int(codes.max()) if len(codes) else 0
    name = "u1" if top < 2**8 else "u2" if top < 2**16 else "u4"
    raw = codes.astype(_WIDTHS[name]).tobytes()
    return f"{name}:" + base64.b64encode(zlib.compress(raw, 9)).decode("ascii")


def decode(text: str, where: str = "the results store") -> np.ndarray:
    """The labels (from -1) of an :func:`encode` text; one line naming ``where`` if it is damaged."""
    try:
        name, body = text.split(":", 1)
        return np.frombuffer(zlib.decompress(base64.b64decode(body, validate=True)), dtype=_WIDTHS[name]).astype(
            np.int64) - 1
    except (ValueError, KeyError, AttributeError, zlib.error):
        raise UserError(f"{where}: an assignment that is not one the grid writes ({str(text)[:30]!r}...); the store "
                        "is damaged: rerun that cell") from None


def consensus(partitions, groups) -> list[float | None]:
    """Each partition's weighted mean AMI with the others (see the module); None for a lone partition.

    Args:
        partitions (Sequence[numpy.ndarray]): Labels of the same texts, in the same order.
        groups (Sequence[Hashable]): Each partition's pipeline; a partition's weight is one over its
            pipeline's count.

    Returns:
        list[float | None]: One per partition, in order.
    """
    n = len(partitions)
    members: dict = {}
    for g in groups:
        members[g] = members.get(g, 0) + 1
    weights = np.array([1.0 / members[g] for g in groups])
    # What is per partition (its clusters' codes and sizes, its entropy) once; per pair only the
    # contingency table.
    codes, sizes, entropies = [], [], []
    for p in partitions:
        _, code = np.unique(np.asarray(p), return_inverse=True)
        code = code.astype(np.int64, copy=False).ravel()
        codes.append(code)
        sizes.append(np.bincount(code))
        entropies.append(_entropy(code))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    # The expected mutual information of every pair at once (each distinct cell once), placed by pair.
    emis = expected_mi.expected_mutual_informations(sizes, pairs, len(codes[0])) if pairs else []
    ami = np.eye(n)
    for (i, j), emi in zip(pairs, emis):
        ami[i, j] = ami[j, i] = _ami(codes[i], sizes[i], entropies[i], codes[j], sizes[j], entropies[j], float(emi))
    out: list[float | None] = []
    for i in range(n):
        others = np.arange(n) != i
        total = weights[others].sum()
        out.append(float((weights[others] * ami[i, others]).sum() / total) if total > 0 else None)
    return out


def _entropy(code) -> float:
    """scikit-learn's entropy of a labelling, from its cluster codes (0..k-1), operation for operation."""
    from math import log

    if len(code) == 0:
        return 1.0
    pi = np.bincount(code).astype(np.float64)
    if pi.size == 1:
        return 0.0
    pi_sum = np.sum(pi)
    return float(-np.sum((pi / pi_sum) * (np.log(pi) - log(pi_sum))))


def _ami(a, pi, ha: float, b, pj, hb: float, emi: float) -> float:
    """scikit-learn's ``adjusted_mutual_info_score(a, b)`` (arithmetic mean) from cluster codes, their
    cluster sizes (``pi``, ``pj``: the contingency table's row and column sums) and entropies,
    operation for operation; the expected mutual information ``emi`` is
    :mod:`~tecb_eval.clustering.expected_mi`'s, scikit-learn's to about 1e-14, so the value is
    scikit-learn's to about that. The contingency table is one bincount."""
    ka, kb = pi.size, pj.size
    if (ka == kb == 1) or (ka == kb == 0):
        return 1.0
    if ka == 1 or kb == 1:
        return 0.0
    n_samples = len(a)
    contingency = np.bincount(a * kb + b, minlength=ka * kb).reshape(ka, kb)
    # The mutual information as sklearn's mutual_info_score computes it from a contingency table
    # (its non-zero cells in row-major order, as scipy's find gives them). Its sums are whole
    # numbers: the table's total is the texts, its row and column sums the cluster sizes.
    nzx, nzy = np.nonzero(contingency)
    nz_val = contingency[nzx, nzy]
    log_contingency_nm = np.log(nz_val)
    contingency_nm = nz_val / n_samples
    outer = pi.take(nzx).astype(np.int64, copy=False) * pj.take(nzy).astype(np.int64, copy=False)
    log_n = _LOG(n_samples)
    log_outer = -np.log(outer) + log_n + log_n
    mi = contingency_nm * (log_contingency_nm - log_n) + contingency_nm * log_outer
    mi[np.abs(mi) < _EPS] = 0.0
    mi = max(float(mi.sum()), 0.0)
    normalizer = (ha + hb) / 2  # numpy's mean of the two: one sum, one division
    denominator = normalizer - emi
    denominator = min(denominator, -_EPS) if denominator < 0 else max(denominator, _EPS)
    numerator = mi - emi
    numerator = min(numerator, -_EPS) if numerator < 0 else max(numerator, _EPS)
    return float(numerator / denominator)


def with_consensus(frame):
    """``frame`` with a ``consensus`` column computed from its kept assignments, per (dataset, split,
    seed) over the partitions of the same number of texts; rows without an assignment get None.
    A frame where no row kept one is returned as it is."""
    import pandas as pd

    if frame.empty or ASSIGNMENT not in frame.columns:
        return frame
    frame = frame.copy()
    values = pd.Series([None] * len(frame), index=frame.index, dtype=object)
    kept = frame[frame[ASSIGNMENT].map(lambda v: isinstance(v, str))]
    keys = [c for c in CELL if c in kept.columns]
    for _, cell in kept.groupby(keys, sort=True, dropna=False):
        partitions = [decode(text, f"the row of {row.model} / {row.split}")
                      for text, row in zip(cell[ASSIGNMENT], cell.itertuples())]
        sizes = {len(p) for p in partitions}
        if len(sizes) != 1 or len(partitions) < 2:
            continue  # partitions of other texts (another sample): nothing to agree with
        groups = [tuple(getattr(row, c) for c in GROUP) for row in cell.itertuples()]
        n = sizes.pop()
        if n > MAX_TEXTS:
            from tecb_data import seeding

            key = [str(cell[c].iloc[0]) for c in keys]
            rows = np.sort(seeding.rng(int(cell["seed"].iloc[0]) if "seed" in cell.columns else 0, "consensus",
                                       *key).choice(n, MAX_TEXTS, replace=False))
            partitions = [p[rows] for p in partitions]
        for index, value in zip(cell.index, consensus(partitions, groups)):
            values[index] = value
    frame["consensus"] = values
    return frame


def keeps_assignments(frame) -> bool:
    """Whether any row of ``frame`` kept its cluster assignment (what consensus is computed from)."""
    return ASSIGNMENT in frame.columns and bool(frame[ASSIGNMENT].map(lambda v: isinstance(v, str)).any())


def require_assignments(frame, what: str, otherwise: str = "choose another --criterion") -> None:
    """One line where ``frame`` (the rows ``what`` ranks) kept no assignment to compute consensus
    from, naming a rerun or ``otherwise``, what the user can do instead."""
    if not keeps_assignments(frame):
        raise UserError(f"{what}: the results keep no cluster assignments, so consensus cannot be computed; rerun "
                        f"the grid with this tecb (it keeps them), or {otherwise}")
