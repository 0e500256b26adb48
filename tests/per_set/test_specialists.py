"""Specialists: the linear fits equal scikit-learn's Ridge / LogisticRegression on
standardized columns; a specialist answers a set only when its held-out figure beats both
halves' (brute force over the candidates), answers with the refit on exactly S, and states
with specialists round-trip bit for bit while states without them stay format 1."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.preprocessing import StandardScaler

from algorithms.per_set import PerSetChoice
from algorithms.per_set.choice import TIE_TOLERANCE
from algorithms.per_set.specialists import RIDGE_ALPHAS, clean_sets, logistic_fit, ridge_fit
from algorithms.registry import model_from_bytes

GROUPS = [[0, 1], [2, 3], [4, 5]]
GBFS_PARAMS = {"n_estimators": 30, "max_depth": 3, "learning_rate": 0.3, "random_state": 0}
PINNED = [[0], [0, 1], [2]]


def data(n, seed):
    """Group 0 holds a product (trees see it, a linear model on every group does not), group
    1 a linear term, group 2 noise."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    X[:, 3] *= 50.0   # a column on another scale: standardization matters
    y = 2.0 * X[:, 0] * X[:, 1] + X[:, 2] + 0.02 * X[:, 3] + 0.3 * rng.normal(size=n)
    return X, y


@pytest.fixture(scope="module")
def fitted():
    X, y = data(600, 0)
    Xv, yv = data(300, 1)
    model = PerSetChoice(groups=GROUPS, gbfs_params=GBFS_PARAMS, specialist_sets=PINNED)
    return model.fit(X, y, X_val=Xv, y_val=yv), X, y, Xv


def test_ridge_equals_sklearn():
    X, y = data(200, 2)
    coef, intercept = ridge_fit(X, y, alpha=1.0)
    scaler = StandardScaler().fit(X)
    ref = Ridge(alpha=1.0).fit(scaler.transform(X), y)
    np.testing.assert_allclose(X @ coef + intercept, ref.predict(scaler.transform(X)),
                               rtol=1e-9, atol=1e-9)


def test_logistic_equals_sklearn():
    X, y = data(300, 3)
    labels = np.where(y + 0.5 * X[:, 4] > 0, 1.0, -1.0)
    coef, intercept = logistic_fit(X, labels, C=1.0)
    scaler = StandardScaler().fit(X)
    ref = LogisticRegression(C=1.0, tol=1e-12, max_iter=10_000).fit(
        scaler.transform(X), labels)
    np.testing.assert_allclose(X @ coef + intercept,
                               ref.decision_function(scaler.transform(X)),
                               rtol=1e-5, atol=1e-5)


