"""Large values on Redis (snapshots, versions over ``chunk_bytes``): written as chunks under
a fresh id, committed as one value by the fenced scripts (:data:`CHUNKS_TAG`,
:mod:`service.storage.redis.lua_chunks`), read chunk by chunk; every command has a socket
timeout that scales with its size (:func:`transfer_timeout`). Writing or reading a value is
O(its bytes), one command per chunk.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import uuid

from service.storage import redis_keys
from service.storage.redis.lua_chunks import CHUNKS_TAG
from service.storage.redis.scripts import text

# Large values: chunk size, and the socket timeout of a command that carries ``n`` bytes:
# ``TIMEOUT_SECONDS + n / MIN_BYTES_PER_SECOND`` (never below the connection's own, redis-py's
# 5 s default), so a chunk of 4 MiB gets 5.5 s and a whole value of 400 MB, were it sent in
# one command, 55 s; a value is read and written one chunk per command.
CHUNK_BYTES = 4 << 20
MAX_CHUNK_BYTES = 256 << 20  # under Redis's 512 MiB bulk string limit
TIMEOUT_SECONDS = 5.0
MIN_BYTES_PER_SECOND = 8 << 20
CHUNK_READ_ATTEMPTS = 5  # a value replaced while it was read is read again (its new chunks)


REPLACED_GRACE_SECONDS = 10.0  # chunks of a replaced snapshot stay this long (+ their
REPLACED_READ_BYTES_PER_SECOND = 64 << 20  # reading time at this rate) for readers on them


def replaced_ttl_ms(nbytes: int) -> int:
    """TTL of the chunks of a snapshot of about ``nbytes`` once another replaced it."""
    return int(1000 * (REPLACED_GRACE_SECONDS + nbytes / REPLACED_READ_BYTES_PER_SECOND))


def transfer_timeout(nbytes: int) -> float:
    """Socket timeout, in seconds, of one command that sends or receives ``nbytes``."""
    return TIMEOUT_SECONDS + max(0, int(nbytes)) / MIN_BYTES_PER_SECOND


BLOB = object()  # where a commit script's arguments take the value (or its manifest)


class ChunksExpiredError(RuntimeError):
    """A value's staged chunks expired before its commit (a write slower than their TTL);
    nothing was written, the write may be retried."""


class ValuesMixin:
    """The chunked-value half of :class:`~service.storage.redis.RedisStorage`."""

    @contextlib.asynccontextmanager
    async def _connection(self, key: str):
        """One connection to the master that owns ``key``, whose socket timeout
        :meth:`_sized` sets per command."""
        async with self._master_client(key).client() as one:
            yield one

    @staticmethod
    async def _sized(one, nbytes: int, call):
        """``await call(one)`` with the socket timeout of a command of ``nbytes`` bytes
        (:func:`transfer_timeout`; the connection's own when that is longer or unset)."""
        if one.connection is None:
            await one.initialize()
        connection = one.connection
        saved = connection.socket_timeout
        if saved is not None:
            connection.socket_timeout = max(saved, transfer_timeout(nbytes))
        try:
            return await call(one)
        finally:
            connection.socket_timeout = saved

    def _chunked(self, blob) -> bool:
        """Whether ``blob`` is written in chunks: larger than a chunk, or (never a real
        blob: those are zip archives) starting like a manifest."""
        return len(blob) > self.chunk_bytes or bytes(blob[:len(CHUNKS_TAG)]) == CHUNKS_TAG

    async def _stage(self, one, model: str, blob) -> str:
        """Write ``blob``'s chunks under a fresh id, each with a TTL that outlasts the whole
        write; -> the reference ``"<id> <n> <bytes>"`` a commit script takes. A write that
        fails part-way deletes what it staged (else the TTL does)."""
        chunk_id = uuid.uuid4().hex
        size, total = self.chunk_bytes, len(blob)
        n = max(1, math.ceil(total / size))
        ttl_ms = int(1000 * (60.0 + n * transfer_timeout(size)))
        view = memoryview(blob).cast("B") if not isinstance(blob, bytes) else memoryview(blob)
        written = 0
        try:
            for k in range(n):
                piece = view[k * size:(k + 1) * size]
                key = redis_keys.chunk_key(model, chunk_id, k)
                await self._sized(one, len(piece),
                                  lambda c, key=key, piece=piece: c.set(key, piece, px=ttl_ms))
                written = k + 1
        except BaseException:
            with contextlib.suppress(Exception):
                if written:
                    await self._master_client(redis_keys.chunk_key(model, chunk_id, 0)).delete(
                        *(redis_keys.chunk_key(model, chunk_id, k) for k in range(written)))
            raise
        return f"{chunk_id} {n} {total}"

    async def _read_value(self, one, model: str, key: str, field: str | None):
        """The value of ``key`` (a hash's ``field``), its chunks read and joined when it is
        a manifest; None when it is not there. A value replaced while its chunks were read
        (one is gone) is read again."""
        for attempt in range(CHUNK_READ_ATTEMPTS):
            if attempt:
                await asyncio.sleep(0.05 * attempt)
            if field is None:
                size = await self._sized(one, 0, lambda c: c.strlen(key))
                value = await self._sized(one, size, lambda c: c.get(key))
            else:
                size = await self._sized(one, 0, lambda c: c.hstrlen(key, field))
                value = await self._sized(one, size, lambda c: c.hget(key, field))
            if value is None or not value.startswith(CHUNKS_TAG):
                return value
            chunk_id, n, total = value[len(CHUNKS_TAG):].decode().split()
            parts = []
            for k in range(int(n)):
                chunk_key = redis_keys.chunk_key(model, chunk_id, k)
                part = await self._sized(one, self.chunk_bytes,
                                         lambda c, chunk_key=chunk_key: c.get(chunk_key))
                if part is None:
                    break  # replaced meanwhile: read the new value
                parts.append(part)
            else:
                blob = b"".join(parts)
                if len(blob) != int(total):
                    raise RuntimeError(f"value {key} has {len(blob)} bytes in its chunks, its "
                                       f"manifest says {total}")
                return blob
        raise RuntimeError(f"value {key} was replaced {CHUNK_READ_ATTEMPTS} times while it "
                           "was read")

    async def _commit(self, one, script, keys: list[str], args: list, model: str, blob) -> int:
        """Run a fenced write script: the blob inline, or staged in chunks first and its
        manifest inline (the script's last two arguments: chunk prefix, reference)."""
        ref = ""
        if self._chunked(blob):
            ref = await self._stage(one, model, blob)
            value = CHUNKS_TAG + ref.encode()
        else:
            value = blob
        args = [value if a is BLOB else a for a in args]
        done = await self._sized(one, 0 if ref else len(value), lambda c: script(
            keys=keys, args=[*args, redis_keys.chunk_prefix(model), ref], client=c))
        if int(done) < 0:
            raise ChunksExpiredError(f"the chunks of a value of {len(blob):,} bytes of model "
                                     f"{model!r} expired before they were committed")
        return int(done)

    async def _holds(self, one, model: str, owner: str | None) -> bool:
        """Whether ``owner`` (None: nobody is asked) holds the lease: a write of a large
        value that would be refused is not staged."""
        if not owner:
            return True
        return text(await one.get(redis_keys.lease_key(model)) or b"") == owner

    async def storage_room(self, model: str) -> int | None:
        """Bytes Redis may still take (``maxmemory`` less ``used_memory`` of the master that
        holds ``model``), None when it has no ``maxmemory``."""
        info = await self._master_client(redis_keys.snapshot_key(model)).info("memory")
        limit = int(info.get("maxmemory", 0) or 0)
        return None if limit <= 0 else max(0, limit - int(info.get("used_memory", 0)))
