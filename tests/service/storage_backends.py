"""Storage backends for tests: open each one (the contract's cases run over all of them),
and read a model's whole log without consumer state (an inspection no service code needs,
so it is no method of ``Storage``)."""

from __future__ import annotations

import contextlib

from service import wire
from service.storage.base import LogEntry, Storage

BACKENDS = ("local", "redis")


@contextlib.asynccontextmanager
async def opened(backend: str, tmp_path, redis_url: str | None, **options):
    """An opened, empty backend: local files under ``tmp_path`` or the test Redis db."""
    if backend == "local":
        from service.storage.local import LocalStorage

        storage: Storage = LocalStorage(tmp_path / "data", **options)
    else:
        from service.storage.redis import RedisStorage

        storage = RedisStorage(redis_url, **{"min_replicas": 0, "wait_timeout_ms": 1000,
                                              **options})
    await storage.open()
    try:
        yield storage
    finally:
        await storage.close()


async def log_entries(storage: Storage, model: str, count: int = 1000) -> list[LogEntry]:
    """The first ``count`` entries of ``model``'s log, in order; O(count)."""
    from service.storage.local import LocalStorage

    if isinstance(storage, LocalStorage):
        log = storage._log(model)
        return await log.run(None, log._read, 0, count)
    messages = await storage.client.xrange(wire.log_key(model), count=count)
    return [LogEntry(i.decode(), fields) for i, fields in messages]
