"""The batch worker: per batch model, fold the log into statistics / windows exactly once,
run retrain jobs, publish versions.

A :class:`BatchFold` is the fold loop of :mod:`service.fold_loop` (lease, reader, snapshots,
hand-over, the end of a deleted model) over a
:class:`~service.batch.worker.fold_state.BatchFoldState`: each read block of entries is parsed in
log order and folded as one :meth:`~service.batch.worker.fold_state.BatchFoldState.apply_entries`
block (malformed entries go to the dead letters); after each block the fold publishes the
applied position and its counters. Its retrain jobs are :mod:`service.batch.worker.retrains`.

``featurebudget worker`` runs a :class:`BatchWorker` against Redis; on the embedded backend
``featurebudget serve`` runs one in-process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from typing import Any

from service import metrics
from service.batch.families import family_of
from service.batch.jobs import Job
from service.batch.spec import BatchLayout, split_params
from service.batch.worker.fold_state import BatchFoldState
from service.batch.worker.ingest import parse_batch_entry
from service.batch.worker.retrains import RetrainJobs
from service.errors import InputError
from service.fold_loop import Fold, cancel_and_wait
from service.following import follow_model_events, follow_snapshot_requests
from service.placement import Membership
from service.schemas import ModelSpec
from service.snapshot_file import make_snapshot, open_snapshot
from service.storage import LogEntry, Storage, id_key

log = logging.getLogger("featurebudget.worker")


def new_job(trigger: str, requested_through: str | None) -> dict[str, Any]:
    """A new queued job, as stored (see :class:`~service.batch.jobs.Job`)."""
    return Job.new(trigger, requested_through).to_dict()


class BatchFold(RetrainJobs, Fold):
    """One batch model's fold and retrains in this process (see the module docstring)."""

    kind = "batch fold"

    def __init__(self, spec: ModelSpec, storage: Storage, settings, process_id: str,
                 membership=None) -> None:
        super().__init__(spec.name, spec.incarnation, storage, settings, process_id,
                         membership)
        self.spec = spec
        self.layout = BatchLayout(spec)
        self.params = split_params(spec)
        self.state = BatchFoldState(spec.family, self.layout, self.params)
        self.lock = threading.Lock()  # held while the state changes or is copied
        self.status_floor = (-1, -1)  # publish counters from this log position on
        self.init_jobs()

    def start(self) -> None:
        super().start()
        self.jobs_loop = asyncio.create_task(self.run_jobs(), name=f"batch-jobs:{self.name}")

    async def stopping(self) -> None:
        await self.stop_jobs()

    # ------------------------------------------------------------------ the fold's hooks
    @property
    def applied_id(self) -> str | None:
        return self.state.applied_id

    def max_read_entries(self) -> int:
        return self.settings.batch_read_max_entries

    def may_hand_over(self) -> bool:
        return not self.fitting()  # never during a fit

    def load(self, blob: bytes) -> None:
        fresh = BatchFoldState(self.spec.family, self.layout, self.params)
        load_fold_blob(fresh, blob)
        with self.lock:
            self.state = fresh

    async def take_over(self, *, load: bool) -> None:
        """Became the owner: start from the newest snapshot (an empty state without one);
        requeue the jobs a crashed owner left running."""
        with self.lock:
            self.state = BatchFoldState(self.spec.family, self.layout, self.params)
        await super().take_over(load=True)

    async def after_take_over(self) -> None:
        """Requeue interrupted jobs. The counters the previous owner published stay until
        this state has replayed as far (API processes describe the model from them: its
        example count never goes back while the log after the snapshot is replayed)."""
        self.last_retrain_examples = self.state.examples
        await self.requeue_interrupted()
        raw = await self.storage.load_status(self.name)
        published = json.loads(raw).get("applied_id") if raw else None
        self.status_floor = id_key(published if isinstance(published, str) else None)
        await self._publish_status()

    def replace_state(self, parsed: BatchFoldState, log_id: str | None) -> None:
        parsed.applied_id = log_id
        with self.lock:
            self.state = parsed

    def apply_block(self, entries: list[LogEntry], work) -> tuple[int, list]:
        return self._apply_entries(entries)

    def _apply_entries(self, entries: list[LogEntry]) -> tuple[int, list]:
        """Worker thread: parse entries in log order and fold them, each exactly once, as
        one block (a malformed entry is skipped and dead-lettered). A read of FBX1 entries
        is parsed as one block (``parse_batch_entries``: no per-entry arrays, so
        one-example entries fold at the rate of bulk ones); any other read, or one with a
        malformed entry, entry by entry."""
        from service.batch.worker.ingest import parse_batch_entries

        try:
            block = parse_batch_entries([entry.fields for entry in entries], self.layout,
                                        self.spec.task)
        except Exception:  # never block the log on the fast path: entry by entry below
            block = None
        if block is not None:
            batch, counts = block
            with self.lock:
                self.state.apply_block([entry.id for entry in entries], counts,
                                       batch.X.to_scipy(), batch.labels)
            return len(batch), []
        n, rejected, parsed = 0, [], []
        for entry in entries:
            try:
                batch = parse_batch_entry(entry.fields, self.layout, self.spec.task,
                                          zero_based=self.spec.libsvm_zero_based)
            except InputError as exc:
                rejected.append((entry, exc.detail))
                continue
            except Exception as exc:  # never block the log on one entry
                rejected.append((entry, f"{type(exc).__name__}: {exc}"))
                continue
            parsed.append((entry.id, batch.X, batch.labels))
            n += len(batch)
        with self.lock:
            self.state.apply_entries(parsed)
            self.state.applied_id = entries[-1].id
        return n, rejected

    async def after_apply(self) -> None:
        if self.storage.shared and self.state.applied_id:
            await self.storage.publish_applied(self.name, self.state.applied_id)
        await self._publish_status()
        if self.jobs_waiting or self.policy_due(time.monotonic()):
            self.wake.set()

    def status(self) -> dict[str, Any]:
        state = self.state
        return {"applied_id": state.applied_id, "examples": state.examples,
                "train_examples": state.train_examples,
                "validation_examples": state.validation_examples,
                "owner": self.process_id, "updated_at": time.time()}

    async def _publish_status(self) -> None:
        status = self.status()
        if id_key(self.state.applied_id) >= self.status_floor:
            await self.storage.save_status(self.name, json.dumps(status).encode())
        gauge = family_of(self.spec.family).gauge()
        gauge.labels(self.name).set(status["train_examples"] + status["validation_examples"])

    def state_blob(self) -> tuple[bytes, str | None]:
        return self.fold_blob()

    def fold_blob(self) -> tuple[bytes, str | None]:
        from algorithms.serialization import dumps_state

        with self.lock:
            state = self.state.state_dict()
            log_id = self.state.applied_id
        snapshot = make_snapshot(state, {"model": self.spec.model_dump(mode="json")})
        return dumps_state(snapshot), log_id


