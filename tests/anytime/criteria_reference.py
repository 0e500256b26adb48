"""Reference: the greedy criteria given an arbitrary computed set ``S``, from scratch.

What ``algorithms.anytime.subsets.SubsetSolver.scores`` computes against a shared factor,
here with a fresh factorization of ``C_S`` (the criteria of :mod:`algorithms.anytime.greedy`
for any ``S``, not only a prefix): ``L = chol(C_S)``, ``w = C_S⁻¹ b_S``,
``r = b − C_{:,S} w`` and, for FR, the Schur complements
``C_gg − V_gᵀV_g`` with ``V = L⁻¹ C_{S,R}`` over the remaining features ``R``.
Cost O(k³ + k²·|R| + Σ d_g³) with ``k = |S|`` features.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from algorithms.anytime import _kernels as kernels


def _factor(A: np.ndarray, tol: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lower Cholesky factor of ``A`` with dependent rows sanitized to ``e_i``, and their mask."""
    L = np.empty_like(A)
    kernels.cholesky_pivoted(np.ascontiguousarray(A), tol, L)
    dependent = np.diag(L) == 0.0
    L[dependent, :] = 0.0
    L[dependent, dependent] = 1.0
    return L, dependent


def next_group_scores(C: np.ndarray, b: np.ndarray, groups: Sequence[np.ndarray],
                      selected: Sequence[int], kind: int, remaining: np.ndarray,
                      rtol: float = 1e-9) -> np.ndarray:
    """Criterion value (see :mod:`greedy`) of each ``remaining`` group given ``selected``;
    -1 elsewhere. ``C`` (D, D), ``b`` (D,) standardized statistics."""
    scores = np.full(len(groups), -1.0)
    tol = rtol * np.maximum(np.diag(C), 1e-300)
    r = np.asarray(b, dtype=np.float64)
    L = None
    idx = np.concatenate([groups[g] for g in selected]) if len(selected) else None
    if idx is not None:
        L, dependent = _factor(C[np.ix_(idx, idx)], tol[idx])
        rhs = np.where(dependent, 0.0, b[idx])[:, None]
        a = kernels.solve_lower(L, rhs)
        w = kernels.solve_lower_transposed(L, a)[:, 0]
        r = b - C[:, idx] @ w
    z = np.empty(max(len(g) for g in groups))
    V = None
    left = np.flatnonzero(remaining)
    if kind == kernels.FR and L is not None and len(left):
        feats_left = np.concatenate([groups[g] for g in left])
        V = kernels.solve_lower(L, np.ascontiguousarray(C[np.ix_(idx, feats_left)]))
        V[dependent] = 0.0
        column = np.full(len(b), -1, dtype=np.int64)
        column[feats_left] = np.arange(len(feats_left))
    for g in left:
        feats = groups[g]
        rg = np.ascontiguousarray(r[feats])
        if kind == kernels.NO_WHITEN:
            scores[g] = float(rg @ rg)
            continue
        if kind == kernels.SINGLE:
            scores[g] = float(np.max(rg ** 2))
            continue
        block = C[np.ix_(feats, feats)]
        if V is not None:
            Vg = V[:, column[feats]]
            block = block - Vg.T @ Vg
        Lg = np.empty_like(block)
        kernels.cholesky_pivoted(np.ascontiguousarray(block), tol[feats], Lg)
        total = kernels.forward_solve(Lg, rg, z[:len(feats)])
        scores[g] = 0.5 * total if kind == kernels.FR else total
    return scores
