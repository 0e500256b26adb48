"""Inputs at the edges: values outside the valid range are refused on every path and a model
never holds or answers a non-finite number; small contract fixes (dead letters count,
budget on learners that do not select, the malformed-JSON field, read keys)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from fastapi.testclient import TestClient

from service import fbx1
from service.app import create_app
from service.storage import redis_keys
from tests.support.online import create
from tests.support.storage_backends import log_entries


@pytest.mark.parametrize("value", [1e308, -1e300, 2.0 ** 50, 1e16])
def test_values_outside_the_range_are_refused_on_every_path(client, value):
    create(client, "m", algorithm="pet")
    bodies = [
        ("application/json", f'{{"examples": [{{"indices": [1], "values": [{value!r}], '
                             f'"label": 1}}]}}'.encode()),
        ("text/plain", f"1 2:{value!r}\n".encode()),
        ("application/octet-stream", fbx1.encode_batch([0, 1], [1], [value], [1])),
    ]
    for media_type, body in bodies:
        response = client.post("/v1/models/m/examples", content=body,
                               headers={"content-type": media_type})
        assert response.status_code == 422, (media_type, response.text)
        assert response.json()["errors"][0]["field"] == "values"
        assert "2^50" in response.json()["detail"]
    assert client.get("/v1/models/m").json()["log_end"] is None


def test_large_valid_values_keep_every_learner_finite(client):
    rng = np.random.default_rng(0)
    for algorithm in ("pet", "fofs", "sofs", "ogd", "arow"):
        extra = {} if algorithm in ("ogd", "arow") else {"budget": 5}
        body = {"name": algorithm, "algorithm": algorithm, "n_features": 50, **extra}
        assert client.post("/v1/models", json=body).status_code == 201
        for _ in range(5):
            examples = [{"indices": sorted(rng.choice(50, 8, replace=False).tolist()),
                         "values": (rng.choice([-1, 1], 8) * 1e15 * rng.random(8)).tolist(),
                         "label": int(rng.choice([-1, 1]))} for _ in range(40)]
            assert client.post(f"/v1/models/{algorithm}/examples?wait=true",
                               json={"examples": examples}).status_code == 202
        info = client.get(f"/v1/models/{algorithm}").json()
        weights = [f["weight"] for f in info["selected_features"]]
        assert all(w is not None and np.isfinite(w) for w in weights), (algorithm, weights)
        scores = client.post(f"/v1/models/{algorithm}/predict", json={
            "examples": examples[:5]}).json()["scores"]
        assert all(s is not None and np.isfinite(s) for s in scores), (algorithm, scores)


def test_deadletters_count_is_validated(client):
    create(client)
    assert client.get("/v1/models/m/deadletters?count=0").status_code == 422
    assert client.get("/v1/models/m/deadletters?count=5").status_code == 200


@pytest.mark.parametrize("algorithm", ["ogd", "arow"])
def test_budget_is_refused_where_the_learner_does_not_select(client, algorithm):
    response = client.post("/v1/models", json={"name": "x", "algorithm": algorithm,
                                               "n_features": 10, "budget": 3})
    assert response.status_code == 422 and "budget" in response.json()["detail"]
    assert client.get("/v1/models/x").status_code == 404


def test_malformed_json_names_the_body(client):
    response = client.post("/v1/models", content=b'{"name": ',
                           headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "body"


def test_read_keys_read_snapshots_but_cannot_ask_for_prediction_ids(make_settings):
    with TestClient(create_app(make_settings(api_keys="w:write,r:read"))) as client:
        body = {"name": "m", "algorithm": "sofs", "budget": 5, "n_features": 20}
        assert client.post("/v1/models", json=body, headers={"x-api-key": "w"}
                           ).status_code == 201
        read = {"x-api-key": "r"}
        assert client.get("/v1/models/m/snapshot", headers=read).status_code == 200
        example = {"indices": [1], "values": [1.0]}
        response = client.post("/v1/models/m/predict", headers=read, json={
            "examples": [example], "return_prediction_ids": True})
        assert response.status_code == 403
        assert client.post("/v1/models/m/predict", headers=read,
                           json={"examples": [example]}).status_code == 200


@pytest.mark.redis
def test_entries_of_a_model_that_did_not_exist_never_reach_a_new_one(redis_url, make_settings,
                                                                      backend):
    if backend != "redis":
        pytest.skip("the Redis stream")
    import redis

    connection = redis.Redis.from_url(redis_url)
    stale = fbx1.encode_batch([0, 1], [1], [1.0], [1])
    for _ in range(3):
        connection.xadd(redis_keys.log_key("ghost"), {b"fmt": b"bin", b"data": stale})
    with TestClient(create_app(make_settings())) as client:
        create(client, "ghost", algorithm="pet", budget=3, n_features=10)
        response = client.post("/v1/models/ghost/examples?wait=true", json={
            "examples": [{"indices": [2], "values": [1.0], "label": -1}]})
        assert response.status_code == 202
        assert client.get("/v1/models/ghost").json()["examples_applied"] == 1
    connection.close()


def gauge(client, name: str, model: str) -> float | None:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(f'{name}{{model="{model}"}}'):
            return float(line.split()[-1])
    return None


def test_gauges_follow_a_restore_and_a_restart(make_settings, x1):
    from tests.support.online import json_examples

    X, y = x1
    settings = make_settings()
    with TestClient(create_app(settings)) as client:
        create(client, "m")
        client.post("/v1/models/m/examples?wait=true",
                    json={"examples": json_examples(X, y, 0, 70)})
        blob = client.get("/v1/models/m/snapshot").content
        create(client, "copy")
        assert gauge(client, "featurebudget_model_examples", "copy") == 0
        assert client.put("/v1/models/copy/snapshot", content=blob).status_code == 200
        assert gauge(client, "featurebudget_model_examples", "copy") == 70
    from service import metrics

    metrics.forget_model("m")  # a fresh process starts without the series
    with TestClient(create_app(settings)) as client:
        assert gauge(client, "featurebudget_model_examples", "m") == 70


def test_a_run_of_creations_ends_in_a_clean_refusal(make_settings):
    from algorithms.online import LEARNERS

    each = LEARNERS["sofs"].memory_bytes(n_features=1 << 18, budget=10)
    settings = make_settings(max_total_model_bytes=int(3.5 * each))
    with TestClient(create_app(settings)) as client:
        statuses = []
        for k in range(5):
            response = client.post("/v1/models", json={
                "name": f"m{k}", "algorithm": "sofs", "budget": 10, "hash_bits": 18})
            statuses.append(response.status_code)
        assert statuses == [201, 201, 201, 507, 507]
        problem = response.json()
        assert "FEATUREBUDGET_MAX_TOTAL_MODEL_BYTES" in problem["detail"]
        assert f"{int(3.5 * each):,}" in problem["detail"]
        assert client.get("/v1/models/m3").status_code == 404
        assert client.delete("/v1/models/m0").status_code == 204
        assert client.post("/v1/models", json={"name": "m5", "algorithm": "sofs", "budget": 10,
                                               "hash_bits": 18}).status_code == 201
        assert client.get("/readyz").status_code == 200


def test_feature_names_are_a_fold_over_the_log(make_settings, backend):
    settings = make_settings()
    examples = [{"features": {"words": {"cheap": 1.0, "offer": 0.5}}, "label": 1},
                {"features": {"words": {"meeting": 1.0}, "meta": {"hour": 0.3}}, "label": -1}]
    with TestClient(create_app(settings)) as client:
        create(client, "h", algorithm="ogd", budget=None, n_features=None, hash_bits=12)
        assert client.post("/v1/models/h/examples?wait=true",
                           json={"examples": examples * 5}).status_code == 202
        names = {f["name"] for f in client.get("/v1/models/h").json()["selected_features"]}
        assert names == {"words^cheap", "words^offer", "words^meeting", "meta^hour"}
        from service.ingest import parse_entry

        storage = client.app.state.manager.storage
        entries = client.portal.call(lambda: log_entries(storage, "h", 10))
        assert b"names" in entries[0].fields  # the log entry carries the names
        batch = parse_entry(entries[0].fields, 1 << 12, None)
        assert set(batch.names.values()) == names
    # a process that never saw the request (no snapshot with the names) replays them
    if backend == "local":
        (settings.data_dir / "models" / "h" / "snapshot.fbs").unlink()
    else:
        import redis

        redis.Redis.from_url(settings.redis_url).delete(redis_keys.snapshot_key("h"))
    with TestClient(create_app(settings)) as client:
        deadline = time.monotonic() + 30
        while client.get("/v1/models/h").json()["examples_applied"] < 10:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        # and while it takes the fold over and replays, it never answers older than before
        doc = client.get("/v1/models/h").json()
        assert doc["examples_applied"] >= 10
        assert {f["name"] for f in doc["selected_features"]} == names


def test_a_retried_idempotency_key_appends_nothing_even_after_a_restart(make_settings):
    settings = make_settings()
    body = {"examples": [{"indices": [1, 4], "values": [1.0, -0.5], "label": 1}]}
    with TestClient(create_app(settings)) as client:
        create(client, "m", algorithm="pet", budget=3, n_features=10)
        first = client.post("/v1/models/m/examples?wait=true", json=body,
                            headers={"idempotency-key": "order-17"}).json()
        again = client.post("/v1/models/m/examples?wait=true", json=body,
                            headers={"idempotency-key": "order-17"}).json()
        assert not first["repeated"] and again["repeated"]
        assert again["log_ids"] == first["log_ids"]
        other = client.post("/v1/models/m/examples", json=body,
                            headers={"idempotency-key": "order-18"}).json()
        assert other["log_ids"] != first["log_ids"]
        bad = client.post("/v1/models/m/examples", json=body,
                          headers={"idempotency-key": "has space"})
        assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "Idempotency-Key"
        log_end = client.get("/v1/models/m").json()["log_end"]
    with TestClient(create_app(settings)) as client:  # the key is found again after restart
        again = client.post("/v1/models/m/examples", json=body,
                            headers={"idempotency-key": "order-17"}).json()
        assert again["repeated"] and again["log_ids"] == first["log_ids"]
        assert client.get("/v1/models/m").json()["log_end"] == log_end
        assert gauge(client, "featurebudget_examples_repeated_total", "m") >= 1


@pytest.mark.redis
def test_readyz_says_when_a_model_is_not_folded(redis_url, make_settings, backend):
    if backend != "redis":
        pytest.skip("several processes share a model only on Redis")
    import redis

    connection = redis.Redis.from_url(redis_url)
    with TestClient(create_app(make_settings(lease_seconds=1.0))) as client:
        create(client, "m", algorithm="pet", budget=3, n_features=10)
        deadline = time.monotonic() + 10
        while connection.get(redis_keys.heartbeat_key("m")) is None:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert client.get("/readyz").status_code == 200
        # as a killed owner leaves it: a heartbeat that stopped long ago
        connection.set(redis_keys.heartbeat_key("m"), f"{time.time() - 5.0!r} dead:1:x")
        response = client.get("/readyz")
        assert response.status_code == 503 and "model m: not folded" in response.text
        deadline = time.monotonic() + 10
        while client.get("/readyz").status_code != 200:  # the live owner renews
            assert time.monotonic() < deadline
            time.sleep(0.05)
    assert connection.get(redis_keys.heartbeat_key("m")) is None  # released on a clean stop
    connection.close()


def test_an_unexpected_error_answers_a_problem_and_closes_the_connection(make_settings):
    """Starlette re-raises the error after the 500 is sent and uvicorn then closes the
    connection: the answer says so, or a keep-alive client's next request is reset."""

    async def boom():
        raise RuntimeError("an internal detail")

    app = create_app(make_settings())
    app.add_api_route("/boom", boom)
    with TestClient(app, raise_server_exceptions=False) as plain:
        response = plain.get("/boom")
    assert response.status_code == 500
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.headers["connection"] == "close"
    assert "internal detail" not in response.text


