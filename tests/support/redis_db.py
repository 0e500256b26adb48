"""The Redis database tests run on (``FEATUREBUDGET_TEST_REDIS_URL``) and its fixture."""

from __future__ import annotations

import os

import pytest

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
