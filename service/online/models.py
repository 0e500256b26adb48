"""The online models of an API process: the registry of its
:class:`~service.online.host.ModelHost` and :class:`~service.online.fold.ModelFold` per
model, and their lifecycle (sizes and checks before a create, restore, drop, stop).

What the routes ask of a model (predictions, feedback, descriptions, snapshots, waiting for
the fold) is a method of its host (:mod:`service.model_interface`), which reaches the
storage, the settings and its fold through this registry.
"""

from __future__ import annotations

import asyncio
import functools

from algorithms.online import LEARNERS
from service.online.fold import ModelFold
from service.online.host import ModelHost
from service.online.learner import check_learner
from service.priority import loop_seconds, offload
from service.schemas import ModelCreate, ModelSpec
from service.storage import Storage


class OnlineModels:
    """Every online model of this process (module docstring): ``hosts`` and ``folds`` by
    name, and what they share (storage, settings, this process's id, placement)."""

    kind = "online"

    def __init__(self, storage: Storage, settings, process_id: str, placement=None) -> None:
        self.storage = storage
        self.settings = settings
        self.process_id = process_id
        self.placement = placement  # shared backends: which process folds which model
        self.hosts: dict[str, ModelHost] = {}
        self.folds: dict[str, ModelFold] = {}

    def model_bytes(self, spec: ModelCreate) -> int:
        """The learner's state in bytes (O(1): from the declared sizes)."""
        return LEARNERS[spec.algorithm].memory_bytes(n_features=spec.dimension,
                                                     budget=spec.budget)

    async def validate(self, request: ModelCreate, check_total) -> None:
        """Sizes first, then every argument the learner's constructor checks, from the
        parameters alone (:func:`~service.online.learner.check_learner`: O(1), nothing
        allocated); InputError naming the field."""
        if self.model_bytes(request) <= self.settings.max_model_bytes:
            check_total(request)  # (larger: check_learner's 422 names the limit)
        check_learner(request, self.settings.max_model_bytes)

    async def host(self, spec: ModelSpec) -> ModelHost:
        """Restore a model (its snapshot, then its fold replays the log after it);
        InputError when the snapshot cannot be loaded (the model stays out of service).
        A learner whose allocation takes more than the loop's budget is allocated off the
        event loop (:func:`~service.priority.offload`)."""
        build = functools.partial(ModelHost, spec, models=self,
                                  feature_names_max=self.settings.feature_names_max,
                                  chunk_examples=self.settings.apply_chunk_examples)
        # (an unknown algorithm: ModelHost's own error says so, at once)
        size = self.model_bytes(spec) if spec.algorithm in LEARNERS else 0
        host = await offload(build, cost=loop_seconds("learner_bytes", size))
        blob = await self.storage.load_snapshot(spec.name)
        if blob is not None:
            host.load_blob(blob, check_spec=False)
        self.hosts[spec.name] = host
        fold = ModelFold(host, self.storage, self.settings, self.process_id, self.placement)
        self.folds[spec.name] = fold
        fold.publish_gauges()
        fold.start()
        return host

    async def drop(self, name: str) -> None:
        fold = self.folds.pop(name, None)
        self.hosts.pop(name, None)
        if fold is not None:
            await fold.stop(final_snapshot=False)

    async def stop(self) -> None:
        await asyncio.gather(*(fold.stop() for fold in self.folds.values()),
                             return_exceptions=True)
        self.folds.clear()


__all__ = ["OnlineModels"]
