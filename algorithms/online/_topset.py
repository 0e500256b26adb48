"""Bounded indexed heap ("top set") over at most ``capacity`` features, in numba.

The top set holds the features a selector keeps: PET and FOFS keep the B largest |w|,
SOFS the B smallest variances. Each kept feature lives in a *slot*; slots never move, so
a slot's weight can be updated in place. Layout (all flat numpy arrays):

- ``slot_ints``  int64 (3, capacity): row 0 feature of slot, row 1 heap (position ->
  slot), row 2 position of slot in the heap.
- ``slot_floats`` float64 (2, capacity): row 0 ranking key, row 1 stored weight.
- ``map_keys`` / ``map_slots`` int64 (2^k,), ``EMPTY`` = -1: open-addressing hash map
  feature -> slot (multiplicative hashing, linear probing, backward-shift deletion), load
  factor <= 1/2, so memory is O(capacity) whatever the dimension d.
- ``meta`` int64 (1,): number of occupied slots.

Order: a feature ranks higher when its key is larger; among equal keys the lower feature
index ranks higher. This is a strict total order, so "the top B of a set" is unique and
does not depend on the order in which features were offered. The heap's root is the
lowest-ranked kept feature. Every operation is O(log capacity) (hash map O(1) expected).
"""

from __future__ import annotations

import numpy as np
from numba import njit

EMPTY = -1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)

ROW_FEATURE, ROW_HEAP, ROW_POSITION = 0, 1, 2
ROW_KEY, ROW_VALUE = 0, 1


def allocate(capacity: int) -> dict[str, np.ndarray]:
    """Arrays of an empty top set able to hold ``capacity`` features."""
    capacity = max(int(capacity), 1)
    table = 1 << max(int(2 * capacity - 1).bit_length(), 1)
    return {
        "slot_ints": np.full((3, capacity), EMPTY, dtype=np.int64),
        "slot_floats": np.zeros((2, capacity), dtype=np.float64),
        "map_keys": np.full(table, EMPTY, dtype=np.int64),
        "map_slots": np.full(table, EMPTY, dtype=np.int64),
        "meta": np.zeros(1, dtype=np.int64),
    }


def rebuild_map(slot_ints: np.ndarray, meta: np.ndarray, table_size: int):
    """Hash map arrays for the occupied slots (used when loading a saved state)."""
    map_keys = np.full(table_size, EMPTY, dtype=np.int64)
    map_slots = np.full(table_size, EMPTY, dtype=np.int64)
    for slot in range(int(meta[0])):
        _map_insert(map_keys, map_slots, slot_ints[ROW_FEATURE, slot], slot)
    return map_keys, map_slots


@njit(cache=True, inline="always")
def _bucket(key, mask):
    h = np.uint64(key) * _GOLDEN
    return np.int64(h ^ (h >> np.uint64(29))) & mask


@njit(cache=True)
def _map_find(map_keys, map_slots, key):
    """Slot of ``key`` or EMPTY. Expected O(1)."""
    mask = len(map_keys) - 1
    i = _bucket(key, mask)
    while True:
        k = map_keys[i]
        if k == key:
            return map_slots[i]
        if k == EMPTY:
            return EMPTY
        i = (i + 1) & mask


@njit(cache=True)
def _map_insert(map_keys, map_slots, key, slot):
    """Insert ``key`` (known absent) -> ``slot``."""
    mask = len(map_keys) - 1
    i = _bucket(key, mask)
    while map_keys[i] != EMPTY:
        i = (i + 1) & mask
    map_keys[i] = key
    map_slots[i] = slot


@njit(cache=True)
def _map_delete(map_keys, map_slots, key):
    """Remove ``key`` (known present), shifting later probes back to keep lookups valid."""
    mask = len(map_keys) - 1
    i = _bucket(key, mask)
    while map_keys[i] != key:
        i = (i + 1) & mask
    j = i
    while True:
        j = (j + 1) & mask
        k = map_keys[j]
        if k == EMPTY:
            break
        home = _bucket(k, mask)
        # The entry at j may move to the hole at i unless its home lies cyclically in (i, j].
        if (i < j and (home <= i or home > j)) or (i > j and home <= i and home > j):
            map_keys[i] = k
            map_slots[i] = map_slots[j]
            i = j
    map_keys[i] = EMPTY
    map_slots[i] = EMPTY


