"""Failover without losing acknowledged examples (``FEATUREBUDGET_REDIS_MIN_REPLICAS``).

Real components on loopback ports 18450-18459, started here from ``redis-server``: a master,
one replica (``--replicaof``) and three sentinels (``redis-server --sentinel``,
``down-after-milliseconds`` 500), a real ``featurebudget serve`` on
``redis+sentinel://...`` with ``MIN_REPLICAS=1``, a REST producer (``Idempotency-Key``,
retrying on 503 and lost connections) and a ``StreamProducer(min_replicas=1)`` with
``write_once``. The master is SIGKILLed mid-stream; the sentinels promote the replica; the
killed node comes back as a replica of the new master; the producers go on. At the end the
log holds every acknowledged batch exactly once and nothing else, and the served weights are
bit-equal to one ``partial_fit`` over it in log order. Also: a write nobody confirms answers
503 (and with ``MIN_REPLICAS=0`` no WAIT is sent at all), the URL form and bad settings, and
the confirmed writes on a Redis Cluster (its fixture: ``test_redis_cluster.py``).

Skipped when ``redis-server`` is not installed (failed instead under CI=true).
"""

from __future__ import annotations

import asyncio
import os
import shutil
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
from fastapi.testclient import TestClient
from pydantic import ValidationError

from algorithms.datasets.online_synthetic import make_x1
from clients.stream import NotReplicatedError, StreamProducer
from service import fbx1
from service.app import create_app
from service.errors import NotReplicatedError as NotConfirmed
from service.settings import Settings
from service.storage import redis_keys, redis_urls
from service.storage.base import LogEntry
from service.storage.redis import RedisStorage
from tests.support.crash import MODEL, oracle_state
from tests.support.online import same_state
from tests.support.processes import serve_on_redis, wait_ready
from tests.support.redis_cluster import node as _node
from tests.support.redis_cluster import wait_for as _wait
from tests.support.snapshots import snapshot_of
from tests.support.storage_backends import log_entries

MASTER, REPLICA, LONE = 18450, 18451, 18455
SENTINELS = [18452, 18453, 18454]
NAME = "fbmaster"
SENTINEL_URL = "redis+sentinel://" + ",".join(f"127.0.0.1:{p}" for p in SENTINELS) + f"/{NAME}"
BATCH = 40
ROOT = Path(__file__).resolve().parents[3]

pytestmark = [pytest.mark.redis, pytest.mark.slow]


