"""A model's life by identity: a model deleted and created again under its name (another
incarnation) is another model in every process. An append validated against the old model
is refused (409, nothing written) instead of acknowledged and lost; processes that held the
old model drop it (its fold too) and serve the new one."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.ingest import parse_json_examples

ONLINE = {"name": "m", "algorithm": "pet", "n_features": 6, "budget": 3}
WIDER = {"name": "m", "algorithm": "pet", "n_features": 12, "budget": 3}
GROUPS = [{"name": "a0", "features": ["x0", "x1"], "cost": 1},
          {"name": "a1", "features": ["x2"], "cost": 1}]
REDIS_ONLY = pytest.mark.parametrize(  # two processes share a model through Redis only
    "backend", [pytest.param("redis", marks=pytest.mark.redis)])
NEW_GROUPS = [{"name": "b0", "features": ["y0", "y1", "y2"], "cost": 1}]


def _examples(index: int, n: int = 4) -> dict:
    return {"examples": [{"indices": [index], "values": [1.0], "label": 1 - 2 * (i % 2)}
                         for i in range(n)]}


def test_an_append_for_a_deleted_incarnation_is_refused(client):
    assert client.post("/v1/models", json=ONLINE).status_code == 201
    manager = client.app.state.manager
    old = client.portal.call(manager.get, "m")
    assert old.incarnation
    assert client.delete("/v1/models/m").status_code == 204
    assert client.post("/v1/models", json=WIDER).status_code == 201
    new = client.portal.call(manager.get, "m")
    assert new.incarnation and new.incarnation != old.incarnation
    batch = parse_json_examples(_examples(2)["examples"], 6, None)
    with pytest.raises(Exception) as refused:  # a request that got the old model first
        client.portal.call(lambda: manager.append(old, [batch], "json"))
    assert getattr(refused.value, "status", None) == 409
    assert client.portal.call(manager.storage.log_end, "m") is None  # nothing written
    response = client.post("/v1/models/m/examples?wait=true", json=_examples(10))
    assert response.status_code == 202, response.text
    assert client.get("/v1/models/m/deadletters").json()["entries"] == []


@REDIS_ONLY
def test_two_processes_follow_a_model_created_again(make_settings, redis_url):
    """Process B hosts ``m``; process A deletes it and creates it again, wider. B never
    acknowledges an example it would lose: its appends are refused until it follows the
    store, then go to the new model, which applies every acknowledged example."""
    with TestClient(create_app(make_settings())) as a, \
            TestClient(create_app(make_settings())) as b:
        assert a.post("/v1/models", json=ONLINE).status_code == 201
        assert b.get("/v1/models/m").json()["n_features"] == 6
        assert a.delete("/v1/models/m").status_code == 204
        assert a.post("/v1/models", json=WIDER).status_code == 201
        acknowledged, statuses = 0, []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            response = b.post("/v1/models/m/examples", json=_examples(3))
            statuses.append(response.status_code)
            assert response.status_code in (202, 409), response.text
            if response.status_code == 202:
                acknowledged += 4
                break
        assert acknowledged, "process B never followed the model created again"
        print("process B answered", statuses)  # [409, 202]: refused once, then followed
        assert b.get("/v1/models/m").json()["n_features"] == 12
        response = b.post("/v1/models/m/examples?wait=true", json=_examples(11))
        assert response.status_code == 202, response.text
        acknowledged += 4
        for client in (a, b):
            described = client.get("/v1/models/m").json()
            assert described["n_features"] == 12
        assert a.get("/v1/models/m/deadletters").json()["entries"] == []
        deadline = time.monotonic() + 10
        while a.get("/v1/models/m").json()["examples_applied"] < acknowledged:
            assert time.monotonic() < deadline, a.get("/v1/models/m").json()
            time.sleep(0.05)


@REDIS_ONLY
def test_a_batch_model_created_again_is_folded_by_its_new_fold(make_settings, redis_url):
    settings = dict(batch_worker=True, job_poll_seconds=0.05, version_check_seconds=0.2)
    with TestClient(create_app(make_settings(**settings))) as a, \
            TestClient(create_app(make_settings(**settings))) as b:
        body = {"name": "g", "algorithm": "cs-g-omp", "groups": GROUPS,
                "params": {"retrain_every_examples": None, "retrain_every_seconds": None}}
        assert a.post("/v1/models", json=body).status_code == 201
        assert b.get("/v1/models/g").json()["n_features"] == 3
        assert a.delete("/v1/models/g").status_code == 204
        assert a.post("/v1/models", json=dict(body, groups=NEW_GROUPS)).status_code == 201
        rows = {"examples": [{"features": {"b0": {"y0": 1.0, "y1": float(i), "y2": 2.0}},
                              "target": float(i)} for i in range(20)]}
        deadline = time.monotonic() + 10
        while True:  # B answers 409 (or 422: unknown group) until it follows the store
            response = b.post("/v1/models/g/examples?wait=true", json=rows)
            if response.status_code == 202:
                break
            assert response.status_code in (409, 422), response.text
            assert time.monotonic() < deadline, response.text
            time.sleep(0.1)
        for client in (a, b):
            described = client.get("/v1/models/g").json()
            assert described["n_features"] == 3 and described["groups"][0]["name"] == "b0"
            assert described["examples_applied"] == 20
        assert b.get("/v1/models/g/deadletters").json()["entries"] == []



@REDIS_ONLY
def test_readyz_says_when_no_process_folds_a_batch_model(make_settings):
    """An API process without a batch worker on a shared backend, and no worker anywhere:
    the batch model is folded by nobody, and /readyz says so once a lease period passed."""
    with TestClient(create_app(make_settings(batch_worker=False, lease_seconds=1))) as api:
        body = {"name": "g", "algorithm": "cs-g-omp", "groups": GROUPS}
        assert api.post("/v1/models", json=body).status_code == 201
        deadline = time.monotonic() + 10
        while (answer := api.get("/readyz")).status_code == 200:
            assert time.monotonic() < deadline, answer.json()
            time.sleep(0.1)
        assert answer.status_code == 503
        assert "model g: no process folds it" in answer.json()["detail"]
        assert "featurebudget worker" in answer.json()["detail"]
