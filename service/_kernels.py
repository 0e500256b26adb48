"""Numba kernels of the service's input validation (trust nothing, one pass, no GIL).

Row checks are ``algorithms.sparse._validate``'s; this adds the check-and-copy of wire data."""

from __future__ import annotations

import numpy as np
from numba import njit

from algorithms.sparse._validate import (
    DUPLICATE,
    NEGATIVE,
    NOT_FINITE,
    OK,
    TOO_LARGE,
    _all_finite,
    _rows_increasing,
    check_rows,
)

__all__ = ["DUPLICATE", "NEGATIVE", "NOT_FINITE", "OK", "TOO_LARGE", "check_copy_rows",
           "check_rows"]


@njit(cache=True, nogil=True)
def _check_copy_rows(indptr, indices_in, values_in, indices_out, values_out, n_features):
    """The row checks of ``check_rows`` fused with the copy of the (read-only, maybe
    float32) wire views into the batch's own int32 / float64 arrays. The usual case is
    proved by branch-free passes (copy with the index range, finite values, sorted rows);
    otherwise the row-by-row pass below names the first problem."""
    low = np.int64(0)
    high = np.int64(-1)
    for k in range(len(indices_in)):
        index = np.int64(indices_in[k])
        indices_out[k] = index
        values_out[k] = np.float64(values_in[k])
        low = min(low, index)
        high = max(high, index)
    if low >= 0 and high < n_features and _all_finite(values_out) and \
            _rows_increasing(indptr, indices_out):
        return OK, -1, -1
    n = len(indptr) - 1
    for row in range(n):
        lo, hi = indptr[row], indptr[row + 1]
        increasing = True
        previous = -1
        for k in range(lo, hi):
            index = indices_in[k]
            value = np.float64(values_in[k])
            indices_out[k] = index
            values_out[k] = value
            if index < 0:
                return NEGATIVE, row, k
            if index >= n_features:
                return TOO_LARGE, row, k
            if not np.isfinite(value):
                return NOT_FINITE, row, k
            if index <= previous:
                increasing = False
            previous = index
        if not increasing:
            ordered = np.sort(indices_out[lo:hi])
            for k in range(1, hi - lo):
                if ordered[k] == ordered[k - 1]:
                    return DUPLICATE, row, lo
    return OK, -1, -1


def check_copy_rows(indptr: np.ndarray, indices: np.ndarray, values: np.ndarray,
                    n_features: int) -> tuple[int, int, int, np.ndarray, np.ndarray]:
    """Validate wire views and copy them out: (code, row, position, indices, values)."""
    indices_out = np.empty(len(indices), dtype=np.int32)
    values_out = np.empty(len(values), dtype=np.float64)
    code, row, position = _check_copy_rows(indptr, indices, values, indices_out, values_out,
                                           np.int64(n_features))
    return code, row, position, indices_out, values_out
