"""Model configs on Redis: create, list, delete, in one of two layouts (the topology picks).

:class:`ServerCatalog` (one server): the index hash ``featurebudget:models`` holds each
config; creation and deletion are single scripts over the index and the model's keys.
:class:`SlotCatalog` (a Redis Cluster): the model's ``spec`` key is the truth and the index
a superset of names, each step a script in one slot (the package docstring has the
argument). Each call is O(the model's keys), listing O(models).
"""

from __future__ import annotations

from service.storage import redis_keys
from service.storage.redis.scripts import always, not_none, text


def model_keys(name: str) -> list[str]:
    """The spec key, the model's fixed keys, the artifacts hash last (as the scripts take)."""
    fixed = [k for k in redis_keys.model_keys(name) if k != redis_keys.artifacts_key(name)]
    return [redis_keys.spec_key(name), *fixed, redis_keys.artifacts_key(name)]


class ServerCatalog:
    """Configs in the index hash (one Redis server, or the master Sentinels watch)."""

    def __init__(self, storage) -> None:
        self.storage = storage

    async def save(self, name: str, spec: bytes, *, create: bool) -> bool:
        s = self.storage
        if create:
            keys = [redis_keys.MODELS_KEY, *model_keys(name)[1:]]
            return bool(await s._write(
                redis_keys.MODELS_KEY, lambda c: s._create(keys=keys, args=[name, spec], client=c)))
        await s._write(redis_keys.MODELS_KEY, lambda c: c.hset(redis_keys.MODELS_KEY, name, spec),
                       changed=always)
        return True

    def spec_location(self, name: str) -> tuple[str, str]:
        """``(key, field)`` of the config a script reads (field '' for a string key)."""
        return redis_keys.MODELS_KEY, name

    async def load(self) -> dict[str, bytes]:
        raw = await self.storage.client.hgetall(redis_keys.MODELS_KEY)
        return {text(k): v for k, v in sorted(raw.items())}

    async def delete(self, name: str) -> bool:
        s = self.storage
        if s.min_replicas:  # one connection: unlist, then drop the keys (a crash between
            async def drop(c):  # leaves keys of no model, which a creation drops)
                removed = await c.hdel(redis_keys.MODELS_KEY, name)
                await s._cluster_delete(keys=model_keys(name), client=c)
                return removed

            return bool(await s._write(redis_keys.MODELS_KEY, drop))
        return bool(await s._delete(keys=[redis_keys.MODELS_KEY, *model_keys(name)], args=[name]))


class SlotCatalog(ServerCatalog):
    """A Redis Cluster: the spec key is the truth, the index lists names (and config copies
    for tools); no step touches two slots."""

    def spec_location(self, name: str) -> tuple[str, str]:
        return redis_keys.spec_key(name), ""  # (in the model's slot, as its log)

    async def save(self, name: str, spec: bytes, *, create: bool) -> bool:
        s, key = self.storage, redis_keys.spec_key(name)
        if not create:  # the config, then its copy in the index
            if not await s._write(key, lambda c: c.set(key, spec, xx=True)):
                return False
            await s._write(redis_keys.MODELS_KEY,
                           lambda c: c.hset(redis_keys.MODELS_KEY, name, spec), changed=always)
            return True
        if await s.client.exists(key):
            return False  # (without touching the index's copy of its config)
        await s._write(redis_keys.MODELS_KEY,  # listed before it exists
                       lambda c: c.hset(redis_keys.MODELS_KEY, name, spec), changed=always)
        return bool(await s._write(key, lambda c: s._cluster_create(
            keys=model_keys(name), args=[spec], client=c)))

    async def load(self) -> dict[str, bytes]:
        client = self.storage.client
        names = sorted(text(k) for k in await client.hkeys(redis_keys.MODELS_KEY))
        if not names:
            return {}
        specs = await client.mget_nonatomic([redis_keys.spec_key(n) for n in names])
        return {n: spec for n, spec in zip(names, specs, strict=True) if spec is not None}

    async def delete(self, name: str) -> bool:
        s = self.storage
        spec = await s._write(redis_keys.spec_key(name), lambda c: s._cluster_delete(
            keys=model_keys(name), client=c), changed=not_none)
        if spec is None:
            return False
        await s._write(redis_keys.MODELS_KEY, lambda c: s._cluster_unlist(
            keys=[redis_keys.MODELS_KEY], args=[name, spec], client=c))
        return True
