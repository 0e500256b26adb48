"""The recipe for a batch family (docs/architecture.md, "Adding a batch family"), proved
with a toy one: a mean predictor over groups (``ToyMean``: the training targets' mean,
whatever was computed). Its adapter (``ToyFamily``) is one class and its registration one
line (``FAMILIES["toy"] = ToyFamily()``); nothing else in the service changes, and the
real app creates the model, folds its examples, retrains it and answers predict, next and
sequence (JSON and page) for it.

The app is driven in a fresh interpreter, so the toy family is registered in no other
test's process; the API reads its algorithms from the registry when it uses them, so the
registration may come before or after ``service.schemas`` is imported (the last test).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from algorithms.serialization import dumps_state, loads_state
from algorithms.states import envelope, open_envelope
from service.batch.curves import rmse
from service.batch.families import FAMILIES, BatchFamily
from service.batch.families.base import window_fold
from service.batch.sizes import FIT_FIXED_SECONDS, HEADER_BYTES, SizeEstimate

ROOT = Path(__file__).resolve().parents[3]
GROUPS = [{"name": "cheap", "features": ["c1", "c2"], "cost": 1.0},
          {"name": "dear", "features": ["d1"], "cost": 5.0},
          {"name": "middle", "features": ["m1"], "cost": 2.0}]


class ToyMean:
    """The training targets' mean, shrunk towards 0 by ``shrink``; fit O(n), predict
    O(rows). Its state goes through the library's envelope (kind ``toy-mean``)."""

    kind = "toy-mean"
    format_version = 1

    def __init__(self, shrink: float = 0.0) -> None:
        self.shrink = shrink

    def check_params(self, n_features: int) -> None:
        if not isinstance(self.shrink, int | float) or not 0.0 <= self.shrink <= 1.0:
            raise ValueError(f"shrink must be in [0, 1], got {self.shrink!r}")

    def fit(self, X: np.ndarray, y: np.ndarray) -> ToyMean:
        self.check_params(X.shape[1])
        self.n_features_in_ = int(X.shape[1])
        self.mean_ = (1.0 - float(self.shrink)) * float(np.mean(y))
        return self

    def predict(self, X) -> np.ndarray:
        return np.full(X.shape[0], self.mean_)

    def to_bytes(self) -> bytes:
        return dumps_state(envelope(self.kind, self.format_version, {
            "shrink": float(self.shrink), "mean": self.mean_,
            "n_features": self.n_features_in_}))

    @classmethod
    def from_bytes(cls, data: bytes) -> ToyMean:
        _, payload = open_envelope(loads_state(data), cls.kind, (1,))
        model = cls(shrink=payload["shrink"])
        model.mean_, model.n_features_in_ = float(payload["mean"]), int(payload["n_features"])
        return model


class ToyFamily(BatchFamily):
    """The adapter: a window family (the defaults of ``BatchFamily``) whose version answers
    the mean for any computed set and suggests the cheapest group still missing."""

    name = "toy"
    algorithms = ("toy-mean",)
    default_window = 100

    def estimator_classes(self, estimator):
        return [ToyMean]

    def build_estimator(self, algorithm, task, layout, params):
        return ToyMean(**params.algorithm)

    def fit_window(self, estimator, task, layout, params, X, y, validation, scaled,
                   progress):
        model = estimator.fit(X, y)
        progress(0.9)
        held = None if validation is None else rmse(model.predict(validation[0]),
                                                    validation[1])
        return model, {"train_rmse": rmse(model.predict(X), y), "validation_rmse": held}

    def model_class(self, info):
        return ToyMean

    def check_fits(self, model, layout, validation):
        if model.n_features_in_ != layout.n_features:
            raise ValueError(f"artifact has {model.n_features_in_} features")

    def answer(self, artifact, X, S):
        scores = artifact.model.predict(X)
        out = {"predictions": scores.tolist(), "groups_used": [], "cost": 0.0,
               "expected_rmse": artifact.info.metrics["validation_rmse"],
               "expected_on": "validation"}
        return artifact.labels(scores, out)

    def next_step(self, artifact, S, budget):
        room = artifact.room(S, budget)
        for g in self.order(artifact):
            if g not in S and (room is None or artifact.layout.costs[g] <= room):
                return g, 0.0
        return None

    def order(self, artifact):
        return [int(g) for g in np.argsort(artifact.layout.costs, kind="stable")]

    def sequence_figures(self, artifact, S, j, metrics):
        return {"train_rmse": metrics["train_rmse"],
                "validation_rmse": metrics["validation_rmse"]}

    def sizes(self, spec, params, versions):
        fold, snapshot, write = window_fold(spec, params)
        return SizeEstimate(fold, snapshot, write, 2 * fold, HEADER_BYTES, HEADER_BYTES,
                            versions)

    def fit_seconds(self, spec, params, examples):
        return FIT_FIXED_SECONDS


def register() -> None:
    """The recipe's one registry line (here at run time)."""
    FAMILIES["toy"] = ToyFamily()


def examples(rng, n: int) -> tuple[list[dict], list[float]]:
    rows, targets = [], []
    for _ in range(n):
        x = rng.normal(size=4)
        target = float(3.0 + x[0] + 0.1 * rng.normal())
        rows.append({"features": {"cheap": {"c1": x[0], "c2": x[1]}, "dear": {"d1": x[2]},
                                  "middle": {"m1": x[3]}}, "target": target})
        targets.append(target)
    return rows, targets


