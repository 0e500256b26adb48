"""A refused body costs what reading it costs: named features are hashed a piece at a time
and the limits the log reads them with (distinct names per request, characters per name)
are checked as they are read, stopping at the first piece over a limit; the pieces give
exactly the indices, values and names of one name at a time."""

from __future__ import annotations

import resource
import time

import numpy as np
import orjson
import pytest

from algorithms.sparse.hashing import FeatureHasher, murmurhash3_32
from service import fbx1, ingest
from service.errors import InputError
from service.ingest import parse_json_body, parse_json_examples


class CountingHasher(FeatureHasher):
    """A FeatureHasher that counts the names it hashed."""

    hashed = 0

    def indices(self, namespace, names):
        self.hashed += len(names)
        return super().indices(namespace, names)


def one_at_a_time(features: dict, hasher: FeatureHasher, names: dict[int, str]):
    """The reference: every name hashed alone, in order, collisions summed."""
    merged: dict[int, float] = {}
    for namespace, group in features.items():
        for name, value in group.items():
            index = murmurhash3_32(name, murmurhash3_32(namespace)) & (hasher.n_features - 1)
            merged[index] = merged.get(index, 0.0) + float(value)
            names.setdefault(index, f"{namespace}^{name}")
    return list(merged), list(merged.values())


def test_hashing_names_at_once_is_hashing_them_one_by_one():
    rng = np.random.default_rng(0)
    hasher = FeatureHasher(12)
    alphabet = list("abcxyz_019") + ["é", "ß", "中", "🙂", " ", "^"]
    for _ in range(20):
        names = ["".join(rng.choice(alphabet, size=rng.integers(0, 40)))
                 for _ in range(int(rng.integers(1, 300)))]
        namespace = "".join(rng.choice(alphabet, size=rng.integers(0, 5)))
        expected = [hasher.index(namespace, name) for name in names]
        assert hasher.indices(namespace, names).tolist() == expected


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_pieces_give_the_indices_values_and_names_of_one_name_at_a_time(monkeypatch, chunk):
    monkeypatch.setattr(ingest, "_HASH_CHUNK", chunk)
    rng = np.random.default_rng(1)
    hasher = FeatureHasher(6)  # 64 indices: many collisions, summed
    items = [{"label": 1, "features": {
        f"ns{k}": {f"n{int(i)}": float(rng.normal()) for i in rng.integers(0, 500, size=60)}
        for k in range(3)}} for _ in range(5)]
    batch = parse_json_examples(items, hasher.n_features, hasher)
    names: dict[int, str] = {}
    for row, item in enumerate(items):
        indices, values = one_at_a_time(item["features"], hasher, names)
        X = batch.X
        got = slice(X.indptr[row], X.indptr[row + 1])
        assert X.indices[got].tolist() == indices  # (in the order first named)
        assert X.values[got].tolist() == values  # (summed in the same order)
    assert batch.names == names


def test_the_names_limit_stops_at_the_first_piece_over_it(monkeypatch):
    monkeypatch.setattr(fbx1, "MAX_NAMES", 50)
    monkeypatch.setattr(ingest, "_HASH_CHUNK", 16)
    hasher = CountingHasher(20)
    features = {"ns": {f"f{i}": 1.0 for i in range(10_000)}}
    with pytest.raises(InputError, match="more than 50 distinct features") as error:
        parse_json_examples([{"label": 1, "features": features}], hasher.n_features, hasher)
    assert error.value.errors[0] == {"item": 0, "field": "features",
                                     "message": error.value.errors[0]["message"]}
    assert hasher.hashed <= 50 + 16  # not 10,000
    small = CountingHasher(4)  # 16 indices: 10,000 names are 16 distinct features
    batch = parse_json_examples([{"label": 1, "features": features}], 16, small)
    assert len(batch.names) == 16 and small.hashed == 10_000


def test_the_limit_counts_the_request_across_its_items(monkeypatch):
    monkeypatch.setattr(fbx1, "MAX_NAMES", 50)
    hasher = FeatureHasher(20)
    items = [{"label": 1, "features": {"ns": {f"f{i}": 1.0 for i in range(30 * k, 30 * k + 30)}}}
             for k in range(3)]
    with pytest.raises(InputError) as error:
        parse_json_examples(items, hasher.n_features, hasher)
    assert error.value.errors[0]["item"] == 1
    same = [{"label": 1, "features": {"ns": {f"f{i}": 1.0 for i in range(30)}}}] * 3
    assert len(parse_json_examples(same, hasher.n_features, hasher).names) == 30


def test_a_long_name_is_refused_before_its_piece_is_hashed(monkeypatch):
    hasher = CountingHasher(20)
    group = {f"f{i}": 1.0 for i in range(10)}
    group["x" * fbx1.MAX_NAME_CHARS] = 1.0  # with "ns^": over the limit
    with pytest.raises(InputError, match="characters") as error:
        parse_json_examples([{"label": 1, "features": {"ns": group}}], hasher.n_features,
                            hasher)
    assert error.value.errors[0]["item"] == 0
    assert hasher.hashed == 0
    predicted = parse_json_examples([{"features": {"ns": group}}], hasher.n_features, hasher,
                                    require_labels=False)  # predictions: no log, no limit
    assert predicted.X.nnz == 11


def test_a_million_distinct_names_are_refused_at_the_cost_of_reading_them():
    """The report's case: one example naming 10^6 features (a 23 MB body) is refused
    naming the item after hashing about MAX_NAMES of them (it hashed all 10^6, one numba
    call each: 21 s, RSS +350 MB)."""
    hasher = CountingHasher(20)
    body = orjson.dumps({"examples": [{"label": 1, "features": {"ns": {
        f"feature_{i}": 1.0 for i in range(10**6)}}}]})
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    with pytest.raises(InputError, match="more than 100,000 distinct features"):
        parse_json_body(body, hasher.n_features, hasher)
    seconds = time.perf_counter() - started
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert hasher.hashed <= 1.1 * fbx1.MAX_NAMES + ingest._HASH_CHUNK  # (collisions)
    assert seconds < 20.0  # generous: ~1 s here, most of it orjson reading the body
    assert grown_mib < 300  # the parsed body (~150 MB), not the hashed names on top
