"""The online crash scenario (kill -9 of ``featurebudget serve`` while examples stream in),
shared by the crash tests on one Redis and on a Redis Cluster: the server process, the
producer, and the oracle (one uninterrupted ``partial_fit`` over the log)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np

from algorithms.online import LEARNERS
from clients.stream import StreamProducer, redis_client
from service import fbx1
from service.ingest import parse_entry
from service.storage import redis_keys
from tests.support.online import concat, same_state
from tests.support.ports import free_port
from tests.support.processes import ROOT, wait_ready
from tests.support.snapshots import snapshot_of

BATCH = 40
KILLS = 3
MODEL = {"name": "m", "algorithm": "sofs", "budget": 50, "n_features": 20_000,
         "params": {"r": 1.0}}

# every Server started, for the tests' clean-up fixtures to kill
RUNNING: list[Server] = []


class Server:
    """``featurebudget serve`` on one port and data directory, killed and restarted at will."""

    def __init__(self, tmp_path: Path, redis_url: str | None) -> None:
        RUNNING.append(self)
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
    return fbx1.encode_batch(piece.indptr, piece.indices, piece.values,
                             y[k * BATCH:(k + 1) * BATCH])


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
    served = snapshot_of(httpx.get(f"{server.url}/v1/models/{name}/snapshot",
                                   timeout=30).content).model
    server.stop()
    entries = [e for e in all_entries(r, name)]
    expected, n = oracle_state(entries, X.n_features)
    assert n == X.n_rows
    assert info["examples_applied"] == n == served["n_examples"]
    assert same_state(served, expected)
    assert r.xpending(redis_keys.log_key(name), redis_keys.CONSUMER_GROUP)["pending"] == 0
    r.close()


def all_entries(r, name: str = "m"):
    from service.storage.base import LogEntry

    for entry_id, fields in r.xrange(redis_keys.log_key(name)):
        yield LogEntry(entry_id.decode(), fields)
