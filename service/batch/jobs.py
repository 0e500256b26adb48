"""Retrain jobs and published versions as types: :class:`Job`, :class:`JobStatus`,
:class:`VersionMeta` (and :class:`~service.fold_loop.LeaseLost`, re-exported: a fold lost its
model before a fenced write, so its job is queued again for the new owner).

A job is stored as one JSON object per job id (``Storage.save_job``); :meth:`Job.to_bytes`
writes exactly the members the API answers, and :meth:`Job.from_bytes` reads what any
version of the service stored (members it does not know are kept, members it lacks take
their defaults).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import time
import typing
import uuid
from typing import Any, Literal

from service.errors import ConflictError
from service.fold_loop import LeaseLost


class JobStatus(enum.StrEnum):
    """Where a job is. ``queued`` -> ``running`` -> ``succeeded`` | ``failed`` |
    ``cancelled``; a running job interrupted by a crash is ``queued`` again.
    ``published`` is never stored: it is how an API process reports a succeeded job whose
    version it does not serve yet."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    PUBLISHED = "published"

    @property
    def finished(self) -> bool:
        return self in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)


_ALWAYS_ANSWERED = frozenset({"id", "status", "trigger", "created_at"})


@dataclasses.dataclass
class Job:
    """One retrain: what asked for it, how far it got, what it published."""

    id: str
    status: JobStatus = JobStatus.QUEUED
    trigger: str = "request"  # "request", "policy" or "fit-statistics"
    created_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    progress: float = 0.0
    examples_used: int | None = None
    validation_examples: int | None = None
    trained_through: str | None = None
    requested_through: str | None = None  # the log's end when the job was requested
    duration_seconds: float | None = None
    error: str | None = None
    version: int | None = None
    attempts: int = 0
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)  # members not known here

    @classmethod
    def new(cls, trigger: str, requested_through: str | None) -> Job:
        return cls(id=uuid.uuid4().hex[:16], trigger=trigger, created_at=time.time(),
                   requested_through=requested_through)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Job:
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        values = {k: v for k, v in raw.items() if k in known}
        values["status"] = JobStatus(values.get("status", "queued"))
        return cls(**values, extra={k: v for k, v in raw.items() if k not in known})

    @classmethod
    def from_bytes(cls, raw: bytes) -> Job:
        return cls.from_dict(json.loads(raw))

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
               if f.name != "extra"}
        out["status"] = str(self.status)
        return {**self.extra, **out}

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_dict()).encode()

    @property
    def finished(self) -> bool:
        return self.status.finished

    @classmethod
    def answer_fields(cls) -> dict[str, tuple[Any, Any]]:
        """The members of a job as the API answers it, in order: name -> (type, default),
        ``...`` for a member every answer has (``id``, ``status``, ``trigger``,
        ``created_at``); ``status`` may also be ``published`` (:class:`JobStatus`), and
        ``cancel_requested`` is added by the API for a running job asked to stop. The API's
        schema (:class:`service.schemas.JobPublic`) is made from this. O(members)."""
        hints = typing.get_type_hints(cls)
        out: dict[str, tuple[Any, Any]] = {}
        for f in dataclasses.fields(cls):
            if f.name == "extra":
                continue
            default = ... if f.name in _ALWAYS_ANSWERED else f.default
            kind = (Literal[tuple(s.value for s in JobStatus)] if f.name == "status"
                    else hints[f.name])
            out[f.name] = (kind, default)
        out["cancel_requested"] = (bool | None, None)
        return out

    def finish(self, status: JobStatus, **changes: Any) -> None:
        """End the job now with ``status`` (and the given members)."""
        self.status = status
        self.finished_at = time.time()
        for name, value in changes.items():
            setattr(self, name, value)


@dataclasses.dataclass
class VersionMeta:
    """What a published version says of itself (stored beside its artifact and inside it).

    A retrain writes every member; :meth:`from_dict` reads what any version of the service
    stored: a member it lacks takes its default here (None; ``task`` "regression"), except
    ``metrics``, which reads None when missing (a version without is refused by its
    family's check), members not known here are kept in ``extra`` (``restored_from``,
    ``published_by``, ...). :meth:`to_dict` writes ``extra`` first, then the members."""

    version: int | None = None  # (stored always: check_meta refuses a version without)
    created_at: float | None = None
    family: str | None = None
    algorithm: str | None = None
    task: str | None = "regression"
    params: dict[str, Any] | None = None
    estimator: str | None = None  # nvsd: "relaxed" or "plain"
    job: str | None = None
    examples_used: int | None = None
    validation_examples: int | None = None
    trained_through: str | None = None
    metrics: dict[str, Any] | None = dataclasses.field(default_factory=dict)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)  # members not known here

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> VersionMeta:
        """The typed view of a stored version's metadata (checked first by
        :func:`service.batch.artifact.check_meta`); O(members)."""
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        return cls(**{"metrics": None, **{k: v for k, v in raw.items() if k in known}},
                   extra={k: v for k, v in raw.items() if k not in known})

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)  # (copies: params and metrics are not shared)
        extra = out.pop("extra")
        return {**extra, **out}

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_dict()).encode()


def no_version_error(model: str, jobs: list[Job]) -> ConflictError:
    """The 409 of a model that serves no version yet, saying what is under way: its first
    retrain queued or running (the job, and how to wait for it), the last one failed or
    cancelled (why), or none requested yet (what to do). O(jobs)."""
    prefix = f"model {model!r} has no published version yet"
    pending = [j for j in jobs if j.status in (JobStatus.QUEUED, JobStatus.RUNNING)]
    if pending:  # the one that publishes first: a running one, else the oldest queued
        job = min(pending, key=lambda j: (j.status != JobStatus.RUNNING, j.created_at))
        done = f", {job.progress:.0%} done" if job.status == JobStatus.RUNNING else ""
        detail = (f"{prefix}: its retrain (job {job.id!r}) is {job.status}{done}; it answers "
                  f"once the job has succeeded: GET /v1/models/{model}/jobs/{job.id} until "
                  f"its status is \"succeeded\" (or: featurebudget retrain {model} --wait)")
        return ConflictError(detail, [{"field": "version", "job": job.id,
                                       "status": str(job.status), "message": detail}])
    last = max(jobs, key=lambda j: j.created_at, default=None)
    if last is not None and last.status in (JobStatus.FAILED, JobStatus.CANCELLED):
        why = f": {last.error}" if last.error else ""
        detail = (f"{prefix}: its last retrain (job {last.id!r}) {last.status}{why}; "
                  f"POST /v1/models/{model}/retrain to try again")
        return ConflictError(detail, [{"field": "version", "job": last.id,
                                       "status": str(last.status), "message": detail}])
    if last is not None and last.status == JobStatus.SUCCEEDED:
        return ConflictError(f"{prefix} in this process: version {last.version} (job "
                             f"{last.id!r}) is published and being loaded; retry in a moment")
    return ConflictError(f"{prefix}: post examples and POST /v1/models/{model}/retrain")


__all__ = ["Job", "JobStatus", "LeaseLost", "VersionMeta", "no_version_error"]
