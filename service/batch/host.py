"""A batch model in an API process: its layout and the version it serves.

The served :class:`~service.batch.artifact.Artifact` is swapped by one reference assignment,
so a request that read ``host.served`` answers from exactly that version while a newer one
is loaded. Swaps are serialized and always load the version the store calls current, so a
process converges on the pointer whatever order notifications arrive in.
"""

from __future__ import annotations

import asyncio
import logging

from service import metrics
from service.batch import artifact as artifacts
from service.batch.spec import BatchLayout, split_params
from service.schemas import ModelSpec

log = logging.getLogger("featurebudget.batch")


class BatchHost:
    kind = "batch"

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.layout = BatchLayout(spec)
        self.params = split_params(spec)
        self.served: artifacts.Artifact | None = None
        self.swap_lock = asyncio.Lock()
        self.load_error: str | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def family(self) -> str:
        return self.spec.family

    async def refresh(self, storage) -> bool:
        """Serve the store's current version if it is not served yet; True on a swap."""
        async with self.swap_lock:
            version = await storage.current_version(self.name)
            served = self.served
            if version is None or (served is not None and served.version == version):
                return False
            blob = await storage.load_artifact(self.name, version)
            if blob is None:
                return False
            try:
                artifact = await asyncio.to_thread(artifacts.unpack, blob, self.family,
                                                   self.layout)
            except ValueError as exc:
                self.load_error = f"version {version}: {exc}"
                log.error("model %s: cannot load version %s: %s", self.name, version, exc)
                return False
            self.served = artifact  # the swap: one reference assignment
            self.load_error = None
            metrics.MODEL_VERSION.labels(self.name).set(version)
            metrics.SELECTED_FEATURES.labels(self.name).set(  # in the trained sequence's groups
                len(self.layout.features_of(artifact._order())))
            return True
