"""Sufficient statistics: streaming == batch, merge == whole, raw sums, round trip."""

import numpy as np
import pytest
import scipy.sparse as sp

from algorithms.anytime import SufficientStatistics
from algorithms.sparse import as_csr_batch


def _data(seed=0, n=300, D=7):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, D)) * rng.uniform(0.1, 10, D) + rng.uniform(-1e3, 1e3, D)
    X[rng.random((n, D)) < 0.3] = 0.0
    y = X @ rng.standard_normal(D) + 50 + rng.standard_normal(n)
    return X, y


def _assert_same(a: SufficientStatistics, b: SufficientStatistics):
    assert a.n == b.n
    np.testing.assert_allclose(a.mean_x, b.mean_x, rtol=1e-12, atol=1e-9)
    scale = np.abs(b.mxx).max()
    np.testing.assert_allclose(a.mxx, b.mxx, rtol=1e-9, atol=1e-10 * scale)
    np.testing.assert_allclose(a.mxy, b.mxy, rtol=1e-9, atol=1e-10 * np.sqrt(scale * b.myy))
    assert a.myy == pytest.approx(b.myy, rel=1e-10)


def test_raw_sums_match_numpy():
    X, y = _data()
    s = SufficientStatistics.from_data(X, y)
    np.testing.assert_allclose(s.sum_x, X.sum(0), rtol=1e-12)
    np.testing.assert_allclose(s.sum_xx, X.T @ X, rtol=1e-10)
    np.testing.assert_allclose(s.sum_xy, X.T @ y, rtol=1e-10)
    assert s.sum_y == pytest.approx(y.sum())
    assert s.sum_yy == pytest.approx(y @ y)


@pytest.mark.parametrize("kind", ["dense", "scipy", "csr_batch"])
def test_streaming_equals_batch(kind):
    X, y = _data(1)
    whole = SufficientStatistics.from_data(X, y)
    stream = SufficientStatistics(X.shape[1])
    for start in range(0, len(y), 37):
        chunk = X[start:start + 37]
        chunk = {"dense": chunk, "scipy": sp.csr_matrix(chunk),
                 "csr_batch": as_csr_batch(chunk)}[kind]
        stream.update(chunk, y[start:start + 37])
    _assert_same(stream, whole)


def test_merge_of_shards_equals_whole_and_is_stable():
    X, y = _data(2)
    X = X + 1e8  # large offset: naive Σxxᵀ − n x̄x̄ᵀ would lose every digit
    shards = [SufficientStatistics.from_data(X[i::3], y[i::3]) for i in range(3)]
    merged = shards[0] + shards[1] + shards[2]
    whole = SufficientStatistics.from_data(X, y)
    _assert_same(merged, whole)
    Xc = X - X.mean(0)
    exact = Xc.T @ Xc
    np.testing.assert_allclose(merged.mxx, exact, rtol=1e-8, atol=1e-10 * np.abs(exact).max())


def test_standardized_matches_direct():
    X, y = _data(3)
    C, b = SufficientStatistics.from_data(X, y).standardized(0.1)
    Xs, ys = (X - X.mean(0)) / X.std(0), (y - y.mean()) / y.std()
    np.testing.assert_allclose(C, Xs.T @ Xs / len(y) + 0.1 * np.eye(X.shape[1]), atol=1e-12)
    np.testing.assert_allclose(b, Xs.T @ ys / len(y), atol=1e-12)


def test_constant_column_and_narrow_batch():
    X, y = _data(4)
    X[:, 2] = 5.0
    s = SufficientStatistics(X.shape[1] + 2).update(X, y)
    C, b = s.standardized(0.0)
    assert np.all(np.isfinite(C)) and np.all(np.isfinite(b))
    assert np.all(C[2] == 0) and np.all(C[-1] == 0) and b[2] == 0


def test_round_trip_bytes():
    X, y = _data(5)
    s = SufficientStatistics.from_data(X, y)
    back = SufficientStatistics.from_bytes(s.to_bytes())
    _assert_same(back, s)
    assert back.mean_y == s.mean_y


def test_bad_input():
    s = SufficientStatistics(3)
    with pytest.raises(ValueError):
        s.update(np.ones((2, 4)), np.ones(2))
    with pytest.raises(ValueError):
        s.update(np.ones((2, 3)), np.ones(3))
    with pytest.raises(ValueError):
        s.update(np.full((2, 3), np.nan), np.ones(2))
    with pytest.raises(ValueError):
        s.merge(SufficientStatistics(4))



def test_sparse_blocks_of_any_size_fold_in_place_like_one_pass():
    rng = np.random.default_rng(7)
    X = sp.random(300, 40, density=0.15, format="csr", random_state=3) * 3.0
    X.data += 2.0  # means far from zero: the merge must not cancel
    y = rng.normal(size=300) + 10.0
    whole = SufficientStatistics.from_data(X.toarray(), y)
    parts = SufficientStatistics(40)
    for lo, hi in ((0, 1), (1, 2), (2, 50), (50, 51), (51, 300)):  # one-row and bulk blocks
        parts.update(X[lo:hi], y[lo:hi])
    _assert_same(parts, whole)


def test_a_state_dict_is_not_changed_by_later_updates():
    X, y = _data(6)
    s = SufficientStatistics.from_data(X[:50], y[:50])
    state = s.state_dict()  # a snapshot may serialize it after the fold moved on
    before = {k: state[k].copy() for k in ("mxx", "mean_x", "mxy")}
    s.update(sp.csr_matrix(X[50:]), y[50:])  # in place, after a copy on write
    s.update(X[:3], y[:3])
    for k, v in before.items():
        np.testing.assert_array_equal(state[k], v)
    _assert_same(s, SufficientStatistics.from_data(np.vstack([X, X[:3]]),
                                                   np.concatenate([y, y[:3]])))
