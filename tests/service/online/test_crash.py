"""Kill -9 at random points, restart, drain: the weights are bit-equal to one uninterrupted
``partial_fit`` over the log (embedded backend with a torn tail; real Redis)."""

from __future__ import annotations

import os
import random
import threading

import httpx
import pytest
import redis

from service.storage.local import LocalLog
from tests.support.crash import (
    BATCH,
    KILLS,
    MODEL,
    RUNNING,
    Server,
    all_entries,
    encode,
    oracle_state,
    sigkill_redis_backend,
)
from tests.support.online import same_state
from tests.support.snapshots import snapshot_of

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _kill_servers():
    yield
    while RUNNING:
        RUNNING.pop().kill()


def test_sigkill_embedded_backend(tmp_path, stream_data):
    X, y = stream_data
    rng = random.Random(20240)
    n_batches = X.n_rows // BATCH
    server = Server(tmp_path, None)
    acknowledged: dict[str, int] = {}
    k = 0
    server.start()
    assert httpx.post(f"{server.url}/v1/models", json=MODEL).status_code == 201
    for round_ in range(KILLS):
        if round_:
            server.start()
        killer = threading.Timer(rng.uniform(0.05, 0.8), server.kill)
        killer.start()
        with httpx.Client(base_url=server.url, timeout=10) as client:
            while k < n_batches * (round_ + 1) // (KILLS + 1):
                try:
                    response = client.post("/v1/models/m/examples", content=encode(X, y, k),
                                           headers={"content-type": "application/octet-stream"})
                except httpx.HTTPError:
                    break  # killed: this batch may or may not be in the log
                assert response.status_code == 202
                acknowledged[response.json()["log_ids"][0]] = k
                k += 1
        killer.join()
        server.kill()
        if round_ == 1:  # a write cut short by the crash: a torn record at the tail
            segment = sorted((tmp_path / "data/models/m/log").glob("*.seg"))[-1]
            with open(segment, "ab") as handle:
                handle.write(os.urandom(37))
    server.start()
    with httpx.Client(base_url=server.url, timeout=10) as client:
        for rest in range(k, n_batches):
            response = client.post("/v1/models/m/examples", content=encode(X, y, rest),
                                   headers={"content-type": "application/octet-stream"})
            acknowledged[response.json()["log_ids"][0]] = rest
    info = server.drain()
    served = snapshot_of(httpx.get(f"{server.url}/v1/models/m/snapshot", timeout=30).content).model
    server.stop()
    log = LocalLog(tmp_path / "data/models/m/log", segment_bytes=1 << 30, fsync=False)
    entries = log.read(0, 1 << 20)
    by_id = {e.id: e for e in entries}
    for log_id, batch_index in acknowledged.items():  # nothing acknowledged is lost
        assert by_id[log_id].fields[b"data"] == encode(X, y, batch_index)
    expected, n = oracle_state(entries, X.n_features)
    assert info["examples_applied"] == n == served["n_examples"]  # nothing applied twice
    assert same_state(served, expected)


@pytest.mark.redis
def test_sigkill_redis_backend(tmp_path, stream_data, redis_url):
    sigkill_redis_backend(tmp_path, stream_data, redis_url)


@pytest.mark.parametrize("backend_name", ["local", pytest.param("redis", marks=pytest.mark.redis)])
def test_sigkill_with_a_retrying_client_applies_every_batch_exactly_once(
        tmp_path, stream_data, backend_name, request):
    """A client that retries each batch (same Idempotency-Key) until it is acknowledged,
    while the server is killed at random moments: every batch ends in the log once."""
    X, y = stream_data
    redis_url = request.getfixturevalue("redis_url") if backend_name == "redis" else None
    rng = random.Random(4242)
    n_batches = X.n_rows // BATCH
    server = Server(tmp_path, redis_url)
    server.start()
    assert httpx.post(f"{server.url}/v1/models", json=MODEL).status_code == 201
    kills = 0
    killer = threading.Timer(rng.uniform(0.1, 0.6), server.kill)
    killer.start()
    k = 0
    while k < n_batches:
        try:
            with httpx.Client(base_url=server.url, timeout=10) as client:
                response = client.post(
                    "/v1/models/m/examples", content=encode(X, y, k),
                    headers={"content-type": "application/octet-stream",
                             "idempotency-key": f"batch-{k}"})
            assert response.status_code == 202, response.text
            k += 1
        except httpx.HTTPError:  # killed mid-request: restart, then retry the same batch
            killer.join()
            server.kill()
            kills += 1
            server.start()
            if kills < KILLS:
                killer = threading.Timer(rng.uniform(0.1, 0.6), server.kill)
                killer.start()
    killer.cancel()
    info = server.drain()
    served = snapshot_of(httpx.get(f"{server.url}/v1/models/m/snapshot", timeout=30).content).model
    server.stop()
    if redis_url:
        entries = list(all_entries(redis.Redis.from_url(redis_url)))
    else:
        log = LocalLog(tmp_path / "data/models/m/log", segment_bytes=1 << 30, fsync=False)
        entries = log.read(0, 1 << 20)
    payloads = [bytes(e.fields[b"data"]) for e in entries]
    assert sorted(payloads) == sorted(encode(X, y, j) for j in range(n_batches))
    assert kills >= 1
    assert info["examples_applied"] == n_batches * BATCH == served["n_examples"]
