"""Doubling: CS-G-FR whose total cost at most doubles per step (Hu et al., Algorithm 2).

Rule implemented: with ``spent = c(S)`` and ``c_min`` the cheapest remaining cost, the
eligible groups are ``{g : c(g) <= max(spent, c_min)}`` and among them we take the largest
``(F(S∪g) − F(S)) / c(g)``. So ``c(S∪g) <= 2·c(S)`` whenever any remaining group allows it
(zero-cost groups are always eligible), and otherwise (first step, or every remaining group
costs more than everything spent) the step jumps by the smallest possible amount: it picks
the best gain per cost among the cheapest remaining groups. Why: Theorem 4.3's cost factor 4
needs exactly the doubling property ``c(g_{j+1}) <= c(G_j)``; when it is impossible the
cheapest group is the smallest violation, and it keeps the next steps doubling-capable sooner
than any more expensive choice would. Per step as CS-G-FR: O(k·m·d_h + Σ d_g³).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from algorithms.anytime import _kernels as kernels
from algorithms.anytime.greedy import GroupGreedy, SequenceResult, normalize_groups, run_greedy
from algorithms.batch import COST_RTOL, DEPRECATED, deprecated_alias


def doubling_eligible(costs: np.ndarray, remaining: np.ndarray, spent: float) -> np.ndarray:
    """Mask of groups with ``c(g) <= max(spent, min remaining cost)`` (relative slack
    ``COST_RTOL``)."""
    if not remaining.any():
        return remaining
    limit = max(spent, float(costs[remaining].min()))
    return remaining & (costs <= limit * (1.0 + COST_RTOL))


def doubling_sequence(C: np.ndarray, b: np.ndarray, groups: Sequence[Sequence[int]], costs, *,
                      max_cost: float | None = None, max_groups: int | None = None,
                      rtol: float = 1e-9, budget: float | None = DEPRECATED) -> SequenceResult:
    """Doubling sequence of ``groups`` from ``C`` (D, D) and ``b`` (D,), capped at a total
    cost of ``max_cost`` and ``max_groups`` groups (``budget``: the deprecated spelling of
    ``max_cost``); see module docstring."""
    max_cost = deprecated_alias("doubling_sequence", "budget", "max_cost", budget, max_cost)
    groups, costs = normalize_groups(groups, costs, len(b))
    engine = GroupGreedy(C, b, groups, track_schur=True, rtol=rtol)
    return run_greedy(engine, kernels.FR, costs, max_cost=max_cost, max_groups=max_groups,
                      eligible_rule=doubling_eligible)
