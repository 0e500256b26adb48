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

from service.storage.redis.lua_chunks import CHUNKS_TAG
from service.storage.redis.raw import xreadgroup_raw
from service.storage.redis.storage import RedisStorage, open_url
from service.storage.redis.topology import TOPOLOGY_RETRIES
from service.storage.redis.values import (
    CHUNK_BYTES,
    MAX_CHUNK_BYTES,
    MIN_BYTES_PER_SECOND,
    ChunksExpiredError,
    replaced_ttl_ms,
    transfer_timeout,
)

__all__ = ["CHUNKS_TAG", "CHUNK_BYTES", "MAX_CHUNK_BYTES", "MIN_BYTES_PER_SECOND",
           "TOPOLOGY_RETRIES", "ChunksExpiredError", "RedisStorage", "open_url",
           "replaced_ttl_ms", "transfer_timeout", "xreadgroup_raw"]
