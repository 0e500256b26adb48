"""Anytime curve and timeliness against hand-computed values."""

import numpy as np
import pytest

from algorithms.anytime import SufficientStatistics
from algorithms.metrics.anytime import (
    explained_variance,
    explained_variance_from_statistics,
    explained_variance_on_support,
    timeliness,
)


def test_timeliness_step_function_by_hand():
    cost = [0.0, 1.0, 3.0, 4.0]
    ev = [0.0, 0.5, 0.8, 1.0]
    # area up to 4: 0*1 + 0.5*2 + 0.8*1 = 1.8 -> / (4 * 1.0)
    assert timeliness(cost, ev) == pytest.approx(1.8 / 4)
    # up to budget 2: 0*1 + 0.5*1 = 0.5 -> / (2 * 1.0)
    assert timeliness(cost, ev, budget=2.0) == pytest.approx(0.25)
    # beyond the last cost the last value holds
    assert timeliness(cost, ev, budget=8.0) == pytest.approx((1.8 + 4.0) / 8)
    assert timeliness(cost, ev, reference=2.0) == pytest.approx(1.8 / 8)


def test_timeliness_zero_cost_prefix_uses_longest():
    assert timeliness([0.0, 0.0, 2.0], [0.0, 0.6, 0.6]) == pytest.approx(1.0)


def test_explained_variance_from_statistics_matches_predictions():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 5)) + 3
    y = X @ rng.standard_normal(5) + rng.standard_normal(200)
    coefs = rng.standard_normal((4, 5))
    intercepts = rng.standard_normal(4)
    stats = SufficientStatistics.from_data(X, y)
    got = explained_variance_from_statistics(stats, coefs, intercepts)
    want = [explained_variance(y, X @ c + i) for c, i in zip(coefs, intercepts, strict=True)]
    np.testing.assert_allclose(got, want, rtol=1e-9)


def test_one_sparse_predictor_on_statistics_matches_its_predictions():
    """The single-predictor kernel (a computed set's: coefficients on a support) is the EV
    of its predictions, and the many-predictor formula's value, zero coefficients or not."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((300, 8)) * [1, 2, 3, 1, 1, 5, 1, 1] + 2
    y = X @ rng.standard_normal(8) + rng.standard_normal(300)
    stats = SufficientStatistics.from_data(X, y)
    for support in ([], [3], [0, 5, 6], list(range(8))):
        coef = np.zeros(8)
        coef[support] = rng.standard_normal(len(support))
        intercept = float(rng.standard_normal())
        want = explained_variance(y, X @ coef + intercept)
        got = explained_variance_on_support(stats, np.array(support, dtype=np.int64),
                                            coef[support], intercept)
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12)
        pair = explained_variance_from_statistics(stats, np.stack([coef, coef]),
                                                  [intercept, intercept])
        np.testing.assert_allclose(pair, [got, got], rtol=1e-9, atol=1e-12)
    flat = SufficientStatistics.from_data(X, np.full(300, 2.0))  # Var(y) = 0
    assert explained_variance_on_support(flat, np.array([1]), np.array([1.0]), 0.0) == 0.0
