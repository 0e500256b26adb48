"""Numba kernels of the greedy group sequencing (private; they trust their input).

Groups are contiguous after a permutation: group ``g`` owns positions ``starts[g]:starts[g+1]``
and its ``d_g × d_g`` block lives in a flat array at ``block_offsets[g]`` (row-major). A
Cholesky factor with a pivot ``<= tol_i`` marks that direction as dependent on earlier ones:
its column is zero and solves skip it (the pseudo-inverse of a PSD matrix, no NaN).
The kernels release the GIL (``nogil``), so a sequencing in a worker thread leaves the
service's event loop free.
"""

from __future__ import annotations

import numpy as np
from numba import njit

OMP, FR, NO_WHITEN, SINGLE = 0, 1, 2, 3


@njit(cache=True, nogil=True)
def pick_best(gains: np.ndarray, costs: np.ndarray, eligible: np.ndarray) -> int:
    """The eligible group with a gain >= 0 (NaN: not) of the largest ``gain / cost``; the one
    of the largest gain among those of cost <= 0 first; the lowest id among ties; -1 if
    none. O(J)."""
    best, best_ratio, free, free_gain = -1, -np.inf, -1, -np.inf
    for g in range(gains.shape[0]):
        if not eligible[g] or not gains[g] >= 0:
            continue
        if costs[g] <= 0:
            if free < 0 or gains[g] > free_gain:
                free, free_gain = g, gains[g]
        elif best < 0 or gains[g] / costs[g] > best_ratio:
            best, best_ratio = g, gains[g] / costs[g]
    return free if free >= 0 else best


@njit(cache=True, nogil=True)
def cholesky_pivoted(A: np.ndarray, tol: np.ndarray, L: np.ndarray) -> None:
    """Lower ``L`` with ``L Lᵀ = A`` on the non-dependent directions (pivot <= tol -> 0).

    ``A``, ``L`` (d, d); ``tol`` (d,). O(d³/3).
    """
    d = A.shape[0]
    for j in range(d):
        for i in range(d):
            L[i, j] = 0.0
    for j in range(d):
        s = A[j, j]
        for p in range(j):
            s -= L[j, p] * L[j, p]
        if s <= tol[j]:
            continue
        pivot = np.sqrt(s)
        L[j, j] = pivot
        for i in range(j + 1, d):
            t = A[i, j]
            for p in range(j):
                t -= L[i, p] * L[j, p]
            L[i, j] = t / pivot


@njit(cache=True, nogil=True)
def forward_solve(L: np.ndarray, v: np.ndarray, out: np.ndarray) -> float:
    """``out = L⁻¹ v`` skipping dependent rows (zero pivots); returns ``‖out‖²``. O(d²)."""
    d = L.shape[0]
    total = 0.0
    for i in range(d):
        if L[i, i] == 0.0:
            out[i] = 0.0
            continue
        s = v[i]
        for p in range(i):
            s -= L[i, p] * out[p]
        out[i] = s / L[i, i]
        total += out[i] * out[i]
    return total


@njit(cache=True, nogil=True)
def gather_blocks(C: np.ndarray, starts: np.ndarray, block_offsets: np.ndarray) -> np.ndarray:
    """The diagonal blocks ``C_gg`` in the flat layout. O(Σ d_g²)."""
    out = np.empty(block_offsets[-1])
    for g in range(len(starts) - 1):
        s0 = starts[g]
        d = starts[g + 1] - s0
        o = block_offsets[g]
        for i in range(d):
            for j in range(d):
                out[o + i * d + j] = C[s0 + i, s0 + j]
    return out


@njit(cache=True, nogil=True)
def group_factors(blocks: np.ndarray, starts: np.ndarray, block_offsets: np.ndarray,
                  tol: np.ndarray, active: np.ndarray) -> np.ndarray:
    """Pivoted Cholesky factors of every active block, same flat layout. O(Σ d_g³)."""
    out = np.zeros_like(blocks)
    for g in range(len(starts) - 1):
        if not active[g]:
            continue
        d = starts[g + 1] - starts[g]
        o = block_offsets[g]
        A = blocks[o:o + d * d].reshape(d, d)
        L = out[o:o + d * d].reshape(d, d)
        cholesky_pivoted(A, tol[starts[g]:starts[g + 1]], L)
    return out


@njit(cache=True, nogil=True)
def group_scores(kind: int, r: np.ndarray, starts: np.ndarray, blocks: np.ndarray,
                 block_offsets: np.ndarray, tol: np.ndarray, active: np.ndarray,
                 factored: bool) -> np.ndarray:
    """Criterion value of each active group (inactive: -1).

    OMP: ``r_gᵀ C_gg⁻¹ r_g``; FR: ``½ r_gᵀ S_g⁻¹ r_g`` (S_g the Schur complement given the
    selected set); NO_WHITEN: ``‖r_g‖²``; SINGLE: ``‖r_g‖∞²``. ``blocks`` holds C_gg or S_g,
    already factored when ``factored``. O(Σ d_g²) per call, O(Σ d_g³) when not factored.
    """
    n_groups = len(starts) - 1
    scores = np.full(n_groups, -1.0)
    max_d = 0
    for g in range(n_groups):
        max_d = max(max_d, starts[g + 1] - starts[g])
    work = np.empty((max_d, max_d))
    z = np.empty(max_d)
    for g in range(n_groups):
        if not active[g]:
            continue
        s0 = starts[g]
        d = starts[g + 1] - s0
        if kind in (NO_WHITEN, SINGLE):
            total = 0.0
            for i in range(d):
                v = r[s0 + i] * r[s0 + i]
                total = total + v if kind == NO_WHITEN else max(total, v)
            scores[g] = total
            continue
        o = block_offsets[g]
        A = blocks[o:o + d * d].reshape(d, d)
        if factored:
            L = A
        else:
            L = work[:d, :d]
            cholesky_pivoted(A, tol[s0:s0 + d], L)
        total = forward_solve(L, r[s0:s0 + d], z[:d])
        scores[g] = 0.5 * total if kind == FR else total
    return scores


