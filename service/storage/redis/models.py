"""What a model keeps on Redis besides its log: the fenced snapshot (state and log id
together), pending predictions, and a batch model's versions, current pointer, retrain jobs,
cancel requests and status. Large values go through :mod:`service.storage.redis.values`.
Each call is one round trip (a large value: one per chunk), O(its bytes).
"""

from __future__ import annotations

import time

from service.storage import redis_keys
from service.storage.redis.scripts import text
from service.storage.redis.values import BLOB, replaced_ttl_ms

REQUESTED_SETS_TTL_SECONDS = 86_400


class ModelsMixin:
    """The snapshot, pending, version, job and status half of
    :class:`~service.storage.redis.RedisStorage`."""

    async def save_snapshot(self, model: str, blob: bytes, log_id: str | None, *,
                            owner: str | None = None) -> bool:
        key = redis_keys.snapshot_key(model)
        async with self._connection(key) as one:
            if self._chunked(blob) and not await self._holds(one, model, owner):
                return False
            return await self._commit(one, self._save_snapshot,
                                      [key, redis_keys.lease_key(model)],
                                      [BLOB, log_id or "", owner or "",
                                       replaced_ttl_ms(len(blob))], model, blob) == 1

    async def load_snapshot(self, model: str) -> bytes | None:
        key = redis_keys.snapshot_key(model)
        async with self._connection(key) as one:
            return await self._read_value(one, model, key, "state")

    async def snapshot_position(self, model: str) -> str | None:
        value = await self.client.hget(redis_keys.snapshot_key(model), b"log_id")
        return text(value) if value else None

    async def put_pending(self, model: str, prediction_id: str, blob: bytes,
                          ttl_seconds: float) -> None:
        key = redis_keys.pending_key(model, prediction_id)
        await self._write(key, lambda c: c.set(key, blob, px=max(1, int(ttl_seconds * 1000))))

    async def pop_pending(self, model: str, prediction_id: str) -> bytes | None:
        return await self.client.getdel(redis_keys.pending_key(model, prediction_id))

    # ------------------------------------------------------------------ batch models
    async def next_version(self, model: str) -> int:
        return int(await self.client.incr(redis_keys.version_seq_key(model)))

    async def publish_artifact(self, model: str, version: int, blob: bytes, meta: bytes, *,
                               owner: str | None = None) -> bool:
        keys = [redis_keys.lease_key(model), redis_keys.artifacts_key(model),
                redis_keys.artifact_key(model, version), redis_keys.version_key(model)]
        async with self._connection(keys[2]) as one:
            if self._chunked(blob) and not await self._holds(one, model, owner):
                return False
            return await self._commit(one, self._publish, keys, [
                owner or "", int(version), BLOB, meta, redis_keys.VERSIONS_CHANNEL, model],
                model, blob) == 1

    async def load_artifact(self, model: str, version: int) -> bytes | None:
        key = redis_keys.artifact_key(model, version)
        async with self._connection(key) as one:
            return await self._read_value(one, model, key, None)

    async def list_artifacts(self, model: str) -> dict[int, bytes]:
        raw = await self.client.hgetall(redis_keys.artifacts_key(model))
        return {int(k): v for k, v in sorted(raw.items(), key=lambda kv: int(kv[0]))}

    async def delete_artifacts(self, model: str, versions: list[int]) -> None:
        if versions:  # (with the chunks of chunked ones, in one step)
            await self._delete_artifacts(
                keys=[redis_keys.artifacts_key(model),
                      *(redis_keys.artifact_key(model, v) for v in versions)],
                args=[redis_keys.chunk_prefix(model), *(str(int(v)) for v in versions)])

    async def current_version(self, model: str) -> int | None:
        value = await self.client.get(redis_keys.version_key(model))
        return int(value) if value else None

    async def set_current_version(self, model: str, version: int) -> bool:
        keys = [redis_keys.artifacts_key(model), redis_keys.version_key(model)]
        done = await self._write(keys[1], lambda c: self._set_current(
            keys=keys, args=[int(version), redis_keys.VERSIONS_CHANNEL, model], client=c))
        return bool(done)

    async def save_job(self, model: str, job_id: str, record: bytes) -> None:
        await self.client.hset(redis_keys.jobs_key(model), job_id, record)

    async def load_jobs(self, model: str) -> dict[str, bytes]:
        raw = await self.client.hgetall(redis_keys.jobs_key(model))
        return {text(k): v for k, v in raw.items()}

    async def delete_jobs(self, model: str, job_ids: list[str]) -> None:
        if job_ids:
            await self.client.hdel(redis_keys.jobs_key(model), *job_ids)

    async def request_cancel(self, model: str, job_id: str) -> None:
        await self.client.hset(redis_keys.cancels_key(model), job_id, repr(time.time()))

    async def cancel_requests(self, model: str) -> set[str]:
        return {text(k) for k in await self.client.hkeys(redis_keys.cancels_key(model))}

    async def save_status(self, model: str, status: bytes) -> None:
        await self.client.set(redis_keys.status_key(model), status)

    async def load_status(self, model: str) -> bytes | None:
        return await self.client.get(redis_keys.status_key(model))

    async def save_requested_sets(self, model: str, process_id: str, counts: bytes) -> None:
        """One field per process; the hash expires a day after the last write, so a
        process gone for good stops counting."""
        key = redis_keys.requested_sets_key(model)
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.hset(key, process_id, counts)
            pipe.expire(key, REQUESTED_SETS_TTL_SECONDS)
            await pipe.execute()

    async def load_requested_sets(self, model: str) -> dict[str, bytes]:
        raw = await self.client.hgetall(redis_keys.requested_sets_key(model))
        return {text(k): v for k, v in raw.items()}
