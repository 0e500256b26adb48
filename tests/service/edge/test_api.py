"""End-to-end REST tests, on the embedded backend and on a real Redis."""

from __future__ import annotations

import time
import uuid

import numpy as np
import pytest
from fastapi.testclient import TestClient

from algorithms.online import LEARNERS, learner_from_state
from service import fbx1
from service.app import create_app
from tests.support.online import create, json_examples, libsvm_text, same_state
from tests.support.snapshots import snapshot_of


def oracle(X, y, n, algorithm="sofs", **params):
    learner = LEARNERS[algorithm](n_features=X.n_features, budget=20, **params)
    learner.partial_fit(X.row_slice(0, n), y[:n].astype(np.float64))
    return learner


def served_state(client, name="m") -> dict:
    """The learner's state in the model's snapshot (beside it: the service's members)."""
    response = client.get(f"/v1/models/{name}/snapshot")
    assert response.status_code == 200
    return snapshot_of(response.content).model


def test_model_crud(client):
    created = create(client, params={"r": 0.5})
    assert created["algorithm"] == "sofs" and created["examples_applied"] == 0
    assert [m["name"] for m in client.get("/v1/models").json()["models"]] == ["m"]
    assert client.get("/v1/models/m").json()["params"] == {"r": 0.5}
    assert client.post("/v1/models", json={"name": "m", "algorithm": "sofs", "budget": 2,
                                           "n_features": 5}).status_code == 409
    assert client.delete("/v1/models/m").status_code == 204
    assert client.get("/v1/models/m").status_code == 404
    assert client.delete("/v1/models/m").status_code == 404
    create(client)  # the name is free again, with an empty log
    assert client.get("/v1/models/m").json()["log_end"] is None


@pytest.mark.parametrize(("body", "field"), [
    ({"name": "a", "algorithm": "nope", "budget": 2, "n_features": 5}, "algorithm"),
    ({"name": "a", "algorithm": "sofs", "budget": 2, "n_features": 5, "params": {"zz": 1}},
     "params.zz"),
    ({"name": "a", "algorithm": "sofs", "budget": 2, "n_features": 5, "params": {"r": -1}},
     "params"),
    ({"name": "a", "algorithm": "sofs", "n_features": 5}, "budget"),
    ({"name": "a", "algorithm": "sofs", "budget": 2}, "body"),
    ({"name": "a b", "algorithm": "sofs", "budget": 2, "n_features": 5}, "name"),
    ({"name": "a", "algorithm": "sofs", "budget": 2, "n_features": 5, "hash_bits": 4}, "body"),
    # dense state over 2^31 - 1 features (34 GB) is refused before anything is allocated
    ({"name": "a", "algorithm": "sofs", "budget": 2, "n_features": 2**31 - 1}, "n_features"),
    ({"name": "a", "algorithm": "ogd", "hash_bits": 31}, "hash_bits"),
])
def test_create_rejects_bad_models(client, body, field):
    response = client.post("/v1/models", json=body)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert any(e["field"] == field for e in response.json()["errors"]), response.json()
    assert client.get("/v1/models").json()["models"] == []


def test_examples_in_all_forms_fold_bit_exactly(client, x1):
    X, y = x1
    create(client)
    first = client.post("/v1/models/m/examples", json={"examples": json_examples(X, y, 0, 100)})
    assert first.status_code == 202 and first.json()["accepted"] == 100
    assert len(first.json()["log_ids"]) == 1
    text = client.post("/v1/models/m/examples", content=libsvm_text(X, y, 100, 250),
                       headers={"content-type": "text/plain"})
    assert text.status_code == 202, text.text
    piece = X.row_slice(250, 400)
    binary = fbx1.encode_batch(piece.indptr, piece.indices, piece.values, y[250:400])
    done = client.post("/v1/models/m/examples?wait=true", content=binary,
                       headers={"content-type": "application/octet-stream"})
    assert done.status_code == 202 and done.json()["applied"] is True
    info = client.get("/v1/models/m").json()
    assert info["examples_applied"] == 400
    assert info["log_position"] == done.json()["log_ids"][-1] == info["log_end"]
    assert 0.5 < info["progressive_accuracy"] <= 1.0
    assert len(info["selected_features"]) == info["n_selected"] <= 20
    assert same_state(served_state(client), oracle(X, y, 400).state_dict())


def _post(client, body, content_type="application/json"):
    if isinstance(body, (dict, list)):
        return client.post("/v1/models/m/examples", json=body)
    return client.post("/v1/models/m/examples", content=body,
                       headers={"content-type": content_type})


GOOD = {"indices": [1, 2], "values": [0.5, 1.0], "label": 1}


