"""``StreamProducer``: write examples to a model's Redis stream in the compact binary format.

Examples are buffered and written ``batch_size`` per stream entry (one ``XADD`` of an
``FBX1`` payload: raw int32 indices, float32/float64 values; see :mod:`service.wire`).

>>> producer = StreamProducer("redis://127.0.0.1:6379/0", "spam")   # doctest: +SKIP
>>> producer.add_batch(indptr, indices, values, labels)              # doctest: +SKIP
>>> producer.flush()                                                 # doctest: +SKIP

For a batch regression model pass ``targets=True``: labels are then float64 targets (the
FBX1 targets flag), indices index the concatenation of the model's groups' features.
"""

from __future__ import annotations

import numpy as np

from service import wire


class StreamProducer:
    """Buffered producer of binary entries on ``featurebudget:{model}:examples``."""

    def __init__(self, redis_url_or_client, model: str, *, batch_size: int = 100,
                 value_bytes: int = 4, pipeline_entries: int = 32,
                 targets: bool = False) -> None:
        if isinstance(redis_url_or_client, str):
            import redis

            self.client = redis.Redis.from_url(redis_url_or_client)
        else:
            self.client = redis_url_or_client
        self.key = wire.log_key(model)
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
        indptr = np.asarray(indptr, dtype=np.int64)
        labels = np.asarray(labels)
        n = len(indptr) - 1
        for start in range(0, n, self.batch_size):
            stop = min(n, start + self.batch_size)
            lo, hi = indptr[start], indptr[stop]
            self._pending.append(wire.encode_batch(
                indptr[start:stop + 1] - lo, np.asarray(indices)[lo:hi],
                np.asarray(values)[lo:hi], labels[start:stop], value_bytes=self.value_bytes,
                targets=self.targets))
            if len(self._pending) >= self.pipeline_entries:
                self._write()

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
