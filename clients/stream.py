"""``StreamProducer``: write examples to a model's Redis stream in the compact binary format.

Examples are buffered and written ``batch_size`` per stream entry (one ``XADD`` of an
``FBX1`` payload: raw int32 indices, float32/float64 values; see :mod:`service.wire`).

>>> producer = StreamProducer("redis://127.0.0.1:6379/0", "spam")   # doctest: +SKIP
>>> producer.add_batch(indptr, indices, values, labels)              # doctest: +SKIP
>>> producer.flush()                                                 # doctest: +SKIP

For a batch regression model pass ``targets=True``: labels are then float64 targets (the
FBX1 targets flag), indices index the concatenation of the model's groups' features.

A producer that retries after an error (a lost connection, a crash before it recorded the
answer) sends each batch with :meth:`write_once` and a key of its own: a repeated key
within the retention appends nothing and answers the ids of the first write. The keys are
the same as the REST ``Idempotency-Key``'s (one check in Redis, atomic with the append).

On a Redis Cluster pass a ``redis+cluster://host:port[,host:port...]/`` URL (see
:func:`redis_client`) or a ``redis.cluster.RedisCluster``: each command and script of a
producer touches one model's keys, one slot (the ``{model}`` hash tag). Behind Redis
Sentinel pass ``redis+sentinel://host:port[,host:port...]/<master-name>[/<db>]``: every new
connection asks the sentinels for the master, so a producer follows a failover.

With ``min_replicas=k`` every write is followed by ``WAIT k`` on its connection (on a
cluster, on the master of the model's slot) and raises :class:`NotReplicatedError` when
fewer than k replicas confirmed it in ``wait_timeout_ms``: the entries reached the master
and may or may not be kept (a failover before the replicas get them drops them). Retry
such a batch with :meth:`StreamProducer.write_once` and the same key: it cannot be
appended twice.
"""

from __future__ import annotations

import time

import numpy as np

from service import wire


class NotReplicatedError(RuntimeError):
    """Fewer than ``min_replicas`` replicas confirmed a write in time. ``ids``: the entries
    the master appended (or, for a repeated ``write_once`` key, the first write's);
    ``confirmed``: how many replicas have them."""

    def __init__(self, message: str, ids: list[str], confirmed: int) -> None:
        super().__init__(message)
        self.ids = ids
        self.confirmed = confirmed


def redis_client(url: str):
    """A blocking client for ``url``: ``redis.cluster.RedisCluster`` over the startup nodes
    of a ``redis+cluster://`` (``rediss+cluster://``: TLS) URL, the master of a
    ``redis+sentinel://`` URL (found again through the sentinels after a failover), else
    ``redis.Redis``."""
    import redis

    sentinel = wire.sentinel_url(url)
    if sentinel is not None:
        from redis.backoff import NoBackoff
        from redis.retry import Retry
        from redis.sentinel import Sentinel

        manager = Sentinel(sentinel["sentinels"], sentinel_kwargs={
            "socket_timeout": 2.0, "socket_connect_timeout": 2.0, "retry": Retry(NoBackoff(), 0)})
        return manager.master_for(sentinel["master"], username=sentinel["username"],
                                  password=sentinel["password"], db=sentinel["db"])
    cluster = wire.cluster_url(url)
    if cluster is None:
        return redis.Redis.from_url(url)
    from redis.cluster import ClusterNode, RedisCluster

    options = {"username": cluster["username"], "password": cluster["password"]}
    if cluster["ssl"]:
        options["ssl"] = True
    return RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in cluster["nodes"]],
                        **options)


