"""SetFigures against plain-numpy references: explained variance, RMSE, Platt calibration
(against scikit-learn and a brute-force minimization), cross-fitted error and log-loss,
next_group by brute force, the cost cap, the cache."""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.linear_model import LogisticRegression

from algorithms.per_set.figures import (
    ZERO_COST_EPSILON,
    SetFigures,
    best_next_group,
    platt_fit,
    platt_targets,
)

GROUPS = [np.array([0, 1]), np.array([2]), np.array([3, 4])]
COSTS = np.array([1.0, 0.5, 2.0])
WEIGHTS = np.array([1.0, -0.5, 0.8, 0.0, 0.3])


def columns(S):
    return np.concatenate([GROUPS[g] for g in S]) if S else np.zeros(0, dtype=np.int64)


class CountingScorer:
    """A linear scorer on the computed groups' features that counts its calls."""

    def __init__(self, weights=WEIGHTS, offset=0.1):
        self.weights, self.offset, self.calls = weights, offset, 0

    def __call__(self, X, S):
        self.calls += 1
        cols = columns(S)
        return X[:, cols] @ self.weights[cols] + self.offset


def data(n=240, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    target = X @ np.array([1.0, -0.4, 0.9, 0.5, 0.2]) + 0.5 * rng.normal(size=n)
    labels = np.where(rng.random(n) < 1 / (1 + np.exp(-2 * target)), 1.0, -1.0)
    return X, target, labels


def every_set(J=3):
    return [tuple(S) for k in range(J + 1) for S in itertools.combinations(range(J), k)]


def platt_brute_force(s, positive):
    """Platt's objective minimized by a generic optimizer from a crude start."""
    t = platt_targets(positive)

    def objective(theta):
        f = theta[0] * s + theta[1]
        return np.sum(np.logaddexp(0, f) - t * f)

    def gradient(theta):
        r = 1 / (1 + np.exp(-(theta[0] * s + theta[1]))) - t
        return np.array([r @ s, r.sum()])

    result = minimize(objective, np.zeros(2), jac=gradient, method="BFGS",
                      options={"gtol": 1e-11, "maxiter": 10000})
    return result.x


def log_loss_reference(p, positive):
    return float(-np.mean(np.where(positive, np.log(p), np.log(1 - p))))


# ------------------------------------------------------------------------ regression
def test_regression_figures_match_numpy_for_every_set():
    X, target, _ = data()
    scorer = CountingScorer()
    figures = SetFigures(scorer, X, target, task="regression", groups=GROUPS, costs=COSTS)
    for S in every_set():
        pred = scorer(X, S)
        mse = np.mean((pred - target) ** 2)
        got = figures.figures(S)
        assert got.explained_variance == pytest.approx(1 - mse / np.var(target), abs=1e-12)
        assert got.rmse == pytest.approx(np.sqrt(mse), abs=1e-12)
        assert got.figure == got.explained_variance
        assert got.cost == pytest.approx(COSTS[list(S)].sum())
        assert got.groups == S and got.n_rows == len(target) and got.log_loss is None


def test_empty_set_and_constant_target():
    X, target, _ = data(n=50)
    figures = SetFigures(lambda X, S: np.full(X.shape[0], target.mean()), X, target,
                         task="regression", groups=GROUPS, costs=COSTS)
    assert figures.figures(()).explained_variance == pytest.approx(0.0, abs=1e-12)
    flat = SetFigures(lambda X, S: np.full(X.shape[0], 2.0), X, np.full(50, 3.0),
                      task="regression", groups=GROUPS, costs=COSTS)
    assert flat.figures([]).explained_variance == pytest.approx(0.0)   # 1 - MSE
    assert flat.figures([]).cost == 0.0


# -------------------------------------------------------------------------- Platt
def test_platt_with_hard_targets_is_scikit_learns_logistic_regression():
    rng = np.random.default_rng(1)
    s = 3 * rng.normal(size=300) + 1
    y = rng.random(300) < 1 / (1 + np.exp(-(0.7 * s - 0.4)))
    a, b = platt_fit(s, y, smoothed=False)
    lr = LogisticRegression(C=1e12, tol=1e-12, solver="newton-cholesky",
                            max_iter=1000).fit(s[:, None], y)
    assert a == pytest.approx(lr.coef_[0, 0], abs=1e-6)
    assert b == pytest.approx(lr.intercept_[0], abs=1e-6)


@pytest.mark.parametrize("separable", [False, True])
def test_platt_smoothed_targets_match_weighted_logistic_regression(separable):
    rng = np.random.default_rng(2)
    s = rng.normal(size=200) * 2 - 0.5
    y = (s > 0.3) if separable else rng.random(200) < 1 / (1 + np.exp(-1.5 * s))
    a, b = platt_fit(s, y)
    assert np.isfinite(a) and np.isfinite(b) and a > 0
    t = platt_targets(y)
    n = len(s)
    assert t[y][0] == pytest.approx((y.sum() + 1) / (y.sum() + 2))
    assert t[~y][0] == pytest.approx(1 / (n - y.sum() + 2))
    # the soft targets as two weighted copies of each row
    lr = LogisticRegression(C=1e12, tol=1e-12, solver="newton-cholesky", max_iter=1000).fit(
        np.r_[s, s][:, None], np.r_[np.ones(n), np.zeros(n)], sample_weight=np.r_[t, 1 - t])
    assert a == pytest.approx(lr.coef_[0, 0], abs=1e-6)
    assert b == pytest.approx(lr.intercept_[0], abs=1e-6)
    brute = platt_brute_force(s, y)
    assert a == pytest.approx(brute[0], abs=1e-5) and b == pytest.approx(brute[1], abs=1e-5)


def test_platt_of_a_constant_score_is_the_smoothed_base_rate():
    y = np.array([True, False, False, True, True])
    a, b = platt_fit(np.full(5, 7.0), y)
    assert a == 0.0
    assert 1 / (1 + np.exp(-b)) == pytest.approx(np.mean(platt_targets(y)))


def _classification(cross_fit, n=240):
    X, _, labels = data(n=n)
    scorer = CountingScorer()
    return scorer, X, labels, SetFigures(scorer, X, labels, task="classification",
                                         groups=GROUPS, costs=COSTS, cross_fit=cross_fit)


def test_in_sample_classification_figures_match_numpy():
    scorer, X, labels, figures = _classification(cross_fit=False)
    positive = labels > 0
    for S in every_set():
        s = scorer(X, S)
        a, b = platt_brute_force(s, positive) if S else (0.0, platt_fit(s, positive)[1])
        p = 1 / (1 + np.exp(-(a * s + b)))
        got = figures.figures(S)
        assert not got.cross_fitted
        assert got.platt_a == pytest.approx(a, abs=1e-5)
        assert got.platt_b == pytest.approx(b, abs=1e-5)
        assert got.log_loss == pytest.approx(log_loss_reference(p, positive), abs=1e-6)
        assert got.error == np.mean((p >= 0.5) != positive)
        assert got.figure == -got.log_loss
        np.testing.assert_allclose(figures.probabilities(s, S), p, atol=1e-6)


def test_cross_fitted_classification_figures_match_numpy():
    scorer, X, labels, figures = _classification(cross_fit=True)
    positive = labels > 0
    for S in every_set()[1:]:
        s = scorer(X, S)
        p = np.empty(len(s))
        for fold in (0, 1):
            fit_rows, out_rows = np.arange(1 - fold, len(s), 2), np.arange(fold, len(s), 2)
            a, b = platt_brute_force(s[fit_rows], positive[fit_rows])
            p[out_rows] = 1 / (1 + np.exp(-(a * s[out_rows] + b)))
        got = figures.figures(S)
        assert got.cross_fitted
        assert got.log_loss == pytest.approx(log_loss_reference(p, positive), abs=1e-6)
        assert got.error == pytest.approx(np.mean((p >= 0.5) != positive))
        # what is served is the fit on all rows
        a, b = platt_brute_force(s, positive)
        assert (got.platt_a, got.platt_b) == pytest.approx((a, b), abs=1e-5)


def test_calibrated_probabilities_are_monotone_in_the_score():
    _, _, _, figures = _classification(cross_fit=True)
    grid = np.linspace(-10, 10, 401)
    for S in every_set()[1:]:
        p = figures.probabilities(grid, S)
        assert np.all(np.diff(p) >= 0) and np.all((p >= 0) & (p <= 1))
        assert figures.figures(S).platt_a > 0


def test_few_rows_are_figured_in_sample():
    scorer, X, labels, _ = _classification(cross_fit=True)
    small = SetFigures(scorer, X[:3], labels[:3], task="classification", groups=GROUPS,
                       costs=COSTS)
    assert small.figures([0]).cross_fitted is False


# ---------------------------------------------------------------------- next_group
@pytest.mark.parametrize("task", ["regression", "classification"])
def test_next_group_is_the_brute_force_best_gain_per_cost(task):
    X, target, labels = data()
    y = target if task == "regression" else labels
    figures = SetFigures(CountingScorer(), X, y, task=task, groups=GROUPS, costs=COSTS)
    for S in every_set():
        for max_cost in (None, 1.0, 2.5, 10.0):
            spent = COSTS[list(S)].sum()
            fits = [g for g in range(3) if g not in S
                    and (max_cost is None or spent + COSTS[g] <= max_cost)]
            got = figures.next_group(S, max_cost=max_cost)
            if not fits:
                assert got is None
                continue
            gains = {g: figures.figure(tuple(sorted(S + (g,)))) - figures.figure(S)
                     for g in fits}
            best = max(fits, key=lambda g: (gains[g] / COSTS[g], -g))
            assert got == (best, pytest.approx(gains[best], abs=1e-15))
            if max_cost is not None:
                assert spent + COSTS[got[0]] <= max_cost
    assert figures.next_group((0, 1, 2)) is None
    assert figures.next_group((), max_cost=0.1) is None


def test_a_zero_cost_group_divides_by_epsilon():
    costs = np.array([0.0, 1.0, 4.0])
    values = {(): 0.0, (0,): 0.5, (1,): 2.0, (2,): 3.0}
    assert best_next_group(values.__getitem__, (), costs) == (0, 0.5)
    values[(0,)] = -0.5   # a free group that loses ranks below every paid group
    assert best_next_group(values.__getitem__, (), costs) == (1, 2.0)
    assert ZERO_COST_EPSILON > 0


def test_next_group_calls_the_scorer_once_per_candidate():
    X, target, _ = data()
    scorer = CountingScorer()
    figures = SetFigures(scorer, X, target, task="regression", groups=GROUPS, costs=COSTS)
    figures.next_group(())
    assert scorer.calls == 4          # the empty set and three candidates
    figures.next_group(())
    assert scorer.calls == 4          # all cached


# --------------------------------------------------------------------------- cache
def test_a_cache_hit_is_the_same_object_and_the_cache_is_bounded():
    X, target, _ = data(n=60)
    scorer = CountingScorer()
    figures = SetFigures(scorer, X, target, task="regression", groups=GROUPS, costs=COSTS,
                         cache_size=2)
    first = figures.figures([1, 0])
    assert figures.figures((0, 1)) is first and figures.figures([0, 1, 1]) is first
    assert scorer.calls == 1
    figures.figures([2])
    figures.figures([0, 1])           # most recent again: [2] is the oldest now
    figures.figures([])               # evicts [2]
    assert figures.cache_len() == 2
    assert figures.figures([0, 1]) is first
    calls = scorer.calls
    figures.figures([2])
    assert scorer.calls == calls + 1


def test_threads_asking_for_one_set_get_one_object():
    X, target, _ = data(n=60)
    figures = SetFigures(CountingScorer(), X, target, task="regression", groups=GROUPS,
                         costs=COSTS)
    out = []
    threads = [threading.Thread(target=lambda: out.append(figures.figures([0, 2])))
               for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(out) == 8 and all(f is out[0] for f in out)


def test_bad_sets_and_scorers_are_clean_errors():
    X, target, labels = data(n=30)
    figures = SetFigures(CountingScorer(), X, target, task="regression", groups=GROUPS,
                         costs=COSTS)
    for bad in ([3], [-1], ["a"], [True], "0"):
        with pytest.raises(ValueError, match="group ids"):
            figures.figures(bad)
    broken = SetFigures(lambda X, S: np.zeros(3), X, target, task="regression",
                        groups=GROUPS, costs=COSTS)
    with pytest.raises(ValueError, match="scorer"):
        broken.figures([0])
    with pytest.raises(ValueError, match="-1.0 or"):
        SetFigures(CountingScorer(), X, target, task="classification", groups=GROUPS,
                   costs=COSTS)
    with pytest.raises(ValueError, match="task"):
        SetFigures(CountingScorer(), X, labels, task="ranking", groups=GROUPS, costs=COSTS)
    with pytest.raises(ValueError, match="probabilities"):
        figures.probabilities(np.zeros(2), [0])


def test_row_losses_average_to_the_figures():
    """Regression: the rows' squared errors over Var(y) average to 1 - EV; classification:
    the rows' cross-fitted log-losses average to the figure's log-loss."""
    from algorithms.per_set.figures import (
        classification_figures,
        regression_figures,
        row_losses,
    )

    rng = np.random.default_rng(3)
    y = rng.normal(size=80)
    scores = y + rng.normal(size=80)
    np.testing.assert_allclose(row_losses("regression", scores, y).mean(),
                               1.0 - regression_figures(scores, y)[0], rtol=1e-12)
    labels = np.where(scores + rng.normal(size=80) > 0, 1.0, -1.0)
    for cross_fit in (True, False):
        _, log_loss, *_ = classification_figures(scores, labels > 0, cross_fit=cross_fit)
        np.testing.assert_allclose(
            row_losses("classification", scores, labels, cross_fit=cross_fit).mean(),
            log_loss, rtol=1e-12)


def test_wins_beyond_noise_is_the_one_standard_error_rule():
    from algorithms.per_set.figures import wins_beyond_noise

    rng = np.random.default_rng(4)
    for _ in range(200):
        n = int(rng.integers(2, 40))
        a, b = rng.exponential(size=n), rng.exponential(size=n)
        diff = b - a
        se = diff.std(ddof=1) / np.sqrt(n)
        for margin in (0.0, 0.5, 1.0, 2.0):
            expected = diff.mean() > 1e-12 and diff.mean() > margin * se
            assert wins_beyond_noise(a, b, margin) == expected
    assert not wins_beyond_noise(np.ones(5), np.ones(5), 0.0)   # a tie never wins
