"""AROW: adaptive regularization of weights (Crammer et al. 2009), diagonal covariance.

If l = max(0, 1 - y mu.x) > 0:  beta = 1 / (x' Sigma x + r),  alpha = l beta,
    mu_j += alpha y Sigma_j x_j,  Sigma_j -= beta Sigma_j^2 x_j^2.
No feature selection (seed 002 baseline): O(m) per example, O(d) memory.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from algorithms.online.base import OnlineLearner, check_positive
from algorithms.online.ogd import _dense_scores


@njit(cache=True, nogil=True)
def _arow_fit(indptr, indices, values, labels, r, mean, sigma, scores):
    updates = 0
    for row in range(len(indptr) - 1):
        lo, hi = indptr[row], indptr[row + 1]
        score = 0.0
        variance = 0.0
        for k in range(lo, hi):
            feature = indices[k]
            x = values[k]
            score += mean[feature] * x
            variance += sigma[feature] * x * x
        scores[row] = score
        label = labels[row]
        loss = 1.0 - label * score
        if loss <= 0.0:
            continue
        updates += 1
        beta = 1.0 / (variance + r)
        alpha = loss * beta
        for k in range(lo, hi):
            feature = indices[k]
            x = values[k]
            old_sigma = sigma[feature]
            mean[feature] += alpha * label * old_sigma * x
            sigma[feature] = old_sigma - beta * old_sigma * old_sigma * x * x
    return updates


class AROW(OnlineLearner):
    """AROW with a diagonal covariance (no selection; ``budget`` is ignored).

    Parameters
    ----------
    n_features : dimension d.
    r : regularization (r > 0).
    """

    name = "arow"
    _state_arrays = ("mean",)
    _sparse_arrays = {"sigma": 1.0}

    def __init__(self, *, n_features: int, budget: int | None = None, r: float = 1.0) -> None:
        super().__init__(n_features=n_features, budget=budget)
        self.r = check_positive("r", r)
        self._mean = np.zeros(self.n_features, dtype=np.float64)
        self._sigma = np.ones(self.n_features, dtype=np.float64)

    def _fit_rows(self, batch, labels, scores) -> int:
        return _arow_fit(batch.indptr, batch.indices, batch.values, labels, self.r,
                         self._mean, self._sigma, scores)

    def _score_rows(self, batch, scores) -> None:
        _dense_scores(batch.indptr, batch.indices, batch.values, self._mean, scores)

    def weights(self) -> tuple[np.ndarray, np.ndarray]:
        index = np.flatnonzero(self._mean).astype(np.int64)
        return index, self._mean[index]
