"""Bounded and cancellable retrain jobs, both backends: ``DELETE /jobs/{id}`` (and
``featurebudget retrain --cancel``) stops a running fit at its next progress step and
publishes nothing; a queued job never starts; deleting a model stops its fit; a fit that
runs past ``FEATUREBUDGET_MAX_FIT_SECONDS`` is stopped and fails."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from fastapi.testclient import TestClient

from clients.http import FeaturebudgetClient
from service import fbx1
from service.app import create_app
from service.batch.serving import host_jobs, validation
from service.batch.worker import fold_worker, retrains
from service.cli import main
from service.settings import Settings
from tests.support.batch_data import NO_POLICY
from tests.support.live_server import live_server

GROUPS = [{"name": f"g{j}", "features": [f"f{10 * j + i}" for i in range(10)], "cost": 1}
          for j in range(4)]
SLOW = {"n_estimators": 20000, "max_depth": 5, "early_stopping_rounds": None,
        "window": {"size": 2000}}  # minutes of trees, a progress step each


@pytest.fixture
def fits(monkeypatch) -> list[str]:
    """How each fit of this process ended: "returned" or the exception's name."""
    ended: list[str] = []
    real = retrains.fit

    def recording(*args, **kwargs):
        try:
            result = real(*args, **kwargs)
        except BaseException as exc:
            ended.append(type(exc).__name__)
            raise
        ended.append("returned")
        return result

    monkeypatch.setattr(retrains, "fit", recording)
    return ended


def slow_model(client, name: str = "s") -> None:
    body = {"name": name, "algorithm": "gbfs", "groups": GROUPS,
            "params": {**NO_POLICY, **SLOW}}
    response = client.post("/v1/models", json=body)
    assert response.status_code == 201, response.text
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2000, 40))
    y = X[:, :5].sum(axis=1) + rng.standard_normal(2000)
    payload = fbx1.encode_batch(np.arange(0, X.size + 1, 40), np.tile(np.arange(40), 2000),
                                X.ravel(), y, targets=True)
    response = client.post(f"/v1/models/{name}/examples?wait=true", content=payload,
                           headers={"content-type": "application/octet-stream"})
    assert response.status_code == 202


def wait_job(client, name: str, job_id: str, until, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(f"/v1/models/{name}/jobs/{job_id}").json()
        if until(job):
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.02)


def running(job: dict) -> bool:
    return job["status"] == "running" and job["progress"] > 0.05  # a tree is done


def settings_for(make_settings, **extra) -> Settings:
    return make_settings(batch_worker=True, job_poll_seconds=0.05, job_progress_seconds=0.05,
                         **extra)


@pytest.mark.parametrize("signal", ["in-process", "stored"])
def test_a_running_fit_stops_at_its_next_progress_step(make_settings, fits, monkeypatch,
                                                       signal):
    if signal == "stored":  # the folding process reads the stored request (another process)
        monkeypatch.setattr(fold_worker.BatchFold, "cancel", lambda self, job_id: None)
    with TestClient(create_app(settings_for(make_settings))) as client:
        slow_model(client)
        job_id = client.post("/v1/models/s/retrain").json()["id"]
        wait_job(client, "s", job_id, running)
        asked = time.monotonic()
        response = client.delete(f"/v1/models/s/jobs/{job_id}")
        assert response.status_code == 202, response.text
        assert response.json()["cancel_requested"] is True
        job = wait_job(client, "s", job_id, lambda j: j["status"] != "running", timeout=10)
        assert job["status"] == "cancelled" and job["error"] is None, job
        assert time.monotonic() - asked < 5.0 and job["progress"] < 0.9
        deadline = time.monotonic() + 5
        while fits != ["JobCancelled"]:  # the fit's thread itself stopped
            assert time.monotonic() < deadline, fits
            time.sleep(0.02)
        assert client.get("/v1/models/s/versions").json()["current"] is None
        again = client.delete(f"/v1/models/s/jobs/{job_id}")  # idempotent
        assert again.status_code == 202 and again.json()["status"] == "cancelled"
        counted = [line for line in client.get("/metrics").text.splitlines()
                   if line.startswith("featurebudget_retrains_total{")
                   and 'model="s"' in line and 'outcome="cancelled"' in line
                   and 'algorithm="gbfs"' in line]  # the registry is the process's
        assert len(counted) == 1 and float(counted[0].split()[-1]) >= 1.0


