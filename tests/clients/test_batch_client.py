"""The batch-model client methods (sync and async) and the ``retrain`` / ``versions`` /
``rollback`` commands against the real service (uvicorn on 127.0.0.1:18731, embedded
backend), checked against a local fit of the same training split."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from datetime import datetime

import httpx
import numpy as np
import pytest
import uvicorn
from sklearn.datasets import load_diabetes

from algorithms.anytime import AnytimeLinearModel, SufficientStatistics
from algorithms.metrics.anytime import explained_variance_from_statistics
from clients.http import (
    AsyncFeaturebudgetClient,
    BudgetedPrediction,
    FeaturebudgetClient,
    Job,
    ServiceError,
)
from service.app import create_app
from service.batch.worker.fold_state import held_out
from service.cli import main
from service.settings import Settings

PORT = 18731
URL = f"http://127.0.0.1:{PORT}"
FRACTION = 0.2
# the diabetes columns, in order: age sex | bmi bp | s1..s6
GROUPS = [("demographics", ["age", "sex"], 1.0), ("exam", ["bmi", "bp"], 2.0),
          ("blood", ["s1", "s2", "s3", "s4", "s5", "s6"], 5.0)]
NAMES = [g[0] for g in GROUPS]
COLUMNS = [(0, 2), (2, 4), (4, 10)]
PARAMS = {"validation_fraction": FRACTION, "retrain_every_examples": None,
          "retrain_every_seconds": None}  # versions only from explicit retrains
FIRST, SECOND, TEST = (0, 200), (200, 350), (350, 442)


@pytest.fixture(scope="module")
def diabetes():
    data = load_diabetes()
    assert list(data.feature_names) == [f for g in GROUPS for f in g[1]]
    return data.data.astype(np.float64), data.target.astype(np.float64)


@pytest.fixture
def server(tmp_path):
    """The real app on a real socket, embedded backend under tmp_path."""
    settings = Settings(redis_url=None, data_dir=tmp_path / "data", api_keys="",
                        consumer_block_ms=20, job_poll_seconds=0.05)
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=PORT,
                            log_level="warning", lifespan="on")
    instance = uvicorn.Server(config)
    thread = threading.Thread(target=instance.run, name=f"uvicorn-{PORT}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not instance.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            instance.should_exit = True
            pytest.fail(f"the service did not start on {URL} (port in use?)")
        time.sleep(0.02)
    try:
        yield URL
    finally:
        instance.should_exit = True
        thread.join(30)
        assert not thread.is_alive(), "the service did not shut down"


def examples(X, y, start, stop, *, groups=NAMES, targets=True):
    out = []
    for row in range(start, stop):
        features = {}
        for name, feature_names, _ in GROUPS:
            if name in groups:
                k = NAMES.index(name)
                lo, _hi = COLUMNS[k]
                features[name] = {f: float(X[row, lo + j]) for j, f in enumerate(feature_names)}
        example = {"features": features}
        if targets:
            example["target"] = float(y[row])
        out.append(example)
    return out


def oracle(X, y, posts):
    """cs-g-omp fitted here on the service's split of ``posts`` ((log id, start, stop))."""
    train, validation = [], []
    for log_id, start, stop in posts:
        rows = np.arange(start, stop)
        held = held_out(log_id, len(rows), FRACTION)
        train.append(rows[~held])
        validation.append(rows[held])
    train, validation = np.concatenate(train), np.concatenate(validation)
    model = AnytimeLinearModel(groups=[list(range(lo, hi)) for lo, hi in COLUMNS],
                               costs=[g[2] for g in GROUPS], method="cs-g-omp")
    model.fit(X[train], y[train], X_val=X[validation], y_val=y[validation])
    model.validation_stats = SufficientStatistics.from_data(X[validation], y[validation])
    model.n_train, model.n_validation = len(train), len(validation)
    return model


def group_ids(names):
    return sorted(NAMES.index(n) for n in names)


def validation_ev(model, names):
    coef, intercept = model.coef_for_groups(group_ids(names))
    return float(explained_variance_from_statistics(model.validation_stats, coef,
                                                    intercept)[0])


