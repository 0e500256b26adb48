"""The client's tests run against a real service: ``FEATUREBUDGET_CLIENT_TEST_URL``
(e.g. ``http://127.0.0.1:8000``; the tests that need it are skipped without it). Each
run's models have names of their own and are deleted at its end."""

from __future__ import annotations

import os
import random
import uuid

import pytest

from featurebudget_client import FeaturebudgetClient

GROUPS = [("exam", ["bmi", "bp"], 1.0), ("blood", ["s1"], 5.0)]


@pytest.fixture(scope="session")
def url() -> str:
    found = os.environ.get("FEATUREBUDGET_CLIENT_TEST_URL")
    if not found:
        pytest.skip("FEATUREBUDGET_CLIENT_TEST_URL names no service")
    return found


@pytest.fixture(scope="session")
def client(url):
    with FeaturebudgetClient(url, timeout=120) as client:
        yield client


def _name(kind: str) -> str:
    return f"client-test-{kind}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def online_model(client):
    """An online model of 10 features that has learned 40 examples (label: sign of x0)."""
    name = _name("online")
    client.create_model(name, algorithm="pet", n_features=10, budget=3)
    rng = random.Random(0)
    examples = []
    for _ in range(40):
        x = [rng.gauss(0, 1) for _ in range(3)]
        examples.append({"indices": [0, 1, 2], "values": x, "label": 1 if x[0] > 0 else -1})
    client.post_examples(name, examples, wait=True)
    yield name
    client.delete_model(name)


@pytest.fixture(scope="session")
def batch_model(client):
    """A trained cs-g-omp regression model over GROUPS (target 2·bmi + s1)."""
    name = _name("batch")
    client.create_batch_model(name, algorithm="cs-g-omp", groups=GROUPS)
    rng = random.Random(1)
    examples = []
    for _ in range(120):
        bmi, bp, s1 = (rng.gauss(0, 1) for _ in range(3))
        examples.append({"features": {"exam": {"bmi": bmi, "bp": bp}, "blood": {"s1": s1}},
                         "target": 2 * bmi + s1})
    client.post_examples(name, examples, wait=True)
    job = client.wait_for_job(name, client.retrain(name).id, timeout=300)
    assert job.succeeded, job.error
    yield name
    client.delete_model(name)
