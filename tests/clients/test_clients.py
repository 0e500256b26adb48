"""The typed clients, the stream producer and the bulk loader against the real app."""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

from algorithms.datasets.online_synthetic import make_x1
from algorithms.online import LEARNERS
from algorithms.sparse.libsvm import write_libsvm
from clients.http import AsyncFeaturebudgetClient, FeaturebudgetClient, ServiceError
from clients.loader import load_file
from clients.stream import StreamProducer
from service import fbx1
from service.app import create_app
from service.settings import Settings
from tests.support.online import same_state
from tests.support.redis_db import REDIS_URL, redis_url  # noqa: F401 - fixture
from tests.support.snapshots import snapshot_of


@pytest.fixture(scope="module")
def data():
    X, y, _ = make_x1(n_samples=300, n_features=3000, n_informative=30, n_noise=30, seed=5)
    return X, y.astype(np.int8)


def rows(X, y, start, stop, labels=True):
    out = []
    for row in range(start, stop):
        lo, hi = X.indptr[row], X.indptr[row + 1]
        example = {"indices": X.indices[lo:hi].tolist(), "values": X.values[lo:hi].tolist()}
        if labels:
            example["label"] = int(y[row])
        out.append(example)
    return out


def oracle(X, y, n):
    return LEARNERS["pet"](n_features=X.n_features, budget=30).partial_fit(
        X.row_slice(0, n), y[:n].astype(float))


def test_sync_client_covers_every_endpoint(tmp_path, data):
    X, y = data
    app = create_app(Settings(data_dir=tmp_path, consumer_block_ms=20))
    with TestClient(app) as http, FeaturebudgetClient(http=http) as client:
        assert client.healthz()["status"] == "ok" and client.readyz()["status"] == "ready"
        info = client.create_model("m", algorithm="pet", n_features=X.n_features, budget=30)
        assert info.name == "m" and info.examples_applied == 0
        client.post_examples("m", rows(X, y, 0, 50))
        piece = X.row_slice(50, 100)
        client.post_binary("m", fbx1.encode_batch(piece.indptr, piece.indices, piece.values,
                                                  y[50:100]))
        accepted = client.post_examples("m", rows(X, y, 100, 120), wait=True)
        assert accepted.applied and client.get_model("m").examples_applied == 120
        prediction = client.predict("m", rows(X, y, 120, 122, labels=False),
                                    return_prediction_ids=True)
        assert prediction.scores == oracle(X, y, 120).decision_function(
            X.row_slice(120, 122)).tolist()
        feedback = client.feedback("m", prediction.prediction_ids[0], int(y[120]))
        assert feedback.correct == (prediction.labels[0] == y[120])
        assert [m.name for m in client.list_models()] == ["m"]
        assert len(client.features("m")) <= 30
        blob = client.get_snapshot("m")
        client.create_model("copy", algorithm="pet", n_features=X.n_features, budget=30)
        assert client.put_snapshot("copy", blob)["model"] == "copy"
        assert client.deadletters("m") == []
        assert "featurebudget_examples_applied_total" in client.metrics()
        with pytest.raises(ServiceError) as error:
            client.post_examples("m", [{"indices": [0], "values": [1.0], "label": 5}])
        assert error.value.status == 422 and error.value.problem["errors"][0]["item"] == 0
        client.delete_model("copy")
        with pytest.raises(ServiceError):
            client.get_model("copy")


def with_async_client(app, use):
    """``await use(client)`` with an :class:`AsyncFeaturebudgetClient` over ``app`` (in
    process, its lifespan running), from synchronous code."""
    async def run():
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with AsyncFeaturebudgetClient("http://test", transport=transport) as client:
                return await use(client)

    return asyncio.run(run())


def test_async_client(tmp_path, data):
    X, y = data
    app = create_app(Settings(data_dir=tmp_path, consumer_block_ms=20))

    async def use(client):
        await client.create_model("m", algorithm="pet", n_features=X.n_features, budget=30)
        await client.post_libsvm("m", b"1 1:0.5 7:1\n-1 2:1\n", wait=True)
        await client.post_examples("m", rows(X, y, 0, 30), wait=True)
        info = await client.get_model("m")
        return info, await client.predict("m", rows(X, y, 0, 3, labels=False))

    info, prediction = with_async_client(app, use)
    assert info.examples_applied == 32 and len(prediction.scores) == 3


