"""One fold loop for every kind of model: read the log in order, apply, ack, snapshot.

A model is a fold over its log: ``state_n = apply(state_{n-1}, entry_n)``. :class:`Fold`
runs that loop for one model in this process, whatever the model's kind; a kind (the
online learners' :class:`service.online.fold.ModelFold`, the batch models'
:class:`service.batch.worker.fold_worker.BatchFold`) says only what is its own:

- ``load(blob)``: take the state of a stored snapshot (when this process becomes the owner,
  or follows the owner's snapshots);
- ``apply_block(entries, work)``: fold entries into the state, in log order, in a worker
  thread; ``(examples applied, rejected entries with the reason)``;
- ``state_blob()``: the state and the id of the last entry it includes, serialized together;
- ``replace_state(parsed, log_id)``: a restored snapshot, as of ``log_id``.

The loop owns the bookkeeping: the lease (shared backends: one process folds a model;
:class:`Lease`), the reader's position, the applied id, the snapshot policy (every
``snapshot_every_examples`` examples or ``snapshot_every_seconds``), the fenced snapshot
write and the log trim below it, the hand-over to the process a model is placed on, the
end of the fold when its model is deleted, and waiting for a log id to be applied.

Applying is idempotent by id (entries at or before the applied id are skipped), so a crash
at any point followed by a restart applies every logged example exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from service import metrics
from service.errors import NotReplicatedError
from service.ingest import entry_examples
from service.priority import in_background
from service.storage import LogEntry, Storage, id_key
from service.storage.base import incarnation_of

log = logging.getLogger("featurebudget.fold")


class LeaseLost(RuntimeError):  # noqa: N818 - named for what happened
    """This process does not own the model's fold (any more): another process folds it
    now, and a fenced write was or would be refused. The step is left to the new owner."""


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


async def cancel_and_wait(tasks, timeout: float = 5.0) -> None:
    """Cancel ``tasks`` (None entries skipped) and wait for them to end, at most
    ``timeout`` seconds: a task that does not end on cancellation (a client library that
    swallowed it, a ``finally`` that waits on a connection) never holds up a shutdown."""
    pending = [t for t in tasks if t is not None]
    for task in pending:
        task.cancel()
    if pending:
        done, late = await asyncio.wait(pending, timeout=timeout)
        for task in done:  # (their exceptions are retrieved: nothing is logged at exit)
            if not task.cancelled():
                task.exception()
        for task in late:
            log.warning("task %s did not end within %.0f s of its cancellation; shutting "
                        "down without it", task.get_name(), timeout)


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
    """After a block: its rejected entries to the dead letters, and the counters."""
    for entry, reason in rejected:
        await storage.deadletter(model, entry, reason)
        metrics.DEADLETTER_ENTRIES.labels(model).inc()
        metrics.count_rejected(model, "stream", entry_examples(entry.fields))
    if n:
        metrics.EXAMPLES_APPLIED.labels(model).inc(n)
    metrics.UPDATE_SECONDS.labels(model).observe(time.perf_counter() - started)


class Fold:
    """One model's fold in this process (module docstring). Subclasses implement the four
    hooks (``load``, ``apply_block``, ``state_blob``, ``replace_state``), expose the state's
    ``applied_id``, and may refine the optional hooks below them."""

    kind = "fold"  # names the fold in logs and task names
    state_loaded_with_model = False  # True: the model's state was restored before the fold

    def __init__(self, name: str, incarnation: str, storage: Storage, settings,
                 process_id: str, membership=None) -> None:
        self.name = name
        self.incarnation = incarnation  # which model of this name this fold folds
        self._incarnation_tag = incarnation.encode()
        self.storage = storage
        self.settings = settings
        self.process_id = process_id
        self.lease = Lease(storage, settings, name, process_id, membership)
        self.reader = None
        self.reposition = False  # a restore moved the applied id: position the reader anew
        self.snapshot_id: str | None = None  # the applied id of the last snapshot written
        self.since_snapshot = 0  # examples applied since
        self.snapshot_requested = False  # another process asked for a snapshot now
        self.last_snapshot_time = time.monotonic()
        self.step_lock = asyncio.Lock()  # held around one block's apply and around a restore
        self.task: asyncio.Task | None = None
        self._stop = asyncio.Event()
        self._applied = asyncio.Event()
        self._entry_bytes = 0  # size of the biggest entry of the last read
        self._owner = False

    # ------------------------------------------------------------ the kind's hooks
    @property
    def applied_id(self) -> str | None:
        raise NotImplementedError

    def load(self, blob: bytes) -> None:
        """Take a stored snapshot's state (ValueError / InputError: not a valid one)."""
        raise NotImplementedError

    def apply_block(self, entries: list[LogEntry], work: Any) -> tuple[int, list]:
        """Worker thread: fold the entries (all after the applied id) in log order and
        record the last one's id; ``(examples applied, [(entry, reason rejected)])``."""
        raise NotImplementedError

    def state_blob(self) -> tuple[bytes, str | None]:
        """Worker thread: the serialized state and the id of the last entry it includes."""
        raise NotImplementedError

    def replace_state(self, parsed: Any, log_id: str | None) -> None:
        """Install a restored snapshot's state as of ``log_id``."""
        raise NotImplementedError

    def start_work(self, entries: list[LogEntry]) -> Any:
        """Work that may start as soon as entries are read (the online fold parses them on
        its parser pool); passed to :meth:`apply_block`."""
        return None

    async def read_block(self) -> tuple[list[LogEntry], Any]:
        """The next block of entries (at most ``read_count()``) and its started work."""
        entries = await self.reader.read(self.read_count(), self.settings.consumer_block_ms)
        if entries:
            self._entry_bytes = max(sum(len(v) for v in e.fields.values()) for e in entries)
        return entries, self.start_work(entries)

    def read_count(self) -> int:
        """Entries per read: the kind's maximum, fewer when entries are big (a block's bytes
        stay near ``microbatch_max_bytes``)."""
        count = self.max_read_entries()
        if self._entry_bytes:
            count = max(1, min(count, self.settings.microbatch_max_bytes // self._entry_bytes))
        return count

    def max_read_entries(self) -> int:
        return self.settings.microbatch_max_entries

    async def before_step(self) -> None:
        """The owner, at the start of each step."""

    async def after_apply(self) -> None:
        """The owner, after a block is applied and acknowledged."""

    async def after_take_over(self) -> None:
        """Just became the owner, its state loaded."""

    async def follow(self) -> None:
        """Not the owner: keep up with the owner's stored state (optional)."""

    def may_hand_over(self) -> bool:
        """Whether the model can be handed over now (not in the middle of a long step)."""
        return True

    def forget_read_ahead(self) -> None:
        """Drop whatever was read ahead of the applied id (it is read again)."""
        self.reader = None

    def publish_gauges(self) -> None:
        """The model's gauges from the current state."""

    async def stopping(self) -> None:
        """The fold is stopping (before its final snapshot)."""

    # ------------------------------------------------------------ ownership
    @property
    def owner(self) -> bool:
        return self._owner

    @owner.setter
    def owner(self, value: bool) -> None:
        self._owner = value

    # ------------------------------------------------------------ the loop
    def start(self) -> None:
        self.task = asyncio.create_task(self.run(), name=f"{self.kind}:{self.name}")

    async def stop(self, *, final_snapshot: bool = True) -> None:
        self._stop.set()
        if self.task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self.task, 10)
        await self.stopping()
        self.forget_read_ahead()
        if final_snapshot and self.owner and self.applied_id != self.snapshot_id:
            with contextlib.suppress(Exception):
                await self.snapshot()
        if self.owner and self.storage.shared:
            with contextlib.suppress(Exception):
                await self.storage.release_lease(self.name, self.process_id)
        self.owner = False

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    async def run(self) -> None:
        while not self._stop.is_set():
            try:
                await self.step()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # keep folding after transient storage errors
                if await self.deleted():
                    return
                log_fold_failure(self.kind, self.name, exc)
                self.forget_read_ahead()  # re-position after the applied id: nothing skipped
                await asyncio.sleep(1.0)

    async def deleted(self) -> bool:
        """Whether the model this fold folds was deleted meanwhile (also: deleted and
        created again under its name, another incarnation): then this fold ends, and never
        creates its log again nor touches the new model's."""
        with contextlib.suppress(Exception):
            raw = (await self.storage.load_models()).get(self.name)
            if raw is None or incarnation_of(raw) != self.incarnation:
                self._stop.set()
                self.owner = False
                log.info("model %s: %s; its fold ends", self.name,
                         "deleted" if raw is None else "deleted and created again")
                return True
        return False

    def foreign(self, entries: list[LogEntry]) -> bool:
        """Whether an entry was appended for another incarnation of the model (this fold's
        model was deleted and created again under its name). O(entries)."""
        own = self._incarnation_tag
        return any(e.fields.get(b"inc", own) != own for e in entries)

    async def step(self) -> None:
        if not await self.hold_lease():
            await self.follow()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.settings.lease_seconds / 3)
            return
        await self.before_step()
        if self.reader is None or self.reposition:
            self.forget_read_ahead()
            self.reposition = False
            self.reader = self.storage.reader(self.name, self.process_id)
            await self.reader.start(self.applied_id)
            await self.reader.reclaim(self.applied_id)
        entries, work = await self.read_block()
        if entries:
            async with self.step_lock:
                if self.reposition:  # a snapshot was restored meanwhile: read again
                    return
                await self.apply(entries, work)
        if self.snapshot_due():
            await self.snapshot()

    async def apply(self, entries: list[LogEntry], work: Any) -> None:
        started = time.perf_counter()
        applied = id_key(self.applied_id)
        fresh = [i for i, e in enumerate(entries) if id_key(e.id) > applied]
        if fresh:
            block = entries[fresh[0]:]  # ids increase: the fresh entries are a suffix
            work, stale = self.work_of(work, fresh[0]), []
            if self.foreign(block):
                if await self.deleted():  # this fold's model is gone: the fold of the new
                    self.forget_read_ahead()  # one applies and acknowledges them
                    return
                block, work, stale = self.without_foreign(block, work)  # an older model's
            n, rejected = await in_background(self.apply_block, block, work) if block \
                else (0, [])
            rejected = stale + rejected
            self.since_snapshot += n
            await report_applied(self.storage, self.name, n, rejected, started)
            if (added := self.storage.id_time(block[-1].id)) is not None:  # ids with a time
                metrics.LEARNER_LAG.labels(self.name).set(max(0.0, time.time() - added))
            self.publish_gauges()
        await self.reader.ack([e.id for e in entries])
        await self.after_apply()
        event, self._applied = self._applied, asyncio.Event()
        event.set()

    def without_foreign(self, block: list[LogEntry], work: Any):
        """``(entries, work, rejected)``: the entries of this incarnation, their work, and
        the others with the reason they go to the dead letters (a process that had not yet
        seen the model deleted and created again appended them, validated against the old
        model's layout)."""
        own = self._incarnation_tag
        keep = [i for i, e in enumerate(block) if e.fields.get(b"inc", own) == own]
        reason = (f"appended for an earlier model named {self.name!r}, deleted since; not "
                  "applied to the model created again under that name")
        rejected = [(e, reason) for e in block if e.fields.get(b"inc", own) != own]
        if isinstance(work, list):
            work = [work[i] for i in keep]
        return [block[i] for i in keep], work, rejected

    @staticmethod
    def work_of(work: Any, first: int) -> Any:
        """The started work of the entries from index ``first`` on."""
        return work[first:] if isinstance(work, list) else work

    def snapshot_due(self) -> bool:
        settings = self.settings
        if self.snapshot_requested:  # (the stored one is current when nothing was applied)
            self.snapshot_requested = False
            if self.applied_id != self.snapshot_id:
                return True
        return self.since_snapshot >= settings.snapshot_every_examples or (
            self.applied_id != self.snapshot_id and
            time.monotonic() - self.last_snapshot_time >= settings.snapshot_every_seconds)

    def has_applied(self, log_id: str) -> bool:
        """Whether ``log_id`` is applied here. O(1)."""
        return id_key(self.applied_id) >= id_key(log_id)

    async def next_applied(self, timeout: float) -> None:
        """Until the next block is applied here, at most ``timeout`` (0.5 s at most)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._applied.wait(), min(timeout, 0.5))

    # ------------------------------------------------------------ lease and snapshots
    async def hold_lease(self) -> bool:
        """True while this process owns the model (always, on the embedded backend)."""
        if not self.storage.shared:
            if not self.owner:
                await self.take_over(load=not self.state_loaded_with_model)
            return True
        owner = await self.lease.renew(self.owner)
        if owner and self.owner and self.lease.hand_over() and self.may_hand_over():
            await self.hand_over()
            return False
        if owner and not self.owner:
            if await self.deleted():  # (the lease of a new model of the same name)
                await self.storage.release_lease(self.name, self.process_id)
                return False
            await self.take_over(load=True)
        if not owner:
            self.forget_read_ahead()
            self.owner = False
        return owner

    async def take_over(self, *, load: bool) -> None:
        """Became the owner: start from the newest snapshot (``load``; on the embedded
        backend the state loaded with the model is the newest)."""
        if load:
            blob = await self.storage.load_snapshot(self.name)
            if blob is not None:
                self.load(blob)
        self.snapshot_id = self.applied_id
        self.since_snapshot = 0
        self.forget_read_ahead()
        self.owner = True
        self.publish_gauges()
        await self.after_take_over()

    async def hand_over(self) -> None:
        """Snapshot what is applied, then release the lease: the process the model is
        placed on takes over from that snapshot at its next renewal."""
        self.forget_read_ahead()
        async with self.step_lock:
            if self.applied_id != self.snapshot_id and not await self.snapshot():
                return  # lost the lease meanwhile
            await self.lease.release()
            self.owner = False
            self.reader = None
        log.info("model %s handed over to %s", self.name,
                 self.lease.membership.placed(self.name))

    async def snapshot(self) -> bool:
        """Write the state with its log id (atomically, fenced by the lease), then trim the
        log below it. False when the write was refused: this process lost the model."""
        started = time.perf_counter()
        async with renewing(self.storage, self.settings, self.name, self.process_id):
            blob, log_id = await in_background(self.state_blob)  # (seconds at large sizes)
            saved = await save_fenced(self.storage, self.settings, self.name, blob, log_id,
                                      self.process_id, started)
        if not saved:
            self.owner = False  # lost the model meanwhile: the new owner snapshots and trims
            self.reader = None
            return False
        self.snapshot_id = log_id
        self.since_snapshot = 0
        self.last_snapshot_time = time.monotonic()
        return True

    async def restore(self, parsed: Any) -> str | None:
        """Install a restored snapshot (``parsed``, checked by the caller) as of the log's
        current end: entries appended before and not applied yet are superseded, later ones
        are applied; the state is snapshotted at once. Returns the new applied id; raises
        LeaseLost when this process does not own the model (or lost it meanwhile)."""
        if not await self.hold_lease():
            raise LeaseLost("this process does not own the model's fold; retry")
        async with self.step_lock:
            log_end = await self.storage.log_end(self.name)
            self.replace_state(parsed, log_end)
            self.reposition = True
            self.publish_gauges()
            if not await self.snapshot():
                raise LeaseLost("this process lost the model's fold while restoring; retry")
            await self.after_restore()
        return log_end

    async def after_restore(self) -> None:
        """After a restore is installed and snapshotted (under the step lock)."""
