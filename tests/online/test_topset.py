"""Property tests of the lazily ordered top set and its feature maps (direct table and
cuckoo hash) against a brute force."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms.online import _topset as ts
from algorithms.online._featuremap import _map_find


def ranks_below(a, b):
    """(key, feature) a ranks strictly below b: smaller key, or equal key and larger index."""
    return a[0] < b[0] or (a[0] == b[0] and a[1] > b[1])


def check_invariants(top, capacity, expected):
    size = int(top["meta"][ts.META_SIZE])
    assert size <= capacity and size == len(expected)
    features = top["slot_ints"][ts.ROW_FEATURE, :size]
    assert sorted(features.tolist()) == sorted(expected)
    absent = capacity
    for slot, feature in enumerate(features):
        assert _map_find(top["map_entries"], top["meta"], feature, absent) == slot
        assert top["slot_floats"][ts.ROW_KEY, slot] == expected[feature]
    # The lower bound never ranks above a kept feature.
    bound = (top["slot_floats"][ts.ROW_KEY, capacity], top["meta"][ts.META_BOUND_FEATURE])
    if size == capacity:
        assert all(not ranks_below((expected[f], f), bound) for f in expected)


def check_heap(top):
    size = int(top["meta"][ts.META_SIZE])
    heap = top["slot_ints"][ts.ROW_HEAP, :size]
    assert sorted(heap.tolist()) == list(range(size))
    assert all(top["slot_ints"][ts.ROW_POSITION, s] == p for p, s in enumerate(heap))
    keys = top["slot_floats"][ts.ROW_KEY]
    feats = top["slot_ints"][ts.ROW_FEATURE]
    for position in range(1, size):
        parent = heap[(position - 1) // 2]
        child = heap[position]
        assert not ranks_below((keys[child], feats[child]), (keys[parent], feats[parent]))


operations = st.lists(
    st.tuples(st.sampled_from(["offer", "touch", "batch"]), st.integers(0, 40),
              st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 3.0]) | st.floats(-3, 3)),
    max_size=120)


@settings(max_examples=150, deadline=None)
@given(capacity=st.integers(1, 12), ops=operations, n_features=st.sampled_from([None, 41]))
def test_top_set_keeps_the_best_offered_features(capacity, ops, n_features):
    top = ts.allocate(capacity, n_features)   # None: the cuckoo map; 41: a direct table
    args = lambda: (top["slot_ints"], top["slot_floats"], top["map_entries"],  # noqa: E731
                    top["meta"])
    kept: dict[int, float] = {}
    for kind, feature, key in ops:
        if kind == "batch":   # PET's and FOFS's update: many kept keys change at once
            touched = sorted(kept)[:feature % (len(kept) + 1)]
            slots = [_map_find(top["map_entries"], top["meta"], f, capacity) for f in touched]
            new_keys = [key + 0.25 * i for i in range(len(touched))]
            logging = ts._logs_touches(top["meta"], len(touched))
            least_key = math.inf
            for slot, new in zip(slots, new_keys, strict=True):
                least_key = ts._set_key(top["slot_ints"], top["slot_floats"], top["meta"],
                                        slot, new, logging, least_key)
            if not logging:   # the heap will be rebuilt: the bound lowered once
                ts._lower_bound_below(top["slot_ints"], top["slot_floats"], top["meta"],
                                      least_key)
            kept.update(zip(touched, new_keys, strict=True))
        elif kind == "touch":
            if not kept:
                continue
            feature = sorted(kept)[feature % len(kept)]
            slot = _map_find(top["map_entries"], top["meta"], feature, capacity)
            ts._touch(top["slot_ints"], top["slot_floats"], top["meta"], slot, key)
            kept[feature] = key
        elif feature not in kept:
            # Brute force: enter when there is room or when outranking the worst kept.
            if len(kept) < capacity:
                expect_accept, expect_evicted = True, ts.EMPTY
            else:
                worst = min(kept, key=lambda f: (kept[f], -f))
                expect_accept = ranks_below((kept[worst], worst), (key, feature))
                expect_evicted = worst if expect_accept else ts.EMPTY
            admits = ts._admits(top["slot_ints"], top["slot_floats"], top["meta"], feature, key)
            assert admits or not expect_accept
            if admits:
                evicted, _, accepted = ts._offer(*args(), feature, key, 1.0)
                assert accepted == expect_accept and evicted == expect_evicted
            if expect_accept:
                kept.pop(expect_evicted, None)
                kept[feature] = key
        check_invariants(top, capacity, kept)
    if int(top["meta"][ts.META_SIZE]) == capacity:
        ts._repair(top["slot_ints"], top["slot_floats"], top["meta"])
        check_heap(top)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 2**31 - 2), min_size=1, max_size=300, unique=True))
def test_cuckoo_map_finds_every_key_after_inserts_and_deletes(features):
    capacity = len(features)
    top = ts.allocate(capacity)
    assert top["map_entries"].dtype == "int64"
    for feature in features:
        ts._offer(top["slot_ints"], top["slot_floats"], top["map_entries"],
                  top["meta"], feature, 1.0, 1.0)
    check_invariants(top, capacity, dict.fromkeys(features, 1.0))
    # Replacing every root exercises delete + insert; absent keys are never found.
    for feature in range(2**31 - 300, 2**31 - 300 + len(features)):
        ts._offer(top["slot_ints"], top["slot_floats"], top["map_entries"],
                  top["meta"], feature, 2.0, 1.0)
    for feature in features:
        assert _map_find(top["map_entries"], top["meta"], feature, -7) == -7
    rebuilt = ts.rebuild_map(top["slot_ints"], top["meta"], top["map_entries"])
    for slot in range(capacity):
        feature = top["slot_ints"][ts.ROW_FEATURE, slot]
        assert _map_find(rebuilt, top["meta"], feature, -7) == slot


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 999), min_size=1, max_size=300, unique=True))
def test_direct_table_finds_every_key_after_inserts_and_deletes(features):
    capacity = len(features)
    top = ts.allocate(capacity, 1000)
    assert top["map_entries"].dtype == "uint16" and len(top["map_entries"]) == 1001
    for feature in features:
        ts._offer(top["slot_ints"], top["slot_floats"], top["map_entries"],
                  top["meta"], feature, 1.0, 1.0)
    check_invariants(top, capacity, dict.fromkeys(features, 1.0))
    newcomers = [f for f in range(1000) if f not in set(features)][:capacity]
    for feature in newcomers:   # each replaces the root: delete + insert
        ts._offer(top["slot_ints"], top["slot_floats"], top["map_entries"],
                  top["meta"], feature, 2.0, 1.0)
    replaced = features[:len(newcomers)]
    for feature in replaced:
        assert _map_find(top["map_entries"], top["meta"], feature, -7) == -7
    rebuilt = ts.rebuild_map(top["slot_ints"], top["meta"], top["map_entries"])
    assert rebuilt.dtype == top["map_entries"].dtype
    assert (rebuilt == top["map_entries"]).all()


def test_map_layout_follows_the_dimension():
    from algorithms.online._featuremap import DIRECT_MAX_FEATURES, allocate_map, map_bytes

    assert allocate_map(200, DIRECT_MAX_FEATURES)[0].dtype == "uint16"
    assert allocate_map(70_000, 100_000)[0].dtype == "uint32"   # slots past uint16
    assert allocate_map(200, DIRECT_MAX_FEATURES + 1)[0].dtype == "int64"
    for capacity, n_features in [(200, 20_000), (200, 10**8), (70_000, 100_000)]:
        assert map_bytes(capacity, n_features) == allocate_map(capacity, n_features)[0].nbytes


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), budget=st.integers(1, 6), n_features=st.integers(1, 20),
       algorithm=st.sampled_from(["pet", "fofs", "sofs"]), chunk=st.integers(1, 9))
def test_learners_never_keep_more_than_budget_non_zeros(seed, budget, n_features, algorithm,
                                                         chunk):
    import numpy as np

    from algorithms.online import LEARNERS

    rng = np.random.default_rng(seed)
    X = (rng.random((30, n_features)) < 0.4) * rng.integers(-2, 3, size=(30, n_features))
    y = np.where(rng.random(30) < 0.5, -1, 1)
    learner = LEARNERS[algorithm](n_features=n_features, budget=budget)
    for start in range(0, 30, chunk):
        learner.partial_fit(X[start:start + chunk], y[start:start + chunk])
        index, values = learner.weights()
        assert len(index) <= budget and np.all(values != 0)
        assert np.all(np.diff(index) > 0)
