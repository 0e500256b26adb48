"""NVSD estimator: fit/predict, selection, warm starts, path, state round trip."""

import numpy as np
import pytest

from algorithms.datasets.nvsd_synthetic import (
    EXPERIMENTS,
    RELEVANT,
    TRIPLES,
    D,
    make_e1,
    make_e2,
    make_e3,
)
from algorithms.metrics.selection import tanimoto_distance
from algorithms.nvsd import NVSD, nvsd_path
from algorithms.serialization import dumps_state, loads_state


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((25, 4))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.05 * rng.standard_normal(25)
    return X, y


@pytest.mark.parametrize("regularizer", ["l", "gl", "en"])
def test_fit_predict_and_fitted_attributes(small, regularizer):
    X, y = small
    model = NVSD(regularizer=regularizer, kernel="gaussian", sigma=2.0, tau=0.05, nu=1e-3,
                 groups=[[0, 1], [2, 3]], tol=1e-6).fit(X, y)
    assert model.converged_
    assert model.alpha_.shape == (25,) and model.beta_.shape == (4, 25)
    assert model.derivative_norms_.shape == (4,) and model.support_.dtype == bool
    pred = model.predict(X)
    assert np.sqrt(np.mean((pred - y) ** 2)) < np.std(y)
    np.testing.assert_allclose(
        model.derivative_norms_, np.linalg.norm(model.phi_, axis=1) / np.sqrt(25))
    np.testing.assert_array_equal(model.selected_features(), np.flatnonzero(model.support_))


def test_large_tau_selects_nothing_and_path_grows_support(small):
    X, y = small
    models = nvsd_path(X, y, regularizer="l", kernel="gaussian", sigma=2.0, nu=1e-2,
                       n_taus=6, ratio=1e-2, tol=1e-6)
    # tau_max is the boundary: at most ADMM-accuracy leftovers there, a real support later
    assert models[0].derivative_norms_.max() < 1e-3 * models[-1].derivative_norms_.max()
    assert models[-1].support_.sum() >= 2
    assert [m.tau for m in models] == sorted((m.tau for m in models), reverse=True)
    # the path's solution equals a cold fit at the same tau
    cold = NVSD(regularizer="l", kernel="gaussian", sigma=2.0, nu=1e-2, tau=models[3].tau,
                tol=1e-6).fit(X, y)
    assert cold.objective_ == pytest.approx(models[3].objective_, rel=1e-5)


def test_warm_start_reuses_solution(small):
    X, y = small
    model = NVSD(regularizer="en", kernel="polynomial", tau=0.5, nu=1e-2, tol=1e-6,
                 warm_start=True).fit(X, y)
    first = model.n_iter_
    model.fit(X, y)
    assert model.n_iter_ < first


def test_state_round_trip_is_bit_exact(small):
    X, y = small
    model = NVSD(regularizer="gl", kernel="polynomial", degree=2, tau=0.2, nu=1e-2,
                 groups=[[0, 2], [1, 3]], group_weight="sqrt").fit(X, y)
    state = loads_state(dumps_state(model.state_dict()))
    clone = NVSD.from_state_dict(state)
    assert clone.get_params() == model.get_params()
    for name in ("alpha_", "beta_", "phi_", "lambda_", "derivative_norms_", "support_"):
        np.testing.assert_array_equal(getattr(clone, name), getattr(model, name))
    assert clone.kappa_ == model.kappa_ and clone.objective_ == model.objective_
    Xt = np.random.default_rng(5).standard_normal((7, 4))
    np.testing.assert_array_equal(clone.predict(Xt), model.predict(Xt))
    unfitted = NVSD.from_state_dict(loads_state(dumps_state(NVSD(tau=3.0).state_dict())))
    assert unfitted.tau == 3.0 and not hasattr(unfitted, "alpha_")


def test_input_validation(small):
    X, y = small
    with pytest.raises(ValueError):
        NVSD().fit(X, y[:-1])
    with pytest.raises(ValueError):
        NVSD(tau=-1.0).fit(X, y)
    with pytest.raises(ValueError):
        NVSD(nu=0.0).fit(X, y)
    with pytest.raises(ValueError):
        NVSD(regularizer="gl").fit(X, y)
    model = NVSD(tau=0.1).fit(X, y)
    with pytest.raises(ValueError):
        model.predict(X[:, :3])
    with pytest.raises(ValueError):
        NVSD.from_state_dict({"class": "SOFS"})


def test_generators_match_the_paper():
    for make in (make_e1, make_e2, make_e3):
        X, y = make(400, seed=0)
        assert X.shape == (400, D) and y.shape == (400,)
        X2, y2 = make(400, seed=0)
        np.testing.assert_array_equal(X, X2)
        np.testing.assert_array_equal(y, y2)
    X, y = make_e1(20000, seed=1)
    h3 = sum(X[:, i] * X[:, j] * X[:, k] for i in range(3) for j in range(i, 3)
             for k in range(j, 3))
    resid = y - h3 - sum(X[:, 6 + i] * X[:, 6 + j] * X[:, 6 + k] for i in range(3)
                         for j in range(i, 3) for k in range(j, 3))
    assert abs(resid.std() - 0.1) < 0.005
    X, y = make_e2(20000, seed=1)
    corr = np.corrcoef(X.T)
    for a, b in [(0, 6), (1, 7), (2, 8), (3, 9)]:
        assert abs(corr[a, b] - 0.95) < 0.01
    assert abs(corr[0, 1]) < 0.03
    resid = y - X[:, 0:3].sum(1) ** 3 - X[:, 6:9].sum(1) ** 3
    assert abs(resid.std() - 0.1) < 0.005
    X, y = make_e3(20000, seed=1)
    corr = np.corrcoef(X.T)
    assert abs(corr[0, 1] - 1 / 1.1) < 0.02 and abs(corr[0, 3]) < 0.03
    assert set(RELEVANT) == {0, 1, 2, 6, 7, 8} and len(TRIPLES) == 6
    assert set(EXPERIMENTS) == {"E1", "E2", "E3"}


def test_tanimoto_distance():
    assert tanimoto_distance([0, 1, 2], [0, 1, 2]) == 0.0
    assert tanimoto_distance([0, 1], [2]) == 1.0
    assert tanimoto_distance([0, 1, 2, 3], [2, 3, 4]) == pytest.approx(1 - 2 / 5)
    mask = np.zeros(18, dtype=bool)
    mask[list(RELEVANT)] = True
    assert tanimoto_distance(RELEVANT, mask) == 0.0
    assert tanimoto_distance([], []) == 0.0


def test_inexact_solver_option_gives_the_same_model(small):
    X, y = small
    params = {"regularizer": "gl", "kernel": "gaussian", "sigma": 2.0, "tau": 0.05, "nu": 1e-3,
              "groups": [[0, 1], [2, 3]], "tol": 1e-7}
    direct = NVSD(**params).fit(X, y)
    inexact = NVSD(**params, solver="inexact").fit(X, y)
    assert inexact.objective_ == pytest.approx(direct.objective_, rel=1e-6)
    np.testing.assert_array_equal(inexact.support_, direct.support_)
    np.testing.assert_allclose(inexact.predict(X), direct.predict(X), atol=1e-4)
    with pytest.raises(ValueError):
        NVSD(solver="lbfgs").fit(X, y)
