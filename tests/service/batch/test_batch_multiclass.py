"""Multi-class gbfs models over REST (``params.classes``): a CUBE set of 8 classes (labels
as strings) posted as JSON, retrained, and answered as the in-process softmax GBFS fitted
on the fold's own rows answers (raw scores, labels, per-set temperature-calibrated
probabilities, held-out figures, next group), on both backends; integer classes through
the numeric formats (class indices); bad labels and bad specs refused with a 4xx that
names them, nothing appended."""

from __future__ import annotations

import time

import numpy as np
import pytest
from scipy.special import softmax

from algorithms.datasets.acquisition_synthetic import make_cube
from algorithms.gbfs import GBFS
from algorithms.per_set.choice import GBFS_CLASSIFICATION
from algorithms.per_set.multiclass import MulticlassSetFigures
from service import fbx1
from tests.support.batch_api import create_batch, retrain
from tests.support.snapshots import snapshot_of

CLASSES = [f"shape-{k}" for k in range(8)]
TREES = {"n_estimators": 30, "max_depth": 3}


def cube(n: int = 900, seed: int = 1):
    X, y, groups, costs, names = make_cube(n, seed=seed)
    layout = [{"name": name, "features": [name], "cost": float(c)}
              for name, c in zip(names, costs, strict=True)]
    return X, y.astype(np.int64), groups, costs, names, layout


def named(X, names, rows, labels=None, keep=None):
    out = []
    for i in rows:
        item = {"features": {n: {n: float(X[i, f])} for f, n in enumerate(names)
                             if keep is None or f in keep}}
        if labels is not None:
            item["label"] = labels[i]
        out.append(item)
    return out


def fold_examples(client, name: str) -> int:
    return int(snapshot_of(client.get(f"/v1/models/{name}/snapshot").content).model["examples"])


def test_cube_served_equals_the_in_process_softmax_gbfs(batch_client):
    X, y, groups, costs, names, layout = cube()
    create_batch(batch_client, "cube", algorithm="gbfs", groups=layout,
                 task="classification", params={"classes": CLASSES, **TREES})
    labels = [CLASSES[k] for k in y]
    for start, stop in ((0, 450), (450, 800)):
        response = batch_client.post("/v1/models/cube/examples?wait=true",
                                     json={"examples": named(X, names, range(start, stop),
                                                             labels)})
        assert response.status_code == 202, response.text
    assert retrain(batch_client, "cube")["status"] == "succeeded"
    state = snapshot_of(batch_client.get("/v1/models/cube/snapshot").content).model
    Xt, yt = state["train.X"], state["train.y"]
    Xv, yv = state["validation.X"], state["validation.y"]
    assert len(yt) + len(yv) == 800 and set(np.unique(yt)) == set(range(8))
    reference = GBFS(loss="softmax", feature_groups=groups, group_costs=costs,
                     **TREES).fit(Xt, yt)
    held = MulticlassSetFigures(
        lambda rows, S: reference.decision_function(rows, computed_groups=S), Xv, yv,
        n_classes=8, groups=groups, costs=costs)
    rows = range(800, 900)
    for subset in ([], [0, 1, 2], list(range(10)), list(range(20))):
        body = {"examples": named(X, names, rows), "computed_groups": [names[g] for g in subset]}
        answer = batch_client.post("/v1/models/cube/predict", json=body).json()
        raw = reference.decision_function(np.where(np.isin(np.arange(20), subset), X[800:900],
                                                   0.0), computed_groups=subset)
        np.testing.assert_allclose(answer["predictions"], raw, rtol=1e-9, atol=1e-9)
        figures = held.figures(subset)
        expected = softmax(figures.logits(raw), axis=1)
        np.testing.assert_allclose(answer["probabilities"], expected, rtol=1e-6, atol=1e-9)
        assert answer["labels"] == [CLASSES[k] for k in np.argmax(raw, axis=1)]
        assert answer["classes"] == CLASSES
        assert answer["expected_error"] == pytest.approx(figures.error, abs=1e-12)
        assert answer["expected_log_loss"] == pytest.approx(figures.log_loss, rel=1e-6)
        step = held.next_group(subset)
        assert (answer["next_group"] or {}).get("name") == (
            None if step is None else names[step[0]])
        first = answer["answers"][0]
        assert first["label"] == answer["labels"][0] and len(first["probability"]) == 8
    full = batch_client.post("/v1/models/cube/predict", json={
        "examples": named(X, names, rows)}).json()
    accuracy = np.mean(np.array(full["labels"]) == np.array([CLASSES[k] for k in y[800:900]]))
    assert accuracy > 0.6  # (chance: 1/8)
    # per example: a policy over the K-class log-loss of the held-out rows
    body = {"examples": named(X, names, range(800, 805), keep=set())}
    deadline = time.monotonic() + 120
    while True:
        answer = batch_client.post("/v1/models/cube/next", json=body)
        assert answer.status_code == 200, answer.text
        first = answer.json()["answers"][0]
        if not first["policy_building"] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not first["policy_building"] and first["next_group"] is not None
    gains = [c["expected_gain"] for c in first["candidates"]]
    assert len(gains) == 20 and any(g is not None and np.isfinite(g) for g in gains)


