"""PET: Perceptron with truncation (Wang et al. 2014; Wu, Hoi et al., section 2).

On a mistake (y w.x <= 0): w <- w + eta_t y x, then keep the B largest |w| (ties: lower
feature index first) and zero the rest; eta_t = eta / t^power_t (constant by default).
``update_on="hinge"`` updates whenever the hinge loss is positive (y w.x < 1), as
LIBSOL's PET does. Cost per example O(m log B) with the top set (the paper's version sorts
all d weights, O(d log B)); memory O(B). The CPU-specific choices in the kernel each say why;
``benchmarks/online.py`` (training throughput) guards them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from algorithms.online._topset import (
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
from algorithms.online.ogd import _decay
from algorithms.online.selecting import SelectingLearner
from algorithms.sparse._bytes import float_bits
from algorithms.sparse._prefetch import stream_ahead

_BRANCH_BELOW_RATE = 0.03


@njit(cache=True, nogil=True)
def _pet_fit(indptr, indices, values, labels, eta, power_t, seen, hinge, slot_ints,
             slot_floats, map_entries, meta, scores):
    longest = _longest_row(indptr)
    slots = np.empty(longest, dtype=np.int64)
    new_features = np.empty(longest, dtype=np.int64)
    new_values = np.empty(longest, dtype=np.float64)
    kept_positions = np.empty(longest, dtype=np.int64)
    absent = slot_floats.shape[1] - 1
    unsigned_absent = np.uint64(absent)
    one = np.uint64(1)
    updates = 0
    reach_rate = 1.0   # running fraction of an update's entries reaching the entry key
    for row in range(len(indptr) - 1):
        lo, hi = np.uint64(indptr[row]), np.uint64(indptr[row + 1])   # unsigned: see ogd.py
        seed, shift = _map_hash(meta)   # per row: an admission may rebuild the map
        score = 0.0   # two lanes, even and odd positions (_score_rows' order): one chain
        odd_score = 0.0   # of adds ran at the add's latency, 4 cycles per entry (guard above)
        k = lo
        while k + one < hi:
            stream_ahead(indices, values, k)
            slot = _map_lookup(map_entries, seed, shift, np.uint64(np.uint32(indices[k])),
                               unsigned_absent)
            odd_slot = _map_lookup(map_entries, seed, shift,
                                   np.uint64(np.uint32(indices[k + one])), unsigned_absent)
            slots[k - lo] = slot
            slots[k + one - lo] = odd_slot
            score += slot_floats[ROW_VALUE, slot] * values[k]
            odd_score += slot_floats[ROW_VALUE, odd_slot] * values[k + one]
            k += np.uint64(2)
        if k < hi:
            slot = _map_lookup(map_entries, seed, shift, np.uint64(np.uint32(indices[k])),
                               unsigned_absent)
            slots[k - lo] = slot
            score += slot_floats[ROW_VALUE, slot] * values[k]
        score += odd_score
        scores[row] = score
        label = labels[row]
        margin = label * score
        if (hinge and margin >= 1.0) or (not hinge and margin > 0.0):
            continue
        updates += 1
        step = eta * label
        if power_t != 0.0:
            step /= _decay(seen + row + 1.0, power_t)
        n_kept = 0
        for k in range(lo, hi):   # branch-free: the kept features' positions
            kept_positions[n_kept] = k
            n_kept += slots[k - lo] != absent
        logging = _logs_touches(meta, n_kept)
        least_key = np.inf
        for q in range(n_kept):
            k = kept_positions[q]
            slot = slots[k - lo]
            weight = slot_floats[ROW_VALUE, slot] + step * values[k]
            slot_floats[ROW_VALUE, slot] = weight
            least_key = _set_key(slot_ints, slot_floats, meta, slot, abs(weight), logging,
                                 least_key)
        if not logging:
            _lower_bound_below(slot_ints, slot_floats, meta, least_key)
        # Newcomers that may enter: absent, delta != 0, |delta| reaching the entry key
        # (exact check below). When few entries reach it (a running rate under 3%: the
        # hinge variant on X1, 0.7%) a branch on one unsigned compare of float bits skips
        # the rest; when many do (the perceptron, 11%) that branch mispredicts and a
        # branch-free compaction is faster (both variants: guard benchmarks/online.py).
        entry_key = _entry_key(slot_ints, slot_floats, meta)
        n_new = 0
        reaching = 0
        if reach_rate > _BRANCH_BELOW_RATE:
            for k in range(lo, hi):
                delta = step * values[k]
                reaches = abs(delta) >= entry_key
                reaching += reaches
                new_features[n_new] = indices[k]
                new_values[n_new] = delta
                n_new += (slots[k - lo] == absent) & (delta != 0.0) & reaches
        else:
            entry_bits = _entry_bits(entry_key)
            for k in range(lo, hi):
                delta = step * values[k]
                if float_bits(abs(delta)) >= entry_bits:
                    reaching += 1
                    if slots[k - lo] == absent:
                        new_features[n_new] = indices[k]
                        new_values[n_new] = delta
                        n_new += 1
        reach_rate += 0.125 * (reaching / max(hi - lo, 1) - reach_rate)
        for q in range(n_new):
            if not _admits(slot_ints, slot_floats, meta, new_features[q], abs(new_values[q])):
                continue
            _offer(slot_ints, slot_floats, map_entries, meta, new_features[q],
                   abs(new_values[q]), new_values[q])
    return updates


class PET(SelectingLearner):
    """Perceptron with truncation to the B largest |w|.

    Parameters
    ----------
    n_features : dimension d (None: the width of the first X).
    budget : B, the most non-zero weights kept.
    eta : step size (only the scale of w; irrelevant to accuracy when ``update_on="mistake"``
        and ``power_t=0``).
    update_on : ``"mistake"`` (the paper's perceptron) or ``"hinge"`` (LIBSOL's variant).
    power_t : step decay, eta_t = eta / t^power_t with t the example's position from 1 (0: a
        constant step; LIBSOL's first-order learners use 0.5).

    Notes
    -----
    Truncation zeroes a weight whenever a newcomer's single step outranks it, so the
    mistake-driven rule rarely lets small informative weights grow (on the seed's X1 it
    scores near chance at every B); ``update_on="hinge"`` with a tuned ``eta`` does far
    better.

    Examples
    --------
    >>> import numpy as np
    >>> pet = PET(n_features=4, budget=2).partial_fit(np.eye(4), [1, -1, 1, 1])
    >>> len(pet.selected_features()) <= 2
    True
    >>> PET(budget=2).fit(np.eye(4), ["no", "yes", "no", "yes"]).predict(np.eye(4)[:2])
    array(['no', 'yes'], dtype='<U3')
    """

    name = "pet"

    def __init__(self, *, n_features: int | None = None, budget: int = DEFAULT_BUDGET,
                 eta: float = 1.0, update_on: str = "mistake", power_t: float = 0.0) -> None:
        super().__init__(n_features=n_features, budget=budget)
        self.eta = eta
        self.update_on = update_on
        self.power_t = power_t
        self._build_if_shaped()

    def _hyperparameters(self) -> dict:
        eta = check_positive("eta", self.eta)
        power_t = check_positive("power_t", self.power_t, allow_zero=True)
        if not isinstance(self.update_on, str) or self.update_on not in ("mistake", "hinge"):
            raise ValueError(f"update_on must be 'mistake' or 'hinge', got {self.update_on!r}")
        return {"eta": eta, "update_on": self.update_on, "power_t": power_t}

    def _fit_rows(self, batch, labels, scores) -> int:
        return _pet_fit(batch.indptr, batch.indices, batch.values, labels, self._eta,
                        self._power_t, float(self.n_examples_), self._update_on == "hinge",
                        *self._kernel_state(), scores)