def post(client, name, X, y, span):
    accepted = client.post_examples(name, examples(X, y, *span), wait=True)
    assert accepted.applied and accepted.accepted == span[1] - span[0]
    return (accepted.log_ids[-1], *span)


def check_against_oracle(prediction: BudgetedPrediction, model, X, names, version,
                         budget=None):
    """A single-set answer: groups, cost, predictions, expected figure, next group (within
    ``budget``)."""
    ids = group_ids(names)
    assert prediction.version == version
    assert prediction.groups_used == [NAMES[g] for g in ids]
    assert prediction.cost == pytest.approx(sum(GROUPS[g][2] for g in ids))
    np.testing.assert_allclose(prediction.predictions, model.predict(X, groups=ids),
                               rtol=1e-7, atol=1e-7)
    assert prediction.expected_explained_variance == pytest.approx(validation_ev(model, names),
                                                                   rel=1e-6, abs=1e-9)
    following = model.next_group(ids, budget=budget)
    if following is None:
        assert prediction.next_group is None
    else:
        assert prediction.next_group["name"] == NAMES[following]
        assert prediction.next_group["cost"] == GROUPS[following][2]
    assert prediction.labels is None and prediction.probabilities is None  # regression


def wait_succeeded(client, name, job_id):
    job = client.wait_for_job(name, job_id, timeout=120, poll=0.05)
    assert job.status == "succeeded", job.error
    return job


