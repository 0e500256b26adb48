"""The Redis backend on a real Redis Cluster: 3 masters and 3 replicas started here from
``redis-server --cluster-enabled yes`` on loopback ports 18400-18405 (``redis-cli --cluster
create``), the service pointed at it with ``redis+cluster://``.

Models land on different masters (the index ``featurebudget:models`` on a third one); every
script touches one slot (the cluster refuses any other); creation and deletion are safe
after a crash between their steps; pub/sub notifications cross nodes; the SIGKILL crash
test and the batch worker's crash test run unchanged on the cluster; the raw XREADGROUP
reader follows a failover of its model's master.

Skipped when redis-server / redis-cli lack cluster support (failed instead under CI=true).
"""

from __future__ import annotations

import asyncio

import pytest

from clients.stream import StreamProducer, redis_client
from service.storage import redis_keys
from service.storage.redis import RedisStorage
from tests.support import batch_crash, crash
from tests.support.batch_crash import killed_worker_loses_and_duplicates_nothing
from tests.support.crash import sigkill_redis_backend
from tests.support.redis_cluster import PORTS
from tests.support.redis_cluster import node as _node
from tests.support.redis_cluster import wait_for as _wait
from tests.support.storage_backends import log_entries

ONLINE, BATCH = "m", "c"  # on two different masters; the index on the third (checked)

