"""A batch model's retrain jobs, run by the process that folds it (:class:`RetrainJobs`, a
part of :class:`~service.batch.worker.fold_worker.BatchFold`).

Jobs run one at a time in a task of their own (the fold keeps folding meanwhile), woken by a
job notification (Redis pub/sub, or in-process) or a periodic check. A job waits until the
fold has applied the log as far as it was when the job was requested, fits a copy of the
state in a worker thread, and publishes an immutable version (fenced by the lease) that
becomes current; the newest ``versions_kept`` stay. A job found ``running`` when a process
takes a model over was interrupted by a crash and is queued again (three attempts at most).
Jobs come from ``POST /retrain`` or from the retrain policy (every N examples or T seconds
with new examples).

A job whose cancellation was requested (``DELETE /jobs/{id}``: a request stored in the
backend, read with each progress save) stops at the fit's next progress step: the progress
callback raises :class:`JobCancelled` in the fit's thread, the job ends ``cancelled`` and
publishes nothing; a queued one never starts. A fit still running after
``max_fit_seconds`` is stopped the same way and fails; a fold that stops (its model was
deleted, the process shuts down) stops its fit too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time

from service import metrics
from service.batch import artifact as artifacts
from service.batch import requested_sets
from service.batch.families import family_of
from service.batch.jobs import Job, JobStatus, LeaseLost, VersionMeta
from service.batch.worker.fit import FitError, fit
from service.fold_loop import renewing
from service.priority import in_background, yield_to_predictions
from service.storage import id_key

log = logging.getLogger("featurebudget.worker")
MAX_ATTEMPTS = 3
JOBS_KEPT = 100


class JobCancelled(Exception):  # noqa: N818 - a signal, raised by the fit's progress callback
    """Raised in a fit's thread at its next progress step once the job is to stop."""


