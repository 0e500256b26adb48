"""OGD: online gradient descent on the hinge loss, no feature selection (a baseline).

If y w.x < 1:  w <- w + eta_t y x,  eta_t = eta / t^power_t  (t = examples seen, from 1).
Dense weights: O(m) per example, O(d) memory.

Speed (each choice below is guarded by the training-throughput table of
``benchmarks/online.py``; rerun it after touching a kernel): the kernels index with
``np.uint32`` of the (validated, non-negative) int32 indices, so numba skips its
negative-index wraparound, which made these gathers ~20% slower. For the same reason every
online kernel walks a row with unsigned positions (``np.uint64`` of ``indptr``): with signed
ones each access to ``indices[k]`` and ``values[k]`` paid the wraparound too (PET +22%).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from algorithms.online.base import OnlineLearner, check_finite, check_positive
from algorithms.sparse._prefetch import stream_ahead


@njit(cache=True, inline="always")
def _row_dot(indices, values, lo, hi, weights):
    """w . x over the entries lo:hi (unsigned) in two lanes, even and odd positions, added
    at the end: one chain of adds ran at the add's latency (4 cycles per entry; guard:
    benchmarks/online.py). The dense learners score in this order in fit and in
    decision_function alike, so the two agree bit for bit. O(m)."""
    one = np.uint64(1)
    even = 0.0
    odd = 0.0
    k = lo
    while k + one < hi:
        stream_ahead(indices, values, k)
        even += weights[np.uint32(indices[k])] * values[k]
        odd += weights[np.uint32(indices[k + one])] * values[k + one]
        k += np.uint64(2)
    if k < hi:
        even += weights[np.uint32(indices[k])] * values[k]
    return even + odd


@njit(cache=True, nogil=True)
def _dense_scores(indptr, indices, values, weights, scores):
    """scores[i] = w . x_i for dense w. O(nnz)."""
    for row in range(len(indptr) - 1):
        scores[row] = _row_dot(indices, values, np.uint64(indptr[row]),
                               np.uint64(indptr[row + 1]), weights)


@njit(cache=True, inline="always")
def _decay(t, power_t):
    """t ** power_t, the common power_t = 0.5 as one sqrt: correctly rounded (numba's pow
    was up to one ulp off it) and cheaper (pow took ~4% of OGD's time; guard:
    benchmarks/online.py)."""
    if power_t == 0.5:
        return math.sqrt(t)
    return t ** power_t


@njit(cache=True, nogil=True)
def _ogd_fit(indptr, indices, values, labels, eta, power_t, seen, weights, scores):
    updates = 0
    for row in range(len(indptr) - 1):
        lo, hi = np.uint64(indptr[row]), np.uint64(indptr[row + 1])
        score = _row_dot(indices, values, lo, hi, weights)
        scores[row] = score
        label = labels[row]
        if label * score >= 1.0:
            continue
        updates += 1
        step = label * eta / _decay(seen + row + 1.0, power_t)
        # last entry first: the score pass just read this row's weights, the latest lines
        # are the likeliest still in L1 (guard: benchmarks/online.py)
        for back in range(hi - lo):
            k = hi - np.uint64(1) - back
            weights[np.uint32(indices[k])] += step * values[k]
    return updates


class OGD(OnlineLearner):
    """Online gradient descent on the hinge loss (no selection; ``budget`` is ignored).

    Parameters
    ----------
    n_features : dimension d (None: the width of the first X).
    eta : initial step size.
    power_t : decay exponent of the step size (0.5: eta / sqrt(t); 0: constant).
    """

    name = "ogd"
    _bytes_per_feature = 8
    _state_arrays = ("weights",)

    def __init__(self, *, n_features: int | None = None, budget: int | None = None,
                 eta: float = 1.0, power_t: float = 0.5) -> None:
        super().__init__(n_features=n_features, budget=budget)
        self.eta = eta
        self.power_t = power_t
        self._build_if_shaped()

    def _hyperparameters(self) -> dict:
        return {"eta": check_positive("eta", self.eta),
                "power_t": check_positive("power_t", self.power_t, allow_zero=True)}

    def _allocate(self) -> None:
        self._weights = np.zeros(self._n_features, dtype=np.float64)

    def _fit_rows(self, batch, labels, scores) -> int:
        return _ogd_fit(batch.indptr, batch.indices, batch.values, labels, self._eta,
                        self._power_t, float(self.n_examples_), self._weights, scores)

    def _score_rows(self, batch, scores) -> None:
        _dense_scores(batch.indptr, batch.indices, batch.values, self._weights, scores)

    def _check_state(self, rows) -> None:
        check_finite("weights", self._weights, "weight")

    def weights(self) -> tuple[np.ndarray, np.ndarray]:
        index = np.flatnonzero(self._weights)   # int64
        return index, self._weights[index]
