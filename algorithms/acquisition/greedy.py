r"""Per-example *greedy* acquisition (a baseline): over the same neighbours and held-out
loss table as :class:`~algorithms.acquisition.policy.ConditionedAcquisition`, compute the
missing group with the largest one-step loss drop per unit cost,
``mean_{i in N} (L[s, i] - L[s + g, i]) / c_g``; with an exchange rate ``lam``, stop when
that drop is below ``lam c_g`` for every group. Myopic: a group worth nothing on its own
is never bought first. O(J k) per decision after the neighbours.
"""

from __future__ import annotations

from algorithms.acquisition.policy import (
    NOT_WORTH,
    NOTHING_FITS,
    ConditionedAcquisition,
    Decision,
    _mean_interval,
    missing_within,
)


class GreedyNeighbours(ConditionedAcquisition):
    """Per-example greedy acquisition over k nearest held-out rows (no gate)."""

    def __init__(self, *, n_neighbors: int = 30, max_groups: int = 12,
                 random_state: int = 0) -> None:
        super().__init__(n_neighbors=n_neighbors, max_groups=max_groups, gate=False,
                         random_state=random_state)

    def _decide(self, x, S, max_cost, exchange_rate, rows, per_example, fallback,
                every_missing=False):
        table, costs = self.table_, self.costs_
        room, missing = missing_within(costs, S, max_cost)
        if not missing:
            return Decision(None, None, None, None, NOTHING_FITS, S, True)
        mask = table.mask_of(S)
        near = self.neighbours(x, S, rows)
        where = {int(g): b for b, g in enumerate(table.pool)}
        inside = [g for g in missing if g in where]
        if not inside:
            g = (fallback(S, max_cost) if fallback is not None
                 else self._per_set_choice(S, room, rows))
            if g is None:
                return Decision(None, None, None, None, NOTHING_FITS, S, True)
            return Decision(g, float(costs[g]), None, None, None, tuple(sorted((*S, g))), True)
        table.ensure([mask] + [mask | 1 << where[g] for g in inside])
        candidates = self._candidates(mask, inside, near)
        eps = 1e-9 * max(float(costs.max()), 1.0)
        best = max(candidates, key=lambda c: (c.expected_gain / max(c.cost, eps), -c.group))
        if exchange_rate is not None and all(
                c.expected_gain <= float(exchange_rate) * c.cost for c in candidates):
            return Decision(None, None, None, None, NOT_WORTH, S, True, candidates)
        plan = mask | 1 << where[best.group]
        gain, interval = _mean_interval(table.values[mask, near] - table.values[plan, near])
        return Decision(best.group, best.cost, gain, interval, None,
                        tuple(sorted((*S, best.group))), True, candidates)


__all__ = ["GreedyNeighbours"]
