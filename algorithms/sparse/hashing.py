"""Feature hashing of named features with MurmurHash3 (x86, 32-bit).

A named feature ``(namespace, name)`` maps to
``murmurhash3_32(name, seed=murmurhash3_32(namespace, seed)) mod 2^bits``, so a namespace
(a feature group) seeds the hash of its names, as Vowpal Wabbit does. Names are UTF-8.
Hashing a batch is one numba call over a concatenated byte buffer: O(total name bytes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
from numba import njit

from algorithms.sparse.csr import CSRBatch

_C1 = np.uint32(0xCC9E2D51)
_C2 = np.uint32(0x1B873593)


@njit(cache=True, inline="always")
def _rotl(x, r):
    return np.uint32((x << np.uint32(r)) | (x >> np.uint32(32 - r)))


@njit(cache=True)
def _murmur3_32(buf, start, stop, seed):
    """MurmurHash3_x86_32 of buf[start:stop] (uint8) with a uint32 seed."""
    h = np.uint32(seed)
    length = stop - start
    blocks = length // 4
    for b in range(blocks):
        p = start + 4 * b
        k = np.uint32(buf[p]) | (np.uint32(buf[p + 1]) << np.uint32(8)) | \
            (np.uint32(buf[p + 2]) << np.uint32(16)) | (np.uint32(buf[p + 3]) << np.uint32(24))
        k = np.uint32(k * _C1)
        k = _rotl(k, 15)
        k = np.uint32(k * _C2)
        h ^= k
        h = _rotl(h, 13)
        h = np.uint32(h * np.uint32(5) + np.uint32(0xE6546B64))
    tail = start + 4 * blocks
    k = np.uint32(0)
    rest = length & 3
    if rest >= 3:
        k ^= np.uint32(buf[tail + 2]) << np.uint32(16)
    if rest >= 2:
        k ^= np.uint32(buf[tail + 1]) << np.uint32(8)
    if rest >= 1:
        k ^= np.uint32(buf[tail])
        k = np.uint32(k * _C1)
        k = _rotl(k, 15)
        k = np.uint32(k * _C2)
        h ^= k
    h ^= np.uint32(length)
    h ^= h >> np.uint32(16)
    h = np.uint32(h * np.uint32(0x85EBCA6B))
    h ^= h >> np.uint32(13)
    h = np.uint32(h * np.uint32(0xC2B2AE35))
    h ^= h >> np.uint32(16)
    return h


@njit(cache=True)
def _murmur3_many(buf, offsets, seeds, out):
    for i in range(len(offsets) - 1):
        out[i] = _murmur3_32(buf, offsets[i], offsets[i + 1], seeds[i])


def murmurhash3_32(data: bytes | str, seed: int = 0) -> int:
    """MurmurHash3_x86_32 of ``data`` (str is UTF-8 encoded) as an unsigned int."""
    raw = data.encode() if isinstance(data, str) else bytes(data)
    buf = np.frombuffer(raw, dtype=np.uint8) if raw else np.zeros(0, dtype=np.uint8)
    return int(_murmur3_32(buf, 0, len(raw), np.uint32(seed & 0xFFFFFFFF)))


def murmurhash3_32_many(items: list[bytes | str], seeds) -> np.ndarray:
    """Hashes of many strings at once (uint32 array)."""
    raw = [s.encode() if isinstance(s, str) else bytes(s) for s in items]
    offsets = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in raw], out=offsets[1:])
    buf = np.frombuffer(b"".join(raw), dtype=np.uint8) if offsets[-1] else np.zeros(0, np.uint8)
    out = np.empty(len(raw), dtype=np.uint32)
    _murmur3_many(buf, offsets, np.asarray(seeds, dtype=np.uint32), out)
    return out


class FeatureHasher:
    """Hash ``{namespace: {name: value}}`` examples into a 2^bits feature space.

    Colliding features of one example are summed. ``seed`` seeds the namespace hashes.
    """

    def __init__(self, bits: int = 18, seed: int = 0) -> None:
        if not 1 <= int(bits) <= 31:
            raise ValueError(f"bits must be in [1, 31], got {bits}")
        self.bits = int(bits)
        self.seed = int(seed) & 0xFFFFFFFF
        self.n_features = 1 << self.bits
        self._namespace_seeds: dict[str, int] = {}

    def namespace_seed(self, namespace: str) -> int:
        seed = self._namespace_seeds.get(namespace)
        if seed is None:
            seed = murmurhash3_32(namespace, self.seed)
            if len(self._namespace_seeds) < 65536:
                self._namespace_seeds[namespace] = seed
        return seed

    def index(self, namespace: str, name: str) -> int:
        """Feature index of ``name`` in ``namespace``."""
        return murmurhash3_32(name, self.namespace_seed(namespace)) & (self.n_features - 1)

    __call__ = index

    def indices(self, namespace: str, names: list[str]) -> np.ndarray:
        """``index(namespace, name)`` of each name (int64), in one numba call: O(total name
        bytes), without a Python call per name."""
        seeds = np.full(len(names), self.namespace_seed(namespace), dtype=np.uint32)
        return murmurhash3_32_many(names, seeds).astype(np.int64) & (self.n_features - 1)

    def transform(self, examples: Iterable[Mapping[str, Mapping[str, float]]]) -> CSRBatch:
        """Hash a batch of named examples into a :class:`CSRBatch` (sorted, duplicates summed)."""
        names: list[str] = []
        seeds: list[int] = []
        values: list[float] = []
        lengths: list[int] = []
        for example in examples:
            count = 0
            for namespace, features in example.items():
                seed = self.namespace_seed(namespace)
                for name, value in features.items():
                    names.append(name)
                    seeds.append(seed)
                    values.append(value)
                    count += 1
            lengths.append(count)
        hashed = murmurhash3_32_many(names, seeds).astype(np.int64) & (self.n_features - 1)
        rows = np.repeat(np.arange(len(lengths)), lengths)
        value_array = np.asarray(values, dtype=np.float64)
        if not np.all(np.isfinite(value_array)):
            raise ValueError("a named feature has a non-finite value")
        # Sort by (row, index) and sum collisions.
        order = np.lexsort((hashed, rows))
        rows, hashed, value_array = rows[order], hashed[order], value_array[order]
        fresh = np.ones(len(rows), dtype=bool)
        fresh[1:] = (rows[1:] != rows[:-1]) | (hashed[1:] != hashed[:-1])
        starts = np.flatnonzero(fresh)
        summed = np.add.reduceat(value_array, starts) if len(starts) else value_array
        counts = np.bincount(rows[starts], minlength=len(lengths))
        indptr = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return CSRBatch(indptr, hashed[starts].astype(np.int32), summed, self.n_features)
