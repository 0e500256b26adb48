"""Honest sizes and fit times of batch models: the estimate of each part (fold state,
snapshot, fit peak, served and kept versions) against what a fold, a snapshot, two retrains
and two version swaps measure (tracemalloc, in this process, as the embedded backend runs
them); creation refuses what does not fit, naming each part (422), and what would fit too
slowly (422; a retrain 409), with the estimate."""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from fastapi.testclient import TestClient

from algorithms.serialization import dumps_state
from algorithms.sparse import CSRBatch
from service.app import create_app
from service.batch import artifact as artifacts
from service.batch.spec import (
    BatchLayout,
    estimate_fit_seconds,
    estimate_sizes,
    split_params,
)
from service.batch.worker.fit import fit
from service.batch.worker.fold_state import BatchFoldState
from service.schemas import ModelCreate
from tests.support.batch_data import NO_POLICY


def groups(n_groups: int, size: int) -> list[dict]:
    return [{"name": f"g{j}", "features": [f"f{j}_{i}" for i in range(size)], "cost": 1.0}
            for j in range(n_groups)]


def lifecycle(spec: ModelCreate, rows: int, seed: int = 0) -> dict[str, int]:
    """Fold ``rows`` examples (entries of 100), retrain and serve, retrain again while a
    snapshot is written and swap versions, as the embedded process may; byte counts of
    the snapshot and the version."""
    layout, params = BatchLayout(spec), split_params(spec)
    rng = np.random.default_rng(seed)
    D = layout.n_features
    state = BatchFoldState(spec.family, layout, params)
    for start in range(0, rows, 100):
        X = rng.standard_normal((100, D))
        y = X[:, :5].sum(axis=1) + rng.standard_normal(100)
        m = sp.csr_matrix(X)
        state.apply_entries([(f"{start + 1}-0", CSRBatch(
            m.indptr.astype(np.int64), m.indices.astype(np.int32), m.data, D), y)])
        del X, y, m

    def retrain(snapshot_meanwhile: bool = False) -> bytes:
        """A retrain; with ``snapshot_meanwhile`` the fold writes a snapshot while it runs
        (at its first progress step after the start), as the worker's fold loop may."""
        training, validation = state.training_copy()

        def progress(fraction: float) -> None:
            if snapshot_meanwhile and fraction > 0.05 and "snapshot" not in sizes:
                sizes["snapshot"] = len(dumps_state(state.state_dict()))

        model, fit_metrics = fit(spec.family, spec.algorithm, spec.task, layout, params,
                                 training, validation, progress)
        meta = {"version": 1, "family": spec.family, "algorithm": spec.algorithm,
                "task": spec.task, "estimator": params.estimator, "metrics": fit_metrics}
        stats = validation if spec.family == "anytime" else None
        return artifacts.pack(model, stats, meta,
                              artifacts.held_out_for(spec.family, state.held_out_copy()))

    sizes: dict[str, int] = {}
    blob = retrain()
    served = artifacts.unpack(blob, spec.family, layout)
    del blob
    blob = retrain(snapshot_meanwhile=True)
    sizes["artifact"] = len(blob)
    newer = artifacts.unpack(blob, spec.family, layout)  # the swap: the old one still served
    del blob, served, newer
    return sizes


CASES = [  # an anytime model at D = 1,000 and a gbfs window (2,000 rows of 250 features)
    pytest.param(dict(algorithm="cs-g-omp", groups=groups(20, 50)), 1200, id="anytime-D1000"),
    pytest.param(dict(algorithm="gbfs", groups=groups(5, 50),
                      params={"n_estimators": 20, "window": {"size": 2000}}), 2600,
                 id="gbfs-window"),
]


@pytest.mark.parametrize(("body", "rows"), CASES)
def test_estimates_are_within_1_5x_of_the_measured_peak(body, rows):
    body = {"name": "m", **body, "params": {**NO_POLICY, **body.get("params", {})}}
    spec = ModelCreate(**body)
    small = ModelCreate(**{**body, "groups": body["groups"][:2]})
    lifecycle(small, 300)  # imports, compiled kernels: outside the measure
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        sizes = lifecycle(spec, rows)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    estimate = estimate_sizes(spec, split_params(spec), versions_kept=10)
    assert peak <= estimate.peak_bytes <= 1.5 * peak, (peak, estimate)
    for part in ("snapshot", "artifact"):
        measured, estimated = sizes[part], getattr(estimate, part)
        assert measured / 1.5 <= estimated <= 1.5 * measured, (part, measured, estimated)
    assert estimate.versions_kept == 11 * estimate.artifact  # ten kept, and the current
    assert estimate.total == sum(estimate.parts().values())