@njit(cache=True, nogil=True)
def downdate_blocks(blocks: np.ndarray, starts: np.ndarray, block_offsets: np.ndarray,
                    new_rows: np.ndarray, local: np.ndarray, active: np.ndarray) -> None:
    """``S_g -= V_gᵀ V_g`` for every active group; ``V = new_rows`` (d_h, w) whose column for
    position ``q`` is ``local[q]``. O(d_h Σ d_g²)."""
    k = new_rows.shape[0]
    for g in range(len(starts) - 1):
        if not active[g]:
            continue
        s0 = starts[g]
        d = starts[g + 1] - s0
        o = block_offsets[g]
        for i in range(d):
            ci = local[s0 + i]
            for j in range(i + 1):
                cj = local[s0 + j]
                s = 0.0
                for p in range(k):
                    s += new_rows[p, ci] * new_rows[p, cj]
                blocks[o + i * d + j] -= s
                if j != i:
                    blocks[o + j * d + i] -= s


@njit(cache=True, fastmath=True, nogil=True)
def project_out(Ch: np.ndarray, Ut: np.ndarray, k: int, ls: int) -> np.ndarray:
    """``T = C_h − Aᵀ U`` with ``U = Utᵀ[:k]`` (k, w) and ``A = U[:, ls:ls+d]``. O(d·k·w).

    ``Ch`` (d, w); ``Ut`` (>= w, >= k) holds U transposed so every inner loop is a contiguous
    dot product of length k (two rows of T at a time).
    """
    d, w = Ch.shape
    A = Ut[ls:ls + d, :k].copy()
    T = Ch.copy()
    for j in range(w):
        row = Ut[j, :k]
        for i in range(0, d - 1, 2):
            a0 = A[i]
            a1 = A[i + 1]
            s0 = 0.0
            s1 = 0.0
            for p in range(k):
                x = row[p]
                s0 += a0[p] * x
                s1 += a1[p] * x
            T[i, j] -= s0
            T[i + 1, j] -= s1
        if d % 2 == 1:
            a0 = A[d - 1]
            s0 = 0.0
            for p in range(k):
                s0 += a0[p] * row[p]
            T[d - 1, j] -= s0
    return T


@njit(cache=True, nogil=True)
def orthogonalize_block(T: np.ndarray, s: int, r_block: np.ndarray, tol: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
    """New factor rows ``V = L⁻¹ T`` and ``a = L⁻¹ r_h``, ``L = chol(T[:, s:s+d])``.

    ``T`` (d, m) is ``C_{h,:} − U_hᵀU`` (its block at columns ``s:s+d`` is the Schur
    complement of the new group); dependent pivots give zero rows. O(d²·m).
    """
    d, m = T.shape
    L = np.empty((d, d))
    S = np.ascontiguousarray(T[:, s:s + d])
    cholesky_pivoted(S, tol, L)
    V = np.zeros((d, m))
    a = np.zeros(d)
    for i in range(d):
        if L[i, i] == 0.0:
            continue
        inv = 1.0 / L[i, i]
        row = V[i]
        row[:] = T[i]
        acc = r_block[i]
        for p in range(i):
            lip = L[i, p]
            if lip != 0.0:
                row -= lip * V[p]
                acc -= lip * a[p]
        row *= inv
        a[i] = acc * inv
    return V, a


@njit(cache=True, nogil=True)
def solve_lower(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``X = L⁻¹ B`` for lower-triangular ``L`` (k, k) with non-zero diagonal, ``B`` (k, n).

    Row-oriented forward substitution, O(k²·n).
    """
    k, n = B.shape
    X = B.copy()
    for i in range(k):
        xi = X[i]
        for p in range(i):
            c = L[i, p]
            if c != 0.0:
                xp = X[p]
                for j in range(n):
                    xi[j] -= c * xp[j]
        inv = 1.0 / L[i, i]
        for j in range(n):
            xi[j] *= inv
    return X


@njit(cache=True, nogil=True)
def solve_lower_transposed(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``X = L⁻ᵀ B`` for lower-triangular ``L`` (k, k), ``B`` (k, n). Back substitution, O(k²n)."""
    k, n = B.shape
    X = B.copy()
    for i in range(k - 1, -1, -1):
        xi = X[i]
        inv = 1.0 / L[i, i]
        for j in range(n):
            xi[j] *= inv
        for p in range(i):
            c = L[i, p]
            if c != 0.0:
                xp = X[p]
                for j in range(n):
                    xp[j] -= c * xi[j]
    return X
