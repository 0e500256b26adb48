"""Batch models over the API in tests: create one (no retrain policy unless given) and
run a retrain to its end."""

from __future__ import annotations

import time

from tests.support.batch_data import DIABETES_GROUPS, NO_POLICY


def create_batch(client, name="d", algorithm="cs-g-omp", groups=DIABETES_GROUPS, **extra):
    body = {"name": name, "algorithm": algorithm, "groups": groups,
            "params": dict(NO_POLICY)}
    body["params"].update(extra.pop("params", {}))
    body.update(extra)
    response = client.post("/v1/models", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def retrain(client, name="d", timeout=120.0) -> dict:
    response = client.post(f"/v1/models/{name}/retrain")
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/v1/models/{name}/jobs/{job_id}").json()
        if job["status"] in ("succeeded", "failed"):
            return job
        time.sleep(0.02)
    raise AssertionError(f"job {job_id} did not finish: {job}")
