"""Budgeted answers served equal the in-process models on both backends: GBFS answering with
every tree, the model that picks its better half per set (``auto``), and the held-out
figures (error, log-loss, calibrated probabilities) of classification models."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from algorithms.anytime import AnytimeLinearModel
from algorithms.gbfs import GBFS
from algorithms.per_set import PerSetChoice
from algorithms.per_set.figures import SetFigures
from service.batch.artifact import unpack
from service.batch.spec import BatchLayout
from service.schemas import ModelCreate
from tests.support.batch_api import create_batch, retrain
from tests.support.batch_data import (
    DIABETES_GROUPS,
    diabetes,
    named_examples,
    reference_statistics,
    split_like_the_fold,
)
from tests.support.snapshots import snapshot_of

GROUPS = [[0, 1], [2, 3], [4, 5, 6], [7, 8, 9]]
COSTS = [1.0, 2.0, 3.0, 4.0]
SETS = ([], [0], [2], [1, 3], [0, 2, 3], [0, 1, 2, 3])


def _labels(y: np.ndarray) -> np.ndarray:
    return np.where(y > np.median(y), 1.0, -1.0)


def _post(client, X, y, task: str, chunks) -> list[tuple[str, np.ndarray, np.ndarray]]:
    field = "label" if task == "classification" else "target"
    entries = []
    for start, stop in chunks:
        body = {"examples": named_examples(X, y, DIABETES_GROUPS, start, stop, field=field)}
        response = client.post("/v1/models/d/examples?wait=true", json=body)
        assert response.status_code == 202, response.text
        entries.append((response.json()["log_ids"][0], X[start:stop], y[start:stop]))
    return entries


def _served(client, algorithm: str, task: str):
    """The served version, unpacked from the snapshot as the service stores it."""
    state = snapshot_of(client.get("/v1/models/d/snapshot").content).service
    spec = ModelCreate(name="d", algorithm=algorithm, groups=DIABETES_GROUPS, task=task)
    family = spec.family
    return unpack(state["artifact"].tobytes(), family, BatchLayout(spec))


def _ask(client, X, S, budget=None) -> dict:
    body = {"examples": named_examples(X, None, DIABETES_GROUPS, 400, 442),
            "computed_groups": [DIABETES_GROUPS[g]["name"] for g in S]}
    answer = client.post("/v1/models/d/predict", json=body)
    assert answer.status_code == 200, answer.text
    payload = answer.json()
    nxt = client.post("/v1/models/d/next", json={
        "computed_groups": body["computed_groups"], **({} if budget is None else
                                                       {"budget": budget})}).json()
    return payload, nxt["next_group"]


def _name(g):
    return None if g is None else DIABETES_GROUPS[g]["name"]


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_gbfs_answers_with_every_tree_and_the_held_out_figures_of_exactly_the_set(
        batch_client, task):
    X, y = diabetes()
    y = _labels(y) if task == "classification" else y
    params = {"n_estimators": 40, "max_depth": 3, "window": {"kind": "newest", "size": 300}}
    create_batch(batch_client, algorithm="gbfs", task=task, params=params)
    entries = _post(batch_client, X, y, task, [(0, 200), (200, 400)])
    assert retrain(batch_client)["status"] == "succeeded"
    Xt, yt, Xv, yv = split_like_the_fold(entries, 0.2)
    loss = "logistic" if task == "classification" else "squared"
    reference = GBFS(loss=loss, n_estimators=40, max_depth=3, feature_groups=GROUPS,
                     group_costs=COSTS).fit(Xt[-300:], yt[-300:])
    served = _served(batch_client, "gbfs", task)
    for name in ("tree_feature_", "tree_threshold_", "tree_value_", "tree_default_left_"):
        assert np.array_equal(getattr(served.model, name), getattr(reference, name)), name
    held_X, held_y = served.held_out  # the newest held-out examples, none seen in training
    assert sorted(held_y.tolist()) == sorted(yv[-len(held_y):].tolist())
    figures = SetFigures(lambda rows, S: reference.decision_function(rows, computed_groups=S),
                         held_X, held_y, task=task, groups=GROUPS, costs=COSTS)
    for S in SETS:
        answer, nxt = _ask(batch_client, X, S)
        scores = reference.decision_function(X[400:442], computed_groups=S)
        np.testing.assert_array_equal(answer["predictions"], scores)
        assert answer["trees_used"] == reference.trees_used(S) > 0
        expected = figures.figures(S)
        assert answer["expected_on"] == "validation"
        if task == "regression":
            assert answer["expected_explained_variance"] == expected.explained_variance
            assert answer["expected_rmse"] == expected.rmse
        else:
            assert (answer["expected_error"], answer["expected_log_loss"]) == (
                expected.error, expected.log_loss)
            p = expit(expected.logits(scores))
            np.testing.assert_array_equal(answer["probabilities"], p)
            assert answer["labels"] == [1 if q >= 0.5 else -1 for q in p]
        step = figures.next_group(S)
        assert (nxt or {}).get("name") == _name(None if step is None else step[0])
        if step is not None:
            assert nxt["expected_gain"] == pytest.approx(step[1], rel=1e-12, abs=1e-15)
    capped = figures.next_group([0], max_cost=1.0 + 2.0)
    assert (_ask(batch_client, X, [0], budget=3.0)[1] or {}).get("name") == _name(
        None if capped is None else capped[0])
    sequence = batch_client.get("/v1/models/d/sequence").json()["prefixes"]
    assert [row.get("name") for row in sequence[1:]] == served.info.metrics["sequence"]
    names = [group["name"] for group in DIABETES_GROUPS]
    order = [names.index(name) for name in served.info.metrics["sequence"]]
    assert [row["trees"] for row in sequence] == [
        reference.trees_used(sorted(order[:j])) for j in range(len(order) + 1)]


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_auto_answers_each_set_with_its_better_half(batch_client, task):
    X, y = diabetes()
    y = _labels(y) if task == "classification" else y
    params = {"gbfs_params": {"n_estimators": 30, "max_depth": 3},
              "window": {"kind": "newest", "size": 300}}
    create_batch(batch_client, algorithm="auto", task=task, params=params)
    entries = _post(batch_client, X, y, task, [(0, 200), (200, 400)])
    assert retrain(batch_client)["status"] == "succeeded"
    Xt, yt, _, _ = split_like_the_fold(entries, 0.2)
    served = _served(batch_client, "auto", task)
    reference = PerSetChoice(groups=GROUPS, costs=COSTS, task=task,
                             gbfs_params={"n_estimators": 30, "max_depth": 3}).fit(
        Xt[-300:], yt[-300:], X_val=served.model.X_val_, y_val=served.model.y_val_)
    halves = set()
    for S in SETS:
        answer, nxt = _ask(batch_client, X, S)
        assert answer["answered_by"] == reference.choice(S)
        halves.add(answer["answered_by"])
        scores = reference.decision_function(X[400:442], computed_groups=S)
        np.testing.assert_array_equal(answer["predictions"], scores)
        figures = reference.figures(S)
        if task == "regression":
            assert answer["expected_explained_variance"] == figures["explained_variance"]
        else:
            assert answer["expected_log_loss"] == figures["log_loss"]
            np.testing.assert_array_equal(answer["probabilities"], expit(scores))
        assert (nxt or {}).get("name") == _name(reference.next_group(S))
    sequence = batch_client.get("/v1/models/d/sequence").json()["prefixes"]
    assert [row.get("name") for row in sequence[1:]] == [
        DIABETES_GROUPS[g]["name"] for g in reference.sequence_]
    assert [row["answered_by"] for row in sequence] == list(reference.sequence_half_)
    page = batch_client.get("/v1/models/d/sequence.html")
    assert page.status_code == 200 and "None" not in page.text


def test_anytime_classification_reports_held_out_error_and_calibrated_probabilities(
        batch_client):
    """The regression answer (``classification_answer="regression"``, every version
    written before the option)."""
    X, y = diabetes()
    y = _labels(y)
    create_batch(batch_client, task="classification",
                 params={"classification_answer": "regression"})
    entries = _post(batch_client, X, y, "classification", [(0, 200), (200, 400)])
    assert retrain(batch_client)["status"] == "succeeded"
    train, validation = reference_statistics(entries, 0.2, 10)
    reference = AnytimeLinearModel(groups=GROUPS, costs=COSTS).fit_statistics(
        train, validation=validation)
    served = _served(batch_client, "cs-g-omp", "classification")
    held_X, held_y = served.held_out  # every held-out example (a reservoir of 5,000)
    _, _, _, yv = split_like_the_fold(entries, 0.2)
    assert sorted(held_y.tolist()) == sorted(yv.tolist())
    figures = SetFigures(lambda rows, S: reference.predict(rows, computed_groups=S),
                         held_X, held_y, task="classification", groups=GROUPS, costs=COSTS)
    for S in SETS[1:]:
        answer, _ = _ask(batch_client, X, S)
        scores = reference.predict(X[400:442], computed_groups=S)
        np.testing.assert_allclose(answer["predictions"], scores, rtol=1e-12, atol=1e-12)
        expected = figures.figures(S)
        assert answer["expected_error"] == pytest.approx(expected.error, abs=1e-12)
        assert answer["expected_log_loss"] == pytest.approx(expected.log_loss, rel=1e-9)
        p = expit(expected.logits(scores))
        np.testing.assert_allclose(answer["probabilities"], p, rtol=1e-9)
        assert answer["labels"] == [1 if q >= 0.5 else -1 for q in answer["probabilities"]]
        assert 0.0 <= answer["expected_error"] <= 1.0 and answer["expected_explained_variance"]


def test_anytime_classification_answers_with_the_logistic_refit_on_exactly_the_set(
        batch_client):
    """The default classification answer: the logistic refit on the fold's training rows
    (every one of them here: the reservoir holds 5,000), equal to the in-process model
    and to scikit-learn's LogisticRegression on the same standardized columns; the
    sequence is the regression's."""
    from sklearn.linear_model import LogisticRegression

    X, y = diabetes()
    y = _labels(y)
    create_batch(batch_client, task="classification")
    entries = _post(batch_client, X, y, "classification", [(0, 200), (200, 400)])
    assert retrain(batch_client)["status"] == "succeeded"
    train, validation = reference_statistics(entries, 0.2, 10)
    Xt, yt, _, _ = split_like_the_fold(entries, 0.2)
    reference = AnytimeLinearModel(groups=GROUPS, costs=COSTS, classification_answer="logistic"
                                   ).fit_statistics(train, validation=validation, rows=(Xt, yt))
    regression = AnytimeLinearModel(groups=GROUPS, costs=COSTS).fit_statistics(
        train, validation=validation)
    served = _served(batch_client, "cs-g-omp", "classification")
    assert served.model.classification_answer == "logistic"
    assert served.info.metrics["classification_answer"] == "logistic"
    assert served.info.metrics["logistic_rows"] == len(yt)
    np.testing.assert_array_equal(served.model.sequence_, regression.sequence_)
    held_X, held_y = served.held_out
    figures = SetFigures(lambda rows, S: reference.decision_function(rows, computed_groups=S),
                         held_X, held_y, task="classification", groups=GROUPS, costs=COSTS)
    mean, scale = Xt.mean(axis=0), Xt.std(axis=0)
    for S in SETS[1:]:
        answer, _ = _ask(batch_client, X, S)
        scores = reference.decision_function(X[400:442], computed_groups=S)
        np.testing.assert_allclose(answer["predictions"], scores, rtol=1e-12, atol=1e-12)
        expected = figures.figures(S)
        assert answer["expected_error"] == pytest.approx(expected.error, abs=1e-12)
        np.testing.assert_allclose(answer["probabilities"], expit(expected.logits(scores)),
                                   rtol=1e-9)
        idx = np.concatenate([GROUPS[g] for g in S])
        sk = LogisticRegression(C=1.0 / (1e-4 * len(yt)), tol=1e-12, max_iter=10_000).fit(
            (Xt[:, idx] - mean[idx]) / scale[idx], yt)
        coef, intercept = reference.logistic_for_groups(S)
        np.testing.assert_allclose(coef[idx] * scale[idx], sk.coef_[0], rtol=1e-5, atol=1e-6)
        assert intercept + coef[idx] @ mean[idx] == pytest.approx(sk.intercept_[0], abs=1e-6)


