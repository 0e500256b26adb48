"""Feature -> slot map of a top set: a direct table for moderate d, a cuckoo hash beyond.

Two layouts behind one set of functions, chosen when the top set is allocated and
dispatched by the array's dtype when numba compiles a kernel (no runtime branch):

- **direct** (d <= ``DIRECT_MAX_FEATURES``): ``uint16`` (or ``uint32`` for capacity >=
  2^16 - 1) array of d + 1 entries; entry j is feature j's slot, or the *absent code* =
  capacity (the top set's absent column), which the last entry also holds. A lookup is
  one load. 2 bytes per feature: 4 MiB at the limit of 2^21 features. Past it the table
  outgrows the caches: at d = 4M (8 MiB) PET and FOFS ran 17-25% slower with it than with
  the hash, at d = 1M 12-17% faster, at d = 10^4 27% faster.
- **cuckoo** (larger d): ``int64`` entries of ``_hashmap``, O(B) memory; a lookup is two
  hashes, two loads and two selects, ~50% more time per scored example than the direct
  table on X1 (853 -> 568 ns per example of 600 non-zeros, B = 200, d = 20,000).

Every operation is O(1) except ``_map_rebuild`` (O(d) direct, O(B) cuckoo; used when a
saved state is loaded). The threshold is guarded by ``benchmarks/online.py`` (time per
example as d grows).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

from algorithms.online import _hashmap as cuckoo
from algorithms.online._hashmap import META_SIZE, ROW_FEATURE, _map_hash

DIRECT_MAX_FEATURES = 1 << 21

__all__ = ["DIRECT_MAX_FEATURES", "_map_delete", "_map_find", "_map_hash", "_map_insert",
           "_map_lookup", "_map_rebuild", "allocate_map", "check_map", "map_bytes",
           "rebuild_map"]


def _direct_dtype(capacity: int):
    return np.uint16 if capacity < np.iinfo(np.uint16).max else np.uint32


def map_bytes(capacity: int, n_features: int | None) -> int:
    """Bytes of the map ``allocate_map`` gives for this shape, computed (O(1), nothing
    allocated): 2 or 4 bytes per feature direct, 8 per entry of the cuckoo map."""
    if n_features is not None and n_features <= DIRECT_MAX_FEATURES:
        return (int(n_features) + 1) * np.dtype(_direct_dtype(capacity)).itemsize
    return cuckoo.map_size(capacity) * np.dtype(np.int64).itemsize


def allocate_map(capacity: int, n_features: int | None) -> tuple[np.ndarray, int]:
    """(entries, hash shift) of an empty map for ``capacity`` slots over ``n_features``
    features (None: unknown, always the cuckoo map). The shift is stored in the top set's
    meta either way (unused by the direct table), so a saved state fits both layouts."""
    if n_features is not None and n_features <= DIRECT_MAX_FEATURES:
        return (np.full(int(n_features) + 1, capacity, dtype=_direct_dtype(capacity)),
                cuckoo.map_shift(capacity))
    return cuckoo.allocate_map(capacity)


def rebuild_map(slot_ints: np.ndarray, meta: np.ndarray, template: np.ndarray) -> np.ndarray:
    """A map of ``template``'s layout and size holding the occupied slots (for a loaded
    state)."""
    entries = template.copy()
    _map_rebuild(slot_ints, entries, meta)
    return entries


def check_map(map_entries: np.ndarray, slot_ints: np.ndarray, meta: np.ndarray) -> None:
    """ValueError unless the map holds exactly the occupied slots (every kept feature at
    its slot, the absent code everywhere else). Vectorized: O(d) direct, O(B) cuckoo."""
    if map_entries.dtype == np.int64:
        cuckoo.check_map(map_entries, slot_ints, meta)
        return
    size = int(meta[META_SIZE])
    absent = slot_ints.shape[1]
    features = slot_ints[ROW_FEATURE, :size]
    if int(map_entries[-1]) != absent:
        raise ValueError(f"feature map: the absent code is {int(map_entries[-1])}, "
                         f"expected {absent}")
    found = map_entries[features] == np.arange(size)
    if not found.all():
        slot = int(np.argmin(found))
        raise ValueError(f"feature map: feature {int(features[slot])} is not found at its "
                         f"slot {slot}")
    if np.count_nonzero(map_entries[:-1] != absent) != size:
        raise ValueError(f"feature map: {np.count_nonzero(map_entries[:-1] != absent)} "
                         f"entries for {size} kept features")


def _is_direct(map_entries) -> bool:
    """At compile time: does this numba array type hold a direct table?"""
    return map_entries.dtype != types.int64


def _map_lookup(map_entries, seed, shift, key, absent):
    """Slot of ``key`` (uint64), or ``absent`` (uint64, the top set's absent column)."""
    if map_entries.dtype == np.int64:
        return cuckoo._map_lookup(map_entries, seed, shift, key, absent)
    return np.uint64(map_entries[key])


@overload(_map_lookup)
def _map_lookup_jit(map_entries, seed, shift, key, absent):
    if _is_direct(map_entries):
        return lambda map_entries, seed, shift, key, absent: np.uint64(map_entries[key])
    return lambda map_entries, seed, shift, key, absent: cuckoo._map_lookup(
        map_entries, seed, shift, key, absent)


def _map_find(map_entries, meta, key, absent):
    """Slot of ``key``, or ``absent`` (int64 in, int64 out)."""
    if map_entries.dtype == np.int64:
        return cuckoo._map_find(map_entries, meta, key, absent)
    slot = int(map_entries[key])
    return absent if slot == int(map_entries[-1]) else slot


@overload(_map_find)
def _map_find_jit(map_entries, meta, key, absent):
    if _is_direct(map_entries):
        def direct(map_entries, meta, key, absent):
            slot = np.int64(map_entries[np.uint64(key)])
            return absent if slot == np.int64(map_entries[len(map_entries) - 1]) else slot
        return direct
    return lambda map_entries, meta, key, absent: cuckoo._map_find(map_entries, meta, key,
                                                                   absent)


def _map_insert(slot_ints, map_entries, meta, key, slot):
    """Record ``key`` -> ``slot`` (``slot_ints`` must already hold it)."""
    if map_entries.dtype == np.int64:
        cuckoo._map_insert(slot_ints, map_entries, meta, key, slot)
    else:
        map_entries[key] = slot


@overload(_map_insert)
def _map_insert_jit(slot_ints, map_entries, meta, key, slot):
    if _is_direct(map_entries):
        def direct(slot_ints, map_entries, meta, key, slot):
            map_entries[np.uint64(key)] = slot
        return direct
    return lambda slot_ints, map_entries, meta, key, slot: cuckoo._map_insert(
        slot_ints, map_entries, meta, key, slot)


def _map_delete(map_entries, meta, key):
    """Remove ``key`` (known present)."""
    if map_entries.dtype == np.int64:
        cuckoo._map_delete(map_entries, meta, key)
    else:
        map_entries[key] = map_entries[-1]


@overload(_map_delete)
def _map_delete_jit(map_entries, meta, key):
    if _is_direct(map_entries):
        def direct(map_entries, meta, key):
            map_entries[np.uint64(key)] = map_entries[len(map_entries) - 1]
        return direct
    return lambda map_entries, meta, key: cuckoo._map_delete(map_entries, meta, key)


@njit(cache=True)
def _direct_rebuild(slot_ints, map_entries, meta):
    absent = map_entries[len(map_entries) - 1]
    map_entries[:] = absent
    for slot in range(meta[META_SIZE]):
        map_entries[slot_ints[ROW_FEATURE, slot]] = slot


def _map_rebuild(slot_ints, map_entries, meta):
    """Re-enter every occupied slot's feature (O(d) direct, O(B) cuckoo)."""
    if map_entries.dtype == np.int64:
        cuckoo._map_rebuild(slot_ints, map_entries, meta)
    else:
        _direct_rebuild(slot_ints, map_entries, meta)

