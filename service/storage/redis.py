"""Redis backend: each model's log is the stream ``featurebudget:{m}:examples``.

The owner of a model (a lease key) reads the stream through the consumer group
``featurebudget-learners``. On start it moves the group's position to the id stored with
the latest snapshot (``XGROUP SETID``), so everything after the snapshot is delivered again
in log order and entries at or before it are skipped: applying is idempotent by id. Entries
are acknowledged (``XACK``) after they are applied; pending entries of dead consumers are
reclaimed with ``XAUTOCLAIM`` and acknowledged when already applied (later ones come again
through ``>``, in order). After a snapshot the stream is trimmed with ``XTRIM MINID`` at
the snapshot's id, so an entry that a snapshot or consumer still needs is never dropped.

**Redis Cluster** (``FEATUREBUDGET_REDIS_URL=redis+cluster://host:port[,host:port...]/``,
redis-py's :class:`~redis.asyncio.cluster.RedisCluster`): every key of a model carries the
hash tag ``{m}``, so all of them live in one slot, on one master; the global keys are the
index ``featurebudget:models`` (its own slot) and the pub/sub channels (PUBLISH reaches
every node: a plain connection to one node subscribes). The rule: **every script and every
multi-key command touches one slot**, either the model's or the index's, never both. On one
server, creation and deletion stay single scripts over the index and the model's keys
together; on a cluster they are two steps, and no prefix of them, crash or interleaving with
another process, hides a live model or lets one fold another's entries:

* ``featurebudget:{m}:spec`` (the config) is the truth: a model exists iff this key does;
  ``load_models`` answers the index's names whose spec key exists, with that key's value.
* The index is a superset of the live models; its values are copies of the config for
  tools (after two processes raced to create one name, possibly the loser's). Create: (1)
  list the name in the index, (2) one script in ``{m}``: refuse when the spec exists, else
  drop every leftover key of the name (a deleted model's, entries a producer XADDed
  meanwhile) and write the spec (a name whose spec exists is refused before step 1).
  Delete: (1) one script in ``{m}``: the spec and every key of the model go together, (2)
  remove the index entry only when it still holds the config just deleted, so a name
  created again meanwhile stays listed (configs carry their creation time: one config, one
  creation). A config update writes the spec key (only while it exists), then the copy. A
  crash after either first step leaves an index name without spec: ignored, no model.
* The raw XREADGROUP reader asks the cluster client which master owns the model's slot and
  refreshes the cluster's topology on MOVED / ASK / CLUSTERDOWN / a lost connection (a
  failover), then reads again.

**Redis Sentinel** (``redis+sentinel://host:port[,host:port...]/<master-name>[/<db>]``,
redis-py's :class:`~redis.asyncio.sentinel.Sentinel`): every connection, the raw reader's
included, asks the sentinels for the master's address when it connects, so after a
failover (connections to the old master fail, or answer READONLY once it is a replica)
the next connection reaches the promoted replica. The fold then starts a new reader from
its applied id: the consumer group and its pending entries are stream state, replicated
with the stream.

**Acknowledged writes** (``FEATUREBUDGET_REDIS_MIN_REPLICAS=k``, :meth:`RedisStorage._write`):
with k > 0 each write the service acknowledges (appends, model configs, pending
predictions, a rollback) runs on one connection of the master that owns its key, followed
by ``WAIT k timeout`` on that same connection (WAIT counts the replicas that have every
write up to the connection's last one); fewer than k: :class:`NotReplicatedError` (503),
the write may or may not be kept. The fold's reader likewise applies only entries k
replicas have (WAIT after each XREADGROUP), so a failover to one of them never loses an
entry the learner already includes. Snapshots, leases and serving views need no WAIT:
replication keeps the order of writes, so a replica holds a prefix of the master's
history (a snapshot it has comes with every entry and trim before it), and the fenced
scripts check the lease on whichever server is the master now. With k = 0 nothing of this
runs: no WAIT, the pooled connections as before.

**Large values** (snapshots, versions over ``chunk_bytes``, ``FEATUREBUDGET_REDIS_CHUNK_BYTES``):
written as chunks under a fresh id and committed as one value by the same fenced scripts
(see :data:`CHUNKS_TAG`), read chunk by chunk; every command of them has a socket timeout
that scales with its size (:func:`transfer_timeout`).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from service import wire
from service.errors import NotReplicatedError
from service.storage.base import Appended, LogEntry, LogReader, Storage, id_key

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1], KEYS[2]) end
return 0
"""
# Large values (snapshots, versions) are written in chunks: ``chunk_bytes`` each, under keys
# ``featurebudget:{m}:chunk:<id>:<k>`` of a fresh id, staged with a TTL (a writer that dies
# leaves nothing for long), then committed by the fenced script that makes them the value:
# it checks the lease (and the snapshot's order), checks that every staged chunk is there,
# PERSISTs them, stores the manifest ``CHUNKS_TAG <id> <n> <bytes>`` where the value was, and
# gives the chunks of the snapshot it replaces a short TTL (:func:`replaced_ttl_ms`: readers
# that started on it finish), all in one step. Chunks are never written again under their
# id, so a reader that got every chunk of a manifest has that value; one that finds a chunk
# gone (replaced, and its grace over) reads the new manifest. A refused commit deletes its
# staged chunks. Model creation and deletion drop every chunk the
# snapshot and the versions refer to.
CHUNKS_TAG = b"FBCHUNKS1 "
_CHUNK_LUA = """
local tag = '""" + CHUNKS_TAG.decode() + """'
local function drop_chunks(prefix, ref)
  if not ref or ref == '' then return end
  local id, n = string.match(ref, '^(%S+) (%d+)')
  if id == nil then return end
  for k = 0, tonumber(n) - 1 do redis.call('DEL', prefix .. id .. ':' .. k) end
end
local function expire_chunks(prefix, ref, ms)
  if not ref or ref == '' then return end
  local id, n = string.match(ref, '^(%S+) (%d+)')
  if id == nil then return end
  for k = 0, tonumber(n) - 1 do redis.call('PEXPIRE', prefix .. id .. ':' .. k, ms) end
end
local function keep_chunks(prefix, ref)
  local id, n = string.match(ref, '^(%S+) (%d+)')
  if id == nil then return 0 end
  for k = 0, tonumber(n) - 1 do
    if redis.call('EXISTS', prefix .. id .. ':' .. k) == 0 then return 0 end
  end
  for k = 0, tonumber(n) - 1 do redis.call('PERSIST', prefix .. id .. ':' .. k) end
  return 1
end
local function value_ref(key)
  local head = redis.call('GETRANGE', key, 0, 255)
  if head and string.sub(head, 1, #tag) == tag then return string.sub(head, #tag + 1) end
  return nil
end
local function drop_model_chunks(prefix)
  local chunks = prefix .. 'chunk:'
  drop_chunks(chunks, redis.call('HGET', prefix .. 'snapshot', 'chunks'))
  for _, version in ipairs(redis.call('HKEYS', prefix .. 'artifacts')) do
    drop_chunks(chunks, value_ref(prefix .. 'artifact:' .. version))
  end
end
"""
# Fenced snapshot write. KEYS: snapshot hash, lease. ARGV: state (or its manifest), log id,
# owner ('' = no lease check), the replaced chunks' TTL (ms), chunk prefix, the staged chunks
# ("<id> <n> <bytes>", '' for a value written whole). Refuses (returns 0) when another
# process holds the lease, or when the stored snapshot already includes a later log entry:
# a stale owner that wakes up after its lease expired can neither overwrite a newer snapshot
# nor let the log be trimmed below its replay. -1: a staged chunk is gone (expired before
# the commit; nothing written).
_SAVE_SNAPSHOT = _CHUNK_LUA + """
if ARGV[3] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[3] then
  drop_chunks(ARGV[5], ARGV[6])
  return 0
end
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  if ms == nil then return nil end
  return tonumber(ms), tonumber(seq)
end
local old = redis.call('HGET', KEYS[1], 'log_id')
if old and old ~= '' then
  local old_ms, old_seq = parse(old)
  local new_ms, new_seq = parse(ARGV[2])
  if new_ms == nil or (old_ms ~= nil and (new_ms < old_ms or
                                          (new_ms == old_ms and new_seq < old_seq))) then
    drop_chunks(ARGV[5], ARGV[6])
    return 0
  end
end
if ARGV[6] ~= '' and keep_chunks(ARGV[5], ARGV[6]) == 0 then
  drop_chunks(ARGV[5], ARGV[6])
  return -1
end
local replaced = redis.call('HGET', KEYS[1], 'chunks')
if replaced and replaced ~= ARGV[6] then expire_chunks(ARGV[5], replaced, ARGV[4]) end
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'log_id', ARGV[2], 'chunks', ARGV[6])
return 1
"""

