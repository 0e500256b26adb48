"""Bulk loader: a libsvm file into a model, over REST (text/plain) or the Redis stream.

``featurebudget load FILE.svm --model m [--via rest|stream]``. The file is read in chunks
of ``batch_size`` examples; each chunk is one request (REST, ``Idempotency-Key``) or one
:meth:`~clients.stream.StreamProducer.write_once` (stream), under a key made of the
chunk's SHA-256 and its first example's position in the file, so a rerun of the same
command appends nothing that an earlier run appended (within the service's idempotency
retention, a day by default). By default every chunk is first checked as the model would
take it (REST: ``?dry_run=true``; stream: the fold's own parser) and nothing is appended
unless the whole file passes. Errors are :class:`LoadError`, naming the file's own line
and, after a partial load, how many examples were appended and how to go on. Memory:
one chunk; time: O(file) per pass. A progress bar goes to stderr.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass


class LoadError(Exception):
    """A load that stopped: one line for the user. ``status``: 2 for the file (unreadable,
    an example the model refuses), 1 for the service (unknown model, unreachable, an
    error); ``appended``: the first examples of the file that are in the model's log."""

    def __init__(self, message: str, *, status: int, appended: int = 0) -> None:
        super().__init__(message)
        self.status = status
        self.appended = appended


class Progress:
    """A small stderr progress bar (bytes of the file, examples, rate)."""

    def __init__(self, total_bytes: int, *, stream=sys.stderr, enabled: bool = True,
                 label: str = "") -> None:
        self.total = max(1, total_bytes)
        self.stream = stream
        self.enabled = enabled and stream is not None
        self.label = label
        self.started = time.perf_counter()
        self.last = 0.0
        self.open = False  # a line drawn and not ended

    def restart(self, label: str) -> None:
        """A new bar (the next pass) under ``label``."""
        self.label, self.started, self.last = label, time.perf_counter(), 0.0

    def end(self) -> None:
        """End a line drawn (before an error message)."""
        if self.open:
            self.stream.write("\n")
            self.open = False

    def update(self, done_bytes: int, examples: int, *, final: bool = False) -> None:
        now = time.perf_counter()
        if not self.enabled or (not final and now - self.last < 0.2):
            return
        self.last = now
        fraction = min(1.0, done_bytes / self.total)
        bar = "#" * int(30 * fraction)
        rate = examples / max(1e-9, now - self.started)
        self.stream.write(f"\r{self.label}[{bar:<30}] {100 * fraction:5.1f}%  {examples} "
                          f"examples  {rate:,.0f}/s" + ("\n" if final else ""))
        self.stream.flush()
        self.open = not final


@dataclass
class Chunk:
    """Consecutive examples of the file: ``data`` runs from the line of the first to the
    line of the last (blank and comment lines between them kept, so a line ``k`` of
    ``data`` is line ``first_line + k - 1`` of the file)."""

    data: bytes
    first_line: int   # 1-based, in the file
    start: int        # examples of the file before this chunk
    count: int        # examples in it
    consumed: int     # bytes of the file read through its end

    def file_line(self, line: int) -> int:
        return self.first_line + line - 1

    @property
    def last_line(self) -> int:
        return self.first_line + self.data.count(b"\n") - 1

    @property
    def key(self) -> str:
        """Its idempotency key: the same examples at the same place of the file."""
        return f"load-{hashlib.sha256(self.data).hexdigest()[:40]}-{self.start}"


def _is_example(line: bytes) -> bool:
    return bool(line.split(b"#", 1)[0].strip())


def iter_chunks(path: str, batch_size: int, skip: int = 0) -> Iterator[Chunk]:
    """The file's examples after the first ``skip``, ``batch_size`` per :class:`Chunk`."""
    lines: list[bytes] = []
    first_line = start = count = seen = consumed = 0
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            consumed += len(line)
            example = _is_example(line)
            if example:
                seen += 1
                if seen <= skip:
                    continue
                if not lines:
                    first_line, start = number, seen - 1
                count += 1
            if lines or example:
                lines.append(line if line.endswith(b"\n") else line + b"\n")
            if count >= batch_size:
                yield Chunk(b"".join(lines), first_line, start, count, consumed)
                lines, count = [], 0
    if count:
        while not _is_example(lines[-1]):
            lines.pop()
        yield Chunk(b"".join(lines), first_line, start, count, consumed)