@pytest.mark.parametrize(("body", "content_type", "status", "where"), [
    (b"{not json", "application/json", 400, {"field": "body"}),
    ({"examples": [GOOD, {"indices": "1", "values": [1.0], "label": 1}]}, None, 422,
     {"item": 1, "field": "indices"}),
    ({"examples": [GOOD, {"indices": [1, 2.5], "values": [1.0, 1.0], "label": 1}]}, None, 422,
     {"item": 1, "field": "indices"}),
    ({"examples": [GOOD, {"indices": [1], "values": ["x"], "label": 1}]}, None, 422,
     {"item": 1, "field": "values"}),
    ({"examples": [GOOD, {"indices": [1], "values": [1.0], "label": 2}]}, None, 422,
     {"item": 1, "field": "label"}),
    ({"examples": [GOOD, {"indices": [1], "values": [1.0], "label": True}]}, None, 422,
     {"item": 1, "field": "label"}),
    ({"examples": [GOOD, {"indices": [1], "values": [1.0]}]}, None, 422,
     {"item": 1, "field": "label"}),
    ({"examples": [GOOD, GOOD, {"indices": [2000], "values": [1.0], "label": 1}]}, None, 422,
     {"item": 2, "field": "indices"}),
    ({"examples": [{"indices": [-1], "values": [1.0], "label": 1}]}, None, 422,
     {"item": 0, "field": "indices"}),
    ({"examples": [GOOD, {"indices": [4, 3, 4], "values": [1, 1, 1], "label": 1}]}, None, 422,
     {"item": 1, "field": "indices"}),
    ({"examples": [{"indices": [1, 2], "values": [1.0], "label": 1}]}, None, 422,
     {"item": 0, "field": "values"}),
    (b'{"examples": [{"indices": [1], "values": [1e400], "label": 1}]}', "application/json",
     400, {"field": "body"}),
    (b'{"examples": [{"indices": [1], "values": [NaN], "label": 1}]}', "application/json",
     400, {"field": "body"}),
    ({"examples": []}, None, 422, {"field": "examples"}),
    (b"1 1:0.5\n-1 2:nan\n", "text/plain", 422, {"line": 2, "field": "values"}),
    (b"1 1:0.5\n\n1 3:1 3:2\n", "text/plain", 422, {"line": 3, "field": "indices"}),
    (b"1 1:0.5\n2 3:1\n", "text/plain", 422, {"line": 2, "field": "label"}),
    (b"1 1:0.5\n1 2001:1\n", "text/plain", 422, {"line": 2, "field": "indices"}),
    (b"1 1:0.5\n1 x:1\n", "text/plain", 422, {"line": 2}),
    (b"", "text/plain", 422, {"field": "body"}),
    (b"FBX1garbage", "application/octet-stream", 422, {"field": "body"}),
    (b"1 1:1", "application/xml", 415, {}),
])
def test_bad_input_changes_nothing_and_says_where(client, body, content_type, status, where):
    create(client)
    response = _post(client, body, content_type)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == status and problem["detail"]
    if where:
        assert any(all(e.get(k) == v for k, v in where.items()) for e in problem["errors"]), \
            problem
    assert client.get("/v1/models/m").json()["log_end"] is None  # nothing appended


def test_body_limit_and_unknown_model(make_settings):
    with TestClient(create_app(make_settings(max_body_bytes=1000))) as client:
        create(client)
        response = client.post("/v1/models/m/examples", content=b"1 1:1\n" * 400,
                               headers={"content-type": "text/plain"})
        assert response.status_code == 413
        assert response.headers["content-type"] == "application/problem+json"
        assert client.post("/v1/models/zz/examples", json=GOOD).status_code == 404
        assert client.post("/v1/models/zz/predict", json={"examples": [GOOD]}).status_code \
            == 404


def test_hashed_named_features_report_names(client):
    create(client, n_features=None, hash_bits=12)
    examples = [{"features": {"words": {"cheap": 1.0, "viagra": 2.0}, "meta": {"len": 0.3}},
                 "label": 1},
                {"features": {"words": {"hello": 1.0}}, "label": -1}] * 5
    response = client.post("/v1/models/m/examples?wait=true", json={"examples": examples})
    assert response.status_code == 202, response.text
    names = {f["name"] for f in client.get("/v1/models/m/features").json()}
    assert {"words^cheap", "words^viagra", "words^hello"} <= names
    bad = client.post("/v1/models/m/examples",
                      json={"examples": [{"features": {"w": {"a": "x"}}, "label": 1}]})
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "features.w.a"


