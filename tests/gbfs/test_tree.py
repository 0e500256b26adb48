"""The numba histogram tree against the plain-numpy exact CART oracle."""

import numpy as np
import pytest

from algorithms.gbfs import _tree, binning
from tests.gbfs.naive import naive_tree


def _grow(codes, grad, rows, n_bins, penalty, depth, min_leaf, force, hess=None, weight=2e-3,
          lam=0.0, newton=False, min_child=0.0, groups=None):
    """``_tree._grow_tree`` with fresh workspaces; ``groups`` (list of lists) default singletons."""
    d, width = codes.shape[1], int(n_bins.max()) + 1  # + the missing values' bin
    groups = [[f] for f in range(d)] if groups is None else groups
    indptr = np.cumsum([0] + [len(g) for g in groups]).astype(np.int64)
    members = np.array([f for g in groups for f in g], dtype=np.int64)
    group_of = np.empty(d, dtype=np.int64)
    for k, group in enumerate(groups):
        group_of[group] = k
    slots = max(1, 2 ** (depth - 1))
    hists = [np.zeros((slots, d, width), dtype=t) for t in (np.float64, np.int32) * 2]
    hess_hists = [np.zeros((slots, d, width)) for _ in range(2)]
    hess = np.ones(len(grad)) if hess is None else hess
    return _tree._grow_tree(codes, grad, hess, rows.astype(np.int32), n_bins, penalty, depth,
                            min_leaf, weight, force, *hists, np.empty(len(rows), dtype=np.int32),
                            lam, newton, min_child, *hess_hists, group_of, indptr, members)


def _data(seed, n=80, d=5, levels=7):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, levels, size=(n, d)).astype(float) + rng.normal(size=(n, d)) * 0.1 * (
        seed % 2)
    edges, offsets = binning.fit_bin_edges(X, 16)
    codes = binning.apply_bins(X, edges, offsets)
    return codes, binning.n_bins_per_feature(offsets), rng.normal(size=n)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("depth", "min_leaf"), [(1, 1), (3, 1), (4, 5)])
def test_tree_equals_exact_cart_oracle(seed, depth, min_leaf):
    codes, n_bins, grad = _data(seed)
    rows = np.arange(codes.shape[0]) if seed < 3 else np.sort(
        np.random.default_rng(seed).choice(codes.shape[0], 50, replace=False))
    penalty = np.where(np.arange(codes.shape[1]) % 2 == 0, 0.5, 0.0) * (seed % 3)
    hess = np.random.default_rng(seed).uniform(0.05, 0.25, size=len(grad))
    weight = 1.0 if seed % 2 else 2e-3  # 1.0 stops nodes of < ~7 rows (hess in [.05, .25])
    fast = _grow(codes, grad, rows, n_bins, penalty.copy(), depth, min_leaf, True, hess, weight)
    slow = naive_tree(codes, grad, hess, rows, n_bins, penalty.copy(), depth, min_leaf, True,
                      weight)
    np.testing.assert_array_equal(fast[0], slow[0])
    np.testing.assert_array_equal(fast[1], slow[1])
    np.testing.assert_allclose(fast[2], slow[2], rtol=1e-12, atol=1e-14)


def test_new_feature_is_charged_once_per_tree():
    # x0 is a 4-step staircase; x1 is weakly informative noise. Each split of x0 gains
    # less than mu, so only the forced root pays for x0; after it x0 is free in the tree.
    rng = np.random.default_rng(1)
    x0 = np.repeat(np.arange(4.0), 25)
    x1 = rng.normal(size=100)
    grad = x0 + 0.01 * x1
    X = np.column_stack([x0, x1])
    edges, offsets = binning.fit_bin_edges(X, 255)
    codes, n_bins = binning.apply_bins(X, edges, offsets), binning.n_bins_per_feature(offsets)
    mu = 1000.0
    penalty = np.full(2, mu)
    feature, threshold, *_ = _grow(codes, grad, np.arange(100), n_bins, penalty, 2, 1, True)
    assert list(feature[:3]) == [0, 0, 0]  # root paid, children reuse x0 for free
    np.testing.assert_array_equal(penalty, [0.0, mu])
    # not forced and nothing used yet: no split is worth mu, the tree is a constant
    feature, _, value, *_ = _grow(codes, grad, np.arange(100), n_bins, np.full(2, mu), 2, 1, False)
    assert np.all(feature == -1) and value[0] == pytest.approx(grad.mean())