# Fenced publish of an online model's serving view. KEYS: view hash, lease, applied key.
# ARGV: owner ('' = no check), token ("<log id> <nonce>"), state. Refuses (0) when another
# process holds the lease or the stored view includes a later log entry.
_PUBLISH_VIEW = """
if ARGV[1] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
local function parse(token)
  local ms, seq = string.match(token, '^(%d+)-(%d+) ')
  if ms == nil then return nil end
  return tonumber(ms), tonumber(seq)
end
local old = redis.call('HGET', KEYS[1], 'token')
local new_ms, new_seq = parse(ARGV[2])
if new_ms == nil then return 0 end
if old then
  local old_ms, old_seq = parse(old)
  if old_ms ~= nil and (new_ms < old_ms or (new_ms == old_ms and new_seq < old_seq)) then
    return 0
  end
end
redis.call('HSET', KEYS[1], 'state', ARGV[3], 'token', ARGV[2])
redis.call('SET', KEYS[3], string.match(ARGV[2], '^(%S+)'))
return 1
"""
# KEYS: view hash. ARGV: the token the caller holds. -> {token} or {token, state}.
_FETCH_VIEW = """
local token = redis.call('HGET', KEYS[1], 'token')
if not token then return {} end
if token == ARGV[1] then return {token} end
return {token, redis.call('HGET', KEYS[1], 'state')}
"""

