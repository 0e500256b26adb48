"""Budgeted answers run on the answer pool, off the event loop: a slow answer never stalls
/healthz, and one over the pool's bound is refused with 503 and Retry-After."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from service.answers import AnswerPool, AnswersBusyError


def test_the_pool_runs_calls_off_the_loop_and_refuses_past_its_bound():
    release = threading.Event()
    pool = AnswerPool(threads=2, queue=1)
    loop_thread = []

    def slow(k):
        release.wait(5)
        return k, threading.current_thread().name

    async def main():
        loop_thread.append(threading.current_thread().name)
        running = [asyncio.ensure_future(pool.run(slow, k)) for k in range(3)]
        await asyncio.sleep(0.05)
        assert pool.in_flight == 3
        with pytest.raises(AnswersBusyError) as refused:
            await pool.run(slow, 3)
        assert refused.value.status == 503 and refused.value.headers["Retry-After"] == "1"
        started = time.perf_counter()
        await asyncio.sleep(0.01)  # the loop is free while the three wait on their event
        assert time.perf_counter() - started < 0.5
        release.set()
        return await asyncio.gather(*running)

    results = asyncio.run(main())
    assert [k for k, _ in results] == [0, 1, 2]
    assert all(name.startswith("answers") and name != loop_thread[0] for _, name in results)
    assert pool.in_flight == 0
    pool.close()


def test_a_budgeted_answer_runs_on_an_answer_thread(make_settings, monkeypatch):
    from fastapi.testclient import TestClient

    from service.app import create_app
    from service.batch import artifact
    from tests.support.batch_data import DIABETES_GROUPS, NO_POLICY, diabetes, named_examples

    seen = []
    answer = artifact.Artifact.answer

    def spy(self, *args):
        seen.append(threading.current_thread().name)
        return answer(self, *args)

    monkeypatch.setattr(artifact.Artifact, "answer", spy)
    X, y = diabetes()
    with TestClient(create_app(make_settings(batch_worker=True, job_poll_seconds=0.05,
                                             version_check_seconds=0.2))) as client:
        body = {"name": "d", "algorithm": "cs-g-omp", "groups": DIABETES_GROUPS,
                "params": NO_POLICY}
        assert client.post("/v1/models", json=body).status_code == 201
        rows = named_examples(X, y, DIABETES_GROUPS, 0, 200)
        assert client.post("/v1/models/d/examples?wait=true",
                           json={"examples": rows}).status_code == 202
        job = client.post("/v1/models/d/retrain").json()
        deadline = time.monotonic() + 60
        while client.get(f"/v1/models/d/jobs/{job['id']}").json()["status"] != "succeeded":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        while client.get("/v1/models/d").json()["version"] != 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        predict = client.post("/v1/models/d/predict", json={
            "examples": named_examples(X, None, DIABETES_GROUPS, 0, 2)})
        assert predict.status_code == 200, predict.text
        nxt = client.post("/v1/models/d/next", json={"computed_groups": ["exam"]})
        assert nxt.status_code == 200
    # the version was warmed (two answers) on a background thread before it was served;
    # the prediction's answer ran on an answer thread
    assert len(seen) == 3 and all(name.startswith("featurebudget-background")
                                  for name in seen[:2])
    assert all(name.startswith("answers") for name in seen[2:])
