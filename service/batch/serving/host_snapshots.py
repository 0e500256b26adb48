"""A batch host's snapshots: export the fold state (statistics / windows with the log id)
and the current version as one file, and restore such a file. Mixed into
:class:`~service.batch.serving.host.BatchHost`, whose fields it reads and whose ``serve``
it calls to serve a restored version; it writes none of them.

A restore checks everything (the fold state against the layout, the version as a candidate
to serve) before anything changes; the fold state is replaced as of the log's current end
and the version published as a new one. Both are O(snapshot size).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import numpy as np

from service.batch.serving.candidate import candidate
from service.errors import ConflictError, InputError, item_error
from service.fold_loop import LeaseLost
from service.following import current_snapshot
from service.priority import in_background
from service.snapshot_file import FLAT, SnapshotFormatError, make_snapshot, open_snapshot


class BatchHostSnapshots:
    """``export_snapshot`` and ``restore_snapshot`` of a batch host (module docstring)."""

    async def export_snapshot(self) -> bytes:
        """The fold state (statistics / windows with the log id) + the current version;
        through a process that does not fold the model, the stored snapshot once it
        includes the log as it is now (:func:`~service.following.current_snapshot`)."""
        from algorithms.serialization import dumps_state, loads_state

        storage = self.models.storage
        fold = self.models.fold(self.name)
        if fold is not None and fold.owner:
            blob, _ = await asyncio.to_thread(fold.fold_blob)
        else:  # the stored one, once it includes the log as it is now
            blob = await current_snapshot(storage, self.name,
                                          self.models.settings.wait_timeout_seconds)
        if blob is None:  # nothing logged yet: the initial (empty) fold state
            from service.batch.worker.fold_state import BatchFoldState

            blob = dumps_state(BatchFoldState(self.family, self.layout, self.params)
                               .state_dict())
        service: dict[str, Any] = {"model": self.spec.model_dump(mode="json")}
        version = await storage.current_version(self.name)
        if version is not None:
            artifact = await storage.load_artifact(self.name, version)
            if artifact is not None:
                service["artifact"] = np.frombuffer(artifact, dtype=np.uint8)
        return dumps_state(make_snapshot(open_snapshot(loads_state(blob)).model, service))

    async def restore_snapshot(self, blob: bytes) -> dict[str, Any]:
        """Replace the fold state as of the log's current end and publish the snapshot's
        artifact as a new version; everything is checked before anything changes."""
        from algorithms.serialization import StateFormatError, dumps_state, loads_state

        storage = self.models.storage
        fold = self.models.fold(self.name)
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

        fresh = BatchFoldState(self.family, self.layout, self.params)
        try:  # every check a route, the warm-up or a retrain makes, before anything changes
            fresh.load_state(state)
            artifact = None
            if raw_artifact is not None:
                if not isinstance(raw_artifact, np.ndarray) or raw_artifact.dtype != np.uint8:
                    raise ValueError(f"{snapshot.field('artifact')} must be a uint8 array")
                artifact = await in_background(candidate, raw_artifact.tobytes(),
                                               self.family, self.layout, self.name)
        except (ValueError, KeyError, TypeError, ArithmeticError) as exc:
            raise InputError(f"snapshot does not fit model {self.name!r}: {exc}",
                             [{"field": "body", "message": str(exc)}]) from exc
        try:
            await fold.restore(fresh)
        except LeaseLost as exc:
            raise ConflictError("another process folds this model; retry") from exc
        if artifact is not None:
            version = await storage.next_version(self.name)
            state_blob = loads_state(raw_artifact.tobytes())  # (its meta: as stored, checked)
            meta = dict(state_blob["meta"], version=version, created_at=time.time(),
                        restored_from=artifact.version)
            state_blob["meta"] = meta
            artifact.republished(meta)  # served as it was checked
            await storage.publish_artifact(self.name, version, dumps_state(state_blob),
                                           json.dumps(meta).encode())
            await self.serve(artifact)
        return {"model": self.name, "examples_applied": fresh.examples,
                "log_position": fresh.applied_id,
                "version": None if self.served is None else self.served.version}


__all__ = ["BatchHostSnapshots"]