def test_auto_with_classes_is_its_softmax_gbfs_half(batch_client):
    X, y, groups, costs, names, layout = cube(700, seed=5)
    create_batch(batch_client, "auto8", algorithm="auto", groups=layout,
                 task="classification", params={"classes": 8, "gbfs_params": TREES})
    response = batch_client.post("/v1/models/auto8/examples?wait=true", json={
        "examples": named(X, names, range(600), y.tolist())})
    assert response.status_code == 202, response.text
    assert retrain(batch_client, "auto8")["status"] == "succeeded"
    state = snapshot_of(batch_client.get("/v1/models/auto8/snapshot").content).model
    Xv, yv = state["validation.X"], state["validation.y"]
    reference = GBFS(loss="softmax", feature_groups=groups, group_costs=costs,
                     **{**GBFS_CLASSIFICATION, **TREES}).fit(state["train.X"], state["train.y"],
                                                     X_val=Xv, y_val=yv)
    held = MulticlassSetFigures(
        lambda rows, S: reference.decision_function(rows, computed_groups=S), Xv, yv,
        n_classes=8, groups=groups, costs=costs)
    subset = [0, 1, 2, 3, 4]
    answer = batch_client.post("/v1/models/auto8/predict", json={
        "examples": named(X, names, range(600, 700), keep=set(subset))}).json()
    raw = reference.decision_function(np.where(np.isin(np.arange(20), subset), X[600:700],
                                               0.0), computed_groups=subset)
    np.testing.assert_allclose(answer["predictions"], raw, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(answer["probabilities"],
                               softmax(held.figures(subset).logits(raw), axis=1), rtol=1e-6)
    assert answer["labels"] == np.argmax(raw, axis=1).tolist()
    assert answer["answered_by"] == "gbfs" and answer["classes"] == list(range(8))
    assert answer["expected_log_loss"] == pytest.approx(held.figures(subset).log_loss,
                                                        rel=1e-6)
    prefixes = batch_client.get("/v1/models/auto8/sequence").json()["prefixes"]
    assert {p["answered_by"] for p in prefixes} == {"gbfs"}
    assert batch_client.get("/v1/models/auto8/sequence.html").status_code == 200


def test_integer_classes_travel_as_indices_in_numeric_formats(batch_client):
    X, y, groups, costs, names, layout = cube(300, seed=2)
    y = y % 3
    classes = [10, 20, 30]
    create_batch(batch_client, "ints", algorithm="gbfs", groups=layout,
                 task="classification", params={"classes": classes, **TREES})
    good = batch_client.post("/v1/models/ints/examples?wait=true", json={
        "examples": named(X, names, range(100), [classes[k] for k in y])})
    assert good.status_code == 202, good.text
    text = "".join(f"{y[i]} " + " ".join(f"{f + 1}:{float(X[i, f])!r}" for f in range(20)) + "\n"
                   for i in range(100, 200))
    libsvm = batch_client.post("/v1/models/ints/examples?wait=true", content=text,
                               headers={"content-type": "text/plain"})
    assert libsvm.status_code == 202, libsvm.text
    dense = X[200:300]
    payload = fbx1.encode_batch(np.arange(0, dense.size + 1, 20),
                                np.tile(np.arange(20), len(dense)), dense.ravel(),
                                y[200:300].astype(np.float64), targets=True)
    binary = batch_client.post("/v1/models/ints/examples?wait=true", content=payload,
                               headers={"content-type": "application/octet-stream"})
    assert binary.status_code == 202, binary.text
    assert fold_examples(batch_client, "ints") == 300
    bad = [
        ({"json": {"examples": named(X, names, [0, 1], ["10", 20])}}, 0, "label '10'"),
        ({"json": {"examples": named(X, names, [0, 1], [10, 25])}}, 1, "label 25"),
        ({"json": {"examples": named(X, names, [0, 1], [10, 20.5])}}, 1, "label 20.5"),
        ({"json": {"examples": named(X, names, [0, 1], [10, True])}}, 1, "label True"),
        ({"content": "1 1:0.5\n3 1:0.5\n", "headers": {"content-type": "text/plain"}}, 2,
         "label 3.0 is not a class index 0..2"),
        ({"content": fbx1.encode_batch(np.array([0, 1]), np.array([0]), np.array([1.0]),
                                       np.array([-1.0]), targets=True),
          "headers": {"content-type": "application/octet-stream"}}, 0, "label -1.0")]
    for request, where, message in bad:
        response = batch_client.post("/v1/models/ints/examples", **request)
        assert response.status_code == 422, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        error = response.json()["errors"][0]
        assert message in error["message"] and error["field"] == "label"
        assert error.get("item", error.get("line")) == where
    assert fold_examples(batch_client, "ints") == 300
    assert retrain(batch_client, "ints")["status"] == "succeeded"
    answer = batch_client.post("/v1/models/ints/predict", json={
        "examples": named(X, names, range(3), [10, 20, 30])}).json()
    assert answer["classes"] == classes and set(answer["labels"]) <= set(classes)
    np.testing.assert_allclose(np.sum(answer["probabilities"], axis=1), 1.0)


def test_a_class_missing_from_the_window_fails_the_retrain_and_says_which(batch_client):
    X, y, groups, costs, names, layout = cube(200, seed=3)
    create_batch(batch_client, "few", algorithm="gbfs", groups=layout,
                 task="classification", params={"classes": ["a", "b", "c", "d"], **TREES})
    batch_client.post("/v1/models/few/examples?wait=true", json={
        "examples": named(X, names, range(200), ["abc"[k % 3] for k in y])})
    job = retrain(batch_client, "few")
    assert job["status"] == "failed" and "missing ['d']" in job["error"], job


@pytest.mark.parametrize(("algorithm", "task", "classes", "message"), [
    ("gbfs", "classification", ["a", "b"], "two classes"),
    ("gbfs", "classification", 2, "two classes"),
    ("gbfs", "classification", ["a", 1, "c"], "not mixed"),
    ("gbfs", "classification", ["a", "b", "a"], "listed twice"),
    ("gbfs", "classification", [1.5, 2, 3], "not mixed"),
    ("gbfs", "regression", ["a", "b", "c"], "task 'classification'"),
    ("cs-g-omp", "classification", ["a", "b", "c"], "gbfs or auto models"),
    ("nvsd", "classification", 3, "gbfs or auto models")])
def test_bad_classes_are_refused_at_create(client, algorithm, task, classes, message):
    X, y, groups, costs, names, layout = cube(10)
    response = client.post("/v1/models", json={
        "name": "bad", "algorithm": algorithm, "task": task, "groups": layout,
        "params": {"classes": classes}})
    assert response.status_code == 422, response.text
    error = response.json()["errors"][0]
    assert message in error["message"] and error["field"] == "params.classes"
    assert client.get("/v1/models/bad").status_code == 404


def test_a_multi_class_snapshot_restores_and_a_binary_one_is_refused(batch_client):
    X, y, groups, costs, names, layout = cube(300, seed=4)
    y = y % 3
    create_batch(batch_client, "three", algorithm="gbfs", groups=layout,
                 task="classification", params={"classes": 3, **TREES})
    batch_client.post("/v1/models/three/examples?wait=true", json={
        "examples": named(X, names, range(300), y.tolist())})
    assert retrain(batch_client, "three")["status"] == "succeeded"
    page = batch_client.get("/v1/models/three/sequence.html")
    assert page.status_code == 200 and "three" in page.text
    snapshot = batch_client.get("/v1/models/three/snapshot").content
    restored = batch_client.put("/v1/models/three/snapshot", content=snapshot, headers={
        "content-type": "application/vnd.featurebudget.state"})
    assert restored.status_code == 200, restored.text
    assert restored.json()["examples_applied"] == 300 and restored.json()["version"] == 2
    create_batch(batch_client, "two", algorithm="gbfs", groups=layout,
                 task="classification", params=TREES)
    batch_client.post("/v1/models/two/examples?wait=true", json={
        "examples": named(X, names, range(300), [1 if k else -1 for k in y])})
    binary = batch_client.get("/v1/models/two/snapshot").content
    refused = batch_client.put("/v1/models/three/snapshot", content=binary, headers={
        "content-type": "application/vnd.featurebudget.state"})
    assert refused.status_code == 422 and "class indices 0..2" in refused.text, refused.text
    assert fold_examples(batch_client, "three") == 300


def test_csv_cells_of_a_multi_class_answer():
    from service.cli.predict_output import _csv_value

    assert _csv_value([0.25, 0.75]) == "0.25;0.75"
    assert _csv_value(["size", "colour"]) == "size;colour"
