r"""Solves for arbitrary computed sets ``S``, reusing the factor of the trained sequence.

Serving asks, for any set ``S`` of groups a caller has computed, for ``w(S) = C_S⁻¹ b_S`` and
for the group to compute next. Factorizing ``C_S`` from scratch costs O(k³) (``k`` = the
features of ``S``: seconds at k = 2,500). But the groups of the trained sequence are the
ones callers compute first, so :class:`SubsetSolver` factors ``C`` once over the features
of the whole sequence, in sequence order, ``C_seq = L Lᵀ``; the leading block of ``L`` over
the first ``p`` groups is the factor of that prefix. For ``S`` = (the longest prefix ``P``
of the sequence inside ``S``) ∪ ``R`` (its other features), the factor of ``C_S`` (features
ordered ``P`` then ``R``) is the block update

    L_S = [[L_P, 0], [Vᵀ, L_R]],   V = L_P⁻¹ C_{P,R},   L_R Lᵀ_R = C_{R,R} − VᵀV,

at O(k_P²·r + k_P·r² + r³) with ``r = |R|`` (BLAS triangular solves and products), and
``w(S)`` follows by two triangular solves, O(k²). A set inside the sequence's prefixes costs
only the solves. :meth:`SubsetSolver.scores` scores each group ``g`` outside ``S`` against
that same factor: the residual ``r = b − C_{:,S} w(S)`` and, for CS-G-FR, the Schur
complement ``C_gg − V_gᵀV_g`` with ``V_g = L_S⁻¹ C_{S,g}`` (one triangular solve for all
candidates together, then O(k·d_g² + d_g³) per group), never a new factorization of ``C_S``;
nothing at all when no group is left.

Dependent directions (a pivot ``<= rtol · C_jj``, possible only with ``alpha = 0``) are
handled as the sequencing does (:mod:`algorithms.anytime.greedy`): when LAPACK's Cholesky
refuses a block, the block is factored by the sanitizing kernel, whose dependent rows become
unit rows with a zero right-hand side. Results (factors with their feature order, solves) are
kept in an LRU bounded in bytes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import scipy.linalg

from algorithms.anytime import _kernels as kernels

RTOL = 1e-9  # a pivot <= RTOL * C_jj is a dependent direction (as the sequencing)


class Factor:
    """The factor of ``C_S`` over the features ``idx`` (in that order): lower ``L`` and the
    mask of dependent directions (unit rows of ``L``)."""

    __slots__ = ("idx", "L", "dependent")

    def __init__(self, idx: np.ndarray, L: np.ndarray, dependent: np.ndarray) -> None:
        self.idx, self.L, self.dependent = idx, L, dependent

    @property
    def nbytes(self) -> int:
        return int(self.idx.nbytes + self.L.nbytes + self.dependent.nbytes)

    def solve(self, v: np.ndarray) -> np.ndarray:
        """``C_S⁻¹ v`` (dependent directions 0). O(k²)."""
        rhs = np.where(self.dependent, 0.0, v)
        a = scipy.linalg.solve_triangular(self.L, rhs, lower=True, check_finite=False)
        return scipy.linalg.solve_triangular(self.L, a, lower=True, trans="T",
                                             check_finite=False)

    def half_solve(self, B: np.ndarray) -> np.ndarray:
        """``L⁻¹ B`` with the dependent rows zeroed (``B``: (k,) or (k, m)). O(k²·m)."""
        out = scipy.linalg.solve_triangular(self.L, B, lower=True, check_finite=False)
        out[self.dependent] = 0.0
        return out


def cholesky(A: np.ndarray, tol: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lower factor of ``A`` and its dependent mask: LAPACK when ``A`` is positive definite
    with no pivot at or below ``tol``, else the sanitizing kernel. O(d³/3)."""
    if A.shape[0] == 0:
        return np.zeros((0, 0)), np.zeros(0, dtype=bool)
    try:
        L = np.linalg.cholesky(A)
        if np.all(np.diag(L) ** 2 > tol):
            return L, np.zeros(A.shape[0], dtype=bool)
    except np.linalg.LinAlgError:
        pass
    L = np.empty_like(A)
    kernels.cholesky_pivoted(np.ascontiguousarray(A), tol, L)
    dependent = np.diag(L) == 0.0
    L[dependent, :] = 0.0
    L[dependent, dependent] = 1.0
    return L, dependent


