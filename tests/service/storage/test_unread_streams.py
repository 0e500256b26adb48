"""Examples nothing will read, said out loud: a batch model on Redis with no batch worker
(a warning at creation, a 504 naming the cause), a producer writing to a model that does
not exist (refused), and streams without a model (``/readyz`` and a gauge)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from fastapi.testclient import TestClient

from clients.stream import StreamProducer, UnknownModelError
from service.api import health
from service.app import create_app
from service.settings import Settings
from service.storage import redis_keys
from tests.support.redis_db import redis_url  # noqa: F401 (the fixture)

pytestmark = pytest.mark.redis
GROUPS = [{"name": "exam", "features": ["bmi", "bp"], "cost": 1.0}]
EXAMPLE = {"features": {"exam": {"bmi": 1.0, "bp": 0.5}}, "target": 2.0}


def settings(url: str) -> Settings:
    return Settings(redis_url=url, consumer_block_ms=20, wait_timeout_seconds=0.5,
                    lease_seconds=3.0)


def test_a_batch_model_without_a_worker_warns_and_its_wait_names_the_cause(redis_url):  # noqa: F811
    import redis

    with TestClient(create_app(settings(redis_url))) as client:
        created = client.post("/v1/models", json={"name": "b", "algorithm": "cs-g-omp",
                                                  "groups": GROUPS})
        assert created.status_code == 201, created.text
        (warning,) = created.json()["warnings"]
        assert "no `featurebudget worker` is running" in warning
        online = client.post("/v1/models", json={"name": "o", "algorithm": "pet",
                                                 "n_features": 10, "budget": 3})
        assert online.status_code == 201 and online.json()["warnings"] == []
        waited = client.post("/v1/models/b/examples?wait=true", json={"examples": [EXAMPLE]})
        assert waited.status_code == 504, waited.text
        detail = waited.json()["detail"]
        assert "entries up to" in detail and "are in the log" in detail
        assert "no batch worker has folded model 'b': start `featurebudget worker`" in detail
        now = time.time()  # a live batch worker (as placement registers one)
        redis.Redis.from_url(redis_url).hset(redis_keys.members_key("batch"), "w1",
                                            f"{now!r} {now + 3.0!r}")
        again = client.post("/v1/models", json={"name": "c", "algorithm": "cs-g-omp",
                                                "groups": GROUPS})
        assert again.status_code == 201 and again.json()["warnings"] == []


def test_a_producer_refuses_a_model_that_does_not_exist(redis_url, monkeypatch):  # noqa: F811
    import redis

    monkeypatch.setattr(health, "ORPHANS_EVERY", 0.0)
    connection = redis.Redis.from_url(redis_url)
    with TestClient(create_app(settings(redis_url))) as client:
        for name in ("spam", "eggs"):
            assert client.post("/v1/models", json={"name": name, "algorithm": "pet",
                                                   "n_features": 10,
                                                   "budget": 3}).status_code == 201
        producer = StreamProducer(connection, "sapm", batch_size=2)
        with pytest.raises(UnknownModelError, match=r"'sapm'.*'eggs', 'spam'") as refused:
            producer.add_batch(np.array([0, 1]), [3], [1.0], [1])
        assert isinstance(refused.value, ValueError) and refused.value.known == ["eggs", "spam"]
        with pytest.raises(UnknownModelError):
            producer.add([3], [1.0], 1)
        assert not connection.exists(redis_keys.log_key("sapm"))
        StreamProducer(connection, "spam").add_batch(np.array([0, 1]), [3], [1.0], [1])
        assert client.get("/readyz").json().get("orphan_streams") is None

        connection.xadd(redis_keys.log_key("ghost"), {b"data": b"1 1:1\n"})  # another producer
        ready = client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["orphan_streams"] == ["ghost"]
        assert "featurebudget_orphan_streams 1.0" in client.get("/metrics").text
        ahead = StreamProducer(connection, "later", require_model=False)  # on purpose
        ahead.add_batch(np.array([0, 1]), [3], [1.0], [1])
        ahead.flush()
        assert client.get("/readyz").json()["orphan_streams"] == ["ghost", "later"]
