"""The online learners as River classifiers (``algorithms.river``): River's own
``check_estimator`` on each adapter, and ``evaluate.progressive_val_score`` on River's
bundled Phishing data beside River's LogisticRegression. Skipped without River (an
optional extra: the package itself never imports it)."""

from __future__ import annotations

import doctest
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("river")
pytest.importorskip("sklearn")   # River's check_estimator draws data sets from it

from river import datasets, evaluate, linear_model, metrics, preprocessing  # noqa: E402

try:
    from river.checks import check_estimator
except ImportError:   # River before the checks moved to river.checks
    from river.utils.estimator_checks import check_estimator

import algorithms.river  # noqa: E402
from algorithms.online import AROW, FOFS, OGD, PET, SOFS  # noqa: E402
from algorithms.river import OnlineClassifier  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LEARNERS = [PET(budget=5, update_on="hinge"), FOFS(budget=5), SOFS(budget=5), OGD(), AROW()]


@pytest.mark.parametrize("learner", LEARNERS, ids=lambda learner: type(learner).__name__)
def test_river_check_estimator(learner):
    check_estimator(OnlineClassifier(learner, hash_bits=10))


def accuracy(model) -> float:
    return evaluate.progressive_val_score(datasets.Phishing(), model, metrics.Accuracy()).get()


def test_progressive_val_score_beside_rivers_logistic_regression():
    rivers = accuracy(preprocessing.StandardScaler() | linear_model.LogisticRegression())
    ours = {name: accuracy(preprocessing.StandardScaler() | OnlineClassifier(learner))
            for name, learner in [("arow", AROW()), ("ogd", OGD()), ("fofs", FOFS(budget=5))]}
    assert rivers > 0.88
    assert ours["arow"] > rivers - 0.02 and ours["ogd"] > rivers - 0.02
    assert ours["fofs"] > 0.84   # 5 of the 9 features


def test_the_adapter_trains_its_own_copy_and_keeps_the_budget():
    template = SOFS(budget=2)
    model = OnlineClassifier(template, hash_bits=12)
    for x, y in datasets.Phishing().take(300):
        model.learn_one(x, y)
    assert not hasattr(template, "n_features_in_")   # the template stays unfitted
    assert model.learner_.n_features_in_ == 4096 and model.learner_.n_examples_ == 300
    assert len(model.learner_.selected_features()) <= 2
    x = next(iter(datasets.Phishing()))[0]
    proba = model.predict_proba_one(x)
    assert set(proba) == {False, True} and np.isclose(sum(proba.values()), 1.0)
    assert model.predict_one(x) == (proba[True] >= 0.5)
    assert model.predict_one({**x, "unseen": 1.0, "kind": "text"}) in (False, True)
    with pytest.raises(ValueError, match="True / False"):
        model.learn_one(x, "yes")


def test_the_docstring_example():
    result = doctest.testmod(algorithms.river, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_the_package_imports_without_river():
    code = ("import sys; sys.modules['river'] = None; import algorithms, algorithms.online, "
            "algorithms.gbfs, algorithms.anytime, algorithms.nvsd, algorithms.per_set; "
            "import importlib.util; print(importlib.util.find_spec('algorithms.river') "
            "is not None)")
    hidden = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert hidden.returncode == 0, hidden.stderr
    assert hidden.stdout.strip() == "True"
