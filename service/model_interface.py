"""The one interface the routes call on a model, whatever its kind.

An online model (:class:`service.online.host.ModelHost`) learns every example as it is folded; a
batch model (:class:`service.batch.serving.host.BatchHost`) folds statistics and serves versions
its retrains publish. Both are a :class:`Host`: the routes parse examples, predict,
describe, export and restore snapshots and wait for the fold through these methods, never
by testing the model's type. What only one kind can do (feedback on an online model's
prediction, retrains and versions of a batch model) is a method of every host too: the
other kind answers it with a 409 that says what to do instead (:meth:`Host.refuse`).

A host keeps its kind's registry (``models``: the process's
:class:`service.online.models.OnlineModels` or
:class:`service.batch.serving.models.BatchModels`), which holds the storage, the settings
and the fold; a host's methods are its own, reaching those through it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from service.errors import ConflictError, WaitTimeoutError
from service.schemas import ModelSpec

WriteCheck = Callable[[], Awaitable[None]]  # raises 401 / 403 unless the caller may write


class Host:
    """One model in an API process (module docstring). Subclasses set ``kind`` and
    implement the first group of methods; the second group is refused by default."""

    kind: ClassVar[str]
    spec: ModelSpec
    models: Any = None  # the kind's registry: OnlineModels or BatchModels

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def incarnation(self) -> str:
        """Which model of this name the host serves: a new id at every creation, so a
        model deleted and created again under the same name is never taken for the old
        one ("" for a model stored before incarnations)."""
        return self.spec.incarnation

    # ------------------------------------------------------------ every kind
    def parse_examples(self, body: bytes, media_type: str):
        """``(ExampleBatch, format)`` from a request body, validated against the model's
        layout; InputError otherwise. CPU-bound (large bodies: call it off the loop)."""
        raise NotImplementedError

    async def predict(self, document: dict, require_write: WriteCheck) -> dict[str, Any]:
        """The ``POST /predict`` answer for a JSON body already parsed into ``document``."""
        raise NotImplementedError

    async def describe(self, *, features: bool = True) -> dict[str, Any]:
        """The public description (``GET /v1/models/{m}``)."""
        raise NotImplementedError

    async def export_snapshot(self) -> bytes:
        """The model's state as a snapshot file (``GET /snapshot``)."""
        raise NotImplementedError

    async def restore_snapshot(self, blob: bytes) -> dict[str, Any]:
        """Replace the state with a snapshot's, as of the log's current end; everything is
        checked before anything changes (``PUT /snapshot``)."""
        raise NotImplementedError

    async def wait_applied(self, log_id: str) -> None:
        """Until ``log_id`` is applied and answers include it (read-your-writes);
        WaitTimeoutError after ``wait_timeout_seconds``, naming why (who folds the model).
        The one wait of both kinds: each says when the entry is in (``applied_through``)
        and how to wait for the next change (``next_change``)."""
        settings = self.models.settings
        timeout = settings.wait_timeout_seconds
        deadline = time.monotonic() + timeout
        while not await self.applied_through(log_id):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                from service.fold_cause import not_applied  # (the cause: who folds it)

                raise WaitTimeoutError(await not_applied(self.models.storage, settings,
                                                         self.name, self.kind, log_id,
                                                         timeout))
            await self.next_change(remaining)

    async def applied_through(self, log_id: str) -> bool:
        """Whether ``log_id`` is applied and the answers of every process include it."""
        raise NotImplementedError

    async def next_change(self, timeout: float) -> None:
        """Until what ``applied_through`` reads may have changed, at most ``timeout``."""
        raise NotImplementedError

    # ------------------------------------------------------------ one kind only
    def refuse(self, what: str) -> ConflictError:
        """The 409 for ``what`` this kind of model cannot do (the subclass says why)."""
        return ConflictError(f"{self.name!r} is a {self.kind} model: {what} is not "
                             "available")

    async def feedback(self, prediction_id: str, label: int) -> dict | None:
        raise self.refuse("feedback")

    async def selected_features(self) -> list[dict]:
        raise self.refuse("selected features")

    async def retrain(self) -> dict[str, Any]:
        raise self.refuse("retrain")

    async def jobs(self) -> list[dict[str, Any]]:
        raise self.refuse("jobs")

    async def job(self, job_id: str) -> dict[str, Any]:
        raise self.refuse("jobs")

    async def cancel_job(self, job_id: str) -> dict[str, Any]:
        raise self.refuse("jobs")

    async def versions(self) -> dict[str, Any]:
        raise self.refuse("versions")

    async def rollback(self, version: int) -> dict[str, Any]:
        raise self.refuse("rollback")

    async def next_group(self, document: dict) -> dict[str, Any]:
        raise self.refuse("next")

    async def sequence(self) -> list[dict[str, Any]]:
        raise self.refuse("sequence")

    async def acquisition(self) -> dict[str, Any]:
        raise self.refuse("acquisition")