def test_specialist_answers_only_when_it_wins(fitted):
    model, _, _, Xv = fitted
    assert set(model.specialists_) == {(0,), (0, 1), (2,)}
    answered = set()
    for S in [(), (0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]:
        halves = [model.anytime_figures_.figure(S), model.gbfs_figures_.figure(S)]
        best_half = "gbfs" if halves[1] > halves[0] + TIE_TOLERANCE and \
            _beyond_one_se(model, S, "anytime", "gbfs") else "anytime"
        expected = best_half
        if S in model.specialists_:
            own = model.specialist_figures_.figure(S)
            assert model.figures(S)["specialist_figure"] == own
            trees_over_linear = best_half == "anytime" and \
                model.specialists_[S].kind == "gbfs"
            if own > halves[best_half == "gbfs"] + TIE_TOLERANCE and \
                    (not trees_over_linear or _beyond_one_se(model, S, best_half)):
                expected = "specialist"
        else:
            assert "specialist_figure" not in model.figures(S)
        assert model.choice(S) == expected, S
        answered.add(expected)
        if expected == "specialist":
            np.testing.assert_array_equal(model.predict(Xv, computed_groups=S),
                                          model.specialists_[S].decision_function(Xv))
    # the product of group 0 alone: the masked trees and the ridge on all groups trail a
    # model trained on exactly group 0; the noise group's specialist wins nothing
    assert model.choice((0,)) == "specialist"
    assert model.choice((2,)) != "specialist" or \
        model.specialist_figures_.figure((2,)) > max(model.anytime_figures_.figure((2,)),
                                                     model.gbfs_figures_.figure((2,)))
    assert "specialist" in answered


def _squared_errors(model, half, S):
    """Plain numpy: each validation row's squared error over Var(y) for ``half``'s answer."""
    scores = model.half_figures(half).validation_scores(S)
    return (scores - model.y_val_) ** 2 / np.var(model.y_val_)


def _beyond_one_se(model, S, half, challenger="specialist"):
    """The one-standard-error rule in plain numpy: ``challenger``'s mean paired gain over
    ``half`` exceeds the standard error of that mean."""
    diff = _squared_errors(model, half, S) - _squared_errors(model, challenger, S)
    return diff.mean() > diff.std(ddof=1) / np.sqrt(diff.size)


def test_a_specialist_must_win_by_more_than_its_noise():
    """On 60 held-out rows trees whose figure is only a little better than a linear
    answer's do not answer with the default margin, and do with margin 0 (the plain
    comparison); a state written without a margin (before it existed) loads with 0."""
    from algorithms.serialization import dumps_state

    X, y = data(600, 0)
    Xv, yv = data(60, 2)
    model = PerSetChoice(groups=GROUPS, gbfs_params=GBFS_PARAMS, specialist_sets=PINNED)
    model.fit(X, y, X_val=Xv, y_val=yv)
    plain = PerSetChoice(groups=GROUPS, gbfs_params=GBFS_PARAMS, specialist_sets=PINNED,
                         choice_margin=0.0).fit(X, y, X_val=Xv, y_val=yv)
    held_back = 0
    for S in model.specialists_:
        for fitted, margin in ((model, 1.0), (plain, 0.0)):
            halves = [fitted.anytime_figures_.figure(S), fitted.gbfs_figures_.figure(S)]
            best_half = "gbfs" if halves[1] > halves[0] + TIE_TOLERANCE and (
                margin == 0 or _beyond_one_se(fitted, S, "anytime", "gbfs")) else "anytime"
            better = fitted.specialist_figures_.figure(S) > \
                halves[best_half == "gbfs"] + TIE_TOLERANCE
            plain_rule = margin == 0 or best_half == "gbfs" or \
                fitted.specialists_[S].kind != "gbfs"
            wins = better and (plain_rule or _beyond_one_se(fitted, S, best_half))
            assert fitted.choice(S) == ("specialist" if wins else best_half), (S, margin)
            held_back += better and not wins
    state = model.state_dict()
    assert state["choice_margin"] == 1.0
    del state["choice_margin"]
    old = model_from_bytes(dumps_state(state))
    assert old.choice_margin == 0.0
    for S in model.specialists_:   # the same specialists, chosen by the plain comparison
        halves = [old.anytime_figures_.figure(S), old.gbfs_figures_.figure(S)]
        better = old.specialist_figures_.figure(S) > max(halves) + TIE_TOLERANCE
        assert (old.choice(S) == "specialist") == better, S
    with pytest.raises(ValueError, match="choice_margin"):
        PerSetChoice(groups=GROUPS, choice_margin=-1.0).check_params(6)
    for S in [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]:   # and the GBFS half
        if model.gbfs_figures_.figure(S) > model.anytime_figures_.figure(S) + TIE_TOLERANCE:
            held_back += not _beyond_one_se(model, S, "anytime", "gbfs")
    assert held_back   # the margin held some trees back on these 60 rows


def test_linear_specialist_is_the_refit_on_exactly_the_set(fitted):
    model, X, y, Xv = fitted
    for S, specialist in model.specialists_.items():
        cols = np.concatenate([GROUPS[g] for g in S])
        figures = []
        for alpha in RIDGE_ALPHAS:   # the penalty is the held-out best of the grid
            coef, intercept = ridge_fit(X[:, cols], y, alpha=alpha)
            figures.append(1.0 - np.mean((Xv[:, cols] @ coef + intercept - model.y_val_) ** 2)
                           / np.var(model.y_val_))
        assert specialist.figure >= max(figures) - 1e-9
        if specialist.kind == "linear":
            assert specialist.penalty == RIDGE_ALPHAS[int(np.argmax(figures))]
            coef, intercept = ridge_fit(X[:, cols], y, alpha=specialist.penalty)
            np.testing.assert_allclose(specialist.decision_function(Xv),
                                       Xv[:, cols] @ coef + intercept, rtol=1e-10,
                                       atol=1e-10)


def test_state_round_trip_with_specialists(fitted):
    from algorithms.serialization import dumps_state

    model, _, _, Xv = fitted
    state = model.state_dict()
    assert state["format_version"] == 2
    loaded = model_from_bytes(dumps_state(state))
    assert loaded.sequence_half_ == model.sequence_half_
    for S in [(0,), (0, 1), (2,), (1, 2), None]:
        np.testing.assert_array_equal(loaded.predict(Xv, computed_groups=S),
                                      model.predict(Xv, computed_groups=S))
        assert loaded.choice(S) == model.choice(S)


def test_without_specialists_the_state_is_as_before():
    X, y = data(200, 4)
    model = PerSetChoice(groups=GROUPS, gbfs_params={**GBFS_PARAMS, "n_estimators": 5})
    state = model.fit(X, y).state_dict()
    assert state["format_version"] == 1
    assert not [k for k in state if k.startswith("specialist")]
    assert model.specialists_ == {}
    assert "specialist" not in model.sequence_half_


def test_classification_specialist_logits_are_calibrated():
    X, _ = data(500, 5)
    Xv, _ = data(200, 6)
    # a GBFS half that pays too much for any group (the specialists never pay) answers a
    # constant, so the specialist must win the set of the product
    model = PerSetChoice(groups=GROUPS, task="classification",
                         gbfs_params={**GBFS_PARAMS, "feature_penalty": 1e6},
                         specialist_sets=[[0]], max_specialists=1)
    model.fit(X, np.where(X[:, 0] * X[:, 1] > 0, "yes", "no"), X_val=Xv,
              y_val=np.where(Xv[:, 0] * Xv[:, 1] > 0, "yes", "no"))
    assert model.choice((0,)) == "specialist"
    raw = model.specialists_[(0,)].decision_function(Xv)
    a, b = model.specialist_figures_.figures((0,)).platt_a, \
        model.specialist_figures_.figures((0,)).platt_b
    np.testing.assert_allclose(model.decision_function(Xv, computed_groups=[0]),
                               a * raw + b, rtol=1e-12)


def test_clean_sets_and_bad_params():
    assert clean_sets([[1, 0], [0, 1], [], [2]], 3, 8) == [(0, 1), (2,)]
    assert clean_sets([[0], [1], [2]], 3, 2) == [(0,), (1,)]
    with pytest.raises(ValueError, match="group id"):
        clean_sets([[0, 3]], 3, 8)
    with pytest.raises(ValueError, match="lists"):
        clean_sets(["ab"], 3, 8)
    with pytest.raises(ValueError, match="max_specialists"):
        PerSetChoice(groups=GROUPS, max_specialists=-1).check_params(6)


def test_tree_specialist_is_gbfs_on_the_set_early_stopped_on_the_held_out_rows():
    """A tree specialist is GBFS on exactly S's columns (no masking, no penalty, second-order
    gains, learning rate 0.05, each tree on 70 % of the rows) whose trees were chosen by
    early stopping on the held-out rows, the protocol of a practitioner's per-set booster."""
    from algorithms.gbfs import GBFS
    from algorithms.per_set.specialists import fit_specialist

    X, y = data(600, 4)
    Xv, yv = data(300, 5)
    groups = [np.asarray(g) for g in GROUPS]
    params = {"max_depth": 3, "random_state": 0}
    specialist = fit_specialist(X, y, Xv, yv, groups, np.ones(3), (0,), "regression", params)
    assert specialist.kind == "gbfs"   # the product of group 0: trees beat every ridge
    reference = GBFS(loss="squared", feature_groups=[[0, 1]], group_costs=np.ones(1),
                     masked_copies=0, feature_penalty=0.0, unmasked_trees=False,
                     split_gain="newton", learning_rate=0.05, n_estimators=5000,
                     early_stopping_rounds=50, subsample=0.7,
                     **params).fit(X[:, :2], y, X_val=Xv[:, :2],
                                                              y_val=yv)
    np.testing.assert_allclose(specialist.decision_function(Xv),
                               reference.decision_function(Xv[:, :2]), rtol=1e-12, atol=1e-12)
    assert specialist.trees.n_estimators == 5000


def test_classification_halves_answer_with_a_logistic_refit_and_newton_trees():
    X, y = data(500, 6)
    labels = np.where(y > 0, 1, -1)
    Xv, yv = data(250, 7)
    model = PerSetChoice(groups=GROUPS, task="classification",
                         gbfs_params={"n_estimators": 20, "random_state": 0})
    model.fit(X, labels, X_val=Xv, y_val=np.where(yv > 0, 1, -1))
    assert model.anytime_.classification_answer == "logistic"
    assert model.gbfs_.split_gain == "newton"
    for S in [(0,), (1, 2), (0, 1, 2)]:
        coef, intercept = model.anytime_.logistic_for_groups(S)
        np.testing.assert_array_equal(model._score_anytime(Xv, S), Xv @ coef + intercept)
    # the defaults give way to what the user says
    plain = PerSetChoice(groups=GROUPS, task="classification",
                         anytime_params={"classification_answer": "regression"},
                         gbfs_params={"split_gain": "gradient"})
    assert plain._anytime(6).classification_answer == "regression"
    assert plain._gbfs(6).split_gain == "gradient"


def test_the_margin_compares_cross_fitted_tree_losses():
    """With a margin, the trees' held-out losses come from two refits, each early-stopped on
    one half of the held-out rows (a permutation seeded 0) and scoring the other; the kept
    trees are the fit on all of them. Trees on a product still win; on a linear target the
    ridge is kept."""
    from algorithms.gbfs import GBFS
    from algorithms.per_set.specialists import _cross_fitted_scores, fit_specialist

    X, y = data(600, 4)
    Xv, yv = data(300, 5)
    params = {"max_depth": 3, "random_state": 0, "subsample": 0.7, "learning_rate": 0.05,
              "n_estimators": 5000, "early_stopping_rounds": 50}
    trees = GBFS(loss="squared", feature_groups=[[0, 1]], group_costs=np.ones(1), **params)
    trees.fit(X[:, :2], y, X_val=Xv[:, :2], y_val=yv)
    order = np.random.default_rng(0).permutation(300)
    expected = np.empty(300)
    for stop_on, score_on in ((order[:150], order[150:]), (order[150:], order[:150])):
        half = GBFS(loss="squared", feature_groups=[[0, 1]], group_costs=np.ones(1), **params)
        half.fit(X[:, :2], y, X_val=Xv[stop_on, :2], y_val=yv[stop_on])
        expected[score_on] = half.decision_function(Xv[score_on, :2])
    np.testing.assert_allclose(_cross_fitted_scores(trees, X[:, :2], y, Xv[:, :2], yv),
                               expected, rtol=1e-12, atol=1e-12)
    groups = [np.asarray(g) for g in GROUPS]
    product = fit_specialist(X, y, Xv, yv, groups, np.ones(3), (0,), "regression",
                             {"max_depth": 3}, margin=1.0)
    assert product.kind == "gbfs"
    linear_y, linear_yv = X[:, 2] + 0.1 * X[:, 4], Xv[:, 2] + 0.1 * Xv[:, 4]
    line = fit_specialist(X, linear_y, Xv, linear_yv, groups, np.ones(3), (1, 2),
                          "regression", {"max_depth": 3}, margin=1.0)
    assert line.kind == "linear"
