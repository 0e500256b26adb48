"""A batch /predict or /next body is parsed once into a BudgetedRequest: every field
checked, the cost cap's alias resolved in one place, the same errors as the routes give."""

from __future__ import annotations

import numpy as np
import pytest

from service.batch.layout import BatchLayout
from service.batch.serving.requests import BudgetedRequest, cost_cap, parse_next, parse_predict
from service.errors import InputError
from service.schemas import ModelSpec

SPEC = ModelSpec(name="m", algorithm="cs-g-omp", task="regression", groups=[
    {"name": "a", "features": ["a1", "a2"], "cost": 1.0},
    {"name": "b", "features": ["b1"], "cost": 2.0},
    {"name": "c", "features": ["c1"], "cost": 0.5}])
LAYOUT = BatchLayout(SPEC)
ROWS = [{"features": {"a": {"a1": 1.0}, "c": {"c1": 2.0}}},
        {"indices": [2], "values": [3.0]}]


def _field(call) -> str:
    with pytest.raises(InputError) as caught:
        call()
    (error,) = caught.value.errors
    return error["field"]


def test_predict_reads_each_selection():
    plain = parse_predict(LAYOUT, "regression", {"examples": ROWS})
    assert (plain.computed, plain.cap, plain.exchange_rate) == (None, None, None)
    assert plain.present.tolist() == [[True, False, True], [False, True, False]]
    assert plain.example_sets(lambda cap: pytest.fail("no cap")) == [[0, 2], [1]]
    assert plain.batch.X.to_scipy().toarray().tolist() == [[1.0, 0.0, 0.0, 2.0],
                                                           [0.0, 0.0, 3.0, 0.0]]
    named = parse_predict(LAYOUT, "regression", {"examples": ROWS, "computed_groups": ["c", "a"]})
    assert named.example_sets(None) == [named.computed] * 2
    assert sorted(named.computed) == [0, 2]
    for name in ("max_cost", "budget"):  # the alias reads as the cap itself
        capped = parse_predict(LAYOUT, "regression", {"examples": ROWS, name: 3})
        assert capped.cap == 3.0 and isinstance(capped.cap, float)
        assert capped.example_sets(lambda cap: [int(cap) - 3]) == [[0], [0]]


@pytest.mark.parametrize(("body", "field"), [
    ({"examples": ROWS, "return_prediction_ids": True}, "return_prediction_ids"),
    ({"examples": ROWS, "max_cost": 1, "budget": 1}, "budget"),
    ({"examples": ROWS, "computed_groups": ["a"], "max_cost": 1}, "max_cost"),
    ({"examples": ROWS, "computed_groups": ["a"], "budget": 1}, "budget"),
    ({"examples": ROWS, "max_cost": None}, "max_cost"),   # null is not a cap on /predict
    ({"examples": ROWS, "max_cost": -1}, "max_cost"),
    ({"examples": ROWS, "budget": True}, "budget"),
    ({"examples": ROWS, "computed_groups": ["z"]}, "computed_groups"),
    ({"examples": []}, "examples"),
    ({}, "examples"),
])
def test_predict_refuses_naming_the_field(body, field):
    assert _field(lambda: parse_predict(LAYOUT, "regression", body)) == field


def test_next_per_set_and_per_example():
    per_set = parse_next(LAYOUT, "regression", {"computed_groups": ["b"], "budget": None})
    assert per_set == BudgetedRequest([1], None)
    assert parse_next(LAYOUT, "regression", {}) == BudgetedRequest([], None)
    per_example = parse_next(LAYOUT, "regression", {"examples": ROWS, "max_cost": 2.5,
                                                    "exchange_rate": 0.01})
    assert (per_example.computed, per_example.cap, per_example.exchange_rate) == \
        (None, 2.5, 0.01)
    assert np.array_equal(per_example.present, [[True, False, True], [False, True, False]])
    null_examples = parse_next(LAYOUT, "regression", {"examples": None, "max_cost": 1})
    assert null_examples.batch is None and null_examples.cap == 1.0


@pytest.mark.parametrize(("body", "field"), [
    ({"return_prediction_ids": True}, "return_prediction_ids"),
    ({"exchange_rate": 0.1}, "exchange_rate"),          # applies to examples only
    ({"examples": ROWS, "exchange_rate": -0.1}, "exchange_rate"),
    ({"max_cost": 1, "budget": 1}, "budget"),
    ({"examples": ROWS, "max_cost": 1, "budget": 1}, "budget"),
    ({"max_cost": "1"}, "max_cost"),
    ({"computed_groups": "a"}, "computed_groups"),
])
def test_next_refuses_naming_the_field(body, field):
    assert _field(lambda: parse_next(LAYOUT, "regression", body)) == field


def test_cost_cap_is_the_one_resolution():
    assert cost_cap({}, required=True) is None
    assert cost_cap({"budget": 2}, required=True) == cost_cap({"max_cost": 2}, required=True)
    assert cost_cap({"max_cost": None}, required=False) is None
    with pytest.raises(InputError, match="not both"):
        cost_cap({"max_cost": 1, "budget": 1}, required=False)
