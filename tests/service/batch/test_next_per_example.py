"""``POST /next`` with ``examples``: each example's next group from the values it carries
(the served version's :class:`~algorithms.acquisition.ConditionedAcquisition`), the stop
rule of ``max_cost`` and ``exchange_rate``, the per-set fallback, bad input refused, and
the answer without ``examples`` as it was."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fastapi.testclient import TestClient
from scipy.special import expit

from algorithms.acquisition import NOT_WORTH, NOTHING_FITS, ConditionedAcquisition
from algorithms.datasets.acquisition_synthetic import make_cube_nm
from service.app import create_app
from tests.support.batch_api import create_batch, retrain
from tests.support.batch_data import DIABETES_GROUPS, diabetes, named_examples
from tests.support.snapshots import snapshot_of

NM_GROUPS = [{"name": "context", "features": ["ctx"], "cost": 1.0}] + [
    {"name": f"block_{b}", "features": [f"b{b}x{j}" for j in range(3)], "cost": 3.0}
    for b in range(3)]
GBFS_PARAMS = {"n_estimators": 120, "max_depth": 3, "window": {"kind": "newest",
                                                               "size": 3000}}


@pytest.fixture
def nm_client(make_settings):
    """A served gbfs classifier on CUBE-NM (1,400 rows posted, a fifth held out)."""
    X, y, *_ = make_cube_nm(1500, seed=1)
    with TestClient(create_app(make_settings(batch_worker=True, job_poll_seconds=0.05,
                                             version_check_seconds=0.2))) as client:
        create_batch(client, "c", algorithm="gbfs", groups=NM_GROUPS, task="classification",
                     params=GBFS_PARAMS)
        body = {"examples": named_examples(X, np.where(y > 0, 1, -1), NM_GROUPS, 0, 1400,
                                           field="label")}
        assert client.post("/v1/models/c/examples?wait=true", json=body).status_code == 202
        job = retrain(client, "c")
        assert job["status"] == "succeeded", job
        policy_built(client, "c", rows(X, 1400, 1401))
        yield client, X[1400:], y[1400:]


def policy_built(client, name: str, examples, timeout: float = 600.0) -> dict:
    """The first per-example answer of a version (per set, ``policy_building``: its build
    starts), then the first one after the build."""
    import time

    first = client.post(f"/v1/models/{name}/next", json={"examples": examples})
    assert first.status_code == 200, first.text
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = client.post(f"/v1/models/{name}/next", json={"examples": examples}).json()
        if not answer["answers"][0]["policy_building"]:
            return first.json()
        time.sleep(0.05)
    raise AssertionError(f"the per-example policy of {name!r} was not built in {timeout} s")


def served_version(client, name: str, groups):
    from service.batch.artifact import unpack
    from service.batch.spec import BatchLayout
    from service.schemas import ModelCreate

    state = snapshot_of(client.get(f"/v1/models/{name}/snapshot").content).service
    spec = ModelCreate(name=name, algorithm="gbfs", groups=groups, task="classification")
    return unpack(state["artifact"].tobytes(), "gbfs", BatchLayout(spec))


def rows(X, start, stop, skip=()):
    return named_examples(X, None, NM_GROUPS, start, stop, skip_groups=skip)


def test_examples_with_different_context_get_different_next_groups(nm_client):
    client, X, _ = nm_client
    body = {"examples": rows(X, 0, 30, skip=("block_0", "block_1", "block_2"))}
    answer = client.post("/v1/models/c/next", json=body)
    assert answer.status_code == 200, answer.text
    answers = answer.json()["answers"]
    assert len(answers) == 30 and {a["policy"] for a in answers} == {"per-example"}
    right = [a["next_group"]["name"] == f"block_{int(X[i, 0])}" for i, a in enumerate(answers)]
    assert np.mean(right) >= 0.9, answers[:3]
    assert len({a["next_group"]["name"] for a in answers}) == 3
    first = answers[0]
    assert first["computed_groups"] == ["context"] and first["cost"] == 1.0
    low, high = first["next_group"]["expected_gain_interval"]
    assert low <= first["next_group"]["expected_gain"] <= high
    assert [c["name"] for c in first["candidates"]] == ["block_0", "block_1", "block_2"]
    for c in first["candidates"]:
        assert c["gain_per_cost"] == pytest.approx(c["expected_gain"] / c["cost"])


def test_served_equals_the_in_process_policy(nm_client):
    client, X, _ = nm_client
    version = served_version(client, "c", NM_GROUPS)
    model, figures = version.model, version.figures
    Xh, yh = version.held_out
    groups = [g.tolist() for g in version.layout.groups]

    def predict(Z):  # the answer for the set of each row (NaN: not computed), calibrated
        out = np.empty(Z.shape[0])
        computed = np.column_stack([~np.isnan(Z[:, g[0]]) for g in groups])
        for key in {tuple(r) for r in computed.tolist()}:
            at = np.flatnonzero((computed == key).all(axis=1))
            S = [g for g, on in enumerate(key) if on]
            scores = model.decision_function(Z[at], computed_groups=S)
            out[at] = expit(figures.figures(S).logits(scores))
        return out

    def fallback(S, cap):
        step = figures.next_group(S, max_cost=cap)
        return None if step is None else step[0]

    policy = ConditionedAcquisition(max_groups=4).fit(
        predict, Xh, (yh > 0).astype(float), groups=groups, costs=[1, 3, 3, 3], loss="log",
        fallback=fallback)
    for S, cap, rate in (([], None, None), ([0], None, None), ([0], 4.0, None),
                         ([0], None, 0.05), ([0, 2], 7.0, 0.0), ([1], 2.0, None)):
        names = [NM_GROUPS[g]["name"] for g in S]
        body = {"examples": rows(X, 0, 8), "computed_groups": names, "max_cost": cap,
                "exchange_rate": rate}
        answers = client.post("/v1/models/c/next", json=body).json()["answers"]
        for i, got in enumerate(answers):
            x = np.full(X.shape[1], np.nan)
            features = [f for g in S for f in groups[g]]
            x[features] = X[i, features]
            want = policy.decide(x, S, max_cost=cap, exchange_rate=rate)
            assert got["policy"] == ("per-example" if want.per_example else "per-set")
            assert got["stop_reason"] == want.stop_reason
            if want.group is None:
                assert got["next_group"] is None
                continue
            assert got["next_group"]["name"] == NM_GROUPS[want.group]["name"], (S, cap, i)
            assert got["next_group"]["expected_gain"] == pytest.approx(want.expected_gain,
                                                                       rel=1e-9, abs=1e-12)


def test_stop_reasons_with_max_cost_and_exchange_rate(nm_client):
    client, X, _ = nm_client
    examples = rows(X, 0, 4, skip=("block_0", "block_1", "block_2"))
    capped = client.post("/v1/models/c/next", json={"examples": examples,
                                                     "max_cost": 3.5}).json()["answers"]
    for a in capped:  # the context costs 1, every block 3: nothing fits 2.5 more
        assert a["next_group"] is None and a["stop_reason"] == NOTHING_FITS
        assert all(c["within_max_cost"] is False for c in a["candidates"])
    dear = client.post("/v1/models/c/next", json={"examples": examples,
                                                  "exchange_rate": 1e6}).json()["answers"]
    assert all(a["next_group"] is None and a["stop_reason"] == NOT_WORTH for a in dear)
    free = client.post("/v1/models/c/next", json={"examples": examples,
                                                  "exchange_rate": 0}).json()["answers"]
    assert all(a["next_group"] is not None and a["stop_reason"] is None for a in free)
    done = client.post("/v1/models/c/next", json={"examples": rows(X, 0, 2)}).json()
    assert all(a["next_group"] is None and a["stop_reason"] == NOTHING_FITS and
               a["candidates"] == [] for a in done["answers"])


@pytest.mark.parametrize(("body", "field"), [
    ({"exchange_rate": -1.0}, "exchange_rate"), ({"exchange_rate": "1"}, "exchange_rate"),
    ({"exchange_rate": True}, "exchange_rate"), ({"examples": []}, "examples"),
    ({"examples": [{"features": {"nope": {"x": 1}}}]}, None), ({"colour": 1}, "colour"),
    ({"max_cost": -2}, "max_cost")])
def test_bad_input_is_422_naming_the_field(nm_client, body, field):
    client, X, _ = nm_client
    full = {"examples": rows(X, 0, 2), **body}
    answer = client.post("/v1/models/c/next", json=full)
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    if field is not None:
        assert any(e.get("field") == field for e in answer.json()["errors"]), answer.text


def test_exchange_rate_needs_examples(nm_client):
    client, *_ = nm_client
    answer = client.post("/v1/models/c/next", json={"exchange_rate": 0.1})
    assert answer.status_code == 422
    assert answer.json()["errors"][0]["field"] == "exchange_rate"


def test_without_examples_the_answer_is_as_before(nm_client):
    client, *_ = nm_client
    version = served_version(client, "c", NM_GROUPS)
    for S, cap in (([], None), ([0], 4.0), ([0, 1], None), ([0, 1, 2, 3], None)):
        names = [NM_GROUPS[g]["name"] for g in S]
        body = {"computed_groups": names, **({} if cap is None else {"max_cost": cap})}
        answer = client.post("/v1/models/c/next", json=body)
        nulls = client.post("/v1/models/c/next", json={**body, "examples": None,
                                                        "exchange_rate": None})
        assert nulls.content == answer.content  # null is absent
        expected = {"model": "c", "version": 1, "computed_groups": names,
                    "cost": version.layout.cost_of(S), "next_group": version.next_group(S, cap)}
        assert answer.content == json.dumps(expected, separators=(",", ":"),
                                            ensure_ascii=False).encode()


def test_families_without_held_out_rows_answer_per_set(make_settings):
    X, y = diabetes()
    with TestClient(create_app(make_settings(batch_worker=True, job_poll_seconds=0.05,
                                             version_check_seconds=0.2))) as client:
        create_batch(client, algorithm="nvsd", params={
            "window": {"kind": "reservoir", "size": 60, "seed": 7}, "nus": [1e-2],
            "n_taus": 3})
        body = {"examples": named_examples(X, y, DIABETES_GROUPS, 0, 200)}
        assert client.post("/v1/models/d/examples?wait=true", json=body).status_code == 202
        assert retrain(client)["status"] == "succeeded"
        examples = named_examples(X, None, DIABETES_GROUPS, 200, 203,
                                  skip_groups=("lipids", "glucose"))
        answers = client.post("/v1/models/d/next", json={"examples": examples}).json()
        per_set = client.post("/v1/models/d/next", json={
            "computed_groups": ["demographics", "exam"]}).json()["next_group"]
        for a in answers["answers"]:
            assert a["policy"] == "per-set" and a["computed_groups"] == ["demographics", "exam"]
            # the version's own sequence may end at these groups (then both say so)
            assert (a["next_group"] or {}).get("name") == (per_set or {}).get("name")
            assert [c["name"] for c in a["candidates"]] == ["lipids", "glucose"]


def test_the_python_client_gives_the_answers(nm_client):
    from clients.http import FeaturebudgetClient

    client, X, _ = nm_client
    examples = rows(X, 0, 3, skip=("block_0", "block_1", "block_2"))
    got = FeaturebudgetClient(http=client).next_groups("c", examples, max_cost=4.0,
                                                       exchange_rate=0.0)
    body = {"examples": examples, "max_cost": 4.0, "exchange_rate": 0.0}
    assert got == client.post("/v1/models/c/next", json=body).json()["answers"]
    assert len(got) == 3 and all(a["next_group"] is not None for a in got)


@pytest.mark.parametrize(("algorithm", "params"), [
    ("auto", {"gbfs_params": {"n_estimators": 40, "max_depth": 3}, "max_specialists": 0}),
    ("cs-g-omp", {})])
def test_auto_and_anytime_classification_answer_from_their_held_out_rows(
        make_settings, algorithm, params):
    """auto's kept validation rows (answer path) and anytime classification's held-out
    reservoir (scorer, calibrated per set) build a policy: gains with intervals."""
    X, y, *_ = make_cube_nm(900, seed=2)
    with TestClient(create_app(make_settings(batch_worker=True, job_poll_seconds=0.05,
                                             version_check_seconds=0.2))) as client:
        create_batch(client, "m", algorithm=algorithm, groups=NM_GROUPS,
                     task="classification", params=params)
        body = {"examples": named_examples(X, np.where(y > 0, 1, -1), NM_GROUPS, 0, 850,
                                           field="label")}
        assert client.post("/v1/models/m/examples?wait=true", json=body).status_code == 202
        job = retrain(client, "m")
        assert job["status"] == "succeeded", job
        examples = rows(X, 850, 856, skip=("block_0", "block_1", "block_2"))
        policy_built(client, "m", examples)
        answer = client.post("/v1/models/m/next", json={"examples": examples})
        assert answer.status_code == 200, answer.text
        for a in answer.json()["answers"]:
            assert a["policy"] in ("per-example", "per-set")
            low, high = a["next_group"]["expected_gain_interval"]
            assert low <= a["next_group"]["expected_gain"] <= high
            assert all(c["expected_gain"] is not None for c in a["candidates"])


def test_the_first_request_starts_the_build_and_answers_per_set(make_settings):
    """A version builds its policy on a background thread that its first per-example
    request starts; that request (and any before the build is done) is answered by the
    per-set rule, marked ``policy_building``; nothing is built at a version swap."""
    X, y, *_ = make_cube_nm(600, seed=3)
    with TestClient(create_app(make_settings(batch_worker=True, job_poll_seconds=0.05,
                                             version_check_seconds=0.2))) as client:
        create_batch(client, "f", algorithm="gbfs", groups=NM_GROUPS, task="classification",
                     params={"n_estimators": 30, "max_depth": 2})
        body = {"examples": named_examples(X, np.where(y > 0, 1, -1), NM_GROUPS, 0, 550,
                                           field="label")}
        assert client.post("/v1/models/f/examples?wait=true", json=body).status_code == 202
        assert retrain(client, "f")["status"] == "succeeded"
        from service.batch.serving import acquisition

        served = client.app.state.manager.batch.hosts["f"].served
        assert served not in acquisition._policies and served not in acquisition._building
        examples = rows(X, 550, 552, skip=("block_0", "block_1", "block_2"))
        first = policy_built(client, "f", examples)
        per_set = client.post("/v1/models/f/next", json={
            "computed_groups": ["context"]}).json()["next_group"]
        for answer in first["answers"]:
            assert answer["policy_building"] and answer["policy"] == "per-set"
            assert answer["next_group"]["name"] == per_set["name"]
        later = client.post("/v1/models/f/next", json={"examples": examples}).json()
        assert not any(a["policy_building"] for a in later["answers"])
