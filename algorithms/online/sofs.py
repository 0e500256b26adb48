"""SOFS: second-order online feature selection (Wu, Hoi et al.; seed 002, Algorithm 2).

AROW on a diagonal covariance, then keep only the B features of smallest variance:
if l = max(0, 1 - y mu.x) > 0:  beta = 1 / (x' Sigma x + r),  alpha = l beta,
    mu_j += alpha y Sigma_j x_j,  Sigma_j -= beta Sigma_j^2 x_j^2   (j in the example),
    then mu_j = 0 for every j outside the B smallest Sigma_j (ties: lower index first).
Variances only shrink, so the kept set is a max-heap of the B smallest variances touched
by the example: O(m log B) per example. mu lives in the heap (O(B)); Sigma is dense (O(d)).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from algorithms.online._topset import EMPTY, ROW_VALUE, _map_find, _offer, _rekey
from algorithms.online.base import check_positive
from algorithms.online.selecting import SelectingLearner


@njit(cache=True)
def _sofs_fit(indptr, indices, values, labels, r, sigma, slot_ints, slot_floats,
              map_keys, map_slots, meta, scores):
    longest = 0
    for row in range(len(indptr) - 1):
        longest = max(longest, indptr[row + 1] - indptr[row])
    slots = np.empty(longest, dtype=np.int64)
    new_features = np.empty(longest, dtype=np.int64)
    new_values = np.empty(longest, dtype=np.float64)
    new_keys = np.empty(longest, dtype=np.float64)
    updates = 0
    for row in range(len(indptr) - 1):
        lo, hi = indptr[row], indptr[row + 1]
        score = 0.0
        variance = 0.0
        for k in range(lo, hi):
            feature = indices[k]
            x = values[k]
            slot = _map_find(map_keys, map_slots, np.int64(feature))
            slots[k - lo] = slot
            if slot != EMPTY:
                score += slot_floats[ROW_VALUE, slot] * x
            variance += sigma[feature] * x * x
        scores[row] = score
        label = labels[row]
        loss = 1.0 - label * score
        if loss <= 0.0:
            continue
        updates += 1
        beta = 1.0 / (variance + r)
        alpha = loss * beta
        n_new = 0
        for k in range(lo, hi):
            feature = indices[k]
            x = values[k]
            old_sigma = sigma[feature]
            new_sigma = old_sigma - beta * old_sigma * old_sigma * x * x
            sigma[feature] = new_sigma
            delta = alpha * label * old_sigma * x
            slot = slots[k - lo]
            if slot != EMPTY:
                slot_floats[ROW_VALUE, slot] += delta
                _rekey(slot_ints, slot_floats, meta, slot, -new_sigma)
            elif x != 0.0:
                new_features[n_new] = feature
                new_values[n_new] = delta
                new_keys[n_new] = -new_sigma
                n_new += 1
        for q in range(n_new):
            _offer(slot_ints, slot_floats, map_keys, map_slots, meta, new_features[q],
                   new_keys[q], new_values[q])
    return updates


class SOFS(SelectingLearner):
    """Second-order online feature selection (AROW + MaxHeap truncation).

    Parameters
    ----------
    n_features : dimension d.
    budget : B, the most non-zero weights kept.
    r : AROW regularization (r > 0); smaller r means larger, more aggressive steps.
    """

    name = "sofs"
    _sparse_arrays = {"sigma": 1.0}

    def __init__(self, *, n_features: int, budget: int, r: float = 1.0) -> None:
        super().__init__(n_features=n_features, budget=budget)
        self.r = check_positive("r", r)
        self._sigma = np.ones(self.n_features, dtype=np.float64)

    def _fit_rows(self, batch, labels, scores) -> int:
        return _sofs_fit(batch.indptr, batch.indices, batch.values, labels, self.r,
                         self._sigma, *self._kernel_state(), scores)
