"""Read-your-writes across API processes (Redis): after ``?wait=true`` returns, every
process answers predictions and inspect from a state that includes those examples; the
serving view they answer from is checked on decode and scores like the learner."""

from __future__ import annotations

import signal
import subprocess

import httpx
import numpy as np
import pytest

from algorithms.online import LEARNERS
from algorithms.sparse import CSRBatch
from service.online.view import ServingView, ViewFormatError, decode
from tests.support.online import json_examples
from tests.support.processes import serve_on_redis, wait_ready


def _view(indices, values, **extra) -> ServingView:
    fields = dict(log_id="17-3", applied_at=1.5, n_examples=9, n_updates=4,
                  progressive_examples=9, progressive_correct=5, names={2: "a^b"})
    fields.update(extra)
    return ServingView(indices=np.asarray(indices, dtype=np.int64),
                       values=np.asarray(values, dtype=np.float64), **fields)


def test_view_scores_equal_the_dense_dot_product():
    rng = np.random.default_rng(3)
    d = 500
    index = np.sort(rng.choice(d, 40, replace=False))
    weight = rng.normal(size=40)
    dense = np.zeros(d)
    dense[index] = weight
    X = CSRBatch.from_arrays([0, 0, 3, 60], np.r_[[1, 7, 499], np.sort(rng.choice(d, 57,
                             replace=False))], rng.normal(size=60), d)
    expected = np.array([sum(X.values[k] * dense[X.indices[k]]
                             for k in range(X.indptr[r], X.indptr[r + 1])) for r in range(3)])
    got = _view(index, weight).decision_function(X)
    assert np.allclose(got, expected, rtol=1e-13, atol=0)
    assert got[0] == 0.0
    assert np.all(_view([], []).decision_function(X) == 0.0)


def test_view_round_trip_and_content_checks():
    view = _view([2, 5, 9], [0.5, -1.0, 2.0])
    back = decode(view.encode(), 10)
    assert back.log_id == "17-3" and back.names == {2: "a^b"} and back.n_updates == 4
    assert np.array_equal(back.indices, view.indices)
    assert np.array_equal(back.values, view.values)
    blob = view.encode()
    bad = [
        b"XXXX" + blob[4:],                               # magic
        blob[:-1],                                        # cut weights
        _view([5, 2, 9], [1.0, 1.0, 1.0]).encode(),        # not sorted
        _view([2, 2, 9], [1.0, 1.0, 1.0]).encode(),        # duplicate
        _view([2, 5, 10], [1.0, 1.0, 1.0]).encode(),       # outside the dimension
        _view([2, 5, 9], [1.0, np.inf, 1.0]).encode(),     # not finite
        _view([2], [1.0], log_id="x").encode(),            # log id
        _view([2], [1.0], progressive_correct=10).encode(),  # counts disagree
        _view([2], [1.0], names={11: "z"}).encode(),       # name outside the dimension
        _view([2], [1.0], n_examples=-1).encode(),
        blob[:8] + b"\xff" * 8,                           # header garbage
    ]
    for blob in bad:
        with pytest.raises(ViewFormatError):
            decode(blob, 10)


def _serve(tmp_path, redis_url: str, name: str) -> tuple[subprocess.Popen, str]:
    return serve_on_redis(tmp_path, redis_url, name, lease_seconds="3",
                          snapshot_every_seconds="3600", snapshot_every_examples="1000000")


