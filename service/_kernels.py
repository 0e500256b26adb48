"""Numba kernels of the service's input validation (trust nothing, no GIL).

Row checks are ``algorithms.sparse._validate``'s; this adds the copy of wire data ahead of
them."""

from __future__ import annotations

import numpy as np
from numba import njit

from algorithms.sparse._validate import (
    DUPLICATE,
    NEGATIVE,
    NOT_FINITE,
    OK,
    TOO_LARGE,
    _first_problem,
    _valid_and_sorted,
    check_rows,
)

__all__ = ["DUPLICATE", "NEGATIVE", "NOT_FINITE", "OK", "TOO_LARGE", "check_copy_rows",
           "check_rows"]


@njit(cache=True, nogil=True)
def _check_copy_rows(indptr, indices_in, values_in, indices_out, values_out, n_features):
    """Copy the (read-only, maybe float32) wire views into the batch's own int32 / float64
    arrays, then check those with ``check_rows``'s two stages (values bounded): branch-free
    passes for the usual case, the row-by-row check to name a problem."""
    for k in range(len(indices_in)):
        indices_out[k] = indices_in[k]
        values_out[k] = np.float64(values_in[k])
    if _valid_and_sorted(indptr, indices_out, values_out, n_features, True):
        return OK, -1, -1
    return _first_problem(indptr, indices_out, values_out, n_features, True)


def check_copy_rows(indptr: np.ndarray, indices: np.ndarray, values: np.ndarray,
                    n_features: int) -> tuple[int, int, int, np.ndarray, np.ndarray]:
    """Validate wire views and copy them out: (code, row, position, indices, values)."""
    indices_out = np.empty(len(indices), dtype=np.int32)
    values_out = np.empty(len(values), dtype=np.float64)
    code, row, position = _check_copy_rows(indptr, indices, values, indices_out, values_out,
                                           np.int64(n_features))
    return code, row, position, indices_out, values_out


@njit(cache=True, nogil=True)
def view_scores(indptr, indices, values, weight_index, weight_value, out):
    """``out[r] = Σ_k values[k] · w[indices[k]]`` over row r, with the weights given as
    sorted ``(weight_index, weight_value)`` pairs (binary search per non-zero):
    O(nnz · log |w|), no dense weight array."""
    n = len(weight_index)
    for row in range(len(indptr) - 1):
        total = 0.0
        for k in range(indptr[row], indptr[row + 1]):
            j = indices[k]
            lo, hi = 0, n
            while lo < hi:
                mid = (lo + hi) >> 1
                if weight_index[mid] < j:
                    lo = mid + 1
                else:
                    hi = mid
            if lo < n and weight_index[lo] == j:
                total += values[k] * weight_value[lo]
        out[row] = total
