"""The Python client sends what the user gave and answers what the service said: no field
the user did not set, numpy values converted, no answer silently dropped."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

from clients.http import BudgetedPrediction, FeaturebudgetClient, Prediction
from service.app import create_app
from service.settings import Settings

GROUPS = [("exam", ["bmi", "bp"], 1.0), ("blood", ["s1"], 5.0)]


def recording_client(sent: list) -> FeaturebudgetClient:
    """A client whose transport records each request's JSON body and answers as the
    service does for an online model."""

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        if request.url.path.endswith("/examples"):
            return httpx.Response(202, json={"model": "m", "accepted": 1, "log_ids": ["1-0"],
                                             "applied": False})
        return httpx.Response(200, json={"model": "m", "log_position": None, "scores": [0.5],
                                         "labels": [1], "prediction_ids": None})

    return FeaturebudgetClient("http://test", transport=httpx.MockTransport(answer))


def test_predict_sends_only_the_fields_the_user_set():
    sent: list = []
    with recording_client(sent) as client:
        client.predict("m", [{"indices": [1], "values": [1.0]}])
        client.predict("m", [{"indices": [1], "values": [1.0]}], return_prediction_ids=True)
    assert sent[0] == {"examples": [{"indices": [1], "values": [1.0]}]}
    assert sent[1]["return_prediction_ids"] is True


def test_numpy_arrays_and_scalars_are_sent_as_json():
    sent: list = []
    example = {"indices": np.array([3, 17], dtype=np.int32),
               "values": np.array([1.0, 0.5], dtype=np.float32), "label": np.int8(-1)}
    with recording_client(sent) as client:
        answer = client.predict("m", [example])
        client.post_examples("m", [example])
        client.predict("m", [{"features": {"exam": {"bmi": np.float64(0.25)}}}])
    assert isinstance(answer, Prediction) and answer.scores == [0.5]
    assert sent[0] == sent[1] == {"examples": [{"indices": [3, 17], "values": [1.0, 0.5],
                                                "label": -1}]}
    assert sent[2]["examples"][0]["features"]["exam"]["bmi"] == 0.25


def test_the_real_service_takes_numpy_examples_and_predict_batch_names_predict(tmp_path):
    rng = np.random.default_rng(0)
    app = create_app(Settings(data_dir=tmp_path, consumer_block_ms=20))
    with TestClient(app) as http, FeaturebudgetClient(http=http) as client:
        client.create_model("m", algorithm="pet", n_features=np.int64(10), budget=3)
        examples = [{"indices": np.array([k % 10]), "values": np.array([rng.normal()]),
                     "label": np.int64(1 if k % 2 else -1)} for k in range(20)]
        assert client.post_examples("m", examples, wait=True).accepted == 20
        answer = client.predict("m", [{"indices": np.arange(3), "values": np.ones(3)}])
        assert isinstance(answer, Prediction) and len(answer.scores) == 1
        with pytest.raises(ValueError, match=r"'m' is an online model.*use predict\(\)"):
            client.predict_batch("m", [{"indices": [1], "values": [1.0]}])


def test_predict_answers_a_batch_model_too(tmp_path):
    rng = np.random.default_rng(1)
    rows = rng.normal(size=(120, 3))
    app = create_app(Settings(data_dir=tmp_path, consumer_block_ms=20,
                              job_poll_seconds=0.05))
    with TestClient(app) as http, FeaturebudgetClient(http=http) as client:
        client.create_batch_model("p", algorithm="cs-g-omp", groups=GROUPS)
        client.post_examples("p", [{"features": {"exam": {"bmi": a, "bp": b},
                                                 "blood": {"s1": c}},
                                    "target": 2 * a + c} for a, b, c in rows], wait=True)
        job = client.wait_for_job("p", client.retrain("p").id, timeout=120)
        assert job.succeeded, job.error
        answer = client.predict("p", [{"features": {"exam": {"bmi": 0.5, "bp": 0.0}}}])
        assert isinstance(answer, BudgetedPrediction) and answer.groups_used == ["exam"]
        assert answer.predictions == client.predict_batch(
            "p", [{"features": {"exam": {"bmi": 0.5, "bp": 0.0}}}]).predictions
