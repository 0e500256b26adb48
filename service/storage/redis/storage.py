"""The Redis backend's storage class: one :class:`RedisStorage` assembled from the mixins of
this package (one concern each), its topology (:mod:`.topology`), and acknowledged writes
(:meth:`RedisStorage._write`: ``WAIT`` for ``min_replicas`` on the write's connection).
"""

from __future__ import annotations

import re

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from service.errors import NotReplicatedError
from service.storage.base import Storage, id_key
from service.storage.redis import scripts
from service.storage.redis.events import EventsMixin
from service.storage.redis.leases import LeasesMixin
from service.storage.redis.log import LogMixin
from service.storage.redis.models import ModelsMixin
from service.storage.redis.raw import check_socket_access
from service.storage.redis.topology import make_topology
from service.storage.redis.values import CHUNK_BYTES, MAX_CHUNK_BYTES, ValuesMixin


class RedisStorage(LogMixin, LeasesMixin, ModelsMixin, ValuesMixin, EventsMixin, Storage):
    """Models, logs and values on one Redis server, a Sentinel-watched master or a Redis
    Cluster (see the package docstring)."""

    kind = "redis"
    shared = True
    log_id_form = "ms-seq"  # stream ids: the milliseconds they were added, a sequence
    log_id_pattern = re.compile(r"^\d+-\d+$")

    def __init__(self, url: str, *, autoclaim_idle_ms: int = 30000,
                 deadletter_maxlen: int = 10000, min_replicas: int | None = None,
                 wait_timeout_ms: int | None = None, chunk_bytes: int = CHUNK_BYTES) -> None:
        """``min_replicas`` / ``wait_timeout_ms``: see :meth:`_write`; None = the settings
        ``FEATUREBUDGET_REDIS_MIN_REPLICAS`` / ``_WAIT_TIMEOUT_MS`` of the environment.
        ``chunk_bytes``: snapshots and versions larger than this are written in chunks of
        this size (:data:`CHUNKS_TAG`)."""
        if not 1 <= chunk_bytes <= MAX_CHUNK_BYTES:
            raise ValueError(f"chunk_bytes must be in [1, {MAX_CHUNK_BYTES}], got {chunk_bytes}")
        self.chunk_bytes = int(chunk_bytes)
        self.url = url
        self.topology = make_topology(url)  # ValueError: a malformed cluster/sentinel URL
        self.autoclaim_idle_ms = autoclaim_idle_ms
        self.deadletter_maxlen = deadletter_maxlen
        if min_replicas is None or wait_timeout_ms is None:
            from service.storage.redis_writes import RedisWriteSettings

            settings = RedisWriteSettings()
            min_replicas = settings.redis_min_replicas if min_replicas is None else min_replicas
            wait_timeout_ms = (settings.redis_wait_timeout_ms if wait_timeout_ms is None
                               else wait_timeout_ms)
        if min_replicas < 0 or wait_timeout_ms < 1:
            raise ValueError(f"min_replicas must be >= 0 and wait_timeout_ms >= 1, got "
                             f"{min_replicas} and {wait_timeout_ms}")
        self.min_replicas = int(min_replicas)
        self.wait_timeout_ms = int(wait_timeout_ms)
        # what the raw reader WAITs for after each read (nothing with min_replicas = 0)
        self.replicas = (self.min_replicas, self.wait_timeout_ms) if self.min_replicas else ()
        self.catalog = self.topology.catalog(self)

    @property
    def description(self) -> str:
        from service.startup import mask_url

        return f"redis backend at {mask_url(self.url)}"

    def id_time(self, log_id: str) -> float | None:
        return id_key(log_id)[0] / 1e3

    @property
    def client(self):
        """The commands' client (None before :meth:`open` and after :meth:`close`)."""
        return self.topology.client

    def pool_for(self, key: str):
        """The blocking pool (for the raw reader) of the master that owns ``key`` now."""
        return self.topology.pool_for(key)

    def _master_client(self, key: str) -> aioredis.Redis:
        return self.topology.master_client(key)

    async def open(self) -> None:
        check_socket_access()
        await self.topology.open()
        scripts.register(self, self.client)

    async def close(self) -> None:
        await self.topology.close()

    async def ping(self) -> None:
        await self.client.ping()

    async def save_model(self, name: str, spec: bytes, *, create: bool) -> bool:
        return await self.catalog.save(name, spec, create=create)

    async def load_models(self) -> dict[str, bytes]:
        return await self.catalog.load()

    async def delete_model(self, name: str) -> bool:
        return await self.catalog.delete(name)

    async def _write(self, key: str, write, changed=bool):
        """``await write(client)`` for a write the service acknowledges. With MIN_REPLICAS=0
        on the shared client, nothing more. Else on one connection to the master that owns
        ``key``, then (when ``changed(result)``: something was written) ``WAIT k timeout``
        on that connection: :class:`NotReplicatedError` unless k replicas confirm it."""
        if not self.min_replicas:
            return await write(self.client)
        for attempt in (1, 2):
            try:
                async with self._master_client(key).client() as one:
                    result = await write(one)
                    if changed(result):
                        await self._confirm(one.connection)
                    return result
            except Exception as exc:  # a cluster: a moved slot or a lost node, ask it again
                if not (self.topology.retries(exc) or self.topology.retries(exc.__cause__)):
                    raise
                await self.topology.refresh()
                if attempt == 2 or not isinstance(exc, ResponseError):
                    raise  # (only a refusal, MOVED..., wrote nothing: once more)

    async def _confirm(self, connection) -> None:
        """``WAIT`` on the connection of the write, never retried on another (a WAIT on a
        fresh connection would confirm nothing)."""
        k, timeout = self.min_replicas, self.wait_timeout_ms
        try:
            await connection.send_command("WAIT", k, timeout)
            confirmed = int(await connection.read_response())
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            await connection.disconnect()
            raise NotReplicatedError(
                f"the connection to the Redis master was lost while waiting for {k} "
                f"replicas ({type(exc).__name__}: {exc}): the write may or may not be kept; "
                "retry it (with the same Idempotency-Key: nothing is appended twice)") from exc
        if confirmed < k:
            raise NotReplicatedError(
                f"{confirmed} of the {k} Redis replicas FEATUREBUDGET_REDIS_MIN_REPLICAS asks "
                f"for confirmed the write within {timeout} ms: it is not acknowledged and may "
                "or may not be kept; retry it (with the same Idempotency-Key: nothing is "
                "appended twice)")


def open_url(url: str, settings) -> RedisStorage:
    """The scheme table's factory for the Redis schemes (:mod:`service.storage.schemes`)."""
    return RedisStorage(url, autoclaim_idle_ms=settings.autoclaim_idle_ms,
                        deadletter_maxlen=settings.deadletter_maxlen,
                        min_replicas=settings.redis_min_replicas,
                        wait_timeout_ms=settings.redis_wait_timeout_ms,
                        chunk_bytes=settings.redis_chunk_bytes)
