"""``StreamProducer``: write examples to a model's Redis stream in the compact binary format.

Examples are buffered and written ``batch_size`` per stream entry (one ``XADD`` of an
``FBX1`` payload: raw int32 indices, float32/float64 values; see :mod:`service.fbx1`).

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

What is written is applied: before anything is written, every batch is checked the way the
model's fold reads it (the same parser: indices within the model's dimension and int32, no
duplicate index in an example, values finite with |x| < 2^50 after the float32 cast, labels
-1/+1 or 0/1 (0 written as -1) or finite targets, libsvm text as the model reads it),
against the model's stored config (read from Redis once). A model that does not exist is
refused at the first write: :class:`UnknownModelError` names it and the models that do (a
misspelled name would write to a stream nothing reads); ``require_model=False`` writes
ahead of a model's creation, checked against what any model takes. A batch the fold would
refuse raises :class:`InvalidBatchError` naming the example and the field, and nothing of
it is written: the only dead letters are then those of other producers.

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

from service import fbx1
from service.storage import redis_keys, redis_urls
from service.storage.redis import scripts


class InvalidBatchError(ValueError):
    """A batch the model's fold would refuse (a dead letter): nothing of it was written.
    ``errors``: where (``item``: the example, 0-based, in the call's batch; ``line`` for
    libsvm text) and what, like the REST problem's ``errors``."""

    def __init__(self, message: str, errors: list[dict]) -> None:
        super().__init__(message)
        self.errors = errors


class UnknownModelError(ValueError):
    """No model of this name exists on the producer's Redis: nothing was written.
    ``model``: the name; ``known``: the names of the models that exist."""

    def __init__(self, model: str, known: list[str]) -> None:
        shown = ", ".join(repr(name) for name in known[:20]) or "none"
        more = f" and {len(known) - 20} more" if len(known) > 20 else ""
        super().__init__(f"no model named {model!r} on this Redis (nothing was written; "
                         f"create it first): the models are {shown}{more}")
        self.model = model
        self.known = known


_MAX_DIMENSION = 1 << 31  # the largest model dimension (hash_bits 31); int32 indices
_UNKNOWN_RECHECK_SECONDS = 1.0  # how long "no such model" is believed before asking again


class _Fold:
    """How the model's fold parses an entry (its own functions), for the producer to check
    a batch before writing it. ``spec`` None: the model does not exist (yet); then only
    what every model requires is checked."""

    def __init__(self, spec) -> None:
        self.spec = spec
        self.layout = None
        if spec is not None and spec.is_batch:
            from service.batch.spec import BatchLayout

            self.layout = BatchLayout(spec)

    def parse(self, fields: dict, targets: bool):
        """The entry's batch, or the fold's InputError."""
        from service.ingest import decode_bin, parse_entry, parse_libsvm_body

        spec = self.spec
        if spec is None:  # any model: the widest dimension, either libsvm index base
            data, fmt = fields[b"data"], fields[b"fmt"]
            if fmt == b"bin":
                return decode_bin(data, _MAX_DIMENSION, targets=targets)
            return parse_libsvm_body(data, _MAX_DIMENSION, zero_based=True, targets=targets)
        if self.layout is not None:
            from service.batch.worker.ingest import parse_batch_entry

            return parse_batch_entry(fields, self.layout, spec.task,
                                     zero_based=spec.libsvm_zero_based)
        return parse_entry(fields, spec.dimension, None, zero_based=spec.libsvm_zero_based)


