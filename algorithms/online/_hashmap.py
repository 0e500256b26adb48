"""Cuckoo hash map feature -> slot over one flat int64 array, in numba.

``map_entries`` has 2^k entries; an entry packs ``feature << 32 | slot`` (features and
slots < 2^31), ``EMPTY`` = -1 (its key part, -1, matches no feature). ``meta[META_SEED]``
seeds the two multiplicative hashes and ``meta[META_SHIFT]`` = 64 - k. A lookup is two loads
and two selects (no data-dependent branch); insertion is cuckoo displacement, rebuilding with
a new seed in the (at load <= 1/4, very rare) case it gives up. Deletion is O(1).
"""

from __future__ import annotations

import numpy as np
from numba import njit

EMPTY = -1
META_SIZE, META_SEED, META_SHIFT = 0, 1, 2
ROW_FEATURE = 0
SLOT_BITS = 32
SLOT_MASK = (1 << SLOT_BITS) - 1
_SLOT_BITS_U64 = np.uint64(SLOT_BITS)
_SLOT_MASK_U64 = np.uint64(SLOT_MASK)
_MULTIPLIER_A = np.uint64(0x9E3779B97F4A7C15)
_MULTIPLIER_B = np.uint64(0xC2B2AE3D27D4EB4F)
_MAX_KICKS = 64


def map_shift(capacity: int) -> int:
    """``meta[META_SHIFT]`` of a map for ``capacity`` keys: 64 - log2 of its entries."""
    return 64 - max(int(4 * capacity - 1).bit_length(), 2)


def map_size(capacity: int) -> int:
    """Entries of the map for ``capacity`` keys: the power of two >= 4 * capacity (at least
    4). O(1), nothing allocated."""
    return 1 << (64 - map_shift(capacity))


def allocate_map(capacity: int) -> tuple[np.ndarray, int]:
    """(entries, shift) of an empty map for ``capacity`` keys at load <= 1/4."""
    return np.full(map_size(capacity), EMPTY, dtype=np.int64), map_shift(capacity)


def check_map(map_entries: np.ndarray, slot_ints: np.ndarray, meta: np.ndarray) -> None:
    """ValueError unless the map holds exactly the occupied slots: each slot's feature
    found in one of its two buckets with its slot, every other entry EMPTY. Vectorized,
    O(B) (``meta``'s size and shift must already be valid)."""
    size = int(meta[META_SIZE])
    features = slot_ints[ROW_FEATURE, :size].astype(np.uint64)
    shift = np.uint64(meta[META_SHIFT])
    mixed = features ^ meta[META_SEED:META_SEED + 1].astype(np.uint64)
    entries = (features << _SLOT_BITS_U64) | np.arange(size, dtype=np.uint64)
    held = map_entries.view(np.uint64)
    found = ((held[(mixed * _MULTIPLIER_A) >> shift] == entries)
             | (held[(mixed * _MULTIPLIER_B) >> shift] == entries))
    if not found.all():
        slot = int(np.argmin(found))
        raise ValueError(f"feature map: feature {int(features[slot])} is not found at its "
                         f"slot {slot}")
    if np.count_nonzero(map_entries != EMPTY) != size:
        raise ValueError(f"feature map: {np.count_nonzero(map_entries != EMPTY)} entries for "
                         f"{size} kept features")


@njit(cache=True, inline="always")
def _map_hash(meta):
    """(seed, shift) as uint64 for ``_bucket_pair`` / ``_map_lookup``. Read them again
    after any insertion: a rebuild changes the seed."""
    return np.uint64(meta[META_SEED]), np.uint64(meta[META_SHIFT])


@njit(cache=True, inline="always")
def _bucket_pair(key, seed, shift):
    """The two candidate buckets of a uint64 ``key`` (multiplicative hashing, top bits).
    Unsigned, so numba indexes with them without its negative-index wraparound."""
    mixed = key ^ seed
    return (mixed * _MULTIPLIER_A) >> shift, (mixed * _MULTIPLIER_B) >> shift


@njit(cache=True, inline="always")
def _buckets(key, meta):
    """``_bucket_pair`` of ``key`` with the map's current seed and shift."""
    seed, shift = _map_hash(meta)
    return _bucket_pair(np.uint64(key), seed, shift)


@njit(cache=True, inline="always")
def _map_lookup(map_entries, seed, shift, key, absent):
    """Slot of ``key`` (uint64), or ``absent`` (uint64). Two loads and two selects, no
    data-dependent branch. Unsigned throughout and with the hash parameters held by the
    caller: a loop that also stores (into arrays that might alias ``meta``) otherwise
    reloads them per lookup and sign-extends; +11% on PET, bit-identical (guard:
    benchmarks/online.py, d = 10^8)."""
    a, b = _bucket_pair(key, seed, shift)
    entry_a = np.uint64(map_entries[a])
    entry_b = np.uint64(map_entries[b])
    slot = absent
    slot = entry_a & _SLOT_MASK_U64 if entry_a >> _SLOT_BITS_U64 == key else slot
    slot = entry_b & _SLOT_MASK_U64 if entry_b >> _SLOT_BITS_U64 == key else slot
    return slot


@njit(cache=True, inline="always")
def _map_find(map_entries, meta, key, absent):
    """Slot of ``key``, or ``absent`` (int64 in, int64 out)."""
    seed, shift = _map_hash(meta)
    return np.int64(_map_lookup(map_entries, seed, shift, np.uint64(key), np.uint64(absent)))


@njit(cache=True)
def _map_try_insert(map_entries, meta, key, slot):
    """Cuckoo insertion of an absent key; False if it gave up (the table then lacks one
    key that was displaced, so the caller rebuilds)."""
    entry = (np.int64(key) << SLOT_BITS) | np.int64(slot)
    a, b = _buckets(key, meta)
    if map_entries[a] == EMPTY:
        map_entries[a] = entry
        return True
    position = a
    if map_entries[b] == EMPTY:
        position = b
    for _ in range(_MAX_KICKS):
        if map_entries[position] == EMPTY:
            map_entries[position] = entry
            return True
        entry, map_entries[position] = map_entries[position], entry
        a, b = _buckets(entry >> SLOT_BITS, meta)
        position = b if position == a else a
    return False


@njit(cache=True)
def _map_rebuild(slot_ints, map_entries, meta):
    """Re-insert every occupied slot's feature, changing the hash seed until all fit."""
    while True:
        map_entries[:] = EMPTY
        complete = True
        for slot in range(meta[META_SIZE]):
            if not _map_try_insert(map_entries, meta, slot_ints[ROW_FEATURE, slot], slot):
                complete = False
                break
        if complete:
            return
        meta[META_SEED] += 1


@njit(cache=True)
def _map_insert(slot_ints, map_entries, meta, key, slot):
    """Insert ``key`` -> ``slot``; ``slot_ints`` must already record it (for a rebuild)."""
    if not _map_try_insert(map_entries, meta, key, slot):
        _map_rebuild(slot_ints, map_entries, meta)


@njit(cache=True)
def _map_delete(map_entries, meta, key):
    """Remove ``key`` (known present). O(1)."""
    a, b = _buckets(key, meta)
    position = a if map_entries[a] >> SLOT_BITS == key else b
    map_entries[position] = EMPTY
