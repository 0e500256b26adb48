"""The batch worker: per batch model, fold the log into statistics / windows exactly once,
run retrain jobs, publish versions.

A :class:`BatchFold` owns one model while it holds the model's lease (the lease of the
online fold, :mod:`service.fold`; always on the embedded backend). It

1. loads the model's snapshot (fold state + id of the last applied entry) and replays the
   log after that id through the consumer group, entries in log order, each read batch
   one :meth:`~service.batch.fold_state.BatchFoldState.apply_entries` block (malformed
   entries go
   to the dead letters); acks; publishes the applied position and the fold's counters;
2. every N examples / T seconds writes a fenced snapshot and trims the log below it;
3. runs retrain jobs one at a time in a task of their own (the fold keeps folding meanwhile),
   woken by a job notification (Redis pub/sub, or in-process) or a periodic check:
   a job waits until the fold has applied the log as far as it was when the job was
   requested, fits a copy of the state in a worker thread, and publishes an immutable
   version (fenced by the lease) that becomes current; the newest ``versions_kept`` stay.
   A job found ``running`` when a process takes a model over was interrupted by a crash and
   is queued again (three attempts at most). Jobs come from ``POST /retrain`` or from the
   retrain policy (every N examples or T seconds with new examples).
4. stops a job whose cancellation was requested (``DELETE /jobs/{id}``: a request stored in
   the backend, read with each progress save) at the fit's next progress step: the progress
   callback raises :class:`JobCancelled` in the fit's thread, the job ends ``cancelled`` and
   publishes nothing; a queued one never starts. A fit still running after
   ``max_fit_seconds`` is stopped the same way and fails; a fold that stops (its model was
   deleted, the process shuts down) stops its fit too.

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
import uuid
from typing import Any

from service import metrics
from service.batch import artifact as artifacts
from service.batch.families import family_of
from service.batch.fit import FitError, fit
from service.batch.fold_state import BatchFoldState
from service.batch.ingest import parse_batch_entry
from service.batch.spec import BatchLayout, split_params
from service.errors import InputError
from service.fold import Lease, log_fold_failure, renewing, report_applied, save_fenced
from service.placement import Membership
from service.priority import in_background
from service.schemas import ModelSpec
from service.storage import LogEntry, Storage, id_key

log = logging.getLogger("featurebudget.worker")
MAX_ATTEMPTS = 3
JOBS_KEPT = 100
FINISHED = ("succeeded", "failed", "cancelled")


class JobCancelled(Exception):  # noqa: N818 - a signal, raised by the fit's progress callback
    """Raised in a fit's thread at its next progress step once the job is to stop."""


def new_job(trigger: str, requested_through: str | None) -> dict[str, Any]:
    return {"id": uuid.uuid4().hex[:16], "status": "queued", "trigger": trigger,
            "created_at": time.time(), "started_at": None, "finished_at": None,
            "progress": 0.0, "examples_used": None, "validation_examples": None,
            "trained_through": None, "requested_through": requested_through,
            "duration_seconds": None, "error": None, "version": None, "attempts": 0}


