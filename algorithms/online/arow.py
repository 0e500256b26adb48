"""AROW: adaptive regularization of weights (Crammer et al. 2009), diagonal covariance.

If l = max(0, 1 - y mu.x) > 0:  beta = 1 / (x' Sigma x + r),  alpha = l beta,
    mu_j += alpha y Sigma_j x_j,  Sigma_j -= beta Sigma_j^2 x_j^2.
No feature selection (a baseline of Wu, Hoi et al.): O(m) per example, O(d) memory.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from algorithms.online._fused import fma
from algorithms.online.base import OnlineLearner, check_finite, check_positive
from algorithms.online.ogd import _dense_scores
from algorithms.sparse._prefetch import stream_ahead

MEAN, SIGMA = np.uint64(0), np.uint64(1)   # offsets in a feature's pair


@njit(cache=True, inline="always")
def _offset(feature):
    """Offset of feature j's (mu_j, Sigma_j) in the flat coefficient array: 2 j, a shift
    (indexing the 2-D array multiplies by its run-time row stride: 3 cycles on the path of
    every gather; guard: benchmarks/online.py). Unsigned: no negative-index wraparound."""
    return np.uint64(np.uint32(feature)) << np.uint64(1)


@njit(cache=True, inline="always")
def _margin_and_variance(indices, values, lo, hi, flat):
    """(mu . x, x' Sigma x) over entries lo:hi of ``flat = (mu_0, Sigma_0, mu_1, ...)``; the
    sign of a stored Sigma is ignored (SOFS marks kept features by negating it). Two lanes
    per sum, in ``_row_dot``'s order (decision_function's; the reason: ``_row_dot``). O(m)."""
    score = 0.0
    variance = 0.0
    score_odd = 0.0
    variance_odd = 0.0
    one = np.uint64(1)
    k = lo
    while k + one < hi:
        stream_ahead(indices, values, k)
        at = _offset(indices[k])
        odd_at = _offset(indices[k + one])
        x = values[k]
        odd_x = values[k + one]
        score += flat[at + MEAN] * x
        score_odd += flat[odd_at + MEAN] * odd_x
        variance += abs(flat[at + SIGMA]) * x * x
        variance_odd += abs(flat[odd_at + SIGMA]) * odd_x * odd_x
        k += np.uint64(2)
    if k < hi:
        at = _offset(indices[k])
        x = values[k]
        score += flat[at + MEAN] * x
        variance += abs(flat[at + SIGMA]) * x * x
    score += score_odd
    variance += variance_odd
    return score, variance


@njit(cache=True, nogil=True)
def _arow_fit(indptr, indices, values, labels, r, flat, scores):
    """AROW over a batch; ``flat[2j:2j + 2] = (mu_j, Sigma_j)``: a feature's mean and
    variance are one 16-byte pair, read by one gather (four pairs share a cache line)."""
    updates = 0
    for row in range(len(indptr) - 1):
        lo, hi = np.uint64(indptr[row]), np.uint64(indptr[row + 1])   # unsigned: see ogd.py
        score, variance = _margin_and_variance(indices, values, lo, hi, flat)
        scores[row] = score
        label = labels[row]
        loss = 1.0 - label * score
        if loss <= 0.0:
            continue
        updates += 1
        beta = 1.0 / (variance + r)
        gain = loss * beta * label
        # u = Sigma_j x_j once; mu_j += (gain) u and Sigma_j -= (beta u) u each as one fused
        # multiply-add, rounded once (a shorter chain from the load of Sigma_j than mul + add;
        # guard: benchmarks/online.py)
        for back in range(hi - lo):   # last entry first: as in OGD (ogd.py)
            k = hi - np.uint64(1) - back
            at = _offset(indices[k])
            old_sigma = flat[at + SIGMA]
            u = old_sigma * values[k]
            flat[at + MEAN] = fma(gain, u, flat[at + MEAN])
            flat[at + SIGMA] = fma(-(beta * u), u, old_sigma)
    return updates


def check_coefficients(index: np.ndarray, value: np.ndarray) -> None:
    """ValueError unless the saved rows (features ``index``, (mu, Sigma) ``value``) hold
    finite means and variances with |Sigma| <= 1. A variance starts at 1 and only shrinks;
    it stays positive in exact arithmetic, but a step with r far below x' Sigma x (r = 1e-10,
    |x| ~ 1e3) rounds it to 0 or a tiny negative value, which the kernels carry on with
    (they read |Sigma|, SOFS's sign marks kept features): a snapshot holding one must still
    load. O(rows saved): the other rows are the untouched (0, 1)."""
    check_finite("coefficients_value", value, "entry")
    bad = np.abs(value[:, SIGMA]) > 1.0
    if bad.any():
        row = int(np.argmax(bad))
        raise ValueError(f"state member 'coefficients_value': feature {int(index[row])} has "
                         f"variance {float(value[row, SIGMA])}, expected |Sigma| <= 1 (it "
                         f"starts at 1 and only shrinks)")


class AROW(OnlineLearner):
    """AROW with a diagonal covariance (no selection; ``budget`` is ignored).

    Parameters
    ----------
    n_features : dimension d (None: the width of the first X).
    r : regularization (r > 0).
    """

    name = "arow"
    _bytes_per_feature = 16
    _sparse_arrays = {"coefficients": (0.0, 1.0)}

    def __init__(self, *, n_features: int | None = None, budget: int | None = None,
                 r: float = 1.0) -> None:
        super().__init__(n_features=n_features, budget=budget)
        self.r = r
        self._build_if_shaped()

    def _hyperparameters(self) -> dict:
        return {"r": check_positive("r", self.r)}

    def _allocate(self) -> None:
        self._coefficients = np.zeros((self._n_features, 2), dtype=np.float64)
        self._coefficients[:, SIGMA] = 1.0

    @property
    def sigma_(self) -> np.ndarray:
        """The diagonal covariance Sigma (float64, shape (d,))."""
        return self._coefficients[:, SIGMA].copy()

    def _fit_rows(self, batch, labels, scores) -> int:
        return _arow_fit(batch.indptr, batch.indices, batch.values, labels, self._r,
                         self._coefficients.reshape(-1), scores)

    def _score_rows(self, batch, scores) -> None:
        _dense_scores(batch.indptr, batch.indices, batch.values, self._coefficients[:, MEAN],
                      scores)

    def _check_state(self, rows) -> None:
        check_coefficients(*rows["coefficients"])

    def weights(self) -> tuple[np.ndarray, np.ndarray]:
        mean = self._coefficients[:, MEAN]
        index = np.nonzero(mean)[0]   # int64; flatnonzero would copy the view (8 d bytes)
        return index, mean[index]
