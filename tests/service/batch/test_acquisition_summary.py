"""``GET /v1/models/{model}/acquisition`` and the ``acquisition`` field of ``GET
/v1/models/{model}``: what the served version's per-example policy does on its held-out rows,
computed on a background thread that the route starts ("not started" -> "building" ->
"ready"), "none" with the reason for a version without a policy, 409 / 404 for a model
without one. (The summary is computed in process: the embedded backend is enough.)"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from fastapi.testclient import TestClient

from algorithms.datasets.acquisition_synthetic import make_cube_nm
from service.app import create_app
from tests.service.batch.test_next_per_example import GBFS_PARAMS, NM_GROUPS
from tests.support.batch_api import create_batch, retrain
from tests.support.batch_data import DIABETES_GROUPS, diabetes, named_examples


@pytest.fixture
def backend() -> str:
    return "local"


def ready(client, name: str, timeout: float = 600.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = client.get(f"/v1/models/{name}/acquisition")
        assert response.status_code == 200, response.text
        body = response.json()
        if body["state"] != "building":
            return body
        time.sleep(0.1)
    raise AssertionError(f"the summary of {name!r} was not ready in {timeout} s")


def test_a_gbfs_classifier_on_cube_nm_says_it_reads_the_context(make_settings):
    X, y, *_ = make_cube_nm(1500, seed=1)
    settings = make_settings(batch_worker=True, job_poll_seconds=0.05,
                             version_check_seconds=0.2)
    with TestClient(create_app(settings)) as client:
        create_batch(client, "c", algorithm="gbfs", groups=NM_GROUPS, task="classification",
                     params=GBFS_PARAMS)
        body = {"examples": named_examples(X, np.where(y > 0, 1, -1), NM_GROUPS, 0, 1400,
                                           field="label")}
        assert client.post("/v1/models/c/examples?wait=true", json=body).status_code == 202
        assert retrain(client, "c")["status"] == "succeeded"
        # reading the model starts nothing before the policy is asked for
        assert client.get("/v1/models/c").json()["acquisition"] == {
            "version": 1, "state": "not started"}
        example = named_examples(X, None, NM_GROUPS, 1400, 1401)
        answer = client.post("/v1/models/c/next", json={"examples": example}).json()
        assert answer["answers"][0]["policy_building"]
        # once it is, the summary follows it
        assert client.get("/v1/models/c").json()["acquisition"] == {
            "version": 1, "state": "building"}
        got = ready(client, "c")
        assert got["state"] == "ready" and got["policy"] == "per-example", got
        assert got["loss"] == "log-loss" and got["metric"] == "accuracy"
        assert got["pool"] == [g["name"] for g in NM_GROUPS]   # (at most 8: every group)
        assert got["rows"] == got["window_rows"] > 200   # (under 600: every held-out row)
        assert got["gate"]["per_example"] and got["gate"]["difference"] < 0
        rates = got["exchange_rates"]
        assert len(rates) == 5 and rates[-1]["exchange_rate"] is None
        assert [r["exchange_rate"] for r in rates[:-1]] == sorted(
            r["exchange_rate"] for r in rates[:-1])
        assert rates[-1]["mean_cost"] == pytest.approx(10.0)   # every group
        for entry in rates:
            for key in ("first_choice", "second_choice"):
                assert math.isclose(sum(c["share"] for c in entry[key]), 1.0)
                assert {c["name"] for c in entry[key]} <= {g["name"] for g in NM_GROUPS} | {
                    None}
        cheap = rates[1]   # 0.3 lam_0: the context first, then the block it names
        assert cheap["first_choice"][0] == {"name": "context", "count": got["rows"],
                                            "share": 1.0}
        blocks = {c["name"]: c["share"] for c in cheap["second_choice"]}
        assert set(blocks) == {"block_0", "block_1", "block_2"}, blocks
        assert min(blocks.values()) > 0.2 and cheap["mean_cost"] < 10.0
        assert cheap["metric"] > 0.7, cheap   # (the empty set: 1/2)
        # GET /v1/models/c now shows it as it is, the sequence page too
        assert client.get("/v1/models/c").json()["acquisition"] == {
            k: v for k, v in got.items() if k != "model"}
        page = client.get("/v1/models/c/sequence.html").text
        assert 'id="acquisition-table"' in page and "context 100\u00a0%" in page


def test_a_version_without_held_out_rows_says_why(make_settings):
    X, y = diabetes()
    with TestClient(create_app(make_settings(batch_worker=True, job_poll_seconds=0.05))
                    ) as client:
        create_batch(client, "d")   # anytime regression: no held-out rows
        body = {"examples": named_examples(X, y, DIABETES_GROUPS, 0, 300)}
        assert client.post("/v1/models/d/examples?wait=true", json=body).status_code == 202
        assert retrain(client, "d")["status"] == "succeeded"
        got = client.get("/v1/models/d/acquisition").json()
        assert got["state"] == "none" and "keeps no held-out rows" in got["reason"], got
        assert client.get("/v1/models/d").json()["acquisition"]["state"] == "none"
        page = client.get("/v1/models/d/sequence.html").text
        assert 'data-state="none"' in page and "keeps no held-out rows" in page
        create_batch(client, "untrained")
        assert client.get("/v1/models/untrained/acquisition").status_code == 409
        assert client.get("/v1/models/untrained").json()["acquisition"] is None
        assert client.post("/v1/models", json={"name": "o", "algorithm": "sofs",
                                               "n_features": 4, "budget": 2}).status_code == 201
        refused = client.get("/v1/models/o/acquisition")
        assert refused.status_code == 409 and "acquisition" in refused.json()["detail"]
        assert client.get("/v1/models/missing/acquisition").status_code == 404
