"""The numba decisions and gate against the plain numpy reference
(``tests/acquisition/reference.py``, one Python step at a time): the same gate verdict
and, for every example, set, cap and exchange rate tried, the same decision."""

import numpy as np
import pytest

from algorithms.acquisition import ConditionedAcquisition, kernels
from algorithms.datasets.acquisition_synthetic import make_cube_nm
from tests.acquisition.reference import ReferenceAcquisition
from tests.acquisition.test_policy import cube_nm_bayes


def same_decision(got, want):
    assert (got.group, got.stop_reason, got.plan, got.per_example) == \
        (want.group, want.stop_reason, want.plan, want.per_example)
    if want.expected_gain is None:
        assert got.expected_gain is None
    else:
        assert got.expected_gain == pytest.approx(want.expected_gain, rel=1e-9, abs=1e-12)
        assert got.interval == pytest.approx(want.interval, rel=1e-9, abs=1e-12)
    assert [c.group for c in got.candidates] == [c.group for c in want.candidates]
    for a, b in zip(got.candidates, want.candidates, strict=True):
        assert (a.expected_gain is None) == (b.expected_gain is None)
        if b.expected_gain is not None:
            assert a.expected_gain == pytest.approx(b.expected_gain, rel=1e-9, abs=1e-12)


def both(predict, X, y, **fit):
    params = {"n_neighbors": fit.pop("n_neighbors", 30),
              "max_groups": fit.pop("max_groups", 12)}
    ours = ConditionedAcquisition(**params).fit(predict, X, y, **fit)
    reference = ReferenceAcquisition(**params).fit(predict, X, y, **fit)
    return ours, reference


def check_gate(ours, reference):
    assert ours.per_example_ == reference.per_example_
    for key in ("per_example_loss", "per_set_loss", "difference", "stderr"):
        assert ours.gate_[key] == pytest.approx(reference.gate_[key], rel=1e-9, abs=1e-12)


def test_cube_nm_decisions_and_gate_equal_the_reference():
    X, y, groups, costs, _ = make_cube_nm(420, seed=4)
    ours, reference = both(cube_nm_bayes, X[:300], y[:300], groups=groups, costs=costs,
                           loss="log")
    check_gate(ours, reference)
    assert ours.per_example_
    for x in X[300:330]:
        for S in ((), (0,), (1,), (0, 2), (0, 1, 3)):
            z = np.full_like(x, np.nan)
            keep = [f for g in S for f in groups[g]]
            z[keep] = x[keep]
            for cap, rate in ((None, None), (4.0, None), (None, 0.01), (7.0, 0.0),
                              (2.0, None), (None, 10.0)):
                same_decision(ours.decide(z, S, max_cost=cap, exchange_rate=rate),
                              reference.decide(z, S, max_cost=cap, exchange_rate=rate))
        assert ours.episode(x, max_cost=7.0) == reference.episode(x, max_cost=7.0)


def test_ties_a_pool_smaller_than_the_groups_and_squared_loss():
    """Discrete features (many equal distances: ties to the lower row), 7 groups of
    unequal sizes with a pool of 4 (the per-set order beyond it), regression."""
    rng = np.random.default_rng(5)
    n = 260
    X = rng.integers(0, 3, size=(n, 10)).astype(float)
    groups = [[0], [1, 2], [3], [4, 5, 6], [7], [8], [9]]
    costs = [1.0, 2.0, 0.5, 3.0, 1.0, 1.5, 0.0]
    w = np.array([1.0, -2.0, 0.5, 1.5, 0.0, 0.3, -0.7, 2.0, 0.1, 0.4])
    y = np.where(X[:, 0] > 1, X @ w, -X @ w) + 0.3 * rng.standard_normal(n)

    def predict(Z):
        known = np.nan_to_num(Z, nan=1.0)
        return np.where(np.isnan(Z[:, 0]), 0.0, np.where(known[:, 0] > 1, 1.0, -1.0)) * \
            (known @ w)

    ours, reference = both(predict, X[:200], y[:200], groups=groups, costs=costs,
                           loss="squared", max_groups=4, n_neighbors=12)
    check_gate(ours, reference)
    assert ours.sequence_ == reference.sequence_ and len(ours.sequence_) == 7
    for x in X[200:230]:
        for S in ((), (0,), (2, 5), (0, 1, 3), (6,)):
            for cap, rate in ((None, None), (3.0, None), (None, 0.05), (5.5, 0.0)):
                for per_example in (True, False):
                    ours.per_example_ = reference.per_example_ = per_example
                    same_decision(ours.decide(x, S, max_cost=cap, exchange_rate=rate),
                                  reference.decide(x, S, max_cost=cap, exchange_rate=rate))


def test_nearest_keeps_the_least_distances_ties_to_the_lower_row():
    rng = np.random.default_rng(2)
    for n, k in ((50, 7), (300, 30), (31, 30)):
        dist = rng.integers(0, 5, n).astype(float)
        rows = np.sort(rng.choice(10 * n, n, replace=False))
        out = np.empty(n, dtype=np.int64)
        assert kernels.nearest(dist, rows, k, out) == k
        want = np.sort(rows[np.argsort(dist, kind="stable")[:k]])
        assert out[:k].tolist() == want.tolist()


def test_the_gate_runs_on_at_most_gate_rows():
    X, y, groups, costs, _ = make_cube_nm(600, seed=6)
    policy = ConditionedAcquisition(gate_rows=200).fit(cube_nm_bayes, X, y, groups=groups,
                                                       costs=costs, loss="log")
    assert policy.gate_["rows"] == 200 and policy.per_example_
    every = ConditionedAcquisition(gate_rows=None).fit(cube_nm_bayes, X, y, groups=groups,
                                                       costs=costs, loss="log")
    assert every.gate_["rows"] == 600