def load_fold_blob(state: BatchFoldState, blob: bytes) -> None:
    """Load a snapshot blob (:mod:`service.snapshot_file`, either layout) into ``state``;
    ValueError when it is not a valid fold state."""
    from algorithms.serialization import StateFormatError, loads_state

    try:
        raw = loads_state(blob)
    except StateFormatError as exc:
        raise ValueError(f"not a valid snapshot: {exc}") from exc
    state.load_state(open_snapshot(raw).model)


class BatchWorker:
    """Every batch model's :class:`BatchFold` in this process."""

    def __init__(self, storage: Storage, settings, process_id: str) -> None:
        self.storage = storage
        self.settings = settings
        self.process_id = process_id
        self.folds: dict[str, BatchFold] = {}
        self._refresh: asyncio.Task | None = None
        self._job_events: asyncio.Task | None = None
        self._model_events: asyncio.Task | None = None
        self._snapshot_requests: asyncio.Task | None = None
        self.membership = Membership(storage, settings, "batch", process_id,
                                     lambda: list(self.folds)) if storage.shared else None

    async def start(self, *, follow: bool) -> None:
        """Fold every stored batch model; with ``follow``, pick up models created or deleted
        by other processes (every 2 s)."""
        await self._sync()
        self._job_events = asyncio.create_task(self._wake_on_jobs())
        if follow:
            self._refresh = asyncio.create_task(self._follow())
            self._model_events = asyncio.create_task(follow_model_events(self.storage,
                                                                         self._sync))
            self._snapshot_requests = asyncio.create_task(follow_snapshot_requests(
                self.storage, self.folds.get))

    async def _wake_on_jobs(self) -> None:
        """Job notifications wake the model's job loop (the periodic check covers gaps)."""
        while True:
            try:
                async for model in self.storage.job_events():
                    fold = self.folds.get(model)
                    if fold is not None:
                        fold.wake.set()
            except asyncio.CancelledError:
                raise
            except Exception:
                await asyncio.sleep(1.0)

    async def _sync(self) -> None:
        stored = {name: ModelSpec.model_validate_json(raw)
                  for name, raw in (await self.storage.load_models()).items()}
        for name, spec in stored.items():
            if not spec.is_batch:
                continue
            fold = self.folds.get(name)
            if fold is not None and fold.incarnation != spec.incarnation:
                await self.remove(name)  # deleted and created again: another model
                fold = None
            if fold is None:
                self.add(spec)
        for name in [n for n in self.folds if n not in stored]:
            await self.remove(name)

    async def _follow(self) -> None:
        while True:
            await asyncio.sleep(2.0)
            with contextlib.suppress(Exception):
                await self._sync()
                if self.membership is not None:
                    await self.membership.refresh()

    def add(self, spec: ModelSpec) -> BatchFold:
        metrics.init_model(spec)  # this process's counters of the model at 0 from now on
        fold = BatchFold(spec, self.storage, self.settings, self.process_id, self.membership)
        self.folds[spec.name] = fold
        fold.start()
        return fold

    async def remove(self, name: str) -> None:
        fold = self.folds.pop(name, None)
        if fold is not None:
            await fold.stop(final_snapshot=False)

    async def stop(self) -> None:
        await cancel_and_wait((self._refresh, self._job_events, self._model_events,
                               self._snapshot_requests))
        await asyncio.gather(*(fold.stop() for fold in self.folds.values()),
                             return_exceptions=True)
        self.folds.clear()
        if self.membership is not None:
            with contextlib.suppress(Exception):
                await self.membership.leave()


__all__ = ["BatchFold", "BatchWorker", "load_fold_blob", "new_job"]