def _resume(path: str, appended: int) -> str:
    if not appended:
        return "nothing was appended"
    return (f"the first {appended:,} examples of {path} are in the model's log: once the "
            "cause is fixed, run the same command again to go on (chunks already appended "
            f"are recognised and not appended twice within a day), or add --skip {appended}")


def load_file(path: str, model: str, *, via: str = "rest", url: str = "http://127.0.0.1:8000",
              redis_url: str | None = None, api_key: str | None = None,
              batch_size: int = 1000, wait: bool = False, progress: bool = True,
              http=None, check: bool = True, skip: int = 0) -> dict:
    """Load ``path`` into ``model`` (the first ``skip`` examples left out; ``check``: the
    whole file checked before anything is appended). Returns counts and the last log id;
    :class:`LoadError` otherwise."""
    if batch_size < 1 or skip < 0:
        raise LoadError("--batch-size must be at least 1 and --skip at least 0", status=2)
    try:
        total = os.path.getsize(path)
    except OSError as exc:
        raise LoadError(f"cannot read {path}: {exc.strerror or exc}", status=2) from None
    if via == "rest":
        loader = _RestLoader(path, model, url, api_key, http)
    elif via == "stream":
        loader = _StreamLoader(path, model, redis_url, batch_size)
    else:
        raise LoadError(f"--via must be rest or stream, not {via!r}", status=2)
    bar = Progress(total, enabled=progress, label="checking " if check else "")
    try:
        with loader:
            return _load(loader, path, model, bar, batch_size, check, skip, wait)
    except LoadError:
        bar.end()  # the message on a line of its own
        raise


def _load(loader, path, model, bar, batch_size, check, skip, wait) -> dict:
    """The check pass (``check``), then the load pass, on ``bar``."""
    started = time.perf_counter()
    appended, repeated, last_id = skip, 0, None
    try:
        if check:
            examples = 0
            for chunk in iter_chunks(path, batch_size, skip):
                try:
                    loader.check(chunk)
                except LoadError as exc:
                    raise LoadError(f"{exc}; nothing was appended (the whole file is "
                                    "checked first)", status=exc.status) from None
                examples += chunk.count
                bar.update(chunk.consumed, examples)
            bar.update(bar.total, examples, final=True)
            bar.restart("loading  ")
        for chunk in iter_chunks(path, batch_size, skip):
            try:
                ids, again = loader.write(chunk)
            except LoadError as exc:
                raise LoadError(f"{exc}; {_resume(path, appended)}", status=exc.status,
                                appended=appended) from None
            appended += chunk.count
            repeated += chunk.count if again else 0
            last_id = ids[-1] if ids else last_id
            bar.update(chunk.consumed, appended - skip)
    except OSError as exc:  # the file, read while loading
        raise LoadError(f"cannot read {path}: {exc.strerror or exc}; "
                        f"{_resume(path, appended)}", status=2, appended=appended) from None
    bar.update(bar.total, appended - skip, final=True)
    if wait and last_id:
        loader.wait(last_id)
    return {"model": model, "examples": appended - skip - repeated, "repeated": repeated,
            "skipped": skip, "checked": check, "last_log_id": last_id,
            "seconds": time.perf_counter() - started}


def _where(path: str, chunk: Chunk, error: dict) -> str:
    """``FILE, line N, field 'f': message`` of a problem's (or producer's) first error."""
    parts = [path]
    if "line" in error:
        parts.append(f"line {chunk.file_line(int(error['line']))}")
    elif "item" in error:
        parts.append(f"example {chunk.start + int(error['item']) + 1}")
    else:
        parts.append(f"lines {chunk.first_line}-{chunk.last_line}")
    if error.get("field"):
        parts.append(f"field {error['field']!r}")
    return ", ".join(parts) + f": {error.get('message', '')}"


