"""Kill -9 at random points, restart, drain: the weights are bit-equal to one uninterrupted
``partial_fit`` over the log (embedded backend with a torn tail; real Redis)."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import redis

from algorithms.datasets.online_synthetic import make_x1
from algorithms.online import LEARNERS
from algorithms.serialization import loads_state
from clients.stream import StreamProducer, redis_client
from service import wire
from service.ingest import concat, parse_entry
from service.storage.local import LocalLog
from tests.service.conftest import same_state

ROOT = Path(__file__).resolve().parents[2]
BATCH = 40
KILLS = 3
MODEL = {"name": "m", "algorithm": "sofs", "budget": 50, "n_features": 20_000,
         "params": {"r": 1.0}}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stream_data():
    X, y, _ = make_x1(n_samples=1600, seed=11)  # X1: d = 20,000, 600 non-zeros per example
    return X, y.astype(np.int8)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, process: subprocess.Popen, timeout: float = 120.0) -> None:
    """Poll ``/readyz`` until it answers 200; fail if the server exits or times out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert process.poll() is None, "server exited during start"
        time.sleep(0.05)
    raise AssertionError("server did not become ready")


def serve_on_redis(tmp_path: Path, redis_url: str, label: str,
                   **settings: str) -> tuple[subprocess.Popen, str]:
    """``featurebudget serve`` on a free loopback port and ``redis_url``, with more
    ``FEATUREBUDGET_<NAME>`` settings; its output in ``tmp_path/label.log``."""
    port = free_port()
    env = dict(os.environ, FEATUREBUDGET_REDIS_URL=redis_url,
               **{f"FEATUREBUDGET_{name.upper()}": value for name, value in settings.items()})
    process = subprocess.Popen(
        [sys.executable, "-m", "service.cli", "serve", "--port", str(port),
         "--log-level", "warning"], cwd=ROOT, env=env,
        stdout=open(tmp_path / f"{label}.log", "ab"), stderr=subprocess.STDOUT)  # noqa: SIM115
    return process, f"http://127.0.0.1:{port}"


_RUNNING: list[Server] = []


@pytest.fixture(autouse=True)
def _kill_servers():
    yield
    while _RUNNING:
        _RUNNING.pop().kill()


class Server:
    def __init__(self, tmp_path: Path, redis_url: str | None) -> None:
        _RUNNING.append(self)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = dict(os.environ, FEATUREBUDGET_DATA_DIR=str(tmp_path / "data"),
                        FEATUREBUDGET_SNAPSHOT_EVERY_EXAMPLES="120",
                        FEATUREBUDGET_SNAPSHOT_EVERY_SECONDS="0.2",
                        FEATUREBUDGET_TRIM_LOG="false",  # the oracle re-reads the whole log
                        FEATUREBUDGET_CONSUMER_BLOCK_MS="20",
                        FEATUREBUDGET_MICROBATCH_MAX_ENTRIES="3",
                        FEATUREBUDGET_AUTOCLAIM_IDLE_MS="1",
                        FEATUREBUDGET_LEASE_SECONDS="1")  # a killed owner's lease expires soon
        self.env.pop("FEATUREBUDGET_REDIS_URL", None)
        if redis_url:
            self.env["FEATUREBUDGET_REDIS_URL"] = redis_url
        self.log = open(tmp_path / "server.log", "ab")  # noqa: SIM115
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "service.cli", "serve", "--port", str(self.port),
             "--log-level", "warning"], cwd=ROOT, env=self.env, stdout=self.log,
            stderr=subprocess.STDOUT)
        wait_ready(self.url, self.process)

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        if self.process:
            self.process.wait()

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)

    def drain(self, name: str = "m") -> dict:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            info = httpx.get(f"{self.url}/v1/models/{name}", timeout=10).json()
            if info["log_end"] and info["log_position"] == info["log_end"]:
                return info
            time.sleep(0.05)
        raise AssertionError(f"not drained: {info}")


def oracle_state(entries, n_features: int) -> tuple[dict, int]:
    batches = [parse_entry(e.fields, n_features, None) for e in entries]
    batch = concat(batches)
    learner = LEARNERS[MODEL["algorithm"]](n_features=n_features, budget=MODEL["budget"],
                                           **MODEL["params"])
    learner.partial_fit(batch.X, batch.labels.astype(np.float64))
    return learner.state_dict(), len(batch)


def encode(X, y, k: int) -> bytes:
    piece = X.row_slice(k * BATCH, (k + 1) * BATCH)
    return wire.encode_batch(piece.indptr, piece.indices, piece.values,
                             y[k * BATCH:(k + 1) * BATCH])


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
    served = loads_state(httpx.get(f"{server.url}/v1/models/m/snapshot", timeout=30).content)
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


def sigkill_redis_backend(tmp_path, stream_data, redis_url: str, name: str = "m") -> None:
    """SIGKILL the server 3 times while a producer streams X1 into model ``name`` on the
    Redis at ``redis_url`` (one server, or a ``redis+cluster://`` URL): the served weights
    are bit-equal to one pass over the log, nothing is applied twice or left pending."""
    X, y = stream_data
    rng = random.Random(77)
    r = redis_client(redis_url)
    server = Server(tmp_path, redis_url)
    server.start()
    assert httpx.post(f"{server.url}/v1/models", json={**MODEL, "name": name}).status_code == 201
    done = threading.Event()

    def produce():  # a producer streaming X1 the whole time, crashes or not
        producer = StreamProducer(r, name, batch_size=BATCH, value_bytes=4, pipeline_entries=1)
        for start in range(0, X.n_rows, BATCH):
            stop = start + BATCH
            producer.add_batch(X.indptr[start:stop + 1] - X.indptr[start],
                               X.indices[X.indptr[start]:X.indptr[stop]],
                               X.values[X.indptr[start]:X.indptr[stop]], y[start:stop])
            producer.flush()
            time.sleep(0.08)
        done.set()

    thread = threading.Thread(target=produce)
    thread.start()
    for _ in range(KILLS):  # kill while it owns the model and applies the stream
        time.sleep(rng.uniform(1.0, 2.0))
        server.kill()
        server.start()
    thread.join()
    info = server.drain(name)
    served = loads_state(httpx.get(f"{server.url}/v1/models/{name}/snapshot",
                                   timeout=30).content)
    server.stop()
    entries = [e for e in _all_entries(r, name)]
    expected, n = oracle_state(entries, X.n_features)
    assert n == X.n_rows
    assert info["examples_applied"] == n == served["n_examples"]
    assert same_state(served, expected)
    assert r.xpending(wire.log_key(name), wire.CONSUMER_GROUP)["pending"] == 0
    r.close()


def _all_entries(r, name: str = "m"):
    from service.storage.base import LogEntry

    for entry_id, fields in r.xrange(wire.log_key(name)):
        yield LogEntry(entry_id.decode(), fields)


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
    served = loads_state(httpx.get(f"{server.url}/v1/models/m/snapshot", timeout=30).content)
    server.stop()
    if redis_url:
        entries = list(_all_entries(redis.Redis.from_url(redis_url)))
    else:
        log = LocalLog(tmp_path / "data/models/m/log", segment_bytes=1 << 30, fsync=False)
        entries = log.read(0, 1 << 20)
    payloads = [bytes(e.fields[b"data"]) for e in entries]
    assert sorted(payloads) == sorted(encode(X, y, j) for j in range(n_batches))
    assert kills >= 1
    assert info["examples_applied"] == n_batches * BATCH == served["n_examples"]