class Servers:
    """redis-server processes in one temporary directory, killed at the end."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.binary = shutil.which("redis-server")
        self.processes: dict[int, subprocess.Popen] = {}

    def start(self, port: int, *args: str, sentinel: bool = False) -> None:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                pytest.fail(f"port {port} is in use (a server left running?)")
        directory = self.base / str(port)
        directory.mkdir(exist_ok=True)
        if sentinel:  # sentinel rewrites its config file: one of its own, in the temp dir
            config = directory / "sentinel.conf"
            config.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {directory}\n"
                f"logfile {directory / 'sentinel.log'}\n"
                f"sentinel monitor {NAME} 127.0.0.1 {MASTER} 2\n"
                f"sentinel down-after-milliseconds {NAME} 500\n"
                f"sentinel failover-timeout {NAME} 3000\n"
                f"sentinel parallel-syncs {NAME} 1\n")
            command = [self.binary, str(config), "--sentinel"]
        else:
            command = [self.binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                       "--appendonly", "no", "--repl-diskless-sync-delay", "0",
                       "--dir", str(directory),
                       "--logfile", str(directory / "redis.log"), *args]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                   stderr=open(directory / "stderr", "ab"))  # noqa: SIM115
        self.processes[port] = process
        _wait(lambda: process.poll() is None and _node(port).ping(),
              f"redis-server on {port}", timeout=20)

    def kill(self, port: int) -> None:
        process = self.processes.pop(port)
        process.send_signal(signal.SIGKILL)
        process.wait()

    def close(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes.clear()


def _require_redis_server() -> None:
    if shutil.which("redis-server") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("redis-server is not installed")
        pytest.skip("redis-server is not installed")


@pytest.fixture
def servers(tmp_path):
    _require_redis_server()
    group = Servers(tmp_path / "redis")
    group.base.mkdir()
    try:
        yield group
    finally:
        group.close()


@pytest.fixture
def watched(servers):
    """A master, its replica and three sentinels that know both and each other."""
    servers.start(MASTER)
    servers.start(REPLICA, "--replicaof", "127.0.0.1", str(MASTER))
    _wait(lambda: _node(REPLICA).info("replication")["master_link_status"] == "up",
          "the replica in sync")
    for port in SENTINELS:
        servers.start(port, sentinel=True)
    for port in SENTINELS:  # hello messages every 2 s: until each knows the other two
        _wait(lambda p=port: len(_node(p).sentinel_sentinels(NAME)) == 2
              and len(_node(p).sentinel_slaves(NAME)) == 1, f"sentinel {port} ready")
    return servers


def _master_port() -> int:
    return int(_node(SENTINELS[0]).sentinel_get_master_addr_by_name(NAME)[1])


def _batch(X, y, k: int) -> tuple:
    lo, hi = X.indptr[k * BATCH], X.indptr[(k + 1) * BATCH]
    return (X.indptr[k * BATCH:(k + 1) * BATCH + 1] - lo, X.indices[lo:hi], X.values[lo:hi],
            y[k * BATCH:(k + 1) * BATCH])


def _payload(X, y, k: int) -> bytes:
    return fbx1.encode_batch(*_batch(X, y, k))


def test_a_master_failover_loses_no_acknowledged_example(tmp_path, watched):
    X, y, _ = make_x1(n_samples=3600, seed=19)  # d = 20,000, 600 non-zeros per example
    y = y.astype(np.int8)
    rest_batches, stream_batches = range(0, 60), range(60, 90)
    lock, stop = threading.Lock(), threading.Event()  # stop: the test failed
    process, url = serve_on_redis(
        tmp_path, SENTINEL_URL, "serve", redis_min_replicas="1", redis_wait_timeout_ms="500",
        lease_seconds="3", snapshot_every_examples="400", snapshot_every_seconds="0.5",
        trim_log="false", consumer_block_ms="20", microbatch_max_entries="4",
        autoclaim_idle_ms="1")
    try:
        wait_ready(url, process)
        assert httpx.post(f"{url}/v1/models", json=MODEL, timeout=30).status_code == 201
        acknowledged: dict[int, tuple[list[str], float]] = {}  # batch -> (log ids, when)
        counts = {"503": 0, "connection": 0, "stream retries": 0}

        def rest_producer():
            with httpx.Client(base_url=url, timeout=20) as client:
                for k in rest_batches:
                    while not stop.is_set():
                        try:
                            response = client.post(
                                "/v1/models/m/examples", content=_payload(X, y, k),
                                headers={"content-type": "application/octet-stream",
                                         "idempotency-key": f"rest-{k}"})
                        except httpx.HTTPError:
                            counts["connection"] += 1
                            time.sleep(0.05)
                            continue
                        if response.status_code == 503:
                            assert response.headers["retry-after"]
                            counts["503"] += 1
                            time.sleep(0.05)
                            continue
                        assert response.status_code == 202, response.text
                        with lock:
                            acknowledged[k] = (response.json()["log_ids"], time.monotonic())
                        break
                    time.sleep(0.03)

        def stream_producer():
            producer = StreamProducer(SENTINEL_URL, "m", batch_size=BATCH, value_bytes=8,
                                      min_replicas=1, wait_timeout_ms=500)
            for k in stream_batches:
                while not stop.is_set():
                    try:
                        ids, _ = producer.write_once(f"stream-{k}", *_batch(X, y, k))
                    except (NotReplicatedError, redis.RedisError):
                        counts["stream retries"] += 1
                        time.sleep(0.05)
                        continue
                    with lock:
                        acknowledged[k] = (ids, time.monotonic())
                    break
                time.sleep(0.06)
            producer.client.close()

        errors: list[BaseException] = []

        def run(target):
            try:
                target()
            except BaseException as exc:  # a producer's failed assertion fails the test
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(t,), daemon=True)
                   for t in (rest_producer, stream_producer)]
        for thread in threads:
            thread.start()
        _wait(lambda: len(acknowledged) >= 25, "25 acknowledged batches")
        waits = _node(MASTER).info("commandstats")["cmdstat_wait"]["calls"]
        assert waits >= 25  # every acknowledged write waited for the replica
        before = len(acknowledged)
        # the replica falls behind (stopped, its link cut): what the master appends now is
        # not acknowledged, and the kill loses it
        replica = watched.processes[REPLICA]
        replica.send_signal(signal.SIGSTOP)
        try:
            _node(MASTER).execute_command("CLIENT", "KILL", "TYPE", "replica")
            time.sleep(0.3)
            on_master = {i.decode() for i, _ in _node(MASTER).xrange(redis_keys.log_key("m"))}
            killed = time.monotonic()
            watched.kill(MASTER)  # SIGKILL mid-stream
        finally:
            replica.send_signal(signal.SIGCONT)
        _wait(lambda: _master_port() == REPLICA, "the sentinels to promote the replica")
        switched = time.monotonic()
        watched.start(MASTER, "--replicaof", "127.0.0.1", str(REPLICA))  # back, as a replica
        _wait(lambda: _node(MASTER).info("replication")["master_link_status"] == "up",
              "the old master to follow the new one")
        rejoined = time.monotonic()
        for thread in threads:
            thread.join(timeout=90)
            assert not thread.is_alive()
        if errors:
            raise errors[0]
        after = [when for _, when in acknowledged.values() if when > killed]
        deadline = time.monotonic() + 60
        while True:
            info = httpx.get(f"{url}/v1/models/m", timeout=10).json()
            if info["log_end"] and info["log_position"] == info["log_end"]:
                break
            assert time.monotonic() < deadline, f"not drained: {info}"
            time.sleep(0.05)
        served = snapshot_of(httpx.get(f"{url}/v1/models/m/snapshot", timeout=30).content).model
    finally:
        stop.set()
        process.kill()
        process.wait()
    new = _node(REPLICA)
    entries = [LogEntry(i.decode(), f) for i, f in new.xrange(redis_keys.log_key("m"))]
    by_id = {e.id: bytes(e.fields[b"data"]) for e in entries}
    ids = [i for log_ids, _ in acknowledged.values() for i in log_ids]
    assert len(ids) == len(set(ids)) == len(entries)  # each batch once, and nothing else
    for k, (log_ids, _) in acknowledged.items():  # nothing acknowledged was lost
        assert [by_id[i] for i in log_ids] == [_payload(X, y, k)]
    expected, n = oracle_state(entries, X.n_features)
    assert n == (len(rest_batches) + len(stream_batches)) * BATCH
    assert info["examples_applied"] == n == served["n_examples"]  # nothing applied twice
    assert same_state(served, expected)
    assert new.xpending(redis_keys.log_key("m"), redis_keys.CONSUMER_GROUP)["pending"] == 0
    assert 0 < before < len(acknowledged) and after  # killed mid-stream, went on after
    lost = on_master - set(by_id)  # appended to the old master, never acknowledged
    print(f"\nfailover: promoted {switched - killed:.2f} s after the SIGKILL, old master back "
          f"as a replica after {rejoined - killed:.2f} s, first acknowledgement after the "
          f"kill at +{min(after) - killed:.2f} s; {len(acknowledged)} batches acknowledged "
          f"({before} before the kill); {len(lost)} entries the old master had appended "
          f"were lost (each unacknowledged, retried); retries: {counts}")


@pytest.fixture
def lone(servers):
    """A master without replicas."""
    servers.start(LONE)
    return f"redis://127.0.0.1:{LONE}/0"


def _waits(url: str) -> int:
    return redis.Redis.from_url(url).info("commandstats").get("cmdstat_wait", {}).get("calls", 0)


def test_without_a_replica_nothing_is_acknowledged(tmp_path, lone, monkeypatch):
    """MIN_REPLICAS=1 and no replica: 503 after the timeout, the write may be in the
    master's log, a retry with the key appends nothing; MIN_REPLICAS=0: no WAIT at all."""
    body = b"1 1:1 7:0.5\n-1 2:1\n"
    plain = {"content-type": "text/plain"}
    r = redis.Redis.from_url(lone)
    key = redis_keys.log_key("m")
    base = dict(redis_url=lone, data_dir=tmp_path / "data", consumer_block_ms=50,
                snapshot_every_seconds=3600)
    with TestClient(create_app(Settings(**base))) as client:
        assert client.post("/v1/models", json={"name": "m", "algorithm": "sofs", "budget": 5,
                                               "n_features": 10}).status_code == 201
        assert client.post("/v1/models/m/examples", content=body,
                           headers={**plain, "idempotency-key": "a"}).status_code == 202
        assert client.post("/v1/models/m/examples?wait=true", content=body,
                           headers=plain).status_code == 202
        predicted = client.post("/v1/models/m/predict", json={
            "examples": [{"indices": [1], "values": [1.0]}], "return_prediction_ids": True})
        assert predicted.status_code == 200
    assert _waits(lone) == 0  # the default costs no round trip
    StreamProducer(lone, "m").write_once("plain", *(np.array([0, 1]), [3], [1.0], [1]))

    monkeypatch.setenv("FEATUREBUDGET_REDIS_MIN_REPLICAS", "1")  # (storage reads it too)
    monkeypatch.setenv("FEATUREBUDGET_REDIS_WAIT_TIMEOUT_MS", "300")
    settings = Settings(**base, redis_min_replicas=1, redis_wait_timeout_ms=300)
    with TestClient(create_app(settings)) as client:
        length = r.xlen(key)
        applied = client.get("/v1/models/m").json()["examples_applied"]
        started = time.monotonic()
        answer = client.post("/v1/models/m/examples", content=body,
                             headers={**plain, "idempotency-key": "b"})
        assert time.monotonic() - started >= 0.3
        assert answer.status_code == 503, answer.text
        assert answer.headers["retry-after"] == "1"
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert "0 of the 1 Redis replicas" in answer.json()["detail"]
        assert "may or may not be kept" in answer.json()["detail"]
        assert r.xlen(key) == length + 1  # in the master's memory, not acknowledged
        again = client.post("/v1/models/m/examples", content=body,
                            headers={**plain, "idempotency-key": "b"})
        assert again.status_code == 503 and r.xlen(key) == length + 1  # not twice
        assert client.post("/v1/models/m/examples", content=body,
                           headers=plain).status_code == 503
        assert client.post("/v1/models", json={"name": "other", "algorithm": "sofs",
                                               "budget": 5, "n_features": 10}
                           ).status_code == 503
        time.sleep(0.5)  # the fold reads the new entries, no replica has them: not applied
        assert client.get("/v1/models/m").json()["examples_applied"] == applied  # (a read)
    producer = StreamProducer(lone, "m", min_replicas=1, wait_timeout_ms=100)
    for _ in range(2):
        with pytest.raises(NotReplicatedError) as caught:
            producer.write_once("s", np.array([0, 1]), [3], [1.0], [1])
        assert caught.value.confirmed == 0 and len(caught.value.ids) == 1
    assert r.xlen(key) == length + 3  # the REST write without a key, and "s" once
    with pytest.raises(NotReplicatedError):
        producer.add_libsvm(b"1 1:1\n")


