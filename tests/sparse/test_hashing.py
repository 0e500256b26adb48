from __future__ import annotations

import numpy as np
import pytest
from sklearn.utils import murmurhash3_32 as sklearn_murmur

from algorithms.sparse.hashing import FeatureHasher, murmurhash3_32, murmurhash3_32_many

# Published MurmurHash3_x86_32 test vectors (SMHasher verification set and widely cited ones).
VECTORS = [
    (b"", 0, 0x00000000),
    (b"", 1, 0x514E28B7),
    (b"", 0xFFFFFFFF, 0x81F16F39),
    (b"\x00\x00\x00\x00", 0, 0x2362F9DE),
    (b"\xff\xff\xff\xff", 0, 0x76293B50),
    (b"\x21\x43\x65\x87", 0, 0xF55B516B),
    (b"\x21\x43\x65\x87", 0x5082EDEE, 0x2362F9DE),
    (b"\x21\x43\x65", 0, 0x7E4A8634),
    (b"\x21\x43", 0, 0xA0F7B07A),
    (b"\x21", 0, 0x72661CF4),
    (b"aaaa", 0x9747B28C, 0x5A97808A),
    (b"aaa", 0x9747B28C, 0x283E0130),
    (b"aa", 0x9747B28C, 0x5D211726),
    (b"a", 0x9747B28C, 0x7FA09EA6),
    (b"abcd", 0x9747B28C, 0xF0478627),
    (b"Hello, world!", 0x9747B28C, 0x24884CBA),
    (b"The quick brown fox jumps over the lazy dog", 0x9747B28C, 0x2FA826CD),
]


@pytest.mark.parametrize("data, seed, expected", VECTORS)
def test_published_vectors(data, seed, expected):
    assert murmurhash3_32(data, seed) == expected


def test_batch_hashing_matches_scikit_learn():
    rng = np.random.default_rng(0)
    words = ["".join(chr(c) for c in rng.integers(32, 0x2FF, size=n)) for n in range(40)]
    seeds = rng.integers(0, 2**32, size=len(words))
    got = murmurhash3_32_many(words, seeds)
    expected = [sklearn_murmur(w.encode(), int(s), positive=True) for w, s in zip(words, seeds,
                                                                                strict=True)]
    assert got.tolist() == expected


def test_feature_hasher_namespaces_collisions_and_bits():
    hasher = FeatureHasher(bits=4)
    assert hasher.n_features == 16
    a = hasher.index("user", "age")
    assert a == murmurhash3_32("age", murmurhash3_32("user", 0)) & 15
    assert hasher.index("item", "age") == murmurhash3_32("age", murmurhash3_32("item")) & 15
    batch = hasher.transform([{"user": {"age": 2.0}, "other": {}}, {}])
    assert batch.indptr.tolist() == [0, 1, 1] and batch.indices.tolist() == [a]
    # Colliding names in one example are summed (with 1 bit everything collides).
    tiny = FeatureHasher(bits=1).transform([{"n": {"a": 1.0, "b": 2.0, "c": 4.0}}])
    assert tiny.values.sum() == 7.0 and len(set(tiny.indices.tolist())) == tiny.nnz
    with pytest.raises(ValueError, match="non-finite"):
        hasher.transform([{"n": {"a": float("nan")}}])
    with pytest.raises(ValueError, match="bits"):
        FeatureHasher(bits=40)