def test_a_body_that_is_not_utf8_is_a_problem_naming_the_body(client):
    for path in ("/v1/models", "/v1/models/m/feedback"):
        response = client.post(path, content=b'{"name": "\xff\xfe"}',
                               headers={"content-type": "application/json"})
        assert response.status_code == 400, response.text
        problem = response.json()
        assert problem["title"] == "Malformed request body"
        assert problem["errors"][0]["field"] == "body"
        assert "UnicodeDecodeError" in problem["detail"]


@pytest.mark.redis
def test_a_deleted_model_is_not_brought_back_by_a_refresh_under_way(redis_url, make_settings,
                                                                     backend):
    """The refresh that follows other processes read the stored models just before a
    delete and hosts what it read just after: the deleted model must not come back."""
    if backend != "redis":
        pytest.skip("models are refreshed from the shared backend only")
    import asyncio

    with TestClient(create_app(make_settings())) as client:
        create(client, "gone", algorithm="pet", budget=3, n_features=10)
        manager = client.app.state.manager
        storage = manager.storage
        original = storage.load_models

        async def scenario() -> list[bool]:
            read, gate, iterations = asyncio.Event(), asyncio.Event(), []

            async def gated():
                stored = await original()
                iterations.append("gone" in manager.hosts)
                read.set()
                if len(iterations) == 1:
                    await gate.wait()  # the refresh holds what it read across the delete
                return stored

            storage.load_models = gated
            try:
                await asyncio.wait_for(read.wait(), 30)  # the refresh loop read them
                deleting = asyncio.create_task(manager.delete("gone"))
                await asyncio.wait({deleting}, timeout=1.0)  # as far as it gets meanwhile
                gate.set()
                await deleting
                read.clear()
                await asyncio.wait_for(read.wait(), 30)  # the refresh's next round began
            finally:
                storage.load_models = original
            return iterations

        iterations = client.portal.call(scenario)
        assert iterations[-1] is False  # not hosted again after its delete
        assert client.get("/v1/models/gone").status_code == 404


@pytest.mark.redis
def test_a_restore_sent_to_a_process_that_does_not_fold_the_model_says_retry_elsewhere(
        redis_url, make_settings, backend):
    """With several API processes only the one folding a model can restore it: the others
    answer 503 and close the connection, so that the client's retry (a new connection) may
    reach the folding process instead of the same one again."""
    if backend != "redis":
        pytest.skip("several processes share a model only on Redis")
    settings = make_settings()
    with TestClient(create_app(settings)) as first:
        create(first, "m", algorithm="pet", budget=3, n_features=10)
        deadline = time.monotonic() + 30
        while not first.get("/v1/models/m").json()["owner"]:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        blob = first.get("/v1/models/m/snapshot").content
        with TestClient(create_app(settings)) as second:
            assert second.get("/v1/models/m").json()["owner"] is False
            response = second.put("/v1/models/m/snapshot", content=blob)
            assert response.status_code == 503, response.text
            assert response.headers["connection"] == "close"
            assert response.headers["retry-after"] == "1"
            assert response.headers["content-type"].startswith("application/problem+json")
        assert first.put("/v1/models/m/snapshot", content=blob).status_code == 200
