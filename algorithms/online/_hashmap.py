"""Cuckoo hash map feature -> slot over flat int64 arrays, in numba.

``map_keys`` / ``map_slots`` have 2^k entries (``EMPTY`` = -1); ``meta[META_SEED]`` seeds
the two multiplicative hashes and ``meta[META_SHIFT]`` = 64 - k. A lookup is two loads and
two selects (no data-dependent branch); insertion is cuckoo displacement, rebuilding with a
new seed in the (at load <= 1/4, very rare) case it gives up. Deletion is O(1).
"""

from __future__ import annotations

import numpy as np
from numba import njit

EMPTY = -1
META_SIZE, META_SEED, META_SHIFT = 0, 1, 2
ROW_FEATURE = 0
_MULTIPLIER_A = np.uint64(0x9E3779B97F4A7C15)
_MULTIPLIER_B = np.uint64(0xC2B2AE3D27D4EB4F)
_MAX_KICKS = 64


def allocate_map(capacity: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(keys, slots, shift) of an empty map for ``capacity`` keys at load <= 1/4."""
    bits = max(int(4 * capacity - 1).bit_length(), 2)
    return (np.full(1 << bits, EMPTY, dtype=np.int64), np.full(1 << bits, EMPTY, dtype=np.int64),
            64 - bits)


@njit(cache=True, inline="always")
def _buckets(key, meta):
    """The two candidate buckets of ``key`` (multiplicative hashing, top bits)."""
    mixed = np.uint64(key) ^ np.uint64(meta[META_SEED])
    shift = np.uint64(meta[META_SHIFT])
    return np.int64((mixed * _MULTIPLIER_A) >> shift), np.int64((mixed * _MULTIPLIER_B) >> shift)


@njit(cache=True, inline="always")
def _map_find(map_keys, map_slots, meta, key, absent):
    """Slot of ``key``, or ``absent``. Two loads and two selects, no data-dependent branch."""
    a, b = _buckets(key, meta)
    slot = absent
    slot = map_slots[a] if map_keys[a] == key else slot
    slot = map_slots[b] if map_keys[b] == key else slot
    return slot


@njit(cache=True)
def _map_try_insert(map_keys, map_slots, meta, key, slot):
    """Cuckoo insertion of an absent key; False if it gave up (the table then lacks one
    key that was displaced, so the caller rebuilds)."""
    a, b = _buckets(key, meta)
    if map_keys[a] == EMPTY:
        map_keys[a], map_slots[a] = key, slot
        return True
    position = a
    if map_keys[b] == EMPTY:
        position = b
    for _ in range(_MAX_KICKS):
        if map_keys[position] == EMPTY:
            map_keys[position], map_slots[position] = key, slot
            return True
        key, map_keys[position] = map_keys[position], key
        slot, map_slots[position] = map_slots[position], slot
        a, b = _buckets(key, meta)
        position = b if position == a else a
    return False


@njit(cache=True)
def _map_rebuild(slot_ints, map_keys, map_slots, meta):
    """Re-insert every occupied slot's feature, changing the hash seed until all fit."""
    while True:
        map_keys[:] = EMPTY
        map_slots[:] = EMPTY
        complete = True
        for slot in range(meta[META_SIZE]):
            if not _map_try_insert(map_keys, map_slots, meta, slot_ints[ROW_FEATURE, slot], slot):
                complete = False
                break
        if complete:
            return
        meta[META_SEED] += 1


@njit(cache=True)
def _map_insert(slot_ints, map_keys, map_slots, meta, key, slot):
    """Insert ``key`` -> ``slot``; ``slot_ints`` must already record it (for a rebuild)."""
    if not _map_try_insert(map_keys, map_slots, meta, key, slot):
        _map_rebuild(slot_ints, map_keys, map_slots, meta)


@njit(cache=True)
def _map_delete(map_keys, map_slots, meta, key):
    """Remove ``key`` (known present). O(1)."""
    a, b = _buckets(key, meta)
    position = a if map_keys[a] == key else b
    map_keys[position] = EMPTY
    map_slots[position] = EMPTY
