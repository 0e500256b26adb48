"""Budgeted answers off the event loop, never more at once than the cores can serve.

A batch model's answer may solve a new computed set or measure it on held-out rows
(milliseconds to seconds at D in the thousands); on the event loop that would stall every
other request, ``/healthz`` and online predictions included. :class:`AnswerPool` runs them on
``FEATUREBUDGET_ANSWER_THREADS`` threads (default: the cores) at the process's normal
priority (answers are latency-critical, unlike the background work of
:mod:`service.priority`), with at most ``FEATUREBUDGET_ANSWER_QUEUE`` more waiting; one
over that is refused at once with 503 and ``Retry-After`` instead of queueing without
bound. Cost per answer: one thread hand-over (tens of microseconds) on top of the work.
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor

from service.errors import UnavailableError


class AnswersBusyError(UnavailableError):
    """Every answer thread is busy and the queue is full: retry in a moment."""

    title = "Too many budgeted answers in flight"
    headers = {"Retry-After": "1"}


class AnswerPool:
    """``threads`` workers and room for ``queue`` waiting calls (module docstring)."""

    def __init__(self, threads: int | None = None, queue: int = 64) -> None:
        self.threads = max(1, int(threads or os.cpu_count() or 1))
        self.limit = self.threads + max(0, int(queue))
        self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="answers")
        self.in_flight = 0  # touched on the event loop only

    async def run(self, function, /, *args):
        """``function(*args)`` on an answer thread; AnswersBusyError when full."""
        if self.in_flight >= self.limit:
            raise AnswersBusyError(f"{self.in_flight} budgeted answers are being computed or "
                                   f"waiting (at most {self.limit}); retry in a second")
        self.in_flight += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, function,
                                                                      *args)
        finally:
            self.in_flight -= 1

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
