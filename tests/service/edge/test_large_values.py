"""Large snapshots and versions: on Redis written in chunks (several keys that the fenced
scripts commit as one value), read back whole and never half, fenced as before, their chunks
dropped with the value they belong to; the lease kept while a slow write lasts; end to end on
both backends (the embedded one writes files)."""

from __future__ import annotations

import asyncio
import os
import time

import numpy as np
import pytest
import redis
from fastapi.testclient import TestClient

from service import fbx1
from service.app import create_app
from service.fold_loop import save_fenced
from service.settings import Settings
from service.storage import redis_keys
from service.storage.redis import (
    CHUNKS_TAG,
    MIN_BYTES_PER_SECOND,
    ChunksExpiredError,
    RedisStorage,
    transfer_timeout,
)
from tests.support.batch_data import NO_POLICY

pytestmark = pytest.mark.redis


def chunk_keys(url: str, model: str = "m") -> list[bytes]:
    """The model's chunks that belong to a value (no TTL: not staged, not replaced)."""
    with redis.Redis.from_url(url) as client:
        return sorted(k for k in client.keys(redis_keys.chunk_prefix(model) + "*")
                      if client.ttl(k) == -1)


def replaced_chunks(url: str, model: str = "m") -> list[bytes]:
    with redis.Redis.from_url(url) as client:
        return sorted(k for k in client.keys(redis_keys.chunk_prefix(model) + "*")
                      if 0 < client.ttl(k) <= 11)


async def opened(url: str, chunk_bytes: int = 1000) -> RedisStorage:
    storage = RedisStorage(url, chunk_bytes=chunk_bytes, min_replicas=0, wait_timeout_ms=100)
    await storage.open()
    await storage.save_model("m", b'{"name": "m"}', create=True)
    assert await storage.acquire_lease("m", "me", 30)
    return storage


def test_values_round_trip_in_chunks_and_take_their_chunks_along(redis_url):
    async def main():
        storage = await opened(redis_url)
        try:
            blob = os.urandom(3500)
            assert await storage.save_snapshot("m", blob, "1-0", owner="me")
            assert await storage.load_snapshot("m") == blob
            keys = chunk_keys(redis_url)
            assert len(keys) == 4  # 1000-byte chunks, committed: no TTL left
            with redis.Redis.from_url(redis_url) as client:
                state = client.hget(redis_keys.snapshot_key("m"), "state")
                assert state.startswith(CHUNKS_TAG) and len(state) < 100
            other = os.urandom(2500)
            assert await storage.save_snapshot("m", other, "2-0", owner="me")
            assert await storage.load_snapshot("m") == other
            assert len(chunk_keys(redis_url)) == 3 and not set(keys) & set(chunk_keys(redis_url))
            assert replaced_chunks(redis_url) == keys  # kept ~10 s for readers still on them
            assert await storage.save_snapshot("m", b"small", "3-0", owner="me")
            assert await storage.load_snapshot("m") == b"small" and chunk_keys(redis_url) == []
            tagged = CHUNKS_TAG + b"abc 1 3"  # a small value that looks like a manifest
            assert await storage.save_snapshot("m", tagged, "4-0", owner="me")
            assert await storage.load_snapshot("m") == tagged

            versions = {1: os.urandom(2100), 2: b"tiny", 3: os.urandom(1001)}
            for version, value in versions.items():
                assert await storage.publish_artifact("m", version, value, b"{}", owner="me")
            for version, value in versions.items():
                assert await storage.load_artifact("m", version) == value
            assert await storage.current_version("m") == 3
            before = len(chunk_keys(redis_url))
            await storage.delete_artifacts("m", [1])
            assert await storage.load_artifact("m", 1) is None
            assert len(chunk_keys(redis_url)) == before - 3
            assert await storage.delete_model("m")
            with redis.Redis.from_url(redis_url) as client:  # (replaced chunks expire)
                assert set(client.keys("featurebudget:{m}*")) == set(replaced_chunks(redis_url))
        finally:
            await storage.close()

    asyncio.run(main())