def test_used_feature_beats_slightly_better_unused_one():
    rng = np.random.default_rng(2)
    a = rng.normal(size=200)
    b = a + 0.3 * rng.normal(size=200)  # b is a noisy copy: a explains grad better
    X = np.column_stack([a, b])
    edges, offsets = binning.fit_bin_edges(X, 32)
    codes, n_bins = binning.apply_bins(X, edges, offsets), binning.n_bins_per_feature(offsets)
    rows = np.arange(200)
    free = _grow(codes, a, rows, n_bins, np.zeros(2), 1, 1, False)
    assert free[0][0] == 0
    charged = _grow(codes, a, rows, n_bins, np.array([1e3, 0.0]), 1, 1, False)
    assert charged[0][0] == 1


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("lam", "newton", "min_child"),
                         [(1.0, False, 0.0), (0.0, True, 1e-3), (2.5, True, 0.6)])
def test_regularized_and_newton_split_equal_the_oracle(seed, lam, newton, min_child):
    codes, n_bins, grad = _data(seed)
    rows = np.arange(codes.shape[0])
    penalty = np.where(np.arange(codes.shape[1]) % 2 == 0, 0.3, 0.0) * (seed % 3)
    hess = np.random.default_rng(seed + 10).uniform(0.02, 0.25, size=len(grad))
    fast = _grow(codes, grad, rows, n_bins, penalty.copy(), 3, 2, True, hess, 2e-3, lam,
                 newton, min_child)
    slow = naive_tree(codes, grad, hess, rows, n_bins, penalty.copy(), 3, 2, True, 2e-3, lam,
                      newton, min_child)
    np.testing.assert_array_equal(fast[0], slow[0])
    np.testing.assert_array_equal(fast[1], slow[1])
    np.testing.assert_allclose(fast[2], slow[2], rtol=1e-12, atol=1e-14)


def test_newton_split_with_unit_hessian_equals_the_paper_split():
    codes, n_bins, grad = _data(1)
    rows = np.arange(codes.shape[0])
    plain = _grow(codes, grad, rows, n_bins, np.full(5, 0.2), 3, 1, True, None, 2e-3, 0.7)
    newton = _grow(codes, grad, rows, n_bins, np.full(5, 0.2), 3, 1, True, None, 2e-3, 0.7,
                   True, 0.0)
    for a, b in zip(plain, newton, strict=True):
        np.testing.assert_array_equal(a, b)


def test_reg_lambda_shrinks_a_leaf_by_its_weight():
    codes, n_bins, grad = _data(2)
    rows = np.arange(codes.shape[0])
    feature, _, value, *_ = _grow(codes, grad, rows, n_bins, np.zeros(5), 0, 1, False, None,
                              2e-3, 4.0)
    assert feature[0] == -1 and value[0] == pytest.approx(grad.sum() / (len(grad) + 4.0))