def test_sync_client_batch_model_lifecycle(server, diabetes):
    X, y = diabetes
    with FeaturebudgetClient(server) as client:
        info = client.create_batch_model("diabetes", algorithm="cs-g-omp", groups=GROUPS,
                                         params=PARAMS)
        # a batch model's ModelInfo: its own fields set, the online-only ones None
        assert (info.name, info.algorithm, info.family, info.task) == \
            ("diabetes", "cs-g-omp", "anytime", "regression")
        assert info.is_batch and info.n_features == 10 and info.version is None
        assert [(g["name"], g["features"], g["cost"]) for g in info.groups] == \
            [(n, f, c) for n, f, c in GROUPS]
        assert info.budget is None and info.hash_bits is None and info.n_selected is None
        assert info.progressive_accuracy is None and info.selected_features is None
        with pytest.raises(ServiceError) as error:  # no version yet
            client.predict_batch("diabetes", examples(X, y, 0, 1, targets=False))
        assert error.value.status == 409

        posts = [post(client, "diabetes", X, y, FIRST), post(client, "diabetes", X, y, SECOND)]
        model = oracle(X, y, posts)
        info = client.get_model("diabetes")
        assert info.examples_applied == 350 and info.log_position == posts[-1][0]
        assert (info.train_examples, info.validation_examples) == \
            (model.n_train, model.n_validation)
        assert [m.name for m in client.list_models()] == ["diabetes"]

        queued = client.retrain("diabetes")
        assert isinstance(queued, Job) and queued.status in ("queued", "running")
        assert queued.version is None and not queued.done
        seen: list[Job] = []
        job = client.wait_for_job("diabetes", queued.id, timeout=120, poll=0.05,
                                  on_progress=seen.append)
        assert job.id == queued.id and job.succeeded and job.done and job.error is None
        assert job.version == 1 and job.progress == 1.0 and job.trained_through == posts[-1][0]
        assert (job.examples_used, job.validation_examples) == \
            (model.n_train, model.n_validation)
        assert job.duration_seconds is not None and job.duration_seconds >= 0
        assert seen and seen[-1].status == "succeeded" and {j.id for j in seen} == {queued.id}
        assert [j.progress for j in seen] == sorted(j.progress for j in seen)
        assert client.job("diabetes", queued.id).raw == job.raw
        assert [j.id for j in client.jobs("diabetes")] == [queued.id]
        assert client.get_model("diabetes").version == 1

        Xt = X[TEST[0]:TEST[1]]
        rows = examples(X, y, *TEST, targets=False)
        # exactly the computed groups (given in any order)
        prediction = client.predict_batch("diabetes", rows,
                                          computed_groups=["exam", "demographics"])
        assert isinstance(prediction, BudgetedPrediction) and prediction.model == "diabetes"
        check_against_oracle(prediction, model, Xt, ["demographics", "exam"], 1)
        assert prediction.raw["expected_on"] == "validation"
        residual = y[TEST[0]:TEST[1]] - np.asarray(
            client.predict_batch("diabetes", rows, computed_groups=NAMES).predictions)
        assert 1.0 - residual.var() / y[TEST[0]:TEST[1]].var() > 0.3  # a useful fit

        # the trained sequence, and a budget = the longest prefix within it
        sequence = client.sequence("diabetes")
        assert sequence["model"] == "diabetes" and sequence["version"] == 1
        assert sequence["algorithm"] == "cs-g-omp"
        prefixes = sequence["prefixes"]
        assert [p["name"] for p in prefixes[1:]] == [NAMES[g] for g in model.sequence_]
        np.testing.assert_allclose([p["cumulative_cost"] for p in prefixes],
                                   model.cumulative_cost_)
        for j in (1, 2):
            budget = prefixes[j]["cumulative_cost"] + 0.5  # not enough for the next one
            in_budget = [NAMES[g] for g in sorted(model.sequence_[:j])]
            prediction = client.predict_batch("diabetes", rows, budget=budget)
            check_against_oracle(prediction, model, Xt, in_budget, 1, budget)
            assert prediction.next_group is None  # the next prefix costs more
            np.testing.assert_allclose(prediction.predictions,
                                       model.predict(Xt, budget=budget), rtol=1e-7, atol=1e-7)

        # no selection: each example's present groups; per-example lists when they differ
        mixed = examples(X, y, 400, 401, targets=False) + \
            examples(X, y, 401, 402, groups=["demographics"], targets=False)
        prediction = client.predict_batch("diabetes", mixed)
        assert prediction.groups_used == [NAMES, ["demographics"]]
        assert prediction.cost == [8.0, 1.0] and prediction.next_group[0] is None
        assert prediction.next_group[1]["name"] == NAMES[model.next_group([0])]
        np.testing.assert_allclose(prediction.predictions,
                                   [model.predict(X[400:401], groups=[0, 1, 2])[0],
                                    model.predict(X[401:402], groups=[0])[0]], rtol=1e-7)

        # the next group, with and without a budget
        step = client.next_group("diabetes")
        assert (step.model, step.version, step.computed_groups, step.cost) == \
            ("diabetes", 1, [], 0.0)
        assert step.next_group["name"] == NAMES[model.next_group([])]
        step = client.next_group("diabetes", ["exam", "demographics"])
        assert step.computed_groups == ["demographics", "exam"] and step.cost == 3.0
        assert step.next_group["name"] == "blood"
        assert step.next_group["expected_gain"] == pytest.approx(
            validation_ev(model, NAMES) - validation_ev(model, ["demographics", "exam"]),
            rel=1e-6, abs=1e-9)
        assert client.next_group("diabetes", ["demographics"], budget=2.5).next_group is None
        step = client.next_group("diabetes", ["demographics"], budget=3.0)
        assert step.next_group["name"] == NAMES[model.next_group([0], budget=3.0)]

        with pytest.raises(ServiceError) as error:
            client.predict_batch("diabetes", rows, computed_groups=["nope"])
        assert error.value.status == 422 and "nope" in error.value.problem["detail"]
        with pytest.raises(ServiceError) as error:
            client.predict_batch("diabetes", rows, computed_groups=["exam"], budget=3.0)
        assert error.value.status == 422


