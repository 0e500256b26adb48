"""One ``predict`` for either kind of model, against a real service; a field of the other
kind names the call that fits; the async client answers the same."""

from __future__ import annotations

import asyncio

import pytest

from featurebudget_client import (
    AsyncFeaturebudgetClient,
    BudgetedPrediction,
    ModelKindError,
    Prediction,
    ServiceError,
)


def test_predict_answers_an_online_model(client, online_model):
    answer = client.predict(online_model, [{"indices": [0], "values": [2.0]},
                                           [-2.0, 0.0, 0.0]])
    assert isinstance(answer, Prediction) and answer.labels == [1, -1]
    with_ids = client.predict(online_model, [[1.0]], return_prediction_ids=True)
    assert len(with_ids.prediction_ids) == 1
    assert client.feedback(online_model, with_ids.prediction_ids[0], 1).label == 1


def test_batch_fields_on_an_online_model_name_the_call(client, online_model):
    for fields in ({"max_cost": 2.0}, {"computed_groups": ["exam"]}):
        with pytest.raises(ModelKindError, match=r"is an online model: (max_cost|computed_"
                                                 r"groups) is for batch models; call "
                                                 r"predict\(name, examples\) without it"):
            client.predict(online_model, [[1.0]], **fields)
    with pytest.raises(ModelKindError, match=r"online model: predict_batch .* use predict"):
        client.predict_batch(online_model, [[1.0]])


def test_predict_answers_a_batch_model(client, batch_model):
    carried = client.predict(batch_model, [{"features": {"exam": {"bmi": 1.0, "bp": 0.0}}}])
    assert isinstance(carried, BudgetedPrediction) and carried.groups_used == ["exam"]
    capped = client.predict(batch_model, [{"features": {"exam": {"bmi": 1.0, "bp": 0.0},
                                                        "blood": {"s1": 1.0}}}], max_cost=1.0)
    assert capped.answers[0]["cost"] <= 1.0
    both = client.predict(batch_model, [{"features": {"exam": {"bmi": 1.0, "bp": 0.0},
                                                      "blood": {"s1": 1.0}}}],
                          computed_groups=["exam", "blood"])
    assert abs(both.predictions[0] - 3.0) < 0.5  # 2·bmi + s1


def test_return_prediction_ids_on_a_batch_model_names_the_call(client, batch_model):
    with pytest.raises(ModelKindError, match=r"is a batch model: return_prediction_ids is "
                                             r"for online models") as refused:
        client.predict(batch_model, [{"features": {"exam": {"bmi": 1.0}}}],
                       return_prediction_ids=True)
    assert refused.value.kind == "batch" and refused.value.problem["status"] == 422


def test_other_errors_stay_service_errors(client):
    with pytest.raises(ServiceError) as missing:
        client.predict("client-test-no-such-model", [[1.0]])
    assert missing.value.status == 404


def test_the_async_client_answers_the_same(url, online_model):
    async def scores():
        async with AsyncFeaturebudgetClient(url, timeout=120) as client:
            answer = await client.predict(online_model, [[2.0], [-2.0]])
            with pytest.raises(ModelKindError, match="online model"):
                await client.predict(online_model, [[1.0]], max_cost=1.0)
            return answer

    answer = asyncio.run(scores())
    assert isinstance(answer, Prediction) and answer.labels == [1, -1]
