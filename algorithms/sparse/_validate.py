"""Numba validation of CSR arrays, no GIL: branch-free passes prove the usual case (every
index in range, values finite, rows sorted); otherwise a row-by-row pass finds the first
problem. ``values`` are float64 (the CSR invariant).

With ``bounded`` (the service's ingestion) a value must also satisfy ``|x| < 2^50``
(``MAX_ABS_VALUE``, about 1.1e15, above any millisecond timestamp): within that range no
learner's state can overflow, squares and sums of squares of a row staying below 1e35, far
from float64's 1.8e308. Guards of the branch-free passes: ``benchmarks/online.py`` (training
from a scipy matrix, validation included) and the service's ingestion
(``load_tests/service_load.py``)."""

from __future__ import annotations

import numpy as np
from numba import njit

OK, NEGATIVE, TOO_LARGE, NOT_FINITE, DUPLICATE = range(5)


_EXPONENT = np.int64(0x7FF0000000000000)  # float64 exponent bits: all ones = inf or NaN
MAX_ABS_VALUE = 2.0 ** 50
_LIMIT = np.int64((1023 + 50) << 52)  # exponent bits of 2^50: |x| >= 2^50 from here up


@njit(cache=True, nogil=True)
def _all_finite(values, bounded=False):
    """True when no float64 value is inf or NaN (and, ``bounded``, every ``|x| < 2^50``): an
    OR over the exponent bits (inf and NaN have the largest exponent), no branch (a loop that
    can stop early does not vectorize). O(nnz)."""
    bits = values.view(np.int64)
    limit = _LIMIT if bounded else _EXPONENT
    special = np.int64(0)
    for k in range(len(bits)):
        special |= np.int64((bits[k] & _EXPONENT) >= limit)
    return special == 0


@njit(cache=True, nogil=True)
def _straddling_decreases(indptr, indices):
    """How many of the flat array's decreases (``indices[k] <= indices[k - 1]``) fall on a
    boundary between two rows rather than inside one. O(rows)."""
    straddling = np.int64(0)
    previous = np.int64(0)
    for row in range(1, len(indptr) - 1):
        start = indptr[row]
        if previous < start < len(indices):  # a boundary between two non-empty stretches
            straddling += np.int64(indices[start] <= indices[start - 1])
        previous = max(previous, start)
    return straddling


@njit(cache=True, nogil=True)
def _index_stats(indices):
    """(smallest, largest, decreases) of the flat index array in one vectorized pass;
    (0, -1, 0) when it is empty. O(nnz)."""
    if len(indices) == 0:
        return np.int64(0), np.int64(-1), np.int64(0)
    low = indices[0]
    high = indices[0]
    decreases = np.int64(0)
    for k in range(1, len(indices)):
        index = indices[k]
        low = min(low, index)
        high = max(high, index)
        decreases += np.int64(index <= indices[k - 1])
    return np.int64(low), np.int64(high), decreases


@njit(cache=True, nogil=True)
def _rows_increasing(indptr, indices):
    """True when each row's indices strictly increase. O(nnz + rows)."""
    return _index_stats(indices)[2] == _straddling_decreases(indptr, indices)


@njit(cache=True, nogil=True)
def _valid_and_sorted(indptr, indices, values, n_features, bounded=False):
    """The usual case, proved with branch-free passes: every index in [0, d), every value
    finite (and in range, ``bounded``), each row's indices strictly increasing (so no
    duplicates). False says only that the exact row-by-row check must run."""
    low, high, decreases = _index_stats(indices)
    return (low >= 0 and high < n_features and _all_finite(values, bounded)
            and decreases == _straddling_decreases(indptr, indices))


@njit(cache=True, nogil=True)
def _check_rows(indptr, indices, values, n_features, bounded):
    """(code, row, position) of the first problem; code OK when none. O(nnz) when each
    row's indices increase; a row that does not is checked on a sorted copy, O(m log m)."""
    if _valid_and_sorted(indptr, indices, values, n_features, bounded):
        return OK, -1, -1
    return _first_problem(indptr, indices, values, n_features, bounded)


@njit(cache=True, nogil=True)
def _first_problem(indptr, indices, values, n_features, bounded=False):
    """The row-by-row check: (code, row, position) of the first problem, OK when none."""
    for row in range(len(indptr) - 1):
        lo, hi = indptr[row], indptr[row + 1]
        increasing = True
        previous = -1
        for k in range(lo, hi):
            index = indices[k]
            if index < 0:
                return NEGATIVE, row, k
            if index >= n_features:
                return TOO_LARGE, row, k
            if not np.isfinite(values[k]) or (bounded and abs(values[k]) >= MAX_ABS_VALUE):
                return NOT_FINITE, row, k
            if index <= previous:
                increasing = False
            previous = index
        if not increasing:
            ordered = np.sort(indices[lo:hi])
            for k in range(1, hi - lo):
                if ordered[k] == ordered[k - 1]:
                    return DUPLICATE, row, lo
    return OK, -1, -1


def check_rows(indptr: np.ndarray, indices: np.ndarray, values: np.ndarray,
               n_features: int, *, bounded: bool = False) -> tuple[int, int, int]:
    """Validate CSR arrays against ``n_features``: ``(code, row, position)``; ``bounded``
    adds the value range ``|x| < MAX_ABS_VALUE`` (code NOT_FINITE)."""
    return _check_rows(indptr, indices, values, np.int64(n_features), bool(bounded))