def test_get_model_without_features_is_the_same_description_less_the_features(tmp_path,
                                                                                 data):
    """``get_model(name, features=False)`` (``?features=false``, what the load tests poll):
    the same counters and position, no ``selected_features``; sync and async alike."""
    X, y = data
    app = create_app(Settings(data_dir=tmp_path, consumer_block_ms=20))
    with TestClient(app) as http, FeaturebudgetClient(http=http) as client:
        client.create_model("m", algorithm="pet", n_features=X.n_features, budget=30)
        client.post_examples("m", rows(X, y, 0, 40), wait=True)
        full, lean = client.get_model("m"), client.get_model("m", features=False)
        assert full.selected_features and not lean.selected_features
        assert (lean.examples_applied, lean.log_position) == (40, full.log_position)

    async def use(aio):
        await aio.create_model("a", algorithm="pet", n_features=X.n_features, budget=30)
        await aio.post_examples("a", rows(X, y, 0, 10), wait=True)
        return await aio.get_model("a", features=False)

    info = with_async_client(app, use)
    assert info.examples_applied == 10 and not info.selected_features


def test_binary_format_round_trip(data):
    X, y = data
    piece = X.row_slice(3, 40)
    for width in (4, 8):
        payload = fbx1.encode_batch(piece.indptr, piece.indices, piece.values, y[3:40],
                                    value_bytes=width)
        indptr, indices, values, labels = fbx1.decode_batch(payload)
        assert np.array_equal(indptr, piece.indptr) and np.array_equal(indices, piece.indices)
        expected = piece.values.astype(np.float32) if width == 4 else piece.values
        assert np.array_equal(values, expected.astype(np.float64))
        assert np.array_equal(labels, y[3:40])
    with pytest.raises(fbx1.WireFormatError):
        fbx1.decode_batch(payload[:-1])


def test_rest_loader(tmp_path, data):
    X, y = data
    path = tmp_path / "data.svm"
    write_libsvm(path, X.row_slice(0, 250), y[:250].astype(float))
    app = create_app(Settings(data_dir=tmp_path / "d", consumer_block_ms=20))
    with TestClient(app) as http:
        FeaturebudgetClient(http=http).create_model("m", algorithm="pet",
                                                    n_features=X.n_features, budget=30)
        result = load_file(str(path), "m", via="rest", batch_size=60, wait=True,
                           progress=False, http=http)
        assert result["examples"] == 250
        state = snapshot_of(http.get("/v1/models/m/snapshot").content).model
    assert same_state(state, oracle(X, y, 250).state_dict())


@pytest.mark.redis
def test_stream_loader_and_producer(tmp_path, data, redis_url):  # noqa: F811
    X, y = data
    path = tmp_path / "data.svm"
    write_libsvm(path, X.row_slice(0, 200), y[:200].astype(float))
    app = create_app(Settings(redis_url=redis_url, consumer_block_ms=20))
    with TestClient(app) as http:
        FeaturebudgetClient(http=http).create_model("m", algorithm="pet",
                                                    n_features=X.n_features, budget=30)
        result = load_file(str(path), "m", via="stream", redis_url=redis_url, batch_size=70,
                           wait=True, progress=False)
        assert result["examples"] == 200
        with StreamProducer(redis_url, "m", batch_size=25, value_bytes=8) as producer:
            for row in range(200, 260):
                lo, hi = X.indptr[row], X.indptr[row + 1]
                producer.add(X.indices[lo:hi], X.values[lo:hi], int(y[row]))
        last = producer.ids[-1]
        http.post("/v1/models/m/examples?wait=true", json={"examples": rows(X, y, 260, 261)})
        info = http.get("/v1/models/m").json()
        assert info["examples_applied"] == 261 and info["log_position"] > last
        state = snapshot_of(http.get("/v1/models/m/snapshot").content).model
    assert same_state(state, oracle(X, y, 261).state_dict())
    assert REDIS_URL


def test_a_retried_post_with_the_same_idempotency_key_appends_once(tmp_path):
    from fastapi.testclient import TestClient

    from clients.http import FeaturebudgetClient
    from service.app import create_app
    from service.settings import Settings

    app = create_app(Settings(data_dir=tmp_path / "data", consumer_block_ms=50))
    with TestClient(app) as transport:
        client = FeaturebudgetClient("http://testserver")
        client.http = transport
        client.create_model("m", algorithm="pet", n_features=10, budget=3)
        example = [{"indices": [1], "values": [1.0], "label": 1}]
        first = client.post_examples("m", example, wait=True, idempotency_key="k-1")
        again = client.post_examples("m", example, wait=True, idempotency_key="k-1")
        assert not first.repeated and again.repeated and again.log_ids == first.log_ids
        assert client.get_model("m").examples_applied == 1
