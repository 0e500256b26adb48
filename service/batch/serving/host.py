"""A batch model in an API process: its layout, the version it serves, and the routes'
interface (:class:`~service.model_interface.Host`) implemented on it.

The served :class:`~service.batch.artifact.Artifact` is swapped by one reference assignment,
so a request that read ``host.served`` answers from exactly that version while a newer one
is loaded. Swaps are serialized and always load the version the store calls current, so a
process converges on the pointer whatever order notifications arrive in.

:class:`BatchHost` is this module's served version, status and description, composed with
one mixin per other concern of the routes: answers from the served version
(:mod:`~service.batch.serving.host_answers`), retrain jobs and versions
(:mod:`~service.batch.serving.host_jobs`) and snapshots
(:mod:`~service.batch.serving.host_snapshots`). The mixins hold methods only: every field
of a host is written here. What the hosts share (storage, settings, answer pool, the
worker's folds) they reach through their registry, ``models``
(:class:`~service.batch.serving.models.BatchModels`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from service import metrics
from service.batch import artifact as artifacts
from service.batch.jobs import Job, no_version_error
from service.batch.serving import policy_summary
from service.batch.serving.host_answers import BatchHostAnswers
from service.batch.serving.host_jobs import BatchHostJobs
from service.batch.serving.host_snapshots import BatchHostSnapshots
from service.batch.spec import BatchLayout, split_params
from service.batch.worker.ingest import parse_batch_body
from service.errors import ConflictError
from service.model_interface import Host
from service.priority import in_background
from service.schemas import ModelSpec
from service.storage import id_key

log = logging.getLogger("featurebudget.batch")


class BatchHost(BatchHostAnswers, BatchHostJobs, BatchHostSnapshots, Host):
    """One batch model in this process: its layout and served version (module
    docstring)."""

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

    def parse_examples(self, body: bytes, media_type: str):
        return parse_batch_body(body, media_type, self.layout, self.spec.task,
                                zero_based=self.spec.libsvm_zero_based)

    def refuse(self, what: str) -> ConflictError:
        if what == "feedback":
            return ConflictError(f"{self.name!r} is a batch model: post labelled examples to "
                                 f"/v1/models/{self.name}/examples instead of feedback")
        if what == "selected features":
            return ConflictError(f"{self.name!r} is a batch model: its selection is the "
                                 f"sequence (GET /v1/models/{self.name}/sequence)")
        return super().refuse(what)

    # ------------------------------------------------------------ status and description
    async def status(self) -> dict[str, Any]:
        """The fold's counters: this process's fold when it folds the model, else the ones
        the folding process stored."""
        fold = self.models.fold(self.name)
        if fold is not None and fold.owner:
            return fold.status()
        raw = await self.models.storage.load_status(self.name)
        return json.loads(raw) if raw else {"applied_id": None, "examples": 0,
                                            "train_examples": 0, "validation_examples": 0}

    async def describe(self, *, features: bool = True) -> dict[str, Any]:
        log_end = await self.models.storage.log_end(self.name)
        spec, served, status = self.spec, self.served, await self.status()
        fold = self.models.fold(self.name)
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
            "serving_error": self.load_error,
            "acquisition": None if served is None else
            policy_summary.describe(served, start=False),
            **({} if served is None or "specialists" not in served.info.metrics
               else {"specialists": served.info.metrics["specialists"]})}

    # ------------------------------------------------------------ the fold's wait
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

    # ------------------------------------------------------------ the served version
    def served_version(self) -> artifacts.Artifact:
        """The version served now (read once: one version for a whole request); 409 when
        there is none."""
        served = self.served
        if served is None:
            raise no_version_error(self.name, [])
        return served

    async def require_version(self) -> None:
        """409 when this host serves no version yet, saying which retrain is under way (or
        why the last one ended): :func:`~service.batch.jobs.no_version_error`."""
        if self.served is None:
            jobs = [Job.from_bytes(raw) for raw in (
                await self.models.storage.load_jobs(self.name)).values()]
            raise no_version_error(self.name, jobs)

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

    async def serve(self, artifact: artifacts.Artifact) -> None:
        """Serve ``artifact`` (checked and warmed by the caller) if it is the store's current
        version, else whatever is current (:meth:`refresh`)."""
        async with self.swap_lock:
            if await self.models.storage.current_version(self.name) == artifact.version:
                self._swap(artifact)
                return
        await self.refresh()

    async def refresh(self) -> bool:
        """Serve the store's current version if it is not served yet; True on a swap. A
        version that cannot be loaded leaves the served one in place and is reported
        (``serving_error``, ``/readyz``)."""
        storage = self.models.storage
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


__all__ = ["BatchHost"]
