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
import uuid
from typing import Any

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

    def finish(self, status: JobStatus, **changes: Any) -> None:
        """End the job now with ``status`` (and the given members)."""
        self.status = status
        self.finished_at = time.time()
        for name, value in changes.items():
            setattr(self, name, value)


@dataclasses.dataclass
class VersionMeta:
    """What a published version says of itself (stored beside its artifact and inside it)."""

    version: int
    created_at: float
    family: str
    algorithm: str
    task: str
    params: dict[str, Any]
    estimator: str | None  # nvsd: "relaxed" or "plain"
    job: str | None
    examples_used: int | None
    validation_examples: int | None
    trained_through: str | None
    metrics: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_dict()).encode()


__all__ = ["Job", "JobStatus", "LeaseLost", "VersionMeta"]
