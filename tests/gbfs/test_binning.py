import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms.gbfs import binning


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(-20, 20), min_size=2, max_size=60), st.integers(2, 8))
def test_code_le_b_iff_value_le_edge(values, max_bins):
    X = np.asarray(values, dtype=np.float64)[:, None] / 4.0
    edges, offsets = binning.fit_bin_edges(X, max_bins)
    codes = binning.apply_bins(X, edges, offsets)
    n_bins = binning.n_bins_per_feature(offsets)[0]
    assert n_bins <= max_bins and np.all(np.diff(edges) > 0)
    assert codes.max() < n_bins
    for b, edge in enumerate(edges):
        np.testing.assert_array_equal(codes[:, 0] <= b, X[:, 0] <= edge)
    if n_bins > 1:  # every bin is non-empty on the training data
        assert np.unique(codes).size == n_bins


def test_few_distinct_values_get_one_bin_each_and_constant_gets_one_bin():
    X = np.column_stack([np.tile([0.0, 1.0, 5.0], 10), np.full(30, 3.0)])
    edges, offsets = binning.fit_bin_edges(X)
    np.testing.assert_array_equal(edges, [0.5, 3.0])
    np.testing.assert_array_equal(binning.n_bins_per_feature(offsets), [3, 1])
    codes = binning.apply_bins(X, edges, offsets)
    assert codes.dtype == np.uint8 and codes[:, 1].max() == 0


def test_continuous_feature_is_capped_at_max_bins_with_balanced_bins():
    x = np.random.default_rng(0).normal(size=(5000, 1))
    edges, offsets = binning.fit_bin_edges(x, 255)
    counts = np.bincount(binning.apply_bins(x, edges, offsets)[:, 0])
    assert counts.size == 255 and counts.min() >= 10 and counts.max() <= 30
