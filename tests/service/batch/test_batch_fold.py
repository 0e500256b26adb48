"""The batch fold's parts against plain definitions: the held-out rule, the windows (newest
N; Vitter's reservoir with the documented hash), resuming from a state bit for bit, and
content checks of loaded states."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from algorithms.sparse import CSRBatch
from service.batch.spec import BatchLayout, Window, split_params
from service.batch.worker.fold_state import BatchFoldState, RowWindow, held_out, splitmix64
from service.schemas import ModelCreate
from tests.support.batch_data import DIABETES_GROUPS, assert_same_fold, diabetes


def csr(X: np.ndarray) -> CSRBatch:
    m = sp.csr_matrix(X)
    return CSRBatch(m.indptr.astype(np.int64), m.indices.astype(np.int32), m.data, X.shape[1])


def fold_state(algorithm="cs-g-omp", **params) -> BatchFoldState:
    spec = ModelCreate(name="m", algorithm=algorithm, groups=DIABETES_GROUPS, params=params)
    return BatchFoldState(spec.family, BatchLayout(spec), split_params(spec))


def test_held_out_rule_is_the_documented_hash_and_deterministic():
    import zlib

    mask = held_out("1700000000000-3", 5000, 0.2)
    assert 0.17 < mask.mean() < 0.23
    np.testing.assert_array_equal(mask, held_out("1700000000000-3", 5000, 0.2))
    assert not np.array_equal(mask, held_out("1700000000000-4", 5000, 0.2))
    k = 17
    x = (zlib.crc32(b"1700000000000-3") << 32) + k
    u = int(splitmix64(np.array([x], dtype=np.uint64))[0]) >> 11
    assert mask[k] == (u * 2.0 ** -53 < 0.2)
    assert not held_out("5", 10, 0.0).any()


def splitmix64_plain(x: int) -> int:
    mask = (1 << 64) - 1
    z = (x + 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


def test_splitmix64_matches_the_integer_definition():
    xs = [0, 1, 2**32 + 5, 2**64 - 1, 123456789]
    got = splitmix64(np.array(xs, dtype=np.uint64))
    assert [int(v) for v in got] == [splitmix64_plain(x) for x in xs]


@pytest.mark.parametrize("kind", ["newest", "reservoir"])
def test_window_equals_the_plain_algorithm_for_any_batching(kind):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 4)) * (rng.random((300, 4)) < 0.6)
    y = rng.standard_normal(300)
    window = Window(kind, 40, 11)
    # plain: one example at a time
    slots = [None] * 40
    for t in range(300):
        if kind == "newest":
            slots[t % 40] = t
        elif t < 40:
            slots[t] = t
        else:
            j = splitmix64_plain(11 ^ t) % (t + 1)
            if j < 40:
                slots[j] = t
    for cuts in ([300], [1] * 300, [7, 93, 1, 150, 49]):
        w = RowWindow(window, 40, 4)
        start = 0
        for size in cuts:
            w.offer(sp.csr_matrix(X[start:start + size]), y[start:start + size])
            start += size
        np.testing.assert_array_equal(w.X, X[slots])
        np.testing.assert_array_equal(w.y, y[slots])
    Xd, yd = w.data()
    if kind == "newest":
        np.testing.assert_array_equal(yd, y[-40:])  # chronological


def test_statistics_resume_from_a_state_bit_for_bit():
    X, y = diabetes()
    entries = [(str(k + 1), X[30 * k:30 * k + 30], y[30 * k:30 * k + 30]) for k in range(10)]
    one = fold_state()
    for entry_id, Xe, ye in entries:
        one.apply_entry(entry_id, csr(Xe), ye)
    two = fold_state()
    for entry_id, Xe, ye in entries[:4]:
        two.apply_entry(entry_id, csr(Xe), ye)
    from algorithms.serialization import dumps_state, loads_state

    resumed = fold_state()
    resumed.load_state(loads_state(dumps_state(two.state_dict())))
    for entry_id, Xe, ye in entries[4:]:
        resumed.apply_entry(entry_id, csr(Xe), ye)
    a, b = one.state_dict(), resumed.state_dict()
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], np.ndarray):
            assert a[key].tobytes() == b[key].tobytes(), key
        else:
            assert a[key] == b[key], key
    assert one.train_examples + one.validation_examples == 300


@pytest.mark.parametrize(("algorithm", "task", "params"), [
    ("cs-g-omp", "regression", {}),
    ("cs-g-omp", "classification", {}),
    ("gbfs", "regression", {"window": {"kind": "reservoir", "size": 90, "seed": 3}}),
])
def test_blocks_of_entries_equal_one_pass_entry_by_entry(algorithm, task, params):
    """Entries folded in blocks of any size (one-example entries included) equal the fold
    entry by entry: statistics to 1e-10 relative, windows and counters bit for bit."""
    X, y = diabetes()
    y = np.where(y > 140, 1.0, -1.0) if task == "classification" else y
    sizes = np.random.default_rng(4).integers(1, 9, size=80)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    entries = [(f"17{k:011d}-0", csr(X[a:b]), y[a:b]) for k, (a, b) in
               enumerate(zip(bounds[:-1], bounds[1:], strict=True))]

    def make():
        spec = ModelCreate(name="m", algorithm=algorithm, groups=DIABETES_GROUPS, task=task,
                           params=params)
        return BatchFoldState(spec.family, BatchLayout(spec), split_params(spec))

    one = make()
    for entry in entries:
        one.apply_entry(*entry)
    blocks = make()
    cut = np.sort(np.random.default_rng(5).choice(np.arange(1, len(entries)), 9,
                                                  replace=False))
    for part in np.split(np.arange(len(entries)), cut):
        blocks.apply_entries([entries[k] for k in part])
    a, b = one.state_dict(), blocks.state_dict()
    assert a["examples"] == b["examples"] == bounds[-1]
    assert (task == "classification") == any(key.startswith("held_out.") for key in a)
    assert_same_fold(b, a)


def corrupt(state: dict, key: str, value) -> dict:
    out = dict(state)
    if value is KeyError:
        out.pop(key)
    else:
        out[key] = value
    return out


@pytest.mark.parametrize(("key", "value"), [
    ("train.mxx", np.full((10, 10), np.nan)),
    ("train.mxx", np.zeros((9, 9))),
    ("train.n", -3),
    ("train.myy", -1.0),
    ("kind", "other"),
    ("family", "gbfs"),
    ("n_features", 11),
    ("examples", "x"),
    ("validation.mean_x", KeyError),
])
def test_loading_checks_contents_and_changes_nothing_on_error(key, value):
    X, y = diabetes()
    state = fold_state()
    state.apply_entry("1", csr(X[:50]), y[:50])
    before = state.state_dict()
    with pytest.raises(ValueError):
        state.load_state(corrupt(before, key, value))
    after = state.state_dict()
    assert all(np.array_equal(before[k], after[k]) if isinstance(before[k], np.ndarray)
               else before[k] == after[k] for k in before)


@pytest.mark.parametrize(("key", "value"), [
    ("train.X", np.zeros((3, 10))),
    ("train.seen", -1),
    ("train.y", np.array([np.inf] * 20)),
])
def test_window_states_are_checked(key, value):
    X, y = diabetes()
    state = fold_state("gbfs", window={"kind": "reservoir", "size": 20, "seed": 1})
    state.apply_entry("1", csr(X[:50]), y[:50])
    with pytest.raises(ValueError):
        state.load_state(corrupt(state.state_dict(), key, value))
