r"""Exact superset search over bitmasks: the plan of the acquisition policy.

Given a computed set ``s`` (a mask over ``P <= 16`` pool groups), rows ``N`` (the
neighbours), a loss table ``L[m, i]``, costs ``c(m)`` per mask, an exchange rate ``lam``
(loss units per unit of cost) and the room ``r`` left under the cap, find

    m* = argmin_{m ⊇ s, c(m) - c(s) <= r}  (1/|N|) sum_{i in N} L[m, i] + lam c(m),

keeping ``s`` unless a superset is better by more than a relative 1e-12, and among
equal objectives the cheaper set, then the smaller mask. The supersets are enumerated as
``s | t`` for every submask ``t`` of the free bits (``t = (t - 1) & free``): O(2^(P-|s|)
|N|) time, O(1) extra memory. :func:`best_superset_reference` is the same in plain numpy
(for tests).
"""

from __future__ import annotations

import numpy as np
from numba import njit

TIE_RTOL = 1e-12


@njit(cache=True, nogil=True)
def _objective(values, rows, m, mask_cost, lam):
    total = 0.0
    for j in range(rows.size):
        total += values[m, rows[j]]
    return total / rows.size + lam * mask_cost[m]


@njit(cache=True, nogil=True)
def best_superset(values: np.ndarray, rows: np.ndarray, mask: int, full: int, room: float,
                  mask_cost: np.ndarray, lam: float) -> tuple[int, float, float]:
    """``(m*, objective of m*, objective of s)``; ``room < 0`` is no cap."""
    base = mask_cost[mask]
    own = _objective(values, rows, mask, mask_cost, lam)
    best, best_obj, best_cost = mask, own, base
    free = full & ~mask
    t = free
    while t > 0:
        m = mask | t
        cost = mask_cost[m]
        if room < 0.0 or cost - base <= room + 1e-12 * max(1.0, abs(room)):
            obj = _objective(values, rows, m, mask_cost, lam)
            slack = TIE_RTOL * max(1.0, abs(best_obj))
            if best == mask:
                better = obj < best_obj - slack
            else:
                better = obj < best_obj - slack or (
                    obj <= best_obj + slack and (cost < best_cost or
                                                 (cost == best_cost and m < best)))
            if better:
                best, best_obj, best_cost = m, obj, cost
        t = (t - 1) & free
    return best, best_obj, own


def best_superset_reference(values: np.ndarray, rows: np.ndarray, mask: int, full: int,
                            room: float, mask_cost: np.ndarray, lam: float
                            ) -> tuple[int, float, float]:
    """:func:`best_superset` by exhaustive enumeration of all ``2^P`` masks in numpy."""
    masks = np.arange(full + 1)
    sup = masks[(masks & mask) == mask]
    if room >= 0:
        sup = sup[mask_cost[sup] - mask_cost[mask] <= room + 1e-12 * max(1.0, abs(room))]
    obj = values[sup][:, rows].mean(axis=1) + lam * mask_cost[sup]
    own = float(values[mask, rows].mean() + lam * mask_cost[mask])
    best = float(obj.min())
    if best >= own - TIE_RTOL * max(1.0, abs(own)):
        return int(mask), own, own
    near = sup[obj <= best + TIE_RTOL * max(1.0, abs(best))]
    near = near[np.lexsort((near, mask_cost[near]))]
    m = int(near[0])
    return m, float(obj[sup == m][0]), own


__all__ = ["best_superset", "best_superset_reference"]