def test_predict_and_delayed_feedback(make_settings, x1):
    X, y = x1
    # TTL 1.5 s: the first feedback must arrive within it even on a loaded host
    with TestClient(create_app(make_settings(prediction_ttl_seconds=1.5))) as client:
        create(client)
        client.post("/v1/models/m/examples?wait=true",
                    json={"examples": json_examples(X, y, 0, 200)})
        query = json_examples(X, y, 200, 210)
        for example in query:
            del example["label"]
        response = client.post("/v1/models/m/predict",
                               json={"examples": query, "return_prediction_ids": True})
        assert response.status_code == 200, response.text
        body = response.json()
        expected = oracle(X, y, 200).decision_function(X.row_slice(200, 210))
        assert body["scores"] == expected.tolist()
        assert body["labels"] == [1 if s >= 0 else -1 for s in expected]
        assert len(body["prediction_ids"]) == 10
        feedback = client.post("/v1/models/m/feedback", json={
            "prediction_id": body["prediction_ids"][0], "label": int(y[200])})
        assert feedback.status_code == 200, feedback.text
        assert feedback.json()["correct"] == (body["labels"][0] == y[200])
        again = client.post("/v1/models/m/feedback", json={
            "prediction_id": body["prediction_ids"][0], "label": 1})
        assert again.status_code == 404  # used once
        time.sleep(1.6)
        expired = client.post("/v1/models/m/feedback", json={
            "prediction_id": body["prediction_ids"][1], "label": 1})
        assert expired.status_code == 404
        client.post("/v1/models/m/examples?wait=true", json={"examples": [GOOD]})
        assert client.get("/v1/models/m").json()["examples_applied"] == 202  # feedback learned
        assert client.post("/v1/models/m/predict", json={"examples": []}).status_code == 422


def test_pending_predictions_survive_a_restart(make_settings, x1):
    """A prediction id the API handed out still takes its feedback after a restart."""
    X, y = x1
    settings = make_settings(prediction_ttl_seconds=60)
    with TestClient(create_app(settings)) as client:
        create(client)
        client.post("/v1/models/m/examples?wait=true",
                    json={"examples": json_examples(X, y, 0, 50)})
        query = [{k: v for k, v in e.items() if k != "label"}
                 for e in json_examples(X, y, 50, 53)]
        ids = client.post("/v1/models/m/predict", json={
            "examples": query, "return_prediction_ids": True}).json()["prediction_ids"]
        used = client.post("/v1/models/m/feedback", json={"prediction_id": ids[0], "label": 1})
        assert used.status_code == 200
    with TestClient(create_app(settings)) as client:
        feedback = client.post("/v1/models/m/feedback",
                               json={"prediction_id": ids[1], "label": int(y[51])})
        assert feedback.status_code == 200, feedback.text
        again = client.post("/v1/models/m/feedback", json={"prediction_id": ids[0], "label": 1})
        assert again.status_code == 404  # used before the restart


def test_snapshot_round_trip_and_restore(client, x1):
    X, y = x1
    create(client)
    create(client, name="copy")
    client.post("/v1/models/m/examples?wait=true", json={"examples": json_examples(X, y, 0, 150)})
    blob = client.get("/v1/models/m/snapshot").content
    restored = client.put("/v1/models/copy/snapshot", content=blob)
    assert restored.status_code == 200, restored.text
    assert restored.json()["examples_applied"] == 150
    assert same_state(served_state(client, "copy"), oracle(X, y, 150).state_dict())
    # examples after the restore are applied on top of it
    client.post("/v1/models/copy/examples?wait=true",
                json={"examples": json_examples(X, y, 150, 200)})
    assert same_state(served_state(client, "copy"), oracle(X, y, 200).state_dict())
    for junk in (b"", b"not a zip", blob[:100]):
        response = client.put("/v1/models/copy/snapshot", content=junk)
        assert response.status_code == 422
    create(client, name="other", algorithm="pet")
    mismatch = client.put("/v1/models/other/snapshot", content=blob)
    assert mismatch.status_code == 422 and mismatch.json()["errors"][0]["field"] == "algorithm"


def test_restart_restores_snapshot_and_replays(make_settings, x1):
    X, y = x1
    settings = make_settings(snapshot_every_examples=120, prefetch=False)
    with TestClient(create_app(settings)) as client:
        create(client)
        for start in range(0, 300, 50):
            client.post("/v1/models/m/examples", json={"examples": json_examples(X, y, start,
                                                                                 start + 50)})
        client.post("/v1/models/m/examples?wait=true",
                    json={"examples": json_examples(X, y, 300, 310)})
    with TestClient(create_app(settings)) as client:
        assert client.get("/readyz").json()["status"] == "ready"
        client.post("/v1/models/m/examples?wait=true",
                    json={"examples": json_examples(X, y, 310, 330)})
        info = client.get("/v1/models/m").json()
        assert info["examples_applied"] == 330 and info["progressive_examples"] == 330
        assert same_state(served_state(client), oracle(X, y, 330).state_dict())


