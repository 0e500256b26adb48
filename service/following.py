"""Following what other processes do (shared backends): the models they create and delete,
the snapshots they ask of the process that folds a model."""

from __future__ import annotations

import asyncio
import time

from service.errors import UnavailableError
from service.storage import Storage, id_key


async def follow_model_events(storage: Storage, sync) -> None:
    """``await sync()`` after each model created or deleted by any process (the events of
    one burst are followed by one sync); resubscribes after a storage error."""
    while True:
        try:
            async for _ in storage.model_events():
                await asyncio.sleep(0.01)  # let a burst (delete, create) arrive first
                await sync()
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - the periodic check covers the gap
            await asyncio.sleep(1.0)


async def follow_snapshot_requests(storage: Storage, fold_of) -> None:
    """Mark the fold ``fold_of(name)`` (when this process folds that model) to write a
    snapshot at its next step, for each :meth:`~service.storage.Storage.request_snapshot`
    of any process; resubscribes after a storage error."""
    while True:
        try:
            async for name in storage.snapshot_requests():
                fold = fold_of(name)
                if fold is not None and fold.owner:
                    fold.snapshot_requested = True
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a requester waits, then answers 503
            await asyncio.sleep(1.0)


async def current_snapshot(storage: Storage, name: str, timeout: float) -> bytes | None:
    """The stored snapshot of ``name`` once it includes the log as it is now, for a process
    that does not fold the model: when the stored one is older, the folding process is
    asked for one (:func:`follow_snapshot_requests`) and waited for, at most ``timeout``
    seconds; UnavailableError when none came (no process folds the model). None when the
    model has neither a log nor a snapshot (its state is the initial one)."""
    target = id_key(await storage.log_end(name))
    if id_key(await storage.snapshot_position(name)) < target:
        await storage.request_snapshot(name)
        deadline = time.monotonic() + timeout
        while id_key(await storage.snapshot_position(name)) < target:
            if time.monotonic() > deadline:
                raise UnavailableError(
                    f"model {name!r}: the process that folds it wrote no snapshot within "
                    f"{timeout:g} s (is one folding it? GET /readyz says); retry")
            await asyncio.sleep(0.05)
    return await storage.load_snapshot(name)  # (None: nothing logged, nothing folded)
