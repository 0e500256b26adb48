"""Following the models other processes create and delete (shared backends)."""

from __future__ import annotations

import asyncio

from service.storage import Storage


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
