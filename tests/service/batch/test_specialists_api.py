"""Specialists over the API on both backends: a retrain of an ``auto`` model fits them for
the pinned sets and then the sets ``/predict`` asked for most, its answers equal an
in-process PerSetChoice given the same sets, ``GET /v1/models/{m}`` and the sequence page
list them, and pinned sets naming an unknown group are refused with a 422."""

from __future__ import annotations

import time

import numpy as np
import pytest

from algorithms.per_set import PerSetChoice
from service.batch import requested_sets
from tests.service.batch.test_budgeted_answers import COSTS, GROUPS, _ask, _post, _served
from tests.support.batch_api import create_batch, retrain
from tests.support.batch_data import DIABETES_GROUPS, diabetes, split_like_the_fold

GBFS = {"n_estimators": 20, "max_depth": 3}
NAMES = [g["name"] for g in DIABETES_GROUPS]


def _wait_published(client, storage_shared: bool, model: str = "d") -> None:
    """On a shared backend: until this process's counts were written (the publish loop)."""
    if not storage_shared:
        return
    storage = client.app.state.manager.storage
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        published = client.portal.call(storage.load_requested_sets, model)
        if published and "0,2" in next(iter(published.values())).decode():
            return
        time.sleep(0.05)
    raise AssertionError("the requested sets were not published")


def test_specialists_for_pinned_and_requested_sets_answer_as_in_process(
        batch_client, backend, monkeypatch):
    monkeypatch.setattr(requested_sets, "PUBLISH_SECONDS", 0.05)
    X, y = diabetes()
    params = {"gbfs_params": GBFS, "window": {"kind": "newest", "size": 300},
              "specialist_sets": [["glucose", "exam"]], "max_specialists": 2}
    create_batch(batch_client, algorithm="auto", params=params)
    entries = _post(batch_client, X, y, "regression", [(0, 200), (200, 400)])
    assert retrain(batch_client)["status"] == "succeeded"
    first = batch_client.get("/v1/models/d").json()
    assert [s["groups"] for s in first["specialists"]] == [["exam", "glucose"]]
    for _ in range(3):   # the traffic: mostly {demographics, lipids}, once {exam}
        _ask(batch_client, X, [0, 2])
    _ask(batch_client, X, [1])
    _wait_published(batch_client, backend == "redis")
    assert retrain(batch_client)["status"] == "succeeded"

    described = batch_client.get("/v1/models/d").json()
    assert [s["groups"] for s in described["specialists"]] == [
        ["exam", "glucose"], ["demographics", "lipids"]]  # pinned, then the most requested
    served = _served(batch_client, "auto", "regression")
    assert list(served.model.specialists_) == [(1, 3), (0, 2)]
    Xt, yt, _, _ = split_like_the_fold(entries, 0.2)
    reference = PerSetChoice(groups=GROUPS, costs=COSTS, gbfs_params=GBFS,
                             specialist_sets=[[1, 3], [0, 2]], max_specialists=2).fit(
        Xt[-300:], yt[-300:], X_val=served.model.X_val_, y_val=served.model.y_val_)
    for S in ([0, 2], [1, 3], [1], [0, 1, 2, 3]):
        answer, _ = _ask(batch_client, X, S)
        assert answer["answered_by"] == reference.choice(S)
        np.testing.assert_array_equal(answer["predictions"],
                                      reference.decision_function(X[400:442],
                                                                  computed_groups=S))
        by_half = answer["expected_explained_variance_by_half"]
        assert ("specialist" in by_half) == (tuple(S) in reference.specialists_)
    for row in described["specialists"]:
        S = tuple(sorted(NAMES.index(name) for name in row["groups"]))
        assert row["answers"] == (reference.choice(S) == "specialist")
        assert row["specialist"]["explained_variance"] == pytest.approx(
            reference.specialist_figure(S), rel=1e-12)
    page = batch_client.get("/v1/models/d/sequence.html")
    assert page.status_code == 200 and "demographics + lipids" in page.text


@pytest.mark.parametrize("bad, field, words", [
    ([["exam", "nope"]], "params.specialist_sets[0]", "nope"),
    ("exam", "params.specialist_sets", "list of lists"),
    ([["exam"], "glucose"], "params.specialist_sets[1]", "list of group names"),
])
def test_pinned_sets_naming_unknown_groups_are_refused(client, bad, field, words):
    response = client.post("/v1/models", json={
        "name": "p", "algorithm": "auto", "groups": DIABETES_GROUPS,
        "params": {"specialist_sets": bad}})
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert words in response.text and field in response.text
    assert client.get("/v1/models/p").status_code == 404
