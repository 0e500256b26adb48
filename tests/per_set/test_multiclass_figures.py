"""Multi-class per-set figures: the temperature fit against a plain 1-D minimizer of the
same smoothed cross-entropy, Platt's targets at K = 2, cross-fitted figures by hand."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax

from algorithms.per_set.figures import platt_targets
from algorithms.per_set.multiclass import (
    MulticlassSetFigures,
    multiclass_figures,
    smoothed_targets,
    temperature_fit,
)


def _reference_a(H, y, K):
    t = smoothed_targets(y, K)

    def loss(a):
        return float(-np.sum(t * log_softmax(a * H, axis=1)))

    return minimize_scalar(loss, bounds=(0.0, 50.0), method="bounded",
                           options={"xatol": 1e-10}).x


@pytest.mark.parametrize("scale", [0.2, 1.0, 5.0])
def test_temperature_fit_is_the_minimizer(scale):
    rng = np.random.default_rng(1)
    n, K = 400, 5
    y = rng.integers(0, K, n)
    H = rng.normal(size=(n, K))
    H[np.arange(n), y] += 1.0
    H *= scale
    assert temperature_fit(H, y, K) == pytest.approx(_reference_a(H, y, K), rel=1e-5)


def test_separable_scores_give_a_finite_temperature():
    y = np.arange(60) % 3
    H = np.eye(3)[y] * 10.0
    a = temperature_fit(H, y, 3)
    assert np.isfinite(a) and a > 0
    assert temperature_fit(np.zeros((60, 3)), y, 3) == 1.0  # flat scores: nothing to fit


def test_two_classes_give_platts_targets():
    y = np.array([0, 1, 1, 0, 1])
    t = smoothed_targets(y, 2)
    np.testing.assert_allclose(t[:, 1], platt_targets(y == 1))


def test_figures_are_cross_fitted_and_cached():
    rng = np.random.default_rng(2)
    n, K = 300, 4
    X = rng.normal(size=(n, 2))
    y = rng.integers(0, K, n)
    W = rng.normal(size=(2, K))

    def score(rows, S):
        return rows @ W if S else np.zeros((rows.shape[0], K))

    figures = MulticlassSetFigures(score, X, y, n_classes=K, groups=[[0], [1]],
                                   costs=[1.0, 2.0])
    full = figures.figures([0, 1])
    H = X @ W
    error, log_loss, a, crossed = multiclass_figures(H, y, K)
    assert crossed and full.error == pytest.approx(np.mean(H.argmax(1) != y))
    odd, even = temperature_fit(H[1::2], y[1::2], K), temperature_fit(H[::2], y[::2], K)
    logits = np.empty_like(H)
    logits[::2], logits[1::2] = odd * H[::2], even * H[1::2]
    manual = -np.mean(log_softmax(logits, axis=1)[np.arange(n), y])
    assert full.log_loss == pytest.approx(manual, rel=1e-12)
    assert full.temperature_a == pytest.approx(a)
    assert figures.figures([1, 0]) is full and figures.cache_len() == 1
    assert figures.figures([]).log_loss == pytest.approx(np.log(K), rel=1e-9)
    p = figures.probabilities(H[:3], [0, 1])
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    with pytest.raises(ValueError, match="class indices"):
        MulticlassSetFigures(score, X, y + 0.5, n_classes=K, groups=[[0], [1]], costs=[1, 1])
