"""How the snapshots in this folder were made: exported (``GET /v1/models/{m}/snapshot``) by
the code of commit 74bc18e, the last one whose snapshot files were flat: the model's state
with the service's ``svc_*`` members beside it, before the snapshot envelope (``model.*`` /
``service.*``, :mod:`service.snapshot_file`). They are fixtures of that layout, so never
regenerate them: run with today's code this script writes today's layout.
``expected.json`` holds each model's creation body, the examples it was trained on and what
it answered then; ``tests/test_flat_snapshots.py`` checks that today's code restores each one
(``PUT /snapshot``) and answers the same.

    git worktree add /tmp/old 74bc18e && cd /tmp/old
    python tests/states/flat-snapshots/make_fixtures.py <this folder>
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)
GROUPS = [{"name": "a", "features": ["a1", "a2"], "cost": 1.0},
          {"name": "b", "features": ["b1"], "cost": 2.0},
          {"name": "c", "features": ["c1", "c2"], "cost": 0.5}]
ONLINE = [
    {"name": "pet", "algorithm": "pet", "budget": 5, "n_features": 40},
    {"name": "fofs-hashed", "algorithm": "fofs", "budget": 6, "hash_bits": 8},
]
BATCH = [
    {"name": "gbfs", "algorithm": "gbfs", "task": "classification", "groups": GROUPS,
     "params": {"n_estimators": 6, "max_depth": 2, "validation_fraction": 0.25}},
    {"name": "omp", "algorithm": "cs-g-omp", "groups": GROUPS,
     "params": {"validation_fraction": 0.25}},
]
PROBE_SETS = [None, ["a"], ["a", "c"]]


def online_examples(body: dict, rng, n: int) -> list[dict]:
    out = []
    for _ in range(n):
        if "hash_bits" in body:
            names = rng.choice(30, size=4, replace=False)
            features = {"w": {f"t{k}": float(rng.normal()) for k in names}}
            out.append({"features": features, "label": int(rng.choice([-1, 1]))})
        else:
            indices = sorted(rng.choice(body["n_features"], size=5, replace=False).tolist())
            values = rng.normal(size=5).round(6).tolist()
            label = 1 if values[0] + (indices[0] % 3) * 0.2 > 0 else -1
            out.append({"indices": indices, "values": values, "label": label})
    return out


def batch_examples(body: dict, rng, n: int) -> list[dict]:
    out = []
    for _ in range(n):
        x = rng.normal(size=5).round(6)
        y = x[0] - 2 * x[2] + 0.5 * x[3] + 0.1 * rng.normal()
        features = {"a": {"a1": x[0], "a2": x[1]}, "b": {"b1": x[2]},
                    "c": {"c1": x[3], "c2": x[4]}}
        features = {g: {k: float(v) for k, v in f.items()} for g, f in features.items()}
        if body.get("task") == "classification":
            out.append({"features": features, "label": 1 if y > 0 else -1})
        else:
            out.append({"features": features, "target": float(y)})
    return out


def wait_version(client, name: str) -> None:
    job = client.post(f"/v1/models/{name}/retrain").json()["id"]
    while client.get(f"/v1/models/{name}/jobs/{job}").json()["status"] not in (
            "succeeded", "failed"):
        time.sleep(0.02)


def main() -> None:
    rng = np.random.default_rng(41)
    expected = {}
    with tempfile.TemporaryDirectory() as data_dir:
        settings = Settings(data_dir=data_dir, batch_worker=True, job_poll_seconds=0.05)
        with TestClient(create_app(settings)) as client:
            for body in ONLINE + BATCH:
                name = body["name"]
                assert client.post("/v1/models", json=body).status_code == 201
                maker = batch_examples if "groups" in body else online_examples
                train, probe = maker(body, rng, 120), maker(body, rng, 6)
                answer = client.post(f"/v1/models/{name}/examples?wait=true",
                                     json={"examples": train})
                assert answer.status_code == 202, answer.text
                for example in probe:
                    example.pop("label", None)
                    example.pop("target", None)
                record = {"create": body, "probe": probe}
                if "groups" in body:
                    wait_version(client, name)
                    record["answers"] = {
                        json.dumps(S): client.post(f"/v1/models/{name}/predict", json={
                            "examples": probe, **({} if S is None else {"computed_groups": S})
                        }).json()["answers"] for S in PROBE_SETS}
                else:
                    record["answers"] = client.post(f"/v1/models/{name}/predict",
                                                    json={"examples": probe}).json()
                described = client.get(f"/v1/models/{name}").json()
                record["described"] = {k: described.get(k) for k in (
                    "examples_applied", "progressive_examples", "progressive_accuracy",
                    "n_selected", "selected_features", "examples", "train_examples",
                    "validation_examples")}
                (OUT / f"{name}.snapshot").write_bytes(
                    client.get(f"/v1/models/{name}/snapshot").content)
                expected[name] = record
    (OUT / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
