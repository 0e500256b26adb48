"""Ingestion threads run below the event loop's CPU priority (predictions first)."""

from __future__ import annotations

import asyncio
import os
import sys
import threading

import pytest

from service import priority
from service.fold import parser_pool


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
