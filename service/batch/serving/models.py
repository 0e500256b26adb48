"""The registry of an API process's batch models: one :class:`BatchHost` per model (which
answers the routes itself), the in-process worker (embedded backend) and what every host
shares: the storage, the settings and the answer pool.

Versions reach every API process by notification (Redis pub/sub, or in-process) and by a
check of the current-version pointer every ``version_check_seconds``, whichever comes first.
"""

from __future__ import annotations

import asyncio
import contextlib

from service.answers import AnswerPool
from service.batch import requested_sets
from service.batch.serving.host import BatchHost
from service.batch.serving.validation import validate_batch_spec
from service.batch.spec import memory_bytes, split_params
from service.batch.worker.fold_worker import BatchWorker
from service.fold_loop import cancel_and_wait
from service.schemas import ModelCreate, ModelSpec
from service.storage import Storage


class BatchModels:
    """Every batch model of this process (module docstring): hosts by name, their lifecycle
    and the background tasks that keep each serving the store's current version."""

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
        (:func:`~service.batch.serving.validation.validate_batch_spec`, O(D): off the event
        loop, then the process's memory budget)."""
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
            await host.refresh()
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
                        asyncio.create_task(host.refresh())
            except asyncio.CancelledError:
                raise
            except Exception:
                await asyncio.sleep(1.0)  # resubscribe; the periodic check covers the gap

    async def _check_versions(self) -> None:
        while True:
            await asyncio.sleep(self.settings.version_check_seconds)
            for host in list(self.hosts.values()):
                with contextlib.suppress(Exception):
                    await host.refresh()

    def fold(self, name: str):
        """This process's fold of model ``name`` (its worker's), or None."""
        return None if self.worker is None else self.worker.folds.get(name)


__all__ = ["BatchModels"]