class _RestLoader:
    """Chunks as ``text/plain`` requests of :class:`~clients.http.FeaturebudgetClient`."""

    def __init__(self, path, model, url, api_key, http) -> None:
        from clients.http import FeaturebudgetClient

        self.path, self.model, self.url = path, model, url
        self.client = FeaturebudgetClient(url, api_key=api_key, http=http)

    def __enter__(self):
        try:
            self._call(lambda: self.client.get_model(self.model))  # an unknown model: 404
        except LoadError:
            self.client.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.client.close()

    def _call(self, request, chunk: Chunk | None = None):
        import httpx

        from clients.http import ServiceError

        try:
            return request()
        except ServiceError as exc:
            errors = exc.problem.get("errors") or []
            if exc.status == 422 and chunk is not None and errors:
                raise LoadError(_where(self.path, chunk, errors[0]), status=2) from None
            if exc.status == 404:
                raise LoadError(f"no model named {self.model!r} at {self.url} (`featurebudget "
                                "models list` lists them)", status=1) from None
            status = 2 if exc.status in (413, 415) else 1
            raise LoadError(f"{self.url} answered {exc}", status=status) from None
        except httpx.HTTPError as exc:
            raise LoadError(f"cannot reach {self.url} (--url or FEATUREBUDGET_URL): {exc}",
                            status=1) from None

    def check(self, chunk: Chunk) -> None:
        self._call(lambda: self.client.post_libsvm(self.model, chunk.data, dry_run=True),
                   chunk)

    def write(self, chunk: Chunk) -> tuple[list[str], bool]:
        accepted = self._call(lambda: self.client.post_libsvm(
            self.model, chunk.data, idempotency_key=chunk.key), chunk)
        return accepted.log_ids, accepted.repeated

    def wait(self, last_id: str) -> None:
        _wait_applied(lambda: self._call(lambda: self.client.get_model(self.model))
                      .log_position, last_id)


class _StreamLoader:
    """Chunks parsed here and written by :class:`~clients.stream.StreamProducer`."""

    def __init__(self, path, model, redis_url, batch_size) -> None:
        from service.storage.schemes import redis_url_in_env

        self.path, self.model = path, model
        self.redis_url = redis_url or redis_url_in_env()
        if not self.redis_url:
            raise LoadError("--via stream needs --redis-url or FEATUREBUDGET_STORAGE_URL "
                            "(FEATUREBUDGET_REDIS_URL)", status=2)
        self.batch_size = batch_size

    def __enter__(self):
        import redis

        from clients.stream import StreamProducer, UnknownModelError, redis_client

        try:
            self.client = redis_client(self.redis_url)  # a server, a cluster, sentinels
            self.producer = StreamProducer(self.client, self.model,
                                           batch_size=min(self.batch_size, 1000),
                                           value_bytes=8)
            self.fold = self.producer._model_fold()
        except UnknownModelError as exc:
            raise LoadError(str(exc), status=1) from None
        except redis.RedisError as exc:
            raise LoadError(f"cannot reach {self.redis_url}: {exc}", status=1) from None
        if self.fold.spec is None or self.fold.spec.is_batch:
            raise LoadError(f"--via stream loads online models; {self.model!r} is not one "
                            "(use --via rest)", status=2)
        return self

    def __exit__(self, *exc) -> None:
        self.client.close()

    def check(self, chunk: Chunk) -> None:
        from clients.stream import InvalidBatchError

        try:
            self.producer.check_libsvm(chunk.data)
        except InvalidBatchError as exc:
            raise LoadError(_where(self.path, chunk, exc.errors[0]), status=2) from None

    def write(self, chunk: Chunk) -> tuple[list[str], bool]:
        import redis

        from algorithms.sparse.libsvm import LibsvmFormatError, parse_libsvm
        from clients.stream import InvalidBatchError

        spec = self.fold.spec
        try:
            X, labels = parse_libsvm(chunk.data, n_features=spec.dimension,
                                     zero_based=spec.libsvm_zero_based)
            return self.producer.write_once(chunk.key, X.indptr, X.indices, X.values,
                                            labels)
        except LibsvmFormatError as exc:
            error = {"line": exc.line, "message": f"column {exc.column}: {exc.reason}"}
            raise LoadError(_where(self.path, chunk, error), status=2) from None
        except InvalidBatchError as exc:
            self.check(chunk)  # the line, when the text names it
            raise LoadError(_where(self.path, chunk, exc.errors[0]), status=2) from None
        except redis.RedisError as exc:
            raise LoadError(f"{self.redis_url}: {exc}", status=1) from None

    def wait(self, last_id: str) -> None:
        from service.storage import id_key, redis_keys

        def position():
            value = self.client.get(redis_keys.applied_key(self.model))
            return value.decode() if value else None
        _wait_applied(position, last_id, key=id_key)


def _wait_applied(position, last_id: str, key=None, timeout: float = 600.0) -> None:
    from service.storage import id_key

    key = key or id_key
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if key(position()) >= key(last_id):
            return
        time.sleep(0.05)
    raise LoadError(f"{last_id} not applied within {timeout} s (it is in the log)", status=1)