def test_second_retrain_versions_and_rollback(server, diabetes):
    X, y = diabetes
    rows = examples(X, y, *TEST, targets=False)
    Xt = X[TEST[0]:TEST[1]]
    with FeaturebudgetClient(server) as client:
        client.create_batch_model("d2", algorithm="cs-g-omp", params=PARAMS,
                                  groups=[{"name": n, "features": f, "cost": c}
                                          for n, f, c in GROUPS])
        first = [post(client, "d2", X, y, FIRST)]
        one = wait_succeeded(client, "d2", client.retrain("d2").id)
        second = first + [post(client, "d2", X, y, SECOND)]
        two = wait_succeeded(client, "d2", client.retrain("d2").id)
        assert (one.version, two.version) == (1, 2)
        old, new = oracle(X, y, first), oracle(X, y, second)
        assert (one.examples_used, two.examples_used) == (old.n_train, new.n_train)

        listing = client.versions("d2")
        assert listing.model == "d2" and listing.current == 2
        assert [(v["version"], v["current"], v["examples_used"]) for v in listing.versions] == \
            [(2, True, new.n_train), (1, False, old.n_train)]
        assert [v["job"] for v in listing.versions] == [two.id, one.id]
        check_against_oracle(client.predict_batch("d2", rows, computed_groups=NAMES), new, Xt,
                             NAMES, 2)

        assert client.rollback("d2", 1) == {"model": "d2", "current": 1}
        listing = client.versions("d2")
        assert listing.current == 1
        assert [(v["version"], v["current"]) for v in listing.versions] == \
            [(2, False), (1, True)]
        assert client.get_model("d2").version == 1
        # the rolled-back version answers: the fit on the first batch only
        check_against_oracle(client.predict_batch("d2", rows, computed_groups=NAMES), old, Xt,
                             NAMES, 1)
        assert client.sequence("d2")["version"] == 1

        with pytest.raises(ServiceError) as error:
            client.rollback("d2", 9)
        assert error.value.status == 409 and client.versions("d2").current == 1


def table(text):
    lines = [line.split() for line in text.strip().splitlines()]
    assert lines[0] == ["VERSION", "CREATED_AT", "EXAMPLES_USED", "HELD_OUT",
                        "HELD_OUT_EXPLAINED_VARIANCE", "CURRENT"]
    return lines[1:]


