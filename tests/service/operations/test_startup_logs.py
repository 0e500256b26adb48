"""At the default log level, `featurebudget serve` and `featurebudget worker` say where
their data is (the backend and the data directory, or the Redis URL without its password),
which models they restored, and how long they took to be ready."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from service.startup import mask_url, model_summary
from tests.support.batch_data import DIABETES_GROUPS
from tests.support.ports import free_port
from tests.support.processes import ROOT, ready, wait_until

READY = re.compile(r"featurebudget ready in (\d+\.\d) s on the (.*?): (.*)$", re.M)


def serve(args: list[str], env: dict, log: Path) -> tuple[str, subprocess.Popen]:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port",
                                str(port), *args], cwd=ROOT, env=env,
                               stdout=open(log, "ab"), stderr=subprocess.STDOUT)  # noqa: SIM115
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: ready(url), "the server", timeout=300, processes=[process])
    except BaseException:
        process.kill()
        process.wait()
        raise
    return url, process


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FEATUREBUDGET_")
           and k != "PROMETHEUS_MULTIPROC_DIR"}
    env.update(extra)
    return env


def test_mask_url_hides_passwords_only():
    assert mask_url("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
    assert mask_url("redis://:s3cret@redis:6379/0") == "redis://:***@redis:6379/0"
    assert mask_url("rediss://app:s3cret@redis.example:6380/2") == \
        "rediss://app:***@redis.example:6380/2"
    assert mask_url("redis://app@redis:6379/0") == "redis://app@redis:6379/0"
    assert mask_url("unix:///run/redis.sock?db=1&password=s3cret") == \
        "unix:///run/redis.sock?db=1&password=***"
    assert "p@ss" not in mask_url("redis://u:p%40ss@h:1/0")
    assert model_summary(["b", "a"], [], []) == "2 models restored (2 online: a, b; 0 batch)"
    assert model_summary([], ["h"], ["x"]) == \
        "1 model restored (0 online; 1 batch: h); 1 out of service: x"


def test_embedded_backend_start_says_directory_models_and_time(tmp_path):
    data = tmp_path / "data"
    log = tmp_path / "serve.log"
    env = clean_env()
    url, process = serve(["--data-dir", str(data)], env, log)
    try:
        for body in ({"name": "spam", "algorithm": "sofs", "budget": 5, "n_features": 100},
                     {"name": "house", "algorithm": "cs-g-omp", "groups": DIABETES_GROUPS}):
            assert httpx.post(f"{url}/v1/models", json=body, timeout=30).status_code == 201
    finally:
        stop(process)
    first = log.read_text()
    url, process = serve(["--data-dir", str(data)], env, log)  # the restart restores them
    stop(process)
    text = log.read_text()[len(first):]
    assert f"featurebudget starting on the local backend in {data.resolve()}" in text
    (seconds, backend, models), = READY.findall(text)
    assert backend == f"local backend in {data.resolve()}"
    assert models == "2 models restored (1 online: spam; 1 batch: house)"
    assert 0 < float(seconds) < 600
    (_, _, models), = READY.findall(first)
    assert models == "0 models restored (0 online; 0 batch)"


@pytest.mark.redis
def test_redis_start_masks_the_password_and_the_worker_says_its_models(tmp_path, redis_url):
    secret = "s3cret-in-the-url"  # Redis without a password accepts any for user default
    url_with_password = redis_url.replace("redis://", f"redis://default:{secret}@", 1)
    masked = redis_url.replace("redis://", "redis://default:***@", 1)
    env = clean_env(FEATUREBUDGET_REDIS_URL=url_with_password,
                    FEATUREBUDGET_DATA_DIR=str(tmp_path / "data"))
    log = tmp_path / "serve.log"
    url, process = serve([], env, log)
    try:
        for body in ({"name": "spam", "algorithm": "pet", "budget": 5, "n_features": 100},
                     {"name": "house", "algorithm": "cs-g-omp", "groups": DIABETES_GROUPS}):
            assert httpx.post(f"{url}/v1/models", json=body, timeout=30).status_code == 201
    finally:
        stop(process)
    url, process = serve(["--workers", "2"], dict(env, PROMETHEUS_MULTIPROC_DIR=str(
        tmp_path)), log)
    stop(process)
    worker_log = tmp_path / "worker.log"
    worker = subprocess.Popen([sys.executable, "-m", "service.cli", "worker", "--metrics-port",
                               "0"], cwd=ROOT, env=env, stdout=open(worker_log, "ab"),  # noqa: SIM115
                              stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: "batch worker" in worker_log.read_text() and
                   " ready in " in worker_log.read_text(), "the worker", timeout=300,
                   processes=[worker])
    finally:
        stop(worker)
    text = log.read_text()
    assert secret not in text and secret not in worker_log.read_text()
    starts = READY.findall(text)
    assert len(starts) == 3  # one serve, then two workers of the second serve
    assert {backend for _, backend, _ in starts} == {f"redis backend at {masked}"}
    assert [models for _, _, models in starts[1:]] == [
        "2 models restored (1 online: spam; 1 batch: house)"] * 2
    assert re.search(rf"batch worker \S+ ready in \d+\.\d s on the redis backend at "
                     rf"{re.escape(masked)}: 1 batch models \(house\)", worker_log.read_text())
