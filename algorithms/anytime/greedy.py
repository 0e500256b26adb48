"""Cost-sensitive greedy group sequencing from statistics: CS-G-OMP, CS-G-FR, no-whiten, single.

Hu, Grubb, Bagnell, Hebert, *Efficient Feature Group Sequencing for Anytime Linear Prediction*.
With standardized statistics ``C = XᵀX/n + λI``, ``b = XᵀY/n`` and a selected union ``S``:
``w(S) = C_S⁻¹ b_S``, ``F(S) = ½ b_Sᵀ C_S⁻¹ b_S``, gradient ``r_g = b_g − C_gS w(S)``. Each step
picks the remaining group maximizing ``score(g) / c(g)`` with

- CS-G-OMP:  ``r_gᵀ C_gg⁻¹ r_g``        (group-whitened gradient)
- CS-G-FR:   ``F(S∪g) − F(S) = ½ r_gᵀ (C_gg − C_gS C_S⁻¹ C_Sg)⁻¹ r_g``
- no-whiten: ``‖r_g‖²``;   single: ``‖r_g‖∞²``.

The engine keeps ``U = L_S⁻¹ C_{S,:}`` (k, w) with ``L_S`` the Cholesky factor of ``C_S``
(stored transposed, and compacted to the columns of remaining groups once half are dead, so
w <= 2·remaining), ``a = L_S⁻¹ b_S`` and ``r = b − Uᵀa``. Adding a group ``h`` of ``d_h``
features appends ``d_h`` rows to ``U`` (O(k·w·d_h), numba dot products), updates ``r``
(O(w·d_h)) and, for FR, the Schur complements of the remaining groups (O(d_h Σ d_g²)).
Scoring is O(Σ d_g²) (OMP and variants) or O(Σ d_g³) (FR). Memory O(m²), m = number of
grouped features. Zero-cost groups go first
(by score); dependent directions (pivot <= rtol·C_ii) get zero weight, never NaN.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from algorithms.anytime import _kernels as kernels
from algorithms.batch import DEPRECATED, cost_slack, deprecated_alias

CRITERIA = {"cs-g-omp": kernels.OMP, "cs-g-fr": kernels.FR, "no-whiten": kernels.NO_WHITEN,
            "single": kernels.SINGLE}


@dataclass
class SequenceResult:
    """A group sequence and everything needed for the prefix models.

    ``order`` (J_s,) group ids; ``cumulative_cost`` and ``objective`` (J_s + 1,) start with the
    empty prefix; ``feature_order`` (k,) original feature ids in selection order; ``factor``
    (k, k) lower Cholesky factor of ``C`` in that order (dependent rows sanitized to ``e_i``);
    ``a`` (k,) = ``L⁻¹ b``; ``prefix_features`` (J_s + 1,) features per prefix.
    """

    order: np.ndarray
    cumulative_cost: np.ndarray
    objective: np.ndarray
    feature_order: np.ndarray
    factor: np.ndarray
    a: np.ndarray
    prefix_features: np.ndarray

    def prefix_coefficients(self, n_features: int) -> np.ndarray:
        """Standardized ``w(G_j)`` for every prefix, (J_s + 1, D). One triangular solve, O(k²J)."""
        k, J = len(self.a), len(self.order)
        rhs = np.zeros((k, J + 1))
        for j in range(1, J + 1):
            m = self.prefix_features[j]
            rhs[:m, j] = self.a[:m]
        W = kernels.solve_lower_transposed(self.factor, rhs) if k else rhs
        out = np.zeros((J + 1, n_features))
        out[:, self.feature_order] = W.T
        return out


def normalize_groups(groups: Sequence[Sequence[int]], costs, n_features: int
                     ) -> tuple[list[np.ndarray], np.ndarray]:
    """Validate ``groups`` (disjoint, non-empty, in range) and ``costs`` (finite, >= 0)."""
    out = [np.asarray(g, dtype=np.int64).ravel() for g in groups]
    costs = np.asarray(costs, dtype=np.float64).ravel()
    if len(out) == 0:
        raise ValueError("at least one group is required")
    if len(costs) != len(out):
        raise ValueError(f"{len(out)} groups but {len(costs)} costs")
    if not np.all(np.isfinite(costs)) or np.any(costs < 0):
        raise ValueError("costs must be finite and >= 0")
    sizes = np.fromiter((len(g) for g in out), dtype=np.int64, count=len(out))
    if np.any(sizes == 0):
        raise ValueError(f"group {int(np.argmin(sizes))} is empty")
    features = np.concatenate(out)
    owner = np.repeat(np.arange(len(out)), sizes)
    bad = (features < 0) | (features >= n_features)
    if bad.any():
        raise ValueError(f"group {owner[np.argmax(bad)]} has a feature index outside "
                         f"[0, {n_features})")
    counts = np.bincount(features, minlength=n_features)
    if np.any(counts > 1):
        repeated = np.isin(features, np.flatnonzero(counts > 1))
        raise ValueError(f"group {owner[np.argmax(repeated)]} repeats a feature "
                         "(groups must be disjoint)")
    return out, costs


class GroupGreedy:
    """Incremental state of a greedy group selection over ``C`` (D, D), ``b`` (D,)."""

    def __init__(self, C: np.ndarray, b: np.ndarray, groups: Sequence[np.ndarray],
                 *, track_schur: bool = True, rtol: float = 1e-9) -> None:
        self.n_features = len(b)
        self.perm = np.concatenate(groups)
        sizes = np.array([len(g) for g in groups], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.block_offsets = np.concatenate([[0], np.cumsum(sizes ** 2)]).astype(np.int64)
        identity = len(self.perm) == len(b) and np.array_equal(self.perm, np.arange(len(b)))
        self.C = np.ascontiguousarray(C if identity else C[np.ix_(self.perm, self.perm)],
                                      dtype=np.float64)
        self.b = np.asarray(b, dtype=np.float64)[self.perm]
        m = len(self.perm)
        self.tol = rtol * np.maximum(np.diag(self.C), 1e-300)
        self.blocks = kernels.gather_blocks(self.C, self.starts, self.block_offsets)
        self.active = np.ones(len(groups), dtype=np.bool_)
        self.whitened = kernels.group_factors(self.blocks, self.starts, self.block_offsets,
                                              self.tol, self.active)
        self.track_schur = track_schur
        self.Ut = np.empty((m, m))  # Uᵀ: row c = column self.cols[c], column p = selected p
        self.cols = np.arange(m)
        self.local = np.arange(m)
        self.factor = np.zeros((m, m))
        self.r = self.b.copy()
        self.a = np.zeros(m)
        self.k = 0
        self.selected: list[int] = []
        self.selected_pos: list[np.ndarray] = []
        self.objective = 0.0

    def scores(self, kind: int) -> np.ndarray:
        """Criterion value per group, -1 for selected groups. O(Σ d_g²) or O(Σ d_g³) (FR)."""
        if kind == kernels.OMP:
            return kernels.group_scores(kind, self.r, self.starts, self.whitened,
                                        self.block_offsets, self.tol, self.active, True)
        if kind == kernels.FR and not self.track_schur:
            raise ValueError("FR scores need track_schur=True")
        return kernels.group_scores(kind, self.r, self.starts, self.blocks,
                                    self.block_offsets, self.tol, self.active, False)

    def add(self, g: int) -> float:
        """Append group ``g``; returns the gain ``F(S∪g) − F(S)``. O(k·w·d_g), w <= 2·remaining
        columns (U is compacted to the remaining groups whenever half of it is dead)."""
        s, e = int(self.starts[g]), int(self.starts[g + 1])
        k, d, w = self.k, e - s, len(self.cols)
        ls = int(self.local[s])
        Ch = self.C[s:e] if w == len(self.perm) else self.C[s:e][:, self.cols]
        T = kernels.project_out(Ch, self.Ut, k, ls)  # T[:, ls:ls+d]: the Schur block
        rows, a_new = kernels.orthogonalize_block(T, ls, self.r[s:e].copy(), self.tol[s:e])
        self.Ut[:w, k:k + d] = rows.T
        self.factor[k:k + d, :k + d] = self.Ut[ls:ls + d, :k + d]
        self.a[k:k + d] = a_new
        self.r[self.cols] -= a_new @ rows
        self.active[g] = False
        if self.track_schur:
            kernels.downdate_blocks(self.blocks, self.starts, self.block_offsets, rows,
                                    self.local, self.active)
        self.k += d
        self.selected.append(int(g))
        self.selected_pos.append(np.arange(s, e))
        gain = 0.5 * float(a_new @ a_new)
        self.objective += gain
        self._compact()
        return gain

    def _compact(self) -> None:
        """Drop the columns of selected groups from ``U`` once they are half of it. O(k·w)."""
        alive = np.repeat(self.active, np.diff(self.starts))[self.cols]
        if alive.sum() * 2 > len(self.cols):
            return
        keep = np.flatnonzero(alive)
        self.Ut[:len(keep), :self.k] = self.Ut[keep, :self.k]
        self.cols = self.cols[keep]
        self.local = np.full(len(self.perm), -1, dtype=np.int64)
        self.local[self.cols] = np.arange(len(self.cols))

    def result(self, costs: np.ndarray) -> SequenceResult:
        """Package the selection so far. O(k²)."""
        order = np.array(self.selected, dtype=np.int64)
        pos = np.concatenate(self.selected_pos) if self.selected_pos else np.zeros(0, np.int64)
        factor = self.factor[:self.k, :self.k].copy()
        dependent = np.diag(factor) == 0.0
        factor[dependent, :] = 0.0
        factor[dependent, dependent] = 1.0
        sizes = np.array([len(p) for p in self.selected_pos], dtype=np.int64)
        prefix_features = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        a = self.a[:self.k].copy()
        a[dependent] = 0.0
        objective = np.concatenate([[0.0], 0.5 * np.cumsum(a ** 2)[prefix_features[1:] - 1]])
        cumulative = np.concatenate([[0.0], np.cumsum(costs[order])])
        return SequenceResult(order, cumulative, objective, self.perm[pos], factor, a,
                              prefix_features)


def pick_group(gains: np.ndarray, costs: np.ndarray, eligible: np.ndarray) -> int:
    """argmax gain/cost over eligible groups; zero-cost groups first (by gain); -1 if none
    (a numba kernel: a dozen numpy calls on J values cost more than the loop). O(J)."""
    return int(kernels.pick_best(np.asarray(gains, dtype=np.float64),
                                 np.asarray(costs, dtype=np.float64),
                                 np.asarray(eligible, dtype=np.bool_)))


EligibleRule = Callable[[np.ndarray, np.ndarray, float], np.ndarray]


def run_greedy(engine: GroupGreedy, kind: int, costs: np.ndarray, *,
               max_cost: float | None = None, max_groups: int | None = None,
               eligible_rule: EligibleRule | None = None) -> SequenceResult:
    """Greedy loop: score, restrict (cost cap, optional rule), pick, add, until none is left.

    ``eligible_rule(costs, remaining, spent) -> mask`` narrows the candidates (Doubling).
    """
    spent = float(np.sum(costs[engine.selected])) if engine.selected else 0.0
    limit = len(costs) if max_groups is None else min(int(max_groups), len(costs))
    while len(engine.selected) < limit:
        remaining = engine.active.copy()
        if max_cost is not None:
            remaining &= costs <= (max_cost - spent) + cost_slack(max_cost)
        if not remaining.any():
            break
        if eligible_rule is not None:
            remaining = eligible_rule(costs, remaining, spent)
        g = pick_group(engine.scores(kind), costs, remaining)
        if g < 0:
            break
        engine.add(g)
        spent += float(costs[g])
    return engine.result(costs)


def sequence_groups(C: np.ndarray, b: np.ndarray, groups: Sequence[Sequence[int]], costs,
                    method: str = "cs-g-omp", *, max_cost: float | None = None,
                    max_groups: int | None = None, rtol: float = 1e-9,
                    budget: float | None = DEPRECATED) -> SequenceResult:
    """Sequence ``groups`` with one of :data:`CRITERIA` from ``C`` (D, D) and ``b`` (D,),
    until the next group would take the total cost past ``max_cost`` or the sequence
    reaches ``max_groups`` (``budget``: the deprecated spelling of ``max_cost``).

    Per step O(k·m·d_h) for the factor update plus the scoring cost (see module docstring).
    """
    max_cost = deprecated_alias("sequence_groups", "budget", "max_cost", budget, max_cost)
    if method not in CRITERIA:
        raise ValueError(f"unknown method {method!r}; expected one of {sorted(CRITERIA)}")
    groups, costs = normalize_groups(groups, costs, len(b))
    kind = CRITERIA[method]
    engine = GroupGreedy(C, b, groups, track_schur=(kind == kernels.FR), rtol=rtol)
    return run_greedy(engine, kind, costs, max_cost=max_cost, max_groups=max_groups)


def sequence_in_order(C: np.ndarray, b: np.ndarray, groups: Sequence[Sequence[int]], costs,
                      order: Sequence[int], *, rtol: float = 1e-9) -> SequenceResult:
    """Prefix models for a given ``order`` (e.g. a Group Lasso path). O(k·m·d_h) per step."""
    groups, costs = normalize_groups(groups, costs, len(b))
    engine = GroupGreedy(C, b, groups, track_schur=False, rtol=rtol)
    for g in order:
        engine.add(int(g))
    return engine.result(costs)
