"""The storage contract (:class:`service.storage.base.Storage`), one set of cases run over
every backend: the embedded files (a temporary directory), Redis (the test database) and
a Redis Cluster (slow: the module's cluster). What only a shared backend promises (fencing
by lease, the snapshot's position kept beside it) is asserted where ``storage.shared``.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from service.storage import id_key
from tests.support.storage_backends import leftovers, log_entries, opened

M = "contract"
CHUNK = 1024  # Redis: values above this are chunked (the large-value cases use 10 chunks)


@pytest.fixture(params=["local", pytest.param("redis", marks=pytest.mark.redis),
                        pytest.param("cluster", marks=[pytest.mark.redis, pytest.mark.slow])])
def backend(request, tmp_path):
    """``backend()`` -> an async context manager of an opened, empty backend."""
    url = None
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
    elif request.param == "cluster":
        url = request.getfixturevalue("cluster_url")
    options = {} if request.param == "local" else {"chunk_bytes": CHUNK}
    kind = "local" if request.param == "local" else "redis"

    @contextlib.asynccontextmanager
    async def make():
        async with opened(kind, tmp_path, url, **options) as storage:
            for name in await storage.load_models():  # (the cluster outlives one case:
                await storage.delete_model(name)  # its models, and values left to expire)
            for key in await leftovers(storage, M):
                await storage.client.delete(key)
            assert await storage.save_model(M, b'{"name": "contract"}', create=True)
            yield storage

    return make


def run(backend, case) -> None:
    async def scenario():
        async with backend() as storage:
            await case(storage)

    asyncio.run(scenario())


def entries(n: int, tag: str = "e") -> list[dict[bytes, bytes]]:
    return [{b"fmt": b"libsvm", b"data": f"1 {k + 1}:1 # {tag}".encode()} for k in range(n)]


def test_models_are_created_once_listed_updated_and_deleted(backend):
    async def case(s):
        assert not await s.save_model(M, b"{}", create=True)
        assert await s.save_model(M, b'{"v": 2}', create=False)
        assert await s.load_models() == {M: b'{"v": 2}'}
        assert await s.delete_model(M)
        assert not await s.delete_model(M)
        assert await s.load_models() == {}
    run(backend, case)


def test_appends_are_ordered_and_append_once_answers_the_first_ids(backend):
    async def case(s):
        assert await s.log_end(M) is None
        first = await s.append(M, entries(3))
        assert len(first) == 3 and sorted(first, key=id_key) == first
        assert all(s.is_log_id(i) for i in first)
        ids, repeat = await s.append_once(M, entries(2, "once"), "k1", 60.0, examples=2)
        assert not repeat and id_key(ids[0]) > id_key(first[-1])
        again = await s.append_once(M, entries(2, "other"), "k1", 60.0, examples=2)
        assert again[1] and again.examples == 2
        # the first append's ids (Redis: all of them; the local log keeps the first one)
        assert again[0] == ids[:len(again[0])] and again[0]
        assert await s.log_end(M) == ids[-1]
        got = await log_entries(s, M)
        assert [e.id for e in got] == first + ids
        assert [bytes(e.fields[b"data"]) for e in got[3:]] == [b"1 1:1 # once", b"1 2:1 # once"]
        assert not s.is_log_id("not an id")
        stamp = s.id_time(ids[-1])
        assert stamp is None or stamp > 1e9  # ids that carry the time they were added
    run(backend, case)


def test_a_reader_delivers_after_its_position_and_trim_keeps_the_rest(backend):
    async def case(s):
        ids = await s.append(M, entries(5))
        reader = s.reader(M, "c1")
        await reader.start(None)
        got = await reader.read(10, 10)
        assert [e.id for e in got] == ids
        await reader.ack([e.id for e in got])
        assert await reader.read(10, 10) == []  # nothing new: waits block_ms, answers none
        more = await s.append(M, entries(1, "more"))
        assert [e.id for e in await reader.read(10, 1000)] == more
        again = s.reader(M, "c2")
        await again.start(ids[2])
        assert [e.id for e in await again.read(10, 10)] == ids[3:] + more
        await s.trim(M, ids[3])  # (a backend may keep more: the local log drops segments)
        kept = [e.id for e in await log_entries(s, M)]
        assert kept[-3:] == ids[3:] + more and set(kept) <= set(ids + more)
        assert await reader.reclaim(more[-1]) >= 0
    run(backend, case)


def test_dead_letters_keep_the_id_and_reason(backend):
    async def case(s):
        await s.append(M, entries(1))
        (entry,) = await log_entries(s, M)
        await s.deadletter(M, entry, "bad row")
        (letter,) = await s.read_deadletters(M)
        assert (letter["id"], letter["reason"], letter["fmt"]) == (entry.id, "bad row", "libsvm")
    run(backend, case)


def test_snapshots_are_fenced_by_the_lease_and_never_go_back(backend):
    async def case(s):
        ids = await s.append(M, entries(3))
        assert await s.load_snapshot(M) is None
        assert await s.acquire_lease(M, "a", 30.0)
        assert await s.save_snapshot(M, b"state 1", ids[1], owner="a")
        assert await s.load_snapshot(M) == b"state 1"
        assert await s.snapshot_position(M) == (ids[1] if s.shared else None)
        await s.heartbeat(M, "a")
        if s.shared:  # one process folds a model: another is refused, and so are old ids
            assert await s.lease_holder(M) == "a"
            assert not await s.acquire_lease(M, "b", 30.0)
            assert not await s.save_snapshot(M, b"stale", ids[2], owner="b")
            assert not await s.save_snapshot(M, b"older", ids[0], owner="a")
            assert set(await s.heartbeats([M, "other"])) == {M}
        assert await s.save_snapshot(M, b"state 2", ids[2], owner="a")
        assert await s.load_snapshot(M) == b"state 2"
        assert await s.acquire_lease(M, "a", 30.0, renew_only=True)
        await s.release_lease(M, "a")
        assert await s.acquire_lease(M, "b", 30.0)
    run(backend, case)


def test_large_values_round_trip(backend):
    async def case(s):
        (last,) = await s.append(M, entries(1))
        big = bytes(range(256)) * (10 * CHUNK // 256) + b"tail"
        assert await s.acquire_lease(M, "a", 30.0)
        assert await s.save_snapshot(M, big, last, owner="a")
        assert await s.load_snapshot(M) == big
        assert await s.save_snapshot(M, big[::-1], last, owner="a")
        assert await s.load_snapshot(M) == big[::-1]
        assert await s.publish_artifact(M, 1, big, b'{"v": 1}', owner="a")
        assert await s.load_artifact(M, 1) == big
    run(backend, case)


def test_versions_and_the_current_pointer(backend):
    async def case(s):
        events: asyncio.Queue = asyncio.Queue()

        async def listen():
            async for event in s.version_events():
                await events.put(event)

        listener = asyncio.create_task(listen())
        await asyncio.sleep(0.3)  # subscribed
        try:
            v1, v2 = await s.next_version(M), await s.next_version(M)
            assert v2 > v1
            assert await s.current_version(M) is None
            assert await s.publish_artifact(M, v1, b"blob 1", b'{"v": 1}')
            assert await s.publish_artifact(M, v2, b"blob 2", b'{"v": 2}')
            assert await s.current_version(M) == v2
            assert await s.list_artifacts(M) == {v1: b'{"v": 1}', v2: b'{"v": 2}'}
            assert await s.set_current_version(M, v1)
            assert not await s.set_current_version(M, v2 + 10)
            assert await s.current_version(M) == v1
            await s.delete_artifacts(M, [v2])
            assert list(await s.list_artifacts(M)) == [v1]
            assert await s.load_artifact(M, v2) is None
            seen = [await asyncio.wait_for(events.get(), 10) for _ in range(3)]
            assert seen == [(M, v1), (M, v2), (M, v1)]
        finally:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
    run(backend, case)


def test_jobs_cancels_status_and_pending_predictions(backend):
    async def case(s):
        events: asyncio.Queue = asyncio.Queue()

        async def listen():
            async for model in s.job_events():
                await events.put(model)

        listener = asyncio.create_task(listen())
        await asyncio.sleep(0.3)
        try:
            await s.save_job(M, "j1", b'{"id": "j1"}')
            await s.save_job(M, "j2", b'{"id": "j2"}')
            await s.notify_job(M)
            assert await asyncio.wait_for(events.get(), 10) == M
            assert await s.load_jobs(M) == {"j1": b'{"id": "j1"}', "j2": b'{"id": "j2"}'}
            await s.delete_jobs(M, ["j1"])
            assert list(await s.load_jobs(M)) == ["j2"]
        finally:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
        await s.request_cancel(M, "j2")
        assert await s.cancel_requests(M) == {"j2"}
        assert await s.load_status(M) is None
        await s.save_status(M, b'{"examples": 3}')
        assert await s.load_status(M) == b'{"examples": 3}'
        await s.put_pending(M, "p1", b"features", 60.0)
        assert await s.pop_pending(M, "p1") == b"features"
        assert await s.pop_pending(M, "p1") is None
    run(backend, case)


def test_deleting_a_model_leaves_nothing(backend):
    async def case(s):
        ids = await s.append(M, entries(2))
        await s.append_once(M, entries(1), "k", 60.0)
        assert await s.acquire_lease(M, "a", 30.0)
        assert await s.save_snapshot(M, b"x" * (3 * CHUNK), ids[-1], owner="a")
        assert await s.publish_artifact(M, await s.next_version(M), b"y" * (3 * CHUNK), b"{}",
                                        owner="a")
        await s.save_job(M, "j", b"{}")
        await s.save_status(M, b"{}")
        (entry,) = (await log_entries(s, M))[:1]
        await s.deadletter(M, entry, "bad")
        await s.release_lease(M, "a")
        assert await s.delete_model(M)
        assert await leftovers(s, M) == []
        assert await s.save_model(M, b"{}", create=True)  # the name starts afresh
        assert await s.log_end(M) is None and await s.load_snapshot(M) is None
        assert await s.list_artifacts(M) == {} and await s.load_jobs(M) == {}
        assert await s.load_status(M) is None
    run(backend, case)


def test_requested_sets_are_kept_per_process_and_dropped_with_the_model(backend):
    async def case(s):
        assert await s.load_requested_sets(M) == {}
        await s.save_requested_sets(M, "p1", b'{"counts": {"0": 3}}')
        await s.save_requested_sets(M, "p2", b'{"counts": {"1": 1}}')
        await s.save_requested_sets(M, "p1", b'{"counts": {"0": 5}}')  # replaces p1's
        assert await s.load_requested_sets(M) == {"p1": b'{"counts": {"0": 5}}',
                                                  "p2": b'{"counts": {"1": 1}}'}
        assert await s.load_requested_sets("other") == {}
        assert await s.delete_model(M)
        assert await leftovers(s, M) == []
        assert await s.load_requested_sets(M) == {}
    run(backend, case)
