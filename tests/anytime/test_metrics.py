"""Anytime curve and timeliness against hand-computed values."""

import numpy as np
import pytest

from algorithms.anytime import SufficientStatistics
from algorithms.metrics.anytime import (
    explained_variance,
    explained_variance_from_statistics,
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
