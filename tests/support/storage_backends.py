"""Storage backends for tests: open each one (the contract's cases run over all of them),
read a model's whole log without consumer state, and list what a model left behind
(inspections no service code needs, so they are no methods of ``Storage``)."""

from __future__ import annotations

import contextlib

from service.storage import redis_keys
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
    messages = await storage.client.xrange(redis_keys.log_key(model), count=count)
    return [LogEntry(i.decode(), fields) for i, fields in messages]


async def leftovers(storage: Storage, model: str) -> list[str]:
    """What the backend still holds of ``model``: files under its directory (local), keys
    in its hash tag (Redis; on a cluster, on the node of its slot). O(the backend's keys)."""
    from service.storage.local import LocalStorage

    if isinstance(storage, LocalStorage):
        found = [storage.root / "models" / model, *(storage.root / "trash").glob(f"{model}.*")]
        return sorted(str(p) for p in found if p.exists())
    pattern = f"{redis_keys.KEY_PREFIX}:{{{model}}}:*"
    client = storage.client
    if hasattr(client, "get_node_from_key"):  # a cluster: the model's keys share one node
        node = client.get_node_from_key(redis_keys.log_key(model))
        keys = await client.execute_command("KEYS", pattern, target_nodes=node)
    else:
        keys = await client.keys(pattern)
    return sorted(k.decode() if isinstance(k, bytes) else k for k in keys)
