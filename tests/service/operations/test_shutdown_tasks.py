"""A shutdown never waits on a task that ignores its cancellation (service/fold_loop.py
``cancel_and_wait``): the manager, the batch models and the batch worker stop their
background tasks through it."""

from __future__ import annotations

import asyncio
import time

from service.fold_loop import cancel_and_wait


def test_cancelled_tasks_are_awaited_but_one_that_ignores_it_is_left_after_the_timeout():
    ended = []

    async def polite():
        try:
            await asyncio.sleep(60)
        finally:
            ended.append("polite")

    async def stubborn(gate):  # swallows its cancellation (as a client library might)
        while not gate.is_set():
            try:
                await gate.wait()
            except asyncio.CancelledError:
                continue

    async def failing():
        raise ValueError("already failed")

    async def main():
        gate = asyncio.Event()
        tasks = [asyncio.create_task(polite()), asyncio.create_task(stubborn(gate)),
                 asyncio.create_task(failing()), None]
        await asyncio.sleep(0)
        started = time.monotonic()
        await cancel_and_wait(tasks, timeout=0.3)
        waited = time.monotonic() - started
        assert tasks[0].cancelled() and not tasks[1].done()
        gate.set()  # (the test's own clean-up: the task was left running)
        await tasks[1]
        return waited

    waited = asyncio.run(asyncio.wait_for(main(), 10))
    assert ended == ["polite"]
    assert 0.25 <= waited < 2.0