pytestmark = [pytest.mark.redis, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _kill_processes():
    """The helpers below start servers and workers; kill whatever a failure left running."""
    yield
    while crash.RUNNING:
        crash.RUNNING.pop().kill()
    while batch_crash.RUNNING:
        process = batch_crash.RUNNING.pop()
        if process.poll() is None:
            process.kill()
        process.wait()


def _master(client, key: str) -> str:
    return client.get_node_from_key(key).name


def test_models_sit_on_different_masters_with_every_key_in_one_slot(cluster_url):
    client = redis_client(cluster_url)
    masters = {_master(client, redis_keys.log_key(ONLINE)),
               _master(client, redis_keys.log_key(BATCH)), _master(client, redis_keys.MODELS_KEY)}
    assert len(masters) == 3 and len(client.get_primaries()) == 3
    for name in (ONLINE, BATCH):
        keys = [redis_keys.spec_key(name), *redis_keys.model_keys(name),
                redis_keys.artifact_key(name, 7), redis_keys.pending_key(name, "p")]
        slots = {int(client.execute_command("CLUSTER KEYSLOT", k)) for k in keys}
        assert slots == {client.keyslot(redis_keys.log_key(name))}
    client.close()


def test_create_and_delete_are_safe_after_a_crash_between_their_steps(cluster_url):
    """Each step is one script in one slot; the states a crash leaves behind (an index
    name without its spec key, leftovers of a deleted model) are no model and break
    nothing. A second process's duplicate create is refused, pub/sub crosses nodes."""
    async def scenario():
        storage = RedisStorage(cluster_url)
        await storage.open()
        client = storage.client
        try:
            # leftovers under a name that is no model: a producer's entries, a deleted
            # model's artifacts; and an index name whose create crashed after step 1
            await client.xadd(redis_keys.log_key(BATCH), {b"data": b"not this model's"})
            await client.hset(redis_keys.artifacts_key(BATCH), "3", b"{}")
            await client.set(redis_keys.artifact_key(BATCH, 3), b"old blob")
            await client.hset(redis_keys.MODELS_KEY, "crashed", b"{}")
            assert await storage.load_models() == {}
            assert await storage.save_model(BATCH, b'{"v": 1}', create=True)
            assert not await storage.save_model(BATCH, b'{"v": 2}', create=True)
            assert await storage.load_models() == {BATCH: b'{"v": 1}'}
            assert await client.hget(redis_keys.MODELS_KEY, BATCH) == b'{"v": 1}'
            assert await client.xlen(redis_keys.log_key(BATCH)) == 0
            assert await client.exists(redis_keys.artifact_key(BATCH, 3)) == 0
            assert await storage.save_model("crashed", b'{"v": 3}', create=True)
            assert set(await storage.load_models()) == {BATCH, "crashed"}

            # batch model keys: appends, artifacts, versions, the pub/sub notification
            assert await storage.acquire_lease(BATCH, "me", 10.0)
            events: asyncio.Queue = asyncio.Queue()

            async def listen():
                async for event in storage.version_events():
                    await events.put(event)

            listener = asyncio.create_task(listen())
            await asyncio.sleep(0.3)  # subscribed (on the channel's node, another master)
            ids = await storage.append(BATCH, [{b"fmt": b"json", b"data": b"[]"},
                                               {b"data": b"x", b"names": b"{}"}])
            assert [e.id for e in await log_entries(storage, BATCH, 10)] == ids
            assert await storage.publish_artifact(BATCH, 1, b"blob", b"{}", owner="me")
            assert await storage.publish_artifact(BATCH, 2, b"blob", b"{}", owner="me")
            await storage.delete_artifacts(BATCH, [1])
            assert list(await storage.list_artifacts(BATCH)) == [2]
            assert await asyncio.wait_for(events.get(), 10) == (BATCH, 1)
            listener.cancel()
            await storage.heartbeat(BATCH, "me")
            assert set(await storage.heartbeats([BATCH, ONLINE, "crashed"])) == {BATCH}

            # delete: its spec and every key go in one step; a crash before the index
            # step leaves a name that is no model, and the name can be created again
            assert await storage.delete_model(BATCH)
            assert not await storage.delete_model(BATCH)
            assert set(await storage.load_models()) == {"crashed"}
            node = client.get_node_from_key(redis_keys.log_key(BATCH))
            left = await client.execute_command("KEYS", f"*{{{BATCH}}}*", target_nodes=node)
            assert left == []
            assert await client.hget(redis_keys.MODELS_KEY, BATCH) is None
            await client.hset(redis_keys.MODELS_KEY, BATCH, b'{"v": 1}')  # as a crash leaves it
            assert set(await storage.load_models()) == {"crashed"}
            assert await storage.save_model(BATCH, b'{"v": 4}', create=True)
            assert await storage.load_models() == {BATCH: b'{"v": 4}', "crashed": b'{"v": 3}'}
            for name in (BATCH, "crashed"):
                assert await storage.delete_model(name)
            assert await client.hgetall(redis_keys.MODELS_KEY) == {}
        finally:
            await storage.close()

    asyncio.run(scenario())


def test_sigkill_crash_test_on_a_cluster(tmp_path, stream_data, cluster_url):
    sigkill_redis_backend(tmp_path, stream_data, cluster_url, name=ONLINE)


@pytest.mark.parametrize("name, algorithm, params", [
    (BATCH, "cs-g-omp", {}),
    ("z", "gbfs", {"window": {"kind": "reservoir", "size": 50, "seed": 5}, "n_estimators": 3}),
])
def test_killed_batch_worker_on_a_cluster(cluster_url, tmp_path, name, algorithm, params):
    client = redis_client(cluster_url)
    assert _master(client, redis_keys.log_key(name)) != _master(client, redis_keys.log_key(ONLINE))
    client.close()
    killed_worker_loses_and_duplicates_nothing(cluster_url, tmp_path, algorithm, params,
                                               name=name)


def test_the_raw_reader_follows_a_failover_of_its_master(cluster_url):
    """The consumer's own XREADGROUP reader talks to the master of the model's slot over a
    plain socket: after that master's replica takes over (CLUSTER FAILOVER), the reader
    gets MOVED, reads the topology again and goes on from the new master, losing nothing.
    Last in this module: it changes which node is a master."""
    name = "f"
    key = redis_keys.log_key(name)

    async def scenario():
        storage = RedisStorage(cluster_url)
        await storage.open()
        try:
            producer = StreamProducer(redis_client(cluster_url), name, batch_size=1,
                                      require_model=False)  # (no model: the log alone)
            producer.add_libsvm(b"1 1:1\n")
            reader = storage.reader(name, "consumer")
            await reader.start(None)
            assert len(await reader.read(10, 10)) == 1
            old = storage.client.get_node_from_key(key)
            assert storage.pool_for(key).connection_kwargs["port"] == old.port
            (new_port,) = [p for p in PORTS
                           if _node(p).info("replication").get("master_port") == old.port]
            assert _node(new_port).execute_command("CLUSTER FAILOVER")
            _wait(lambda: _node(new_port).info("replication")["role"] == "master"
                  and _node(old.port).info("replication")["role"] == "slave",
                  "the replica to take over")
            ids = [producer.add_libsvm(b"-1 2:1\n") for _ in range(2)]
            got = await reader.read(10, 10)  # MOVED from the old master, then the new one
            assert [e.id for e in got] == ids
            assert storage.pool_for(key).connection_kwargs["port"] == new_port
            producer.client.close()
        finally:
            await storage.close()

    asyncio.run(scenario())

