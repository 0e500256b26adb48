"""The notebook path: the ``notebook`` extra names what the adapters import; the online
learners have ``coef_`` (``SelectFromModel`` works) and ``feature_names_in_`` (scikit-learn's
own column-name check passes); the River adapter answers its selection in feature names."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn", minversion="1.8")
pd = pytest.importorskip("pandas")

from sklearn.feature_selection import SelectFromModel  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.utils.estimator_checks import (  # noqa: E402
    check_dataframe_column_names_consistency,
)

from algorithms.online import AROW, FOFS, OGD, PET, SOFS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ADAPTERS = ("algorithms/estimator.py", "algorithms/river.py")
LEARNERS = [PET(), FOFS(), SOFS(), OGD(), AROW()]


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s<>=!~\[;]", requirement, maxsplit=1)[0].lower()


def test_the_notebook_extra_names_what_the_adapters_import_and_nothing_else():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {_requirement_name(r) for r in project["dependencies"]}
    notebook = {_requirement_name(r) for r in project["optional-dependencies"]["notebook"]}
    distributions = importlib.metadata.packages_distributions()
    imported = set()
    for path in ADAPTERS:
        for node in ast.walk(ast.parse((ROOT / path).read_text())):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top not in sys.stdlib_module_names and top != "algorithms":
                    imported |= {d.lower() for d in distributions.get(top, [top])}
    assert imported - core == notebook == {"scikit-learn", "river"}


@pytest.mark.parametrize("learner", LEARNERS, ids=lambda learner: type(learner).__name__)
def test_scikit_learns_column_name_check(learner):
    check_dataframe_column_names_consistency(type(learner).__name__, learner)


def _frame(n: int = 400, d: int = 12):
    X = np.random.default_rng(0).normal(size=(n, d))
    y = np.where(X[:, 2] - X[:, 7] + 0.5 * X[:, 9] > 0, "spam", "ham")
    return pd.DataFrame(X, columns=[f"f{i}" for i in range(d)]), y


def test_coef_is_the_weights_densely_and_select_from_model_reads_it():
    X, y = _frame()
    sofs = SOFS(budget=3).fit(X, y)
    indices, values = sofs.weights()
    assert sofs.coef_.shape == (1, 12) and np.count_nonzero(sofs.coef_) == len(indices) <= 3
    np.testing.assert_array_equal(sofs.coef_[0, indices], values)
    np.testing.assert_allclose(X.to_numpy() @ sofs.coef_[0], sofs.decision_function(X))
    assert not hasattr(SOFS(), "coef_")   # NotFittedError is an AttributeError
    selector = SelectFromModel(SOFS(budget=3), threshold=1e-12).fit(X, y)
    chosen = selector.estimator_.selected_features()
    assert selector.get_support(indices=True).tolist() == chosen.tolist()
    assert selector.get_feature_names_out().tolist() == [f"f{i}" for i in chosen]
    informative = SelectFromModel(FOFS(budget=3), threshold=1e-12).fit(X, y)
    assert informative.get_feature_names_out().tolist() == ["f2", "f7", "f9"]
    pipeline = make_pipeline(SelectFromModel(FOFS(budget=3)), OGD()).fit(X, y)
    assert pipeline.score(X, y) > 0.9


def test_feature_names_in_follow_fit_and_warn_on_arrays():
    X, y = _frame()
    for learner in (SOFS(budget=3), OGD(n_features=12)):
        learner.fit(X, y)
        assert learner.feature_names_in_.tolist() == list(X.columns)
        with pytest.warns(UserWarning, match="X does not have valid feature names"):
            learner.predict(X.to_numpy())
        learner.fit(X.to_numpy(), y)   # a fit without names forgets them
        assert not hasattr(learner, "feature_names_in_")
    scaled = make_pipeline(StandardScaler().set_output(transform="pandas"), FOFS(budget=3))
    assert scaled.fit(X, y)[-1].feature_names_in_.tolist() == list(X.columns)
    with pytest.raises(ValueError, match="Feature names unseen at fit time:\n- g0"):
        scaled.predict(X.rename(columns={"f0": "g0"}))
    stream = SOFS(budget=3).partial_fit(X[:100], y[:100], classes=["ham", "spam"])
    assert stream.feature_names_in_.tolist() == list(X.columns)
    with pytest.raises(ValueError, match="must be in the same order"):
        stream.partial_fit(X[X.columns[::-1]][100:], y[100:])
    assert stream.n_examples_ == 100   # refused before anything was learned


def test_the_river_adapter_answers_in_names():
    pytest.importorskip("river")
    from river import datasets

    from algorithms.river import OnlineClassifier

    model = OnlineClassifier(SOFS(budget=3), hash_bits=12)
    assert model.selected_features() == [] and model.weights == {}
    for x, y in datasets.Phishing().take(500):
        model.learn_one({**x, "browser": "firefox" if y else "chrome"}, y)
    names = model.selected_features()
    known = set(next(iter(datasets.Phishing()))[0]) | {"browser=firefox", "browser=chrome"}
    assert 1 <= len(names) <= 3 and set(names) <= known
    indices, values = model.learner_.weights()
    assert sorted(model.weights.values(), key=abs, reverse=True) == \
        [model.weights[name] for name in names]
    assert sorted(np.abs(values).tolist()) == sorted(abs(w) for w in model.weights.values())
    every = OnlineClassifier(OGD(), hash_bits=12)   # keeps every weight: every name
    for x, y in datasets.Phishing().take(50):
        every.learn_one({**x, "browser": "firefox" if y else "chrome"}, y)
    assert set(every.weights) == known
    assert every.weights["browser=firefox"] > 0 > every.weights["browser=chrome"]
