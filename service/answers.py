"""Budgeted answers off the event loop, never more at once than the cores can serve.

A batch model's answer may solve a new computed set or measure it on held-out rows
(milliseconds to seconds at D in the thousands); on the event loop that would stall every
other request, ``/healthz`` and online predictions included. :class:`AnswerPool` runs them on
``FEATUREBUDGET_ANSWER_THREADS`` threads (default: the cores) at the process's normal
priority (answers are latency-critical, unlike the background work of
:mod:`service.priority`), with at most ``FEATUREBUDGET_ANSWER_QUEUE`` more waiting; one
over that is refused at once with 503 and ``Retry-After`` instead of queueing without
bound. Cost per answer: one thread hand-over (tens of microseconds, but under load the
hand-back waits for the GIL, up to the 0.5 ms switch interval of
``FEATUREBUDGET_GIL_SWITCH_INTERVAL_MS``) on top of the work.

Warm answers run inline: a call whose *shape* (the function, the model and the version it
serves, the computed set or cost cap, the number of examples) last cost at most
``INLINE_SECONDS`` of CPU is answered on the event loop at once, with no hand-over; its
cost is measured again each time, so a shape that turns slow (its solves evicted) goes back
to the pool on its next call. Cold answers of small models run inline too: once the last
``CLASS_WINDOW`` calls (``CLASS_EVIDENCE`` at least) of a *class* (the function, the model,
the kind of estimator it serves, the number of examples: whatever the sets and versions)
cost at most ``COLD_INLINE_SECONDS`` each, but for ``COLD_OUTLIERS`` in a full window (in
proportion in a shorter one) of at most ``COLD_OUTLIER_SECONDS`` (a collection, a busy
core), a never-seen set of that class is answered on the loop (a model of a hundred
features solves a new set in a few hundred microseconds, less than a hand-over to a thread
and back costs while the loop is busy: every GIL release in the answer's kernels is a wait
for the loop to let go). More slow calls in the window, or one much slower, send its class
back to the pool; a large model (a cold solve of milliseconds) never has a cold answer on
the loop. A new version's own solves (the factor every set of it extends) are made before
it is served (:meth:`service.batch.artifact.Artifact.warm`), not by its first answer.

The pool's threads are the process's parallelism, so BLAS runs one thread per call
(``blas_threads``, through threadpoolctl, for the whole process): BLAS's own threads on top
of the answer threads, the fold and the event loop oversubscribe the cores. Measured on a
shared 2-core VM at D = 2,000: a cold answer took 140 ms of CPU and 142 ms (median) with
OpenBLAS's default two threads, 40 ms and 38 ms with one.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import OrderedDict, deque
from concurrent.futures import ThreadPoolExecutor

from service.errors import UnavailableError


class AnswersBusyError(UnavailableError):
    """Every answer thread is busy and the queue is full: retry in a moment."""

    title = "Too many budgeted answers in flight"
    headers = {"Retry-After": "1"}


INLINE_SECONDS = 0.002  # a shape that last cost at most this much CPU is answered inline
COLD_INLINE_SECONDS = 0.002  # the recent calls of a class at most this: new sets inline
COLD_OUTLIERS = 4  # but for this many in the window,
COLD_OUTLIER_SECONDS = 0.02  # each at most this
CLASS_WINDOW = 32  # the recent calls of a class that count
CLASS_EVIDENCE = 8  # the fewest that do (outliers allowed in proportion)
SHAPES_KEPT = 4096  # the costs of the most recent shapes (and classes)


def _served_call(function, args: tuple):
    """``(host, document, served version, number of examples)`` of a ``(host, document)``
    call (``function(host, document)``, or ``host.method(document)``: a bound method's
    ``__self__`` is its host) of a model with a served version, else None."""
    host = getattr(function, "__self__", None)
    if host is not None:
        args = (host, *args)
    if len(args) < 2 or not isinstance(args[-1], dict):
        return None
    host, document = args[0], args[-1]
    served = getattr(host, "served", None)
    if served is None:
        return None
    examples = document.get("examples")
    return host, document, served, len(examples) if isinstance(examples, list) else -1


def call_shape(function, args: tuple):
    """What makes two answers cost alike, or None when unknown: ``(function, model,
    served version, computed set, cost cap, examples)`` for a ``(host, document)`` call
    (:func:`_served_call`) whose document names its set (``computed_groups``) or a cost cap (``max_cost``, or
    its old name ``budget``). O(|set|)."""
    call = _served_call(function, args)
    if call is None:
        return None  # no version yet
    host, document, served, examples = call
    groups = document.get("computed_groups")
    caps = (document.get("max_cost"), document.get("budget"))  # (budget: the old name)
    if groups is None and caps == (None, None):
        return None  # sets from the examples' own groups
    try:
        key = (function, id(host), id(served), tuple(groups) if isinstance(groups, list)
               else groups, caps, examples)
        hash(key)
    except TypeError:  # an unhashable value: the call's own checks will name it
        return None
    return key


def call_class(function, args: tuple):
    """Calls that cost alike whatever their sets, or None: ``(function, model, the kind of
    estimator its served version holds, examples)`` for a ``(host, document)`` call of a
    served model. (The versions of one model share its layout and parameters, so they cost
    alike: a new version keeps its model's evidence, unless it holds another estimator.)"""
    call = _served_call(function, args)
    if call is None:
        return None
    host, _, served, examples = call
    return function, id(host), type(getattr(served, "model", served)).__name__, examples


def limit_blas_threads(threads: int) -> bool:
    """Every BLAS library loaded in this process (OpenBLAS under numpy / scipy) runs at most
    ``threads`` threads from now on; False when threadpoolctl is missing (nothing changes)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return False
    threadpool_limits(limits=int(threads), user_api="blas")
    return True


class AnswerPool:
    """``threads`` workers and room for ``queue`` waiting calls (module docstring)."""

    def __init__(self, threads: int | None = None, queue: int = 64,
                 blas_threads: int | None = 1) -> None:
        if blas_threads is not None:
            limit_blas_threads(blas_threads)
        self.threads = max(1, int(threads or os.cpu_count() or 1))
        self.limit = self.threads + max(0, int(queue))
        self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="answers")
        self.in_flight = 0  # touched on the event loop only
        self._costs: OrderedDict = OrderedDict()  # shape -> CPU seconds of its last call
        self._classes: OrderedDict = OrderedDict()  # class -> its last CLASS_WINDOW costs
        self.inline = 0  # calls answered inline (event loop only)

    def _record(self, shape, seconds: float) -> None:
        self._costs[shape] = seconds
        self._costs.move_to_end(shape)
        while len(self._costs) > SHAPES_KEPT:
            self._costs.popitem(last=False)

    def _record_costs(self, shape, kind, seconds: float) -> None:
        if shape is not None:
            self._record(shape, seconds)
        if kind is not None:
            self._record_class(kind, seconds)

    def _record_class(self, kind, seconds: float) -> None:
        costs = self._classes.get(kind)
        if costs is None:
            costs = self._classes[kind] = deque(maxlen=CLASS_WINDOW)
        costs.append(seconds)
        self._classes.move_to_end(kind)
        while len(self._classes) > SHAPES_KEPT:
            self._classes.popitem(last=False)

    def _inline(self, shape, kind) -> bool:
        """Whether a call is answered on the loop: its shape was cheap last time, or every
        recent call of its class was (module docstring)."""
        if shape is not None and self._costs.get(shape, INLINE_SECONDS + 1) <= INLINE_SECONDS:
            return True
        costs = self._classes.get(kind) if kind is not None else None
        if costs is None or len(costs) < CLASS_EVIDENCE:
            return False
        slow = [c for c in costs if c > COLD_INLINE_SECONDS]
        return (len(slow) <= COLD_OUTLIERS * len(costs) // CLASS_WINDOW
                and all(c <= COLD_OUTLIER_SECONDS for c in slow))

    async def run(self, function, /, *args):
        """``function(*args)`` inline when its shape was cheap last time (module
        docstring), else on an answer thread; AnswersBusyError when full."""
        shape, kind = call_shape(function, args), call_class(function, args)
        if self._inline(shape, kind):
            started = time.thread_time()
            self.inline += 1
            result = function(*args)  # (a refused call tells nothing of the cost: no record)
            self._record_costs(shape, kind, time.thread_time() - started)
            return result
        if self.in_flight >= self.limit:
            raise AnswersBusyError(f"{self.in_flight} budgeted answers are being computed or "
                                   f"waiting (at most {self.limit}); retry in a second")
        self.in_flight += 1
        cost = []

        def timed():
            started = time.thread_time()
            result = function(*args)
            cost.append(time.thread_time() - started)
            return result

        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, timed)
        finally:
            self.in_flight -= 1
            if cost:
                self._record_costs(shape, kind, cost[0])

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
