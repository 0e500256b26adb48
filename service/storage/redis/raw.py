"""The fold's raw stream read: ``XREADGROUP`` on a blocking redis-py connection whose reply
is parsed here (:class:`_RespReply`), big field values received straight into their arrays.

redis-py has no public accessor for a connection's socket: :func:`connection_socket` uses
``Connection._get_socket()`` where it exists (recent redis-py) or the ``_sock`` attribute
it returns (older ones), feature-detected per call; :func:`check_socket_access` (run when
the storage opens) fails with the supported range when neither exists. pyproject.toml pins
redis-py to that range. A read is O(reply bytes), one copy from the kernel per big value.
"""

from __future__ import annotations

import numpy as np
import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from service.errors import NotReplicatedError
from service.storage import redis_keys

SUPPORTED = "redis-py >= 5.0, < 9 (pyproject.toml)"


def connection_socket(connection):
    """The connected socket of a blocking redis-py ``connection`` (None before connect)."""
    get = getattr(connection, "_get_socket", None)
    return get() if get is not None else connection._sock


def check_socket_access() -> None:
    """RuntimeError when this redis-py keeps a connection's socket where
    :func:`connection_socket` does not look (a version outside :data:`SUPPORTED`)."""
    probe = redis.Connection()
    if not (callable(getattr(probe, "_get_socket", None)) or hasattr(probe, "_sock")):
        raise RuntimeError(f"redis-py {redis.__version__} hides a connection's socket from "
                           f"the fold's raw reader; the service supports {SUPPORTED}")


_BIG_BULK = 1 << 16  # bulk strings at least this long are received straight into their buffer


class _RespReply:
    """A minimal RESP2 reply reader over a blocking socket, for XREADGROUP replies.

    Each big bulk string (a log entry's ``data``: up to MBs) is received with ``recv_into``
    straight into an uninitialized uint8 array of its exact size: one copy from the kernel,
    where the generic client copies it three times (socket buffer, hiredis buffer,
    ``bytes``). Not a ``bytearray``: that one is zero-filled first, with the GIL held (the
    largest GIL holder of binary stream ingestion when it was one). Small elements are read
    through a 64 KiB buffer."""

    def __init__(self, sock) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.pos = 0

    def _fill(self) -> None:
        if self.pos:
            del self.buf[:self.pos]
            self.pos = 0
        chunk = self.sock.recv(_BIG_BULK)
        if not chunk:
            raise RedisConnectionError("Redis closed the connection during a reply")
        self.buf += chunk

    def _line(self) -> bytes:
        while True:
            end = self.buf.find(b"\r\n", self.pos)
            if end >= 0:
                line = bytes(self.buf[self.pos:end])
                self.pos = end + 2
                return line
            self._fill()

    def _bulk(self, size: int):
        available = len(self.buf) - self.pos
        if size < _BIG_BULK or available >= size + 2:
            while len(self.buf) - self.pos < size + 2:
                self._fill()
            value = bytes(self.buf[self.pos:self.pos + size])
            self.pos += size + 2
            return value
        value = np.empty(size, dtype=np.uint8)
        if available:
            value[:available] = np.frombuffer(self.buf, dtype=np.uint8, offset=self.pos)
        self.buf.clear()
        self.pos = 0
        view, received = memoryview(value), available
        while received < size:
            k = self.sock.recv_into(view[received:])
            if not k:
                raise RedisConnectionError("Redis closed the connection during a reply")
            received += k
        while len(self.buf) < 2:  # the bulk's trailing CRLF
            self._fill()
        self.pos = 2
        return value

    def value(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.value() for _ in range(n)]
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._bulk(n)
        if kind == b":":
            return int(rest)
        if kind == b"+":
            return rest
        if kind == b"-":
            raise ResponseError(rest.decode(errors="replace"))
        if kind == b"_":
            return None
        raise RedisConnectionError(f"unexpected RESP reply type {kind!r}")

    def done(self) -> bool:
        return self.pos == len(self.buf)


def xreadgroup_raw(pool: redis.ConnectionPool, key: str, consumer: str, count: int,
                   block_ms: int, min_replicas: int = 0,
                   wait_timeout_ms: int = 1000) -> list[tuple[bytes, dict | None]]:
    """``XREADGROUP ... STREAMS key >`` on a blocking connection of ``pool`` -> [(id,
    fields)], big field values as uint8 arrays (see :class:`_RespReply`). A connection
    whose reply was not read to its end is dropped, never reused. With ``min_replicas``,
    entries are answered only once ``WAIT`` on the same connection confirms that many
    replicas have them (the read is a write: it moves the group); else
    :class:`NotReplicatedError` (they stay pending, and come again after a re-position)."""
    connection = pool.get_connection()
    clean, confirmed = False, None
    try:
        connection.send_command("XREADGROUP", "GROUP", redis_keys.CONSUMER_GROUP, consumer,
                                "COUNT", count, "BLOCK", block_ms, "STREAMS", key, ">")
        reply = _RespReply(connection_socket(connection))
        try:
            response = reply.value()
        except ResponseError as exc:  # READONLY: a demoted master, reconnect (sentinel)
            clean = reply.done() and not str(exc).startswith("READONLY")
            raise
        clean = reply.done()
        if response and min_replicas:
            clean = False
            connection.send_command("WAIT", min_replicas, wait_timeout_ms)
            reply = _RespReply(connection_socket(connection))
            confirmed = reply.value()
            clean = reply.done()
    finally:
        if not clean:
            connection.disconnect()
        pool.release(connection)
    if confirmed is not None and confirmed < min_replicas:
        raise NotReplicatedError(
            f"{confirmed} of {min_replicas} Redis replicas confirmed the entries read from "
            f"{key} within {wait_timeout_ms} ms: they are applied once the replicas have "
            "them (FEATUREBUDGET_REDIS_MIN_REPLICAS)")
    if not response:
        return []
    _, messages = response[0]
    out = []
    for message_id, flat in messages:
        fields = None if flat is None else {
            bytes(flat[k]): flat[k + 1] for k in range(0, len(flat) - 1, 2)}
        out.append((message_id, fields))
    return out
