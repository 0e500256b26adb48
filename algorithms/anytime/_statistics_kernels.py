"""Numba kernels of :class:`~algorithms.anytime.statistics.SufficientStatistics` (private;
they trust their input and update the arrays they are given in place).

A batch of ``m`` sparse rows is folded into centred statistics ``(n, x̄, Mxx, ȳ, Mxy, Myy)``
without any (D, D) temporary: the rows' raw products ``Σ x xᵀ`` are scattered straight into
``Mxx`` (O(Σ nnz_row²), only the touched entries), then one pass over ``Mxx`` adds the two
rank-one terms of Chan, Golub and LeVeque's pairwise merge,

    Mxx += Σ x xᵀ − m x̄_b x̄_bᵀ + f δδᵀ,   δ = x̄_b − x̄,   f = n m / (n + m),

(the first two are the batch's own centred co-moment ``Mxx_b``). So a batch costs
O(Σ nnz_row² + D²) with one read-and-write sweep of the (D, D) array, whatever ``m``: a
one-example batch no longer pays for the allocation, the sparse product and the five
(D, D) temporaries of the array expression. The kernels release the GIL and are compiled
at import for the one signature their callers use (contiguous float64 / int64 arrays).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types

_IN_INDEX = types.Array(types.int64, 1, "C", readonly=True)  # rows are only read
_IN_VALUES = types.Array(types.float64, 1, "C", readonly=True)
_IN_MATRIX = types.Array(types.float64, 2, "C", readonly=True)
_F8 = types.float64


@njit(types.UniTuple(_F8, 2)(_IN_INDEX, _IN_INDEX, _IN_VALUES, _IN_VALUES, _F8,
                              _F8[::1], _F8[:, ::1], _F8[::1], _F8, _F8), cache=True,
      nogil=True)
def fold_sparse_rows(indptr: np.ndarray, indices: np.ndarray, values: np.ndarray,
                     y: np.ndarray, n: float, mean_x: np.ndarray, mxx: np.ndarray,
                     mxy: np.ndarray, mean_y: float, myy: float) -> tuple[float, float]:
    """Fold CSR rows (``m = len(indptr) − 1 >= 1``; indices < D) and targets ``y`` (m,)
    into statistics of ``n`` examples: ``mean_x``, ``mxx``, ``mxy`` in place; returns the
    new ``(mean_y, myy)``. O(Σ nnz_row² + D²)."""
    m = indptr.shape[0] - 1
    D = mean_x.shape[0]
    total = n + m
    yb = 0.0
    for r in range(m):
        yb += y[r]
    yb /= m
    myy_b = 0.0
    for r in range(m):
        myy_b += (y[r] - yb) * (y[r] - yb)
    sum_x = np.zeros(D)
    for r in range(m):
        yc = y[r] - yb
        lo, hi = indptr[r], indptr[r + 1]
        for p in range(lo, hi):
            i = indices[p]
            vp = values[p]
            sum_x[i] += vp
            mxy[i] += vp * yc  # Mxy_b = Σ x (y − ȳ_b)
            row = mxx[i]
            for q in range(lo, hi):
                row[indices[q]] += vp * values[q]
    f = n * m / total
    dy = yb - mean_y
    mu = sum_x / m
    delta = mu - mean_x
    for i in range(D):
        a = f * delta[i]
        b = m * mu[i]
        row = mxx[i]
        if b != 0.0:
            for j in range(D):
                row[j] += a * delta[j] - b * mu[j]
        elif a != 0.0:
            for j in range(D):
                row[j] += a * delta[j]
        mxy[i] += a * dy
    for i in range(D):
        mean_x[i] += delta[i] * (m / total)
    return mean_y + dy * (m / total), myy + myy_b + f * dy * dy


@njit(types.void(_F8[:, ::1], _IN_MATRIX, _IN_VALUES, _F8), cache=True, nogil=True)
def merge_into(mxx: np.ndarray, other: np.ndarray, delta: np.ndarray, f: float) -> None:
    """``mxx += other + f δδᵀ`` in one sweep (D, D). O(D²)."""
    D = mxx.shape[0]
    for i in range(D):
        a = f * delta[i]
        row, src = mxx[i], other[i]
        for j in range(D):
            row[j] += src[j] + a * delta[j]
