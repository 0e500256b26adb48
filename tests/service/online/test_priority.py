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


def test_offload_runs_work_within_the_loops_budget_inline_and_more_on_a_thread():
    def where():
        return threading.current_thread(), _nice()

    async def main():
        loop_thread = threading.current_thread()
        budget = priority.LOOP_BUDGET_S
        inline = await priority.offload(where, cost=budget)
        background = await priority.offload(where, cost=budget * 1.01)
        normal = await priority.offload(where, cost=budget * 1.01, background=False)
        return loop_thread, inline, background, normal

    loop_thread, inline, background, normal = asyncio.run(main())
    assert inline[0] is loop_thread
    assert background[0] is not loop_thread and normal[0] is not loop_thread
    assert background[0].name.startswith("featurebudget-background")
    assert not normal[0].name.startswith("featurebudget-background")
    if sys.platform.startswith("linux"):
        assert normal[1] == _nice() and background[1] >= normal[1]


def test_every_rate_of_the_offload_rule_is_measured_by_its_benchmark():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "benchmarks" / "offload_rates.py"
    spec = importlib.util.spec_from_file_location("offload_rates", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert set(module.KINDS) == set(priority.RATES)
    assert priority.loop_seconds("append_bytes", priority.RATES["append_bytes"]) == 1.0