@pytest.mark.redis
@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["sofs", "ogd"])
def test_every_process_answers_what_wait_true_acknowledged(tmp_path, redis_url, x1,
                                                           algorithm):
    X, y = x1
    budget = {"budget": 20} if algorithm == "sofs" else {}
    servers = [_serve(tmp_path, redis_url, f"api{k}") for k in range(2)]
    try:
        for process, url in servers:
            wait_ready(url, process)
        clients = [httpx.Client(base_url=url, timeout=60) for _, url in servers]
        body = {"name": "m", "algorithm": algorithm, "n_features": X.n_features, **budget}
        assert clients[0].post("/v1/models", json=body).status_code == 201
        oracle = LEARNERS[algorithm](n_features=X.n_features, **budget)
        probe = json_examples(X, y, 500, 505)
        probe_X = X.row_slice(500, 505)
        n = 0
        for step, size in enumerate([7, 1, 30, 12, 3, 25, 9, 2]):
            writer = clients[step % 2]  # alternate: the owner and the other process
            response = writer.post("/v1/models/m/examples?wait=true",
                                   json={"examples": json_examples(X, y, n, n + size)})
            assert response.status_code == 202, response.text
            oracle.partial_fit(X.row_slice(n, n + size), y[n:n + size].astype(np.float64))
            n += size
            expected = oracle.decision_function(probe_X)
            for reader in clients:  # immediately, on every process
                info = reader.get("/v1/models/m").json()
                assert info["examples_applied"] == n, (step, info)
                assert info["log_position"] == response.json()["log_ids"][-1]
                scores = reader.post("/v1/models/m/predict", json={"examples": probe}).json()
                assert np.allclose(scores["scores"], expected, rtol=1e-12, atol=1e-15), step
        owners = [c.get("/v1/models/m").json()["owner"] for c in clients]
        assert sorted(owners) == [False, True]
        # a snapshot restored through one process is what both answer from at once
        snapshot = clients[0].get("/v1/models/m/snapshot").content
        assert clients[1].post("/v1/models/m/examples?wait=true", json={
            "examples": json_examples(X, y, n, n + 40)}).status_code == 202
        assert all(c.get("/v1/models/m").json()["examples_applied"] == n + 40 for c in clients)
        owner = clients[owners.index(True)]
        assert owner.put("/v1/models/m/snapshot", content=snapshot).status_code == 200
        for reader in clients:
            assert reader.get("/v1/models/m").json()["examples_applied"] == n
            scores = reader.post("/v1/models/m/predict", json={"examples": probe}).json()
            assert np.allclose(scores["scores"], expected, rtol=1e-12, atol=1e-15)
        text = clients[owners.index(False)].get("/metrics").text
        assert 'featurebudget_read_staleness_seconds_count{model="m"}' in text
        for c in clients:
            c.close()
    finally:
        for process, _ in servers:
            process.send_signal(signal.SIGTERM)
        for process, _ in servers:
            process.wait(timeout=60)


def test_a_new_owner_answers_from_the_newer_view_until_its_replay_catches_up():
    """A process that served a model from the owner's view and then takes the fold over
    from an older snapshot (here none) must not answer older than it did a moment before:
    the view serves until the learner has replayed past it."""
    from service.ingest import ExampleBatch
    from service.online.host import ModelHost
    from service.schemas import ModelSpec

    spec = ModelSpec(name="m", algorithm="ogd", n_features=10)
    rng = np.random.default_rng(0)
    batches = [ExampleBatch(CSRBatch(np.array([0, 2]), np.array([1, 4], dtype=np.int32),
                                     rng.normal(size=2), 10), np.array([1], dtype=np.int8),
                            names={1: "w^a", 4: "w^b"}) for _ in range(3)]
    owner = ModelHost(spec)
    owner.apply_all(batches, "5-0")
    view = owner.make_view(10)
    taker = ModelHost(spec)
    taker.install_view(view, f"{view.log_id} 0")
    before = taker.public(features=True, limit=10, log_end="5-0")   # not the owner yet
    taker.set_owner(True)                                              # took the fold over
    during = taker.public(features=True, limit=10, log_end="5-0")   # nothing replayed yet
    assert before["examples_applied"] == during["examples_applied"] == 3
    assert during["log_position"] == "5-0"
    assert {f["name"] for f in during["selected_features"]} == {"w^a", "w^b"}
    taker.apply_all(batches[:2], "4-0")                                # part of the replay
    assert taker.public(features=False, limit=10, log_end="5-0")["examples_applied"] == 3
    taker.apply_all(batches[2:], "5-0")                                # caught up: its own
    assert taker.serving() is None
    caught_up = taker.public(features=True, limit=10, log_end="5-0")
    assert caught_up["examples_applied"] == 3 and caught_up["updates"] == before["updates"]