def test_cli_retrain_versions_rollback(server, diabetes, capsys, monkeypatch):
    X, y = diabetes
    with FeaturebudgetClient(server) as client:
        client.create_batch_model("cli", algorithm="cs-g-omp", groups=GROUPS, params=PARAMS)
        post(client, "cli", X, y, FIRST)

        # without --wait: the queued job (as JSON with --json)
        assert main(["retrain", "cli", "--url", server, "--json"]) == 0
        out = capsys.readouterr().out
        queued = json.loads(out)
        assert queued["status"] in ("queued", "running") and queued["version"] is None
        assert wait_succeeded(client, "cli", queued["id"]).version == 1

        post(client, "cli", X, y, SECOND)
        # --wait: a progress bar on stderr, the final job on stdout; URL from the environment
        monkeypatch.setenv("FEATUREBUDGET_URL", server)
        assert main(["retrain", "cli", "--wait", "--poll", "0.05", "--json"]) == 0
        captured = capsys.readouterr()
        job = json.loads(captured.out)
        assert job["status"] == "succeeded" and job["version"] == 2 and job["progress"] == 1.0
        assert job == client.job("cli", job["id"]).raw
        assert "\r[" in captured.err and "100.0%" in captured.err
        assert "succeeded" in captured.err and captured.err.endswith("\n")
        assert main(["retrain", "cli", "--wait", "--quiet", "--url", server, "--json"]) == 0
        captured = capsys.readouterr()
        assert json.loads(captured.out)["version"] == 3 and captured.err == ""

        assert main(["versions", "cli"]) == 0
        rows = table(capsys.readouterr().out)
        listing = client.versions("cli")
        assert [r[0] for r in rows] == ["3", "2", "1"]
        for row, meta in zip(rows, listing.versions, strict=True):
            created = datetime.fromisoformat(row[1])
            assert created.utcoffset().total_seconds() == 0
            assert abs(created.timestamp() - meta["created_at"]) < 1.0
            assert int(row[2]) == meta["examples_used"]
            assert int(row[3]) == meta["validation_examples"]
            assert row[4] == f'{meta["metrics"]["validation_explained_variance"][-1]:.4f}'
        assert [len(r) == 6 and r[5] == "*" for r in rows] == [True, False, False]
        assert main(["versions", "cli", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["current"] == 3

        assert main(["rollback", "cli", "1", "--url", server]) == 0
        assert json.loads(capsys.readouterr().out) == {"model": "cli", "current": 1}
        assert client.versions("cli").current == 1
        assert client.predict_batch("cli", examples(X, y, 0, 1, targets=False)).version == 1
        assert main(["versions", "cli"]) == 0
        assert [len(r) == 6 for r in table(capsys.readouterr().out)] == [False, False, True]

        assert main(["rollback", "cli", "7"]) == 1  # never existed
        captured = capsys.readouterr()
        assert captured.out == "" and "409" in captured.err and "no version 7" in captured.err
        assert client.versions("cli").current == 1
        assert main(["versions", "nope"]) == 1 and "404" in capsys.readouterr().err

    monkeypatch.setenv("FEATUREBUDGET_URL", "http://127.0.0.1:18739")  # nothing there
    assert main(["versions", "cli"]) == 1
    assert "cannot reach http://127.0.0.1:18739" in capsys.readouterr().err


def test_cli_retrain_wait_exits_1_when_the_job_fails(server, capsys):
    with FeaturebudgetClient(server) as client:
        client.create_batch_model("onecls", algorithm="gbfs", task="classification",
                                  groups=[("a", ["x"], 1.0), ("b", ["z"], 2.0)])
        assert main(["retrain", "onecls", "--url", server]) == 1  # nothing to train on
        captured = capsys.readouterr()
        assert captured.out == "" and "409" in captured.err
        client.post_examples("onecls", [{"features": {"a": {"x": float(i)}, "b": {"z": 1.0}},
                                         "label": 1} for i in range(40)], wait=True)
        assert main(["retrain", "onecls", "--wait", "--poll", "0.05", "--url", server,
                     "--json"]) == 1
        job = json.loads(capsys.readouterr().out)
        assert job["status"] == "failed" and "one class" in job["error"]
        assert client.versions("onecls").current is None


@pytest.mark.parametrize("command", ["retrain", "versions", "rollback"])
def test_cli_help_has_an_example(command, capsys):
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "examples:" in text and f"featurebudget {command} house" in text
    assert "--url" in text and "--api-key" in text and "FEATUREBUDGET_URL" in text


def test_async_client_batch_path(server, diabetes):
    X, y = diabetes
    rows = examples(X, y, *TEST, targets=False)
    Xt = X[TEST[0]:TEST[1]]

    async def run():
        async with AsyncFeaturebudgetClient(server) as client:
            info = await client.create_batch_model("async", algorithm="cs-g-omp",
                                                   groups=GROUPS, params=PARAMS)
            assert info.family == "anytime" and info.version is None and info.budget is None
            posts = []
            for span in (FIRST,):
                accepted = await client.post_examples("async", examples(X, y, *span),
                                                      wait=True)
                posts.append((accepted.log_ids[-1], *span))
            seen: list[float] = []

            async def on_progress(job):  # coroutine callbacks are awaited
                await asyncio.sleep(0)
                seen.append(job.progress)

            queued = await client.retrain("async")
            one = await client.wait_for_job("async", queued.id, timeout=120, poll=0.05,
                                            on_progress=on_progress)
            assert one.succeeded and one.version == 1 and seen and seen[-1] == 1.0
            assert (await client.job("async", queued.id)).raw == one.raw
            assert [j.id for j in await client.jobs("async")] == [queued.id]
            old = oracle(X, y, posts)

            check_against_oracle(await client.predict_batch(
                "async", rows, computed_groups=["demographics", "blood"]), old, Xt,
                ["demographics", "blood"], 1)
            sequence = await client.sequence("async")
            assert [p["name"] for p in sequence["prefixes"][1:]] == \
                [NAMES[g] for g in old.sequence_]
            budget = sequence["prefixes"][1]["cumulative_cost"]
            check_against_oracle(await client.predict_batch("async", rows, budget=budget),
                                 old, Xt, [NAMES[old.sequence_[0]]], 1, budget)
            step = await client.next_group("async", ["exam"], budget=100.0)
            assert step.computed_groups == ["exam"] and step.cost == 2.0
            assert step.next_group["name"] == NAMES[old.next_group([1], budget=100.0)]

            accepted = await client.post_examples("async", examples(X, y, *SECOND), wait=True)
            posts.append((accepted.log_ids[-1], *SECOND))
            two = await client.wait_for_job("async", (await client.retrain("async")).id,
                                            timeout=120, poll=0.05)
            assert two.succeeded and two.version == 2
            new = oracle(X, y, posts)
            listing = await client.versions("async")
            assert listing.current == 2 and [v["version"] for v in listing.versions] == [2, 1]
            check_against_oracle(await client.predict_batch("async", rows,
                                                            computed_groups=NAMES),
                                 new, Xt, NAMES, 2)

            assert await client.rollback("async", 1) == {"model": "async", "current": 1}
            assert (await client.versions("async")).current == 1
            check_against_oracle(await client.predict_batch("async", rows,
                                                            computed_groups=NAMES),
                                 old, Xt, NAMES, 1)
            with pytest.raises(ServiceError) as error:
                await client.rollback("async", 5)
            assert error.value.status == 409

    asyncio.run(run())


def running_job_transport(calls):
    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        return httpx.Response(200, json={"id": "j1", "status": "running", "progress": 0.5})

    return httpx.MockTransport(handler)


def test_wait_for_job_times_out():
    calls: list[str] = []
    seen: list[Job] = []
    with FeaturebudgetClient("http://test", transport=running_job_transport(calls)) as client:
        started = time.monotonic()
        with pytest.raises(TimeoutError, match="j1.*still running"):
            client.wait_for_job("m", "j1", timeout=0.3, poll=0.05, on_progress=seen.append)
        assert 0.3 <= time.monotonic() - started < 5.0
    assert len(calls) >= 3 and set(calls) == {"/v1/models/m/jobs/j1"}
    assert seen and all(j.progress == 0.5 and not j.done for j in seen)

    async def run():
        calls.clear()
        async with AsyncFeaturebudgetClient(
                "http://test", transport=running_job_transport(calls)) as client:
            with pytest.raises(TimeoutError):
                await client.wait_for_job("m", "j1", timeout=0.2, poll=0.05)

    asyncio.run(run())
    assert len(calls) >= 2


def test_group_tuples_and_dicts_give_the_same_body():
    bodies = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(201, json={"name": "m", "algorithm": "nvsd", "family": "nvsd"})

    with FeaturebudgetClient("http://test", transport=httpx.MockTransport(handler)) as client:
        client.create_batch_model("m", algorithm="nvsd", groups=[("a", ("x", "y"), 1)])
        info = client.create_batch_model("m", algorithm="nvsd", task="regression",
                                         groups=[{"name": "a", "features": ["x", "y"],
                                                  "cost": 1}])
        with pytest.raises(ValueError):
            client.create_batch_model("m", algorithm="nvsd", groups=[("a", ["x"])])
    assert bodies[0] == bodies[1] == {"name": "m", "algorithm": "nvsd", "task": "regression",
                                      "params": {}, "groups": [{"name": "a",
                                                                "features": ["x", "y"],
                                                                "cost": 1}]}
    assert info.family == "nvsd" and info.n_selected is None and info.version is None


def test_the_clients_job_reads_members_the_service_answers():
    """The client's Job (a distribution of its own, which imports nothing of the server)
    reads members of the one Job definition (service.batch.jobs.Job, which the API's schema
    JobPublic is made from)."""
    from featurebudget_client.answers import Job as ClientJob
    from service.batch.jobs import Job
    from service.schemas import JobPublic

    answered = Job.answer_fields()
    assert set(ClientJob._FIELDS) <= set(answered)
    assert list(JobPublic.model_fields) == list(answered)
