"""FOFS: first-order online feature selection (Wang et al. 2014, Algorithm 1).

If y w.x <= 1:  w^ = (1 - lam eta) w + eta y x;  w~ = min(1, 1 / (sqrt(lam) ||w^||)) w^;
                w  = truncate(w~, B)  (keep the B largest |w|, ties: lower index first).
Otherwise:      w  = (1 - lam eta) w.

The shrink and the projection scale every weight alike, so w = s v with a lazy global
scale s; ||v||^2 is kept incrementally (recomputed exactly every B updates). A step costs
O(m log B) instead of the paper's O(d); memory is O(B). The CPU-specific choices in the
kernel each say why; ``benchmarks/online.py`` (training throughput) guards them.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from algorithms.online._topset import (
    META_LOGGED,
    REBUILD,
    ROW_KEY,
    ROW_VALUE,
    _admits,
    _entry_bits,
    _entry_key,
    _logs_touches,
    _longest_row,
    _lower_bound_below,
    _map_hash,
    _map_lookup,
    _offer,
    _set_key,
)
from algorithms.online.base import DEFAULT_BUDGET, check_positive
from algorithms.online.selecting import SelectingLearner
from algorithms.sparse._bytes import float_bits
from algorithms.sparse._prefetch import stream_ahead

SCALE, SQUARED_NORM, SINCE_EXACT = 0, 1, 2
_SMALLEST_SCALE = 1e-60


@njit(cache=True)
def _fold_scale(slot_floats, meta, norm_state):
    """Multiply the stored values by the scale, set the scale to 1, recompute ||v||^2.
    Rounding may reorder near-equal keys, so the heap is marked for a rebuild and the lower
    bound reset to -inf."""
    scale = norm_state[SCALE]
    total = 0.0
    for slot in range(meta[0]):
        value = slot_floats[ROW_VALUE, slot] * scale
        slot_floats[ROW_VALUE, slot] = value
        slot_floats[ROW_KEY, slot] = abs(value)
        total += value * value
    slot_floats[ROW_KEY, slot_floats.shape[1] - 1] = -np.inf
    meta[META_LOGGED] = REBUILD
    norm_state[SCALE] = 1.0
    norm_state[SQUARED_NORM] = total
    norm_state[SINCE_EXACT] = 0.0


@njit(cache=True)
def _exact_squared_norm(slot_floats, meta):
    total = 0.0
    for slot in range(meta[0]):
        total += slot_floats[ROW_VALUE, slot] * slot_floats[ROW_VALUE, slot]
    return total


@njit(cache=True, nogil=True)
def _fofs_fit(indptr, indices, values, labels, eta, lam, slot_ints, slot_floats,
              map_entries, meta, norm_state, scores):
    longest = _longest_row(indptr)
    new_features = np.empty(longest, dtype=np.int64)
    new_values = np.empty(longest, dtype=np.float64)
    kept_entries = np.empty(longest, dtype=np.uint64)
    shrink = 1.0 - lam * eta
    root_lam = math.sqrt(lam)
    capacity = slot_ints.shape[1]
    unsigned_absent = np.uint64(slot_floats.shape[1] - 1)
    updates = 0
    for row in range(len(indptr) - 1):
        lo, hi = np.uint64(indptr[row]), np.uint64(indptr[row + 1])   # unsigned: see ogd.py
        seed, shift = _map_hash(meta)   # per row: an admission may rebuild the map
        scale = norm_state[SCALE]
        total = 0.0
        example_squared = 0.0   # sum of x_k^2: a second, independent chain (free here)
        n_kept = 0
        for k in range(lo, hi):
            stream_ahead(indices, values, k)
            slot = _map_lookup(map_entries, seed, shift, np.uint64(np.uint32(indices[k])),
                               unsigned_absent)
            # branch-free: the kept entries, one store each: (offset in the row) << 32 | slot
            # (a slot is below the budget + 1 and a row shorter than 2^32 entries)
            kept_entries[n_kept] = ((k - lo) << np.uint64(32)) | slot
            n_kept += slot != unsigned_absent
            total += slot_floats[ROW_VALUE, slot] * values[k]
            example_squared += values[k] * values[k]
        score = scale * total
        scores[row] = score
        label = labels[row]
        scale *= shrink
        if label * score <= 1.0:
            updates += 1
            squared = norm_state[SQUARED_NORM]
            step = eta * label / scale
            kept_squared = 0.0
            logging = _logs_touches(meta, n_kept)
            least_key = np.inf
            for q in range(n_kept):
                k = lo + (kept_entries[q] >> np.uint64(32))
                slot = kept_entries[q] & np.uint64(0xFFFFFFFF)
                old = slot_floats[ROW_VALUE, slot]
                new = old + step * values[k]
                slot_floats[ROW_VALUE, slot] = new
                squared += new * new - old * old
                kept_squared += values[k] * values[k]
                # X1: ~122 touches per update, so mostly set directly
                least_key = _set_key(slot_ints, slot_floats, meta, slot, abs(new), logging,
                                     least_key)
            if not logging:
                _lower_bound_below(slot_ints, slot_floats, meta, least_key)
            if lam > 0.0:   # ||w^||: every newcomer counts before the truncation
                newcomers = step * step * max(example_squared - kept_squared, 0.0)
                norm = scale * math.sqrt(max(squared + newcomers, 0.0))
                if root_lam * norm > 1.0:
                    scale *= 1.0 / (root_lam * norm)
            # Newcomers that may enter: |delta| reaching the entry key (at least the smallest
            # positive float, so delta != 0), as one unsigned compare of float bits, then
            # absent. Few entries pass the first test (none of most rows at the tuned
            # settings), so both branches predict well; _admits decides exactly below.
            entry_bits = _entry_bits(_entry_key(slot_ints, slot_floats, meta))
            n_new = 0
            for k in range(lo, hi):
                delta = step * values[k]
                if float_bits(abs(delta)) >= entry_bits and _map_lookup(
                        map_entries, seed, shift, np.uint64(np.uint32(indices[k])),
                        unsigned_absent) == unsigned_absent:
                    new_features[n_new] = indices[k]
                    new_values[n_new] = delta
                    n_new += 1
            for q in range(n_new):
                if not _admits(slot_ints, slot_floats, meta, new_features[q], abs(new_values[q])):
                    continue
                evicted, evicted_value, accepted = _offer(
                    slot_ints, slot_floats, map_entries, meta, new_features[q],
                    abs(new_values[q]), new_values[q])
                if accepted:
                    squared += new_values[q] * new_values[q] - evicted_value * evicted_value
            norm_state[SINCE_EXACT] += 1.0
            if norm_state[SINCE_EXACT] >= capacity:
                squared = _exact_squared_norm(slot_floats, meta)
                norm_state[SINCE_EXACT] = 0.0
            norm_state[SQUARED_NORM] = squared
        norm_state[SCALE] = scale
        if scale < _SMALLEST_SCALE:
            _fold_scale(slot_floats, meta, norm_state)
    return updates


class FOFS(SelectingLearner):
    """First-order online feature selection by sparse projection.

    Parameters
    ----------
    n_features : dimension d (None: the width of the first X).
    budget : B, the most non-zero weights kept.
    eta : step size (Wang et al. use 0.2).
    lam : shrinkage lambda; weights stay in the L2 ball of radius 1/sqrt(lam) (0: none).
    """

    name = "fofs"
    _two_lane_scores = False   # one chain: two lanes measured 4% slower in FOFS's loop
    # (guard: benchmarks/online.py, training throughput; decision_function follows suit)
    _state_arrays = SelectingLearner._state_arrays + ("norm_state",)

    def __init__(self, *, n_features: int | None = None, budget: int = DEFAULT_BUDGET,
                 eta: float = 0.2, lam: float = 0.01) -> None:
        super().__init__(n_features=n_features, budget=budget)
        self.eta = eta
        self.lam = lam
        self._build_if_shaped()

    def _hyperparameters(self) -> dict:
        eta = check_positive("eta", self.eta)
        lam = check_positive("lam", self.lam, allow_zero=True)
        if lam * eta >= 1.0:
            raise ValueError(f"lam * eta must be < 1, got {lam * eta}")
        return {"eta": eta, "lam": lam}

    def _allocate(self) -> None:
        super()._allocate()
        self._norm_state = np.array([1.0, 0.0, 0.0])

    def _check_state(self, rows) -> None:
        super()._check_state(rows)
        scale, squared, since = (float(v) for v in self._norm_state)
        if not _SMALLEST_SCALE <= scale <= 1.0:   # shrinks, projects; folded below 1e-60
            raise ValueError(f"state member 'norm_state': scale {scale} is outside "
                             f"[{_SMALLEST_SCALE}, 1]")
        if not math.isfinite(squared):
            raise ValueError(f"state member 'norm_state': squared norm {squared} is not finite")
        if not (since.is_integer() and 0 <= since < self._slot_ints.shape[1]):
            raise ValueError(f"state member 'norm_state': updates since the exact norm "
                             f"{since} is not an integer in [0, {self._slot_ints.shape[1]})")

    def _weight_scale(self) -> float:
        return float(self._norm_state[SCALE])

    def _fit_rows(self, batch, labels, scores) -> int:
        return _fofs_fit(batch.indptr, batch.indices, batch.values, labels, self._eta,
                         self._lam, *self._kernel_state(), self._norm_state, scores)
