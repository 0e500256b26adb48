"""Snapshots exported before the snapshot envelope (flat files: the model's state with the
service's ``svc_*`` members beside it; ``tests/states/flat-snapshots/make_fixtures.py``)
still restore (``PUT /snapshot``) into a model created with the same body, and the model
then answers what it answered when the snapshot was taken: an online model's scores bit
for bit, a batch model's version (published from the snapshot's artifact) to 1e-12
relative, and the same counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from tests.support.restores import same

FOLDER = Path(__file__).resolve().parents[2] / "states" / "flat-snapshots"
EXPECTED = json.loads((FOLDER / "expected.json").read_text())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_flat_snapshot_restores_and_answers_as_then(make_settings, name):
    record = EXPECTED[name]
    batch = "groups" in record["create"]
    settings = make_settings(batch_worker=True, job_poll_seconds=0.05)
    with TestClient(create_app(settings)) as client:
        assert client.post("/v1/models", json=record["create"]).status_code == 201
        restored = client.put(f"/v1/models/{name}/snapshot",
                              content=(FOLDER / f"{name}.snapshot").read_bytes())
        assert restored.status_code == 200, restored.text
        if batch:
            for key, answers in record["answers"].items():
                S = json.loads(key)
                got = client.post(f"/v1/models/{name}/predict", json={
                    "examples": record["probe"], **({} if S is None else {"computed_groups": S})
                }).json()["answers"]
                assert same(got, answers, rtol=1e-12), (name, key)
        else:
            got = client.post(f"/v1/models/{name}/predict",
                              json={"examples": record["probe"]}).json()
            want = dict(record["answers"])
            for varies in ("log_position", "prediction_ids"):  # (the new model's log)
                got.pop(varies), want.pop(varies)
            assert got == want  # bit for bit
        described = client.get(f"/v1/models/{name}").json()
        assert {k: described.get(k) for k in record["described"]} == record["described"]
        client.delete(f"/v1/models/{name}")  # (Redis: the next test's store too)
