"""Every model is a scikit-learn estimator, measured by scikit-learn's own check suite
(``parametrize_with_checks``), and works in its everyday tools: ``clone``,
``cross_val_score``, ``GridSearchCV``, ``Pipeline``, on a bundled data set with 0/1 labels.

The models in the check suite are small (few trees, few ADMM iterations): scikit-learn's
checks fit each one some fifty times. A check a model cannot pass is in
``expected_failed_checks`` with the reason (docs/algorithms.md lists them too); the suite
is strict, so one that starts passing fails until it is taken off the list. Without
scikit-learn the file is skipped (the models then use the stand-ins of
``algorithms.estimator``, whose behaviour ``test_the_package_works_without_sklearn``
checks with scikit-learn hidden)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn", minversion="1.8")   # parametrize_with_checks(xfail_strict=)

from sklearn.base import clone, is_classifier, is_regressor  # noqa: E402
from sklearn.datasets import load_breast_cancer  # noqa: E402
from sklearn.model_selection import GridSearchCV, cross_val_score  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from algorithms.anytime import METHODS, AnytimeLinearModel  # noqa: E402
from algorithms.estimator import HAVE_SKLEARN  # noqa: E402
from algorithms.gbfs import GBFS  # noqa: E402
from algorithms.nvsd import NVSD, RelaxedNVSD  # noqa: E402
from algorithms.online import AROW, FOFS, OGD, PET, SOFS, OnlineLearner  # noqa: E402
from algorithms.per_set import PerSetChoice  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SMALL_GBFS = {"n_estimators": 10, "max_depth": 2}
SMALL_NVSD = {"kernel": "gaussian", "solver": "inexact"}

ESTIMATORS = [
    PET(), FOFS(), SOFS(), OGD(), AROW(),
    *(AnytimeLinearModel(method=method) for method in METHODS
      if method != "group-lasso" or importlib.util.find_spec("celer") is not None),
    GBFS(**SMALL_GBFS), GBFS(loss="squared", **SMALL_GBFS),
    NVSD(max_iter=5, **SMALL_NVSD),
    RelaxedNVSD(nus=(1e-2,), n_taus=2, alphas=(1e-3,), max_iter=10, **SMALL_NVSD),
    PerSetChoice(gbfs_params={"n_estimators": 5, "max_depth": 2}),
    PerSetChoice(task="classification", gbfs_params={"n_estimators": 5, "max_depth": 2}),
]

ONLINE_INIT = (
    "given n_features, an online learner's constructor checks its arguments and allocates "
    "its state at once (the service creates a model by constructing its learner: one that "
    "could not run is never built); without n_features it only stores them")
PREDICT_ONE_ROW = ("predict takes a 1-D array as one row (a documented fast path for one "
                   "request), where scikit-learn wants a ValueError")
DECISION_FUNCTION = ("decision_function is the raw score the service answers computed sets "
                     "with, for the regression variant too")


def expected_failed_checks(estimator) -> dict[str, str]:
    """The checks ``estimator`` cannot pass, with the reason."""
    if isinstance(estimator, OnlineLearner):
        return {"check_do_not_raise_errors_in_init_or_set_params": ONLINE_INIT}
    if isinstance(estimator, AnytimeLinearModel):
        return {"check_fit2d_predict1d": PREDICT_ONE_ROW}
    if isinstance(estimator, GBFS) and estimator.loss == "squared" or \
            isinstance(estimator, PerSetChoice) and estimator.task == "regression":
        return {"check_regressors_no_decision_function": DECISION_FUNCTION}
    return {}


def test_scikit_learn_is_the_base():
    assert HAVE_SKLEARN
    from sklearn.base import BaseEstimator

    for estimator in ESTIMATORS:
        assert isinstance(estimator, BaseEstimator)
        assert is_classifier(estimator) != is_regressor(estimator)
    assert len(expected_failed_checks(PET())) <= 3


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failed_checks,
                         xfail_strict=True)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


# ----------------------------------------------------------------- the everyday tools
@pytest.fixture(scope="module")
def cancer():
    """scikit-learn's bundled breast cancer data: 569 rows, 30 features, labels 0 / 1."""
    X, y = load_breast_cancer(return_X_y=True)
    return X, y


