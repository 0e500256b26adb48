"""A model's log on Redis: the stream ``featurebudget:{m}:examples``, appended to with XADD
(one MULTI, or one script), read by the fold through the consumer group
``featurebudget-learners`` (:class:`RedisReader`), trimmed with ``XTRIM MINID``, and its
dead letters (a capped stream). Appending n entries is O(n); a read O(its reply).
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

from redis.exceptions import ResponseError

from service.priority import lower_priority
from service.storage import redis_keys
from service.storage.base import Appended, LogEntry, LogReader, ModelChangedError, id_key
from service.storage.redis.raw import xreadgroup_raw
from service.storage.redis.scripts import always, text


class RedisReader(LogReader):
    """Reads with a *blocking* connection in a worker thread (:func:`xreadgroup_raw`): big
    XREADGROUP replies (MBs of batches) are received far faster from a plain socket than
    through asyncio's flow-controlled stream reader, and the event loop stays free.

    Each reader has its own thread: a read blocks for up to ``consumer_block_ms`` on an idle
    stream, and in a shared pool (asyncio's default has CPUs + 4 threads) a hundred idle
    models' reads queued ahead of the busy model's (64,000 examples/s alone, 400/s beside
    them). The thread ends when the reader is dropped."""

    def __init__(self, storage, model: str, consumer: str) -> None:
        self.client = storage.client
        self.storage = storage
        self.key = redis_keys.log_key(model)
        self.consumer = consumer
        self.autoclaim_idle_ms = storage.autoclaim_idle_ms
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="featurebudget-read",
                                          initializer=lower_priority)  # (ingestion's)

    async def _blocking_read(self, pool, count: int, block_ms: int, wait) -> list:
        return await asyncio.get_running_loop().run_in_executor(
            self._thread, xreadgroup_raw, pool, self.key, self.consumer, count,
            max(1, block_ms), *wait)

    async def start(self, after_id: str | None) -> None:
        try:
            await self.client.xgroup_create(self.key, redis_keys.CONSUMER_GROUP, id="0",
                                            mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        await self.client.xgroup_setid(self.key, redis_keys.CONSUMER_GROUP, after_id or "0")

    async def read(self, count: int, block_ms: int) -> list[LogEntry]:
        wait = self.storage.replicas
        messages = await self.storage.topology.read(  # recovers as the topology does
            lambda pool: self._blocking_read(pool, count, block_ms, wait), self.key)
        return [LogEntry(text(i), fields) for i, fields in messages if fields is not None]

    async def ack(self, ids: list[str]) -> None:
        if ids:
            await self.client.xack(self.key, redis_keys.CONSUMER_GROUP, *ids)

    async def reclaim(self, applied_id: str | None) -> int:
        """XAUTOCLAIM idle entries; ack those already applied (or deleted)."""
        acked, start = 0, "0-0"
        applied = id_key(applied_id)
        while True:
            result = await self.client.xautoclaim(
                self.key, redis_keys.CONSUMER_GROUP, self.consumer,
                min_idle_time=self.autoclaim_idle_ms, start_id=start, count=500)
            start, messages = result[0], result[1]
            deleted = result[2] if len(result) > 2 else []
            done = [text(i) for i, _ in messages if id_key(text(i)) <= applied]
            done += [text(i) for i in deleted]
            if done:
                await self.client.xack(self.key, redis_keys.CONSUMER_GROUP, *done)
                acked += len(done)
            if text(start) == "0-0":
                return acked


async def stale_to_changed(model: str, write):
    """``await write``, with the scripts' STALE refusal as ModelChangedError."""
    try:
        return await write
    except ResponseError as exc:
        if str(exc).startswith("STALE"):
            raise ModelChangedError(model) from exc
        raise


class LogMixin:
    """The log half of :class:`~service.storage.redis.RedisStorage`."""

    async def append(self, model: str, entries: list[dict[bytes, bytes]], *,
                     incarnation: str | None = None) -> list[str]:
        key = redis_keys.log_key(model)
        if incarnation is not None:  # one script: the config checked, then the entries
            spec_key, field = self.catalog.spec_location(model)
            args: list = [field, incarnation]
            for entry in entries:
                args.append(len(entry))
                for name, value in entry.items():
                    args += [name, value]
            ids = await stale_to_changed(model, self._write(key, lambda c: self._append_checked(
                keys=[key, spec_key], args=args, client=c)))
            return [text(i) for i in ids]
        if self.min_replicas or not self.topology.transactions:  # one script
            args: list = []
            for entry in entries:
                args.append(len(entry))
                for field, value in entry.items():
                    args += [field, value]
            if not args:
                return []
            ids = await self._write(key, lambda c: self._append_entries(keys=[key], args=args,
                                                                        client=c))
            return [text(i) for i in ids]
        async with self.client.pipeline(transaction=True) as pipe:
            for entry in entries:
                pipe.xadd(key, entry)
            ids = await pipe.execute()
        return [text(i) for i in ids]

    async def append_once(self, model: str, entries: list[dict[bytes, bytes]], key: str,
                          retention_seconds: float, *, examples: int | None = None,
                          incarnation: str | None = None) -> Appended:
        args: list = [int(time.time() * 1000), max(1, int(retention_seconds * 1000)), key,
                      "" if examples is None else int(examples)]
        for entry in entries:
            args += [entry.get(b"fmt", b"bin"), entry[b"data"], entry.get(b"names", b"")]
        keys = [redis_keys.idempotency_key(model), redis_keys.idempotency_times_key(model),
                redis_keys.log_key(model)]
        script = self._append_once
        if incarnation is not None:  # the config checked in the same script
            spec_key, field = self.catalog.spec_location(model)
            keys, args, script = [*keys, spec_key], [*args, field, incarnation], \
                self._append_once_checked
        repeat, joined, count = await stale_to_changed(model, self._write(  # a repeat is
            keys[2], lambda c: script(keys=keys, args=args, client=c),  # confirmed too
            changed=always))  # (it writes its key)
        count = text(count)
        return Appended(text(joined).split(" "), bool(repeat),
                        int(count) if count.isdigit() else None)

    async def log_end(self, model: str) -> str | None:
        last = await self.client.xrevrange(redis_keys.log_key(model), count=1)
        return text(last[0][0]) if last else None

    async def trim(self, model: str, keep_from_id: str) -> None:
        await self.client.xtrim(redis_keys.log_key(model), minid=keep_from_id, approximate=False)

    def reader(self, model: str, consumer: str) -> LogReader:
        return RedisReader(self, model, consumer)

    async def deadletter(self, model: str, entry: LogEntry, reason: str) -> None:
        fields = {b"source_id": entry.id.encode(), b"reason": reason.encode(),
                  b"time": repr(time.time()).encode(),
                  b"fmt": bytes(entry.fields.get(b"fmt", b"")),
                  b"data": bytes(entry.fields.get(b"data", b"")[:65536])}
        await self.client.xadd(redis_keys.deadletter_key(model), fields,
                               maxlen=self.deadletter_maxlen, approximate=True)

    async def read_deadletters(self, model: str, count: int = 100) -> list[dict]:
        messages = await self.client.xrevrange(redis_keys.deadletter_key(model), count=count)
        return [{"id": text(fields.get(b"source_id", b"")),
                 "reason": text(fields.get(b"reason", b"")),
                 "fmt": text(fields.get(b"fmt", b""))} for _, fields in reversed(messages)]

    # ------------------------------------------------------------------ large values
