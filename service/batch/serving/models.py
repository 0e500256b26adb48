"""The batch models of an API process: hosts that serve versions, the in-process worker
(embedded backend), retrain / version / rollback requests, predictions and snapshots.

Versions reach every API process by notification (Redis pub/sub, or in-process) and by a
check of the current-version pointer every ``version_check_seconds``, whichever comes first.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

import numpy as np

from service import metrics
from service.answers import AnswerPool
from service.batch import artifact as artifacts
from service.batch import requested_sets
from service.batch.jobs import Job, JobStatus, no_version_error
from service.batch.serving import policy_summary
from service.batch.serving.candidate import candidate
from service.batch.serving.host import BatchHost
from service.batch.serving.requests import BudgetedRequest, assemble, parse_next, parse_predict
from service.batch.spec import (
    PART_NAMES,
    estimate_fit_seconds,
    estimate_sizes,
    memory_bytes,
    split_params,
)
from service.batch.worker.fit import check_estimator
from service.batch.worker.fold_worker import BatchWorker
from service.errors import (
    ConflictError,
    InputError,
    NotFoundError,
    item_error,
)
from service.fold_loop import LeaseLost, cancel_and_wait
from service.following import current_snapshot
from service.priority import in_background
from service.schemas import ModelCreate, ModelSpec
from service.snapshot_file import FLAT, SnapshotFormatError, make_snapshot, open_snapshot
from service.storage import Storage, id_key

log = logging.getLogger("featurebudget.batch")


def _shown_groups(spec: ModelCreate) -> list[str]:
    names = [g.name for g in spec.groups]
    return names if len(names) <= 8 else names[:8] + [f"... ({len(names)} groups)"]


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def validate_batch_spec(spec: ModelCreate, settings, room: int | None = None, *,
                        sizes_only: bool = False) -> None:
    """Everything about a batch spec that can be checked before it is stored; InputError
    (422). Sizes (:func:`~service.batch.spec.estimate_sizes`): the parts together must fit
    ``max_model_bytes``, the stored parts (snapshot and kept versions) the backend's
    ``room`` (bytes it can still store; None: no limit known); each part is named with its
    estimate. Time: a retrain's :func:`~service.batch.spec.estimate_fit_seconds` must fit
    ``max_fit_seconds``. Then the estimator's arguments over the layout (O(D): skipped with
    ``sizes_only``), so a model too large is refused from the counts alone, in O(groups)."""
    params = split_params(spec)
    try:
        _check_sizes(spec, params, settings, room)
    except InputError:
        raise
    except Exception:  # arguments the estimates cannot read: the estimator's check says why
        _check_estimator(spec, params)
        raise
    if not sizes_only:
        _check_estimator(spec, params)


def _check_estimator(spec: ModelCreate, params) -> None:
    try:
        from service.batch.spec import BatchLayout

        check_estimator(spec.family, spec.algorithm, spec.task, BatchLayout(spec), params)
    except (TypeError, ValueError) as exc:
        raise item_error(f"{spec.algorithm}: {exc}", field="params") from exc


def _check_sizes(spec: ModelCreate, params, settings, room: int | None) -> None:
    max_bytes = int(settings.max_model_bytes)
    sizes = estimate_sizes(spec, params, versions_kept=settings.versions_kept)
    parts = sizes.parts()
    listed = ", ".join(f"{PART_NAMES[k]} {_mb(v)}" for k, v in parts.items())
    where = f"{spec.algorithm} over {spec.dimension} features in groups {_shown_groups(spec)}"
    errors = [{"field": "groups", "part": k, "bytes": v,
               "message": f"{PART_NAMES[k]}: about {v:,} bytes"} for k, v in parts.items()]
    if sizes.total > max_bytes:
        raise InputError(
            f"{where} needs about {sizes.total:,} bytes ({listed}; {sizes.versions} kept "
            f"versions: FEATUREBUDGET_VERSIONS_KEPT={settings.versions_kept} and the "
            f"current), more than the limit of {max_bytes:,} (FEATUREBUDGET_MAX_MODEL_BYTES)",
            errors)
    if room is not None and sizes.stored_bytes > room:
        raise InputError(
            f"{where} needs about {sizes.stored_bytes:,} bytes of storage (snapshot "
            f"{_mb(sizes.snapshot)}, kept versions {_mb(sizes.versions_kept)}), more than "
            f"the {room:,} bytes the backend can still store", errors)
    seconds = estimate_fit_seconds(spec, params)
    if seconds > settings.max_fit_seconds:
        raise InputError(
            f"{where}: a retrain would take about {seconds:,.0f} s, more than the limit of "
            f"{settings.max_fit_seconds:g} s (FEATUREBUDGET_MAX_FIT_SECONDS); use fewer "
            "features, a smaller window or fewer trees / path steps",
            [{"field": "params", "estimated_seconds": round(seconds, 1),
              "max_fit_seconds": settings.max_fit_seconds,
              "message": f"a retrain takes about {seconds:,.0f} s"}])


class BatchModels:
    """Every batch model of this process, and the routes' calls on one of them."""

    kind = "batch"

    def __init__(self, storage: Storage, settings, process_id: str,
                 answers: AnswerPool | None = None) -> None:
        self.storage = storage
        self.settings = settings
        self.process_id = process_id
        self.answers = answers or AnswerPool(settings.answer_threads, settings.answer_queue)
        self.hosts: dict[str, BatchHost] = {}
        run_worker = settings.batch_worker
        if run_worker is None:
            run_worker = not storage.shared
        self.worker = BatchWorker(storage, settings, process_id) if run_worker else None
        self._tasks: list[asyncio.Task] = []

    async def start(self) -> None:
        if self.worker is not None:  # the folds are added with their hosts
            await self.worker.start(follow=False)
        self._tasks = [asyncio.create_task(self._watch_events()),
                       asyncio.create_task(self._check_versions())]
        if self.storage.shared:  # the fits of other processes read this one's counts
            self._tasks.append(asyncio.create_task(requested_sets.publish_loop(self)))

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)
        if self.worker is not None:
            await self.worker.stop()

    def model_bytes(self, spec: ModelCreate) -> int:
        """The fold state, fit and artifact one model holds in this process (O(1))."""
        return memory_bytes(spec, split_params(spec))

    async def validate(self, request: ModelCreate, check_total) -> None:
        """Everything about a new batch model that can be checked before it is stored
        (:func:`validate_batch_spec`, O(D): off the event loop, then the process's memory
        budget)."""
        room = await self.storage.storage_room(request.name)
        await asyncio.to_thread(validate_batch_spec, request, self.settings, room)
        check_total(request)

    async def answer(self, function, /, *args):
        """``function(*args)`` on the answer pool (:mod:`service.answers`): never on the
        event loop, never more at once than the pool's bound (503 past it)."""
        return await self.answers.run(function, *args)

    async def host(self, spec: ModelSpec) -> BatchHost:
        host = BatchHost(spec, models=self)
        self.hosts[spec.name] = host
        if self.worker is not None and spec.name not in self.worker.folds:
            self.worker.add(spec)
        with contextlib.suppress(Exception):
            await host.refresh(self.storage)
        return host

    async def drop(self, name: str) -> None:
        self.hosts.pop(name, None)
        requested_sets.forget(name)
        if self.worker is not None:
            await self.worker.remove(name)

    async def _watch_events(self) -> None:
        while True:
            try:
                async for model, _version in self.storage.version_events():
                    host = self.hosts.get(model)
                    if host is not None:
                        asyncio.create_task(host.refresh(self.storage))
            except asyncio.CancelledError:
                raise
            except Exception:
                await asyncio.sleep(1.0)  # resubscribe; the periodic check covers the gap

    async def _check_versions(self) -> None:
        while True:
            await asyncio.sleep(self.settings.version_check_seconds)
            for host in list(self.hosts.values()):
                with contextlib.suppress(Exception):
                    await host.refresh(self.storage)

    def fold(self, name: str):
        return None if self.worker is None else self.worker.folds.get(name)

    # ------------------------------------------------------------------ reading
    async def status(self, host: BatchHost) -> dict[str, Any]:
        fold = self.fold(host.name)
        if fold is not None and fold.owner:
            return fold.status()
        raw = await self.storage.load_status(host.name)
        return json.loads(raw) if raw else {"applied_id": None, "examples": 0,
                                            "train_examples": 0, "validation_examples": 0}

    async def describe(self, host: BatchHost) -> dict[str, Any]:
        log_end = await self.storage.log_end(host.name)
        spec, served, status = host.spec, host.served, await self.status(host)
        fold = self.fold(host.name)
        return {
            "name": spec.name, "algorithm": spec.algorithm, "family": spec.family,
            "task": spec.task, "params": spec.params, "created_at": spec.created_at,
            "incarnation": spec.incarnation,
            "groups": [g.model_dump() for g in spec.groups], "n_features": spec.dimension,
            "libsvm_zero_based": spec.libsvm_zero_based,
            "version": None if served is None else served.version,
            "version_created_at": None if served is None else served.info.created_at,
            "trained_through": None if served is None else served.info.trained_through,
            "examples_applied": status["examples"],
            "train_examples": status["train_examples"],
            "validation_examples": status["validation_examples"],
            "log_position": status["applied_id"], "log_end": log_end,
            "owner": bool(fold is not None and fold.owner),
            "serving_error": host.load_error,
            "acquisition": None if served is None else
            policy_summary.describe(served, start=False),
            **({} if served is None or "specialists" not in served.info.metrics
               else {"specialists": served.info.metrics["specialists"]})}

    # ------------------------------------------------------------------ jobs
    async def retrain(self, host: BatchHost) -> dict[str, Any]:
        log_end = await self.storage.log_end(host.name)
        status = await self.status(host)
        if status["train_examples"] < 2 and (
                log_end is None or id_key(log_end) <= id_key(status["applied_id"])):
            raise ConflictError(
                f"model {host.name!r} has {status['train_examples']} training examples "
                f"({status['validation_examples']} held out); a retrain needs at least 2: "
                "post examples first")
        seconds = estimate_fit_seconds(host.spec, split_params(host.spec),
                                       examples=max(2, int(status["train_examples"])))
        if seconds > self.settings.max_fit_seconds:
            raise ConflictError(
                f"a retrain of model {host.name!r} would take about {seconds:,.0f} s, more "
                f"than the limit of {self.settings.max_fit_seconds:g} s "
                "(FEATUREBUDGET_MAX_FIT_SECONDS)",
                [{"field": "retrain", "estimated_seconds": round(seconds, 1),
                  "max_fit_seconds": self.settings.max_fit_seconds,
                  "message": f"a retrain takes about {seconds:,.0f} s"}])
        job = Job.new("request", log_end)
        await self.storage.save_job(host.name, job.id, job.to_bytes())
        await self.storage.notify_job(host.name)
        return job.to_dict()

    async def cancel_job(self, host: BatchHost, job_id: str) -> dict[str, Any]:
        """``DELETE /jobs/{id}``: a queued job is cancelled at once, a running one stops at
        its fit's next progress step (the folding process reads the stored request);
        cancelling a cancelled job answers it again; a finished one: 409."""
        job = await self._job(host, job_id)
        if job.status in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.PUBLISHED):
            raise ConflictError(f"job {job_id!r} of model {host.name!r} already "
                                f"{job.status}; only a queued or running job can be "
                                "cancelled")
        await self.storage.request_cancel(host.name, job_id)
        if job.status == JobStatus.QUEUED:
            job.finish(JobStatus.CANCELLED)
            await self.storage.save_job(host.name, job_id, job.to_bytes())
        fold = self.fold(host.name)
        if fold is not None:
            fold.cancel(job_id)
        else:
            await self.storage.notify_job(host.name)
        out = job.to_dict()
        if job.status == JobStatus.RUNNING:
            out["cancel_requested"] = True
        return out

    async def jobs(self, host: BatchHost) -> list[dict[str, Any]]:
        raw = await self.storage.load_jobs(host.name)
        jobs = [Job.from_bytes(v) for v in raw.values()]
        return [j.to_dict() for j in sorted(jobs, key=lambda j: j.created_at, reverse=True)]

    async def job(self, host: BatchHost, job_id: str) -> dict[str, Any]:
        return (await self._job(host, job_id)).to_dict()

    async def _job(self, host: BatchHost, job_id: str) -> Job:
        """The job; "succeeded" only once this process serves its version (a job whose
        version is the store's current one but not served here yet is loaded now, and
        reads "published" if that did not succeed), so a /predict after it never meets an
        older version."""
        raw = (await self.storage.load_jobs(host.name)).get(job_id)
        if raw is None:
            raise NotFoundError(f"model {host.name!r} has no job {job_id!r}")
        job = Job.from_bytes(raw)
        version = job.version
        if job.status == JobStatus.SUCCEEDED and version is not None and (
                host.served is None or host.served.version != version):
            await host.refresh(self.storage)  # serve the store's current version now
            current = await self.storage.current_version(host.name)
            if current == version and (host.served is None or host.served.version != version):
                job.status = JobStatus.PUBLISHED
        return job

    async def versions(self, host: BatchHost) -> dict[str, Any]:
        stored = await self.storage.list_artifacts(host.name)
        current = await self.storage.current_version(host.name)
        out = []
        for version, raw in sorted(stored.items(), reverse=True):
            meta = json.loads(raw)
            meta["current"] = version == current
            out.append(meta)
        return {"model": host.name, "current": current, "versions": out}

    async def rollback(self, host: BatchHost, version: int) -> dict[str, Any]:
        """Point the model at a stored ``version``, checked and warmed first
        (:func:`~service.batch.serving.candidate.candidate`): one that cannot answer is refused and
        the pointer stays."""
        blob = await self.storage.load_artifact(host.name, version)
        if blob is None:
            stored = sorted(await self.storage.list_artifacts(host.name))
            raise ConflictError(f"model {host.name!r} has no version {version} (stored: "
                                f"{stored}); it never existed or was pruned")
        try:
            artifact = await in_background(candidate, blob, host.family, host.layout,
                                           host.name)
        except ValueError as exc:
            raise ConflictError(f"version {version} of model {host.name!r} cannot be served: "
                                f"{exc}") from exc
        if not await self.storage.set_current_version(host.name, version):
            stored = sorted(await self.storage.list_artifacts(host.name))
            raise ConflictError(f"model {host.name!r} has no version {version} (stored: "
                                f"{stored}); it never existed or was pruned")
        await host.serve(artifact, self.storage)
        return {"model": host.name, "current": version}

    # ------------------------------------------------------------------ predictions
    def served(self, host: BatchHost) -> artifacts.Artifact:
        served = host.served
        if served is None:
            raise no_version_error(host.name, [])
        return served

    async def require_version(self, host: BatchHost) -> None:
        """409 when ``host`` serves no version yet, saying which retrain is under way (or
        why the last one ended): :func:`~service.batch.jobs.no_version_error`."""
        if host.served is None:
            jobs = [Job.from_bytes(raw) for raw in (await self.storage.load_jobs(host.name)
                                                    ).values()]
            raise no_version_error(host.name, jobs)

    def predict(self, host: BatchHost, document: dict) -> dict[str, Any]:
        """``POST /predict`` of a batch model (see :mod:`service.batch.artifact`)."""
        served = self.served(host)  # one version for the whole request
        started = time.perf_counter()
        request = parse_predict(host.layout, host.spec.task, document)
        X, budget = request.batch.X, request.cap  # the adapter takes X as it needs it
        n = len(request.batch)
        sets = request.example_sets(served.budget_set)
        answers: dict[tuple, dict] = {}
        rows_of: dict[tuple, list[int]] = {}
        for row, S in enumerate(sets):
            rows_of.setdefault(tuple(S), []).append(row)
        for key, rows in rows_of.items():
            answers[key] = served.answer(X.to_scipy()[rows] if len(rows) < n else X,
                                         list(key), budget)
        requested_sets.record(host.name, host.spec.incarnation,
                              ((key, len(rows)) for key, rows in rows_of.items()))
        out = assemble(answers, rows_of, n)
        out.update(model=host.name, version=served.version)
        metrics.PREDICT_SECONDS.labels(host.name).observe(time.perf_counter() - started)
        metrics.PREDICTIONS.labels(host.name).inc(n)
        return out

    def next(self, host: BatchHost, document: dict) -> dict[str, Any]:
        """``POST /next``: the per-set next group of ``computed_groups``; with ``examples``
        one answer per example (:mod:`service.batch.serving.acquisition`)."""
        served = self.served(host)
        request = parse_next(host.layout, host.spec.task, document)
        if request.batch is not None:
            return self._next_per_example(host, served, request)
        computed = request.computed
        return {"model": host.name, "version": served.version,
                "computed_groups": [host.layout.group_names[g] for g in computed],
                "cost": host.layout.cost_of(computed),
                "next_group": served.next_group(computed, request.cap)}

    def _next_per_example(self, host: BatchHost, served,
                          request: BudgetedRequest) -> dict[str, Any]:
        """Each example's next group (its computed set: ``computed_groups`` or the groups
        it carries), the stop rule of ``max_cost`` and ``exchange_rate``."""
        from service.batch.serving import acquisition

        layout = host.layout
        dense = request.batch.X.to_scipy().toarray()
        answers = []
        for row, S in enumerate(request.example_sets()):   # (the cap is the stop rule here)
            x = np.full(layout.n_features, np.nan)
            features = layout.features_of(S)
            x[features] = dense[row, features]
            answers.append(acquisition.answer(served, x, S, request.cap,
                                              request.exchange_rate))
        return {"model": host.name, "version": served.version, "answers": answers}

    # ------------------------------------------------------------------ snapshots
    async def export_snapshot(self, host: BatchHost) -> bytes:
        """The fold state (statistics / windows with the log id) + the current version;
        through a process that does not fold the model, the stored snapshot once it
        includes the log as it is now (:func:`~service.following.current_snapshot`)."""
        from algorithms.serialization import dumps_state, loads_state

        fold = self.fold(host.name)
        if fold is not None and fold.owner:
            blob, _ = await asyncio.to_thread(fold.fold_blob)
        else:  # the stored one, once it includes the log as it is now
            blob = await current_snapshot(self.storage, host.name,
                                          self.settings.wait_timeout_seconds)
        if blob is None:  # nothing logged yet: the initial (empty) fold state
            from service.batch.worker.fold_state import BatchFoldState

            blob = dumps_state(BatchFoldState(host.family, host.layout, host.params)
                               .state_dict())
        service: dict[str, Any] = {"model": host.spec.model_dump(mode="json")}
        version = await self.storage.current_version(host.name)
        if version is not None:
            artifact = await self.storage.load_artifact(host.name, version)
            if artifact is not None:
                service["artifact"] = np.frombuffer(artifact, dtype=np.uint8)
        return dumps_state(make_snapshot(open_snapshot(loads_state(blob)).model, service))

    async def restore_snapshot(self, host: BatchHost, blob: bytes) -> dict[str, Any]:
        """Replace the fold state as of the log's current end and publish the snapshot's
        artifact as a new version; everything is checked before anything changes."""
        from algorithms.serialization import StateFormatError, dumps_state, loads_state

        fold = self.fold(host.name)
        if fold is None:
            raise ConflictError("this process does not run the batch worker; import the "
                                "snapshot through `featurebudget serve` on the embedded "
                                "backend or with FEATUREBUDGET_BATCH_WORKER=true")
        try:
            snapshot = open_snapshot(await asyncio.to_thread(loads_state, blob))
        except StateFormatError as exc:
            raise item_error(f"not a valid snapshot: {exc}", field="body") from exc
        except SnapshotFormatError as exc:
            raise item_error(str(exc), field=exc.field) from exc
        unknown = sorted(set(snapshot.service) - {"model", "artifact"})
        if unknown and snapshot.prefix != FLAT:
            raise item_error("not a member of a batch model's snapshot",
                             field=snapshot.field(unknown[0]))
        state, raw_artifact = snapshot.model, snapshot.service.get("artifact")
        from service.batch.worker.fold_state import BatchFoldState

        fresh = BatchFoldState(host.family, host.layout, host.params)
        try:  # every check a route, the warm-up or a retrain makes, before anything changes
            fresh.load_state(state)
            artifact = None
            if raw_artifact is not None:
                if not isinstance(raw_artifact, np.ndarray) or raw_artifact.dtype != np.uint8:
                    raise ValueError(f"{snapshot.field('artifact')} must be a uint8 array")
                artifact = await in_background(candidate, raw_artifact.tobytes(),
                                               host.family, host.layout, host.name)
        except (ValueError, KeyError, TypeError, ArithmeticError) as exc:
            raise InputError(f"snapshot does not fit model {host.name!r}: {exc}",
                             [{"field": "body", "message": str(exc)}]) from exc
        try:
            await fold.restore(fresh)
        except LeaseLost as exc:
            raise ConflictError("another process folds this model; retry") from exc
        if artifact is not None:
            version = await self.storage.next_version(host.name)
            state_blob = loads_state(raw_artifact.tobytes())  # (its meta: as stored, checked)
            meta = dict(state_blob["meta"], version=version, created_at=time.time(),
                        restored_from=artifact.version)
            state_blob["meta"] = meta
            artifact.republished(meta)  # served as it was checked
            await self.storage.publish_artifact(host.name, version, dumps_state(state_blob),
                                                json.dumps(meta).encode())
            await host.serve(artifact, self.storage)
        return {"model": host.name, "examples_applied": fresh.examples,
                "log_position": fresh.applied_id,
                "version": None if host.served is None else host.served.version}


__all__ = ["BatchModels", "validate_batch_spec"]