class RetrainJobs:
    """The jobs half of a batch fold (module docstring). Uses the fold's ``spec``,
    ``layout``, ``params``, ``state`` (under ``lock``), ``storage``, ``settings``,
    ``process_id`` and ``owner``."""

    def init_jobs(self) -> None:
        self.job_task: asyncio.Task | None = None
        self.fit_stop: threading.Event | None = None  # set: the running fit stops
        self.running_job: str | None = None
        self.jobs_loop: asyncio.Task | None = None
        self.jobs_waiting = False  # a queued job waits for the fold to reach its position
        self.wake = asyncio.Event()  # set when a job was requested in this process
        self.last_retrain_examples = 0
        self.last_retrain_time = time.monotonic()

    async def run_jobs(self) -> None:
        """Start queued jobs (one at a time) when woken or every ``job_poll_seconds``."""
        while not self.stopped:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), self.settings.job_poll_seconds)
            self.wake.clear()
            if self.stopped or not self.owner:
                continue
            try:
                await self._jobs_step()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("jobs of model %s: check failed; retrying", self.name)

    async def stop_jobs(self) -> None:
        """Stop the job loop, and a running fit at its next progress step (a job cut short
        is retried by the next owner)."""
        self.wake.set()
        if self.jobs_loop is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self.jobs_loop, 10)
        if self.fit_stop is not None:
            self.fit_stop.set()
        if self.job_task is not None and not self.job_task.done():
            self.job_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.job_task

    def fitting(self) -> bool:
        return self.job_task is not None and not self.job_task.done()

    async def jobs(self) -> dict[str, Job]:
        raw = await self.storage.load_jobs(self.name)
        return {k: Job.from_bytes(v) for k, v in raw.items()}

    async def save_job(self, job: Job) -> None:
        await self.storage.save_job(self.name, job.id, job.to_bytes())

    async def requeue_interrupted(self) -> None:
        """On taking the model over: jobs left ``running`` by a crashed owner are queued
        again (failed after ``MAX_ATTEMPTS``); cancelled ones end."""
        cancels = await self.storage.cancel_requests(self.name)
        for job in (await self.jobs()).values():
            if job.status in (JobStatus.RUNNING, JobStatus.QUEUED) and job.id in cancels:
                job.finish(JobStatus.CANCELLED)
                await self.save_job(job)
            elif job.status == JobStatus.RUNNING:
                job.attempts += 1
                if job.attempts >= MAX_ATTEMPTS:
                    job.finish(JobStatus.FAILED, error=f"interrupted {job.attempts} times "
                                                       "(process crashes)")
                else:
                    job.status, job.progress = JobStatus.QUEUED, 0.0
                await self.save_job(job)

    async def _jobs_step(self) -> None:
        if self.fitting():
            return
        now = time.monotonic()
        jobs = await self.jobs()
        queued = sorted((j for j in jobs.values() if j.status == JobStatus.QUEUED),
                        key=lambda j: j.created_at)
        if queued:  # a queued job whose cancellation was requested never starts
            cancels = await self.storage.cancel_requests(self.name)
            for job in [j for j in queued if j.id in cancels]:
                job.finish(JobStatus.CANCELLED)
                await self.save_job(job)
            queued = [j for j in queued if j.id not in cancels]
        if not queued and self.policy_due(now):
            job = Job.new("policy", self.state.applied_id)
            await self.save_job(job)
            queued = [job]
        applied = id_key(self.state.applied_id)
        self.jobs_waiting = False
        for job in queued:
            if id_key(job.requested_through) <= applied:
                self.job_task = asyncio.create_task(self._run_job(job),
                                                    name=f"retrain:{self.name}")
                self.job_task.add_done_callback(lambda _: self.wake.set())  # next one
                break
            self.jobs_waiting = True
        if len(jobs) > JOBS_KEPT:
            done = sorted((j for j in jobs.values() if j.finished),
                          key=lambda j: j.created_at)
            await self.storage.delete_jobs(self.name,
                                           [j.id for j in done[:len(jobs) - JOBS_KEPT]])

    def policy_due(self, now: float) -> bool:
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

    async def _run_job(self, job: Job) -> None:
        spec = self.spec
        started = time.perf_counter()
        job.status, job.started_at, job.progress, job.error = (JobStatus.RUNNING, time.time(),
                                                               0.0, None)
        await self.save_job(job)
        with self.lock:
            training, validation = self.state.training_copy()
            held_out = self.state.held_out_copy()
            rows = self.state.training_rows_copy()
            through, examples = self.state.applied_id, self.state.examples
        self.last_retrain_examples, self.last_retrain_time = examples, time.monotonic()
        stop = self.fit_stop = threading.Event()
        self.running_job = job.id
        limit = float(self.settings.max_fit_seconds)
        deadline = time.monotonic() + limit
        reason = ["cancelled"]  # why ``stop`` was set: "cancelled" or "deadline"

        def progress(fraction: float) -> None:
            """The fit's progress callback (its thread): stops the fit once asked to, and
            leaves the GIL to predictions in flight."""
            job.progress = round(float(fraction), 4)
            if stop.is_set():
                raise JobCancelled(job.id)
            yield_to_predictions()

        async def cancel_requested() -> bool:
            return job.id in await self.storage.cancel_requests(self.name)

        outcome = "failed"
        try:  # (with the most requested sets, for a family that fits specialists)
            params = await requested_sets.fit_params(self, family_of(spec.family))
            fitting = asyncio.ensure_future(in_background(
                fit, spec.family, spec.algorithm, spec.task, self.layout, params,
                training, validation, progress, rows))
            # (a fit this task no longer waits for, the fold having stopped, still ends)
            fitting.add_done_callback(lambda f: f.cancelled() or f.exception())
            saved = job.progress
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
                if job.progress != saved:
                    saved = job.progress
                    await self.save_job(job)
            model, fit_metrics = fitting.result()
            if (stop.is_set() and reason[0] == "cancelled") or await cancel_requested():
                raise JobCancelled(job.id)  # (a fit with no progress step left to stop at)
            job.examples_used = self.state_count(training)
            job.validation_examples = self.state_count(validation)
            job.trained_through = through
            await self.save_job(job)
            version = await self.storage.next_version(self.name)
            meta = VersionMeta(
                version=version, created_at=time.time(), family=spec.family,
                algorithm=spec.algorithm, task=spec.task, params=spec.params,
                estimator=self.params.estimator, job=job.id,
                examples_used=job.examples_used, validation_examples=job.validation_examples,
                trained_through=through, metrics=fit_metrics).to_dict()
            stats = family_of(spec.family).packed_statistics(validation)
            owner = self.process_id if self.storage.shared else None
            async with renewing(self.storage, self.settings, self.name, self.process_id):
                blob = await in_background(artifacts.pack, model, stats, meta,
                                         artifacts.held_out_for(spec.family, held_out,
                                                                self.layout))
                # the fit's inputs are not needed any more: not held while the version is
                # written and loaded (service.batch.spec.SizeEstimate.fit_peak)
                training = validation = held_out = stats = model = rows = None
                if await cancel_requested():
                    raise JobCancelled(job.id)
                published = await self.storage.publish_artifact(
                    self.name, version, blob, json_bytes(meta), owner=owner)
            blob = None
            if not published:
                raise LeaseLost("this process lost the model's lease before publishing; the "
                                "job is retried by the new owner")
            await self._prune_versions(version)
            job.status, job.version, job.progress = JobStatus.SUCCEEDED, version, 1.0
            outcome = "succeeded"
            metrics.MODEL_VERSION.labels(self.name).set(version)
        except JobCancelled:
            if reason[0] == "deadline":
                job.status = JobStatus.FAILED
                job.error = (f"stopped after {limit:g} s: the fit ran past "
                             "FEATUREBUDGET_MAX_FIT_SECONDS")
            else:
                job.status, job.error = JobStatus.CANCELLED, None
                outcome = "cancelled"
        except LeaseLost as exc:
            job.status, job.error = JobStatus.QUEUED, str(exc)
        except (FitError, ValueError, TypeError, ArithmeticError) as exc:
            job.status, job.error = JobStatus.FAILED, f"{type(exc).__name__}: {exc}"
        except RuntimeError as exc:
            job.status, job.error = JobStatus.FAILED, str(exc)
        except Exception as exc:  # noqa: BLE001 - a failing fit never stops the fold
            log.exception("retrain of model %s failed", self.name)
            job.status, job.error = JobStatus.FAILED, f"{type(exc).__name__}: {exc}"
        finally:
            if self.fit_stop is stop:
                self.fit_stop, self.running_job = None, None
        duration = time.perf_counter() - started
        job.finished_at, job.duration_seconds = time.time(), round(duration, 6)
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


def json_bytes(value) -> bytes:
    return json.dumps(value).encode()
