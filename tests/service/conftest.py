"""Shared fixtures: both backends (embedded files, and a REAL Redis on a dedicated db)."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from algorithms.datasets.online_synthetic import make_x1
from service.app import create_app
from service.settings import Settings
from tests.support.redis_cluster import cluster_url  # noqa: F401 (a fixture)
from tests.support.redis_db import REDIS_URL, redis_url  # noqa: F401 (the fixture)


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


@pytest.fixture
def batch_client(make_settings):
    """A test client of an app with the batch worker, quick job polls and version checks."""
    with TestClient(create_app(make_settings(batch_worker=True, job_poll_seconds=0.05,
                                             version_check_seconds=0.2))) as client:
        yield client


@pytest.fixture(scope="module")
def stream_data():
    """The crash tests' stream: 1,600 X1 rows (d = 20,000, 600 non-zeros each), int8 labels."""
    X, y, _ = make_x1(n_samples=1600, seed=11)  # X1: d = 20,000, 600 non-zeros per example
    return X, y.astype(np.int8)
