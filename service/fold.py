"""The online fold: read a model's log in order, apply micro-batches, ack, snapshot.

Per model, one task runs :meth:`ModelFold.run`. With a shared backend (Redis) it first
holds the model's lease; a process without the lease follows the published snapshots
instead. The owner:

1. loads the latest snapshot (state + id of the last applied entry) and positions its
   reader right after that id, so everything after it is replayed in order;
2. reads up to ``microbatch_max_entries`` entries, parses them (the same functions as the
   REST routes) on a pool of parser threads, sends malformed ones to the dead-letter
   stream, and applies the rest in log order in a worker thread (the numba parsers and
   kernels release the GIL). While one micro-batch is applied the next one is already read
   and parsed (at most two micro-batches in memory, each of at most
   ``microbatch_max_bytes`` when entries are alike: the read count adapts to entry sizes);
3. acknowledges the entries, publishes the serving view (:mod:`service.view`: the non-zero
   weights and counters every other API process answers from), and every N examples / T
   seconds writes a snapshot, then trims the log below the snapshot's id.

Applying is idempotent by id (entries at or before the applied id are skipped), so a crash
at any point followed by a restart applies every logged example exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor

from service import metrics
from service.errors import InputError, NotReplicatedError
from service.host import ModelHost
from service.ingest import ExampleBatch, parse_entry
from service.priority import in_background, lower_priority
from service.storage import LogEntry, Storage, id_key

log = logging.getLogger("featurebudget.fold")

_PARSERS: ThreadPoolExecutor | None = None
_PARSERS_LOCK = threading.Lock()


def parser_pool() -> ThreadPoolExecutor:
    """The process's entry parsers (one thread per CPU, at the background priority of
    :mod:`service.priority`; the parsers release the GIL)."""
    global _PARSERS
    with _PARSERS_LOCK:
        if _PARSERS is None:
            _PARSERS = ThreadPoolExecutor(max(1, os.cpu_count() or 1),
                                          thread_name_prefix="featurebudget-parse",
                                          initializer=lower_priority)
        return _PARSERS


Parsed = list[Future]  # per entry: ExampleBatch, or the reason it is rejected (str)


class Lease:
    """A fold's hold on its model's lease: renewed every ``lease_seconds / 3`` (with a
    heartbeat that ``/readyz`` reads), not more often. With a ``membership``
    (:mod:`service.placement`) a free lease is taken only by the process the model is
    placed on, or by any process once it has stayed free for a renewal period."""

    def __init__(self, storage: Storage, settings, model: str, process_id: str,
                 membership=None) -> None:
        self.storage = storage
        self.settings = settings
        self.model = model
        self.process_id = process_id
        self.membership = membership
        self.last = 0.0
        self.free_since: float | None = None

    async def renew(self, owner: bool) -> bool:
        """Whether this process owns the model now; ``owner``: whether it did so far."""
        now = time.monotonic()
        period = self.settings.lease_seconds / 3
        if owner and now - self.last < period:
            return True
        membership = self.membership
        if membership is not None:
            await membership.refresh()
            if not owner and not membership.mine(self.model):  # placed on another process
                if await self.storage.lease_holder(self.model) is not None:
                    self.free_since = None
                    return False
                if self.free_since is None or now - self.free_since < period / 2:
                    self.free_since = self.free_since or now
                    return False  # free, but give the placed process its turn first
        # An owner only renews: if its lease lapsed (a pause longer than the lease), another
        # process may have folded and released it meanwhile, so it must not take it back
        # with its stale state; it reports the loss, and takes the lease anew (reloading
        # the snapshot) at its next renewal.
        held = await self.storage.acquire_lease(self.model, self.process_id,
                                                self.settings.lease_seconds, renew_only=owner)
        self.last = now
        self.free_since = None
        if held:
            await self.storage.heartbeat(self.model, self.process_id)
        return held

    def hand_over(self) -> bool:
        """Whether the owner should hand the model to the process it is placed on now."""
        return self.membership is not None and self.membership.hand_over(self.model)

    async def release(self) -> None:
        await self.storage.release_lease(self.model, self.process_id)


def log_fold_failure(kind: str, model: str, exc: Exception) -> None:
    """A fold's failed step, before it retries: a one-line warning while Redis replicas are
    missing (expected, once a second), the traceback otherwise."""
    if isinstance(exc, NotReplicatedError):
        log.warning("%s of model %s waits for Redis replicas: %s", kind, model, exc)
    else:
        log.exception("%s of model %s failed; retrying", kind, model)


@contextlib.asynccontextmanager
async def renewing(storage: Storage, settings, model: str, process_id: str):
    """Renew ``process_id``'s lease of ``model`` every ``lease_seconds / 3`` (with the
    heartbeat) while the block runs, so that a slow step of the owner (a snapshot or a
    version of hundreds of MB being serialized and written in chunks) never outlives the
    lease; a renewal refused (the lease was lost) stops renewing, and the fenced write then
    refuses. No-op on a single-process backend."""
    if not storage.shared:
        yield
        return

    async def renew() -> None:
        while True:
            await asyncio.sleep(settings.lease_seconds / 3)
            try:
                if not await storage.acquire_lease(model, process_id, settings.lease_seconds,
                                                   renew_only=True):
                    return
                await storage.heartbeat(model, process_id)
            except Exception:  # noqa: BLE001 - a transient error: the next period tries again
                log.debug("lease renewal of model %s during a write failed", model,
                          exc_info=True)

    task = asyncio.create_task(renew(), name=f"renew-lease:{model}")
    try:
        yield
    finally:
        task.cancel()


async def save_fenced(storage: Storage, settings, model: str, blob: bytes,
                      log_id: str | None, process_id: str, started: float) -> bool:
    """Write a fold's snapshot with its log id, fenced by the lease (renewed while the write
    lasts), then trim the log below it; False (and nothing trimmed) when the write was
    refused: the lease was lost."""
    owner = process_id if storage.shared else None
    async with renewing(storage, settings, model, process_id):
        saved = await storage.save_snapshot(model, blob, log_id, owner=owner)
    if not saved:
        metrics.SNAPSHOTS_REFUSED.labels(model).inc()
        log.warning("snapshot of model %s refused: another process holds its lease", model)
        return False
    metrics.SNAPSHOTS.labels(model).inc()
    metrics.SNAPSHOT_SECONDS.labels(model).observe(time.perf_counter() - started)
    if settings.trim_log and log_id:
        await storage.trim(model, log_id)
    return True


async def report_applied(storage: Storage, model: str, n: int,
                         rejected: list[tuple[LogEntry, str]], started: float) -> None:
    """After a micro-batch: its rejected entries to the dead letters, and the counters."""
    for entry, reason in rejected:
        await storage.deadletter(model, entry, reason)
        metrics.DEADLETTER_ENTRIES.labels(model).inc()
        metrics.EXAMPLES_REJECTED.labels(model, "stream").inc()
    if n:
        metrics.EXAMPLES_APPLIED.labels(model).inc(n)
    metrics.UPDATE_SECONDS.labels(model).observe(time.perf_counter() - started)


class ModelFold:
    def __init__(self, host: ModelHost, storage: Storage, settings, process_id: str,
                 membership=None) -> None:
        self.host = host
        self.storage = storage
        self.settings = settings
        self.process_id = process_id
        self.reader = None
        self._stop = asyncio.Event()
        self.task: asyncio.Task | None = None
        self.lease = Lease(storage, settings, host.name, process_id, membership)
        self._prefetch: asyncio.Task | None = None
        self._entry_bytes = 0  # size of the biggest entry of the last read
        self._view_due = 0.0  # monotonic time the next serving view may be published
        self._view_dirty = False  # applied entries not in the published view yet
        if not storage.shared:
            host.owner = True

    def start(self) -> None:
        self.task = asyncio.create_task(self.run(), name=f"fold:{self.host.name}")

    async def stop(self, *, final_snapshot: bool = True) -> None:
        self._stop.set()
        if self.task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self.task, 10)
        self._drop_prefetch()
        if final_snapshot and self.host.owner and self.host.applied_id != self.host.snapshot_id:
            await self.snapshot()
        if self.host.owner and self.storage.shared:
            with contextlib.suppress(Exception):
                await self.storage.release_lease(self.host.name, self.process_id)
        self.host.owner = False

    async def run(self) -> None:
        while not self._stop.is_set():
            try:
                await self._step()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # keep folding after transient storage errors
                with contextlib.suppress(Exception):  # deleted meanwhile: end, and never
                    if self.host.name not in await self.storage.load_models():  # recreate
                        self.host.owner = False  # its stream
                        return
                log_fold_failure("fold", self.host.name, exc)
                self._drop_prefetch()
                self.reader = None  # re-position after the applied id: nothing is skipped
                await asyncio.sleep(1.0)

    async def _step(self) -> None:
        host, settings = self.host, self.settings
        if not await self.hold_lease():
            await self._follow_snapshots()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), settings.lease_seconds / 3)
            return
        if self._view_dirty and time.monotonic() >= self._view_due:
            await self.publish_view()
            host.notify_applied()
        if self.reader is None or host.reposition:
            self._drop_prefetch()
            host.reposition = False
            self.reader = self.storage.reader(host.name, self.process_id)
            await self.reader.start(host.applied_id)
            await self.reader.reclaim(host.applied_id)
        if self._prefetch is not None:
            entries, parsed = await self._prefetch
            self._prefetch = None
        else:
            entries, parsed = await self._read_and_parse()
        if entries:
            if settings.prefetch:  # read and parse the next micro-batch while this one is applied
                self._prefetch = asyncio.create_task(self._read_and_parse())
            async with host.fold_lock:
                if host.reposition:  # a snapshot was restored meanwhile: re-read
                    return
                await self._apply(entries, parsed)
        if host.examples_since_snapshot >= settings.snapshot_every_examples or (
                host.applied_id != host.snapshot_id and
                time.monotonic() - host.last_snapshot_time >= settings.snapshot_every_seconds):
            await self.snapshot()

    def _drop_prefetch(self) -> None:
        """Forget a read ahead (its entries are delivered again after re-positioning)."""
        if self._prefetch is not None:
            self._prefetch.cancel()
            self._prefetch = None
            self.reader = None

    async def hold_lease(self) -> bool:
        """True while this process owns the model (always, on the local backend)."""
        host = self.host
        if not self.storage.shared:
            host.owner = True
            return True
        owner = await self.lease.renew(host.owner)
        if owner and host.owner and self.lease.hand_over():  # placed on another process now
            await self._hand_over()
            return False
        if owner and not host.owner:  # became the owner: start from the newest snapshot
            blob = await self.storage.load_snapshot(host.name)
            if blob is not None:
                host.load_blob(blob, check_spec=False)
            self.publish_gauges()
            self.reader = None
        if not owner:
            self._drop_prefetch()
            self.reader = None
        host.owner = owner
        return owner

    async def _hand_over(self) -> None:
        """Snapshot what is applied, then release the lease: the placed process takes over
        from that snapshot at its next renewal."""
        host = self.host
        self._drop_prefetch()
        async with host.fold_lock:
            if host.applied_id != host.snapshot_id and not await self.snapshot():
                return  # lost the lease meanwhile
            await self.lease.release()
            host.owner = False
            self.reader = None
        log.info("model %s handed over to %s", host.name,
                 self.lease.membership.placed(host.name))

    async def _follow_snapshots(self) -> None:
        position = await self.storage.snapshot_position(self.host.name)
        if position and position != self.host.snapshot_id:
            blob = await self.storage.load_snapshot(self.host.name)
            if blob is not None:
                self.host.load_blob(blob, check_spec=False)
                self.publish_gauges()

    async def _read_and_parse(self) -> tuple[list[LogEntry], Parsed]:
        """Read the next micro-batch and start parsing its entries on the parser pool."""
        settings = self.settings
        count = settings.microbatch_max_entries
        if self._entry_bytes:  # bound a micro-batch's bytes too (at most two are held)
            count = max(1, min(count, settings.microbatch_max_bytes // self._entry_bytes))
        entries = await self.reader.read(count, settings.consumer_block_ms)
        if entries:
            self._entry_bytes = max(len(e.fields.get(b"data", b"")) for e in entries)
        pool = parser_pool()
        return entries, [pool.submit(self._parse, entry) for entry in entries]

    def _parse(self, entry: LogEntry) -> ExampleBatch | str:
        """Parser thread: one entry -> batch, or the reason it goes to the dead letters."""
        host = self.host
        try:
            return parse_entry(entry.fields, host.n_features, host.hasher,
                               zero_based=host.spec.libsvm_zero_based)
        except InputError as exc:
            return exc.detail
        except Exception as exc:  # never block the stream on one entry
            return f"{type(exc).__name__}: {exc}"

    async def _apply(self, entries: list[LogEntry], parsed: Parsed) -> None:
        host = self.host
        started = time.perf_counter()
        applied = id_key(host.applied_id)
        fresh = [(e, p) for e, p in zip(entries, parsed, strict=True) if id_key(e.id) > applied]
        rejected: list[tuple[LogEntry, str]] = []
        if fresh:
            n, rejected = await in_background(self._apply_parsed, fresh)
            await report_applied(self.storage, host.name, n, rejected, started)
            self._observe(fresh[-1][0].id)
        await self.reader.ack([e.id for e in entries])
        if self.storage.shared and host.applied_id:
            await self.publish_view()
        host.notify_applied()

    async def publish_view(self, *, now: bool = False) -> None:
        """Publish the serving view (fenced by the lease; shared backends). A view of V bytes
        is followed by the next one no sooner than V / ``serving_view_bytes_per_second``
        (selectors: every micro-batch; a dense learner over 2^20 features: ~2 per second);
        ``now`` ignores that (after a restore)."""
        host = self.host
        if not self.storage.shared or not host.owner or host.applied_id is None:
            return
        clock = time.monotonic()
        if not now and clock < self._view_due:
            self._view_dirty = True
            await self.storage.publish_applied(host.name, host.applied_id)
            return
        limit = self.settings.selected_features_max
        if host.n_features > 1 << 16 and not host.learner.selects:  # O(d): off the loop
            view = await in_background(host.make_view, limit)
        else:
            view = host.make_view(limit)
        blob = view.encode()
        token = f"{view.log_id} {uuid.uuid4().hex[:12]}"
        if await self.storage.publish_view(host.name, token, blob, owner=self.process_id):
            host.view_published = view.position
        else:  # another process holds the lease (or published a later view): it folds now
            log.warning("serving view of model %s refused: another process holds its lease",
                        host.name)
            host.owner = False
            self._drop_prefetch()
            self.reader = None
        self._view_dirty = False
        self._view_due = clock + len(blob) / self.settings.serving_view_bytes_per_second

    def _apply_parsed(self, fresh: list[tuple[LogEntry, Future]]) -> tuple[int, list]:
        """Worker thread: wait for the parsed entries, apply the good ones in log order."""
        batches: list[ExampleBatch] = []
        rejected = []
        for entry, future in fresh:
            result = future.result()
            if isinstance(result, str):
                rejected.append((entry, result))
            else:
                batches.append(result)
        return self.host.apply_all(batches, fresh[-1][0].id)[0], rejected

    def _observe(self, last_id: str) -> None:
        host = self.host
        if (added := self.storage.id_time(last_id)) is not None:  # ids that carry a time
            metrics.LEARNER_LAG.labels(host.name).set(max(0.0, time.time() - added))
        self.publish_gauges()

    def publish_gauges(self) -> None:
        """The learner's gauges from its current state (also after a restore or restart)."""
        host = self.host
        learner = host.learner
        if host.progressive_examples:
            metrics.PROGRESSIVE_ACCURACY.labels(host.name).set(
                host.progressive_correct / host.progressive_examples)
        metrics.EXAMPLES_SEEN.labels(host.name).set(learner.n_examples_)
        metrics.SELECTED_FEATURES.labels(host.name).set(len(learner.weights()[0]))

    async def snapshot(self) -> bool:
        """Write the state with its log id (atomically, fenced by the lease), then trim the log
        below it. False when the write was refused: this process lost the model."""
        host = self.host
        started = time.perf_counter()
        blob, log_id = await in_background(host.snapshot_blob, reset=True)
        if not await save_fenced(self.storage, self.settings, host.name, blob, log_id,
                                 self.process_id, started):
            host.owner = False  # lost the model meanwhile: the new owner snapshots and trims
            self.reader = None
            return False
        host.snapshot_id = log_id
        host.last_snapshot_time = time.monotonic()
        return True
