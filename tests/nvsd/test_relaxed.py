"""Relaxed NVSD: ranked supports, subset kernel ridge, selection on validation data."""

import numpy as np
import pytest
from sklearn.kernel_ridge import KernelRidge

from algorithms.datasets.nvsd_synthetic import EXPERIMENTS, RELEVANT
from algorithms.nvsd import (
    NVSD,
    RelaxedNVSD,
    SubsetKernelRidge,
    nvsd_path,
    ranked_supports,
    select_relaxed,
)
from algorithms.serialization import dumps_state, loads_state


class _Fitted:
    """A stand-in with the attributes ranked_supports reads, for exact orderings."""

    def __init__(self, norms, regularizer="l", groups=None):
        self.derivative_norms_ = np.asarray(norms, dtype=float)
        self.regularizer = regularizer
        self._nvsd = NVSD(regularizer=regularizer, groups=groups)

    def make_regularizer(self, d):
        return self._nvsd.make_regularizer(d)


def test_ranked_supports_orders_variables_by_norm_and_skips_zeros():
    supports = ranked_supports(_Fitted([0.5, 0.0, 2.0, 0.5, 1.0]))
    assert [s.tolist() for s in supports] == [[2], [2, 4], [0, 2, 4], [0, 2, 3, 4]]


def test_ranked_supports_adds_whole_groups_by_group_norm():
    groups = [[0, 1], [2, 3], [4]]
    supports = ranked_supports(_Fitted([0.1, 0.1, 1.0, 0.0, 0.0], "gl", groups))
    assert [s.tolist() for s in supports] == [[2, 3], [0, 1, 2, 3]]


@pytest.mark.parametrize("kernel,params,sk", [
    ("polynomial", {"degree": 3, "offset": 1.0}, {"kernel": "poly", "degree": 3, "coef0": 1.0,
                                                  "gamma": 1.0}),
    ("gaussian", {"sigma": 2.0}, {"kernel": "rbf", "gamma": 1.0 / 8.0}),
])
def test_subset_kernel_ridge_equals_sklearn_on_the_columns(kernel, params, sk):
    rng = np.random.default_rng(0)
    X, Xt = rng.standard_normal((40, 6)), rng.standard_normal((15, 6))
    y = X[:, 1] ** 2 - X[:, 4] + 0.1 * rng.standard_normal(40)
    cols = [1, 4]
    ours = SubsetKernelRidge(kernel=kernel, kernel_params=params, columns=cols, alpha=0.3)
    ref = KernelRidge(alpha=0.3, **sk).fit(X[:, cols], y)
    np.testing.assert_allclose(ours.fit(X, y).predict(Xt), ref.predict(Xt[:, cols]),
                               rtol=1e-8, atol=1e-10)


def test_subset_kernel_ridge_empty_support_predicts_the_mean_and_round_trips():
    rng = np.random.default_rng(1)
    X, y = rng.standard_normal((10, 3)), rng.standard_normal(10)
    empty = SubsetKernelRidge(columns=[]).fit(X, y)
    np.testing.assert_allclose(empty.predict(X[:4]), np.full(4, y.mean()))
    model = SubsetKernelRidge(kernel="gaussian", kernel_params={"sigma": 1.5}, columns=[0, 2],
                              alpha=0.1).fit(X, y)
    clone = SubsetKernelRidge.from_state_dict(loads_state(dumps_state(model.state_dict())))
    np.testing.assert_array_equal(clone.predict(X), model.predict(X))
    with pytest.raises(ValueError, match="columns"):
        SubsetKernelRidge(columns=[3]).fit(X, y)
    with pytest.raises(ValueError, match="3 columns"):
        model.predict(X[:, :2])


@pytest.mark.parametrize("name,regularizer,nu", [("E1", "gl", 1.0), ("E2", "en", 1.0)])
def test_relaxed_selection_recovers_the_true_support(name, regularizer, nu):
    exp = EXPERIMENTS[name]
    rng = np.random.default_rng([7, int(name[1:])])
    (X, y), (Xv, yv), (Xt, yt) = (exp["make"](m, rng) for m in (100, 100, 500))
    path = nvsd_path(X, y, n_taus=6, ratio=1e-2, regularizer=regularizer,
                     kernel=exp["kernel"], **exp["kernel_params"], groups=exp["groups"],
                     nu=nu, l1_ratio=0.75, tol=1e-3)
    assert any(s.tolist() == list(RELEVANT) for m in path for s in ranked_supports(m))
    chosen = select_relaxed(path, X, y, Xv, yv)
    assert set(RELEVANT) <= set(chosen.support.tolist()) and len(chosen.support) <= 7
    full = KernelRidge(alpha=chosen.alpha, kernel="poly", degree=3, coef0=1.0, gamma=1.0)
    full.fit(X, y)
    rmse = np.sqrt(np.mean((chosen.model.predict(Xt) - yt) ** 2))
    assert rmse < 0.2 * np.sqrt(np.mean((full.predict(Xt) - yt) ** 2))
    assert 0 <= chosen.path_index < len(path) and chosen.n_fits > 0


def test_select_relaxed_needs_a_path():
    with pytest.raises(ValueError, match="path"):
        select_relaxed([], np.zeros((2, 2)), np.zeros(2), np.zeros((2, 2)), np.zeros(2))


def test_relaxed_nvsd_estimator_selects_refits_and_round_trips():
    exp = EXPERIMENTS["E1"]
    X, y = exp["make"](120, np.random.default_rng(11))
    Xt, yt = exp["make"](300, np.random.default_rng(12))
    model = RelaxedNVSD(nus=(1.0,), n_taus=5, ratio=1e-2, regularizer="gl",
                        kernel="polynomial", degree=3, groups=exp["groups"], tol=1e-3)
    model.fit(X, y)  # a seeded quarter of the rows chooses; the refit uses all of them
    assert model.selected_features().tolist() == list(RELEVANT)
    oracle = KernelRidge(alpha=model.alpha_, kernel="poly", degree=3, coef0=1.0, gamma=1.0)
    oracle.fit(X[:, list(RELEVANT)], y)
    np.testing.assert_allclose(model.predict(Xt), oracle.predict(Xt[:, list(RELEVANT)]),
                               rtol=1e-6, atol=1e-6)
    clone = RelaxedNVSD.from_state_dict(loads_state(dumps_state(model.state_dict())))
    np.testing.assert_array_equal(clone.predict(Xt), model.predict(Xt))
    assert clone.tau_ == model.tau_ and clone.support_.tolist() == list(RELEVANT)
