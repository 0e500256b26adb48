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

from algorithms.anytime._kernels import cholesky_pivoted, forward_solve

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


@njit(types.float64(_MATRIX, _VECTOR, _VECTOR, types.float64, types.float64, types.float64,
                    _INDEX, _VECTOR, types.float64), cache=True, nogil=True)
def support_explained_variance(mxx: np.ndarray, mxy: np.ndarray, mean_x: np.ndarray,
                               n: float, mean_y: float, myy: float, support: np.ndarray,
                               c: np.ndarray, intercept: float) -> float:
    """EV of ``x·w + intercept`` on centred statistics (``mxx``, ``mxy``, ``myy`` sums over
    ``n`` rows, means ``mean_x``, ``mean_y``), ``w`` = ``c`` on ``support``, 0 elsewhere:
    ``1 − MSE / Var(y)``, ``MSE = Var(y) − 2 wᵀCov(x,y) + wᵀCov(x) w + bias²``,
    ``bias = ȳ − intercept − x̄ᵀw``; 0 when ``Var(y) <= 0``. O(|support|²)."""
    var_y = myy / n
    if var_y <= 0:
        return 0.0
    linear = 0.0
    shift = 0.0
    for a in range(support.shape[0]):
        linear += c[a] * mxy[support[a]]
        shift += c[a] * mean_x[support[a]]
    bias = mean_y - intercept - shift
    mse = var_y - 2.0 * linear / n + quadratic_form(mxx, support, c) / n + bias * bias
    return 1.0 - mse / var_y


@njit(types.float64[::1](types.Array(types.float64, 2, "A", readonly=True), _VECTOR),
      cache=True)
def solve_factored(L: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``(L Lᵀ)⁻¹ v`` for lower-triangular ``L`` (any strides: a leading block of a larger
    factor is a view): forward then back substitution, O(k²).
    For the small factors of a served set (a few microseconds, so it keeps the GIL: no
    hand-over to another thread and back in the middle of an answer)."""
    k = L.shape[0]
    a = np.empty(k)
    for i in range(k):
        row = L[i]
        total = v[i]
        for j in range(i):
            total -= row[j] * a[j]
        a[i] = total / row[i]
    x = np.empty(k)
    for i in range(k - 1, -1, -1):
        total = a[i]
        for j in range(i + 1, k):
            total -= L[j, i] * x[j]
        x[i] = total / L[i, i]
    return x


@njit(cache=True)
def extend_factor(C, L_P, dep_P, P, R, tol_R):
    """The factor of ``C`` over ``P`` then ``R`` from ``L_P`` (the factor over ``P``):
    ``[[L_P, 0], [Vᵀ, L_R]]`` with ``V = L_P⁻¹ C_{P,R}`` (rows of dependent directions 0)
    and ``L_R L_Rᵀ = C_{R,R} − VᵀV``. Returns ``(L, schur, ok)``: ``ok`` False when a pivot
    of ``L_R`` is at or below ``tol_R`` (the caller factors ``schur`` with the sanitizing
    kernel; ``L``'s last block is then incomplete). O(k²·r + k·r² + r³), one call for the
    small sets of a served model (it keeps the GIL)."""
    k, r = P.shape[0], R.shape[0]
    L = np.zeros((k + r, k + r))
    for i in range(k):
        for j in range(i + 1):
            L[i, j] = L_P[i, j]
    for c in range(r):  # row k + c of L holds column c of V
        row = L[k + c]
        col = R[c]
        for i in range(k):
            if dep_P[i]:
                row[i] = 0.0
                continue
            s = C[P[i], col]
            for p in range(i):
                s -= L_P[i, p] * row[p]
            row[i] = s / L_P[i, i]
    schur = np.empty((r, r))
    for a in range(r):
        for b in range(a + 1):
            s = C[R[a], R[b]]
            for p in range(k):
                s -= L[k + a, p] * L[k + b, p]
            schur[a, b] = s
            schur[b, a] = s
    for j in range(r):
        s = schur[j, j]
        for p in range(j):
            s -= L[k + j, k + p] * L[k + j, k + p]
        if not s > tol_R[j]:
            return L, schur, False
        pivot = np.sqrt(s)
        L[k + j, k + j] = pivot
        for i in range(j + 1, r):
            t = schur[i, j]
            for p in range(j):
                t -= L[k + i, k + p] * L[k + j, k + p]
            L[k + i, k + j] = t / pivot
    return L, schur, True


@njit(cache=True)
def whitened_scores(C, feats, starts, r_left, tol, V, use_V, half):
    """Per group ``g`` (features ``feats[starts[g]:starts[g+1]]``): ``‖L_g⁻¹ r_g‖²`` (times
    ``half``) with ``L_g`` the pivoted factor of ``C_gg`` (``− V_gᵀV_g`` when ``use_V``:
    the Schur complement against the computed set). O(Σ_g (k·d_g² + d_g³)), one call."""
    groups = starts.shape[0] - 1
    out = np.empty(groups)
    for g in range(groups):
        lo, hi = starts[g], starts[g + 1]
        d = hi - lo
        block = np.empty((d, d))
        for a in range(d):
            for b in range(d):
                s = C[feats[lo + a], feats[lo + b]]
                if use_V:
                    for p in range(V.shape[0]):
                        s -= V[p, lo + a] * V[p, lo + b]
                block[a, b] = s
        Lg = np.empty((d, d))
        cholesky_pivoted(block, tol[feats[lo:hi]], Lg)
        z = np.empty(d)
        out[g] = half * forward_solve(Lg, r_left[lo:hi].copy(), z)
    return out
