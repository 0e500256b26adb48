"""SOFS: second-order online feature selection (Wu, Hoi et al.; Algorithm 2).

AROW on a diagonal covariance, then keep only the B features of smallest variance:
if l = max(0, 1 - y mu.x) > 0:  beta = 1 / (x' Sigma x + r),  alpha = l beta,
    mu_j += alpha y Sigma_j x_j,  Sigma_j -= beta Sigma_j^2 x_j^2   (j in the example),
    then mu_j = 0 for every j outside the B smallest Sigma_j (ties: lower index first).
Variances only shrink, so the kept set is the paper's heap of the B smallest variances,
only features of the example can enter, and the heap's lower bound stays valid while kept
variances shrink: a step is O(m), plus O(B) to refresh and re-heapify the kept keys when a
newcomer outranks the bound (rare once the informative features are kept) and O(log B)
per admitted feature; never O(d). mu and Sigma are dense and interleaved (a feature's pair
is 16 bytes, read by one gather; O(d) memory, as in the paper); a kept feature's variance is
stored negated, so membership costs no extra load. The CPU-specific choices in the kernel
each say why; ``benchmarks/online.py`` (training throughput) guards them.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from algorithms.online._fused import fma
from algorithms.online._topset import (
    EMPTY,
    META_LOGGED,
    META_SIZE,
    REBUILD,
    ROW_FEATURE,
    ROW_KEY,
    ROW_VALUE,
    _admits,
    _entry_key,
    _longest_row,
    _offer,
    kept,
)
from algorithms.online.arow import (
    MEAN,
    SIGMA,
    _margin_and_variance,
    _offset,
    check_coefficients,
)
from algorithms.online.base import DEFAULT_BUDGET, check_positive
from algorithms.online.ogd import _dense_scores
from algorithms.online.selecting import SelectingLearner
from algorithms.sparse._bytes import float_bits


@njit(cache=True)
def _refresh_keys(slot_ints, slot_floats, meta, flat):
    """Kept features' keys from the variances (kept keys are not updated per example:
    they only improve, so the heap's lower bound stays valid until the next repair). O(B)."""
    for slot in range(meta[META_SIZE]):
        slot_floats[ROW_KEY, slot] = flat[_offset(slot_ints[ROW_FEATURE, slot]) + SIGMA]


@njit(cache=True, inline="always")
def _sofs_step(flat, at, x, beta, gain):
    """AROW's step on one entry of SOFS's flat (mu, +-Sigma) state at offset ``at``; a
    non-kept feature's mean stays 0. Returns (bits of the stored signed Sigma, new Sigma,
    u = Sigma x)."""
    stored = flat[at + SIGMA]
    old_sigma = abs(stored)
    u = old_sigma * x   # as in AROW, bit for bit
    new_sigma = fma(-(beta * u), u, old_sigma)
    signed_sigma = math.copysign(new_sigma, stored)   # kept stay negative
    flat[at + SIGMA] = signed_sigma
    # kept: += gain u; others stay 0 (+= +-0.0). 0.5 - copysign(0.5, stored) is 1 or 0
    # without a branch: LLVM turned the select into a branch, mispredicted on the ~1/3 of
    # entries that are kept (2.1x slower; guard: benchmarks/online.py)
    flat[at + MEAN] = fma(gain * (0.5 - math.copysign(0.5, stored)), u, flat[at + MEAN])
    return float_bits(signed_sigma), new_sigma, u


@njit(cache=True, inline="always")
def _note_candidate(features, keys, means, n_new, feature, sigma, mean):
    """Append (feature, key -Sigma, mean) at ``n_new``; returns the new count."""
    features[n_new] = feature
    keys[n_new] = -sigma
    means[n_new] = mean
    return n_new + 1


@njit(cache=True, nogil=True)
def _sofs_fit(indptr, indices, values, labels, r, flat, slot_ints, slot_floats,
              map_entries, meta, scores):
    """SOFS over a batch; ``flat[2j:2j + 2] = (mu_j, +-Sigma_j)``, negative when kept."""
    longest = _longest_row(indptr)
    new_features = np.empty(longest, dtype=np.int64)
    new_keys = np.empty(longest, dtype=np.float64)
    new_means = np.empty(longest, dtype=np.float64)
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
        # A candidate is a non-kept feature whose key -Sigma_j reaches the entry key:
        # 0 < Sigma_j <= -entry_key, one unsigned compare of the float's bits (a kept
        # feature's stored Sigma is negative, its bits above every positive float). Rare
        # once the kept set settles, so the branch predicts well; as separate float tests
        # the compiler branched on "kept" itself, unpredictable, 2x slower (guard:
        # benchmarks/online.py).
        limit = float_bits(-_entry_key(slot_ints, slot_floats, meta))
        n_new = 0
        sign_bits = np.uint64(0)   # its top bit: a kept feature was touched (keys stale)
        one = np.uint64(1)
        # Last entry first, two a turn (less loop overhead per entry): the score pass just
        # read this row's state lines, and the latest ones are the likeliest still in L1
        # (guard: benchmarks/online.py)
        k = hi
        while k > lo:
            k -= one
            x = values[k]
            bits, new_sigma, u = _sofs_step(flat, _offset(indices[k]), x, beta, gain)
            paired = k > lo
            if paired:
                prev_x = values[k - one]
                prev_bits, prev_sigma, prev_u = _sofs_step(flat, _offset(indices[k - one]),
                                                           prev_x, beta, gain)
            sign_bits |= bits
            # rare, tested first; an entry with x == 0 changes nothing: not a candidate
            if bits - one < limit and x != 0.0:
                n_new = _note_candidate(new_features, new_keys, new_means, n_new, indices[k],
                                        new_sigma, gain * u)
            if paired:
                k -= one
                sign_bits |= prev_bits
                if prev_bits - one < limit and prev_x != 0.0:
                    n_new = _note_candidate(new_features, new_keys, new_means, n_new,
                                            indices[k], prev_sigma, gain * prev_u)
        if sign_bits >> np.uint64(63):
            meta[META_LOGGED] = REBUILD
        for q in range(n_new - 1, -1, -1):   # in row order; exact: _admits, then the heap
            feature = new_features[q]
            key = new_keys[q]
            if not _admits(slot_ints, slot_floats, meta, feature, key):
                continue
            if meta[META_LOGGED] != 0 and meta[META_SIZE] == slot_ints.shape[1]:
                _refresh_keys(slot_ints, slot_floats, meta, flat)
            evicted, _, accepted = _offer(slot_ints, slot_floats, map_entries,
                                          meta, feature, key, 0.0)
            if accepted:
                at = _offset(feature)
                flat[at + SIGMA] = -flat[at + SIGMA]
                flat[at + MEAN] = new_means[q]
                if evicted != EMPTY:
                    at = _offset(evicted)
                    flat[at + SIGMA] = -flat[at + SIGMA]
                    flat[at + MEAN] = 0.0
    return updates


