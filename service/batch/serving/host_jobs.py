"""A batch host's retrain jobs and versions: request a retrain, list, read and cancel jobs,
list the stored versions and roll back to one. Mixed into
:class:`~service.batch.serving.host.BatchHost`, whose fields it reads and whose
``status``, ``refresh`` and ``serve`` it calls; it writes none of them.

A job is a stored record (:class:`~service.batch.jobs.Job`) the folding process runs; these
methods only store requests and read records: O(jobs) or O(versions kept) store reads.
"""

from __future__ import annotations

import json
from typing import Any

from service.batch.jobs import Job, JobStatus
from service.batch.serving.candidate import candidate
from service.batch.serving.validation import fit_time_errors
from service.batch.spec import estimate_fit_seconds, split_params
from service.errors import ConflictError, NotFoundError
from service.priority import in_background
from service.storage import id_key


class BatchHostJobs:
    """``retrain``, ``jobs``, ``job``, ``cancel_job``, ``versions`` and ``rollback`` of a
    batch host (module docstring)."""

    async def retrain(self) -> dict[str, Any]:
        storage, settings = self.models.storage, self.models.settings
        log_end = await storage.log_end(self.name)
        status = await self.status()
        if status["train_examples"] < 2 and (
                log_end is None or id_key(log_end) <= id_key(status["applied_id"])):
            raise ConflictError(
                f"model {self.name!r} has {status['train_examples']} training examples "
                f"({status['validation_examples']} held out); a retrain needs at least 2: "
                "post examples first")
        seconds = estimate_fit_seconds(self.spec, split_params(self.spec),
                                       examples=max(2, int(status["train_examples"])))
        if seconds > settings.max_fit_seconds:
            raise ConflictError(
                f"a retrain of model {self.name!r} would take about {seconds:,.0f} s, more "
                f"than the limit of {settings.max_fit_seconds:g} s "
                "(FEATUREBUDGET_MAX_FIT_SECONDS)",
                fit_time_errors("retrain", seconds, settings))
        job = Job.new("request", log_end)
        await storage.save_job(self.name, job.id, job.to_bytes())
        await storage.notify_job(self.name)
        return job.to_dict()

    async def cancel_job(self, job_id: str) -> dict[str, Any]:
        """``DELETE /jobs/{id}``: a queued job is cancelled at once, a running one stops at
        its fit's next progress step (the folding process reads the stored request);
        cancelling a cancelled job answers it again; a finished one: 409."""
        storage = self.models.storage
        job = await self._job(job_id)
        if job.status in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.PUBLISHED):
            raise ConflictError(f"job {job_id!r} of model {self.name!r} already "
                                f"{job.status}; only a queued or running job can be "
                                "cancelled")
        await storage.request_cancel(self.name, job_id)
        if job.status == JobStatus.QUEUED:
            job.finish(JobStatus.CANCELLED)
            await storage.save_job(self.name, job_id, job.to_bytes())
        fold = self.models.fold(self.name)
        if fold is not None:
            fold.cancel(job_id)
        else:
            await storage.notify_job(self.name)
        out = job.to_dict()
        if job.status == JobStatus.RUNNING:
            out["cancel_requested"] = True
        return out

    async def jobs(self) -> list[dict[str, Any]]:
        raw = await self.models.storage.load_jobs(self.name)
        jobs = [Job.from_bytes(v) for v in raw.values()]
        return [j.to_dict() for j in sorted(jobs, key=lambda j: j.created_at, reverse=True)]

    async def job(self, job_id: str) -> dict[str, Any]:
        return (await self._job(job_id)).to_dict()

    async def _job(self, job_id: str) -> Job:
        """The job; "succeeded" only once this process serves its version (a job whose
        version is the store's current one but not served here yet is loaded now, and
        reads "published" if that did not succeed), so a /predict after it never meets an
        older version."""
        storage = self.models.storage
        raw = (await storage.load_jobs(self.name)).get(job_id)
        if raw is None:
            raise NotFoundError(f"model {self.name!r} has no job {job_id!r}")
        job = Job.from_bytes(raw)
        version = job.version
        if job.status == JobStatus.SUCCEEDED and version is not None and (
                self.served is None or self.served.version != version):
            await self.refresh()  # serve the store's current version now
            current = await storage.current_version(self.name)
            if current == version and (self.served is None or self.served.version != version):
                job.status = JobStatus.PUBLISHED
        return job

    async def versions(self) -> dict[str, Any]:
        storage = self.models.storage
        stored = await storage.list_artifacts(self.name)
        current = await storage.current_version(self.name)
        out = []
        for version, raw in sorted(stored.items(), reverse=True):
            meta = json.loads(raw)
            meta["current"] = version == current
            out.append(meta)
        return {"model": self.name, "current": current, "versions": out}

    async def rollback(self, version: int) -> dict[str, Any]:
        """Point the model at a stored ``version``, checked and warmed first
        (:func:`~service.batch.serving.candidate.candidate`): one that cannot answer is
        refused and the pointer stays."""
        storage = self.models.storage
        blob = await storage.load_artifact(self.name, version)
        if blob is None:
            stored = sorted(await storage.list_artifacts(self.name))
            raise ConflictError(f"model {self.name!r} has no version {version} (stored: "
                                f"{stored}); it never existed or was pruned")
        try:
            artifact = await in_background(candidate, blob, self.family, self.layout,
                                           self.name)
        except ValueError as exc:
            raise ConflictError(f"version {version} of model {self.name!r} cannot be served: "
                                f"{exc}") from exc
        if not await storage.set_current_version(self.name, version):
            stored = sorted(await storage.list_artifacts(self.name))
            raise ConflictError(f"model {self.name!r} has no version {version} (stored: "
                                f"{stored}); it never existed or was pruned")
        await self.serve(artifact)
        return {"model": self.name, "current": version}


__all__ = ["BatchHostJobs"]