@pytest.mark.parametrize("learner", [PET(update_on="hinge"), FOFS(), SOFS(), OGD(), AROW()],
                         ids=lambda learner: type(learner).__name__)
def test_cross_val_score_of_a_pipeline_with_0_1_labels(cancer, learner):
    X, y = cancer
    scores = cross_val_score(make_pipeline(StandardScaler(), clone(learner).set_params(
        budget=20) if learner.selects else learner), X, y, cv=4)
    assert scores.shape == (4,) and scores.mean() > 0.9


def test_grid_search_over_budget(cancer):
    X, y = cancer
    search = GridSearchCV(make_pipeline(StandardScaler(), SOFS()),
                          {"sofs__budget": [3, 10, 30]}, cv=3).fit(X, y)
    assert search.best_params_ == {"sofs__budget": 30}   # SOFS needs many of the 30 here
    assert search.best_score_ > 0.95
    best = search.best_estimator_[-1]
    assert len(best.selected_features()) <= best.budget
    assert best.classes_.tolist() == [0, 1] and best.n_features_in_ == 30
    assert set(search.predict(X).tolist()) == {0, 1}


def test_pipeline_scaler_then_sofs(cancer):
    X, y = cancer
    pipeline = make_pipeline(StandardScaler(), SOFS()).fit(X, y)
    assert pipeline.score(X, y) > 0.95
    small = make_pipeline(StandardScaler(), SOFS(budget=5)).fit(X, y)
    assert len(small[-1].selected_features()) <= 5
    assert small.predict(X).dtype == y.dtype


def test_clone_is_an_unfitted_copy(cancer):
    X, y = cancer
    for model in (SOFS(budget=5, r=0.5), GBFS(**SMALL_GBFS), AnytimeLinearModel(alpha=1e-3)):
        fitted = clone(model).fit(X, y)
        copy = clone(fitted)
        assert copy.get_params() == model.get_params()
        assert not hasattr(copy, "n_features_in_") and hasattr(fitted, "n_features_in_")


def test_batch_models_in_cross_val_score_and_grid_search(cancer):
    X, y = cancer
    assert cross_val_score(GBFS(**SMALL_GBFS), X, y, cv=3).mean() > 0.9
    regression = cross_val_score(AnytimeLinearModel(), X, y.astype(float), cv=3)
    assert regression.mean() > 0.5
    search = GridSearchCV(AnytimeLinearModel(), {"max_cost": [2.0, 30.0]}, cv=3).fit(X, y)
    assert search.best_params_ == {"max_cost": 30.0}


# --------------------------------------------------------------- labels and the service
def test_any_two_labels_strings_too(cancer):
    X, y = cancer
    words = np.where(y == 1, "benign", "malignant")
    for model in (make_pipeline(StandardScaler(), SOFS(budget=25)), GBFS(**SMALL_GBFS)):
        model.fit(X, words)
        assert model.classes_.tolist() == ["benign", "malignant"]
        assert set(model.predict(X).tolist()) <= {"benign", "malignant"}
        assert model.score(X, words) > 0.9
    gbfs = GBFS(**SMALL_GBFS).fit(X, words)   # string classes survive the state
    again = GBFS.from_bytes(gbfs.to_bytes())
    np.testing.assert_array_equal(again.predict(X), gbfs.predict(X))