class SOFS(SelectingLearner):
    """Second-order online feature selection (AROW + MaxHeap truncation).

    Parameters
    ----------
    n_features : dimension d (None: the width of the first X).
    budget : B, the most non-zero weights kept.
    r : AROW regularization (r > 0); smaller r means larger, more aggressive steps.
    """

    name = "sofs"
    _keys_are_abs_values = False   # keys: -Sigma of the kept features, refreshed lazily
    _bytes_per_feature = 16
    _state_arrays = SelectingLearner._state_arrays
    _sparse_arrays = {"coefficients": (0.0, 1.0)}

    def __init__(self, *, n_features: int | None = None, budget: int = DEFAULT_BUDGET,
                 r: float = 1.0) -> None:
        super().__init__(n_features=n_features, budget=budget)
        self.r = r
        self._build_if_shaped()

    def _hyperparameters(self) -> dict:
        return {"r": check_positive("r", self.r)}

    def _allocate(self) -> None:
        super()._allocate()
        self._coefficients = np.zeros((self._n_features, 2), dtype=np.float64)
        self._coefficients[:, SIGMA] = 1.0

    @property
    def sigma_(self) -> np.ndarray:
        """The diagonal covariance Sigma (float64, shape (d,))."""
        return np.abs(self._coefficients[:, SIGMA])

    def _fit_rows(self, batch, labels, scores) -> int:
        return _sofs_fit(batch.indptr, batch.indices, batch.values, labels, self._r,
                         self._coefficients.reshape(-1), *self._kernel_state(), scores)

    def _score_rows(self, batch, scores) -> None:
        _dense_scores(batch.indptr, batch.indices, batch.values, self._coefficients[:, MEAN],
                      scores)

    def _check_state(self, rows) -> None:
        """The top set, the coefficients, and their agreement: the kept features are
        exactly those with a negative stored Sigma, only they have a non-zero mean, and the
        slots' stored values are 0 (the weights live in the coefficients). O(B + rows)."""
        super()._check_state(rows)
        if self._meta[META_LOGGED] > 0:
            raise ValueError("state member 'meta': SOFS marks its heap for a rebuild, it "
                             f"never logs touches (log length {int(self._meta[META_LOGGED])})")
        index, value = rows["coefficients"]
        check_coefficients(index, value)
        if (self._slot_floats[ROW_VALUE] != 0.0).any():
            raise ValueError("state member 'slot_floats': SOFS keeps its weights in the "
                             "coefficients, a slot's stored value must be 0")
        features = self._slot_ints[ROW_FEATURE, :self._meta[META_SIZE]]
        kept_mask = np.signbit(value[:, SIGMA])   # untouched rows (0, 1): not kept
        unmarked = ~np.signbit(self._coefficients[features, SIGMA])
        if unmarked.any() or np.count_nonzero(kept_mask) != len(features):
            raise ValueError(f"state members 'coefficients_value' and 'slot_ints': "
                             f"{np.count_nonzero(kept_mask)} features are marked kept (a "
                             f"negative Sigma), {len(features)} are kept, "
                             f"{np.count_nonzero(unmarked)} of them unmarked")
        # A key is -Sigma when the feature entered or the keys were refreshed; variances
        # only shrink, so |key| >= |Sigma|, equal while no kept feature has been touched
        # since (log 0). (Not key <= 0: a step rounding Sigma below 0 enters as +|Sigma|.)
        keys = np.abs(self._slot_floats[ROW_KEY, :len(features)])
        sigma = np.abs(self._coefficients[features, SIGMA])
        stale = keys != sigma if self._meta[META_LOGGED] == 0 else keys < sigma
        if stale.any():
            raise ValueError(f"state member 'slot_floats': slot {int(np.argmax(stale))} has "
                             f"key {float(self._slot_floats[ROW_KEY, np.argmax(stale)])}, "
                             f"its feature's variance is {float(sigma[np.argmax(stale)])}")
        stray = (value[:, MEAN] != 0.0) & ~kept_mask
        if stray.any():
            raise ValueError(f"state member 'coefficients_value': feature "
                             f"{int(index[np.argmax(stray)])} is not kept but has mean "
                             f"{float(value[np.argmax(stray), MEAN])}")

    def weights(self) -> tuple[np.ndarray, np.ndarray]:
        features, _ = kept(self._slot_ints, self._slot_floats, self._meta)
        values = self._coefficients[features, MEAN]
        nonzero = values != 0.0
        return features[nonzero], values[nonzero]