def drive(data_dir: Path) -> dict[str, Any]:
    """Create, post examples, retrain, predict, next and sequence through the real app
    (embedded backend); what it answered."""
    register()
    from fastapi.testclient import TestClient

    from service.app import create_app
    from service.settings import Settings

    settings = Settings(redis_url=None, data_dir=data_dir, snapshot_every_seconds=3600,
                        consumer_block_ms=50, batch_worker=True, job_poll_seconds=0.05,
                        version_check_seconds=0.2)
    out: dict[str, Any] = {}
    with TestClient(create_app(settings)) as client:
        body = {"name": "toy", "algorithm": "toy-mean", "groups": GROUPS,
                "params": {"shrink": 0.0, "validation_fraction": 0.25}}
        bad = client.post("/v1/models", json={**body, "name": "bad",
                                              "params": {"shrinkage": 1}})
        out["unknown_param"] = [bad.status_code, bad.json()]
        created = client.post("/v1/models", json=body)
        out["created"] = [created.status_code, created.json()]
        rows, targets = examples(np.random.default_rng(0), 60)
        posted = client.post("/v1/models/toy/examples?wait=true", json={"examples": rows})
        out["posted"] = [posted.status_code, posted.json().get("accepted")]
        job = client.post("/v1/models/toy/retrain").json()
        deadline = time.monotonic() + 60
        while job["status"] not in ("succeeded", "failed") and time.monotonic() < deadline:
            time.sleep(0.05)
            job = client.get(f"/v1/models/toy/jobs/{job['id']}").json()
        out["job"] = job
        deadline = time.monotonic() + 30
        while client.get("/v1/models/toy").json()["version"] != 1 and \
                time.monotonic() < deadline:
            time.sleep(0.05)
        out["model"] = client.get("/v1/models/toy").json()
        probe = [{"features": row["features"]} for row in rows[:3]]
        out["predict"] = client.post("/v1/models/toy/predict",
                                     json={"examples": probe, "budget": 3.0}).json()
        out["next"] = client.post("/v1/models/toy/next",
                                  json={"computed_groups": ["cheap"], "budget": 3.0}).json()
        out["sequence"] = client.get("/v1/models/toy/sequence").json()
        page = client.get("/v1/models/toy/sequence.html")
        out["page"] = [page.status_code, page.text]
    return out


def test_a_toy_family_is_one_adapter_and_one_registry_line():
    with tempfile.TemporaryDirectory() as directory:
        script = ("import json, sys; from pathlib import Path; "
                  "from tests.service.batch.test_family_recipe import drive; "
                  "print(json.dumps(drive(Path(sys.argv[1]))))")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, "-c", script, str(Path(directory) / "data")],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    status, body = out["unknown_param"]
    assert status == 422 and "shrinkage" in json.dumps(body)
    status, created = out["created"]
    assert status == 201, created
    assert out["posted"] == [202, 60]
    job = out["job"]
    assert job["status"] == "succeeded", job
    assert job["examples_used"] + job["validation_examples"] == 60
    model = out["model"]
    assert (model["family"], model["algorithm"], model["version"]) == ("toy", "toy-mean", 1)
    predict = out["predict"]
    mean = float(np.mean([row["target"] for row in examples(np.random.default_rng(0), 60)[0]]))
    assert predict["version"] == 1 and len(set(predict["predictions"])) == 1
    assert abs(predict["predictions"][0] - mean) < 0.5  # the training part's mean
    assert predict["groups_used"] == [] and predict["expected_on"] == "validation"
    assert predict["next_group"] is None  # every group computed
    step = out["next"]
    assert step["next_group"] == {"name": "middle", "cost": 2.0, "expected_gain": 0.0}
    prefixes = out["sequence"]["prefixes"]
    assert [row.get("name") for row in prefixes] == [None, "cheap", "middle", "dear"]
    assert [row["cumulative_cost"] for row in prefixes] == [0.0, 1.0, 3.0, 8.0]
    assert prefixes[0]["validation_rmse"] == predict["expected_rmse"]
    status, page = out["page"]
    assert status == 200 and "RMSE" in page and "middle" in page and "<svg" in page


def test_a_family_registered_after_the_schemas_are_imported_is_an_algorithm_of_the_api():
    """No import-order effect: the API's algorithms (validation, the JSON schema, the CLI's
    help) are read from the registry when used, not frozen when ``service.schemas`` is
    imported."""
    from service.batch.families import algorithm_families
    from service.cli.parser import build_parser
    from service.schemas import ModelCreate, all_algorithms

    body = {"name": "toy", "algorithm": "toy-mean", "groups": GROUPS}
    assert "toy-mean" not in all_algorithms()
    try:
        register()
        spec = ModelCreate.model_validate(body)
        assert spec.is_batch and spec.family == "toy" and algorithm_families()["toy-mean"] == "toy"
        schema = ModelCreate.model_json_schema()
        assert "toy-mean" in schema["properties"]["algorithm"]["enum"]
        assert "toy-mean" in schema["oneOf"][2]["properties"]["algorithm"]["enum"]
        commands = next(a for a in build_parser()._actions if a.dest == "command")
        create = next(a for a in commands.choices["models"]._actions
                      if a.dest == "action").choices["create"]
        assert "toy-mean" in create.format_help()
    finally:
        FAMILIES.pop("toy", None)
    assert "toy-mean" not in all_algorithms()