def test_api_keys(make_settings):
    with TestClient(create_app(make_settings(api_keys="admin, viewer:read"))) as client:
        body = {"name": "m", "algorithm": "pet", "budget": 3, "n_features": 10}
        assert client.post("/v1/models", json=body).status_code == 401
        assert client.post("/v1/models", json=body,
                           headers={"X-API-Key": "viewer"}).status_code == 403
        assert client.post("/v1/models", json=body,
                           headers={"X-API-Key": "wrong"}).status_code == 401
        assert client.post("/v1/models", json=body,
                           headers={"Authorization": "Bearer admin"}).status_code == 201
        viewer = {"X-API-Key": "viewer"}
        assert client.post("/v1/models/m/examples", json=GOOD, headers=viewer).status_code == 403
        assert client.post("/v1/models/m/predict", json={"examples": [GOOD]},
                           headers=viewer).status_code == 200
        assert client.get("/v1/models/m/snapshot", headers=viewer).status_code == 200  # reads
        assert client.put("/v1/models/m/snapshot", content=b"x",
                          headers=viewer).status_code == 403
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code == 200


def test_a_body_over_the_limit_without_a_key_is_a_401(make_settings):
    """Without a valid key nothing about the request is answered but 401 (not even that
    its declared body is too large); with one, the 413."""
    settings = make_settings(api_keys="admin", max_body_bytes=1 << 16)
    with TestClient(create_app(settings)) as client:
        big = b"x" * ((1 << 16) + 1)
        answer = client.put("/v1/models/m/snapshot", content=big)
        assert answer.status_code == 401, answer.text
        assert answer.headers["content-type"] == "application/problem+json"
        assert client.put("/v1/models/m/snapshot", content=big,
                          headers={"X-API-Key": "admin"}).status_code == 413


def test_health_and_metrics(client, x1):
    X, y = x1
    assert client.get("/healthz").json() == {"status": "ok"}
    name = f"metrics{uuid.uuid4().hex[:8]}"
    create(client, name=name)
    client.post(f"/v1/models/{name}/examples?wait=true",
                json={"examples": json_examples(X, y, 0, 20)})
    client.post(f"/v1/models/{name}/examples", json={"examples": [{"label": 1}]})
    client.post(f"/v1/models/{name}/predict", json={"examples": [GOOD]})
    text = client.get("/metrics").text
    for metric in ("featurebudget_examples_ingested_total", "featurebudget_examples_applied_total",
                 "featurebudget_examples_rejected_total", "featurebudget_update_seconds_bucket",
                 "featurebudget_predict_seconds_bucket", "featurebudget_progressive_accuracy_ratio",
                 "featurebudget_selected_features"):
        assert f'{metric}{{' in text, metric
    assert f'featurebudget_examples_applied_total{{model="{name}"}} 20.0' in text


def test_snapshot_state_loads_as_learner(client, x1):
    X, y = x1
    create(client, algorithm="arow", budget=None)
    client.post("/v1/models/m/examples?wait=true", json={"examples": json_examples(X, y, 0, 50)})
    learner = learner_from_state(served_state(client))
    assert learner.n_examples_ == 50


def test_storage_failure_is_a_503_problem_and_nothing_is_acknowledged(make_settings):
    """A log append that fails (here: the disk is full) answers 503 problem+json with
    Retry-After; an unexpected error answers a 500 problem+json without internals."""
    app = create_app(make_settings())
    with TestClient(app, raise_server_exceptions=False) as client:
        client.post("/v1/models", json={"name": "m", "algorithm": "ogd", "n_features": 5}
                    ).raise_for_status()
        storage = app.state.manager.storage

        async def disk_full(model, entries, **_):
            raise OSError(28, "No space left on device")

        original, storage.append = storage.append, disk_full
        body = {"examples": [{"indices": [1], "values": [1.0], "label": 1}]}
        response = client.post("/v1/models/m/examples", json=body)
        assert response.status_code == 503
        assert response.headers["content-type"] == "application/problem+json"
        assert response.headers["retry-after"] == "1"
        assert "No space left on device" in response.json()["detail"]

        async def broken(model, entries, **_):
            raise RuntimeError("secret internals")

        storage.append = broken
        response = client.post("/v1/models/m/examples", json=body)
        assert response.status_code == 500
        assert response.headers["content-type"] == "application/problem+json"
        assert "secret" not in response.text
        storage.append = original
        assert client.get("/v1/models/m").json()["examples_applied"] == 0
        assert client.post("/v1/models/m/examples?wait=true", json=body).status_code == 202