def _refused(model: str, exc, first_row: int = 0) -> InvalidBatchError:
    """The fold's InputError as the producer's error, items counted in the caller's batch."""
    errors = []
    for error in getattr(exc, "errors", None) or [{"message": str(exc)}]:
        error = dict(error)
        if "item" in error:
            error["item"] += first_row
        errors.append(error)
    where = []
    first = errors[0]
    for name in ("item", "line", "field"):
        if name in first:
            where.append(f"example {first[name]}" if name == "item" else
                         f"{name} {first[name]!r}")
    prefix = ", ".join(where) + ": " if where else ""
    return InvalidBatchError(f"model {model!r} would refuse this batch (nothing was written): "
                             f"{prefix}{first['message']}", errors)


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

    sentinel = redis_urls.sentinel_url(url)
    if sentinel is not None:
        from redis.backoff import NoBackoff
        from redis.retry import Retry
        from redis.sentinel import Sentinel

        manager = Sentinel(sentinel["sentinels"], sentinel_kwargs={
            "socket_timeout": 2.0, "socket_connect_timeout": 2.0, "retry": Retry(NoBackoff(), 0)})
        return manager.master_for(sentinel["master"], username=sentinel["username"],
                                  password=sentinel["password"], db=sentinel["db"])
    cluster = redis_urls.cluster_url(url)
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
                 min_replicas: int = 0, wait_timeout_ms: int = 1000,
                 require_model: bool = True) -> None:
        if min_replicas < 0 or wait_timeout_ms < 1:
            raise ValueError("min_replicas must be >= 0 and wait_timeout_ms >= 1")
        if isinstance(redis_url_or_client, str):
            self.client = redis_client(redis_url_or_client)
        else:
            self.client = redis_url_or_client
        self.model = model
        self.key = redis_keys.log_key(model)
        self.retention_seconds = float(idempotency_retention_seconds)
        self._append_once = self.client.register_script(scripts.APPEND_ONCE_LUA)
        self.batch_size = int(batch_size)
        self.value_bytes = value_bytes
        self.pipeline_entries = pipeline_entries
        self.targets = targets
        self.min_replicas = int(min_replicas)
        self.wait_timeout_ms = int(wait_timeout_ms)
        self._rows: list[tuple[np.ndarray, np.ndarray, float]] = []
        self._pending: list[bytes] = []
        self.ids: list[str] = []
        self.require_model = require_model
        self._fold: _Fold | None = None
        self._fold_checked = -np.inf  # monotonic time the model's config was last read

    # -------------------------------------------------------------- checks
    def _model_fold(self) -> _Fold:
        """The model's fold parser, from its stored config (read once). UnknownModelError
        while the model does not exist; with ``require_model=False`` the parser of any
        model, the config read again at most once a second."""
        known = self._fold is not None and self._fold.spec is not None
        now = time.monotonic()
        if not known and now - self._fold_checked >= _UNKNOWN_RECHECK_SECONDS:
            self._fold_checked = now
            raw = self.client.hget(redis_keys.MODELS_KEY, self.model)
            spec = None
            if raw is not None:
                from service.schemas import ModelSpec

                try:
                    spec = ModelSpec.model_validate_json(raw)
                except ValueError:  # not a config this version reads: check what any takes
                    spec = None
            elif self.require_model:
                self._fold_checked = -np.inf  # asked again at the next write
                known = sorted(k.decode() if isinstance(k, bytes) else k
                               for k in self.client.hkeys(redis_keys.MODELS_KEY))
                raise UnknownModelError(self.model, known)
            self._fold = _Fold(spec)
        return self._fold

    def check_libsvm(self, text: bytes) -> None:
        """InvalidBatchError (``line``: 1-based in ``text``) unless the model's fold would
        apply these libsvm lines whole; writes nothing."""
        self._check_entry({b"fmt": b"libsvm", b"data": bytes(text)})

    def _check_entry(self, fields: dict, first_row: int = 0) -> None:
        """InvalidBatchError unless the model's fold would apply this entry whole."""
        from service.errors import InputError

        try:
            self._model_fold().parse(fields, self.targets)
        except InputError as exc:
            raise _refused(self.model, exc, first_row) from None

    def _check_arrays(self, indptr: np.ndarray, indices: np.ndarray, values: np.ndarray,
                      labels: np.ndarray) -> np.ndarray:
        """What the encoding would change unnoticed: indices beyond int32 (they would wrap),
        labels that are not exactly -1/+1 or 0/1 (int8 would wrap or truncate them), and
        the shapes. The labels to encode: 0 read as -1, as the service reads it."""
        n = len(indptr) - 1
        if n < 0 or (n and (indptr[0] < 0 or np.any(np.diff(indptr) < 0)
                            or indptr[-1] > min(len(indices), len(values)))):
            message = "indptr must not decrease and must end within indices and values"
            raise InvalidBatchError(message, [{"field": "indptr", "message": message}])
        if len(labels) != n:
            message = f"{len(labels)} labels for {n} examples"
            raise InvalidBatchError(message, [{"field": "labels", "message": message}])
        used = indices[indptr[0]:indptr[-1]] if n else indices[:0]
        if used.dtype.kind not in "iu":
            bad = np.flatnonzero(np.asarray(used, dtype=np.float64) % 1 != 0)
            if len(bad):
                self._raise_at(indptr, int(bad[0]), "indices",
                               f"index {used[bad[0]]!r} is not an integer")
        wide = np.flatnonzero((used < 0) | (used >= _MAX_DIMENSION))
        if len(wide):
            self._raise_at(indptr, int(wide[0]), "indices",
                           f"feature index {int(used[wide[0]])} is outside [0, 2^31)")
        if not self.targets:
            from service.errors import InputError
            from service.ingest import signed_labels_of

            try:
                return signed_labels_of(labels, lambda row: {"item": row})
            except InputError as exc:
                error = exc.errors[0]
                raise self._invalid(error["item"], "label", error["message"]) from None
        return labels

    def _raise_at(self, indptr: np.ndarray, position: int, field: str, message: str) -> None:
        row = int(np.searchsorted(indptr, indptr[0] + position, side="right") - 1)
        raise self._invalid(row, field, message)

    def _invalid(self, item: int, field: str, message: str) -> InvalidBatchError:
        return InvalidBatchError(
            f"model {self.model!r} would refuse this batch (nothing was written): example "
            f"{item}, field {field!r}: {message}",
            [{"item": item, "field": field, "message": message}])

    # -------------------------------------------------------------- writing
    def add(self, indices, values, label: float) -> None:
        """Buffer one example (0-based indices; a ±1 label, or a target with ``targets``).
        What the encoding would change unnoticed (indices beyond int32, labels not ±1) is an
        InvalidBatchError here, with nothing buffered; the rest of what the fold checks is
        checked once per entry, when ``batch_size`` rows are sealed (or at ``flush``): a
        refused entry raises there and none of its rows is written."""
        self._model_fold()  # UnknownModelError before anything is buffered
        indices = np.asarray(indices)
        values = np.asarray(values, dtype=np.float64)
        indptr = np.array([0, len(indices)], dtype=np.int64)
        label_array = np.array([label], dtype=np.float64 if self.targets else None)
        label_array = self._check_arrays(indptr, indices, values, label_array)
        self._rows.append((indices.astype(np.int32), values,
                           float(label) if self.targets else int(label_array[0])))
        if len(self._rows) >= self.batch_size:
            self._seal()

    def add_batch(self, indptr, indices, values, labels) -> None:
        """Encode a whole CSR batch directly (``batch_size`` rows per entry).
        InvalidBatchError (and nothing of the batch written) when the model's fold would
        refuse any of it."""
        payloads = self._checked_payloads(indptr, indices, values, labels)
        self._seal()
        for payload in payloads:
            self._pending.append(payload)
            if len(self._pending) >= self.pipeline_entries:
                self._write()

    def _checked_payloads(self, indptr, indices, values, labels) -> list[bytes]:
        indptr = np.asarray(indptr, dtype=np.int64)
        indices = np.asarray(indices)
        values = np.asarray(values)
        labels = self._check_arrays(indptr, indices, values, np.asarray(labels))
        payloads = self._encode(indptr, indices, values, labels)
        for k, payload in enumerate(payloads):
            self._check_entry({b"fmt": b"bin", b"data": payload}, k * self.batch_size)
        return payloads

    def write_once(self, key: str, indptr, indices, values, labels) -> tuple[list[str], bool]:
        """Write a CSR batch now (after everything buffered), once per ``key``: ``(ids,
        False)``, or ``(ids of the first write, True)`` when the key was used before within
        the retention and nothing was appended. All entries of the batch go in one atomic
        step. Keys: 1 to 128 visible ASCII characters."""
        if not (isinstance(key, str) and 1 <= len(key) <= 128 and key.isascii()
                and key.isprintable() and " " not in key):
            raise ValueError("an idempotency key is 1 to 128 visible ASCII characters")
        if len(indptr) < 2:
            raise ValueError("write_once needs at least one example")
        payloads = self._checked_payloads(indptr, indices, values, labels)
        self.flush()
        args: list = [int(time.time() * 1000), max(1, int(self.retention_seconds * 1000)), key,
                      len(indptr) - 1]
        for payload in payloads:
            args += [b"bin", payload, b""]
        keys = [redis_keys.idempotency_key(self.model),
                redis_keys.idempotency_times_key(self.model), self.key]
        if self.min_replicas:  # a repeat is confirmed too: it writes its key again
            (repeat, joined, _), confirmed = self._confirmed(
                lambda pipe: self._append_once(keys=keys, args=args, client=pipe))
        else:
            repeat, joined, _ = self._append_once(keys=keys, args=args)
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
            payloads.append(fbx1.encode_batch(
                indptr[start:stop + 1] - lo, np.asarray(indices)[lo:hi],
                np.asarray(values)[lo:hi], labels[start:stop], value_bytes=self.value_bytes,
                targets=self.targets))
        return payloads

    def _seal(self) -> None:
        if not self._rows:
            return
        lengths = [len(r[0]) for r in self._rows]
        indptr = np.concatenate([[0], np.cumsum(lengths)])
        payload = fbx1.encode_batch(
            indptr, np.concatenate([r[0] for r in self._rows]),
            np.concatenate([r[1] for r in self._rows]),
            np.array([r[2] for r in self._rows]), value_bytes=self.value_bytes,
            targets=self.targets)
        self._rows.clear()
        self._check_entry({b"fmt": b"bin", b"data": payload})  # refused: none of it is sent
        self._pending.append(payload)
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
        """Write one libsvm-text entry (one or more lines) as is. InvalidBatchError (and
        nothing written) when the model's fold would refuse it."""
        entry = {b"fmt": b"libsvm", b"data": bytes(text)}
        self._check_entry(entry)
        self.flush()
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
