"""A snapshot PUT (and a rollback) of a batch model either applies whole or changes nothing:
every check a route, the warm-up, the sequence page or a later retrain would make runs on
the candidate before anything is stored; a refused restore leaves the stored and served
versions and every answer as they were, after a restart too. Both backends.

The property test mutates real snapshots of every family (nested: the fold state, the
artifact's metadata and members, the model's arrays) and holds every answer to that rule:
refused with 4xx and nothing changed, or accepted and every route 2xx with finite numbers.
``load_tests/fuzz.py --suites restores`` runs it at length.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.app import create_app
from tests.support.restores import (
    FAMILY_CASES,
    answers,
    fitted_snapshot,
    mutation,
    put_and_judge,
    with_change,
)
from tests.support.snapshots import snapshot_of


@pytest.fixture
def app_settings(make_settings):
    return make_settings(batch_worker=True, job_poll_seconds=0.05, version_check_seconds=0.2)


def _client(app_settings):
    return TestClient(create_app(app_settings))


# (algorithm, task, where, key, change): the cases of the issue that were accepted, then
# answered 500 or null
BROKEN = [
    ("gbfs", "regression", "meta", "metrics", lambda v: "a string"),
    ("gbfs", "regression", "meta", "metrics", lambda v: {}),
    ("gbfs", "regression", "meta", "metrics.validation.explained_variance",
     lambda v: [float("-inf")] * len(v)),
    ("gbfs", "regression", "meta", "metrics.train.rmse", lambda v: v[:-1]),
    ("cs-g-omp", "regression", "meta", "metrics", lambda v: {}),
    ("cs-g-omp", "regression", "meta", "metrics.train_explained_variance", lambda v: v[:2]),
    ("cs-g-omp", "regression", "meta", "metrics.validation_explained_variance",
     lambda v: [float("-inf")] * len(v)),
    ("auto", "regression", "meta", "metrics", lambda v: {}),
    ("auto", "regression", "meta", "metrics.answered_by", lambda v: v[:1]),
    ("cs-g-omp", "regression", "model", "correlation", lambda v: v * 1e308),
    ("cs-g-omp", "regression", "model", "x_scale", lambda v: v * 1e-300),
    ("nvsd", "regression", "model", "*kernel_params.degree", lambda v: 10**6),
    ("nvsd", "regression", "model", "*dual_coef_", lambda v: v * 0 + 1e308),
    ("gbfs", "classification", "fold", "train.y", lambda v: v * 0 + 7),
    # a depth of 10^12 made the loader compute 2^(10^12) (the restore campaign's hang)
    ("gbfs", "regression", "model", "max_depth", lambda v: 10**12),
    ("auto", "regression", "model", "gbfs.max_depth", lambda v: 10**12),
]


@pytest.mark.parametrize(("algorithm", "task", "where", "key", "change"), BROKEN,
                         ids=[f"{a}-{w}-{k}" for a, _, w, k, _ in BROKEN])
def test_a_broken_snapshot_is_refused_and_nothing_changes(app_settings, algorithm, task,
                                                          where, key, change):
    with _client(app_settings) as client:
        base = fitted_snapshot(client, algorithm, task)
        before = answers(client)
        blob = with_change(base, where, key, change)
        response = client.put("/v1/models/d/snapshot", content=blob)
        assert response.status_code == 422, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert answers(client) == before
    with _client(app_settings) as client:  # after a restart too
        assert answers(client) == before


def test_a_stored_version_that_cannot_answer_is_never_pointed_at(app_settings):
    """A rollback checks the stored version first: one that cannot answer is a 409 and the
    pointer stays; a version the process cannot load is reported by /readyz."""
    from algorithms.serialization import dumps_state, loads_state

    with _client(app_settings) as client:
        base = fitted_snapshot(client, "gbfs", "regression")
        artifact = loads_state(snapshot_of(base).service["artifact"].tobytes())
        artifact["meta"]["metrics"] = "a string"
        artifact["meta"]["version"] = 7
        storage = client.app.state.manager.storage
        # the broken version stored beside the good one, the pointer left where it was
        client.portal.call(_store_version, storage, "d", 7, dumps_state(artifact))
        host = client.app.state.manager.batch.hosts["d"]
        client.portal.call(host.refresh)
        before = answers(client)
        assert before["versions"][1]["current"] == 1 and before["model"][1]["version"] == 1
        response = client.post("/v1/models/d/rollback", json={"version": 7})
        assert response.status_code == 409, response.text
        assert "cannot be served" in response.json()["detail"]
        assert answers(client) == before
        # a pointer moved behind the service's back: served version kept, /readyz says why
        client.portal.call(storage.set_current_version, "d", 7)
        client.portal.call(host.refresh)
        assert host.served.version == 1
        ready = client.get("/readyz")
        assert ready.status_code == 503 and "d" in ready.json()["serving_errors"]


async def _store_version(storage, model: str, version: int, blob: bytes) -> None:
    """Store ``blob`` as ``version`` and put the current pointer back where it was."""
    current = await storage.current_version(model)
    await storage.publish_artifact(model, version, blob, b'{"version": %d}' % version)
    await storage.set_current_version(model, current)


@pytest.mark.parametrize(("algorithm", "task"), FAMILY_CASES)
def test_any_mutated_snapshot_is_refused_whole_or_answers_everywhere(app_settings,
                                                                     algorithm, task):
    with _client(app_settings) as client:
        base = fitted_snapshot(client, algorithm, task)
        failures: list[str] = []

        @settings(max_examples=25, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(st.data())
        def case(data):
            change = data.draw(mutation(base))
            failures.extend(put_and_judge(client, base, change))

        case()
        assert not failures, "\n".join(failures[:10])
