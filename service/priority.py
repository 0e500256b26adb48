"""Predictions first: the throughput work of a process runs at a lower CPU priority.

Parsing example bodies and log entries, applying micro-batches, writing the embedded log
and fitting batch models run on threads whose OS scheduling priority is lowered by
``FEATUREBUDGET_BACKGROUND_NICE`` (Linux: per thread, ``setpriority`` on the thread id).
The event loop, which answers predictions, keeps the normal priority: when a request
arrives while ingestion keeps every core busy, the kernel's scheduler runs the loop first.
The kernels release the GIL, and the interpreter's switch interval
(``FEATUREBUDGET_GIL_SWITCH_INTERVAL_MS``) bounds how long the loop waits for it when a
background thread is in Python code; and while predictions are in flight
(:func:`predicting`), background threads nap at their yield points
(:func:`yield_to_predictions`), so that the loop gets the GIL without waiting for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from algorithms.sparse import libsvm

_NICE = 10
_POOL: ThreadPoolExecutor | None = None
_LOCK = threading.Lock()
_PREDICTING = [0]  # predictions being answered now (changed on the event loop only)
_THREAD = threading.local()  # .background: a thread of the background pools
YIELD_STEP_S = 0.0005  # a background thread's nap while predictions are in flight
YIELD_MAX_S = 0.002  # at most this long per yield point: ingestion slows, never stops


def configure(nice: int, switch_interval_ms: float | None = None) -> None:
    """Set the priority step of background threads (before the first one starts) and the
    interpreter's GIL switch interval."""
    global _NICE
    _NICE = int(nice)
    libsvm.set_worker_initializer(lower_priority)  # its parallel parse is ingestion too
    if switch_interval_ms:
        sys.setswitchinterval(switch_interval_ms / 1000)


def lower_priority() -> None:
    """Thread initializer: this thread runs ``nice`` steps below the process (and yields
    the GIL to predictions at its yield points)."""
    _THREAD.background = True
    if _NICE <= 0:
        return
    with contextlib.suppress(OSError, AttributeError):  # not Linux, or not permitted
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + _NICE)


def background_pool() -> ThreadPoolExecutor:
    """The process's background threads (applying, appending, fitting; long fits must not
    hold up the folds: at least 8)."""
    global _POOL
    with _LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max(8, 4 * (os.cpu_count() or 1)),
                                       thread_name_prefix="featurebudget-background",
                                       initializer=lower_priority)
        return _POOL


@contextlib.contextmanager
def predicting():
    """Around a prediction's handling on the event loop: background threads at their yield
    points (:func:`yield_to_predictions`) leave it the GIL meanwhile."""
    _PREDICTING[0] += 1
    try:
        yield
    finally:
        _PREDICTING[0] -= 1


def yield_to_predictions() -> None:
    """Called by background work between two pieces (a chunk of rows applied, a slice of a
    body parsed): while predictions are in flight, nap in steps of ``YIELD_STEP_S`` (the
    GIL free) for at most ``YIELD_MAX_S``. The OS priority (``nice``) decides who gets a
    core; this decides who gets the GIL, which a nice value does not: a background thread
    that holds it in Python code keeps the loop waiting a switch interval each time, and
    waiting longer when the scheduler runs something else meanwhile. O(1) when idle."""
    if not getattr(_THREAD, "background", False):  # the loop, an answer thread: never
        return
    waited = 0.0
    while _PREDICTING[0] > 0 and waited < YIELD_MAX_S:
        time.sleep(YIELD_STEP_S)
        waited += YIELD_STEP_S


async def in_background(function, /, *args, **kwargs):
    """``await asyncio.to_thread(...)`` on a background (lower-priority) thread."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(background_pool(),
                                      functools.partial(function, *args, **kwargs))


# The one rule of what runs on the event loop: work estimated at most LOOP_BUDGET_S of CPU
# runs there (a thread hand-over and back costs about as much while the loop is busy),
# more goes to a thread. Each kind of work's rate on one core, measured by
# `python benchmarks/offload_rates.py` on the 2-core reference machine while it was busy (a
# busy machine is when the loop's time matters; quiet, most run 1.1-3x faster), turns its
# size into seconds (:func:`loop_seconds`).
LOOP_BUDGET_S = 0.001
RATES = {  # units per second of one core
    "parse_json": 10e6,  # bytes of a JSON body of examples parsed (named features: hashed)
    "parse_libsvm": 270e6,  # bytes of a libsvm body of examples parsed and checked
    "parse_bin": 4e9,  # bytes of an FBX1 body of examples decoded and checked
    "create_body": 22e6,  # bytes of a create request's JSON parsed and validated
    "view_decode": 32e6,  # bytes of a serving view decoded and checked (names in it)
    "learner_bytes": 5e9,  # bytes of a new learner's arrays allocated
    "encode_nnz": 780e6,  # non-zeros of a batch encoded for the log (FBX1)
    "append_bytes": 1e9,  # bytes appended to the embedded log
    "scores_nnz": 16e6,  # non-zeros of a batch scored by an online learner or its view
}


def loop_seconds(work: str, amount: float) -> float:
    """Estimated CPU seconds of ``amount`` units of ``work`` (a key of :data:`RATES`)."""
    return amount / RATES[work]


def fits_loop(seconds: float) -> bool:
    """Whether work estimated at ``seconds`` runs on the event loop (:data:`LOOP_BUDGET_S`)."""
    return seconds <= LOOP_BUDGET_S


async def offload(function, /, *args, cost: float, background: bool = True):
    """``function(*args)``: on the event loop when its estimated ``cost`` (seconds,
    :func:`loop_seconds`) fits the loop's budget (:func:`fits_loop`), else on a thread:
    the background pool (lower priority: ingestion, creation) or, with ``background``
    False, the default executor at the process's priority (work a prediction waits for)."""
    if fits_loop(cost):
        return function(*args)
    if background:
        return await in_background(function, *args)
    return await asyncio.to_thread(function, *args)
