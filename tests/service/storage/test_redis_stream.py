"""Redis stream ingestion against a real Redis: formats, dead letters, reclaim, trimming."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest
import redis
from fastapi.testclient import TestClient

from algorithms.online import LEARNERS
from clients.stream import StreamProducer
from service import fbx1
from service.app import create_app
from service.settings import Settings
from service.storage import redis_keys
from service.storage.redis import RedisStorage
from tests.support.online import create, json_examples, libsvm_text, same_state
from tests.support.snapshots import snapshot_of

pytestmark = pytest.mark.redis


def wait_for(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached")


def settings(redis_url, **extra) -> Settings:
    return Settings(redis_url=redis_url, consumer_block_ms=50, snapshot_every_seconds=3600,
                    **extra)


def test_stream_entries_in_every_format_and_dead_letters(redis_url, x1):
    X, y = x1
    r = redis.Redis.from_url(redis_url)
    with TestClient(create_app(settings(redis_url))) as client:
        create(client)
        key = redis_keys.log_key("m")
        with StreamProducer(r, "m", batch_size=40, value_bytes=8) as producer:
            producer.add_batch(X.indptr[:101], X.indices, X.values, y[:100])
        r.xadd(key, {"data": b"garbage that is not libsvm"})
        r.xadd(key, {"fmt": "libsvm", "data": libsvm_text(X, y, 100, 150)})
        r.xadd(key, {"fmt": "bin", "data": b"FBX1\x08\x00\x00\x00short"})
        import orjson

        r.xadd(key, {"fmt": "json", "data": orjson.dumps(json_examples(X, y, 150, 200))})
        r.xadd(key, {"fmt": "json", "data": b'[{"indices": [1], "values": [1], "label": 3}]'})
        last = r.xadd(key, {"data": orjson.dumps({"examples": json_examples(X, y, 200, 210)})})
        wait_for(lambda: client.get("/v1/models/m").json()["log_position"] == last.decode())
        info = client.get("/v1/models/m").json()
        assert info["examples_applied"] == 210
        oracle = LEARNERS["sofs"](n_features=2000, budget=20).partial_fit(
            X.row_slice(0, 210), y[:210].astype(float))
        state = snapshot_of(client.get("/v1/models/m/snapshot").content).model
        assert same_state(state, oracle.state_dict())
        dead = client.get("/v1/models/m/deadletters").json()["entries"]
        assert len(dead) == 3
        assert "label" in dead[0]["reason"] and "header" in dead[1]["reason"]
        assert "item 0" in dead[2]["reason"]
        assert r.xlen(redis_keys.deadletter_key("m")) == 3
        assert 'featurebudget_deadletter_entries_total{model="m"} 3.0' in \
            client.get("/metrics").text
        pending = r.xpending(key, redis_keys.CONSUMER_GROUP)
        assert pending["pending"] == 0  # everything acked, the bad entries too


def test_reclaims_entries_of_a_dead_consumer_exactly_once(redis_url, x1):
    X, y = x1
    r = redis.Redis.from_url(redis_url)
    with TestClient(create_app(settings(redis_url))) as client:
        create(client)
    key = redis_keys.log_key("m")
    producer = StreamProducer(r, "m", batch_size=50, value_bytes=8)
    producer.add_batch(X.indptr[:201], X.indices, X.values, y[:200])
    ids = producer.flush()
    # a consumer that read everything and died before acknowledging
    r.xreadgroup(redis_keys.CONSUMER_GROUP, "dead-consumer", {key: ">"}, count=100)
    assert r.xpending(key, redis_keys.CONSUMER_GROUP)["pending"] == 4
    app_settings = settings(redis_url, autoclaim_idle_ms=1)
    with TestClient(create_app(app_settings)) as client:
        wait_for(lambda: client.get("/v1/models/m").json()["log_position"] == ids[-1])
        assert client.get("/v1/models/m").json()["examples_applied"] == 200
        wait_for(lambda: r.xpending(key, redis_keys.CONSUMER_GROUP)["pending"] == 0)
    oracle = LEARNERS["sofs"](n_features=2000, budget=20).partial_fit(
        X.row_slice(0, 200), y[:200].astype(float))
    state = snapshot_of(r.hget(redis_keys.snapshot_key("m"), b"state")).model
    assert same_state(state, oracle.state_dict())


def test_trimming_keeps_what_the_snapshot_needs(redis_url, x1):
    X, y = x1
    r = redis.Redis.from_url(redis_url)
    with TestClient(create_app(settings(redis_url, snapshot_every_examples=100))) as client:
        create(client)
        for start in range(0, 400, 50):
            response = client.post("/v1/models/m/examples?wait=true",
                                   json={"examples": json_examples(X, y, start, start + 50)})
        last = response.json()["log_ids"][-1]

        def trimmed_to_the_snapshot() -> bool:  # the trim follows the snapshot's write
            snapshot_id = r.hget(redis_keys.snapshot_key("m"), b"log_id").decode()
            first_kept = r.xrange(redis_keys.log_key("m"), count=1)[0][0].decode()
            return first_kept == snapshot_id  # everything before the snapshot is gone

        wait_for(trimmed_to_the_snapshot)
        assert r.xlen(redis_keys.log_key("m")) < 8
        assert client.get("/v1/models/m").json()["log_position"] == last
    with TestClient(create_app(settings(redis_url))) as client:  # restart: snapshot + replay
        assert client.get("/v1/models/m").json()["examples_applied"] == 400
    oracle = LEARNERS["sofs"](n_features=2000, budget=20).partial_fit(
        X.row_slice(0, 400), y[:400].astype(float))
    state = snapshot_of(r.hget(redis_keys.snapshot_key("m"), b"state")).model
    assert same_state(state, oracle.state_dict())


def test_two_processes_share_a_model_through_the_lease(redis_url, x1):
    X, y = x1
    first = TestClient(create_app(settings(redis_url, lease_seconds=1.0)))
    second = TestClient(create_app(settings(redis_url, lease_seconds=1.0)))
    with first, second:
        create(first)
        response = second.post("/v1/models/m/examples?wait=true",
                               json={"examples": json_examples(X, y, 0, 60)})
        assert response.status_code == 202, response.text
        owners = [c.get("/v1/models/m").json()["owner"] for c in (first, second)]
        assert sorted(owners) == [False, True]
        assert second.get("/v1/models/m").json()["log_position"] == response.json()["log_ids"][0]
    oracle = LEARNERS["sofs"](n_features=2000, budget=20).partial_fit(
        X.row_slice(0, 60), y[:60].astype(float))
    state = snapshot_of(redis.Redis.from_url(redis_url).hget(redis_keys.snapshot_key("m"),
                                                             b"state")).model
    assert same_state(state, oracle.state_dict())
    assert np.isfinite(oracle.decision_function(X.row_slice(0, 1))).all()


def test_raw_xreadgroup_reader_matches_redis_py(redis_url):
    """The consumer's own RESP reader: big values received in place, small ones buffered,
    the empty reply, a server error (the connection stays usable), entries in order."""
    from redis.exceptions import ResponseError

    from service.storage.redis import xreadgroup_raw

    r = redis.Redis.from_url(redis_url)
    key = "featurebudget-test:raw"
    r.delete(key)
    r.xgroup_create(key, redis_keys.CONSUMER_GROUP, id="0", mkstream=True)
    rng = np.random.default_rng(0)
    payloads = [rng.bytes(size) for size in (0, 1, 100, 65535, 65536, 65537, 300_000, 2_000_003)]
    payloads += [b"a\r\nb\r\n" * 5000]
    ids = [r.xadd(key, {b"fmt": b"bin", b"data": p, b"extra": str(i)}) for i, p in
           enumerate(payloads)]
    pool = redis.ConnectionPool.from_url(redis_url, protocol=2)
    try:
        got = []
        while True:
            batch = xreadgroup_raw(pool, key, "c", 3, 10)
            if not batch:
                break
            got += batch
        assert [i for i, _ in got] == ids
        for (_, fields), i, payload in zip(got, range(len(payloads)), payloads, strict=True):
            assert bytes(fields[b"data"]) == payload
            assert fields[b"fmt"] == b"bin" and fields[b"extra"] == str(i).encode()
        with pytest.raises(ResponseError, match="NOGROUP"):
            xreadgroup_raw(pool, "featurebudget-test:no-such-stream", "c", 1, 1)
        new = r.xadd(key, {b"data": b"after the error"})
        assert xreadgroup_raw(pool, key, "c", 10, 10) == [(new, {b"data": b"after the error"})]
    finally:
        pool.disconnect()
        r.delete(key)


def test_big_entries_few_per_read_and_big_garbage_dead_lettered(redis_url, x1):
    """Entries over the raw reader's in-place threshold (64 KiB) in every format, a read
    count cut down by microbatch_max_bytes, and a big malformed entry dead-lettered."""
    import orjson

    X, y = x1
    r = redis.Redis.from_url(redis_url)
    with TestClient(create_app(settings(redis_url, microbatch_max_bytes=1))) as client:
        create(client)
        key = redis_keys.log_key("m")
        big = [(b"bin", fbx1.encode_batch(X.indptr[:151], X.indices, X.values, y[:150])),
               (b"libsvm", libsvm_text(X, y, 150, 300)),
               (b"json", orjson.dumps({"examples": json_examples(X, y, 300, 450)}))]
        assert all(len(data) > 1 << 16 for _, data in big)
        r.xadd(key, {b"fmt": big[0][0], b"data": big[0][1]})
        r.xadd(key, {b"fmt": b"libsvm", b"data": b"1 1:1\n" + b"x" * 200_000})
        for fmt, data in big[1:]:
            last = r.xadd(key, {b"fmt": fmt, b"data": data})
        wait_for(lambda: client.get("/v1/models/m").json()["log_position"] == last.decode())
        assert client.get("/v1/models/m").json()["examples_applied"] == 450
        dead = client.get("/v1/models/m/deadletters").json()["entries"]
        assert len(dead) == 1 and "line 2" in dead[0]["reason"]
        assert len(r.xrange(redis_keys.deadletter_key("m"))[0][1][b"data"]) == 65536
    oracle = LEARNERS["sofs"](n_features=2000, budget=20).partial_fit(
        X.row_slice(0, 450), y[:450].astype(float))
    state = snapshot_of(r.hget(redis_keys.snapshot_key("m"), b"state")).model
    assert same_state(state, oracle.state_dict())


def test_an_owner_whose_lease_lapsed_does_not_take_it_back_with_its_stale_state(redis_url):
    """Paused longer than its lease while another process took the model, folded and released
    it, an owner must not re-take the free lease as if it had held it all along: it reports
    the loss, and takes the lease anew (the fold then reloads the snapshot)."""
    from types import SimpleNamespace

    from service.fold_loop import Lease

    async def scenario():
        storage = RedisStorage(redis_url)
        await storage.open()
        try:
            lease = Lease(storage, SimpleNamespace(lease_seconds=0.05), "m", "paused")
            assert await lease.renew(owner=False)
            await asyncio.sleep(0.1)   # paused: the lease lapses
            assert await storage.acquire_lease("m", "other", 10.0)   # another folds it
            await storage.release_lease("m", "other")                # and hands it back
            assert not await lease.renew(owner=True)    # lost meanwhile: not re-taken
            assert await storage.lease_holder("m") is None
            assert await lease.renew(owner=False)       # taken anew, as a new owner
            assert await storage.lease_holder("m") == "paused"
            assert await lease.renew(owner=True)        # and renewed from then on
        finally:
            await storage.close()

    asyncio.run(scenario())


def test_snapshot_writes_are_fenced_by_the_lease_and_never_go_back(redis_url):
    """A stale owner (lease expired, another process took over) cannot overwrite the newer
    snapshot, and nobody can replace a snapshot with one that includes fewer entries."""
    async def scenario():
        storage = RedisStorage(redis_url)
        await storage.open()
        try:
            assert await storage.acquire_lease("m", "old-owner", 0.05)
            assert await storage.save_snapshot("m", b"s1", "100-0", owner="old-owner")
            await asyncio.sleep(0.1)  # the old owner's lease expires (a long GC pause, say)
            assert await storage.acquire_lease("m", "new-owner", 10.0)
            assert await storage.save_snapshot("m", b"s2", "200-5", owner="new-owner")
            assert not await storage.save_snapshot("m", b"stale", "150-0", owner="old-owner")
            assert not await storage.save_snapshot("m", b"stale", "300-0", owner="old-owner")
            assert not await storage.save_snapshot("m", b"older", "200-4", owner="new-owner")
            assert not await storage.save_snapshot("m", b"older", "", owner="new-owner")
            assert await storage.save_snapshot("m", b"same", "200-5", owner="new-owner")
            assert await storage.save_snapshot("m", b"s3", "1000-0", owner="new-owner")
            assert await storage.load_snapshot("m") == b"s3"
            assert await storage.snapshot_position("m") == "1000-0"
        finally:
            await storage.close()

    asyncio.run(scenario())


def test_a_process_that_lost_its_lease_cannot_write_its_snapshot(redis_url, x1):
    """Another process takes the lease while this one still believes it owns the model
    (ownership is re-checked every lease_seconds / 3): its next snapshot is refused, counted,
    and it stops folding; the stored snapshot and the log are untouched."""
    X, y = x1
    r = redis.Redis.from_url(redis_url)
    app = create_app(settings(redis_url, lease_seconds=60.0, snapshot_every_examples=50,
                              trim_log=True))
    with TestClient(app) as client:
        create(client)
        client.post("/v1/models/m/examples?wait=true",
                    json={"examples": json_examples(X, y, 0, 50)})
        wait_for(lambda: r.hget(redis_keys.snapshot_key("m"), b"log_id"))
        before = r.hgetall(redis_keys.snapshot_key("m"))
        r.set(redis_keys.lease_key("m"), b"intruder", px=60000)  # a takeover this process missed
        response = client.post("/v1/models/m/examples",  # (never visible: no view is
                               json={"examples": json_examples(X, y, 50, 100)})  # published)
        assert response.status_code == 202
        wait_for(lambda: client.get("/v1/models/m").json()["owner"] is False)
        assert r.hgetall(redis_keys.snapshot_key("m")) == before
        after = r.xrange(redis_keys.log_key("m"), min=b"(" + before[b"log_id"])
        assert len(after) == 1  # the second batch: still there for the new owner to replay
        metrics = client.get("/metrics").text
        assert 'featurebudget_snapshots_refused_total{model="m"} 1.0' in metrics


def test_a_retrying_producer_writes_each_batch_once(redis_url, x1):
    """``StreamProducer.write_once``: a retried key appends nothing and answers the first
    ids; the keys are the REST ``Idempotency-Key``'s; the model learns every batch once."""
    X, y = x1
    r = redis.Redis.from_url(redis_url)
    with TestClient(create_app(settings(redis_url))) as client:
        create(client)
        producer = StreamProducer(redis_url, "m", batch_size=30, value_bytes=8)
        batches = [(0, 50), (50, 80), (80, 140)]
        first = {}
        for attempt in range(3):  # every batch sent three times, as a retrying producer does
            for number, (start, stop) in enumerate(batches):
                part = X.row_slice(start, stop)
                ids, repeated = producer.write_once(f"batch-{number}", part.indptr,
                                                    part.indices, part.values, y[start:stop])
                assert repeated == (attempt > 0)
                first.setdefault(number, ids)
                assert ids == first[number]
        assert len(first[0]) == 2 and len(first[2]) == 2  # 30 rows per entry
        assert r.xlen(redis_keys.log_key("m")) == 5
        again = client.post("/v1/models/m/examples", json={"examples": json_examples(X, y, 0, 5)},
                            headers={"idempotency-key": "batch-1"}).json()
        assert again["repeated"] and again["log_ids"] == first[1]
        wait_for(lambda: client.get("/v1/models/m").json()["examples_applied"] == 140)
        with pytest.raises(ValueError):
            producer.write_once("has space", X.indptr[:2], X.indices[:X.indptr[1]],
                                X.values[:X.indptr[1]], y[:1])
        served = snapshot_of(client.get("/v1/models/m/snapshot").content).model
    oracle = LEARNERS["sofs"](n_features=X.n_features, budget=20).partial_fit(
        X.row_slice(0, 140), y[:140].astype(np.float64))
    assert same_state(served, oracle.state_dict())
