r"""Numba kernels of :class:`~algorithms.acquisition.policy.ConditionedAcquisition` over flat
arrays: one decision (k-NN on the computed features, the exact superset search, the
one-step gains, the per-set choice) and whole episodes for the gate, without a Python
object per row or per step; they release the GIL.

Layout: the window transposed, ``XT`` (d, n), and its feature scales ``scale`` (d,); the groups'
features flat in ``gfeat`` with group ``g`` at ``gfeat[goff[g]:goff[g + 1]]``; ``costs``
(J,); ``bit_of[g]`` the pool bit of group ``g`` (-1 outside the pool), ``pool`` (P,); the
loss table ``values`` (2^P, n) and ``mask_cost`` (2^P,); ``sequence`` the per-set order
beyond the pool (may be empty). A computed set is a boolean vector ``ins`` (J,).

Neighbours: the squared standardised distance of row ``i`` to ``x`` is summed group by
group (each group's features in order, NaN terms skipped), the groups in increasing id;
the ``k`` rows with the least ``(distance, row)`` (ties: the lower row) are kept, sorted
by row. O(n |F_S| + n log k).

A decision's ``kind``: :data:`STOP_NOTHING` (nothing fits the cap), :data:`STOP_NOT_WORTH`
(with an exchange rate, no superset pays), :data:`CHOSEN` (a group, ``plan`` the mask the
example aims at), :data:`FALLBACK` (the caller's per-set rule decides).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from algorithms.acquisition.search import best_superset
from algorithms.batch import COST_RTOL

STOP_NOTHING, STOP_NOT_WORTH, CHOSEN, FALLBACK = 0, 1, 2, 3


@njit(cache=True, nogil=True)
def group_distance(XT, rows, x, gfeat, goff, scale, g, out):
    """``out[j] = sum_{f in g} ((XT[f, rows[j]] - x[f]) / scale[f])^2`` (NaN terms
    skipped). O(|rows| |F_g|)."""
    for j in range(rows.size):
        out[j] = 0.0
    for p in range(goff[g], goff[g + 1]):
        f = gfeat[p]
        xf, sf = x[f], scale[f]
        if np.isnan(xf):
            continue
        column = XT[f]
        for j in range(rows.size):
            z = (column[rows[j]] - xf) / sf
            if not np.isnan(z):
                out[j] += z * z


@njit(cache=True, nogil=True)
def _less(d, r, heap_d, heap_r, a):
    return d < heap_d[a] or (d == heap_d[a] and r < heap_r[a])


@njit(cache=True, nogil=True)
def nearest(dist, rows, k, out):
    """The ``k`` of ``rows`` with the least ``(dist, row)`` into ``out[:k]``, sorted by row;
    returns k. A max-heap of size k: O(n log k)."""
    hd = np.empty(k)
    hr = np.empty(k, dtype=np.int64)
    size = 0
    for j in range(rows.size):
        d, r = dist[j], rows[j]
        if size < k:  # sift up
            c = size
            size += 1
            while c > 0:
                p = (c - 1) // 2
                if hd[p] > d or (hd[p] == d and hr[p] > r):
                    break
                hd[c], hr[c] = hd[p], hr[p]
                c = p
            hd[c], hr[c] = d, r
        elif _less(d, r, hd, hr, 0):  # replace the largest, sift down
            c = 0
            while True:
                left = 2 * c + 1
                if left >= k:
                    break
                big = left
                right = left + 1
                if right < k and not _less(hd[right], hr[right], hd, hr, left):
                    big = right
                if not _less(d, r, hd, hr, big):
                    break
                hd[c], hr[c] = hd[big], hr[big]
                c = big
            hd[c], hr[c] = d, r
    for j in range(k):
        out[j] = hr[j]
    out[:k].sort()
    return k


@njit(cache=True, nogil=True)
def neighbours(XT, rows, x, gfeat, goff, scale, ins, k, tmp, total, out):
    """The neighbours of ``x`` on the groups of ``ins`` into ``out``; returns their count
    (every row when nothing is computed or ``|rows| <= k``). ``tmp``, ``total``: scratch
    of ``|rows|``. O(|rows| |F_S| + |rows| log k)."""
    n = rows.size
    features = 0
    for g in range(ins.size):
        if ins[g]:
            features += goff[g + 1] - goff[g]
    if features == 0 or n <= k:
        out[:n] = rows
        return n
    for j in range(n):
        total[j] = 0.0
    for g in range(ins.size):
        if ins[g]:
            group_distance(XT, rows, x, gfeat, goff, scale, g, tmp)
            for j in range(n):
                total[j] += tmp[j]
    return nearest(total[:n], rows, k, out)


@njit(cache=True, nogil=True)
def _nearest_from(partial, ins, rows, k, total, out):
    n = rows.size
    for j in range(n):
        total[j] = 0.0
    for g in range(ins.size):
        if ins[g]:
            for j in range(n):
                total[j] += partial[g, j]
    return nearest(total[:n], rows, k, out)


@njit(cache=True, nogil=True)
def _mean(values, m, near, count):
    s = 0.0
    for j in range(count):
        s += values[m, near[j]]
    return s / count


@njit(cache=True, nogil=True)
def decide_core(costs, bit_of, pool, values, mask_cost, sequence, ins, near, count, colmean,
                max_cost, lam, per_example, fallback, gains):
    """One decision for the computed set ``ins`` with neighbours ``near[:count]``
    (``colmean``: :func:`column_means` of the window rows the per-set rule reads) ->
    ``(kind, group, plan)``. ``max_cost``
    NaN: no cap; ``lam`` NaN: no exchange rate; ``fallback``: leave the per-set choice to
    the caller. ``gains[b]``: pool bit ``b``'s one-step drop over the neighbours (NaN for
    computed bits). O(2^(P - |s|) k + P k)."""
    J, P = costs.size, pool.size
    spent = 0.0
    mask = 0
    for g in range(J):
        if ins[g]:
            spent += costs[g]
            if bit_of[g] >= 0:
                mask |= 1 << bit_of[g]
    capped = not np.isnan(max_cost)
    room = max_cost - spent if capped else 0.0
    slack = COST_RTOL * max(abs(room), 1.0)
    base = _mean(values, mask, near, count)
    for b in range(P):
        gains[b] = np.nan if mask >> b & 1 else base - _mean(values, mask | 1 << b, near,
                                                              count)
    any_missing = False
    for g in range(J):
        if not ins[g] and (not capped or costs[g] <= room + slack):
            any_missing = True
            break
    if not any_missing:
        return STOP_NOTHING, -1, mask
    rated = not np.isnan(lam)
    best = mask
    if per_example or rated:
        full = (1 << P) - 1
        best, _, _ = best_superset(values, near[:count], mask, full, room if capped else -1.0,
                                   mask_cost, lam if rated else 0.0)
    if best != mask and per_example:
        # the cheapest missing group of the plan (ties: the larger gain, the lower id)
        pick, pick_cost, pick_gain = -1, 0.0, 0.0
        for b in range(P):
            if best >> b & 1 and not mask >> b & 1:
                h = pool[b]
                fits = not capped or costs[h] <= room + slack
                gain = gains[b] if fits else 0.0
                if pick < 0 or costs[h] < pick_cost or (costs[h] == pick_cost and (
                        -gain < -pick_gain or (-gain == -pick_gain and h < pick))):
                    pick, pick_cost, pick_gain = h, costs[h], gain
        return CHOSEN, pick, best
    if rated and best == mask:
        return STOP_NOT_WORTH, -1, mask
    if fallback:
        return FALLBACK, -1, mask
    g = per_set_choice(costs, bit_of, pool, colmean, mask_cost, sequence, ins, mask, capped,
                       room)
    if g < 0:
        return STOP_NOTHING, -1, mask
    return CHOSEN, g, mask | (1 << bit_of[g] if bit_of[g] >= 0 else 0)


@njit(cache=True, nogil=True)
def column_means(values, rows):
    """``out[m]``: the mean of column ``m`` over ``rows`` (summed in order). O(2^P |rows|)."""
    out = np.empty(values.shape[0])
    for m in range(values.shape[0]):
        out[m] = _mean(values, m, rows, rows.size)
    return out


@njit(cache=True, nogil=True)
def per_set_choice(costs, bit_of, pool, colmean, mask_cost, sequence, ins, mask, capped,
                   room):
    """The per-set rule on the window means ``colmean``: the largest mean drop per unit
    cost among the pool groups that fit (ties: the lower id), then ``sequence``; -1:
    none. O(P + |sequence|)."""
    P = pool.size
    tol = 1e-12 * max(1.0, abs(room))
    eps = 1e-9 * max(costs.max(), 1.0)
    base = colmean[mask]
    pick, pick_ratio = -1, 0.0
    for b in range(P):
        if mask >> b & 1:
            continue
        m = mask | 1 << b
        if capped and not mask_cost[1 << b] <= room + tol:
            continue
        ratio = (base - colmean[m]) / max(mask_cost[m], eps)
        h = pool[b]
        if pick < 0 or ratio > pick_ratio or (ratio == pick_ratio and h < pick):
            pick, pick_ratio = h, ratio
    if pick >= 0:
        return pick
    for j in range(sequence.size):
        g = sequence[j]
        if not ins[g] and (not capped or costs[g] <= room + tol):
            return g
    return -1


@njit(cache=True, nogil=True)
def gate_episodes(XT, scale, gfeat, goff, costs, bit_of, pool, values, mask_cost, sequence,
                  k, rows, targets, max_cost, per_example, final):
    """For each target row ``i`` an episode from the empty set with neighbours from
    ``rows`` under ``max_cost`` (no exchange rate, no fallback): ``final[t]`` the pool mask
    it ends with. O(|targets| steps (|rows| |F| + 2^P k))."""
    J, n = costs.size, rows.size
    partial = np.empty((J, n))
    total = np.empty(n)
    near = np.empty(n, dtype=np.int64)
    gains = np.empty(pool.size)
    ins = np.zeros(J, dtype=np.bool_)
    colmean = column_means(values, rows)
    x = np.empty(XT.shape[0])
    near[:n] = rows  # from the empty set every row is a neighbour: one first decision
    first, first_g, _ = decide_core(costs, bit_of, pool, values, mask_cost, sequence, ins,
                                    near, n, colmean, max_cost, np.nan, per_example, False,
                                    gains)
    for t in range(targets.size):
        x[:] = XT[:, targets[t]]
        ins[:] = False
        kind, g = first, first_g
        features = 0
        while kind == CHOSEN:
            ins[g] = True
            features += goff[g + 1] - goff[g]
            if per_example:
                group_distance(XT, rows, x, gfeat, goff, scale, g, partial[g])
            if per_example and features > 0 and n > k:
                count = _nearest_from(partial, ins, rows, k, total, near)
            else:
                near[:n] = rows
                count = n
            kind, g, _ = decide_core(costs, bit_of, pool, values, mask_cost, sequence, ins,
                                     near, count, colmean, max_cost, np.nan, per_example,
                                     False, gains)
        m = 0
        for g in range(J):
            if ins[g] and bit_of[g] >= 0:
                m |= 1 << bit_of[g]
        final[t] = m


__all__ = ["CHOSEN", "FALLBACK", "STOP_NOTHING", "STOP_NOT_WORTH", "column_means",
           "decide_core",
           "gate_episodes", "group_distance", "nearest", "neighbours", "per_set_choice"]