def test_sentinel_urls_and_bad_settings(monkeypatch):
    parsed = redis_urls.sentinel_url("redis+sentinel://u:p%40ss@10.0.0.1:26379,[::1]:26380/my%20m/2")
    assert parsed == {"sentinels": [("10.0.0.1", 26379), ("::1", 26380)], "master": "my m",
                      "db": 2, "username": "u", "password": "p@ss"}
    assert redis_urls.sentinel_url("redis+sentinel://h:1/m")["db"] == 0
    assert redis_urls.sentinel_url("redis+sentinel://h:1/m/")["db"] == 0
    for url in ("redis://h:6379/0", "redis+cluster://h:1/"):
        assert redis_urls.sentinel_url(url) is None
    assert redis_urls.cluster_url("redis+sentinel://h:1/m") is None
    for url, message in [("redis+sentinel://h:1", "names the master"),
                         ("redis+sentinel://h:1/", "names the master"),
                         ("redis+sentinel://h/m", "host:port"),
                         ("redis+sentinel://h:1/m/x", "is a number"),
                         ("redis+sentinel://h:1/m?socket_timeout=1", "no options"),
                         ("rediss+sentinel://h:1/m", "TLS")]:
        with pytest.raises(ValueError, match=message):
            redis_urls.sentinel_url(url)
    monkeypatch.setenv("FEATUREBUDGET_REDIS_URL", "redis+sentinel://h:1/")
    with pytest.raises(ValidationError, match="names the master"):
        Settings()
    monkeypatch.setenv("FEATUREBUDGET_REDIS_URL", "redis://h:1/0")
    monkeypatch.setenv("FEATUREBUDGET_REDIS_MIN_REPLICAS", "-1")
    with pytest.raises(ValidationError, match="REDIS_MIN_REPLICAS is a number of Redis"):
        Settings()
    monkeypatch.setenv("FEATUREBUDGET_REDIS_MIN_REPLICAS", "1")
    monkeypatch.setenv("FEATUREBUDGET_REDIS_WAIT_TIMEOUT_MS", "0")
    with pytest.raises(ValidationError, match="redis_wait_timeout_ms"):
        Settings()
    monkeypatch.delenv("FEATUREBUDGET_REDIS_WAIT_TIMEOUT_MS")
    storage = RedisStorage("redis://h:1/0")  # the storage follows the environment
    assert (storage.min_replicas, storage.wait_timeout_ms) == (1, 1000)
    with pytest.raises(ValueError):
        RedisStorage("redis://h:1/0", min_replicas=-1)