def test_the_issues_sizes():
    """D = 5,000 anytime (100 groups of 50): about 3.0 GB at its peak against the 3.1 GB
    peak RSS the issue measured, 6.4 GB with its 11 versions: refused under the default
    4 GiB. RelaxedNVSD's default window: about 170 s at D = 12, 50 minutes at D = 32."""
    spec = ModelCreate(name="m", algorithm="cs-g-omp", groups=groups(100, 50))
    estimate = estimate_sizes(spec, split_params(spec), versions_kept=10)
    assert 3.1e9 / 1.5 <= estimate.peak_bytes <= 1.5 * 3.1e9
    assert estimate.versions_kept > 3e9 and estimate.total > 4 << 30
    nvsd = {"algorithm": "nvsd", "groups": groups(3, 4)}
    assert 60 < estimate_fit_seconds(ModelCreate(name="n", **nvsd),
                                     split_params(ModelCreate(name="n", **nvsd))) < 600
    wide = {**nvsd, "groups": groups(8, 4)}
    assert estimate_fit_seconds(ModelCreate(name="n", **wide),
                                split_params(ModelCreate(name="n", **wide))) > 1800


def test_creation_refuses_what_does_not_fit_naming_each_part(make_settings, monkeypatch):
    body = {"name": "big", "algorithm": "cs-g-omp", "groups": groups(20, 50),
            "params": NO_POLICY}
    spec = ModelCreate(**body)
    kept = estimate_sizes(spec, split_params(spec), versions_kept=10)
    none_kept = estimate_sizes(spec, split_params(spec), versions_kept=0)
    limit = (kept.total + none_kept.total) // 2  # fits with no kept version, not with ten
    with TestClient(create_app(make_settings(max_model_bytes=limit))) as client:
        response = client.post("/v1/models", json=body)
        assert response.status_code == 422
        assert response.headers["content-type"].startswith("application/problem+json")
        problem = response.json()
        for words in ("fold state", "snapshot", "fit peak", "served version",
                      "kept versions", "FEATUREBUDGET_MAX_MODEL_BYTES",
                      "FEATUREBUDGET_VERSIONS_KEPT=10"):
            assert words in problem["detail"], words
        parts = {e["part"]: e["bytes"] for e in problem["errors"]}
        assert parts == kept.parts()
        assert client.get("/v1/models/big").status_code == 404
    with TestClient(create_app(make_settings(max_model_bytes=limit, versions_kept=0))) as client:
        assert client.post("/v1/models", json=body).status_code == 201
        assert client.delete("/v1/models/big").status_code == 204

        async def little_room(self, model):
            return none_kept.stored_bytes - 1

        storage = type(client.app.state.manager.storage)
        monkeypatch.setattr(storage, "storage_room", little_room)
        response = client.post("/v1/models", json=body)
        assert response.status_code == 422
        assert "the backend can still store" in response.json()["detail"]


def test_fits_estimated_too_slow_are_refused_with_the_estimate(make_settings):
    slow = {"name": "slow", "algorithm": "nvsd", "params": NO_POLICY,
            "groups": groups(8, 4)}  # RelaxedNVSD on a window of 200 x 32
    gbfs = {"name": "g", "algorithm": "gbfs", "groups": groups(2, 3),
            "params": {**NO_POLICY, "n_estimators": 5, "window": {"size": 50}}}
    with TestClient(create_app(make_settings(batch_worker=True))) as client:
        response = client.post("/v1/models", json=slow)
        assert response.status_code == 422
        problem = response.json()
        assert "FEATUREBUDGET_MAX_FIT_SECONDS" in problem["detail"]
        assert problem["errors"][0]["estimated_seconds"] > 600
        assert client.post("/v1/models", json=gbfs).status_code == 201
        examples = [{"features": {"g0": {f"f0_{i}": float(k + i) for i in range(3)}},
                     "target": float(k)} for k in range(20)]
        assert client.post("/v1/models/g/examples?wait=true",
                           json={"examples": examples}).status_code == 202
    # the limit lowered since the model was created: its retrain is refused (409)
    with TestClient(create_app(make_settings(batch_worker=True,
                                             max_fit_seconds=0.01))) as client:
        response = client.post("/v1/models/g/retrain")
        assert response.status_code == 409
        problem = response.json()
        assert "FEATUREBUDGET_MAX_FIT_SECONDS" in problem["detail"]
        assert problem["errors"][0]["estimated_seconds"] > 0.01
        assert client.get("/v1/models/g/jobs").json()["jobs"] == []