@njit(cache=True, inline="always")
def _ranks_below(slot_ints, slot_floats, a, b):
    """True when slot ``a`` ranks strictly below slot ``b``."""
    ka = slot_floats[ROW_KEY, a]
    kb = slot_floats[ROW_KEY, b]
    return ka < kb or (ka == kb and slot_ints[ROW_FEATURE, a] > slot_ints[ROW_FEATURE, b])


@njit(cache=True)
def _sift_up(slot_ints, slot_floats, position):
    heap = slot_ints[ROW_HEAP]
    where = slot_ints[ROW_POSITION]
    slot = heap[position]
    while position > 0:
        parent = (position - 1) >> 1
        if not _ranks_below(slot_ints, slot_floats, slot, heap[parent]):
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
        if child + 1 < size and _ranks_below(slot_ints, slot_floats, heap[child + 1], heap[child]):
            child += 1
        if not _ranks_below(slot_ints, slot_floats, heap[child], slot):
            break
        heap[position] = heap[child]
        where[heap[position]] = position
        position = child
    heap[position] = slot
    where[slot] = position


@njit(cache=True)
def _rekey(slot_ints, slot_floats, meta, slot, key):
    """Set the key of an occupied slot and restore the heap order. O(log B)."""
    old = slot_floats[ROW_KEY, slot]
    slot_floats[ROW_KEY, slot] = key
    position = slot_ints[ROW_POSITION, slot]
    if key > old:
        _sift_down(slot_ints, slot_floats, position, meta[0])
    elif key < old:
        _sift_up(slot_ints, slot_floats, position)


@njit(cache=True)
def _offer(slot_ints, slot_floats, map_keys, map_slots, meta, feature, key, value):
    """Offer an absent feature. Returns (evicted feature or EMPTY, its stored value, accepted).

    With a free slot the feature is inserted; otherwise it replaces the root when it ranks
    above it. O(log B).
    """
    capacity = slot_ints.shape[1]
    size = meta[0]
    if size < capacity:
        slot = size
        slot_ints[ROW_FEATURE, slot] = feature
        slot_floats[ROW_KEY, slot] = key
        slot_floats[ROW_VALUE, slot] = value
        slot_ints[ROW_HEAP, size] = slot
        slot_ints[ROW_POSITION, slot] = size
        meta[0] = size + 1
        _map_insert(map_keys, map_slots, feature, slot)
        _sift_up(slot_ints, slot_floats, size)
        return EMPTY, 0.0, True
    root = slot_ints[ROW_HEAP, 0]
    root_key = slot_floats[ROW_KEY, root]
    root_feature = slot_ints[ROW_FEATURE, root]
    if key < root_key or (key == root_key and feature > root_feature):
        return EMPTY, 0.0, False
    evicted_value = slot_floats[ROW_VALUE, root]
    _map_delete(map_keys, map_slots, root_feature)
    _map_insert(map_keys, map_slots, feature, root)
    slot_ints[ROW_FEATURE, root] = feature
    slot_floats[ROW_KEY, root] = key
    slot_floats[ROW_VALUE, root] = value
    _sift_down(slot_ints, slot_floats, 0, size)
    return root_feature, evicted_value, True


@njit(cache=True)
def _score_rows(indptr, indices, values, map_keys, map_slots, slot_floats, scale, out):
    """out[i] = scale * sum_k value_k * w[index_k] over row i, w stored in the slots."""
    for row in range(len(indptr) - 1):
        total = 0.0
        for k in range(indptr[row], indptr[row + 1]):
            slot = _map_find(map_keys, map_slots, np.int64(indices[k]))
            if slot != EMPTY:
                total += slot_floats[ROW_VALUE, slot] * values[k]
        out[row] = scale * total


def kept(slot_ints: np.ndarray, slot_floats: np.ndarray, meta: np.ndarray):
    """(features, stored values) of the occupied slots, sorted by feature index."""
    size = int(meta[0])
    features = slot_ints[ROW_FEATURE, :size]
    order = np.argsort(features, kind="stable")
    return features[order].copy(), slot_floats[ROW_VALUE, :size][order].copy()
