"""Bulk loader: a libsvm file into a model, over REST (text/plain) or the Redis stream.

``featurebudget load FILE.svm --model m [--via rest|stream]``. The file is read in chunks
of ``batch_size`` lines; each chunk is one request (REST) or is parsed here and written as
binary entries (stream). A progress bar goes to stderr.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator


class Progress:
    """A small stderr progress bar (bytes of the file, examples, rate)."""

    def __init__(self, total_bytes: int, *, stream=sys.stderr, enabled: bool = True) -> None:
        self.total = max(1, total_bytes)
        self.stream = stream
        self.enabled = enabled and stream is not None
        self.started = time.perf_counter()
        self.last = 0.0

    def update(self, done_bytes: int, examples: int, *, final: bool = False) -> None:
        now = time.perf_counter()
        if not self.enabled or (not final and now - self.last < 0.2):
            return
        self.last = now
        fraction = min(1.0, done_bytes / self.total)
        bar = "#" * int(30 * fraction)
        rate = examples / max(1e-9, now - self.started)
        self.stream.write(f"\r[{bar:<30}] {100 * fraction:5.1f}%  {examples} examples  "
                          f"{rate:,.0f}/s" + ("\n" if final else ""))
        self.stream.flush()


def iter_chunks(path: str, batch_size: int) -> Iterator[tuple[bytes, int]]:
    """(chunk of up to ``batch_size`` non-blank lines, bytes consumed so far)."""
    lines: list[bytes] = []
    consumed = 0
    with open(path, "rb") as handle:
        for line in handle:
            consumed += len(line)
            if line.strip():
                lines.append(line.rstrip(b"\r\n"))
            if len(lines) >= batch_size:
                yield b"\n".join(lines) + b"\n", consumed
                lines = []
    if lines:
        yield b"\n".join(lines) + b"\n", consumed


def load_file(path: str, model: str, *, via: str = "rest", url: str = "http://127.0.0.1:8000",
              redis_url: str | None = None, api_key: str | None = None,
              batch_size: int = 1000, wait: bool = False, progress: bool = True,
              http=None) -> dict:
    """Load ``path`` into ``model``; returns counts and the last log id."""
    total = os.path.getsize(path)
    bar = Progress(total, enabled=progress)
    examples, last_id = 0, None
    if via == "rest":
        from clients.http import FeaturebudgetClient

        with FeaturebudgetClient(url, api_key=api_key, http=http) as client:
            for chunk, consumed in iter_chunks(path, batch_size):
                accepted = client.post_libsvm(model, chunk)
                examples += accepted.accepted
                last_id = accepted.log_ids[-1]
                bar.update(consumed, examples)
            if wait and last_id:
                _wait_applied(lambda: client.get_model(model).log_position, last_id)
    elif via == "stream":
        import json

        from algorithms.sparse.libsvm import parse_libsvm
        from clients.stream import StreamProducer, redis_client
        from service import wire
        from service.storage.schemes import redis_url_in_env

        redis_url = redis_url or redis_url_in_env()
        if not redis_url:
            raise SystemExit("--via stream needs --redis-url or FEATUREBUDGET_STORAGE_URL "
                             "(FEATUREBUDGET_REDIS_URL)")
        client = redis_client(redis_url)  # a Redis server or a Redis Cluster
        raw = client.hget(wire.MODELS_KEY, model)
        if raw is None:
            raise SystemExit(f"no model named {model!r} in {redis_url}")
        spec = json.loads(raw)
        dimension = spec["n_features"] or (1 << spec["hash_bits"])
        producer = StreamProducer(client, model, batch_size=min(batch_size, 1000),
                                  value_bytes=8)
        for line_chunk, consumed in iter_chunks(path, batch_size):
            X, labels = parse_libsvm(line_chunk, n_features=dimension,
                                     zero_based=spec.get("libsvm_zero_based", False))
            producer.add_batch(X.indptr, X.indices, X.values, labels.astype("int8"))
            examples += X.n_rows
            bar.update(consumed, examples)
        ids = producer.flush()
        last_id = ids[-1] if ids else None
        if wait and last_id:
            from service.storage import id_key

            def position():
                value = client.get(wire.applied_key(model))
                return value.decode() if value else None
            _wait_applied(position, last_id, key=id_key)
    else:
        raise SystemExit(f"--via must be rest or stream, not {via!r}")
    bar.update(total, examples, final=True)
    return {"model": model, "examples": examples, "last_log_id": last_id,
            "seconds": time.perf_counter() - bar.started}


def _wait_applied(position, last_id: str, key=None, timeout: float = 600.0) -> None:
    from service.storage import id_key

    key = key or id_key
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if key(position()) >= key(last_id):
            return
        time.sleep(0.05)
    raise TimeoutError(f"{last_id} not applied within {timeout} s")