def test_a_fold_keeps_its_training_rows_and_one_written_before_answers_by_regression():
    """Classification folds keep a uniform sample of their training rows (all of them
    here); a fold state written before that reservoir loads with none, and its next fit
    answers with the regression (its metrics say so) rather than refit on a biased
    sample."""
    import scipy.sparse as sp

    from service.batch.spec import split_params
    from service.batch.worker.fit import fit
    from service.batch.worker.fold_state import BatchFoldState

    X, y = diabetes()
    y = _labels(y)
    spec = ModelCreate(name="d", algorithm="cs-g-omp", groups=DIABETES_GROUPS,
                       task="classification")
    layout, params = BatchLayout(spec), split_params(spec)
    state = BatchFoldState("anytime", layout, params)
    state.apply_block(["1-0"], [300], sp.csr_matrix(X[:300]), y[:300])
    rows = state.training_rows_copy()
    assert rows is not None and rows[0].shape == (int(state.train.n), X.shape[1])
    training, validation = state.training_copy()
    model, metrics = fit("anytime", "cs-g-omp", "classification", layout, params, training,
                         validation, rows=rows)
    assert metrics["classification_answer"] == "logistic" and \
        metrics["logistic_rows"] == int(state.train.n)
    old = state.state_dict()
    for key in [k for k in old if k.startswith("train_rows.")]:
        del old[key]
    state.load_state(old)
    assert state.training_rows_copy() is None
    model, metrics = fit("anytime", "cs-g-omp", "classification", layout, params, training,
                         validation, rows=None)
    assert model.classification_answer == "regression" and \
        metrics["classification_answer"] == "regression"
