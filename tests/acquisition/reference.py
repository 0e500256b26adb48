"""The per-example policy's decisions and gate in plain numpy, one Python step at a time
(the implementation before the numba kernels), as the reference the kernels are checked
against. Neighbour ties go to the lower row (a stable sort), as in the kernels."""

from __future__ import annotations

import numpy as np

from algorithms.acquisition.policy import (
    NOT_WORTH,
    NOTHING_FITS,
    ConditionedAcquisition,
    Decision,
    _mean_interval,
    missing_within,
)
from algorithms.acquisition.search import best_superset_reference


class ReferenceAcquisition(ConditionedAcquisition):
    """:class:`ConditionedAcquisition` with numpy decisions and gate (slow)."""

    def neighbours(self, x, S, rows):
        parts = [self.groups_[g] for g in sorted(S)]
        k = int(self.n_neighbors)
        if not parts or sum(p.size for p in parts) == 0 or rows.size <= k:
            return rows
        dist = np.zeros(rows.size)
        for features in parts:   # group by group, as the kernels sum
            part = np.zeros(rows.size)
            for f in features:
                if np.isnan(x[f]):
                    continue
                z = (self.table_.X[rows, f] - x[f]) / self.scale_[f]
                part += np.where(np.isnan(z), 0.0, z * z)
            dist += part
        near = np.argsort(dist, kind="stable")[:k]
        return np.sort(rows[near])

    def _decide(self, x, S, max_cost, exchange_rate, rows, per_example, fallback,
                every_missing=False):
        table, costs = self.table_, self.costs_
        room, missing = missing_within(costs, S, max_cost)
        if not missing:
            return Decision(None, None, None, None, NOTHING_FITS, S, per_example)
        mask = table.mask_of(S)
        near = self.neighbours(x, S, rows) if per_example else rows
        lam = 0.0 if exchange_rate is None else float(exchange_rate)
        best, _, _ = best_superset_reference(table.values, near, mask, table.full,
                                             -1.0 if room is None else room,
                                             table.mask_cost, lam)
        candidates = self._candidates(mask, missing, near)
        gains = {c.group: c.expected_gain for c in candidates}
        if best != mask and per_example:
            extra = [g for g in table.groups_of(best) if g not in S]
            g = min(extra, key=lambda h: (costs[h], -(gains.get(h) or 0.0), h))
            plan = best
        elif exchange_rate is not None and best == mask:
            return Decision(None, None, None, None, NOT_WORTH, S, per_example, candidates)
        else:
            g = (fallback(S, max_cost) if fallback is not None
                 else self._per_set_choice(S, room, rows))
            if g is None:
                return Decision(None, None, None, None, NOTHING_FITS, S, per_example,
                                candidates)
            plan = table.mask_of((*S, g))
        if plan == mask:
            return Decision(int(g), float(costs[g]), None, None, None, tuple(sorted(
                (*S, g))), per_example, candidates)
        gain, interval = _mean_interval(table.values[mask, near] - table.values[plan, near])
        plan_groups = tuple(sorted(set(S) | set(table.groups_of(plan))))
        return Decision(int(g), float(costs[g]), gain, interval, None, plan_groups,
                        per_example, candidates)

    def _run_gate(self):
        table = self.table_
        rng = np.random.default_rng(int(self.random_state))
        perm = rng.permutation(table.n_rows)
        half = table.n_rows // 2
        folds = (np.sort(perm[:half]), np.sort(perm[half:]))
        ours, theirs = np.zeros(table.n_rows), np.zeros(table.n_rows)
        total = float(table.mask_cost[table.full])
        for A, B in (folds, folds[::-1]):
            for f in self.gate_caps:
                cap = float(f) * total
                path = self.episode(np.zeros(table.X.shape[1]), max_cost=cap, rows=A,
                                    per_example=False, use_fallback=False)
                theirs[B] += table.values[table.mask_of(path), B]
                for i in B:
                    got = self.episode(table.X[i], max_cost=cap, rows=A, per_example=True,
                                       use_fallback=False)
                    ours[i] += table.values[table.mask_of(got), i]
        diff = (ours - theirs) / len(self.gate_caps)
        se = float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else float("inf")
        return {"per_example": bool(diff.mean() < -float(self.gate_z) * se),
                "per_example_loss": float(ours.mean() / len(self.gate_caps)),
                "per_set_loss": float(theirs.mean() / len(self.gate_caps)),
                "difference": float(diff.mean()), "stderr": se, "rows": int(diff.size)}
