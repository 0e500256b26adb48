"""Cost-weighted Group Lasso baseline (needs celer)."""

import numpy as np
import pytest

from algorithms.anytime import AnytimeLinearModel
from algorithms.anytime.group_lasso import _whitened_pseudo_data, group_lasso_order
from tests.anytime import naive

pytest.importorskip("celer")


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    sizes = [2, 3, 1, 4, 2]
    D, n = sum(sizes), 300
    X = rng.standard_normal((n, D)) + 0.5 * rng.standard_normal((n, 1))
    y = X @ rng.standard_normal(D) + rng.standard_normal(n)
    C, b = naive.standardized(X, y, 1e-3)
    return X, y, C, b, np.split(np.arange(D), np.cumsum(sizes)[:-1]), rng.uniform(1, 3, 5)


def test_pseudo_data_reproduces_whitened_statistics():
    _, _, C, b, groups, _ = _problem()
    A, ytilde, positions = _whitened_pseudo_data(C, b, groups)
    Ct = A.T @ A
    for p in positions:  # whitened: every diagonal block is the identity
        np.testing.assert_allclose(Ct[np.ix_(p, p)], np.eye(len(p)), atol=1e-10)
    L = [np.linalg.cholesky(C[np.ix_(g, g)]) for g in groups]
    bt = np.concatenate([np.linalg.solve(Lg, b[g]) for Lg, g in zip(L, groups, strict=True)])
    # the eigen-whitening and Cholesky whitening differ by a rotation per group: norms agree
    for p, g, Lg in zip(positions, groups, L, strict=True):
        assert np.linalg.norm((A.T @ ytilde)[p]) == pytest.approx(
            np.linalg.norm(np.linalg.solve(Lg, b[g])), rel=1e-9)
    assert np.linalg.norm(A.T @ ytilde) == pytest.approx(np.linalg.norm(bt), rel=1e-9)


def test_order_is_a_permutation_and_starts_at_alpha_max():
    _, _, C, b, groups, costs = _problem(1)
    order = group_lasso_order(C, b, groups, costs)
    assert sorted(order.tolist()) == list(range(len(groups)))
    whitened = [np.sqrt(naive.criterion("cs-g-omp", C, b, groups, [], g)) / costs[g]
                for g in range(len(groups))]
    assert order[0] == int(np.argmax(whitened))


def test_model_with_group_lasso_sequence():
    X, y, _, _, groups, costs = _problem(2)
    model = AnytimeLinearModel(groups=groups, costs=costs, method="group-lasso").fit(X, y)
    assert sorted(model.sequence_.tolist()) == list(range(len(groups)))
    assert np.all(np.diff(model.objective_path_) >= -1e-12)
