"""The batch routes' vocabulary: ``max_cost`` is the cost cap (``budget`` its deprecated
alias, the same answers), and every answer has ``answers``, one object per example with
every field of that example, equal to the top-level fields kept for older clients."""

from __future__ import annotations

import pytest

from tests.support.batch_api import create_batch, retrain
from tests.support.batch_data import DIABETES_GROUPS, diabetes, named_examples


@pytest.fixture
def served(batch_client):
    X, y = diabetes()
    create_batch(batch_client)
    body = {"examples": named_examples(X, y, DIABETES_GROUPS, 0, 400)}
    assert batch_client.post("/v1/models/d/examples?wait=true", json=body).status_code == 202
    assert retrain(batch_client)["status"] == "succeeded"
    return batch_client, X


def test_max_cost_and_its_deprecated_alias_answer_alike(served):
    client, X = served
    rows = named_examples(X, None, DIABETES_GROUPS, 400, 410)
    new = client.post("/v1/models/d/predict", json={"examples": rows, "max_cost": 3.0})
    old = client.post("/v1/models/d/predict", json={"examples": rows, "budget": 3.0})
    assert new.status_code == old.status_code == 200, (new.text, old.text)
    assert new.json() == old.json()
    step = client.post("/v1/models/d/next", json={"computed_groups": [], "max_cost": 3.0})
    alias = client.post("/v1/models/d/next", json={"computed_groups": [], "budget": 3.0})
    assert step.status_code == 200 and step.json() == alias.json()
    both = client.post("/v1/models/d/next", json={"max_cost": 3.0, "budget": 3.0})
    assert both.status_code == 422 and both.json()["errors"][0]["field"] == "budget"
    bad = client.post("/v1/models/d/predict", json={"examples": rows, "max_cost": -1})
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "max_cost"


def test_answers_are_per_example_whatever_the_sets(served):
    client, X = served
    names = [g["name"] for g in DIABETES_GROUPS]
    same = named_examples(X, None, DIABETES_GROUPS, 400, 404)
    mixed = [dict(row, features={k: v for k, v in row["features"].items()
                                 if k in names[:1 + i % 3]}) for i, row in enumerate(same)]
    for rows in (same, mixed):
        payload = client.post("/v1/models/d/predict", json={"examples": rows}).json()
        answers = payload["answers"]
        assert len(answers) == len(rows)
        single = not isinstance(payload["cost"], list)
        for i, answer in enumerate(answers):
            assert answer["prediction"] == payload["predictions"][i]
            assert answer["cost"] == (payload["cost"] if single else payload["cost"][i])
            assert answer["groups_used"] == (payload["groups_used"] if single
                                             else payload["groups_used"][i])
    assert len({tuple(a["groups_used"]) for a in answers}) == 3  # (the mixed rows)
