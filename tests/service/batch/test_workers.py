"""Several uvicorn workers on Redis: one folds each model (lease), all serve, and
/metrics adds up every worker's counters."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import httpx
import numpy as np
import pytest

from algorithms.online import LEARNERS
from tests.support.online import json_examples, same_state
from tests.support.ports import free_port
from tests.support.processes import ROOT, wait_ready
from tests.support.snapshots import snapshot_of

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def test_two_workers_fold_once_and_metrics_add_up(tmp_path, redis_url, x1):
    X, y = x1
    port = free_port()
    env = dict(os.environ, FEATUREBUDGET_REDIS_URL=redis_url,
               PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "prom"), FEATUREBUDGET_LEASE_SECONDS="2")
    (tmp_path / "prom").mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--workers", "2",
         "--log-level", "warning"], cwd=ROOT, env=env,
        stdout=open(tmp_path / "server.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, process)
        with httpx.Client(base_url=url, timeout=30) as client:
            body = {"name": "m", "algorithm": "sofs", "budget": 20, "n_features": 2000}
            assert client.post("/v1/models", json=body).status_code == 201
            for start in range(0, 300, 20):  # new connection each time: both workers answer
                response = httpx.post(f"{url}/v1/models/m/examples?wait=true", timeout=30,
                                      json={"examples": json_examples(X, y, start, start + 20)})
                assert response.status_code == 202, response.text
            for _ in range(6):  # whichever worker answers: read-your-writes
                info = httpx.get(f"{url}/v1/models/m", timeout=30).json()
                assert info["examples_applied"] == 300
                assert info["log_position"] == info["log_end"]
            text = client.get("/metrics").text
            ingested = re.search(r'featurebudget_examples_ingested_total\{format="json",'
                                 r'model="m"\} ([0-9.]+)', text)
            applied = re.search(r'featurebudget_examples_applied_total\{model="m"\} ([0-9.]+)',
                                text)
            assert float(ingested.group(1)) == 300.0 and float(applied.group(1)) == 300.0
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # the owner's snapshot, whichever worker it is
                state = snapshot_of(httpx.get(f"{url}/v1/models/m/snapshot",  # (a new
                                              timeout=30).content).model  # connection: any worker
                if state["n_examples"] == 300:
                    break
                time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    oracle = LEARNERS["sofs"](n_features=2000, budget=20).partial_fit(
        X.row_slice(0, 300), y[:300].astype(np.float64))
    assert same_state(state, oracle.state_dict())
