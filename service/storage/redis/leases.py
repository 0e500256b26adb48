"""Who folds a model, and what it publishes, on Redis: the lease (a key with a TTL, renewed
and released by scripts), heartbeats, the applied position, placement's members per role,
and the fenced serving view, and which streams have a model to read them. Each call is one
round trip, O(1) but for :meth:`LeasesMixin.heartbeats` (O(models)),
:meth:`LeasesMixin.members` / :meth:`LeasesMixin.live_members` (O(members)) and
:meth:`LeasesMixin.stream_models` (a SCAN: O(keys), in rounds of 1,000).
"""

from __future__ import annotations

import time

from service.storage import redis_keys
from service.storage.redis.scripts import text


class LeasesMixin:
    """The lease, heartbeat, placement and view half of
    :class:`~service.storage.redis.RedisStorage`."""

    async def acquire_lease(self, model: str, owner: str, ttl_seconds: float, *,
                            renew_only: bool = False) -> bool:
        ttl_ms = int(ttl_seconds * 1000)
        if await self._renew(keys=[redis_keys.lease_key(model)], args=[owner, ttl_ms]):
            return True
        if renew_only:
            return False
        return bool(await self.client.set(redis_keys.lease_key(model), owner, nx=True, px=ttl_ms))

    async def release_lease(self, model: str, owner: str) -> None:
        await self._release(keys=[redis_keys.lease_key(model), redis_keys.heartbeat_key(model)],
                            args=[owner])  # a clean hand-over: no stale heartbeat

    async def publish_applied(self, model: str, log_id: str) -> None:
        await self.client.set(redis_keys.applied_key(model), log_id)

    async def heartbeat(self, model: str, owner: str) -> None:
        await self.client.set(redis_keys.heartbeat_key(model), f"{time.time()!r} {owner}")

    async def heartbeats(self, models: list[str]) -> dict[str, tuple[float, str]]:
        if not models:
            return {}
        keys = [redis_keys.heartbeat_key(m) for m in models]
        values = await self.topology.mget(keys)
        now, out = time.time(), {}
        for model, value in zip(models, values, strict=True):
            if value:
                stamp, _, owner = text(value).partition(" ")
                out[model] = (max(0.0, now - float(stamp)), owner)
        return out

    async def applied_position(self, model: str) -> str | None:
        value = await self.client.get(redis_keys.applied_key(model))
        return text(value) if value else None

    async def members(self, role: str, process_id: str, *, joined: float,
                      expires: float) -> dict[str, float]:
        key = redis_keys.members_key(role)
        pipe = self.client.pipeline(transaction=False)
        pipe.hset(key, process_id, f"{joined!r} {expires!r}")
        pipe.hgetall(key)
        _, raw = await pipe.execute()
        now, live, expired = time.time(), {}, []
        # a member that missed two renewals (every lease / 3) is not counted live: it is
        # likely gone (killed), so no model is placed on or handed over to it meanwhile
        silent = (expires - now) / 3
        for member, value in raw.items():
            try:
                since, until = (float(v) for v in text(value).split())
            except ValueError:
                since, until = 0.0, 0.0
            if until < now:
                expired.append(member)
            elif until - now >= silent:
                live[text(member)] = since
        if expired:
            await self.client.hdel(key, *expired)
        return live

    async def leave(self, role: str, process_id: str) -> None:
        await self.client.hdel(redis_keys.members_key(role), process_id)

    async def live_members(self, role: str, lease_seconds: float) -> list[str]:
        now, live = time.time(), []
        for member, value in (await self.client.hgetall(redis_keys.members_key(role))).items():
            try:
                until = float(text(value).split()[1])
            except (IndexError, ValueError):
                continue
            if until - now >= lease_seconds / 3:  # renewed within two thirds of a lease
                live.append(text(member))
        return sorted(live)

    async def stream_models(self) -> set[str]:
        head, tail = f"{redis_keys.KEY_PREFIX}:{{", "}:examples"
        names = set()
        async for key in self.client.scan_iter(match=f"{head}*{tail}", count=1000,
                                               _type="STREAM"):
            key = text(key)
            names.add(key[len(head):-len(tail)])
        return names

    async def lease_holder(self, model: str) -> str | None:
        value = await self.client.get(redis_keys.lease_key(model))
        return text(value) if value else None

    async def publish_view(self, model: str, token: str, blob: bytes, *,
                           owner: str | None = None) -> bool:
        done = await self._publish_view(
            keys=[redis_keys.view_key(model), redis_keys.lease_key(model),
                  redis_keys.applied_key(model)],
            args=[owner or "", token, blob])
        return bool(done)

    async def fetch_view(self, model: str, known_token: str | None
                         ) -> tuple[str | None, bytes | None]:
        answer = await self._fetch_view(keys=[redis_keys.view_key(model)], args=[known_token or ""])
        if not answer:
            return None, None
        return text(answer[0]), (answer[1] if len(answer) > 1 else None)

    async def view_token(self, model: str) -> str | None:
        value = await self.client.hget(redis_keys.view_key(model), b"token")
        return text(value) if value else None