def test_a_queued_job_never_starts_and_finished_jobs_stay(make_settings, fits):
    with TestClient(create_app(settings_for(make_settings))) as client:
        slow_model(client)
        first = client.post("/v1/models/s/retrain").json()["id"]
        wait_job(client, "s", first, running)
        second = client.post("/v1/models/s/retrain").json()["id"]  # waits for the first
        response = client.delete(f"/v1/models/s/jobs/{second}")
        assert response.status_code == 202 and response.json()["status"] == "cancelled"
        assert client.delete(f"/v1/models/s/jobs/{first}").status_code == 202
        wait_job(client, "s", first, lambda j: j["status"] == "cancelled", timeout=10)
        time.sleep(0.3)  # the job loop had its turns: the cancelled one never started
        job = client.get(f"/v1/models/s/jobs/{second}").json()
        assert job["status"] == "cancelled" and job["started_at"] is None
        assert fits == ["JobCancelled"]
        missing = client.delete("/v1/models/s/jobs/nope")
        assert missing.status_code == 404
        assert missing.headers["content-type"].startswith("application/problem+json")

        response = client.post("/v1/models", json={"name": "q", "algorithm": "cs-g-omp",
                                                   "groups": GROUPS, "params": NO_POLICY})
        assert response.status_code == 201
        rows = [{"features": {"g0": {"f0": float(k), "f1": float(k % 3)}}, "target": float(k)}
                for k in range(50)]
        assert client.post("/v1/models/q/examples?wait=true",
                           json={"examples": rows}).status_code == 202
        done = client.post("/v1/models/q/retrain").json()["id"]
        job = wait_job(client, "q", done, lambda j: j["status"] in ("succeeded", "failed"))
        response = client.delete(f"/v1/models/q/jobs/{done}")
        assert response.status_code == 409 and job["status"] in response.json()["detail"]


def test_deleting_a_model_stops_its_fit(make_settings, fits):
    with TestClient(create_app(settings_for(make_settings))) as client:
        slow_model(client)
        job_id = client.post("/v1/models/s/retrain").json()["id"]
        wait_job(client, "s", job_id, running)
        assert client.delete("/v1/models/s").status_code == 204
        deadline = time.monotonic() + 5
        while fits != ["JobCancelled"]:
            assert time.monotonic() < deadline, fits
            time.sleep(0.02)


def test_a_fit_past_the_time_limit_is_stopped_and_fails(make_settings, fits, monkeypatch):
    monkeypatch.setattr(validation, "estimate_fit_seconds", lambda *a, **k: 0.0)
    monkeypatch.setattr(host_jobs, "estimate_fit_seconds", lambda *a, **k: 0.0)
    with TestClient(create_app(settings_for(make_settings, max_fit_seconds=1.0))) as client:
        slow_model(client)
        job_id = client.post("/v1/models/s/retrain").json()["id"]
        job = wait_job(client, "s", job_id, lambda j: j["status"] not in ("queued", "running"))
        assert job["status"] == "failed" and "FEATUREBUDGET_MAX_FIT_SECONDS" in job["error"]
        assert 1.0 <= job["duration_seconds"] < 5.0 and fits == ["JobCancelled"]


def test_cli_retrain_cancel(tmp_path, capsys, fits):
    settings = Settings(redis_url=None, data_dir=tmp_path / "data", api_keys="",
                        consumer_block_ms=20, job_poll_seconds=0.05, job_progress_seconds=0.05)
    with live_server(settings) as url, FeaturebudgetClient(url) as client:
        slow_model(client.http)
        job = client.retrain("s")
        wait_job(client.http, "s", job.id, running)
        assert main(["retrain", "s", "--cancel", job.id, "--wait", "--poll", "0.05",
                     "--quiet", "--url", url, "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["id"] == job.id and out["status"] == "cancelled"
        assert client.job("s", job.id).done
        assert main(["retrain", "s", "--cancel", "nope", "--url", url]) == 1
        assert "404" in capsys.readouterr().err
