"""The expected mutual information (EMI) that adjusted mutual information subtracts: scikit-learn's
value, computed with numpy for many pairs of partitions of the same texts at once.

scikit-learn's ``expected_mutual_information`` sums, for every cell (i, j) of a contingency table
with row sums a and column sums b over n texts, a term for every count n_ij the cell can hold; it
is a compiled loop, one call per pair, that holds the GIL. A cell's sum depends on nothing but
(a_i, b_j, n), and the partitions of one split share their cluster sizes across pairs: 60 k-means,
agglomerative and HDBSCAN partitions of 2,000 texts make 1,770 pairs, 1.8 million cells and 61
million terms, but 43,000 distinct (a, b) with 3 million terms. So each distinct cell is summed
once for all pairs, in blocks of whole arrays, and a pair's EMI is the sum of its cells' sums.

The values are scikit-learn's to about 1e-14 relative (tested against it, the referee): each term
is computed operation for operation as scikit-learn's loop computes it, from the same log-gamma
values (scipy's ``gammaln`` where it calls that, the C library's ``lgamma`` where it calls that);
the sums run in scikit-learn's order (a cell's terms by n_ij, the cells row by row), except that a
cell's terms are summed before they join the pair's sum. The log-gamma values are thousands while
their sum is a few units, so a log-gamma value one bit off moves a term by 1e-12: hence the C
library's own ``lgamma``, not scipy's, which differs from it in the last bit for a sixth of the
integers (where the C library cannot be reached, scipy's stands in, and the values are
scikit-learn's to about 1e-12). Every sum is sequential in a fixed order and a cell's sum does not
depend on the block it falls in, so the same sizes give the same floats for any number of threads
or processes and whichever pairs are computed together.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

import numpy as np

# Terms computed at once (a block of cells); a cell's sum does not depend on the block it falls in.
BLOCK_TERMS = 1 << 18


@functools.lru_cache(maxsize=1)
def _libm_lgamma():
    """The C library's ``lgamma`` (the one scikit-learn's compiled loop calls), or None where this
    process cannot reach it; then scipy's ``gammaln`` stands in (the same values but for the last bit
    of a sixth of them)."""
    # The math library by name (Linux: libm.so.6; macOS: libSystem's), else what the process has loaded.
    for library in dict.fromkeys((ctypes.util.find_library("m"), None)):
        try:
            function = ctypes.CDLL(library).lgamma
        except (OSError, AttributeError, TypeError):
            continue
        function.restype = ctypes.c_double
        function.argtypes = [ctypes.c_double]
        return function
    return None


@functools.lru_cache(maxsize=4)
def _log_factorials(n: int) -> np.ndarray:
    """``lgamma(x + 1)`` for x = 0 .. n, as scikit-learn's loop calls it."""
    lgamma = _libm_lgamma()
    if lgamma is None:
        from scipy.special import gammaln

        return gammaln(np.arange(1, n + 2, dtype=np.float64))
    return np.array([lgamma(float(x)) for x in range(1, n + 2)], dtype=np.float64)


def cell_sums(rows, columns, n: int) -> np.ndarray:
    """Each cell's part of scikit-learn's EMI: for a row of ``rows[c]`` texts and a column of
    ``columns[c]`` texts out of ``n``, the sum over the cell's possible counts of scikit-learn's term.

    Args:
        rows (numpy.ndarray): Row sums (cluster sizes, >= 1), one per cell.
        columns (numpy.ndarray): Column sums, one per cell.
        n (int): The texts (the table's total).

    Returns:
        numpy.ndarray: float64, one per cell.
    """
    # Imported here: a grid worker imports this module before it limits SciPy's threads.
    from scipy.special import gammaln

    rows = np.asarray(rows, dtype=np.int64)
    columns = np.asarray(columns, dtype=np.int64)
    out = np.zeros(rows.size, dtype=np.float64)
    if rows.size == 0:
        return out
    factorials = _log_factorials(n)
    top = int(max(rows.max(), columns.max()))
    # Per count n_ij, as scikit-learn builds them (n_ij = 0 is never a term; 1 avoids log(0)).
    nijs = np.arange(0, top + 1, dtype=np.float64)
    nijs[0] = 1
    term1 = nijs / n
    log_nnij = np.log(n) + np.log(nijs)
    gln_nnij = gammaln(nijs + 1) + gammaln(n + 1)
    start = np.maximum(1, rows - n + columns)
    length = np.maximum(np.minimum(rows, columns) + 1 - start, 0)
    ends = np.cumsum(length)
    first = 0
    while first < rows.size:
        # The cells whose terms fit the block (at least one cell).
        last = max(int(np.searchsorted(ends, (ends[first - 1] if first else 0) + BLOCK_TERMS, side="right")),
                   first + 1)
        out[first:last] = _block(rows[first:last], columns[first:last], start[first:last], length[first:last], n,
                                 factorials, term1, log_nnij, gln_nnij)
        first = last
    return out


