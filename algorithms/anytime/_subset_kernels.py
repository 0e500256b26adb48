"""Numba kernels of the per-set solves (:mod:`algorithms.anytime.subsets`) and of the
per-set figures on statistics (private; they trust their input, release the GIL).

They read the parts of a (D, D) symmetric matrix a computed set needs, row by row, instead
of a fancy-indexed copy (``C[np.ix_(rows, cols)]`` gathers element by element through
temporaries) or a product with the whole matrix (``C @ w`` reads all D² entries even
when ``w`` has ``k << D`` non-zeros). Compiled at import for contiguous float64 arrays and
int64 indices, read-only or not (the callers pass nothing else).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types

# the inputs are only read: typed read-only, which also takes writable arrays (a fitted
# model loaded from a read-only memory map answers through the same kernels)
_MATRIX = types.Array(types.float64, 2, "C", readonly=True)
_VECTOR = types.Array(types.float64, 1, "C", readonly=True)
_INDEX = types.Array(types.int64, 1, "C", readonly=True)


@njit(types.float64[:, ::1](_MATRIX, _INDEX, _INDEX), cache=True, nogil=True)
def gather(C: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``C[np.ix_(rows, cols)]`` as a new C-contiguous array. O(|rows|·|cols|)."""
    out = np.empty((rows.shape[0], cols.shape[0]))
    for a in range(rows.shape[0]):
        src = C[rows[a]]
        dst = out[a]
        for b in range(cols.shape[0]):
            dst[b] = src[cols[b]]
    return out


@njit(types.float64[::1](_MATRIX, _VECTOR, _INDEX, _VECTOR, _INDEX), cache=True, nogil=True)
def residual_at(C: np.ndarray, b: np.ndarray, idx: np.ndarray, w: np.ndarray,
                feats: np.ndarray) -> np.ndarray:
    """``(b − C[:, idx] w)[feats]`` for symmetric ``C``: row ``f`` of ``C`` at ``idx``
    for each ``f`` in ``feats``. O(|feats|·|idx|)."""
    out = np.empty(feats.shape[0])
    for a in range(feats.shape[0]):
        row = C[feats[a]]
        total = 0.0
        for j in range(idx.shape[0]):
            total += row[idx[j]] * w[j]
        out[a] = b[feats[a]] - total
    return out


@njit(types.float64(_MATRIX, _INDEX, _VECTOR), cache=True, nogil=True)
def quadratic_form(M: np.ndarray, idx: np.ndarray, c: np.ndarray) -> float:
    """``c ᵀ M[idx, idx] c`` (``c`` given on ``idx``). O(|idx|²)."""
    total = 0.0
    for a in range(idx.shape[0]):
        row = M[idx[a]]
        inner = 0.0
        for j in range(idx.shape[0]):
            inner += row[idx[j]] * c[j]
        total += c[a] * inner
    return total