def test_refused_and_failed_commits_write_nothing_and_leave_no_chunks(redis_url):
    async def main():
        storage = await opened(redis_url)
        try:
            kept = os.urandom(2500)
            assert await storage.save_snapshot("m", kept, "5-0", owner="me")
            kept_chunks = chunk_keys(redis_url)
            # another process holds the lease: refused before anything is staged
            assert not await storage.save_snapshot("m", os.urandom(5000), "6-0", owner="x")
            # an older snapshot: refused by the script, its staged chunks dropped
            assert not await storage.save_snapshot("m", os.urandom(5000), "4-0", owner="me")
            assert chunk_keys(redis_url) == kept_chunks

            stage = storage._stage

            async def lose_lease_while_staging(one, model, blob):
                ref = await stage(one, model, blob)
                with redis.Redis.from_url(redis_url) as client:
                    client.set(redis_keys.lease_key("m"), "someone-else")
                return ref

            storage._stage = lose_lease_while_staging
            assert not await storage.save_snapshot("m", os.urandom(5000), "7-0", owner="me")
            assert not await storage.publish_artifact("m", 1, os.urandom(5000), b"{}",
                                                      owner="me")
            assert chunk_keys(redis_url) == kept_chunks
            assert await storage.load_snapshot("m") == kept
            assert await storage.current_version("m") is None

            async def expire_a_chunk(one, model, blob):
                ref = await stage(one, model, blob)
                chunk_id = ref.split()[0]
                with redis.Redis.from_url(redis_url) as client:
                    client.delete(redis_keys.chunk_key("m", chunk_id, 1))
                return ref

            assert await storage.acquire_lease("m", "me", 30) is False  # (someone-else's)
            with redis.Redis.from_url(redis_url) as client:
                client.set(redis_keys.lease_key("m"), "me")
            storage._stage = expire_a_chunk
            with pytest.raises(ChunksExpiredError):
                await storage.save_snapshot("m", os.urandom(5000), "8-0", owner="me")
            assert chunk_keys(redis_url) == kept_chunks
            assert await storage.load_snapshot("m") == kept
        finally:
            await storage.close()

    asyncio.run(main())


def test_a_reader_never_sees_a_half_written_value(redis_url):
    """A writer replaces the snapshot with values of one repeated byte each while a reader
    reads: every value read is one of them, whole."""

    async def main():
        writer, reader = await opened(redis_url, 700), await opened(redis_url, 700)
        stop = time.monotonic() + 1.5
        seen: set[int] = set()

        async def write():
            k = 0
            while time.monotonic() < stop:
                k += 1
                assert await writer.save_snapshot("m", bytes([k % 251]) * (3000 + k % 7),
                                                  f"{k}-0", owner="me")

        async def read():
            while time.monotonic() < stop:
                value = await reader.load_snapshot("m")
                if value is not None:
                    assert value == value[:1] * len(value) and 3000 <= len(value) < 3007
                    seen.add(value[0])

        try:
            await asyncio.gather(write(), read())
        finally:
            await writer.close()
            await reader.close()
        assert len(seen) > 3  # the reader did read while values were replaced

    asyncio.run(main())


def test_socket_timeouts_scale_with_the_size(redis_url):
    assert transfer_timeout(0) == 5.0
    assert transfer_timeout(4 << 20) == 5.5
    assert transfer_timeout(400_000_000) == pytest.approx(5.0 + 400e6 / MIN_BYTES_PER_SECOND)

    async def main():
        storage = await opened(redis_url)
        try:
            async with storage._connection(redis_keys.snapshot_key("m")) as one:
                async def timeout(c):
                    return c.connection.socket_timeout

                assert await storage._sized(one, 0, timeout) == 5.0
                assert await storage._sized(one, 80 << 20, timeout) == 15.0
                assert one.connection.socket_timeout == 5.0  # restored
        finally:
            await storage.close()

    asyncio.run(main())