class SubsetSolver:
    """Factors and solves of ``C_S`` for any set of groups (module docstring).

    ``C`` (D, D) and ``b`` (D,) are the standardized statistics, ``groups`` the feature
    indices of each group, ``sequence`` the trained order of groups, ``cache_bytes`` the
    bound of the LRU of factors. Thread-safe: factors are immutable, the cache is locked.
    """

    def __init__(self, C: np.ndarray, b: np.ndarray, groups: Sequence[np.ndarray],
                 sequence: Sequence[int], *, cache_bytes: int = 64 << 20,
                 rtol: float = RTOL) -> None:
        self.C, self.b, self.groups = C, b, list(groups)
        self.sequence = [int(g) for g in sequence]
        self.tol = rtol * np.maximum(np.diag(C), 1e-300)
        self.cache_bytes = int(cache_bytes)
        self._cache: OrderedDict[frozenset, Factor] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()
        self._prefix: Factor | None = None
        self._prefix_ends = np.cumsum([0] + [len(self.groups[g]) for g in self.sequence])

    # ------------------------------------------------------------------ factors
    def prefix_factor(self) -> Factor:
        """The factor of ``C`` over every sequenced feature, in sequence order (computed
        once, O(k_seq³/3))."""
        with self._lock:
            if self._prefix is not None:
                return self._prefix
        parts = [self.groups[g] for g in self.sequence]
        idx = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        L, dependent = cholesky(self.C[np.ix_(idx, idx)], self.tol[idx])
        factor = Factor(idx, L, dependent)
        with self._lock:
            if self._prefix is None:
                self._prefix = factor
            return self._prefix

    def factor(self, S: frozenset) -> Factor:
        """The factor of ``C_S``, features ordered: the longest sequence prefix inside
        ``S``, then the other groups of ``S`` by id (cached)."""
        with self._lock:
            hit = self._cache.get(S)
            if hit is not None:
                self._cache.move_to_end(S)
                return hit
        factor = self._build(S)
        with self._lock:
            if S not in self._cache and factor.nbytes <= self.cache_bytes:
                self._cache[S] = factor
                self._held += factor.nbytes
                while self._held > self.cache_bytes:
                    _, old = self._cache.popitem(last=False)
                    self._held -= old.nbytes
        return factor

    def _build(self, S: frozenset) -> Factor:
        p = 0
        while p < len(self.sequence) and self.sequence[p] in S:
            p += 1
        rest = sorted(set(S) - set(self.sequence[:p]))
        R = np.concatenate([self.groups[g] for g in rest]) if rest else \
            np.zeros(0, dtype=np.int64)
        if p == 0:
            L, dependent = cholesky(self.C[np.ix_(R, R)], self.tol[R])
            return Factor(R, L, dependent)
        whole = self.prefix_factor()
        k = int(self._prefix_ends[p])
        P = whole.idx[:k]
        L_P, dep_P = whole.L[:k, :k], whole.dependent[:k]
        if not len(R):
            return Factor(P, L_P, dep_P)
        V = scipy.linalg.solve_triangular(L_P, self.C[np.ix_(P, R)], lower=True,
                                          check_finite=False)
        V[dep_P] = 0.0
        L_R, dep_R = cholesky(self.C[np.ix_(R, R)] - V.T @ V, self.tol[R])
        L = np.zeros((k + len(R), k + len(R)))
        L[:k, :k] = L_P
        L[k:, :k] = V.T
        L[k:, k:] = L_R
        return Factor(np.concatenate([P, R]), L, np.concatenate([dep_P, dep_R]))

    # ------------------------------------------------------------------ solves
    def weights(self, S: frozenset) -> tuple[np.ndarray, np.ndarray]:
        """``(idx, w_S)``: the features of ``S`` and ``C_S⁻¹ b_S`` on them (standardized).
        O(k²) once the factor is known."""
        if not S:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        factor = self.factor(S)
        return factor.idx, factor.solve(self.b[factor.idx])

    def scores(self, S: frozenset, kind: int, remaining: np.ndarray) -> np.ndarray:
        """The greedy criterion (:mod:`algorithms.anytime.greedy`) of each ``remaining``
        group given exactly ``S`` (-1 elsewhere), against ``S``'s factor: O(k²·r) for all
        ``r`` remaining features plus O(k·d_g² + d_g³) per group; nothing when none is
        left."""
        scores = np.full(len(self.groups), -1.0)
        left = np.flatnonzero(remaining)
        if not len(left):
            return scores
        C, b = self.C, self.b
        r = np.asarray(b, dtype=np.float64)
        factor = None
        if S:
            factor = self.factor(S)
            w = factor.solve(b[factor.idx])
            full = np.zeros(len(b))
            full[factor.idx] = w
            r = b - C @ full  # C symmetric: no copy of the k columns
        V = column = None
        if kind == kernels.FR and factor is not None:
            feats_left = np.concatenate([self.groups[g] for g in left])
            V = factor.half_solve(np.ascontiguousarray(C[np.ix_(factor.idx, feats_left)]))
            column = np.full(len(b), -1, dtype=np.int64)
            column[feats_left] = np.arange(len(feats_left))
        z = np.empty(max(len(self.groups[g]) for g in left))
        for g in left:
            feats = self.groups[g]
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
            kernels.cholesky_pivoted(np.ascontiguousarray(block), self.tol[feats], Lg)
            total = kernels.forward_solve(Lg, rg, z[:len(feats)])
            scores[g] = 0.5 * total if kind == kernels.FR else total
        return scores

    def cached_bytes(self) -> int:
        with self._lock:
            return self._held