@pytest.mark.parametrize("seed", range(4))
def test_grouped_penalty_equals_the_oracle(seed):
    codes, n_bins, grad = _data(seed, d=6)
    groups = [[0, 3], [1], [2, 4, 5]] if seed % 2 else [[5, 0], [4, 1, 2], [3]]
    costs = np.array([1.5, 0.4, 1.0])
    penalty = np.zeros(6)
    for group, cost in zip(groups, costs, strict=True):
        penalty[group] = (0.5 + seed) * cost
    hess = np.random.default_rng(seed).uniform(0.05, 0.25, size=len(grad))
    rows = np.arange(codes.shape[0])
    fast_penalty, slow_penalty = penalty.copy(), penalty.copy()
    fast = _grow(codes, grad, rows, n_bins, fast_penalty, 3, 2, True, hess, groups=groups)
    slow = naive_tree(codes, grad, hess, rows, n_bins, slow_penalty, 3, 2, True, groups=groups)
    np.testing.assert_array_equal(fast[0], slow[0])
    np.testing.assert_array_equal(fast[1], slow[1])
    np.testing.assert_allclose(fast[2], slow[2], rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(fast_penalty, slow_penalty)
    # exactly the groups holding a split feature are free now, all their members
    used = {g for g, group in enumerate(groups) for f in fast[0] if f in group}
    for g, group in enumerate(groups):
        np.testing.assert_array_equal(fast_penalty[group], 0.0 if g in used else penalty[group])
    assert used and any(len(groups[g]) > 1 for g in used)


def _with_missing(codes, seed, rate=0.3):
    """``codes`` with a random ``rate`` of entries coded missing."""
    codes = codes.copy()
    codes[np.random.default_rng(seed).random(codes.shape) < rate] = binning.MISSING
    return codes


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("depth", "min_leaf", "newton"), [(1, 1, False), (3, 2, False),
                                                           (3, 2, True)])
def test_missing_values_and_default_directions_equal_the_oracle(seed, depth, min_leaf, newton):
    codes, n_bins, grad = _data(seed)
    codes = _with_missing(codes, seed, rate=0.15 * (seed % 3 + 1))
    rows = np.arange(codes.shape[0])
    penalty = np.where(np.arange(codes.shape[1]) % 2 == 0, 0.4, 0.0) * (seed % 3)
    hess = np.random.default_rng(seed).uniform(0.05, 0.25, size=len(grad))
    fast = _grow(codes, grad, rows, n_bins, penalty.copy(), depth, min_leaf, True, hess,
                 2e-3, 0.5 * (seed % 2), newton, 1e-3)
    slow = naive_tree(codes, grad, hess, rows, n_bins, penalty.copy(), depth, min_leaf, True,
                      2e-3, 0.5 * (seed % 2), newton, 1e-3)
    for got, want in zip(fast[:2] + fast[3:4], slow[:2] + slow[3:4], strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(fast[2], slow[2], rtol=1e-12, atol=1e-14)


def test_the_missing_rows_go_where_they_belong():
    # x0 present: grad = +-1 by its sign; x0 missing: grad = +2 (like the positive side)
    x0 = np.concatenate([np.linspace(-1, 1, 100), np.full(50, np.nan)])
    grad = np.concatenate([np.where(x0[:100] > 0, 1.0, -1.0), np.full(50, 2.0)])
    X = x0[:, None]
    edges, offsets = binning.fit_bin_edges(X, 32)
    codes, n_bins = binning.apply_bins(X, edges, offsets), binning.n_bins_per_feature(offsets)
    feature, threshold, value, default_left, gain = _grow(
        codes, grad, np.arange(150), n_bins, np.zeros(1), 1, 1, False)
    assert feature[0] == 0 and default_left[0] == 0  # missing joins the positive (right) side
    assert edges[threshold[0]] == pytest.approx(0.0, abs=0.02)
    assert gain[0] > 0 and value[2] > value[1]
    flipped = _grow(codes, -grad, np.arange(150), n_bins, np.zeros(1), 1, 1, False)
    assert flipped[3][0] == 0  # still right: the split is symmetric in the sign of g


def test_a_split_on_missingness_itself():
    # only whether x0 is missing matters: every present row left, every missing row right
    x0 = np.concatenate([np.linspace(-1, 1, 60), np.full(40, np.nan)])
    grad = np.concatenate([np.full(60, -1.0), np.full(40, 1.5)])
    edges, offsets = binning.fit_bin_edges(x0[:, None], 16)
    codes = binning.apply_bins(x0[:, None], edges, offsets)
    n_bins = binning.n_bins_per_feature(offsets)
    feature, threshold, value, default_left, _ = _grow(
        codes, grad, np.arange(100), n_bins, np.zeros(1), 1, 1, False)
    assert feature[0] == 0 and threshold[0] == n_bins[0] - 1 and default_left[0] == 0
    np.testing.assert_allclose(value[1:3], [-1.0, 1.5])