def _block(a, b, start, length, n, factorials, term1, log_nnij, gln_nnij) -> np.ndarray:
    """:func:`cell_sums` for one block of cells; scikit-learn's operations in its order."""
    from scipy.special import gammaln

    cell = np.repeat(np.arange(a.size), length)
    offset = np.cumsum(length) - length
    nij = np.arange(int(length.sum()), dtype=np.int64) - np.repeat(offset - start, length)
    # Per cell: gln_a[i] + gln_b[j] + gln_Na[i] + gln_Nb[j], summed left to right.
    fixed = ((gammaln(a + 1) + gammaln(b + 1)) + gammaln(n - a + 1)) + gammaln(n - b + 1)
    a_t, b_t = a[cell], b[cell]
    gln = (((fixed[cell] - gln_nnij[nij]) - factorials[a_t - nij]) - factorials[b_t - nij]) - factorials[
        n - a_t - b_t + nij]
    # A size 0 has no terms; its log is never read.
    term2 = (log_nnij[nij] - np.log(np.maximum(a, 1))[cell]) - np.log(np.maximum(b, 1))[cell]
    terms = (term1[nij] * term2) * np.exp(gln)
    # bincount adds each cell's terms one after another, in order of n_ij.
    return np.bincount(cell, weights=terms, minlength=a.size)


def expected_mutual_informations(sizes, pairs, n: int) -> np.ndarray:
    """scikit-learn's ``expected_mutual_information`` of each pair of partitions of the same ``n`` texts.

    Args:
        sizes (Sequence[numpy.ndarray]): Each partition's cluster sizes (>= 1, in the order of its
            clusters: the rows or columns of the pair's contingency table).
        pairs (Sequence[tuple[int, int]]): (row partition, column partition) indices.
        n (int): The texts.

    Returns:
        numpy.ndarray: One EMI per pair, in order.
    """
    sizes = [np.asarray(s, dtype=np.int64) for s in sizes]
    out = np.zeros(len(pairs), dtype=np.float64)
    # A labelling of one cluster has zero entropy: EMI 0, as scikit-learn returns it.
    pairs = [(index, i, j) for index, (i, j) in enumerate(pairs) if sizes[i].size > 1 and sizes[j].size > 1]
    # Every (row size, column size) the pairs hold, once: a table over the sizes that occur.
    values = np.unique(np.concatenate([sizes[k] for pair in pairs for k in pair[1:]] or [np.zeros(0, np.int64)]))
    where = [np.searchsorted(values, s) for s in sizes]
    needed = np.zeros((values.size, values.size), dtype=bool)
    for _, i, j in pairs:
        needed[np.ix_(where[i], where[j])] = True
    row, column = np.nonzero(needed)
    table = np.zeros(needed.shape, dtype=np.float64)
    table[row, column] = cell_sums(values[row], values[column], n)
    for index, i, j in pairs:
        cells = table[where[i][:, None], where[j][None, :]].ravel()
        out[index] = np.add.accumulate(cells)[-1]  # one after another, row by row, as scikit-learn adds
    return out


def expected_mutual_information(rows, columns, n: int) -> float:
    """scikit-learn's ``expected_mutual_information`` of a contingency table with these row and
    column sums (cluster sizes, >= 1) over ``n`` texts."""
    return float(expected_mutual_informations([rows, columns], [(0, 1)], n)[0])