class StreamProducer:
    """Buffered producer of binary entries on ``featurebudget:{model}:examples``."""

    def __init__(self, redis_url_or_client, model: str, *, batch_size: int = 100,
                 value_bytes: int = 4, pipeline_entries: int = 32,
                 targets: bool = False, idempotency_retention_seconds: float = 86_400.0,
                 min_replicas: int = 0, wait_timeout_ms: int = 1000) -> None:
        if min_replicas < 0 or wait_timeout_ms < 1:
            raise ValueError("min_replicas must be >= 0 and wait_timeout_ms >= 1")
        if isinstance(redis_url_or_client, str):
            self.client = redis_client(redis_url_or_client)
        else:
            self.client = redis_url_or_client
        self.model = model
        self.key = wire.log_key(model)
        self.retention_seconds = float(idempotency_retention_seconds)
        self._append_once = self.client.register_script(wire.APPEND_ONCE_LUA)
        self.batch_size = int(batch_size)
        self.value_bytes = value_bytes
        self.pipeline_entries = pipeline_entries
        self.targets = targets
        self.min_replicas = int(min_replicas)
        self.wait_timeout_ms = int(wait_timeout_ms)
        self._rows: list[tuple[np.ndarray, np.ndarray, float]] = []
        self._pending: list[bytes] = []
        self.ids: list[str] = []

    def add(self, indices, values, label: float) -> None:
        """Buffer one example (0-based indices; a ±1 label, or a target with ``targets``)."""
        self._rows.append((np.asarray(indices, dtype=np.int32),
                           np.asarray(values, dtype=np.float64),
                           float(label) if self.targets else int(label)))
        if len(self._rows) >= self.batch_size:
            self._seal()

    def add_batch(self, indptr, indices, values, labels) -> None:
        """Encode a whole CSR batch directly (``batch_size`` rows per entry)."""
        self._seal()
        for payload in self._encode(indptr, indices, values, labels):
            self._pending.append(payload)
            if len(self._pending) >= self.pipeline_entries:
                self._write()

    def write_once(self, key: str, indptr, indices, values, labels) -> tuple[list[str], bool]:
        """Write a CSR batch now (after everything buffered), once per ``key``: ``(ids,
        False)``, or ``(ids of the first write, True)`` when the key was used before within
        the retention and nothing was appended. All entries of the batch go in one atomic
        step. Keys: 1 to 128 visible ASCII characters."""
        if not (isinstance(key, str) and 1 <= len(key) <= 128 and key.isascii()
                and key.isprintable() and " " not in key):
            raise ValueError("an idempotency key is 1 to 128 visible ASCII characters")
        payloads = self._encode(indptr, indices, values, labels)
        if not payloads:
            raise ValueError("write_once needs at least one example")
        self.flush()
        args: list = [int(time.time() * 1000), max(1, int(self.retention_seconds * 1000)), key]
        for payload in payloads:
            args += [b"bin", payload, b""]
        keys = [wire.idempotency_key(self.model), wire.idempotency_times_key(self.model),
                self.key]
        if self.min_replicas:  # a repeat is confirmed too: it writes its key again
            (repeat, joined), confirmed = self._confirmed(
                lambda pipe: self._append_once(keys=keys, args=args, client=pipe))
        else:
            repeat, joined = self._append_once(keys=keys, args=args)
        joined = joined.decode() if isinstance(joined, bytes) else joined
        ids = joined.split(" ")
        if not repeat:
            self.ids.extend(ids)
        if self.min_replicas:
            self._check(ids, confirmed)
        return ids, bool(repeat)

    def _confirmed(self, *writes) -> tuple:
        """Each ``write(pipeline)`` and then ``WAIT`` in one pipeline on one connection of
        the master that owns the model's stream -> (the writes' results..., replicas)."""
        client = self.client
        if hasattr(client, "get_node_from_key"):  # a cluster: that slot's master
            client = client.get_node_from_key(self.key).redis_connection
        pipe = client.pipeline(transaction=False)
        for write in writes:
            write(pipe)
        pipe.execute_command("WAIT", self.min_replicas, self.wait_timeout_ms)
        *results, confirmed = pipe.execute()
        return (*results, int(confirmed))

    def _check(self, ids: list[str], confirmed: int) -> None:
        if confirmed < self.min_replicas:
            raise NotReplicatedError(
                f"{confirmed} of {self.min_replicas} Redis replicas confirmed entries "
                f"{ids[0]}..{ids[-1]} of {self.key} within {self.wait_timeout_ms} ms: they "
                "may or may not be kept (retry with write_once and the same key)", ids,
                confirmed)

    def _encode(self, indptr, indices, values, labels) -> list[bytes]:
        indptr = np.asarray(indptr, dtype=np.int64)
        labels = np.asarray(labels)
        n = len(indptr) - 1
        payloads = []
        for start in range(0, n, self.batch_size):
            stop = min(n, start + self.batch_size)
            lo, hi = indptr[start], indptr[stop]
            payloads.append(wire.encode_batch(
                indptr[start:stop + 1] - lo, np.asarray(indices)[lo:hi],
                np.asarray(values)[lo:hi], labels[start:stop], value_bytes=self.value_bytes,
                targets=self.targets))
        return payloads

    def _seal(self) -> None:
        if not self._rows:
            return
        lengths = [len(r[0]) for r in self._rows]
        indptr = np.concatenate([[0], np.cumsum(lengths)])
        self._pending.append(wire.encode_batch(
            indptr, np.concatenate([r[0] for r in self._rows]),
            np.concatenate([r[1] for r in self._rows]),
            np.array([r[2] for r in self._rows]), value_bytes=self.value_bytes,
            targets=self.targets))
        self._rows.clear()
        if len(self._pending) >= self.pipeline_entries:
            self._write()

    def _write(self) -> None:
        if not self._pending:
            return
        if self.min_replicas:
            *written, confirmed = self._confirmed(*(
                lambda pipe, p=payload: pipe.xadd(self.key, {b"fmt": b"bin", b"data": p})
                for payload in self._pending))
        else:
            pipe = self.client.pipeline(transaction=False)
            for payload in self._pending:
                pipe.xadd(self.key, {b"fmt": b"bin", b"data": payload})
            written = pipe.execute()
        ids = [i.decode() if isinstance(i, bytes) else i for i in written]
        self.ids.extend(ids)
        self._pending.clear()  # written: never twice (a retry would append them again)
        if self.min_replicas:
            self._check(ids, confirmed)

    def add_libsvm(self, text: bytes) -> str:
        """Write one libsvm-text entry (one or more lines) as is."""
        self.flush()
        entry = {b"fmt": b"libsvm", b"data": text}
        if self.min_replicas:
            entry_id, confirmed = self._confirmed(lambda pipe: pipe.xadd(self.key, entry))
        else:
            entry_id = self.client.xadd(self.key, entry)
        entry_id = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
        self.ids.append(entry_id)
        if self.min_replicas:
            self._check([entry_id], confirmed)
        return entry_id

    def flush(self) -> list[str]:
        """Write everything buffered; the ids of all entries written so far."""
        self._seal()
        self._write()
        return self.ids

    def __enter__(self) -> StreamProducer:
        return self

    def __exit__(self, *exc) -> None:
        self.flush()
