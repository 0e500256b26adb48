"""Where the Redis backend's connections go: one server, a master watched by Sentinels, or a
Redis Cluster. Every difference between the three lives here, one class each; the rest of
the package asks the topology (:func:`make_topology` picks it from the URL once).

A topology has the commands' client, the blocking pool(s) of the fold's raw reader, the
client of the master that owns a key, and the policies that differ: which errors mean "ask
where the key lives again" (:meth:`Topology.retries`), how a raw read recovers
(:meth:`Topology.read`), where a pub/sub subscription connects, how a multi-key read is
sent, whether ``MULTI`` spans a log append (:attr:`Topology.transactions`) and how model
configs are indexed (:attr:`Topology.catalog`). Each call is O(1) but for
:meth:`Cluster.refresh` (O(nodes)).
"""

from __future__ import annotations

import asyncio
import contextlib

import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from service.storage import redis_urls
from service.storage.redis.catalog import ServerCatalog, SlotCatalog

# Connections per pool. redis-py's default of 100 ran out with a hundred models in one
# process (a fold's acknowledgement failed); the commands' pool waits for a free connection
# instead of failing, and each model's reader holds at most one of the blocking pool's.
MAX_CONNECTIONS = 4096
CONNECTION_WAIT_SECONDS = 30.0
TOPOLOGY_RETRIES = 5  # reads refused (MOVED) while a cluster's view of its slots settles
# Errors after which a cluster's topology is read again (a slot moved, a failover).
_TOPOLOGY_ERRORS = ("MOVED", "ASK", "CLUSTERDOWN", "TRYAGAIN", "UNBLOCKED", "READONLY",
                    "LOADING", "MASTERDOWN")


def topology_error(exc: BaseException | None) -> bool:
    """Whether ``exc`` says the key's master moved or was lost (a cluster's failover)."""
    if isinstance(exc, (RedisConnectionError, RedisTimeoutError, OSError)):
        return True
    return isinstance(exc, ResponseError) and str(exc).startswith(_TOPOLOGY_ERRORS)


class Topology:
    """One Redis server (``redis://``, ``rediss://``, ``unix://``)."""

    transactions = True  # a log append of several entries is one MULTI
    catalog = ServerCatalog

    def __init__(self, url: str) -> None:
        self.url = url
        self.client: aioredis.Redis | RedisCluster | None = None
        self.raw_pool: redis.ConnectionPool | None = None

    async def open(self) -> None:
        self.client = aioredis.Redis(connection_pool=aioredis.BlockingConnectionPool.from_url(
            self.url, max_connections=MAX_CONNECTIONS, timeout=CONNECTION_WAIT_SECONDS))
        await self.client.ping()
        self.raw_pool = redis.ConnectionPool.from_url(self.url, protocol=2,
                                                      max_connections=MAX_CONNECTIONS)

    def master_client(self, key: str) -> aioredis.Redis:
        """The client whose connections reach the master that owns ``key``."""
        return self.client

    def pool_for(self, key: str) -> redis.ConnectionPool:
        """The blocking pool (for the raw reader) of the master that owns ``key``."""
        return self.raw_pool

    def retries(self, exc: BaseException | None) -> bool:
        """Whether a failed command is asked again after :meth:`refresh` (a cluster)."""
        return False

    async def refresh(self) -> None:
        """Read again which master owns which key (a cluster, after a failover)."""

    async def read(self, blocking_read, key: str) -> list:
        """``await blocking_read(pool)`` on the raw pool; a master turned replica (READONLY,
        a Sentinel failover) is a lost connection: the fold starts a new reader."""
        try:
            return await blocking_read(self.raw_pool)
        except ResponseError as exc:
            if not str(exc).startswith("READONLY"):
                raise
            raise RedisConnectionError(  # the fold starts a new reader from its applied id
                f"the Redis master became a replica (a failover): {exc}") from exc

    def pubsub(self, channel: str):
        """(pubsub, client to close after it or None) for ``channel``."""
        return self.client.pubsub(), None

    async def mget(self, keys: list[str]) -> list:
        return await self.client.mget(keys)

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aclose()
            self.client = None
            if self.raw_pool is not None:
                self.raw_pool.disconnect()