def test_serve_refuses_a_sentinel_url_without_a_master(tmp_path):
    env = dict(os.environ, FEATUREBUDGET_REDIS_URL="redis+sentinel://127.0.0.1:18452/")
    done = subprocess.run([sys.executable, "-m", "service.cli", "serve", "--port", "0"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "a Redis Sentinel URL names the master" in done.stdout + done.stderr


def test_confirmed_writes_on_a_cluster(cluster_url):
    """Each write WAITs on the master of its slot (a plain connection to that node); the
    raw reader WAITs after its read; more replicas than a shard has: refused, kept."""
    name = "w"

    async def scenario():
        storage = RedisStorage(cluster_url, min_replicas=1, wait_timeout_ms=2000)
        greedy = RedisStorage(cluster_url, min_replicas=2, wait_timeout_ms=100)
        await storage.open()
        await greedy.open()
        try:
            assert await storage.save_model(name, b'{"v": 1}', create=True)
            assert await storage.save_model(name, b'{"v": 2}', create=False)
            ids = await storage.append(name, [{b"fmt": b"libsvm", b"data": b"1 1:1\n"}])
            again, repeat = await storage.append_once(
                name, [{b"fmt": b"libsvm", b"data": b"1 2:1\n"}], "k", 60.0)
            assert not repeat
            assert await storage.append_once(name, [{b"data": b"x"}], "k", 60.0) == (again,
                                                                                    True)
            reader = storage.reader(name, "c")
            await reader.start(None)
            assert [e.id for e in await reader.read(10, 10)] == ids + again
            with pytest.raises(NotConfirmed, match="1 of the 2 Redis replicas"):
                await greedy.append(name, [{b"data": b"kept anyway"}])
            assert len(await log_entries(storage, name, 10)) == 3
            greedy_reader = greedy.reader(name, "g")
            await greedy_reader.start(None)
            with pytest.raises(NotConfirmed, match="applied once the replicas"):
                await greedy_reader.read(10, 10)
            producer = StreamProducer(cluster_url, name, min_replicas=1)  # on the slot's master
            assert producer.write_once("p", np.array([0, 1]), [3], [1.0], [1])[1] is False
            producer.add_libsvm(b"1 4:1\n")
            with pytest.raises(NotReplicatedError):
                StreamProducer(cluster_url, name, min_replicas=2, wait_timeout_ms=100
                               ).write_once("q", np.array([0, 1]), [3], [1.0], [1])
            assert len(await log_entries(storage, name, 10)) == 6
            producer.client.close()
            assert await storage.delete_model(name)
            assert await storage.load_models() == {}
        finally:
            await storage.close()
            await greedy.close()

    asyncio.run(scenario())
