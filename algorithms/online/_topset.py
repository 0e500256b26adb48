"""Bounded, lazily ordered indexed heap ("top set") of at most ``capacity`` features.

The top set holds the features a selector keeps: PET and FOFS keep the B largest |w|,
SOFS the B smallest variances. Each kept feature lives in a *slot*; slots never move, so a
slot's weight is updated in place. Order: a feature ranks higher when its key is larger;
among equal keys the lower feature index ranks higher. This is a strict total order, so
"the top B of a set" is unique and does not depend on the order features were offered.
The heap (min-heap: its root is the lowest-ranked kept feature) decides evictions.

Laziness: changing a kept feature's key (``_touch``) does not sift. It logs the old key and
lowers a running *lower bound* on every kept rank. An absent feature that does not outrank
that bound cannot enter (O(1), the common case). Only when one might, the heap is repaired:
the logged keys are rolled back and re-applied one by one with exact sifts, O(k log B) for
k touches since the last repair, or rebuilt in O(B) when that is cheaper. So a step costs
O(m log B) at worst and O(m) typically, independent of the dimension d.

Layout (flat numpy arrays; ``C`` = capacity):
- ``slot_ints`` int64 (4, C): feature of slot, heap (position -> slot), position of slot,
  touch log (slots).
- ``slot_floats`` float64 (3, C + 1): key, stored weight, touch log (old keys). Column C is
  the "absent" slot: value 0 (branch-free scoring), key = the lower bound.
- ``meta`` int64 (5,): size, hash seed, hash shift, touch-log length (-1: rebuild needed),
  feature of the lower bound.
- ``map_entries``: the map feature -> slot, a direct table or a cuckoo hash (``_featuremap``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from algorithms.online._featuremap import (
    _map_delete,
    _map_hash,
    _map_insert,
    _map_lookup,
    allocate_map,
    rebuild_map,  # a loaded state's map
)
from algorithms.online._hashmap import EMPTY, META_SHIFT, META_SIZE, map_shift
from algorithms.sparse._bytes import float_bits

ROW_FEATURE, ROW_HEAP, ROW_POSITION, ROW_LOG = 0, 1, 2, 3
ROW_KEY, ROW_VALUE, ROW_OLD_KEY = 0, 1, 2
META_LOGGED, META_BOUND_FEATURE = 3, 4
REBUILD = -1
BELOW_ALL = np.iinfo(np.int64).max   # a bound feature ranking below any with its key

__all__ = ["EMPTY", "ROW_VALUE", "_admits", "_entry_bits", "_entry_key", "_logs_touches",
           "_longest_row", "_lower_bound_below", "_map_hash", "_map_lookup", "_offer", "_set_key",
           "_touch",
           "allocate", "check", "kept", "rebuild_map"]


def allocate(capacity: int, n_features: int | None = None) -> dict[str, np.ndarray]:
    """Arrays of an empty top set able to hold ``capacity`` of ``n_features`` features
    (the feature map's layout depends on both: ``_featuremap``)."""
    capacity = max(int(capacity), 1)
    map_entries, shift = allocate_map(capacity, n_features)
    slot_floats = np.zeros((3, capacity + 1), dtype=np.float64)
    slot_floats[ROW_KEY, capacity] = np.inf
    return {
        "slot_ints": np.full((4, capacity), EMPTY, dtype=np.int64),
        "slot_floats": slot_floats,
        "map_entries": map_entries,
        "meta": np.array([0, 0, shift, 0, EMPTY], dtype=np.int64),
    }


def _fail(member: str, problem: str):
    raise ValueError(f"state member {member!r}: {problem}")


def _first(bad: np.ndarray) -> int:
    return int(np.argmax(bad))


def _ranks_below(key_a, feature_a, key_b, feature_b) -> np.ndarray:
    """``_below`` over arrays."""
    return (key_a < key_b) | ((key_a == key_b) & (feature_a > feature_b))


def check(slot_ints: np.ndarray, slot_floats: np.ndarray, meta: np.ndarray, *,
          n_features: int, keys_are_abs_values: bool) -> None:
    """ValueError (naming the member) unless the arrays are a top set the kernels can run
    on: what ``allocate``, ``_offer``, ``_touch`` / ``_set_key`` and ``_repair`` leave.
    Shapes and dtypes must already be those of ``allocate`` (capacity C = the columns of
    ``slot_ints``). Vectorized numpy, O(B log B); the map is checked after its rebuild
    (``_featuremap.check_map``).

    - meta: 0 <= size <= C; the hash shift of the capacity (it sizes the cuckoo buckets);
      touch-log length REBUILD or in [0, C].
    - slot_ints: the occupied slots 0..size-1 hold distinct features in [0, d) (and
      < 2^31, the cuckoo packing); heap positions 0..size-1 a permutation of them with
      ``position[heap[p]] == p``; the free slots and positions EMPTY; touch-log entries
      EMPTY or occupied slots, the first ``logged`` occupied.
    - slot_floats: finite (the absent column's key, the lower bound, may be +-inf, not
      NaN); the absent column's value 0 (scores of absent features); free slots 0;
      ``keys_are_abs_values``: each occupied key is |its value| (PET, FOFS).
    - order: the lower bound ranks at or below every occupied slot; with the log not
      marked REBUILD, the heap is ordered by the keys of the last repair (the current keys
      with the logged old keys rolled back).
    """
    capacity = slot_ints.shape[1]
    size, shift, logged = int(meta[META_SIZE]), int(meta[META_SHIFT]), int(meta[META_LOGGED])
    if not 0 <= size <= capacity:
        _fail("meta", f"size {size} is outside [0, {capacity}]")
    if shift != map_shift(capacity):
        _fail("meta", f"hash shift {shift}, expected {map_shift(capacity)} for capacity "
                      f"{capacity}")
    if logged != REBUILD and not 0 <= logged <= capacity:
        _fail("meta", f"touch-log length {logged} is neither {REBUILD} nor in [0, {capacity}]")
    features = slot_ints[ROW_FEATURE, :size]
    limit = min(int(n_features), 1 << 31)
    if size and (features.min() < 0 or features.max() >= limit):
        bad = (features < 0) | (features >= limit)
        _fail("slot_ints", f"slot {_first(bad)} holds feature {int(features[_first(bad)])}, "
                           f"outside [0, {limit})")
    if len(np.unique(features)) != size:
        _fail("slot_ints", "a feature is kept in two slots")
    for row, what in ((ROW_FEATURE, "feature"), (ROW_HEAP, "heap"), (ROW_POSITION, "position")):
        unused = slot_ints[row, size:] != EMPTY
        if unused.any():
            _fail("slot_ints", f"{what} row: entry {size + _first(unused)} is past the size "
                               f"{size} but not empty ({EMPTY})")
    heap = slot_ints[ROW_HEAP, :size]
    if size and (heap.min() < 0 or heap.max() >= size):
        _fail("slot_ints", f"heap holds slots outside [0, {size})")
    if not np.array_equal(slot_ints[ROW_POSITION][heap], np.arange(size)):
        _fail("slot_ints", "heap and slot positions do not point at each other")
    log = slot_ints[ROW_LOG]
    if ((log < EMPTY) | (log >= size)).any() or (logged > 0 and log[:logged].min() < 0):
        _fail("slot_ints", f"touch log holds entries that are not occupied slots ({logged} "
                           f"logged, size {size})")

    keys, values, old_keys = (slot_floats[ROW_KEY, :capacity], slot_floats[ROW_VALUE],
                              slot_floats[ROW_OLD_KEY])
    for array, what in ((keys, "keys"), (values, "values"), (old_keys, "logged keys")):
        if not np.isfinite(array).all():
            _fail("slot_floats", f"{what}: entry {_first(~np.isfinite(array))} is "
                                 f"{float(array[_first(~np.isfinite(array))])}")
    bound_key, bound_feature = slot_floats[ROW_KEY, capacity], meta[META_BOUND_FEATURE]
    if np.isnan(bound_key):
        _fail("slot_floats", "the lower bound is NaN")
    if values[capacity] != 0.0:
        _fail("slot_floats", f"the absent slot's value is {float(values[capacity])}, not 0")
    if (keys[size:] != 0.0).any() or (values[size:capacity] != 0.0).any():
        _fail("slot_floats", f"a free slot (past the size {size}) has a key or value")
    if keys_are_abs_values and not np.array_equal(keys[:size], np.abs(values[:size])):
        bad = keys[:size] != np.abs(values[:size])
        _fail("slot_floats", f"slot {_first(bad)}: key {float(keys[_first(bad)])} is not "
                             f"|value| = {abs(float(values[_first(bad)]))}")
    below = _ranks_below(keys[:size], features, bound_key, bound_feature)
    if below.any():
        _fail("slot_floats", f"slot {_first(below)} ranks below the lower bound "
                             f"({float(bound_key)}, feature {int(bound_feature)})")
    if logged != REBUILD and size > 1:
        ordered_keys = keys.copy()
        if logged > 0:   # _repair's roll back: each logged slot gets its first old key
            slots, first = np.unique(log[:logged], return_index=True)
            ordered_keys[slots] = old_keys[first]
        child = heap[1:]
        parent = heap[(np.arange(1, size) - 1) >> 1]
        wrong = _ranks_below(ordered_keys[child], slot_ints[ROW_FEATURE, child],
                             ordered_keys[parent], slot_ints[ROW_FEATURE, parent])
        if wrong.any():
            _fail("slot_ints", f"heap position {1 + _first(wrong)} ranks below its parent")


@njit(cache=True, inline="always")
def _below(key_a, feature_a, key_b, feature_b):
    """True when (key_a, feature_a) ranks strictly below (key_b, feature_b)."""
    return key_a < key_b or (key_a == key_b and feature_a > feature_b)


@njit(cache=True, inline="always")
def _slot_below(slot_ints, slot_floats, a, b):
    return _below(slot_floats[ROW_KEY, a], slot_ints[ROW_FEATURE, a],
                  slot_floats[ROW_KEY, b], slot_ints[ROW_FEATURE, b])


@njit(cache=True)
def _sift_up(slot_ints, slot_floats, position):
    heap = slot_ints[ROW_HEAP]
    where = slot_ints[ROW_POSITION]
    slot = heap[position]
    while position > 0:
        parent = (position - 1) >> 1
        if not _slot_below(slot_ints, slot_floats, slot, heap[parent]):
            break
        heap[position] = heap[parent]
        where[heap[position]] = position
        position = parent
    heap[position] = slot
    where[slot] = position


@njit(cache=True)
def _sift_down(slot_ints, slot_floats, position, size):
    heap = slot_ints[ROW_HEAP]
    where = slot_ints[ROW_POSITION]
    slot = heap[position]
    while True:
        child = 2 * position + 1
        if child >= size:
            break
        if child + 1 < size and _slot_below(slot_ints, slot_floats, heap[child + 1], heap[child]):
            child += 1
        if not _slot_below(slot_ints, slot_floats, heap[child], slot):
            break
        heap[position] = heap[child]
        where[heap[position]] = position
        position = child
    heap[position] = slot
    where[slot] = position


@njit(cache=True, inline="always")
def _lower_bound_to(slot_ints, slot_floats, meta, key, feature):
    """Lower the bound to (key, feature) when that ranks below it."""
    bound_column = slot_ints.shape[1]
    if _below(key, feature, slot_floats[ROW_KEY, bound_column], meta[META_BOUND_FEATURE]):
        slot_floats[ROW_KEY, bound_column] = key
        meta[META_BOUND_FEATURE] = feature


@njit(cache=True, inline="always")
def _touch(slot_ints, slot_floats, meta, slot, key):
    """Set a kept feature's key without sifting: log the old key, lower the bound. O(1)."""
    old = slot_floats[ROW_KEY, slot]
    if key == old:
        return
    slot_floats[ROW_KEY, slot] = key
    logged = meta[META_LOGGED]
    if logged != REBUILD:
        if logged < slot_ints.shape[1]:
            slot_ints[ROW_LOG, logged] = slot
            slot_floats[ROW_OLD_KEY, logged] = old
            meta[META_LOGGED] = logged + 1
        else:
            meta[META_LOGGED] = REBUILD
    _lower_bound_to(slot_ints, slot_floats, meta, key, slot_ints[ROW_FEATURE, slot])


@njit(cache=True, inline="always")
def _logs_touches(meta, count):
    """Before up to ``count`` key changes: True when they should be logged by ``_touch``;
    False when the next repair would rebuild the heap anyway (see ``_repair``): the rebuild
    is marked now, ``_set_key`` sets each key directly and ``_lower_bound_below`` lowers the
    bound once after them (no log, no per-change bound). O(1)."""
    logged = meta[META_LOGGED]
    if logged == REBUILD:
        return False
    size = meta[META_SIZE]
    if (logged + count) * math.log2(size + 1) >= size:
        meta[META_LOGGED] = REBUILD
        return False
    return True


@njit(cache=True, inline="always")
def _set_key(slot_ints, slot_floats, meta, slot, key, logging, least_key):
    """One key change of a batch begun with ``_logs_touches``: through ``_touch`` when it
    logs, else set directly. Returns the least key set directly so far (``least_key``
    starts at inf), for ``_lower_bound_below`` after the batch. O(1)."""
    if logging:
        _touch(slot_ints, slot_floats, meta, slot, key)
        return least_key
    slot_floats[ROW_KEY, slot] = key
    return min(least_key, key)


@njit(cache=True, inline="always")
def _lower_bound_below(slot_ints, slot_floats, meta, key):
    """Lower the bound below every feature whose key is at least ``key``."""
    bound_column = slot_ints.shape[1]
    if key <= slot_floats[ROW_KEY, bound_column]:
        slot_floats[ROW_KEY, bound_column] = key
        meta[META_BOUND_FEATURE] = BELOW_ALL


@njit(cache=True)
def _repair(slot_ints, slot_floats, meta):
    """Restore the heap order; afterwards the bound is the root. O(min(k log B, B))."""
    size = meta[META_SIZE]
    logged = meta[META_LOGGED]
    if logged == REBUILD or logged * math.log2(size + 1) >= size:   # see _logs_touches
        for position in range(size // 2 - 1, -1, -1):
            _sift_down(slot_ints, slot_floats, position, size)
    elif logged > 0:
        final = np.empty(logged, dtype=np.float64)
        for i in range(logged):
            final[i] = slot_floats[ROW_KEY, slot_ints[ROW_LOG, i]]
        for i in range(logged - 1, -1, -1):   # roll back to the keys of the last repair
            slot_floats[ROW_KEY, slot_ints[ROW_LOG, i]] = slot_floats[ROW_OLD_KEY, i]
        for i in range(logged):               # re-apply each change with an exact sift
            slot = slot_ints[ROW_LOG, i]
            old = slot_floats[ROW_KEY, slot]
            slot_floats[ROW_KEY, slot] = final[i]
            if final[i] > old:
                _sift_down(slot_ints, slot_floats, slot_ints[ROW_POSITION, slot], size)
            elif final[i] < old:
                _sift_up(slot_ints, slot_floats, slot_ints[ROW_POSITION, slot])
    meta[META_LOGGED] = 0
    root = slot_ints[ROW_HEAP, 0]
    slot_floats[ROW_KEY, slot_ints.shape[1]] = slot_floats[ROW_KEY, root]
    meta[META_BOUND_FEATURE] = slot_ints[ROW_FEATURE, root]


@njit(cache=True, inline="always")
def _admits(slot_ints, slot_floats, meta, feature, key):
    """False when an absent feature certainly cannot enter (it does not outrank the lower
    bound and there is no free slot). O(1)."""
    capacity = slot_ints.shape[1]
    if meta[META_SIZE] < capacity:
        return True
    return _below(slot_floats[ROW_KEY, capacity], meta[META_BOUND_FEATURE], key, feature)


@njit(cache=True, inline="always")
def _entry_key(slot_ints, slot_floats, meta):
    """The least key an absent feature needs to possibly enter: -inf with a free slot,
    else the lower bound's key (``_admits`` then breaks ties by feature). Admissions and
    repairs only raise it, so it stays a valid pre-filter while newcomers are offered."""
    capacity = slot_ints.shape[1]
    if meta[META_SIZE] < capacity:
        return -np.inf
    return slot_floats[ROW_KEY, capacity]


@njit(cache=True, inline="always")
def _entry_bits(entry_key):
    """The float bits a newcomer's non-negative key must reach to pass ``entry_key`` (an
    |w| key, or -inf with a free slot), at least 1 so that a zero key never passes: one
    unsigned compare ``float_bits(key) >= _entry_bits(entry_key)`` for a branch."""
    return max(float_bits(max(entry_key, 0.0)), np.uint64(1))


@njit(cache=True)
def _offer(slot_ints, slot_floats, map_entries, meta, feature, key, value):
    """Offer an absent feature. Returns (evicted feature or EMPTY, its stored value, accepted).

    With a free slot the feature is appended (the heap is rebuilt once full); otherwise it
    replaces the root when it outranks it. O(log B) plus a pending repair.
    """
    capacity = slot_ints.shape[1]
    size = meta[META_SIZE]
    if size < capacity:
        slot = size
        slot_ints[ROW_FEATURE, slot] = feature
        slot_floats[ROW_KEY, slot] = key
        slot_floats[ROW_VALUE, slot] = value
        slot_ints[ROW_HEAP, size] = slot
        slot_ints[ROW_POSITION, slot] = size
        meta[META_SIZE] = size + 1
        meta[META_LOGGED] = REBUILD
        _lower_bound_to(slot_ints, slot_floats, meta, key, feature)
        _map_insert(slot_ints, map_entries, meta, feature, slot)
        return EMPTY, 0.0, True
    if meta[META_LOGGED] != 0:
        _repair(slot_ints, slot_floats, meta)
    root = slot_ints[ROW_HEAP, 0]
    root_feature = slot_ints[ROW_FEATURE, root]
    if not _below(slot_floats[ROW_KEY, root], root_feature, key, feature):
        return EMPTY, 0.0, False
    evicted_value = slot_floats[ROW_VALUE, root]
    _map_delete(map_entries, meta, root_feature)
    slot_ints[ROW_FEATURE, root] = feature
    slot_floats[ROW_KEY, root] = key
    slot_floats[ROW_VALUE, root] = value
    _map_insert(slot_ints, map_entries, meta, feature, root)
    _sift_down(slot_ints, slot_floats, 0, size)
    new_root = slot_ints[ROW_HEAP, 0]
    slot_floats[ROW_KEY, capacity] = slot_floats[ROW_KEY, new_root]
    meta[META_BOUND_FEATURE] = slot_ints[ROW_FEATURE, new_root]
    return root_feature, evicted_value, True


@njit(cache=True, inline="always")
def _longest_row(indptr):
    """Most non-zeros in one row (sizes the kernels' per-example scratch arrays)."""
    longest = 0
    for row in range(len(indptr) - 1):
        longest = max(longest, indptr[row + 1] - indptr[row])
    return longest


@njit(cache=True, nogil=True)
def _score_rows(indptr, indices, values, map_entries, meta, slot_floats, scale, two_lanes,
                out):
    """out[i] = scale * sum_k value_k * w[index_k] over row i, w stored in the slots, summed
    in the order of the learner's fit kernel, so that the two agree bit for bit: one chain,
    or (``two_lanes``) even and odd positions of the row added at the end. O(nnz)."""
    absent = np.uint64(slot_floats.shape[1] - 1)
    seed, shift = _map_hash(meta)
    one = np.uint64(1)
    for row in range(len(indptr) - 1):
        lo, hi = np.uint64(indptr[row]), np.uint64(indptr[row + 1])
        even = 0.0
        odd = 0.0
        k = lo
        if two_lanes:
            while k + one < hi:
                slot = _map_lookup(map_entries, seed, shift, np.uint64(np.uint32(indices[k])),
                                   absent)
                odd_slot = _map_lookup(map_entries, seed, shift,
                                       np.uint64(np.uint32(indices[k + one])), absent)
                even += slot_floats[ROW_VALUE, slot] * values[k]
                odd += slot_floats[ROW_VALUE, odd_slot] * values[k + one]
                k += np.uint64(2)
        while k < hi:
            slot = _map_lookup(map_entries, seed, shift, np.uint64(np.uint32(indices[k])), absent)
            even += slot_floats[ROW_VALUE, slot] * values[k]
            k += one
        out[row] = scale * (even + odd)


def kept(slot_ints: np.ndarray, slot_floats: np.ndarray, meta: np.ndarray):
    """(features, stored values) of the occupied slots, sorted by feature index."""
    size = int(meta[META_SIZE])
    features = slot_ints[ROW_FEATURE, :size]
    order = np.argsort(features, kind="stable")
    return features[order].copy(), slot_floats[ROW_VALUE, :size][order].copy()
