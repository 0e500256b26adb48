"""A batch model in an API process: its layout and the version it serves.

The served :class:`~service.batch.artifact.Artifact` is swapped by one reference assignment,
so a request that read ``host.served`` answers from exactly that version while a newer one
is loaded. Swaps are serialized and always load the version the store calls current, so a
process converges on the pointer whatever order notifications arrive in.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from service import metrics
from service.batch import artifact as artifacts
from service.batch.serving import policy_summary
from service.batch.spec import BatchLayout, split_params
from service.batch.worker.ingest import parse_batch_body
from service.errors import ConflictError
from service.model_interface import Host
from service.priority import in_background
from service.schemas import ModelSpec
from service.storage import id_key

log = logging.getLogger("featurebudget.batch")


class BatchHost(Host):
    """One batch model in this process: its layout and served version; the route-facing
    methods of :class:`~service.model_interface.Host` are calls into ``models``
    (:class:`~service.batch.serving.models.BatchModels`)."""

    kind = "batch"

    def __init__(self, spec: ModelSpec, models=None) -> None:
        self.spec = spec
        self.models = models
        self.layout = BatchLayout(spec)
        self.params = split_params(spec)
        self.served: artifacts.Artifact | None = None
        self.swap_lock = asyncio.Lock()
        self.load_error: str | None = None

    @property
    def family(self) -> str:
        return self.spec.family

    # -------------------------------------------------------------- the routes' interface
    def parse_examples(self, body: bytes, media_type: str):
        return parse_batch_body(body, media_type, self.layout, self.spec.task,
                                zero_based=self.spec.libsvm_zero_based)

    async def predict(self, document: dict, require_write) -> dict[str, Any]:
        await self.models.require_version(self)
        return await self.models.answer(self.models.predict, self, document)

    async def describe(self, *, features: bool = True) -> dict[str, Any]:
        return await self.models.describe(self)

    async def export_snapshot(self) -> bytes:
        return await self.models.export_snapshot(self)

    async def restore_snapshot(self, blob: bytes) -> dict[str, Any]:
        return await self.models.restore_snapshot(self, blob)

    async def applied_through(self, log_id: str) -> bool:
        """Folded into the statistics / windows (a retrain requested after that includes
        it): by this process's fold when it folds the model, else by the position the
        folding process publishes."""
        fold = self.models.fold(self.name)
        if fold is not None and fold.owner:
            return fold.has_applied(log_id)
        return id_key(await self.models.storage.applied_position(self.name)) >= id_key(log_id)

    async def next_change(self, timeout: float) -> None:
        fold = self.models.fold(self.name)
        if fold is not None and fold.owner:
            await fold.next_applied(timeout)
        else:
            await asyncio.sleep(min(timeout, 0.02))

    async def retrain(self) -> dict[str, Any]:
        return await self.models.retrain(self)

    async def jobs(self) -> list[dict[str, Any]]:
        return await self.models.jobs(self)

    async def job(self, job_id: str) -> dict[str, Any]:
        return await self.models.job(self, job_id)

    async def cancel_job(self, job_id: str) -> dict[str, Any]:
        return await self.models.cancel_job(self, job_id)

    async def versions(self) -> dict[str, Any]:
        return await self.models.versions(self)

    async def rollback(self, version: int) -> dict[str, Any]:
        return await self.models.rollback(self, version)

    async def next_group(self, document: dict) -> dict[str, Any]:
        await self.models.require_version(self)
        return await self.models.answer(self.models.next, self, document)

    async def sequence(self) -> dict[str, Any]:
        await self.models.require_version(self)
        return await self.models.answer(self.models.served(self).sequence)

    async def acquisition(self) -> dict[str, Any]:
        """What the served version's per-example policy does (its summary is started if
        nobody has: :mod:`service.batch.serving.policy_summary`)."""
        await self.models.require_version(self)
        return {"model": self.name,
                **policy_summary.describe(self.models.served(self), start=True)}

    def refuse(self, what: str) -> ConflictError:
        if what == "feedback":
            return ConflictError(f"{self.name!r} is a batch model: post labelled examples to "
                                 f"/v1/models/{self.name}/examples instead of feedback")
        if what == "selected features":
            return ConflictError(f"{self.name!r} is a batch model: its selection is the "
                                 f"sequence (GET /v1/models/{self.name}/sequence)")
        return super().refuse(what)

    def _load(self, blob: bytes) -> artifacts.Artifact:
        """A version's blob, checked and warmed (:meth:`Artifact.warm`): its first answers
        cost what later ones do."""
        return artifacts.unpack(blob, self.family, self.layout).warm()

    def _swap(self, artifact: artifacts.Artifact) -> None:
        """Serve ``artifact`` from now on (one reference assignment)."""
        self.served = artifact
        self.load_error = None
        metrics.MODEL_VERSION.labels(self.name).set(artifact.version)
        metrics.SELECTED_FEATURES.labels(self.name).set(  # in the trained sequence's groups
            len(self.layout.features_of(artifact.adapter.order(artifact))))

    async def serve(self, artifact: artifacts.Artifact, storage) -> None:
        """Serve ``artifact`` (checked and warmed by the caller) if it is the store's current
        version, else whatever is current (:meth:`refresh`)."""
        async with self.swap_lock:
            if await storage.current_version(self.name) == artifact.version:
                self._swap(artifact)
                return
        await self.refresh(storage)

    async def refresh(self, storage) -> bool:
        """Serve the store's current version if it is not served yet; True on a swap. A
        version that cannot be loaded leaves the served one in place and is reported
        (``serving_error``, ``/readyz``)."""
        async with self.swap_lock:
            version = await storage.current_version(self.name)
            served = self.served
            if version is None or (served is not None and served.version == version):
                self.load_error = None  # what is current is served
                return False
            blob = await storage.load_artifact(self.name, version)
            if blob is None:
                return False
            try:
                artifact = await in_background(self._load, blob)
            except Exception as exc:  # noqa: BLE001 - any failure keeps the served version
                self.load_error = f"version {version}: {exc}"
                log.error("model %s: cannot load version %s: %s", self.name, version, exc)
                return False
            self._swap(artifact)
            return True
