"""The batch crash scenario (kill -9 of ``featurebudget worker`` while examples stream into
a batch model), shared by the crash tests on one Redis and on a Redis Cluster: the API and
worker processes, and the oracle (one uninterrupted fold over the log)."""

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

from clients.stream import redis_client
from service.batch.spec import BatchLayout, split_params
from service.batch.worker.fold_state import BatchFoldState
from service.batch.worker.ingest import parse_batch_entry
from service.schemas import ModelCreate
from service.storage import redis_keys
from tests.support.batch_data import (
    DIABETES_GROUPS,
    NO_POLICY,
    assert_same_fold,
    diabetes,
    named_examples,
)
from tests.support.ports import free_port
from tests.support.processes import ROOT, wait_ready
from tests.support.snapshots import snapshot_of

# every process started, for the tests' clean-up fixtures to kill
RUNNING: list[subprocess.Popen] = []


def environment(redis_url: str, tmp_path: Path) -> dict:
    env = dict(os.environ, FEATUREBUDGET_REDIS_URL=redis_url,
               FEATUREBUDGET_DATA_DIR=str(tmp_path / "data"),
               FEATUREBUDGET_SNAPSHOT_EVERY_EXAMPLES="90",
               FEATUREBUDGET_SNAPSHOT_EVERY_SECONDS="0.2",
               FEATUREBUDGET_TRIM_LOG="false",  # the oracle re-reads the whole log
               FEATUREBUDGET_CONSUMER_BLOCK_MS="20",
               FEATUREBUDGET_MICROBATCH_MAX_ENTRIES="3",
               FEATUREBUDGET_AUTOCLAIM_IDLE_MS="1",
               FEATUREBUDGET_LEASE_SECONDS="1",
               FEATUREBUDGET_JOB_POLL_SECONDS="0.05",
               FEATUREBUDGET_VERSION_CHECK_SECONDS="0.2")
    env.pop("FEATUREBUDGET_BATCH_WORKER", None)
    return env


def start(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-m", "service.cli", *args], cwd=ROOT,
                               env=env, stdout=open(log, "ab"),  # noqa: SIM115
                               stderr=subprocess.STDOUT)
    RUNNING.append(process)
    return process


def start_api(env: dict, tmp_path: Path) -> tuple[str, subprocess.Popen]:
    port = free_port()
    process = start(["serve", "--port", str(port), "--log-level", "warning"], env,
                    tmp_path / "api.log")
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, process)
    return url, process


def start_worker(env: dict, tmp_path: Path) -> subprocess.Popen:
    return start(["worker", "--metrics-port", "0", "--log-level", "warning"], env,
                 tmp_path / "worker.log")


def kill(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait()


def drain(url: str, timeout: float = 120.0, name: str = "d") -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = httpx.get(f"{url}/v1/models/{name}", timeout=10).json()
        if info["log_end"] and info["log_position"] == info["log_end"]:
            return info
        time.sleep(0.05)
    raise AssertionError(f"not drained: {info}")


def one_pass(redis_url: str, spec: ModelCreate) -> dict:
    """The fold state of one uninterrupted pass over the model's whole log."""
    client = redis_client(redis_url)
    entries = client.xrange(redis_keys.log_key(spec.name))
    client.close()
    state = BatchFoldState(spec.family, BatchLayout(spec), split_params(spec))
    for entry_id, fields in entries:
        batch = parse_batch_entry(fields, state.layout, spec.task)
        state.apply_entry(entry_id.decode(), batch.X, batch.labels)
    return state.state_dict()


def killed_worker_loses_and_duplicates_nothing(redis_url: str, tmp_path: Path, algorithm: str,
                                               params: dict, name: str = "d") -> None:
    """SIGKILL `featurebudget worker` 3 times while examples stream into batch model
    ``name`` on the Redis at ``redis_url`` (one server, or a ``redis+cluster://`` URL): its
    folded statistics equal one uninterrupted pass over the log to 1e-10, its windows bit
    for bit."""
    X, y = diabetes()
    env = environment(redis_url, tmp_path)
    url, api = start_api(env, tmp_path)
    body = {"name": name, "algorithm": algorithm, "groups": DIABETES_GROUPS,
            "params": {**NO_POLICY, **params}}
    assert httpx.post(f"{url}/v1/models", json=body, timeout=30).status_code == 201
    worker = start_worker(env, tmp_path)
    rng = random.Random(7)
    done = threading.Event()

    def stream():
        for start_row in range(0, 440, 8):
            rows = named_examples(X, y, DIABETES_GROUPS, start_row, min(start_row + 8, 442))
            response = httpx.post(f"{url}/v1/models/{name}/examples",
                                  json={"examples": rows}, timeout=30)
            assert response.status_code == 202
            time.sleep(0.01)
        done.set()

    thread = threading.Thread(target=stream)
    thread.start()
    kills = 0
    while not done.is_set() or kills < 3:
        time.sleep(rng.uniform(0.2, 0.8))
        if kills < 3:
            kill(worker)
            kills += 1
            worker = start_worker(env, tmp_path)
    thread.join()
    drain(url, name=name)
    worker.send_signal(signal.SIGTERM)  # final snapshot of what it folded
    worker.wait(timeout=60)
    client = redis_client(redis_url)
    blob = client.hget(redis_keys.snapshot_key(name), b"state")
    client.close()
    folded = snapshot_of(blob).model
    spec = ModelCreate(**body)
    expected = one_pass(redis_url, spec)
    assert folded["examples"] == 440
    assert_same_fold(folded, expected)
    # the next scenario on the same Redis finds no batch model left without a worker (its
    # API process would never be ready: /readyz names a model no process folds)
    assert httpx.delete(f"{url}/v1/models/{name}", timeout=30).status_code == 204
    api.send_signal(signal.SIGTERM)
    api.wait(timeout=60)