class Sentinel(Topology):
    """The master Redis Sentinels watch (``redis+sentinel://``), asked again on every new
    connection, the raw reader's included: after a failover the next connection reaches the
    promoted replica."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.config = redis_urls.sentinel_url(url)
        self._sentinels = self._sync_sentinels = None

    async def open(self) -> None:
        from redis.asyncio.retry import Retry as AsyncRetry
        from redis.asyncio.sentinel import Sentinel as AsyncSentinel
        from redis.backoff import NoBackoff
        from redis.retry import Retry
        from redis.sentinel import Sentinel as SyncSentinel
        from redis.sentinel import SentinelConnectionPool

        config = self.config
        options = {"username": config["username"], "password": config["password"],
                   "db": config["db"]}
        quick = {"socket_timeout": 2.0, "socket_connect_timeout": 2.0}  # a dead sentinel:
        self._sentinels = AsyncSentinel(  # the next one, at once
            config["sentinels"], sentinel_kwargs={**quick, "retry": AsyncRetry(NoBackoff(), 0)},
            **options)
        self.client = self._sentinels.master_for(config["master"], decode_responses=False,
                                                 max_connections=MAX_CONNECTIONS)
        await self.client.ping()
        self._sync_sentinels = SyncSentinel(
            config["sentinels"], sentinel_kwargs={**quick, "retry": Retry(NoBackoff(), 0)})
        self.raw_pool = SentinelConnectionPool(config["master"], self._sync_sentinels,
                                               protocol=2, max_connections=MAX_CONNECTIONS,
                                               **options)

    async def close(self) -> None:
        opened = self.client is not None
        await super().close()
        if opened and self._sentinels is not None:
            for sentinel in self._sentinels.sentinels:
                await sentinel.aclose()
            for sentinel in self._sync_sentinels.sentinels:
                sentinel.close()


class Cluster(Topology):
    """A Redis Cluster (``redis+cluster://``): each key's master is asked of the cluster
    client; MOVED / ASK / CLUSTERDOWN / a lost node refresh the slots and ask again. Every
    script and multi-key command touches one slot (:mod:`service.storage.redis`)."""

    transactions = False  # (MULTI over a cluster client depends on the redis-py version)
    catalog = SlotCatalog

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.config = redis_urls.cluster_url(url)
        self._node_options: dict = {}
        self._node_clients: dict[str, aioredis.Redis] = {}
        self._raw_pools: dict[str, redis.ConnectionPool] = {}

    async def open(self) -> None:
        config = self.config
        options = {"username": config["username"], "password": config["password"]}
        if config["ssl"]:
            options["ssl"] = True
        self._node_options = options  # for the plain connections to single nodes
        self.client = RedisCluster(
            startup_nodes=[ClusterNode(host, port) for host, port in config["nodes"]],
            decode_responses=False, max_connections=MAX_CONNECTIONS, **options)
        await self.client.initialize()
        await self.client.ping()

    def _node_client(self, node) -> aioredis.Redis:
        client = self._node_clients.get(node.name)
        if client is None:
            client = aioredis.Redis(host=node.host, port=node.port, **self._node_options)
            self._node_clients[node.name] = client
        return client

    def master_client(self, key: str) -> aioredis.Redis:
        """A plain client of the node that owns ``key`` (as the cluster knows it now)."""
        return self._node_client(self.client.get_node_from_key(key))

    def pool_for(self, key: str) -> redis.ConnectionPool:
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

    def retries(self, exc: BaseException | None) -> bool:
        return topology_error(exc)

    async def refresh(self) -> None:
        """Read the slots' masters again (after MOVED or a lost node, i.e. a failover); the
        pools and clients of nodes that are no longer masters are closed."""
        with contextlib.suppress(Exception):  # the cluster is down: the next read says so
            await self.client.nodes_manager.initialize()
        masters = {node.name for node in self.client.get_primaries()}
        for name in [n for n in self._raw_pools if n not in masters]:
            self._raw_pools.pop(name).disconnect()
        for name in [n for n in self._node_clients if n not in masters]:
            with contextlib.suppress(Exception):
                await self._node_clients.pop(name).aclose()

    async def read(self, blocking_read, key: str) -> list:
        """From the master that owns ``key`` now: a refused read (MOVED...) delivered
        nothing and is asked again, up to :data:`TOPOLOGY_RETRIES` times; a lost reply may
        have delivered entries, so it raises (the fold starts a new reader)."""
        for attempt in range(TOPOLOGY_RETRIES + 1):
            try:
                return await blocking_read(self.pool_for(key))
            except Exception as exc:
                if not topology_error(exc):
                    raise
                await self.refresh()
                if not isinstance(exc, ResponseError) or attempt == TOPOLOGY_RETRIES:
                    raise
                # the nodes' views of the slots converge within moments of a failover
                await asyncio.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    def pubsub(self, channel: str):
        """A plain connection to the node that owns the channel's slot (any node would do:
        PUBLISH reaches all)."""
        node = self.client.get_node_from_key(channel)
        client = aioredis.Redis(host=node.host, port=node.port, **self._node_options)
        return client.pubsub(), client

    async def mget(self, keys: list[str]) -> list:
        return await self.client.mget_nonatomic(keys)

    async def close(self) -> None:
        opened = self.client is not None
        await super().close()
        if opened:
            for pool in self._raw_pools.values():
                pool.disconnect()
            for client in self._node_clients.values():
                await client.aclose()
            self._node_clients.clear()


def make_topology(url: str) -> Topology:
    """The topology ``url`` names (the only place that tells them apart)."""
    if redis_urls.cluster_url(url) is not None:
        return Cluster(url)
    if redis_urls.sentinel_url(url) is not None:
        return Sentinel(url)
    return Topology(url)
