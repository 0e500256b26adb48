"""Shared fixtures: both backends (embedded files, and a REAL Redis on a dedicated db)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from fastapi.testclient import TestClient

from algorithms.datasets.online_synthetic import make_x1
from service.app import create_app
from service.settings import Settings

REDIS_URL = os.environ.get("FEATUREBUDGET_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


@pytest.fixture
def redis_url():
    """The test Redis database, flushed before and after the test."""
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.skip(f"no Redis server at {REDIS_URL} (set FEATUREBUDGET_TEST_REDIS_URL)")
    client.flushdb()
    yield REDIS_URL
    client.flushdb()
    client.close()


@pytest.fixture(params=["local", pytest.param("redis", marks=pytest.mark.redis)])
def backend(request) -> str:
    return request.param


@pytest.fixture
def make_settings(backend, tmp_path, request):
    """``make_settings(**overrides) -> Settings`` for the parametrized backend."""
    url = request.getfixturevalue("redis_url") if backend == "redis" else None

    def make(**overrides) -> Settings:
        base = dict(redis_url=url, data_dir=tmp_path / "data", snapshot_every_seconds=3600,
                    consumer_block_ms=50)
        base.update(overrides)
        return Settings(**base)

    return make


@pytest.fixture
def client(make_settings):
    with TestClient(create_app(make_settings())) as test_client:
        yield test_client


@pytest.fixture(scope="session")
def x1():
    """A small seeded X1 sample: 600 examples, d = 2000, 60 + 40 non-zeros each."""
    X, y, _ = make_x1(n_samples=600, n_features=2000, n_informative=60, n_noise=40, seed=3)
    return X, y.astype(np.int8)


def json_examples(X, y, start: int, stop: int) -> list[dict]:
    out = []
    for row in range(start, stop):
        lo, hi = X.indptr[row], X.indptr[row + 1]
        out.append({"indices": X.indices[lo:hi].tolist(), "values": X.values[lo:hi].tolist(),
                    "label": int(y[row])})
    return out


def libsvm_text(X, y, start: int, stop: int) -> bytes:
    lines = []
    for row in range(start, stop):
        lo, hi = X.indptr[row], X.indptr[row + 1]
        pairs = " ".join(f"{i + 1}:{v!r}" for i, v in zip(X.indices[lo:hi].tolist(),
                                                           X.values[lo:hi].tolist(), strict=True))
        lines.append(f"{int(y[row])} {pairs}")
    return ("\n".join(lines) + "\n").encode()


def create(client, name="m", algorithm="sofs", **extra) -> dict:
    body = {"name": name, "algorithm": algorithm, "budget": 20, "n_features": 2000}
    body.update(extra)
    response = client.post("/v1/models", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def same_state(a: dict, b: dict) -> bool:
    """Bit-equal learner states (arrays compared exactly, service keys ignored)."""
    keys = {k for k in a if not k.startswith("svc_")} | {k for k in b if not k.startswith("svc_")}
    for key in keys:
        left, right = a.get(key), b.get(key)
        if isinstance(left, np.ndarray) or isinstance(right, np.ndarray):
            left, right = np.asarray(left), np.asarray(right)
            if left.shape != right.shape or left.tobytes() != right.tobytes():
                return False
        elif left != right:
            return False
    return True
