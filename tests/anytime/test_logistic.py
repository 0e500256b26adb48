"""The logistic classification answer of the anytime model: Newton refits on exactly the
computed set, against scikit-learn's LogisticRegression on the same standardized columns."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from algorithms.anytime import AnytimeLinearModel
from algorithms.anytime.logistic import logistic_refit
from algorithms.registry import model_from_bytes

GROUPS = [[0, 1], [2, 3, 4], [5]]


def _data(n=300, seed=0, separable=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6)) * [1.0, 2.0, 3.0, 1.0, 0.5, 5.0] + [0, 1, 0, 2, 0, -3]
    noise = 0.0 if separable else rng.normal(size=n)
    y = np.where(X[:, 0] + 0.3 * X[:, 2] - 0.2 * X[:, 5] + noise > 0, 1.0, -1.0)
    return X, y


def _sklearn(Z, y, lam):
    fit = LogisticRegression(C=1.0 / (lam * len(y)), tol=1e-12, max_iter=100_000).fit(Z, y)
    return fit.coef_[0], fit.intercept_[0]


@pytest.mark.parametrize(("lam", "separable"), [(1e-4, False), (1e-2, False), (1e-3, True)])
def test_newton_matches_scikit_learn(lam, separable):
    X, y = _data(separable=separable)
    Z = (X - X.mean(0)) / X.std(0)
    w, b = logistic_refit(Z, y, lam)
    ref_w, ref_b = _sklearn(Z, y, lam)
    np.testing.assert_allclose(w, ref_w, rtol=1e-5, atol=1e-6)
    assert b == pytest.approx(ref_b, abs=1e-6)
    # the gradient of the objective vanishes at the answer
    p = 1.0 / (1.0 + np.exp(-(Z @ w + b)))
    t = (y > 0).astype(float)
    assert np.max(np.abs(Z.T @ (p - t) / len(y) + lam * w)) < 1e-9
    assert abs(np.mean(p - t)) < 1e-9


def test_no_features_is_the_base_rate_and_no_rows_are_refused():
    _, y = _data()
    w, b = logistic_refit(np.zeros((len(y), 0)), y, 1e-4)
    rate = np.mean(y > 0)
    assert w.shape == (0,) and b == pytest.approx(np.log(rate / (1 - rate)), abs=1e-12)
    with pytest.raises(ValueError, match="rows"):
        logistic_refit(np.zeros((0, 2)), np.zeros(0), 1e-4)


def test_the_model_answers_each_set_with_its_refit():
    X, y = _data(400, seed=1)
    model = AnytimeLinearModel(groups=GROUPS, classification_answer="logistic",
                               logistic_alpha=1e-3).fit(X[:300], y[:300])
    ridge = AnytimeLinearModel(groups=GROUPS).fit(X[:300], y[:300])
    np.testing.assert_array_equal(model.sequence_, ridge.sequence_)     # the same sequence
    np.testing.assert_array_equal(model.coef_path_, ridge.coef_path_)
    mean, scale = X[:300].mean(0), X[:300].std(0)
    for S in ([0], [1, 2], [0, 1, 2]):
        idx = np.concatenate([GROUPS[g] for g in S])
        coef, intercept = model.logistic_for_groups(S)
        ref_w, ref_b = _sklearn((X[:300, idx] - mean[idx]) / scale[idx], y[:300], 1e-3)
        np.testing.assert_allclose(coef[idx] * scale[idx], ref_w, rtol=1e-5, atol=1e-6)
        assert intercept + coef[idx] @ mean[idx] == pytest.approx(ref_b, abs=1e-6)
        assert not np.any(np.delete(coef, idx))
        np.testing.assert_array_equal(model.decision_function(X[300:], computed_groups=S),
                                      X[300:] @ coef + intercept)
        assert model.answer_coef(S)[0] is coef      # cached per set
    everything = sorted(int(g) for g in model.sequence_)
    np.testing.assert_array_equal(model.decision_function(X[300:]),
                                  model.decision_function(X[300:], computed_groups=everything))
    j = model.prefix_length(2.0)
    np.testing.assert_array_equal(
        model.decision_function(X[300:], max_cost=2.0),
        model.decision_function(X[300:], computed_groups=model.sequence_[:j].tolist()))
    # the regression answer is the ridge's, as before the option
    regression = AnytimeLinearModel(groups=GROUPS, classification_answer="regression").fit(
        X[:300], y[:300])
    np.testing.assert_array_equal(regression.predict(X, computed_groups=[0, 2]),
                                  ridge.predict(X, computed_groups=[0, 2]))
    assert not hasattr(regression, "decision_function")  # a regressor has none


def test_rows_are_a_seeded_sample_and_states_round_trip():
    X, y = _data(500, seed=2)
    model = AnytimeLinearModel(groups=GROUPS, classification_answer="logistic",
                               logistic_rows=120).fit(X, y)
    again = AnytimeLinearModel(groups=GROUPS, classification_answer="logistic",
                               logistic_rows=120).fit(X, y)
    assert model.logistic_X_.shape == (120, 6)
    np.testing.assert_array_equal(model.logistic_X_, again.logistic_X_)
    assert set(map(tuple, model.logistic_X_)) <= set(map(tuple, X))
    loaded = model_from_bytes(model.to_bytes())
    assert loaded.state_dict()["format_version"] == 2
    for S in ([], [1], [0, 2]):
        np.testing.assert_array_equal(loaded.decision_function(X, computed_groups=S),
                                      model.decision_function(X, computed_groups=S))
    # a model without the option is written as before it (format 1) and answers the same
    plain = AnytimeLinearModel(groups=GROUPS).fit(X, y)
    state = plain.state_dict()
    assert state["format_version"] == 1 and "classification_answer" not in state
    assert AnytimeLinearModel.from_state_dict(state).classification_answer is None
    bad = model.state_dict()
    bad["logistic_y"] = np.zeros_like(bad["logistic_y"])
    with pytest.raises(ValueError, match="labels"):
        AnytimeLinearModel.from_state_dict(bad)


@pytest.mark.parametrize(("name", "value"), [("classification_answer", "probit"),
                                             ("logistic_alpha", 0.0),
                                             ("logistic_alpha", float("inf")),
                                             ("logistic_rows", 0), ("logistic_rows", True)])
def test_bad_options_are_named(name, value):
    X, y = _data(50)
    with pytest.raises(ValueError, match=name):
        AnytimeLinearModel(groups=GROUPS, **{name: value}).fit(X, y)


def test_statistics_alone_cannot_answer_logistically():
    from algorithms.anytime import SufficientStatistics

    X, y = _data(50)
    stats = SufficientStatistics.from_data(X, y)
    model = AnytimeLinearModel(groups=GROUPS, classification_answer="logistic")
    with pytest.raises(ValueError, match="training rows"):
        model.fit_statistics(stats)
    with pytest.raises(ValueError, match="rows"):
        model.fit_statistics(stats, rows=(X[:, :3], y))
    with pytest.raises(ValueError, match="no rows"):
        AnytimeLinearModel(groups=GROUPS).fit(X, y).logistic_for_groups([0])
