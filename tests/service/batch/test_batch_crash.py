"""SIGKILL the batch worker (a real `featurebudget worker` process on a real Redis) while
examples stream in: after restart and drain the statistics and the reservoir window equal
one uninterrupted pass over the log (statistics to 1e-10, windows bit for bit); a retrain
killed midway leaves the served version in place and is retried by the next worker."""

from __future__ import annotations

import time

import httpx
import pytest
import redis

from service.schemas import ModelCreate
from service.storage import redis_keys
from tests.support.batch_crash import (
    RUNNING,
    environment,
    kill,
    killed_worker_loses_and_duplicates_nothing,
    start_api,
    start_worker,
)
from tests.support.batch_data import (
    DIABETES_GROUPS,
    NO_POLICY,
    diabetes,
    named_examples,
)

pytestmark = [pytest.mark.slow, pytest.mark.redis]


@pytest.fixture(autouse=True)
def _kill_processes():
    yield
    while RUNNING:
        process = RUNNING.pop()
        if process.poll() is None:
            process.kill()
        process.wait()


@pytest.mark.parametrize("algorithm, params", [
    ("cs-g-omp", {}),
    ("gbfs", {"window": {"kind": "reservoir", "size": 50, "seed": 5}, "n_estimators": 3}),
])
def test_killed_worker_loses_and_duplicates_nothing(redis_url, tmp_path, algorithm, params):
    killed_worker_loses_and_duplicates_nothing(redis_url, tmp_path, algorithm, params)


def test_retrain_killed_midway_keeps_serving_and_is_retried(redis_url, tmp_path):
    X, y = diabetes()
    env = environment(redis_url, tmp_path)
    url, _ = start_api(env, tmp_path)
    body = {"name": "d", "algorithm": "gbfs", "groups": DIABETES_GROUPS,
            "params": {**NO_POLICY, "n_estimators": 3, "max_depth": 2}}
    assert httpx.post(f"{url}/v1/models", json=body, timeout=30).status_code == 201
    worker = start_worker(env, tmp_path)
    rows = named_examples(X, y, DIABETES_GROUPS, 0, 300)
    assert httpx.post(f"{url}/v1/models/d/examples?wait=true", json={"examples": rows},
                      timeout=60).status_code == 202
    job = httpx.post(f"{url}/v1/models/d/retrain", timeout=30).json()
    wait_job(url, job["id"], "succeeded")
    wait_served(url, 1)
    # make the next fit slow, then kill the worker while it runs
    client = redis.Redis.from_url(redis_url)
    slow = dict(body, params={**body["params"], "n_estimators": 3000, "max_depth": 5,
                              "early_stopping_rounds": None})
    client.hset(redis_keys.MODELS_KEY, "d", ModelCreate(**slow).model_dump_json())
    kill(worker)
    worker = start_worker(env, tmp_path)
    job = httpx.post(f"{url}/v1/models/d/retrain", timeout=30).json()
    wait_job(url, job["id"], "running")
    kill(worker)
    predict = httpx.post(f"{url}/v1/models/d/predict", json={
        "examples": named_examples(X, None, DIABETES_GROUPS, 0, 2)}, timeout=30)
    assert predict.status_code == 200 and predict.json()["version"] == 1
    client.hset(redis_keys.MODELS_KEY, "d", ModelCreate(**body).model_dump_json())  # fast again
    start_worker(env, tmp_path)
    finished = wait_job(url, job["id"], "succeeded")
    assert finished["attempts"] == 1 and finished["version"] == 2
    wait_served(url, 2)
    client.close()


def wait_job(url: str, job_id: str, status: str, timeout: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = httpx.get(f"{url}/v1/models/d/jobs/{job_id}", timeout=10).json()
        if job["status"] == status:
            return job
        assert job["status"] != "failed", job
        time.sleep(0.02)
    raise AssertionError(f"job never {status}: {job}")


def wait_served(url: str, version: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if httpx.get(f"{url}/v1/models/d", timeout=10).json()["version"] == version:
            return
        time.sleep(0.02)
    raise AssertionError(f"version {version} never served")


def test_deleting_a_model_leaves_no_key_behind(redis_url, tmp_path):
    X, y = diabetes()
    env = environment(redis_url, tmp_path)
    url, _ = start_api(env, tmp_path)
    body = {"name": "d", "algorithm": "cs-g-omp", "groups": DIABETES_GROUPS,
            "params": NO_POLICY}
    assert httpx.post(f"{url}/v1/models", json=body, timeout=30).status_code == 201
    worker = start_worker(env, tmp_path)
    rows = named_examples(X, y, DIABETES_GROUPS, 0, 200)
    assert httpx.post(f"{url}/v1/models/d/examples?wait=true", json={"examples": rows},
                      timeout=60).status_code == 202
    assert httpx.delete(f"{url}/v1/models/d", timeout=30).status_code == 204
    time.sleep(3.0)  # longer than the worker's model sync
    client = redis.Redis.from_url(redis_url)
    assert [k for k in client.keys("*") if b"{d}" in k] == []
    assert worker.poll() is None
    assert httpx.get(f"{url}/v1/models/d", timeout=10).status_code == 404
    client.close()
