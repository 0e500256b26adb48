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
producer touches one model's keys, one slot (the ``{model}`` hash tag).
"""

from __future__ import annotations

import time

import numpy as np

from service import wire


def redis_client(url: str):
    """A blocking client for ``url``: ``redis.cluster.RedisCluster`` over the startup nodes
    of a ``redis+cluster://`` (``rediss+cluster://``: TLS) URL, else ``redis.Redis``."""
    import redis

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
                 targets: bool = False, idempotency_retention_seconds: float = 86_400.0
                 ) -> None:
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
        repeat, joined = self._append_once(
            keys=[wire.idempotency_key(self.model), wire.idempotency_times_key(self.model),
                  self.key], args=args)
        joined = joined.decode() if isinstance(joined, bytes) else joined
        ids = joined.split(" ")
        if not repeat:
            self.ids.extend(ids)
        return ids, bool(repeat)

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
        pipe = self.client.pipeline(transaction=False)
        for payload in self._pending:
            pipe.xadd(self.key, {b"fmt": b"bin", b"data": payload})
        self.ids.extend(i.decode() if isinstance(i, bytes) else i for i in pipe.execute())
        self._pending.clear()

    def add_libsvm(self, text: bytes) -> str:
        """Write one libsvm-text entry (one or more lines) as is."""
        self.flush()
        entry_id = self.client.xadd(self.key, {b"fmt": b"libsvm", b"data": text})
        entry_id = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
        self.ids.append(entry_id)
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