# Fenced publish of a batch model's version. KEYS: lease, artifacts hash, artifact blob,
# current-version key. ARGV: owner ('' = no check), version, blob (or its manifest), meta,
# channel, model, chunk prefix, the staged chunks ('' for a blob written whole). 0: refused
# (the lease); -1: a staged chunk is gone (nothing written).
_PUBLISH = _CHUNK_LUA + """
if ARGV[1] ~= '' and redis.call('GET', KEYS[1]) ~= ARGV[1] then
  drop_chunks(ARGV[7], ARGV[8])
  return 0
end
if ARGV[8] ~= '' and keep_chunks(ARGV[7], ARGV[8]) == 0 then
  drop_chunks(ARGV[7], ARGV[8])
  return -1
end
local replaced = value_ref(KEYS[3])
if replaced and replaced ~= ARGV[8] then drop_chunks(ARGV[7], replaced) end
redis.call('SET', KEYS[3], ARGV[3])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[4])
redis.call('SET', KEYS[4], ARGV[2])
redis.call('PUBLISH', ARGV[5], ARGV[6] .. ' ' .. ARGV[2])
return 1
"""
# Rollback: KEYS: artifacts hash, current-version key. ARGV: version, channel, model.
_SET_CURRENT = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('SET', KEYS[2], ARGV[1])
redis.call('PUBLISH', ARGV[2], ARGV[3] .. ' ' .. ARGV[1])
return 1
"""

# Create a model. KEYS: models hash, then the model's fixed keys (wire.model_keys), the
# artifacts hash last. ARGV: name, spec. Anything left under the model's name (entries XADDed
# to a stream of a model that did not exist, keys of a deleted model) goes first, in the same
# step, so a new model never folds another's entries.
_CREATE = _CHUNK_LUA + """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
local prefix = string.sub(KEYS[#KEYS], 1, -string.len('artifacts') - 1)
drop_model_chunks(prefix)
for _, version in ipairs(redis.call('HKEYS', KEYS[#KEYS])) do
  redis.call('DEL', prefix .. 'artifact:' .. version)
end
for i = 2, #KEYS do redis.call('DEL', KEYS[i]) end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"""


# Redis Cluster: the same steps, one slot per script (see the module docstring).
# Create, in the model's slot. KEYS: the spec key, the model's fixed keys, the artifacts hash
# last. ARGV: spec. Refuses (0) when the model exists; else drops leftovers, writes the spec.
_CLUSTER_CREATE = _CHUNK_LUA + """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local prefix = string.sub(KEYS[#KEYS], 1, -string.len('artifacts') - 1)
drop_model_chunks(prefix)
for _, version in ipairs(redis.call('HKEYS', KEYS[#KEYS])) do
  redis.call('DEL', prefix .. 'artifact:' .. version)
end
for i = 2, #KEYS do redis.call('DEL', KEYS[i]) end
redis.call('SET', KEYS[1], ARGV[1])
return 1
"""
# Delete, in the model's slot. KEYS: as _CLUSTER_CREATE. -> the deleted spec, or nil.
_CLUSTER_DELETE = _CHUNK_LUA + """
local spec = redis.call('GET', KEYS[1])
local prefix = string.sub(KEYS[#KEYS], 1, -string.len('artifacts') - 1)
drop_model_chunks(prefix)
for _, version in ipairs(redis.call('HKEYS', KEYS[#KEYS])) do
  redis.call('DEL', prefix .. 'artifact:' .. version)
end
for i = 1, #KEYS do redis.call('DEL', KEYS[i]) end
return spec
"""
# Unlist, in the index's slot. KEYS: models hash. ARGV: name, the spec just deleted.
_CLUSTER_UNLIST = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
"""
# Atomic append of several entries: on a cluster (MULTI over a cluster client depends on the
# redis-py version), and with MIN_REPLICAS (one connection, then WAIT on it). KEYS: the log.
# ARGV: per entry its number of fields, then field, value, ...
_APPEND = """
local ids, i = {}, 1
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  local fields = {}
  for j = 1, 2 * n do fields[j] = ARGV[i + j] end
  table.insert(ids, redis.call('XADD', KEYS[1], '*', unpack(fields)))
  i = i + 2 * n + 1
end
return ids
"""
# Delete a model, one server. KEYS: models hash, then as _CLUSTER_DELETE. ARGV: name.
# -> whether it was listed.
_DELETE = _CHUNK_LUA + """
local removed = redis.call('HDEL', KEYS[1], ARGV[1])
local prefix = string.sub(KEYS[#KEYS], 1, -string.len('artifacts') - 1)
drop_model_chunks(prefix)
for _, version in ipairs(redis.call('HKEYS', KEYS[#KEYS])) do
  redis.call('DEL', prefix .. 'artifact:' .. version)
end
for i = 2, #KEYS do redis.call('DEL', KEYS[i]) end
return removed
"""
# Prune versions (with their chunks). KEYS: artifacts hash, then the blobs. ARGV: chunk
# prefix, then the versions.
_DELETE_ARTIFACTS = _CHUNK_LUA + """
for i = 2, #KEYS do
  drop_chunks(ARGV[1], value_ref(KEYS[i]))
  redis.call('DEL', KEYS[i])
end
redis.call('HDEL', KEYS[1], unpack(ARGV, 2))
return 1
"""
# Errors after which a cluster's topology is read again (a slot moved, a failover).
_TOPOLOGY_ERRORS = ("MOVED", "ASK", "CLUSTERDOWN", "TRYAGAIN", "UNBLOCKED", "READONLY",
                    "LOADING", "MASTERDOWN")


def _topology_error(exc: BaseException) -> bool:
    if isinstance(exc, (RedisConnectionError, RedisTimeoutError, OSError)):
        return True
    return isinstance(exc, ResponseError) and str(exc).startswith(_TOPOLOGY_ERRORS)


def _always(result) -> bool:
    return True


def _not_none(result) -> bool:
    return result is not None


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


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


TOPOLOGY_RETRIES = 5  # reads refused (MOVED) while a cluster's view of its slots settles


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
        connection.send_command("XREADGROUP", "GROUP", wire.CONSUMER_GROUP, consumer,
                                "COUNT", count, "BLOCK", block_ms, "STREAMS", key, ">")
        reply = _RespReply(connection._get_socket())
        try:
            response = reply.value()
        except ResponseError as exc:  # READONLY: a demoted master, reconnect (sentinel)
            clean = reply.done() and not str(exc).startswith("READONLY")
            raise
        clean = reply.done()
        if response and min_replicas:
            clean = False
            connection.send_command("WAIT", min_replicas, wait_timeout_ms)
            reply = _RespReply(connection._get_socket())
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


_BLOB = object()  # where a commit script's arguments take the value (or its manifest)


class ChunksExpiredError(RuntimeError):
    """A value's staged chunks expired before its commit (a write slower than their TTL);
    nothing was written, the write may be retried."""


# Connections per pool. redis-py's default of 100 ran out with a hundred models in one
# process (a fold's acknowledgement failed); the commands' pool waits for a free connection
# instead of failing, and each model's reader holds at most one of the blocking pool's.
MAX_CONNECTIONS = 4096
CONNECTION_WAIT_SECONDS = 30.0


class _RedisReader(LogReader):
    """Reads with a *blocking* connection in a worker thread (:func:`xreadgroup_raw`): big
    XREADGROUP replies (MBs of batches) are received far faster from a plain socket than
    through asyncio's flow-controlled stream reader, and the event loop stays free.

    Each reader has its own thread: a read blocks for up to ``consumer_block_ms`` on an idle
    stream, and in a shared pool (asyncio's default has CPUs + 4 threads) a hundred idle
    models' reads queued ahead of the busy model's (64,000 examples/s alone, 400/s beside
    them). The thread ends when the reader is dropped."""

    def __init__(self, client: aioredis.Redis, raw_pool, model: str, consumer: str,
                 autoclaim_idle_ms: int, storage: RedisStorage | None = None) -> None:
        self.client = client
        self.raw_pool = raw_pool  # standalone: the pool; cluster: None (see storage.raw_pool)
        self.storage = storage
        self.key = wire.log_key(model)
        self.consumer = consumer
        self.autoclaim_idle_ms = autoclaim_idle_ms
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="featurebudget-read")

    async def _blocking_read(self, pool, count: int, block_ms: int, wait) -> list:
        return await asyncio.get_running_loop().run_in_executor(
            self._thread, xreadgroup_raw, pool, self.key, self.consumer, count,
            max(1, block_ms), *wait)

    async def start(self, after_id: str | None) -> None:
        try:
            await self.client.xgroup_create(self.key, wire.CONSUMER_GROUP, id="0",
                                            mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        await self.client.xgroup_setid(self.key, wire.CONSUMER_GROUP, after_id or "0")

    async def read(self, count: int, block_ms: int) -> list[LogEntry]:
        wait = self.storage.replicas if self.storage is not None else ()
        if self.raw_pool is not None:
            try:
                messages = await self._blocking_read(self.raw_pool, count, block_ms, wait)
            except ResponseError as exc:
                if not str(exc).startswith("READONLY"):
                    raise
                raise RedisConnectionError(  # the fold starts a new reader from its applied
                    f"the Redis master became a replica (a failover): {exc}") from exc  # id
        else:  # a cluster: from the master that owns the model's slot now
            for attempt in range(TOPOLOGY_RETRIES + 1):
                try:
                    messages = await self._blocking_read(self.storage.pool_for(self.key),
                                                         count, block_ms, wait)
                    break
                except Exception as exc:
                    if not _topology_error(exc):
                        raise
                    await self.storage.refresh_topology()
                    if not isinstance(exc, ResponseError) or attempt == TOPOLOGY_RETRIES:
                        # the reply was lost: entries may have been delivered; the fold
                        # starts a new reader from its applied id (on the new master)
                        raise
                    # refused (MOVED...): none delivered; the nodes' views of the slots
                    # converge within moments of a failover, so ask again
                    await asyncio.sleep(0.05 * (attempt + 1))
        return [LogEntry(_text(i), fields) for i, fields in messages if fields is not None]

    async def ack(self, ids: list[str]) -> None:
        if ids:
            await self.client.xack(self.key, wire.CONSUMER_GROUP, *ids)

    async def reclaim(self, applied_id: str | None) -> int:
        """XAUTOCLAIM idle entries; ack those already applied (or deleted)."""
        from service.storage.base import id_key

        acked, start = 0, "0-0"
        applied = id_key(applied_id)
        while True:
            result = await self.client.xautoclaim(
                self.key, wire.CONSUMER_GROUP, self.consumer,
                min_idle_time=self.autoclaim_idle_ms, start_id=start, count=500)
            start, messages = result[0], result[1]
            deleted = result[2] if len(result) > 2 else []
            done = [_text(i) for i, _ in messages if id_key(_text(i)) <= applied]
            done += [_text(i) for i in deleted]
            if done:
                await self.client.xack(self.key, wire.CONSUMER_GROUP, *done)
                acked += len(done)
            if _text(start) == "0-0":
                return acked


class RedisStorage(Storage):
    kind = "redis"
    shared = True
    log_id_form = "ms-seq"  # stream ids: the milliseconds they were added, a sequence
    log_id_pattern = re.compile(r"^\d+-\d+$")

    def id_time(self, log_id: str) -> float | None:
        return id_key(log_id)[0] / 1e3

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
        self.cluster = wire.cluster_url(url)  # None: one Redis server (or sentinels)
        self.sentinel = wire.sentinel_url(url)  # None: no sentinels
        self.client: aioredis.Redis | RedisCluster | None = None
        self.autoclaim_idle_ms = autoclaim_idle_ms
        self.deadletter_maxlen = deadletter_maxlen
        if min_replicas is None or wait_timeout_ms is None:
            from service.settings import Settings

            settings = Settings()
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
        self._node_clients: dict[str, aioredis.Redis] = {}
        self._sentinels = self._sync_sentinels = None

    async def open(self) -> None:
        if self.cluster is not None:
            await self._open_cluster()
        elif self.sentinel is not None:
            await self._open_sentinel()
        else:
            self.client = aioredis.Redis(connection_pool=aioredis.BlockingConnectionPool.from_url(
                self.url, max_connections=MAX_CONNECTIONS, timeout=CONNECTION_WAIT_SECONDS))
            await self.client.ping()
            self.raw_pool = redis.ConnectionPool.from_url(self.url, protocol=2,
                                                          max_connections=MAX_CONNECTIONS)
        self._append_entries = self.client.register_script(_APPEND)
        self._cluster_delete = self.client.register_script(_CLUSTER_DELETE)
        self._renew = self.client.register_script(_RENEW)
        self._release = self.client.register_script(_RELEASE)
        self._save_snapshot = self.client.register_script(_SAVE_SNAPSHOT)
        self._publish = self.client.register_script(_PUBLISH)
        self._create = self.client.register_script(_CREATE)
        self._append_once = self.client.register_script(wire.APPEND_ONCE_LUA)
        self._set_current = self.client.register_script(_SET_CURRENT)
        self._publish_view = self.client.register_script(_PUBLISH_VIEW)
        self._fetch_view = self.client.register_script(_FETCH_VIEW)
        self._delete = self.client.register_script(_DELETE)
        self._delete_artifacts = self.client.register_script(_DELETE_ARTIFACTS)

    async def _open_cluster(self) -> None:
        options = {"username": self.cluster["username"], "password": self.cluster["password"]}
        if self.cluster["ssl"]:
            options["ssl"] = True
        self._node_options = options  # for the plain connections to single nodes
        self.client = RedisCluster(
            startup_nodes=[ClusterNode(host, port) for host, port in self.cluster["nodes"]],
            decode_responses=False, max_connections=MAX_CONNECTIONS, **options)
        await self.client.initialize()
        await self.client.ping()
        self.raw_pool = None
        self._raw_pools: dict[str, redis.ConnectionPool] = {}
        self._cluster_create = self.client.register_script(_CLUSTER_CREATE)
        self._cluster_unlist = self.client.register_script(_CLUSTER_UNLIST)

    async def _open_sentinel(self) -> None:
        """The master the sentinels name, asked again on every new connection."""
        from redis.asyncio.retry import Retry as AsyncRetry
        from redis.asyncio.sentinel import Sentinel as AsyncSentinel
        from redis.backoff import NoBackoff
        from redis.retry import Retry
        from redis.sentinel import Sentinel, SentinelConnectionPool

        config = self.sentinel
        options = {"username": config["username"], "password": config["password"],
                   "db": config["db"]}
        quick = {"socket_timeout": 2.0, "socket_connect_timeout": 2.0}  # a dead sentinel:
        self._sentinels = AsyncSentinel(  # the next one, at once
            config["sentinels"], sentinel_kwargs={**quick, "retry": AsyncRetry(NoBackoff(), 0)},
            **options)
        self.client = self._sentinels.master_for(config["master"], decode_responses=False,
                                                 max_connections=MAX_CONNECTIONS)
        await self.client.ping()
        self._sync_sentinels = Sentinel(
            config["sentinels"], sentinel_kwargs={**quick, "retry": Retry(NoBackoff(), 0)})
        self.raw_pool = SentinelConnectionPool(config["master"], self._sync_sentinels,
                                               protocol=2, max_connections=MAX_CONNECTIONS,
                                               **options)

    def _master_client(self, key: str) -> aioredis.Redis:
        """The client whose connections reach the master that owns ``key``: the client
        itself, or on a cluster a plain client of that node (as the cluster knows it now)."""
        if self.cluster is None:
            return self.client
        node = self.client.get_node_from_key(key)
        client = self._node_clients.get(node.name)
        if client is None:
            client = aioredis.Redis(host=node.host, port=node.port, **self._node_options)
            self._node_clients[node.name] = client
        return client

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
                if self.cluster is None or not (_topology_error(exc)
                                                or _topology_error(exc.__cause__)):
                    raise
                await self.refresh_topology()
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

    def pool_for(self, key: str) -> redis.ConnectionPool:
        """A cluster: the blocking connection pool (for :func:`xreadgroup_raw`) of the
        master that owns ``key``'s slot, as the cluster client knows it now."""
        node = self.client.get_node_from_key(key)
        pool = self._raw_pools.get(node.name)
        if pool is None:
            options = {k: v for k, v in self._node_options.items() if k != "ssl"}
            if self._node_options.get("ssl"):
                options["connection_class"] = redis.SSLConnection
            pool = redis.ConnectionPool(host=node.host, port=node.port, protocol=2,
                                        max_connections=MAX_CONNECTIONS, **options)
            self._raw_pools[node.name] = pool
        return pool

    async def refresh_topology(self) -> None:
        """A cluster: read which master owns which slot again (after MOVED or a lost node,
        i.e. a failover); the raw pools of nodes that are no longer masters are closed."""
        with contextlib.suppress(Exception):  # the cluster is down: the next read says so
            await self.client.nodes_manager.initialize()
        masters = {node.name for node in self.client.get_primaries()}
        for name in [n for n in self._raw_pools if n not in masters]:
            self._raw_pools.pop(name).disconnect()
        for name in [n for n in self._node_clients if n not in masters]:
            with contextlib.suppress(Exception):
                await self._node_clients.pop(name).aclose()

    def _pubsub(self, channel: str):
        """(pubsub, client to close after it or None). A cluster: a plain connection to the
        node that owns the channel's slot (any node would do: PUBLISH reaches all)."""
        if self.cluster is None:
            return self.client.pubsub(), None
        node = self.client.get_node_from_key(channel)
        client = aioredis.Redis(host=node.host, port=node.port, **self._node_options)
        return client.pubsub(), client

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aclose()
            self.client = None
            if self.raw_pool is not None:
                self.raw_pool.disconnect()
            for pool in getattr(self, "_raw_pools", {}).values():
                pool.disconnect()
            for client in self._node_clients.values():
                await client.aclose()
            self._node_clients.clear()
            if self._sentinels is not None:
                for sentinel in self._sentinels.sentinels:
                    await sentinel.aclose()
                for sentinel in self._sync_sentinels.sentinels:
                    sentinel.close()

    async def ping(self) -> None:
        await self.client.ping()

    async def save_model(self, name: str, spec: bytes, *, create: bool) -> bool:
        if self.cluster is not None:
            return await self._cluster_save_model(name, spec, create=create)
        if create:
            keys = [k for k in wire.model_keys(name) if k != wire.artifacts_key(name)]
            keys = [wire.MODELS_KEY, *keys, wire.artifacts_key(name)]
            return bool(await self._write(
                wire.MODELS_KEY, lambda c: self._create(keys=keys, args=[name, spec], client=c)))
        await self._write(wire.MODELS_KEY, lambda c: c.hset(wire.MODELS_KEY, name, spec),
                          changed=_always)
        return True

    async def load_models(self) -> dict[str, bytes]:
        if self.cluster is not None:
            names = sorted(_text(k) for k in await self.client.hkeys(wire.MODELS_KEY))
            if not names:
                return {}
            specs = await self.client.mget_nonatomic([wire.spec_key(n) for n in names])
            return {n: spec for n, spec in zip(names, specs, strict=True) if spec is not None}
        raw = await self.client.hgetall(wire.MODELS_KEY)
        return {_text(k): v for k, v in sorted(raw.items())}

    def _cluster_model_keys(self, name: str) -> list[str]:
        fixed = [k for k in wire.model_keys(name) if k != wire.artifacts_key(name)]
        return [wire.spec_key(name), *fixed, wire.artifacts_key(name)]

    async def _cluster_save_model(self, name: str, spec: bytes, *, create: bool) -> bool:
        key = wire.spec_key(name)
        if not create:  # the config, then its copy in the index
            if not await self._write(key, lambda c: c.set(key, spec, xx=True)):
                return False
            await self._write(wire.MODELS_KEY, lambda c: c.hset(wire.MODELS_KEY, name, spec),
                              changed=_always)
            return True
        if await self.client.exists(key):
            return False  # (without touching the index's copy of its config)
        await self._write(wire.MODELS_KEY,  # listed before it exists
                          lambda c: c.hset(wire.MODELS_KEY, name, spec), changed=_always)
        return bool(await self._write(key, lambda c: self._cluster_create(
            keys=self._cluster_model_keys(name), args=[spec], client=c)))

    async def delete_model(self, name: str) -> bool:
        if self.cluster is not None:
            spec = await self._write(wire.spec_key(name), lambda c: self._cluster_delete(
                keys=self._cluster_model_keys(name), client=c), changed=_not_none)
            if spec is None:
                return False
            await self._write(wire.MODELS_KEY, lambda c: self._cluster_unlist(
                keys=[wire.MODELS_KEY], args=[name, spec], client=c))
            return True
        if self.min_replicas:  # one connection: unlist, then drop the keys (a crash between
            async def drop(c):  # leaves keys of no model, which a creation drops)
                removed = await c.hdel(wire.MODELS_KEY, name)
                await self._cluster_delete(keys=self._cluster_model_keys(name), client=c)
                return removed

            return bool(await self._write(wire.MODELS_KEY, drop))
        return bool(await self._delete(keys=[wire.MODELS_KEY, *self._cluster_model_keys(name)],
                                       args=[name]))

    async def append(self, model: str, entries: list[dict[bytes, bytes]]) -> list[str]:
        key = wire.log_key(model)
        if self.cluster is not None or self.min_replicas:
            args: list = []
            for entry in entries:
                args.append(len(entry))
                for field, value in entry.items():
                    args += [field, value]
            if not args:
                return []
            ids = await self._write(key, lambda c: self._append_entries(keys=[key], args=args,
                                                                        client=c))
            return [_text(i) for i in ids]
        async with self.client.pipeline(transaction=True) as pipe:
            for entry in entries:
                pipe.xadd(key, entry)
            ids = await pipe.execute()
        return [_text(i) for i in ids]

    async def append_once(self, model: str, entries: list[dict[bytes, bytes]], key: str,
                          retention_seconds: float, *, examples: int | None = None
                          ) -> Appended:
        args: list = [int(time.time() * 1000), max(1, int(retention_seconds * 1000)), key,
                      "" if examples is None else int(examples)]
        for entry in entries:
            args += [entry.get(b"fmt", b"bin"), entry[b"data"], entry.get(b"names", b"")]
        keys = [wire.idempotency_key(model), wire.idempotency_times_key(model),
                wire.log_key(model)]
        repeat, joined, count = await self._write(  # a repeat is confirmed too (it writes
            keys[2], lambda c: self._append_once(keys=keys, args=args, client=c),  # its key)
            changed=_always)
        count = _text(count)
        return Appended(_text(joined).split(" "), bool(repeat),
                        int(count) if count.isdigit() else None)

    async def log_end(self, model: str) -> str | None:
        last = await self.client.xrevrange(wire.log_key(model), count=1)
        return _text(last[0][0]) if last else None

    async def trim(self, model: str, keep_from_id: str) -> None:
        await self.client.xtrim(wire.log_key(model), minid=keep_from_id, approximate=False)

    def reader(self, model: str, consumer: str) -> LogReader:
        return _RedisReader(self.client, self.raw_pool, model, consumer,
                            self.autoclaim_idle_ms, self)

    async def deadletter(self, model: str, entry: LogEntry, reason: str) -> None:
        fields = {b"source_id": entry.id.encode(), b"reason": reason.encode(),
                  b"time": repr(time.time()).encode(),
                  b"fmt": bytes(entry.fields.get(b"fmt", b"")),
                  b"data": bytes(entry.fields.get(b"data", b"")[:65536])}
        await self.client.xadd(wire.deadletter_key(model), fields,
                               maxlen=self.deadletter_maxlen, approximate=True)

    async def read_deadletters(self, model: str, count: int = 100) -> list[dict]:
        messages = await self.client.xrevrange(wire.deadletter_key(model), count=count)
        return [{"id": _text(fields.get(b"source_id", b"")),
                 "reason": _text(fields.get(b"reason", b"")),
                 "fmt": _text(fields.get(b"fmt", b""))} for _, fields in reversed(messages)]

    # ------------------------------------------------------------------ large values
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
                key = wire.chunk_key(model, chunk_id, k)
                await self._sized(one, len(piece),
                                  lambda c, key=key, piece=piece: c.set(key, piece, px=ttl_ms))
                written = k + 1
        except BaseException:
            with contextlib.suppress(Exception):
                if written:
                    await self._master_client(wire.chunk_key(model, chunk_id, 0)).delete(
                        *(wire.chunk_key(model, chunk_id, k) for k in range(written)))
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
                chunk_key = wire.chunk_key(model, chunk_id, k)
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
        args = [value if a is _BLOB else a for a in args]
        done = await self._sized(one, 0 if ref else len(value), lambda c: script(
            keys=keys, args=[*args, wire.chunk_prefix(model), ref], client=c))
        if int(done) < 0:
            raise ChunksExpiredError(f"the chunks of a value of {len(blob):,} bytes of model "
                                     f"{model!r} expired before they were committed")
        return int(done)

    async def _holds(self, one, model: str, owner: str | None) -> bool:
        """Whether ``owner`` (None: nobody is asked) holds the lease: a write of a large
        value that would be refused is not staged."""
        if not owner:
            return True
        return _text(await one.get(wire.lease_key(model)) or b"") == owner

    async def storage_room(self, model: str) -> int | None:
        """Bytes Redis may still take (``maxmemory`` less ``used_memory`` of the master that
        holds ``model``), None when it has no ``maxmemory``."""
        info = await self._master_client(wire.snapshot_key(model)).info("memory")
        limit = int(info.get("maxmemory", 0) or 0)
        return None if limit <= 0 else max(0, limit - int(info.get("used_memory", 0)))

    async def save_snapshot(self, model: str, blob: bytes, log_id: str | None, *,
                            owner: str | None = None) -> bool:
        key = wire.snapshot_key(model)
        async with self._connection(key) as one:
            if self._chunked(blob) and not await self._holds(one, model, owner):
                return False
            return await self._commit(one, self._save_snapshot,
                                      [key, wire.lease_key(model)],
                                      [_BLOB, log_id or "", owner or "",
                                       replaced_ttl_ms(len(blob))], model, blob) == 1

    async def load_snapshot(self, model: str) -> bytes | None:
        key = wire.snapshot_key(model)
        async with self._connection(key) as one:
            return await self._read_value(one, model, key, "state")

    async def snapshot_position(self, model: str) -> str | None:
        value = await self.client.hget(wire.snapshot_key(model), b"log_id")
        return _text(value) if value else None

    async def put_pending(self, model: str, prediction_id: str, blob: bytes,
                          ttl_seconds: float) -> None:
        key = wire.pending_key(model, prediction_id)
        await self._write(key, lambda c: c.set(key, blob, px=max(1, int(ttl_seconds * 1000))))

    async def pop_pending(self, model: str, prediction_id: str) -> bytes | None:
        return await self.client.getdel(wire.pending_key(model, prediction_id))

    async def acquire_lease(self, model: str, owner: str, ttl_seconds: float, *,
                            renew_only: bool = False) -> bool:
        ttl_ms = int(ttl_seconds * 1000)
        if await self._renew(keys=[wire.lease_key(model)], args=[owner, ttl_ms]):
            return True
        if renew_only:
            return False
        return bool(await self.client.set(wire.lease_key(model), owner, nx=True, px=ttl_ms))

    async def release_lease(self, model: str, owner: str) -> None:
        await self._release(keys=[wire.lease_key(model), wire.heartbeat_key(model)],
                            args=[owner])  # a clean hand-over: no stale heartbeat

    async def publish_applied(self, model: str, log_id: str) -> None:
        await self.client.set(wire.applied_key(model), log_id)

    async def heartbeat(self, model: str, owner: str) -> None:
        await self.client.set(wire.heartbeat_key(model), f"{time.time()!r} {owner}")

    async def heartbeats(self, models: list[str]) -> dict[str, tuple[float, str]]:
        if not models:
            return {}
        keys = [wire.heartbeat_key(m) for m in models]
        values = await (self.client.mget_nonatomic(keys) if self.cluster is not None
                        else self.client.mget(keys))
        now, out = time.time(), {}
        for model, value in zip(models, values, strict=True):
            if value:
                stamp, _, owner = _text(value).partition(" ")
                out[model] = (max(0.0, now - float(stamp)), owner)
        return out

    async def applied_position(self, model: str) -> str | None:
        value = await self.client.get(wire.applied_key(model))
        return _text(value) if value else None

    async def members(self, role: str, process_id: str, *, joined: float,
                      expires: float) -> dict[str, float]:
        key = wire.members_key(role)
        pipe = self.client.pipeline(transaction=False)
        pipe.hset(key, process_id, f"{joined!r} {expires!r}")
        pipe.hgetall(key)
        _, raw = await pipe.execute()
        now, live, expired = time.time(), {}, []
        for member, value in raw.items():
            try:
                since, until = (float(v) for v in _text(value).split())
            except ValueError:
                since, until = 0.0, 0.0
            if until < now:
                expired.append(member)
            else:
                live[_text(member)] = since
        if expired:
            await self.client.hdel(key, *expired)
        return live

    async def leave(self, role: str, process_id: str) -> None:
        await self.client.hdel(wire.members_key(role), process_id)

    async def lease_holder(self, model: str) -> str | None:
        value = await self.client.get(wire.lease_key(model))
        return _text(value) if value else None

    async def publish_view(self, model: str, token: str, blob: bytes, *,
                           owner: str | None = None) -> bool:
        done = await self._publish_view(
            keys=[wire.view_key(model), wire.lease_key(model), wire.applied_key(model)],
            args=[owner or "", token, blob])
        return bool(done)

    async def fetch_view(self, model: str, known_token: str | None
                         ) -> tuple[str | None, bytes | None]:
        answer = await self._fetch_view(keys=[wire.view_key(model)], args=[known_token or ""])
        if not answer:
            return None, None
        return _text(answer[0]), (answer[1] if len(answer) > 1 else None)

    async def view_token(self, model: str) -> str | None:
        value = await self.client.hget(wire.view_key(model), b"token")
        return _text(value) if value else None

    # ------------------------------------------------------------------ batch models
    async def next_version(self, model: str) -> int:
        return int(await self.client.incr(wire.version_seq_key(model)))

    async def publish_artifact(self, model: str, version: int, blob: bytes, meta: bytes, *,
                               owner: str | None = None) -> bool:
        keys = [wire.lease_key(model), wire.artifacts_key(model),
                wire.artifact_key(model, version), wire.version_key(model)]
        async with self._connection(keys[2]) as one:
            if self._chunked(blob) and not await self._holds(one, model, owner):
                return False
            return await self._commit(one, self._publish, keys, [
                owner or "", int(version), _BLOB, meta, wire.VERSIONS_CHANNEL, model],
                model, blob) == 1

    async def load_artifact(self, model: str, version: int) -> bytes | None:
        key = wire.artifact_key(model, version)
        async with self._connection(key) as one:
            return await self._read_value(one, model, key, None)

    async def list_artifacts(self, model: str) -> dict[int, bytes]:
        raw = await self.client.hgetall(wire.artifacts_key(model))
        return {int(k): v for k, v in sorted(raw.items(), key=lambda kv: int(kv[0]))}

    async def delete_artifacts(self, model: str, versions: list[int]) -> None:
        if versions:  # (with the chunks of chunked ones, in one step)
            await self._delete_artifacts(
                keys=[wire.artifacts_key(model), *(wire.artifact_key(model, v) for v in versions)],
                args=[wire.chunk_prefix(model), *(str(int(v)) for v in versions)])

    async def current_version(self, model: str) -> int | None:
        value = await self.client.get(wire.version_key(model))
        return int(value) if value else None

    async def set_current_version(self, model: str, version: int) -> bool:
        keys = [wire.artifacts_key(model), wire.version_key(model)]
        done = await self._write(keys[1], lambda c: self._set_current(
            keys=keys, args=[int(version), wire.VERSIONS_CHANNEL, model], client=c))
        return bool(done)

    async def version_events(self):
        pubsub, node_client = self._pubsub(wire.VERSIONS_CHANNEL)
        try:
            await pubsub.subscribe(wire.VERSIONS_CHANNEL)
            async for message in pubsub.listen():
                if message.get("type") != "message":
                    continue
                model, _, version = _text(message["data"]).rpartition(" ")
                if model and version.isdigit():
                    yield model, int(version)
        except Exception as exc:
            if self.cluster is not None and _topology_error(exc):
                await self.refresh_topology()  # a lost node: the next subscription elsewhere
            raise
        finally:
            await pubsub.aclose()
            if node_client is not None:
                await node_client.aclose()

    async def notify_job(self, model: str) -> None:
        await self.client.publish(wire.JOBS_CHANNEL, model)

    async def job_events(self):
        pubsub, node_client = self._pubsub(wire.JOBS_CHANNEL)
        try:
            await pubsub.subscribe(wire.JOBS_CHANNEL)
            async for message in pubsub.listen():
                if message.get("type") == "message":
                    yield _text(message["data"])
        except Exception as exc:
            if self.cluster is not None and _topology_error(exc):
                await self.refresh_topology()  # a lost node: the next subscription elsewhere
            raise
        finally:
            await pubsub.aclose()
            if node_client is not None:
                await node_client.aclose()

    async def save_job(self, model: str, job_id: str, record: bytes) -> None:
        await self.client.hset(wire.jobs_key(model), job_id, record)

    async def load_jobs(self, model: str) -> dict[str, bytes]:
        raw = await self.client.hgetall(wire.jobs_key(model))
        return {_text(k): v for k, v in raw.items()}

    async def delete_jobs(self, model: str, job_ids: list[str]) -> None:
        if job_ids:
            await self.client.hdel(wire.jobs_key(model), *job_ids)

    async def request_cancel(self, model: str, job_id: str) -> None:
        await self.client.hset(wire.cancels_key(model), job_id, repr(time.time()))

    async def cancel_requests(self, model: str) -> set[str]:
        return {_text(k) for k in await self.client.hkeys(wire.cancels_key(model))}

    async def save_status(self, model: str, status: bytes) -> None:
        await self.client.set(wire.status_key(model), status)

    async def load_status(self, model: str) -> bytes | None:
        return await self.client.get(wire.status_key(model))


def open_url(url: str, settings) -> RedisStorage:
    """The scheme table's factory for the Redis schemes (:mod:`service.storage.schemes`)."""
    return RedisStorage(url, autoclaim_idle_ms=settings.autoclaim_idle_ms,
                        deadletter_maxlen=settings.deadletter_maxlen,
                        min_replicas=settings.redis_min_replicas,
                        wait_timeout_ms=settings.redis_wait_timeout_ms,
                        chunk_bytes=settings.redis_chunk_bytes)
