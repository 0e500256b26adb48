"""``featurebudget warmup``: compile every numba kernel the service runs into numba's
on-disk cache.

:func:`warm_all` runs the service itself once, in-process, on a throw-away embedded data
directory: every online learner (direct and hashed feature maps, every ingestion format,
predictions, feedback, snapshot export and restore) and every batch algorithm (fold,
retrain, budgeted predictions). The image runs it at build time, so a container's first
start loads the kernels (about a second) instead of compiling them (about a minute). It
sits above the app it drives: nothing in the app imports this module.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np


def _rows(rng: np.random.Generator, n: int, d: int, nnz: int) -> list[dict]:
    out = []
    for _ in range(n):
        indices = np.sort(rng.choice(d, size=nnz, replace=False))
        out.append({"indices": indices.tolist(), "values": rng.standard_normal(nnz).tolist(),
                    "label": int(rng.choice([-1, 1]))})
    return out


def _check(response, *expected: int):
    if response.status_code not in expected:
        raise RuntimeError(f"warmup: {response.request.method} {response.request.url.path} "
                           f"answered {response.status_code}: {response.text[:500]}")
    return response


def _warm_online(client, algorithm: str, name: str, rng, **shape) -> None:
    from algorithms.online import LEARNERS
    from service import fbx1

    body = {"name": name, "algorithm": algorithm, **shape}
    if LEARNERS[algorithm].selects:
        body["budget"] = 4
    _check(client.post("/v1/models", json=body), 201)
    d = shape.get("n_features") or 64
    url = f"/v1/models/{name}"
    if "hash_bits" in shape:  # named features through the hasher
        examples = [{"features": {"words": {f"w{rng.integers(100)}": 1.0,
                                            f"v{rng.integers(100)}": 0.5}},
                     "label": int(rng.choice([-1, 1]))} for _ in range(20)]
        _check(client.post(f"{url}/examples?wait=true", json={"examples": examples}), 202)
        predict = {"examples": [{"features": {"words": {"w1": 1.0}}}]}
    else:
        rows = _rows(rng, 20, d, 6)
        _check(client.post(f"{url}/examples?wait=true", json={"examples": rows}), 202)
        # libsvm, with one row's indices out of order (the parser sorts them)
        text = f"1 3:0.5 1:1 {d}:-2\n-1 2:0.25\n".encode()
        _check(client.post(f"{url}/examples?wait=true", content=text,
                           headers={"content-type": "text/plain"}), 202)
        indptr = np.array([0, 2, 3], dtype=np.int64)
        indices = np.array([0, d - 1, 1], dtype=np.int32)
        labels = np.array([1, -1], dtype=np.int8)
        for width in (4, 8):  # float32 and float64 values
            values = np.array([1.0, -0.5, 2.0])
            blob = fbx1.encode_batch(indptr, indices, values, labels, value_bytes=width)
            _check(client.post(f"{url}/examples?wait=true", content=blob,
                               headers={"content-type": "application/octet-stream"}), 202)
        predict = {"examples": rows[:3], "return_prediction_ids": True}
    answer = _check(client.post(f"{url}/predict", json=predict), 200).json()
    _warm_view(client, name, predict["examples"])
    for prediction_id in answer.get("prediction_ids") or []:
        _check(client.post(f"{url}/feedback", json={"prediction_id": prediction_id,
                                                     "label": 1}), 200)
    big = {"examples": [{"indices": [0, 1], "values": [1.0, -1.0]}] * 300}  # off the loop
    if "hash_bits" not in shape:
        _check(client.post(f"{url}/predict", json=big), 200)
    _check(client.get(url), 200)
    blob = _check(client.get(f"{url}/snapshot"), 200).content
    _check(client.put(f"{url}/snapshot", content=blob,
                      headers={"content-type": "application/octet-stream"}), 200)
    _check(client.delete(url), 204)


def _warm_view(client, name: str, examples: list[dict]) -> None:
    """The serving view an API process that does not fold the model answers from (Redis
    backend; never used on the embedded one, so run here directly)."""
    from service.ingest import parse_json_examples

    host = client.app.state.manager.hosts[name]
    make_view = getattr(host, "make_view", None)
    if make_view is not None:
        batch = parse_json_examples(examples, host.n_features, host.hasher,
                                    require_labels=False)
        make_view(10).decision_function(batch.X)


_GROUPS = [{"name": "a", "features": ["a1", "a2"], "cost": 1.0},
           {"name": "b", "features": ["b1"], "cost": 2.0},
           {"name": "c", "features": ["c1", "c2", "c3"], "cost": 3.0}]


def _warm_batch(client, algorithm: str, rng, task: str = "regression",
                params: dict | None = None, timeout: float = 600.0) -> str | None:
    """One batch model through fold, retrain and predictions; the reason when its retrain
    failed (e.g. an optional dependency missing), else None."""
    name = f"warm-{algorithm}-{task}"
    body = {"name": name, "algorithm": algorithm, "groups": _GROUPS, "task": task,
            "params": {"retrain_every_examples": None, "retrain_every_seconds": None,
                       **(params or {})}}
    _check(client.post("/v1/models", json=body), 201)
    url = f"/v1/models/{name}"
    weights = {"a1": 1.0, "a2": -0.5, "b1": 0.8, "c1": 0.3, "c2": 0.0, "c3": -0.2}
    examples = []
    for _ in range(120):
        x = {f: float(rng.standard_normal()) for f in weights}
        y = sum(weights[f] * v for f, v in x.items()) + 0.1 * float(rng.standard_normal())
        target = (1 if y >= 0 else -1) if task == "classification" else y
        examples.append({"features": {"a": {"a1": x["a1"], "a2": x["a2"]}, "b": {"b1": x["b1"]},
                                      "c": {"c1": x["c1"], "c2": x["c2"], "c3": x["c3"]}},
                         "label" if task == "classification" else "target": target})
    _check(client.post(f"{url}/examples?wait=true", json={"examples": examples}), 202)
    job = _check(client.post(f"{url}/retrain"), 202).json()
    deadline = time.monotonic() + timeout
    while job.get("status") not in ("succeeded", "failed"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"warmup: retrain of {algorithm} did not finish in {timeout} s")
        time.sleep(0.05)
        job = _check(client.get(f"{url}/jobs/{job['id']}"), 200).json()
    failure = None
    if job["status"] == "failed":
        failure = job.get("error") or "failed"
    else:
        for _ in range(200):  # the version the API serves
            if client.get(url).json().get("version"):
                break
            time.sleep(0.05)
        rows = [{"features": {"a": {"a1": 0.5, "a2": 0.1}}}, {"features": {"b": {"b1": 1.0}}}]
        for extra in ({}, {"budget": 3.0}, {"computed_groups": ["a", "b"]}):
            _check(client.post(f"{url}/predict", json={"examples": rows, **extra}), 200)
        _check(client.post(f"{url}/next", json={"computed_groups": ["a"]}), 200)
        _check(client.get(f"{url}/sequence"), 200)
    _check(client.delete(url), 204)
    return failure


def warm_all(report: Callable[[str], None] | None = None) -> dict[str, str]:
    """Run every kernel the service runs once (see the module docstring); returns the batch
    algorithms whose retrain failed here, with the reason (their kernels may then compile
    at their first retrain). Raises when the service itself fails."""
    import warnings

    with warnings.catch_warnings():  # starlette's note about its HTTP client, not ours
        warnings.simplefilter("ignore", DeprecationWarning)
        from fastapi.testclient import TestClient

    from algorithms.online import LEARNERS
    from algorithms.online._featuremap import DIRECT_MAX_FEATURES
    from service.app import create_app
    from service.batch.families import FAMILIES
    from service.schemas import online_algorithms
    from service.settings import Settings

    report = report or (lambda line: None)
    rng = np.random.default_rng(0)
    failures: dict[str, str] = {}
    from algorithms.sparse.hashing import FeatureHasher

    FeatureHasher(8).transform([{"words": {"a": 1.0, "b": 2.0}}])  # the library's batch hasher
    with tempfile.TemporaryDirectory(prefix="featurebudget-warmup-") as directory:
        settings = Settings(redis_url=None, data_dir=Path(directory) / "data", batch_worker=True,
                            consumer_block_ms=5, job_poll_seconds=0.01,
                            snapshot_every_seconds=3600, version_check_seconds=0.05)
        with TestClient(create_app(settings)) as client:
            for algorithm in online_algorithms():
                started = time.perf_counter()
                _warm_online(client, algorithm, f"warm-{algorithm}", rng, n_features=64)
                _warm_online(client, algorithm, f"warm-{algorithm}-hashed", rng, hash_bits=8)
                big = DIRECT_MAX_FEATURES + 1  # past the direct table: the cuckoo map
                budget = 4 if LEARNERS[algorithm].selects else None
                if LEARNERS[algorithm].memory_bytes(n_features=big, budget=budget) < 64 << 20:
                    _warm_online(client, algorithm, f"warm-{algorithm}-wide", rng,
                                 n_features=big)
                report(f"{algorithm}: {time.perf_counter() - started:.1f} s")
            batch = [case for adapter in FAMILIES.values() for case in adapter.warm_cases]
            for algorithm, task, params in batch:
                started = time.perf_counter()
                failure = _warm_batch(client, algorithm, rng, task, params)
                estimator = (params or {}).get("estimator")
                label = f"{algorithm} ({task}{', ' + estimator if estimator else ''})"
                if failure is not None:
                    failures[label] = failure
                    report(f"{label}: retrain failed here ({failure})")
                else:
                    report(f"{label}: {time.perf_counter() - started:.1f} s")
    return failures
