"""Numba validation of CSR arrays: one pass, no GIL, the first problem found."""

from __future__ import annotations

import numpy as np
from numba import njit

OK, NEGATIVE, TOO_LARGE, NOT_FINITE, DUPLICATE = range(5)


@njit(cache=True, nogil=True)
def _check_rows(indptr, indices, values, n_features):
    """(code, row, position) of the first problem; code OK when none. O(nnz) when each
    row's indices increase; a row that does not is checked on a sorted copy, O(m log m)."""
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
            if not np.isfinite(values[k]):
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
               n_features: int) -> tuple[int, int, int]:
    """Validate CSR arrays against ``n_features``: ``(code, row, position)``."""
    return _check_rows(indptr, indices, values, np.int64(n_features))