class BatchFold:
    """One batch model's fold and retrains in this process (see the module docstring)."""

    def __init__(self, spec: ModelSpec, storage: Storage, settings, process_id: str,
                 membership=None) -> None:
        self.spec = spec
        self.layout = BatchLayout(spec)
        self.params = split_params(spec)
        self.storage = storage
        self.settings = settings
        self.process_id = process_id
        self.state = BatchFoldState(spec.family, self.layout, self.params)
        self.lock = threading.Lock()  # held while the state changes or is copied
        self.owner = False
        self.reader = None
        self.snapshot_id: str | None = None
        self.since_snapshot = 0
        self._entry_bytes = 0  # size of the biggest entry of the last read
        self.last_snapshot_time = time.monotonic()
        self.last_retrain_examples = 0
        self.last_retrain_time = time.monotonic()
        self.lease = Lease(storage, settings, spec.name, process_id, membership)
        self.job_task: asyncio.Task | None = None
        self.fit_stop: threading.Event | None = None  # set: the running fit stops
        self.running_job: str | None = None
        self.task: asyncio.Task | None = None
        self.jobs_loop: asyncio.Task | None = None
        self.jobs_waiting = False  # a queued job waits for the fold to reach its position
        self._stop = asyncio.Event()
        self._applied = asyncio.Event()
        self.wake = asyncio.Event()  # set when a job was requested in this process

    @property
    def name(self) -> str:
        return self.spec.name

    def start(self) -> None:
        self.task = asyncio.create_task(self.run(), name=f"batch-fold:{self.name}")
        self.jobs_loop = asyncio.create_task(self.run_jobs(), name=f"batch-jobs:{self.name}")

    async def stop(self, *, final_snapshot: bool = True) -> None:
        self._stop.set()
        self.wake.set()
        for task in (self.task, self.jobs_loop):
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.wait_for(task, 10)
        if self.fit_stop is not None:  # the fit's thread stops at its next progress step
            self.fit_stop.set()
        if self.job_task is not None and not self.job_task.done():
            self.job_task.cancel()  # a job cut short is retried by the next owner
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.job_task
        if final_snapshot and self.owner and self.state.applied_id != self.snapshot_id:
            with contextlib.suppress(Exception):
                await self.snapshot()
        if self.owner and self.storage.shared:
            with contextlib.suppress(Exception):
                await self.storage.release_lease(self.name, self.process_id)
        self.owner = False

    async def run(self) -> None:
        while not self._stop.is_set():
            try:
                await self._step()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # keep folding after transient storage errors
                if await self._deleted():
                    return
                log_fold_failure("batch fold", self.name, exc)
                self.reader = None
                await asyncio.sleep(1.0)

    async def _deleted(self) -> bool:
        """Whether the model was deleted meanwhile (then this fold ends, and never creates
        its stream again)."""
        with contextlib.suppress(Exception):
            if self.name not in await self.storage.load_models():
                self._stop.set()
                self.owner = False
                return True
        return False

    async def run_jobs(self) -> None:
        """Start queued jobs (one at a time) when woken or every ``job_poll_seconds``."""
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), self.settings.job_poll_seconds)
            self.wake.clear()
            if self._stop.is_set() or not self.owner:
                continue
            try:
                await self._jobs_step()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("jobs of model %s: check failed; retrying", self.name)

    # ------------------------------------------------------------------ fold
    async def hold_lease(self) -> bool:
        if not self.storage.shared:
            if not self.owner:
                await self._take_over()
            return True
        owner = await self.lease.renew(self.owner)
        if owner and self.owner and self.lease.hand_over() and (
                self.job_task is None or self.job_task.done()):  # (never during a fit)
            if self.state.applied_id == self.snapshot_id or await self.snapshot():
                await self.lease.release()  # the process it is placed on takes it over
                self.owner = False
                self.reader = None
                log.info("batch model %s handed over to %s", self.name,
                         self.lease.membership.placed(self.name))
            return False
        if owner and not self.owner:
            await self._take_over()
        if not owner:
            self.reader = None
            self.owner = False
        return owner

    async def _take_over(self) -> None:
        """Became the owner: start from the newest snapshot; requeue interrupted jobs."""
        blob = await self.storage.load_snapshot(self.name)
        fresh = BatchFoldState(self.spec.family, self.layout, self.params)
        if blob is not None:
            load_fold_blob(fresh, blob)
        with self.lock:
            self.state = fresh
        self.snapshot_id = fresh.applied_id
        self.last_retrain_examples = fresh.examples
        self.reader = None
        self.owner = True
        cancels = await self.storage.cancel_requests(self.name)
        for job in (await self.jobs()).values():
            if job["status"] in ("running", "queued") and job["id"] in cancels:
                job.update(status="cancelled", finished_at=time.time())
                await self.save_job(job)
            elif job["status"] == "running":
                job["attempts"] += 1
                if job["attempts"] >= MAX_ATTEMPTS:
                    job.update(status="failed", finished_at=time.time(),
                               error=f"interrupted {job['attempts']} times (process crashes)")
                else:
                    job.update(status="queued", progress=0.0)
                await self.save_job(job)
        await self._publish_status()

    async def _step(self) -> None:
        settings = self.settings
        if not await self.hold_lease():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), settings.lease_seconds / 3)
            return
        if self.reader is None:
            self.reader = self.storage.reader(self.name, self.process_id)
            await self.reader.start(self.state.applied_id)
            await self.reader.reclaim(self.state.applied_id)
        count = settings.batch_read_max_entries
        if self._entry_bytes:  # bound a block's bytes too
            count = max(1, min(count, settings.microbatch_max_bytes // self._entry_bytes))
        entries = await self.reader.read(count, settings.consumer_block_ms)
        if entries:
            self._entry_bytes = max(sum(len(v) for v in e.fields.values()) for e in entries)
            await self._apply(entries)
        if self.since_snapshot >= settings.snapshot_every_examples or (
                self.state.applied_id != self.snapshot_id and
                time.monotonic() - self.last_snapshot_time >= settings.snapshot_every_seconds):
            await self.snapshot()

    async def _apply(self, entries: list[LogEntry]) -> None:
        started = time.perf_counter()
        applied = id_key(self.state.applied_id)
        fresh = [e for e in entries if id_key(e.id) > applied]
        if fresh:
            n, rejected = await in_background(self._apply_entries, fresh)
            await report_applied(self.storage, self.name, n, rejected, started)
            if (added := self.storage.id_time(fresh[-1].id)) is not None:  # ids with a time
                metrics.LEARNER_LAG.labels(self.name).set(max(0.0, time.time() - added))
        await self.reader.ack([e.id for e in entries])
        if self.storage.shared and self.state.applied_id:
            await self.storage.publish_applied(self.name, self.state.applied_id)
        await self._publish_status()
        event, self._applied = self._applied, asyncio.Event()
        event.set()
        if self.jobs_waiting or self._policy_due(time.monotonic()):
            self.wake.set()

    def _apply_entries(self, entries: list[LogEntry]) -> tuple[int, list]:
        """Worker thread: parse entries in log order and fold them, each exactly once, as
        one block (a malformed entry is skipped and dead-lettered)."""
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
        self.since_snapshot += n
        return n, rejected

    async def wait_applied(self, log_id: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while id_key(self.state.applied_id) < id_key(log_id):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._applied.wait(), min(remaining, 0.5))
        return True

    def status(self) -> dict[str, Any]:
        state = self.state
        return {"applied_id": state.applied_id, "examples": state.examples,
                "train_examples": state.train_examples,
                "validation_examples": state.validation_examples,
                "owner": self.process_id, "updated_at": time.time()}

    async def _publish_status(self) -> None:
        status = self.status()
        await self.storage.save_status(self.name, json.dumps(status).encode())
        gauge = family_of(self.spec.family).gauge()
        gauge.labels(self.name).set(status["train_examples"] + status["validation_examples"])

    async def snapshot(self) -> bool:
        started = time.perf_counter()
        async with renewing(self.storage, self.settings, self.name, self.process_id):
            blob, log_id = await asyncio.to_thread(self.fold_blob)  # (seconds at large D)
            saved = await save_fenced(self.storage, self.settings, self.name, blob, log_id,
                                      self.process_id, started)
        if not saved:
            self.owner = False
            self.reader = None
            return False
        self.snapshot_id = log_id
        self.since_snapshot = 0
        self.last_snapshot_time = time.monotonic()
        return True

    def fold_blob(self) -> tuple[bytes, str | None]:
        from algorithms.serialization import dumps_state

        with self.lock:
            state = self.state.state_dict()
            log_id = self.state.applied_id
        state["svc_model"] = self.spec.model_dump(mode="json")
        return dumps_state(state), log_id

    # ------------------------------------------------------------------ jobs
    async def jobs(self) -> dict[str, dict]:
        raw = await self.storage.load_jobs(self.name)
        return {k: json.loads(v) for k, v in raw.items()}

    async def save_job(self, job: dict) -> None:
        await self.storage.save_job(self.name, job["id"], json.dumps(job).encode())

    async def _jobs_step(self) -> None:
        if self.job_task is not None and not self.job_task.done():
            return
        now = time.monotonic()
        jobs = await self.jobs()
        queued = sorted((j for j in jobs.values() if j["status"] == "queued"),
                        key=lambda j: j["created_at"])
        if queued:  # a queued job whose cancellation was requested never starts
            cancels = await self.storage.cancel_requests(self.name)
            for job in [j for j in queued if j["id"] in cancels]:
                job.update(status="cancelled", finished_at=time.time())
                await self.save_job(job)
            queued = [j for j in queued if j["id"] not in cancels]
        if not queued and self._policy_due(now):
            job = new_job("policy", self.state.applied_id)
            await self.save_job(job)
            queued = [job]
        applied = id_key(self.state.applied_id)
        self.jobs_waiting = False
        for job in queued:
            if id_key(job.get("requested_through")) <= applied:
                self.job_task = asyncio.create_task(self._run_job(job),
                                                    name=f"retrain:{self.name}")
                self.job_task.add_done_callback(lambda _: self.wake.set())  # next one
                break
            self.jobs_waiting = True
        if len(jobs) > JOBS_KEPT:
            done = sorted((j for j in jobs.values() if j["status"] in FINISHED),
                          key=lambda j: j["created_at"])
            await self.storage.delete_jobs(self.name,
                                           [j["id"] for j in done[:len(jobs) - JOBS_KEPT]])

    def _policy_due(self, now: float) -> bool:
        new = self.state.examples - self.last_retrain_examples
        if new <= 0 or self.state.train_examples < 2:
            return False
        every_n, every_s = self.params.retrain_every_examples, self.params.retrain_every_seconds
        return bool((every_n is not None and new >= every_n) or
                    (every_s is not None and now - self.last_retrain_time >= every_s))

    def cancel(self, job_id: str) -> None:
        """Stop job ``job_id`` at its fit's next progress step if it runs here (the request
        is stored too: :meth:`_run_job` reads it with each progress save)."""
        if self.running_job == job_id and self.fit_stop is not None:
            self.fit_stop.set()
        self.wake.set()

    async def _run_job(self, job: dict) -> None:
        spec = self.spec
        started = time.perf_counter()
        job.update(status="running", started_at=time.time(), progress=0.0, error=None)
        await self.save_job(job)
        with self.lock:
            training, validation = self.state.training_copy()
            held_out = self.state.held_out_copy()
            through, examples = self.state.applied_id, self.state.examples
        self.last_retrain_examples, self.last_retrain_time = examples, time.monotonic()
        stop = self.fit_stop = threading.Event()
        self.running_job = job["id"]
        limit = float(self.settings.max_fit_seconds)
        deadline = time.monotonic() + limit
        reason = ["cancelled"]  # why ``stop`` was set: "cancelled" or "deadline"

        def progress(fraction: float) -> None:
            """The fit's progress callback (its thread): stops the fit once asked to."""
            job["progress"] = round(float(fraction), 4)
            if stop.is_set():
                raise JobCancelled(job["id"])

        async def cancel_requested() -> bool:
            return job["id"] in await self.storage.cancel_requests(self.name)

        outcome = "failed"
        try:
            fitting = asyncio.ensure_future(in_background(
                fit, spec.family, spec.algorithm, spec.task, self.layout, self.params,
                training, validation, progress))
            # (a fit this task no longer waits for, the fold having stopped, still ends)
            fitting.add_done_callback(lambda f: f.cancelled() or f.exception())
            saved = job["progress"]
            while not fitting.done():  # publish the progress while the fit runs
                await asyncio.wait({fitting}, timeout=self.settings.job_progress_seconds)
                if fitting.done():
                    break
                if not stop.is_set():
                    if time.monotonic() > deadline:
                        reason[0] = "deadline"
                        stop.set()
                    elif await cancel_requested():
                        stop.set()
                if job["progress"] != saved:
                    saved = job["progress"]
                    await self.save_job(job)
            model, fit_metrics = fitting.result()
            if (stop.is_set() and reason[0] == "cancelled") or await cancel_requested():
                raise JobCancelled(job["id"])  # (a fit with no progress step left to stop at)
            job.update(examples_used=self.state_count(training),
                       validation_examples=self.state_count(validation),
                       trained_through=through)
            await self.save_job(job)
            version = await self.storage.next_version(self.name)
            meta = {"version": version, "created_at": time.time(), "family": spec.family,
                    "algorithm": spec.algorithm, "task": spec.task, "params": spec.params,
                    "estimator": self.params.estimator, "job": job["id"],
                    "examples_used": job["examples_used"],
                    "validation_examples": job["validation_examples"],
                    "trained_through": through, "metrics": fit_metrics}
            stats = family_of(spec.family).packed_statistics(validation)
            owner = self.process_id if self.storage.shared else None
            async with renewing(self.storage, self.settings, self.name, self.process_id):
                blob = await asyncio.to_thread(artifacts.pack, model, stats, meta,
                                               artifacts.held_out_for(spec.family, held_out))
                # the fit's inputs are not needed any more: not held while the version is
                # written and loaded (service.batch.spec.SizeEstimate.fit_peak)
                training = validation = held_out = stats = model = None
                if await cancel_requested():
                    raise JobCancelled(job["id"])
                published = await self.storage.publish_artifact(
                    self.name, version, blob, json.dumps(meta).encode(), owner=owner)
            blob = None
            if not published:
                raise RuntimeError("this process lost the model's lease before publishing; "
                                   "the job is retried by the new owner")
            await self._prune_versions(version)
            job.update(status="succeeded", version=version, progress=1.0)
            outcome = "succeeded"
            metrics.MODEL_VERSION.labels(self.name).set(version)
        except JobCancelled:
            if reason[0] == "deadline":
                job.update(status="failed", error=f"stopped after {limit:g} s: the fit ran "
                           "past FEATUREBUDGET_MAX_FIT_SECONDS")
            else:
                job.update(status="cancelled", error=None)
                outcome = "cancelled"
        except (FitError, ValueError, TypeError, ArithmeticError) as exc:
            job.update(status="failed", error=f"{type(exc).__name__}: {exc}")
        except RuntimeError as exc:
            job.update(status="queued" if "lease" in str(exc) else "failed", error=str(exc))
        except Exception as exc:  # noqa: BLE001 - a failing fit never stops the fold
            log.exception("retrain of model %s failed", self.name)
            job.update(status="failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            if self.fit_stop is stop:
                self.fit_stop, self.running_job = None, None
        duration = time.perf_counter() - started
        job.update(finished_at=time.time(), duration_seconds=round(duration, 6))
        metrics.RETRAINS.labels(self.name, spec.algorithm, outcome).inc()
        metrics.RETRAIN_SECONDS.labels(self.name).observe(duration)
        with contextlib.suppress(Exception):
            await self.save_job(job)

    def state_count(self, part) -> int:
        if part is None:
            return 0
        return family_of(self.spec.family).examples_in(part)

    async def _prune_versions(self, newest: int) -> None:
        keep = self.settings.versions_kept
        stored = sorted(await self.storage.list_artifacts(self.name))
        current = await self.storage.current_version(self.name)
        old = [v for v in stored[:-keep] if v != current and v != newest] if keep else []
        await self.storage.delete_artifacts(self.name, old)


def load_fold_blob(state: BatchFoldState, blob: bytes) -> None:
    """Load a snapshot blob into ``state``; ValueError when it is not a valid fold state."""
    from algorithms.serialization import StateFormatError, loads_state

    try:
        raw = loads_state(blob)
    except StateFormatError as exc:
        raise ValueError(f"not a valid snapshot: {exc}") from exc
    raw.pop("svc_model", None)
    state.load_state(raw)


class BatchWorker:
    """Every batch model's :class:`BatchFold` in this process."""

    def __init__(self, storage: Storage, settings, process_id: str) -> None:
        self.storage = storage
        self.settings = settings
        self.process_id = process_id
        self.folds: dict[str, BatchFold] = {}
        self._refresh: asyncio.Task | None = None
        self._job_events: asyncio.Task | None = None
        self.membership = Membership(storage, settings, "batch", process_id,
                                     lambda: list(self.folds)) if storage.shared else None

    async def start(self, *, follow: bool) -> None:
        """Fold every stored batch model; with ``follow``, pick up models created or deleted
        by other processes (every 2 s)."""
        await self._sync()
        self._job_events = asyncio.create_task(self._wake_on_jobs())
        if follow:
            self._refresh = asyncio.create_task(self._follow())

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
            if spec.is_batch and name not in self.folds:
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
        for task in (self._refresh, self._job_events):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        await asyncio.gather(*(fold.stop() for fold in self.folds.values()),
                             return_exceptions=True)
        self.folds.clear()
        if self.membership is not None:
            with contextlib.suppress(Exception):
                await self.membership.leave()
