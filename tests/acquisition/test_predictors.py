"""set_predictor: rows whose uncomputed features are NaN answered by the model for each
row's own computed set, the same numbers as asking the model per set."""

import numpy as np
import pytest

from algorithms.acquisition import set_predictor
from algorithms.per_set import PerSetChoice

GROUPS = [[0, 1], [2], [3, 4]]


def _data(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    score = 2.0 * X[:, 0] * X[:, 1] + X[:, 2] - X[:, 3]
    return X, score + 0.3 * rng.normal(size=n)


@pytest.fixture(scope="module")
def models():
    X, y = _data(500, 0)
    Xv, yv = _data(250, 1)
    params = {"n_estimators": 20, "max_depth": 3, "learning_rate": 0.3, "random_state": 0}
    regressor = PerSetChoice(groups=GROUPS, gbfs_params=params, specialist_sets=[[0]])
    classifier = PerSetChoice(groups=GROUPS, gbfs_params=params, task="classification")
    return (regressor.fit(X, y, X_val=Xv, y_val=yv),
            classifier.fit(X, y > 0, X_val=Xv, y_val=yv > 0))


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_each_row_is_answered_for_its_own_set(models, task):
    model = models[0] if task == "regression" else models[1]
    X, _ = _data(40, 2)
    sets = [(), (0,), (1, 2), (0, 1, 2), (0,)] * 8
    Z = np.full_like(X, np.nan)
    for i, S in enumerate(sets):
        features = [f for g in S for f in GROUPS[g]]
        Z[i, features] = X[i, features]
    got = set_predictor(model, GROUPS, task)(Z)
    assert got.shape == (X.shape[0],)
    for i, S in enumerate(sets):
        row = np.nan_to_num(Z[i:i + 1], nan=0.0)
        want = model.predict(row, computed_groups=list(S)) if task == "regression" else \
            model.predict_proba(row, computed_groups=list(S))[:, 1]
        np.testing.assert_allclose(got[i], want[0], rtol=1e-12, atol=1e-12)
    # the specialist's set is answered by the specialist, not by a masked half
    if task == "regression":
        assert model.choice([0]) == "specialist"
        rows = [i for i, S in enumerate(sets) if S == (0,)]
        spec = model.specialists_[(0,)]
        np.testing.assert_allclose(got[rows], spec.decision_function(
            np.nan_to_num(Z[rows], nan=0.0)), rtol=1e-12)
