"""A batch model's params may use a renamed parameter's old name (stored specs keep working)
or the new one; the estimator gets the new name, without a warning per retrain."""

from __future__ import annotations

import warnings

import pytest

from service.batch.spec import BatchLayout, split_params
from service.batch.worker.fit import build_estimator, check_estimator
from service.errors import InputError
from service.schemas import ModelCreate

GROUPS = [{"name": "a", "features": ["a1", "a2"], "cost": 1.0},
          {"name": "b", "features": ["b1"], "cost": 2.0}]


def spec(algorithm: str, **params) -> ModelCreate:
    return ModelCreate(name="m", algorithm=algorithm, groups=GROUPS, params=params)


@pytest.mark.parametrize(("algorithm", "old", "new", "value"), [
    ("gbfs", {"mu": 2.0}, "feature_penalty", 2.0),
    ("cs-g-omp", {"budget": 3.0}, "max_cost", 3.0),
    ("nvsd", {"mu": 0.3, "regularizer": "en"}, "l1_ratio", 0.3),
    ("nvsd", {"estimator": "plain", "mu": 0.3, "regularizer": "en"}, "l1_ratio", 0.3),
    ("nvsd", {"mus": [0.5], "regularizer": "en"}, "l1_ratios", [0.5]),
])
def test_old_and_new_names_build_the_same_estimator(algorithm, old, new, value):
    renamed = {k: v for k, v in old.items() if k not in ("mu", "mus", "budget")}
    renamed[new] = value
    built = []
    for params in (old, renamed):
        model = spec(algorithm, **params)
        layout, batch_params = BatchLayout(model), split_params(model)
        with warnings.catch_warnings():
            warnings.simplefilter("error")   # no DeprecationWarning at each retrain
            check_estimator(model.family, algorithm, model.task, layout, batch_params)
            estimator = build_estimator(model.family, algorithm, model.task, layout,
                                        batch_params)
        built.append(repr(sorted(estimator.get_params().items())))   # (arrays: as text)
        assert estimator.get_params()[new] == value
    assert built[0] == built[1]


def test_both_names_at_once_are_refused():
    with pytest.raises(InputError):
        split_params(spec("gbfs", mu=1.0, feature_penalty=2.0))


def test_unknown_parameters_list_the_current_names_only():
    with pytest.raises(InputError) as caught:
        split_params(spec("gbfs", nope=1))
    message = str(caught.value.errors) + str(caught.value)
    assert "feature_penalty" in message and "'mu'" not in message
