"""Batch models end to end on both backends: create with groups, stream named / libsvm /
binary examples, retrain, and the served version equals the in-process model trained on the
same examples; versions, rollback, hot swap under load; bad input changes nothing."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from fastapi.testclient import TestClient

from algorithms.anytime import AnytimeLinearModel
from algorithms.datasets.anytime_synthetic import make_anytime_groups
from algorithms.gbfs import GBFS
from algorithms.nvsd import RelaxedNVSD
from service import fbx1
from service.app import create_app
from service.storage import redis_keys
from tests.support.batch_api import create_batch, retrain
from tests.support.batch_data import (
    DIABETES_GROUPS,
    diabetes,
    named_examples,
    reference_statistics,
    split_like_the_fold,
)
from tests.support.snapshots import snapshot_bytes, snapshot_of


def wait_version(client, name: str, version: int, timeout=10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if client.get(f"/v1/models/{name}").json()["version"] == version:
            return
        time.sleep(0.02)
    raise AssertionError(f"version {version} never served")


def post_named(client, name, X, y, start, stop, **kw):
    response = client.post(f"/v1/models/{name}/examples?wait=true",
                           json={"examples": named_examples(X, y, DIABETES_GROUPS, start, stop,
                                                            **kw)})
    assert response.status_code == 202, response.text
    return response.json()["log_ids"][0]


def diabetes_entries(client, name, X, y, chunks):
    """Post row chunks, one log entry each; [(log id, X rows, y rows)]."""
    entries = []
    for start, stop in chunks:
        entries.append((post_named(client, name, X, y, start, stop), X[start:stop],
                        y[start:stop]))
    return entries


def test_anytime_served_version_equals_the_in_process_model(batch_client):
    X, y = diabetes()
    create_batch(batch_client)
    entries = diabetes_entries(batch_client, "d", X, y, [(0, 150), (150, 300), (300, 400)])
    job = retrain(batch_client)
    assert job["status"] == "succeeded", job
    assert job["trained_through"] == entries[-1][0] and job["version"] == 1
    train, validation = reference_statistics(entries, 0.2, 10)
    assert job["examples_used"] == train.n and job["validation_examples"] == validation.n
    groups = [np.arange(0, 2), np.arange(2, 4), np.arange(4, 7), np.arange(7, 10)]
    reference = AnytimeLinearModel(groups=groups, costs=[1, 2, 3, 4]).fit_statistics(
        train, validation=validation)
    sequence = batch_client.get("/v1/models/d/sequence").json()
    names = [row.get("name") for row in sequence["prefixes"][1:]]
    assert names == [DIABETES_GROUPS[g]["name"] for g in reference.sequence_]
    rows = named_examples(X, None, DIABETES_GROUPS, 400, 442)
    for j in range(len(reference.sequence_) + 1):
        budget = float(reference.cumulative_cost_[j])
        answer = batch_client.post("/v1/models/d/predict",
                                   json={"examples": rows, "budget": budget}).json()
        expected = reference.predict(X[400:442], budget=budget)
        np.testing.assert_allclose(answer["predictions"], expected, rtol=1e-10, atol=1e-10)
        assert answer["version"] == 1
        assert sorted(answer["groups_used"]) == sorted(
            DIABETES_GROUPS[g]["name"] for g in reference.sequence_[:j])
        np.testing.assert_allclose(answer["expected_explained_variance"],
                                   reference.validation_explained_variance_[j], atol=1e-10)
    # any subset, not only prefixes; the empty set is the mean
    for subset in ([], [1, 3], [0, 2, 3]):
        chosen = [DIABETES_GROUPS[g]["name"] for g in subset]
        answer = batch_client.post("/v1/models/d/predict",
                                   json={"examples": rows, "computed_groups": chosen}).json()
        np.testing.assert_allclose(answer["predictions"],
                                   reference.predict(X[400:442], groups=subset), rtol=1e-10,
                                   atol=1e-10)
        g = reference.next_group(subset)
        assert (answer["next_group"] or {}).get("name") == (
            None if g is None else DIABETES_GROUPS[g]["name"])


def test_per_example_computed_sets_answer_each_example(batch_client):
    X, y = diabetes()
    create_batch(batch_client)
    diabetes_entries(batch_client, "d", X, y, [(0, 300)])
    assert retrain(batch_client)["status"] == "succeeded"
    full = named_examples(X, None, DIABETES_GROUPS, 300, 302)
    partial = named_examples(X, None, DIABETES_GROUPS, 302, 303, skip_groups=("lipids",
                                                                              "glucose"))
    answer = batch_client.post("/v1/models/d/predict",
                               json={"examples": full + partial}).json()
    assert answer["groups_used"][0] == ["demographics", "exam", "lipids", "glucose"]
    assert answer["groups_used"][2] == ["demographics", "exam"]
    alone = batch_client.post("/v1/models/d/predict", json={
        "examples": partial, "computed_groups": ["demographics", "exam"]}).json()
    assert answer["predictions"][2] == pytest.approx(alone["predictions"][0], rel=1e-12)
    assert answer["next_group"][0] is None and answer["next_group"][2] is not None


def test_gbfs_served_trees_equal_the_in_process_fit(batch_client):
    X, y = diabetes()
    params = {"n_estimators": 25, "max_depth": 3, "mu": 5.0,
              "window": {"kind": "newest", "size": 250}}
    create_batch(batch_client, algorithm="gbfs", params=params)
    entries = diabetes_entries(batch_client, "d", X, y, [(0, 200), (200, 400)])
    job = retrain(batch_client)
    assert job["status"] == "succeeded", job
    Xt, yt, Xv, yv = split_like_the_fold(entries, 0.2)
    Xt, yt = Xt[-250:], yt[-250:]  # the newest 250 training examples, in log order
    reference = GBFS(loss="squared", n_estimators=25, max_depth=3, mu=5.0,
                     feature_groups=[[0, 1], [2, 3], [4, 5, 6], [7, 8, 9]],
                     group_costs=[1, 2, 3, 4]).fit(Xt, yt)
    snapshot = batch_client.get("/v1/models/d/snapshot").content
    from service.batch.artifact import unpack
    from service.batch.spec import BatchLayout
    from service.schemas import ModelCreate

    opened = snapshot_of(snapshot)
    state, service = opened.model, opened.service
    spec = ModelCreate(name="d", algorithm="gbfs", groups=DIABETES_GROUPS)
    version = unpack(service["artifact"].tobytes(), "gbfs", BatchLayout(spec))
    served = version.model
    from algorithms.per_set.figures import SetFigures

    held_out = SetFigures(lambda rows, S: reference.decision_function(rows, computed_groups=S),
                          *version.held_out, task="regression",
                          groups=reference.feature_groups, costs=[1, 2, 3, 4])
    for name in ("tree_feature_", "tree_threshold_", "tree_value_", "tree_split_value_"):
        assert np.array_equal(getattr(served, name), getattr(reference, name)), name
    kept = len(state["validation.y"])  # the newest held-out examples (ring order)
    np.testing.assert_array_equal(np.sort(state["validation.y"]), np.sort(yv[-kept:]))
    rows = named_examples(X, None, DIABETES_GROUPS, 400, 442)
    for subset in ([], [0], [1, 2], [0, 1, 2, 3]):
        chosen = [DIABETES_GROUPS[g]["name"] for g in subset]
        answer = batch_client.post("/v1/models/d/predict",
                                   json={"examples": rows, "computed_groups": chosen}).json()
        features = [f for g in subset for f in reference.feature_groups[g]]
        np.testing.assert_array_equal(answer["predictions"],
                                      reference.predict(X[400:442], computed=features))
        step = held_out.next_group(subset)  # by held-out gain per unit cost
        assert (answer["next_group"] or {}).get("name") == (
            None if step is None else DIABETES_GROUPS[step[0]]["name"])


def test_nvsd_served_predictions_equal_the_in_process_fit(batch_client):
    X, y = diabetes()
    params = {"window": {"kind": "reservoir", "size": 60, "seed": 7}, "nus": [1e-2],
              "n_taus": 3}
    create_batch(batch_client, algorithm="nvsd", params=params)
    diabetes_entries(batch_client, "d", X, y, [(0, 100), (100, 200)])
    job = retrain(batch_client)
    assert job["status"] == "succeeded", job
    state = snapshot_of(batch_client.get("/v1/models/d/snapshot").content).model
    reference = RelaxedNVSD(nus=[1e-2], n_taus=3, regularizer="gl",
                            groups=[[0, 1], [2, 3], [4, 5, 6], [7, 8, 9]]).fit(
        state["train.X"], state["train.y"], validation=(state["validation.X"],
                                                        state["validation.y"]))
    rows = named_examples(X, None, DIABETES_GROUPS, 400, 442)
    answer = batch_client.post("/v1/models/d/predict", json={"examples": rows}).json()
    np.testing.assert_array_equal(answer["predictions"], reference.predict(X[400:442]))
    exam = batch_client.post("/v1/models/d/predict", json={
        "examples": rows, "computed_groups": ["exam"]}).json()
    np.testing.assert_array_equal(exam["predictions"],
                                  reference.predict(X[400:442], computed=[2, 3]))


def test_synthetic_groups_over_libsvm_and_binary(batch_client):
    data = make_anytime_groups(n_samples=600, seed=3)
    D = data.X.shape[1]
    groups = [{"name": f"g{j}", "features": [f"f{i}" for i in g], "cost": float(c)}
              for j, (g, c) in enumerate(zip(data.groups, data.costs, strict=True))]
    create_batch(batch_client, name="s", algorithm="cs-g-fr", groups=groups)
    entries = []
    text = "\n".join(f"{float(data.y[r])!r} " + " ".join(f"{i + 1}:{float(data.X[r, i])!r}"
                                                         for i in range(D))
                     for r in range(300)) + "\n"
    response = batch_client.post("/v1/models/s/examples?wait=true", content=text,
                                 headers={"content-type": "text/plain"})
    assert response.status_code == 202, response.text
    entries.append((response.json()["log_ids"][0], data.X[:300], data.y[:300]))
    dense = data.X[300:]
    indptr = np.arange(0, dense.size + 1, D)
    payload = fbx1.encode_batch(indptr, np.tile(np.arange(D), len(dense)), dense.ravel(),
                                data.y[300:], targets=True)
    response = batch_client.post("/v1/models/s/examples?wait=true", content=payload,
                                 headers={"content-type": "application/octet-stream"})
    assert response.status_code == 202, response.text
    entries.append((response.json()["log_ids"][0], data.X[300:], data.y[300:]))
    assert retrain(batch_client, "s")["status"] == "succeeded"
    train, validation = reference_statistics(entries, 0.2, D)
    reference = AnytimeLinearModel(groups=data.groups, costs=data.costs,
                                   method="cs-g-fr").fit_statistics(train,
                                                                    validation=validation)
    prefixes = batch_client.get("/v1/models/s/sequence").json()["prefixes"]
    assert [p.get("name") for p in prefixes[1:]] == [f"g{g}" for g in reference.sequence_]
    np.testing.assert_allclose([p["train_explained_variance"] for p in prefixes],
                               reference.train_explained_variance_, atol=1e-10)
    np.testing.assert_allclose([p["validation_explained_variance"] for p in prefixes],
                               reference.validation_explained_variance_, atol=1e-10)


def test_versions_rollback_and_pruning(make_settings):
    settings = make_settings(batch_worker=True, job_poll_seconds=0.05, versions_kept=3,
                             version_check_seconds=0.2)
    X, y = diabetes()
    with TestClient(create_app(settings)) as client:
        create_batch(client)
        for k in range(5):
            post_named(client, "d", X, y, 80 * k, 80 * k + 80)
            assert retrain(client)["version"] == k + 1
        versions = client.get("/v1/models/d/versions").json()
        assert versions["current"] == 5
        assert [v["version"] for v in versions["versions"]] == [5, 4, 3]
        assert client.post("/v1/models/d/rollback", json={"version": 4}).json()["current"] == 4
        wait_version(client, "d", 4)
        assert client.post("/v1/models/d/predict", json={
            "examples": named_examples(X, None, DIABETES_GROUPS, 0, 1)}).json()["version"] == 4
        gone = client.post("/v1/models/d/rollback", json={"version": 1})
        assert gone.status_code == 409 and "no version 1" in gone.json()["detail"]
        assert gone.headers["content-type"].startswith("application/problem+json")
        post_named(client, "d", X, y, 400, 440)
        assert retrain(client)["version"] == 6  # above every earlier number
    with TestClient(create_app(settings)) as client:  # restart: the pointer survives
        assert client.get("/v1/models/d").json()["version"] == 6


def test_hot_swap_and_rollback_under_load(batch_client):
    X, y = diabetes()
    create_batch(batch_client)
    post_named(batch_client, "d", X, y, 0, 40)
    assert retrain(batch_client)["version"] == 1
    seen: list[int] = []
    errors: list[str] = []
    stop = threading.Event()
    rows = named_examples(X, None, DIABETES_GROUPS, 0, 3)

    def predict_forever():
        while not stop.is_set():
            response = batch_client.post("/v1/models/d/predict", json={"examples": rows})
            if response.status_code != 200:
                errors.append(response.text)
            else:
                seen.append(response.json()["version"])

    thread = threading.Thread(target=predict_forever)
    thread.start()
    try:
        for k in range(20):
            post_named(batch_client, "d", X, y, 40 + 20 * k, 60 + 20 * k)
            assert retrain(batch_client)["status"] == "succeeded"
        wait_version(batch_client, "d", 21)
        time.sleep(0.1)
        during_publishes = len(seen)
        batch_client.post("/v1/models/d/rollback", json={"version": 15})
        wait_version(batch_client, "d", 15)
        time.sleep(0.1)
    finally:
        stop.set()
        thread.join()
    assert not errors
    assert seen[:during_publishes] == sorted(seen[:during_publishes])
    assert 21 in seen and len(set(seen[:during_publishes])) >= 3
    after = seen[during_publishes:]
    assert after and after[-1] == 15 and after == sorted(after, key=lambda v: v == 15)


BAD_CREATES = [
    ({"params": {"not_a_param": 1}}, "not_a_param"),
    ({"params": {"alpha": -1}}, "alpha"),
    ({"groups": []}, "groups"),
    ({"groups": [{"name": "a", "features": ["x"], "cost": 1}, {"name": "b",
                  "features": ["x"], "cost": 1}]}, "two groups"),
    ({"groups": [{"name": "a", "features": ["x"], "cost": -1}]}, "cost"),
    ({"groups": [{"name": "a", "features": ["x"], "cost": 1}, {"name": "a",
                  "features": ["y"], "cost": 1}]}, "twice"),
    ({"groups": [{"name": "a", "features": [], "cost": 1}]}, "features"),
    ({"n_features": 10}, "n_features"),
    ({"params": {"window": {"kind": "newest", "size": 10}}}, "window"),
    ({"task": "ranking"}, "task"),
]


@pytest.mark.parametrize(("change", "named"), BAD_CREATES)
def test_bad_creations_are_refused_and_nothing_is_created(batch_client, change, named):
    body = {"name": "bad", "algorithm": "cs-g-omp", "groups": DIABETES_GROUPS}
    body.update(change)
    response = batch_client.post("/v1/models", json=body)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert named in response.text
    assert batch_client.get("/v1/models/bad").status_code == 404


def test_sizes_are_checked_at_creation(make_settings):
    with TestClient(create_app(make_settings(max_model_bytes=1 << 20))) as client:
        groups = [{"name": f"g{j}", "features": [f"f{j}_{i}" for i in range(50)], "cost": 1}
                  for j in range(4)]
        response = client.post("/v1/models", json={"name": "big", "algorithm": "cs-g-omp",
                                                   "groups": groups})
        assert response.status_code == 422
        assert "FEATUREBUDGET_MAX_MODEL_BYTES" in response.text and "g0" in response.text


BAD_EXAMPLES = [
    ({"features": {"nope": {"age": 1.0}}, "target": 1.0}, "features.nope"),
    ({"features": {"exam": {"weight": 1.0}}, "target": 1.0}, "features.exam.weight"),
    ({"features": {"exam": {"bmi": 1.0}}}, "target"),
    ({"features": {"exam": {"bmi": "1.0"}}, "target": 1.0}, "features.exam.bmi"),
    ({"features": {"exam": {"bmi": True}}, "target": 1.0}, "features.exam.bmi"),
    ({"features": {"exam": {"bmi": 1.0}}, "target": "x"}, "target"),
    ({"indices": [10], "values": [1.0], "target": 1.0}, "indices"),
    ({"features": {"exam": {"bmi": 1.0}}, "label": 1}, "target"),
]


@pytest.mark.parametrize(("bad", "field"), BAD_EXAMPLES)
def test_bad_examples_are_refused_whole(batch_client, bad, field):
    X, y = diabetes()
    create_batch(batch_client)
    good = named_examples(X, y, DIABETES_GROUPS, 0, 2)
    response = batch_client.post("/v1/models/d/examples", json={"examples": [*good, bad]})
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["errors"][0]["item"] == 2 and field in problem["errors"][0]["field"]
    assert batch_client.get("/v1/models/d").json()["log_end"] is None


def test_state_errors_are_409_and_bad_predict_fields_are_422(batch_client):
    X, y = diabetes()
    create_batch(batch_client)
    response = batch_client.post("/v1/models/d/retrain")
    assert response.status_code == 409 and "needs at least 2" in response.json()["detail"]
    response = batch_client.post("/v1/models/d/predict", json={
        "examples": named_examples(X, None, DIABETES_GROUPS, 0, 1)})
    assert response.status_code == 409 and "retrain" in response.json()["detail"]
    post_named(batch_client, "d", X, y, 0, 100)
    assert retrain(batch_client)["status"] == "succeeded"
    rows = named_examples(X, None, DIABETES_GROUPS, 0, 1)
    for body, field in [({"budget": -1}, "budget"), ({"budget": "x"}, "budget"),
                        ({"computed_groups": ["nope"]}, "computed_groups"),
                        ({"computed_groups": ["exam"], "budget": 3}, "budget"),
                        ({"return_prediction_ids": True}, "return_prediction_ids")]:
        response = batch_client.post("/v1/models/d/predict", json={"examples": rows, **body})
        assert response.status_code == 422, (body, response.text)
        assert response.json()["errors"][0]["field"] == field
    assert batch_client.post("/v1/models/d/feedback", json={"prediction_id": "x",
                                                            "label": 1}).status_code == 409
    assert batch_client.get("/v1/models/d/features").status_code == 409
    create = {"name": "o", "algorithm": "sofs", "n_features": 10, "budget": 2}
    assert batch_client.post("/v1/models", json=create).status_code == 201
    assert batch_client.post("/v1/models/o/retrain").status_code == 409
    response = batch_client.post("/v1/models/o/predict", json={
        "examples": [{"indices": [1], "values": [1.0]}], "budget": 2})
    assert response.status_code == 422 and "batch models" in response.text


def test_a_failing_fit_fails_the_job_and_keeps_the_served_version(batch_client):
    X, y = diabetes()
    labels = np.where(y > 140, 1, -1)
    same = np.ones(len(y))  # a window of one class cannot train a classifier
    create_batch(batch_client, algorithm="gbfs", task="classification",
                 params={"n_estimators": 5, "window": {"kind": "newest", "size": 20}})
    post_named(batch_client, "d", X, labels, 0, 100, field="label")
    first = retrain(batch_client)
    assert first.get("version") == 1, first
    wait_version(batch_client, "d", 1)  # a job's success can precede this process serving it
    post_named(batch_client, "d", X, same, 100, 200, field="label")
    job = retrain(batch_client)
    assert job["status"] == "failed" and "one class" in job["error"]
    answer = batch_client.post("/v1/models/d/predict", json={
        "examples": named_examples(X, None, DIABETES_GROUPS, 0, 2)}).json()
    assert answer.get("version") == 1 and set(answer["labels"]) <= {-1, 1}, answer
    assert len(answer["probabilities"]) == 2


def test_long_fits_report_progress(make_settings):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3000, 40))
    y = X[:, :5].sum(axis=1) + rng.standard_normal(3000)
    groups = [{"name": f"g{j}", "features": [f"f{10 * j + i}" for i in range(10)], "cost": 1}
              for j in range(4)]
    settings = make_settings(batch_worker=True, job_poll_seconds=0.05,
                             job_progress_seconds=0.05)
    with TestClient(create_app(settings)) as client:
        create_batch(client, algorithm="gbfs", groups=groups,
                     params={"n_estimators": 1500, "max_depth": 5, "learning_rate": 0.05})
        payload = fbx1.encode_batch(np.arange(0, X.size + 1, 40), np.tile(np.arange(40), 3000),
                                    X.ravel(), y, targets=True)
        assert client.post("/v1/models/d/examples?wait=true", content=payload, headers={
            "content-type": "application/octet-stream"}).status_code == 202
        job_id = client.post("/v1/models/d/retrain").json()["id"]
        seen = set()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            job = client.get(f"/v1/models/d/jobs/{job_id}").json()
            if job["status"] == "running":
                seen.add(job["progress"])
            if job["status"] in ("succeeded", "failed"):
                break
            time.sleep(0.02)
        assert job["status"] == "succeeded" and job["progress"] == 1.0
        assert len([p for p in seen if 0.05 < p < 0.9]) >= 2, seen
        assert job["duration_seconds"] > 0 and job["examples_used"] > 2000


def test_retrain_policy_publishes_every_n_examples(batch_client):
    X, y = diabetes()
    create_batch(batch_client, params={"retrain_every_examples": 100})
    post_named(batch_client, "d", X, y, 0, 60)
    time.sleep(0.3)
    assert batch_client.get("/v1/models/d").json()["version"] is None
    post_named(batch_client, "d", X, y, 60, 120)
    wait_version(batch_client, "d", 1)
    jobs = batch_client.get("/v1/models/d/jobs").json()["jobs"]
    assert [j["trigger"] for j in jobs] == ["policy"]
    assert jobs[0]["trained_through"] is not None


def test_snapshot_export_import_round_trip_and_bad_blobs_change_nothing(batch_client):
    X, y = diabetes()
    create_batch(batch_client)
    post_named(batch_client, "d", X, y, 0, 300)
    assert retrain(batch_client)["version"] == 1
    blob = batch_client.get("/v1/models/d/snapshot").content
    create_batch(batch_client, name="e")
    rows = named_examples(X, None, DIABETES_GROUPS, 300, 310)
    before = batch_client.get("/v1/models/e").json()
    for bad in (b"not a snapshot", blob[: len(blob) // 2]):
        response = batch_client.put("/v1/models/e/snapshot", content=bad)
        assert response.status_code == 422, response.text
    other = {"name": "o", "algorithm": "gbfs", "groups": DIABETES_GROUPS}
    assert batch_client.post("/v1/models", json=other).status_code == 201
    assert batch_client.put("/v1/models/o/snapshot", content=blob).status_code == 422
    after = batch_client.get("/v1/models/e").json()
    assert after["examples_applied"] == before["examples_applied"] == 0
    assert after["version"] is None
    response = batch_client.put("/v1/models/e/snapshot", content=blob)
    assert response.status_code == 200, response.text
    assert response.json()["examples_applied"] == 300 and response.json()["version"] == 1
    original = batch_client.post("/v1/models/d/predict", json={"examples": rows}).json()
    restored = batch_client.post("/v1/models/e/predict", json={"examples": rows}).json()
    assert restored["predictions"] == original["predictions"]
    # the restored statistics keep folding: a retrain includes new examples
    post_named(batch_client, "e", X, y, 300, 400)
    job = retrain(batch_client, "e")
    assert job["status"] == "succeeded" and job["version"] == 2
    assert job["examples_used"] + job["validation_examples"] == 400


@pytest.mark.redis
def test_stream_entries_json_bin_and_libsvm_fold_like_rest(make_settings, backend):
    if backend != "redis":
        pytest.skip("the Redis stream")
    from clients.stream import StreamProducer

    X, y = diabetes()
    settings = make_settings(batch_worker=True, job_poll_seconds=0.05)
    with TestClient(create_app(settings)) as client:
        create_batch(client)
        import redis as redis_client

        connection = redis_client.Redis.from_url(settings.redis_url)
        producer = StreamProducer(connection, "d", batch_size=50, value_bytes=8, targets=True)
        dense = X[:100]
        producer.add_batch(np.arange(0, dense.size + 1, 10), np.tile(np.arange(10), 100),
                           dense.ravel(), y[:100])
        ids = producer.flush()
        import json

        rows = named_examples(X, y, DIABETES_GROUPS, 100, 150)
        ids.append(connection.xadd(redis_keys.log_key("d"), {
            b"fmt": b"json", b"data": json.dumps({"examples": rows}).encode()}).decode())
        text = "".join(f"{float(y[r])!r} " + " ".join(f"{i + 1}:{float(X[r, i])!r}"
                                                       for i in range(10)) + "\n"
                       for r in range(150, 200))
        ids.append(producer.add_libsvm(text.encode()))
        ids.append(connection.xadd(redis_keys.log_key("d"), {b"fmt": b"json",
                                                      b"data": b'{"examples": [{"x": 1}]}'}
                                   ).decode())
        deadline = time.monotonic() + 30
        while client.get("/v1/models/d").json()["log_position"] != ids[-1]:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert client.get("/v1/models/d").json()["examples_applied"] == 200
        letters = client.get("/v1/models/d/deadletters").json()["entries"]
        assert [e["id"] for e in letters] == [ids[-1]]
        assert "target" in letters[0]["reason"]
        entries = [(ids[0], X[:50], y[:50]), (ids[1], X[50:100], y[50:100]),
                   (ids[2], X[100:150], y[100:150]), (ids[3], X[150:200], y[150:200])]
        job = retrain(client)
        train, validation = reference_statistics(entries, 0.2, 10)
        assert job["examples_used"] == train.n and job["validation_examples"] == validation.n
        groups = [np.arange(0, 2), np.arange(2, 4), np.arange(4, 7), np.arange(7, 10)]
        reference = AnytimeLinearModel(groups=groups, costs=[1, 2, 3, 4]).fit_statistics(
            train, validation=validation)
        answer = client.post("/v1/models/d/predict", json={
            "examples": named_examples(X, None, DIABETES_GROUPS, 300, 320)}).json()
        np.testing.assert_allclose(answer["predictions"], reference.predict(X[300:320]),
                                   rtol=1e-10)
        connection.close()


@pytest.mark.parametrize(("algorithm", "key", "value"), [
    ("gbfs", "tree_feature_", lambda a: np.full_like(a, 10**6)),
    ("gbfs", "tree_value_", lambda a: np.full_like(a, np.nan)),
    ("cs-g-omp", "sequence", lambda a: np.full_like(a, 99)),
    ("cs-g-omp", "coef_path", lambda a: a[:1]),
    ("cs-g-omp", "cumulative_cost", np.zeros_like),  # budget answers ran over the budget
])
def test_a_crafted_artifact_in_a_snapshot_is_refused(batch_client, algorithm, key, value):
    from algorithms.serialization import dumps_state, loads_state

    X, y = diabetes()
    create_batch(batch_client, algorithm=algorithm, params={"n_estimators": 5}
                 if algorithm == "gbfs" else {})
    post_named(batch_client, "d", X, y, 0, 200)
    assert retrain(batch_client)["version"] == 1
    snapshot = snapshot_of(batch_client.get("/v1/models/d/snapshot").content)
    artifact = loads_state(snapshot.service["artifact"].tobytes())
    model = loads_state(artifact["model"].tobytes())
    model[key] = value(np.asarray(model[key]))
    artifact["model"] = np.frombuffer(dumps_state(model), dtype=np.uint8)
    service = {**snapshot.service,
               "artifact": np.frombuffer(dumps_state(artifact), dtype=np.uint8)}
    response = batch_client.put("/v1/models/d/snapshot",
                                content=snapshot_bytes(snapshot.model, service))
    assert response.status_code == 422, response.text
    rows = named_examples(X, None, DIABETES_GROUPS, 0, 3)
    answer = batch_client.post("/v1/models/d/predict", json={"examples": rows})
    assert answer.status_code == 200 and answer.json()["version"] == 1


@pytest.mark.parametrize("version", [float("inf"), -3, 2**64])
def test_a_snapshot_whose_artifact_names_an_impossible_version_is_refused(batch_client,
                                                                          version):
    """A crafted artifact's metadata is checked before anything changes (an infinite
    version number was published, then every route of the model answered 500)."""
    from algorithms.serialization import dumps_state, loads_state

    X, y = diabetes()
    create_batch(batch_client)
    post_named(batch_client, "d", X, y, 0, 200)
    assert retrain(batch_client)["version"] == 1
    snapshot = snapshot_of(batch_client.get("/v1/models/d/snapshot").content)
    artifact = loads_state(snapshot.service["artifact"].tobytes())
    artifact["meta"]["version"] = version
    service = {**snapshot.service,
               "artifact": np.frombuffer(dumps_state(artifact), dtype=np.uint8)}
    response = batch_client.put("/v1/models/d/snapshot",
                                content=snapshot_bytes(snapshot.model, service))
    assert response.status_code == 422, response.text
    assert "meta.version" in response.json()["detail"]
    assert batch_client.get("/v1/models/d/versions").json()["current"] == 1


def test_a_succeeded_job_is_served_by_the_process_that_says_so(batch_client):
    """GET /jobs/{id} says "succeeded" only once the answering process serves the job's
    version: a /predict right after never meets the previous one (nor a 409)."""
    X, y = diabetes()
    create_batch(batch_client)
    rows = named_examples(X, None, DIABETES_GROUPS, 0, 3)
    for version in (1, 2, 3):
        post_named(batch_client, "d", X, y, 100 * version - 100, 100 * version)
        job_id = batch_client.post("/v1/models/d/retrain").json()["id"]
        deadline = time.monotonic() + 60
        while (job := batch_client.get(f"/v1/models/d/jobs/{job_id}").json())[
                "status"] != "succeeded":
            assert job["status"] in ("queued", "running", "published"), job
            assert time.monotonic() < deadline
        answer = batch_client.post("/v1/models/d/predict", json={"examples": rows})
        assert answer.status_code == 200 and answer.json()["version"] == version, answer.text


def test_a_repeated_cheap_budgeted_answer_runs_inline_on_the_event_loop(batch_client):
    """A served model's repeated set (a small model: well under the pool's inline bound)
    is answered on the loop after its first, measured call (service/answers.py)."""
    X, y = diabetes()
    create_batch(batch_client)
    diabetes_entries(batch_client, "d", X, y, [(0, 300)])
    assert retrain(batch_client)["status"] == "succeeded"
    pool = batch_client.app.state.manager.batch.answers
    body = {"examples": named_examples(X, None, DIABETES_GROUPS, 300, 301),
            "computed_groups": ["demographics", "exam"]}
    before = pool.inline
    for _ in range(4):
        assert batch_client.post("/v1/models/d/predict", json=body).status_code == 200
    assert pool.inline - before >= 2