def test_partial_fit_with_classes_matches_fit(cancer):
    X, y = cancer
    X = StandardScaler().fit_transform(X)
    whole = SOFS(budget=10).fit(X, y)
    parts = SOFS(budget=10)
    for start in range(0, len(y), 100):
        parts.partial_fit(X[start:start + 100], y[start:start + 100], classes=[0, 1])
    np.testing.assert_array_equal(parts.decision_function(X), whole.decision_function(X))
    assert whole.n_examples_ == len(y) and whole.n_features_in_ == 30


def test_a_learner_given_n_features_is_built_by_its_constructor():
    """The service's call: n_features and budget given, -1 / +1 labels, state as before."""
    learner = SOFS(n_features=50, budget=4, r=2)
    assert learner.n_features_in_ == 50 and learner.n_examples_ == 0
    np.testing.assert_array_equal(learner.decision_function(np.eye(3, 50)), np.zeros(3))
    narrow = np.zeros((2, 7))   # narrower X: the same examples in the larger space
    narrow[0, 3] = narrow[1, 1] = 1.0
    scores = learner.progressive_fit(narrow, np.array([1, -1], dtype=np.int8))
    np.testing.assert_array_equal(scores, [0.0, 0.0])
    assert learner.predict(np.eye(1, 50, 3)).tolist() == [1]
    assert learner.state_dict()["params"] == {"n_features": 50, "budget": 4, "r": 2.0}
    with pytest.raises(ValueError, match="r must"):
        SOFS(n_features=50, budget=4, r=-1)
    with pytest.raises(ValueError, match="budget"):
        SOFS(n_features=50, budget=None)
    shaped = SOFS(budget=4).fit(np.eye(7), [0, 1] * 3 + [0])
    with pytest.raises(ValueError, match="X has 6 features, but SOFS is expecting 7"):
        shaped.decision_function(np.eye(6))


def test_set_params_keeps_or_rebuilds_the_state():
    X = np.eye(6)
    y = [1, -1, 1, -1, 1, 1]
    learner = OGD(n_features=6).partial_fit(X, y)
    weights = learner.weights()
    learner.set_params(eta=0.5)   # same shape: what was learned stays
    np.testing.assert_array_equal(learner.weights()[1], weights[1])
    assert learner.n_examples_ == 6
    with pytest.raises(ValueError, match="eta"):
        learner.set_params(eta=-1.0)
    assert learner.eta == 0.5
    learner.set_params(n_features=8)   # a new shape: a new state, built at once
    assert learner.n_examples_ == 0 and learner.n_features_in_ == 8


def test_the_package_works_without_sklearn():
    """With scikit-learn hidden the models use the stand-ins: same parameters, same
    answers, score as accuracy / R^2."""
    code = textwrap.dedent("""
        import sys
        sys.modules["sklearn"] = None
        import numpy as np
        from algorithms.estimator import HAVE_SKLEARN
        from algorithms.online import SOFS
        from algorithms.anytime import AnytimeLinearModel
        assert not HAVE_SKLEARN
        X = np.random.default_rng(0).normal(size=(80, 5))
        y = (X[:, 0] + X[:, 1] > 0).astype(int)
        sofs = SOFS(budget=3).set_params(r=0.5).fit(X, y)
        assert sofs.get_params() == {"budget": 3, "n_features": None, "r": 0.5}
        print(round(sofs.score(X, y), 6), sofs.decision_function(X[:2]).tolist())
        linear = AnytimeLinearModel().fit(X, X @ np.arange(5.0))
        print(round(linear.score(X, X @ np.arange(5.0)), 6))
    """)
    hidden = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert hidden.returncode == 0, hidden.stderr
    X = np.random.default_rng(0).normal(size=(80, 5))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    sofs = SOFS(budget=3, r=0.5).fit(X, y)
    linear = AnytimeLinearModel().fit(X, X @ np.arange(5.0))
    expected = (f"{round(sofs.score(X, y), 6)} {sofs.decision_function(X[:2]).tolist()}\n"
                f"{round(linear.score(X, X @ np.arange(5.0)), 6)}\n")
    assert hidden.stdout == expected
