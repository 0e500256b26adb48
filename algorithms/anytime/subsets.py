r"""Solves for arbitrary computed sets ``S``, reusing the factor of the trained sequence.

Serving asks, for any set ``S`` of groups a caller has computed, for ``w(S) = C_S⁻¹ b_S`` and
for the group to compute next. Factorizing ``C_S`` from scratch costs O(k³) (``k`` = the
features of ``S``: seconds at k = 2,500). But the groups of the trained sequence are the
ones callers compute first, so :class:`SubsetSolver` factors ``C`` once over the features
of the whole sequence, in sequence order, ``C_seq = L Lᵀ``; the leading block of ``L`` over
the first ``p`` groups is the factor of that prefix. For ``S`` = ``P`` ∪ ``R``, where ``P``
is the set with a known factor inside ``S`` holding the most features (the longest prefix of
the sequence inside ``S``, or a larger cached subset of ``S``: so ``S ∪ {g}``, asked for
the next group's expected gain right after ``S``, costs one group's update) and
``R`` its other features, the factor of ``C_S`` (features ordered ``P`` then ``R``) is the
block update

    L_S = [[L_P, 0], [Vᵀ, L_R]],   V = L_P⁻¹ C_{P,R},   L_R Lᵀ_R = C_{R,R} − VᵀV,

at O(k_P²·r + k_P·r² + r³) with ``r = |R|`` (BLAS triangular solves and products), and
``w(S)`` follows by two triangular solves, O(k²). A set inside the sequence's prefixes costs
only the solves. :meth:`SubsetSolver.scores` scores each group ``g`` outside ``S`` against
that same factor: the residual ``r = b − C_{:,S} w(S)`` on the remaining features only
(O(k·(D − k)), rows of ``C`` read in place) and, for CS-G-FR, the Schur
complement ``C_gg − V_gᵀV_g`` with ``V_g = L_S⁻¹ C_{S,g}`` (one triangular solve for all
candidates together, then O(k·d_g² + d_g³) per group), never a new factorization of ``C_S``;
nothing at all when no group is left.

Dependent directions (a pivot ``<= rtol · C_jj``, possible only with ``alpha = 0``) are
handled as the sequencing does (:mod:`algorithms.anytime.greedy`): when LAPACK's Cholesky
refuses a block, the block is factored by the sanitizing kernel, whose dependent rows become
unit rows with a zero right-hand side. Results (factors with their feature order, solves) are
kept in an LRU bounded in bytes. The blocks of ``C`` a factor needs are read row by row
(:mod:`algorithms.anytime._subset_kernels`), never through fancy-indexed temporaries.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import scipy.linalg

from algorithms.anytime import _kernels as kernels
from algorithms.anytime import _subset_kernels as gather_kernels

RTOL = 1e-9  # a pivot <= RTOL * C_jj is a dependent direction (as the sequencing)
SMALL_SOLVE = 256  # factors up to this many features are solved by a numba kernel


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
        """``C_S⁻¹ v`` (dependent directions 0). O(k²): a numba kernel up to
        ``SMALL_SOLVE`` features (LAPACK's wrappers cost more than the solve there)."""
        rhs = np.where(self.dependent, 0.0, v)
        if len(rhs) <= SMALL_SOLVE:
            return gather_kernels.solve_factored(self.L, rhs)
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
        self.C = np.ascontiguousarray(C, dtype=np.float64)  # (no copy when it is already)
        self.b = np.ascontiguousarray(b, dtype=np.float64)
        self.groups = [np.ascontiguousarray(g, dtype=np.int64) for g in groups]
        self.sequence = [int(g) for g in sequence]
        self.tol = rtol * np.maximum(np.diag(C), 1e-300)
        self.cache_bytes = int(cache_bytes)
        self._cache: OrderedDict[frozenset, Factor] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()
        self._prefix: Factor | None = None
        self._prefix_ends = np.cumsum([0] + [len(self.groups[g]) for g in self.sequence])
        self._sizes = np.array([len(g) for g in self.groups], dtype=np.int64)

    # ------------------------------------------------------------------ factors
    def prefix_factor(self) -> Factor:
        """The factor of ``C`` over every sequenced feature, in sequence order (computed
        once, O(k_seq³/3))."""
        with self._lock:
            if self._prefix is not None:
                return self._prefix
        parts = [self.groups[g] for g in self.sequence]
        idx = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        L, dependent = cholesky(gather_kernels.gather(self.C, idx, idx), self.tol[idx])
        factor = Factor(idx, L, dependent)
        with self._lock:
            if self._prefix is None:
                self._prefix = factor
            return self._prefix

    def factor(self, S: frozenset) -> Factor:
        """The factor of ``C_S`` (cached), features ordered: those of its base (the longest
        sequence prefix inside ``S``, or a larger cached subset: :meth:`_base`), then the
        other groups of ``S`` by id."""
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

    def _base(self, S: frozenset) -> tuple[int, frozenset, Factor | None]:
        """What ``S``'s factor extends: ``P``'s leading block of the prefix factor (``P``:
        the longest sequence prefix inside ``S``), or the cached factor of a set ``S − {g}``
        holding more features than ``P``, the most of any. A set asked right after one of
        its subsets (``S ∪ {next group}`` after ``S``) then costs one group's block update,
        not a new factorization. Returns ``(p, B, factor or None for the prefix)``.
        O(|S|²): |S| lookups, whatever the number of cached sets."""
        p = 0
        while p < len(self.sequence) and self.sequence[p] in S:
            p += 1
        best_set, best, best_size = frozenset(self.sequence[:p]), None, \
            int(self._prefix_ends[p])
        if len(S) < 2:
            return p, best_set, best
        with self._lock:
            for g in S:
                key = S - {g}
                cached = self._cache.get(key)
                if cached is not None and len(cached.idx) > best_size:
                    best_set, best, best_size = key, cached, len(cached.idx)
        return p, best_set, best

    def _build(self, S: frozenset) -> Factor:
        p, base_set, base = self._base(S)
        rest = sorted(set(S) - base_set)
        R = np.concatenate([self.groups[g] for g in rest]) if rest else \
            np.zeros(0, dtype=np.int64)
        if base is None and p == 0:
            if len(R) <= SMALL_SOLVE:  # (an empty base: the kernel's plain factorization)
                return self._extend(np.zeros(0, dtype=np.int64), np.zeros((0, 0)),
                                    np.zeros(0, dtype=bool), R)
            L, dependent = cholesky(gather_kernels.gather(self.C, R, R), self.tol[R])
            return Factor(R, L, dependent)
        if base is None:
            whole = self.prefix_factor()
            k = int(self._prefix_ends[p])
            P, L_P, dep_P = whole.idx[:k], whole.L[:k, :k], whole.dependent[:k]
        else:
            P, L_P, dep_P = base.idx, base.L, base.dependent
            k = len(P)
        if not len(R):
            return Factor(P, L_P, dep_P)
        if k + len(R) <= SMALL_SOLVE:  # one kernel call (wrappers cost more than the work)
            return self._extend(P, L_P, dep_P, R)
        V = scipy.linalg.solve_triangular(L_P, gather_kernels.gather(self.C, P, R),
                                          lower=True, check_finite=False)
        V[dep_P] = 0.0
        L_R, dep_R = cholesky(gather_kernels.gather(self.C, R, R) - V.T @ V, self.tol[R])
        L = np.empty((k + len(R), k + len(R)))  # every block written below
        L[:k, :k] = L_P
        L[:k, k:] = 0.0
        L[k:, :k] = V.T
        L[k:, k:] = L_R
        return Factor(np.concatenate([P, R]), L, np.concatenate([dep_P, dep_R]))

    def _extend(self, P: np.ndarray, L_P: np.ndarray, dep_P: np.ndarray,
                R: np.ndarray) -> Factor:
        """The block update of :meth:`_build` in one kernel call (small sets); a dependent
        direction in ``R`` (a pivot at or below its tolerance) takes the sanitizing factor
        of the Schur complement, as :func:`cholesky` does."""
        L, schur, ok = gather_kernels.extend_factor(self.C, L_P, dep_P, P, R, self.tol[R])
        dep_R = np.zeros(len(R), dtype=bool)
        if not ok:
            L_R, dep_R = cholesky(schur, self.tol[R])
            L[len(P):, len(P):] = L_R
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
        feats_left = np.concatenate([self.groups[g] for g in left])
        starts = np.zeros(len(left) + 1, dtype=np.int64)
        np.cumsum(self._sizes[left], out=starts[1:])
        factor = None
        if S:  # the residual b − C_{:,S} w(S), on the remaining features only
            factor = self.factor(S)
            w = factor.solve(b[factor.idx])
            r_left = gather_kernels.residual_at(C, b, factor.idx, w, feats_left)
        else:
            r_left = b[feats_left]
        V = None
        if kind == kernels.FR and factor is not None:
            V = factor.half_solve(gather_kernels.gather(C, factor.idx, feats_left))
        if kind in (kernels.OMP, kernels.FR) and len(feats_left) <= SMALL_SOLVE:
            scores[left] = gather_kernels.whitened_scores(
                C, feats_left, starts, r_left, self.tol,
                V if V is not None else np.zeros((0, 0)), V is not None,
                0.5 if kind == kernels.FR else 1.0)
            return scores
        z = np.empty(max(len(self.groups[g]) for g in left))
        for position, g in enumerate(left):
            feats = self.groups[g]
            lo, hi = starts[position], starts[position + 1]
            rg = np.ascontiguousarray(r_left[lo:hi])
            if kind == kernels.NO_WHITEN:
                scores[g] = float(rg @ rg)
                continue
            if kind == kernels.SINGLE:
                scores[g] = float(np.max(rg ** 2))
                continue
            block = gather_kernels.gather(C, feats, feats)
            if V is not None:
                Vg = V[:, lo:hi]
                block = block - Vg.T @ Vg
            Lg = np.empty_like(block)
            kernels.cholesky_pivoted(np.ascontiguousarray(block), self.tol[feats], Lg)
            total = kernels.forward_solve(Lg, rg, z[:len(feats)])
            scores[g] = 0.5 * total if kind == kernels.FR else total
        return scores

    def cached_bytes(self) -> int:
        with self._lock:
            return self._held
