"""Ingestion threads run below the event loop's CPU priority (predictions first)."""

from __future__ import annotations

import asyncio
import os
import sys
import threading

import pytest

from service import priority
from service.online.fold import parser_pool


def _nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread priority: Linux")
def test_background_and_parser_threads_run_at_a_lower_priority():
    loop_nice = _nice()
    background = asyncio.run(priority.in_background(_nice))
    parser = parser_pool().submit(_nice).result()
    assert background == parser == min(19, loop_nice + 10)
    assert _nice() == loop_nice  # the calling thread keeps its priority


def test_configure_sets_the_switch_interval():
    before = sys.getswitchinterval()
    try:
        priority.configure(10, 0.5)
        assert sys.getswitchinterval() == pytest.approx(0.0005)
    finally:
        sys.setswitchinterval(before)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread priority: Linux")
def test_the_libsvm_parser_threads_run_at_the_background_priority():
    from algorithms.sparse import libsvm

    for pool in libsvm._POOL:  # threads an earlier test started before any configure
        pool.shutdown()
    libsvm._POOL.clear()
    priority.configure(10)  # (what the app does at start-up)
    loop_nice = _nice()
    assert libsvm._pool().submit(_nice).result() == min(19, loop_nice + 10)


def test_background_threads_yield_to_predictions_in_flight_and_nothing_else_waits():
    """A background thread's yield point naps while a prediction is in flight, at most
    YIELD_MAX_S; with none in flight, and on any other thread (the loop, an answer thread),
    it returns at once."""
    import time

    def timed():
        started = time.perf_counter()
        priority.yield_to_predictions()
        return time.perf_counter() - started

    async def main():
        idle = await priority.in_background(timed)
        with priority.predicting():
            busy = await priority.in_background(timed)
            here = timed()  # the event loop's own thread never naps
        return idle, busy, here

    idle, busy, here = asyncio.run(main())
    assert idle < priority.YIELD_STEP_S and here < priority.YIELD_STEP_S
    assert priority.YIELD_MAX_S <= busy < priority.YIELD_MAX_S + 0.05
    assert priority._PREDICTING[0] == 0
