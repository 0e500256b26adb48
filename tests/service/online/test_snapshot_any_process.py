"""``GET /snapshot`` through any process answers the model as it is now: a process that does
not fold the model asks the folding one for a snapshot and exports it once it includes the
log's end (online and batch models, two processes on Redis)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from tests.support.batch_data import DIABETES_GROUPS, NO_POLICY, diabetes, named_examples
from tests.support.snapshots import snapshot_of

pytestmark = pytest.mark.parametrize("backend", [pytest.param("redis", marks=pytest.mark.redis)])
SLOW_SNAPSHOTS = {"snapshot_every_seconds": 3600, "snapshot_every_examples": 10**9}


def _examples(n: int) -> dict:
    return {"examples": [{"indices": [i % 5], "values": [1.0], "label": 1 - 2 * (i % 2)}
                         for i in range(n)]}


def test_an_online_snapshot_through_either_process_includes_every_example(make_settings):
    with TestClient(create_app(make_settings(**SLOW_SNAPSHOTS))) as a, \
            TestClient(create_app(make_settings(**SLOW_SNAPSHOTS))) as b:
        assert a.post("/v1/models", json={"name": "m", "algorithm": "pet", "n_features": 5,
                                          "budget": 2}).status_code == 201
        for _ in range(3):
            assert a.post("/v1/models/m/examples?wait=true",
                          json=_examples(10)).status_code == 202
        log_end = a.get("/v1/models/m").json()["log_end"]
        for client in (a, b):
            snapshot = snapshot_of(client.get("/v1/models/m/snapshot").content)
            assert snapshot.service["log_id"] == log_end
            assert snapshot.model["n_examples"] == 30


def test_a_batch_snapshot_through_an_api_process_includes_every_example(make_settings):
    X, y = diabetes()
    with TestClient(create_app(make_settings(batch_worker=True, **SLOW_SNAPSHOTS))) as folds, \
            TestClient(create_app(make_settings(batch_worker=False))) as api:
        body = {"name": "d", "algorithm": "cs-g-omp", "groups": DIABETES_GROUPS,
                "params": dict(NO_POLICY)}
        assert api.post("/v1/models", json=body).status_code == 201
        empty = snapshot_of(api.get("/v1/models/d/snapshot").content).model
        assert empty["examples"] == 0 and empty["kind"] == "featurebudget-batch-fold"
        rows = {"examples": named_examples(X, y, DIABETES_GROUPS, 0, 120)}
        assert api.post("/v1/models/d/examples?wait=true", json=rows).status_code == 202
        state = snapshot_of(api.get("/v1/models/d/snapshot").content).model
        assert state["examples"] == 120
        assert state["applied_id"] == folds.get("/v1/models/d").json()["log_end"]