def test_a_slow_write_keeps_the_lease(redis_url):
    """A snapshot write slower than the lease (a large value on a slow link) still holds the
    lease when it commits: the fold renews it while writing."""
    settings = Settings(redis_url=redis_url, lease_seconds=0.6)

    async def main():
        storage = await opened(redis_url)
        assert await storage.acquire_lease("m", "me", settings.lease_seconds)
        save = storage.save_snapshot

        async def slow_save(*args, **kwargs):
            await asyncio.sleep(1.5)
            return await save(*args, **kwargs)

        storage.save_snapshot = slow_save
        try:
            assert await save_fenced(storage, settings, "m", os.urandom(3000), "1-0", "me",
                                     time.perf_counter())
            assert await storage.lease_holder("m") == "me"
            # without renewal the same write outlives the lease and is refused
            assert not await slow_save("m", os.urandom(3000), "2-0", owner="me")
        finally:
            await storage.close()

    asyncio.run(main())


def groups(n_groups: int, size: int) -> list[dict]:
    return [{"name": f"g{j}", "features": [f"f{j}_{i}" for i in range(size)], "cost": 1.0}
            for j in range(n_groups)]


def test_large_models_end_to_end_on_both_backends(make_settings, backend):
    """An anytime model whose snapshot and versions span many chunks (16 KiB chunks, D =
    120: statistics of 116 KB): folded, snapshotted, retrained, served, exported and
    imported, deleted with every key."""
    settings = make_settings(batch_worker=True, job_poll_seconds=0.05,
                             version_check_seconds=0.2, redis_chunk_bytes=16 << 10,
                             snapshot_every_examples=100)
    rng = np.random.default_rng(0)
    D = 120
    X = rng.standard_normal((400, D))
    y = X[:, :5].sum(axis=1) + 0.1 * rng.standard_normal(400)
    payload = fbx1.encode_batch(np.arange(0, X.size + 1, D), np.tile(np.arange(D), 400),
                                X.ravel(), y, targets=True)
    with TestClient(create_app(settings)) as client:
        for name in ("big", "copy"):
            response = client.post("/v1/models", json={
                "name": name, "algorithm": "cs-g-omp", "groups": groups(4, 30),
                "params": NO_POLICY})
            assert response.status_code == 201, response.text
        assert client.post("/v1/models/big/examples?wait=true", content=payload, headers={
            "content-type": "application/octet-stream"}).status_code == 202
        job = client.post("/v1/models/big/retrain").json()
        deadline = time.monotonic() + 60
        while job["status"] not in ("succeeded", "failed"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
            job = client.get(f"/v1/models/big/jobs/{job['id']}").json()
        assert job["status"] == "succeeded", job
        while client.get("/v1/models/big").json()["version"] != 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        row = {"features": {f"g{j}": {f"f{j}_{i}": float(X[0, 30 * j + i]) for i in range(30)}
                            for j in range(4)}}
        answer = client.post("/v1/models/big/predict", json={"examples": [row]}).json()
        blob = client.get("/v1/models/big/snapshot").content
        assert len(blob) > 10 * (16 << 10)
        assert client.put("/v1/models/copy/snapshot", content=blob).status_code == 200
        deadline = time.monotonic() + 30
        while client.get("/v1/models/copy").json()["version"] is None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        copied = client.post("/v1/models/copy/predict", json={"examples": [row]}).json()
        assert copied["predictions"] == answer["predictions"]
        if backend == "redis":
            url = settings.redis_url
            assert len(chunk_keys(url, "big")) > 10 and len(chunk_keys(url, "copy")) > 10
        else:
            stored = settings.data_dir / "models" / "big"
            assert (stored / "artifacts" / "1.fba").stat().st_size > 10 * (16 << 10)
        for name in ("big", "copy"):
            assert client.delete(f"/v1/models/{name}").status_code == 204
        if backend == "redis":
            with redis.Redis.from_url(settings.redis_url) as r:  # (replaced chunks expire)
                for name in ("big", "copy"):
                    assert all(0 < r.ttl(k) <= 11 for k in r.keys(f"featurebudget:{{{name}}}*"))
                    assert chunk_keys(settings.redis_url, name) == []
