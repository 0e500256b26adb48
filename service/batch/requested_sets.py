"""Which computed sets a batch model's ``/predict`` traffic asks for, in bounded memory.

:class:`SpaceSaving` is the heavy-hitters sketch of A. Metwally, D. Agrawal and A. El
Abbadi, "Efficient computation of frequent and top-k elements in data streams" (2005): at
most ``k`` counters; a set already counted adds its weight, a new one takes a free counter
or replaces the smallest (inheriting its count as its error). With ``N`` the total weight
seen, every count is an over-estimate by at most ``N / k`` (``count - error`` is a lower
bound), and every set asked for more than ``N / k`` times holds a counter. An update is
O(1) for a counted set, O(k) when it evicts; ``top(m)`` is O(k log k).

Each process keeps one sketch per model incarnation (:func:`sketch_for`), updated by
:meth:`~service.batch.serving.host_answers.BatchHostAnswers.answer_predict` on the answer
pool's threads (a lock per sketch; one call per request, O(sets in it)). The fit of a model
that takes specialists (the ``auto`` family) reads the top sets: on a single-process backend
this process's sketch; on a shared one every API process writes its counts to the backend
every :data:`PUBLISH_SECONDS` (:func:`publish_loop`, ``Storage.save_requested_sets``) and
the folding process sums them (``Storage.load_requested_sets``) at each retrain.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import Iterable

log = logging.getLogger("featurebudget.batch")
COUNTERS = 64          # k: counters per model and process
PUBLISH_SECONDS = 5.0  # how often an API process writes its counts on a shared backend


class SpaceSaving:
    """Space-Saving with ``k`` counters over hashable keys (module docstring);
    thread-safe."""

    def __init__(self, k: int = COUNTERS) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.k = int(k)
        self.counts: dict = {}
        self.errors: dict = {}
        self.total = 0
        self.changes = 0   # updates so far (a publisher writes only after new ones)
        self._lock = threading.Lock()

    def add(self, items: Iterable[tuple[object, int]]) -> None:
        """Count each ``(key, weight)`` (weight >= 1). O(1) per counted key, O(k) for a
        new key once the counters are full."""
        with self._lock:
            for key, weight in items:
                weight = int(weight)
                if weight <= 0:
                    continue
                self.total += weight
                if key in self.counts:
                    self.counts[key] += weight
                elif len(self.counts) < self.k:
                    self.counts[key], self.errors[key] = weight, 0
                else:
                    smallest = min(self.counts, key=self.counts.__getitem__)
                    floor = self.counts.pop(smallest)
                    del self.errors[smallest]
                    self.counts[key], self.errors[key] = floor + weight, floor
            self.changes += 1

    def top(self, m: int | None = None) -> list[tuple[object, int]]:
        """The ``m`` largest ``(key, count)`` (all when None), largest first, ties by key."""
        with self._lock:
            ranked = sorted(self.counts.items(), key=lambda kv: (-kv[1], str(kv[0])))
        return ranked if m is None else ranked[:m]

    def guaranteed(self, key: object) -> int:
        """A lower bound of ``key``'s true count (``count - error``; 0 when uncounted)."""
        with self._lock:
            return self.counts.get(key, 0) - self.errors.get(key, 0)


_SKETCHES: dict[tuple[str, str], SpaceSaving] = {}
_SKETCHES_LOCK = threading.Lock()


def sketch_for(model: str, incarnation: str) -> SpaceSaving:
    """This process's sketch of a model incarnation (made on first use)."""
    with _SKETCHES_LOCK:
        sketch = _SKETCHES.get((model, incarnation))
        if sketch is None:
            sketch = _SKETCHES[(model, incarnation)] = SpaceSaving()
        return sketch


def forget(model: str) -> None:
    """Drop every sketch of ``model`` (it was deleted)."""
    with _SKETCHES_LOCK:
        for key in [k for k in _SKETCHES if k[0] == model]:
            del _SKETCHES[key]


def record(model: str, incarnation: str, sets: Iterable[tuple[tuple[int, ...], int]]) -> None:
    """Count one request's computed sets (group ids) with their row counts; the empty set
    is not counted (nothing to specialize on). O(sets)."""
    sketch_for(model, incarnation).add((tuple(int(g) for g in S), n) for S, n in sets if S)


def encode(incarnation: str, sketch: SpaceSaving) -> bytes:
    """The counts a process publishes: ``{"incarnation", "counts": {"0,2": n, ...}}``."""
    return json.dumps({"incarnation": incarnation, "counts": {
        ",".join(map(str, S)): n for S, n in sketch.top()}}).encode()


def merge(published: Iterable[bytes], incarnation: str) -> dict[tuple[int, ...], int]:
    """Sum the processes' published counts of ``incarnation`` (others, and unreadable
    entries, are skipped)."""
    total: dict[tuple[int, ...], int] = {}
    for blob in published:
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            entry = json.loads(blob)
            if entry.get("incarnation") != incarnation:
                continue
            for key, n in entry["counts"].items():
                S = tuple(int(g) for g in key.split(",") if g != "")
                if S and isinstance(n, int) and n > 0:
                    total[S] = total.get(S, 0) + n
    return total


def ranked(counts: dict[tuple[int, ...], int]) -> list[tuple[int, ...]]:
    """Sets by count, largest first (ties: the smaller ids first)."""
    return [S for S, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


async def requested(storage, model: str, incarnation: str) -> list[tuple[int, ...]]:
    """The model's requested sets, most requested first: summed over the processes'
    published counts on a shared backend, this process's sketch otherwise."""
    if storage.shared:
        published = await storage.load_requested_sets(model)
        return ranked(merge(published.values(), incarnation))
    return ranked(dict(sketch_for(model, incarnation).top()))


async def fit_params(fold, family):
    """The fold's params for the next fit: with the top requested sets for a ``family``
    (its adapter) that takes them (``specialist_params``), unchanged otherwise (or when
    reading them fails: a retrain never waits on statistics)."""
    take = getattr(family, "specialist_params", None)
    if take is None:
        return fold.params
    try:
        top = await requested(fold.storage, fold.spec.name, fold.spec.incarnation)
    except Exception:  # noqa: BLE001 - the fit goes on with the pinned sets only
        log.warning("model %s: requested sets unreadable; fitting with the pinned ones",
                    fold.spec.name, exc_info=True)
        top = []
    return take(fold.params, fold.layout, top)


async def publish_loop(models) -> None:
    """On a shared backend: every ``PUBLISH_SECONDS``, write each hosted model's counts
    that changed since the last write (``Storage.save_requested_sets``)."""
    written: dict[tuple[str, str], int] = {}
    while True:
        await asyncio.sleep(PUBLISH_SECONDS)
        await publish_once(models, written)


async def publish_once(models, written: dict | None = None) -> None:
    """One round of :func:`publish_loop` (``written``: changes already written, per
    sketch)."""
    written = {} if written is None else written
    for name, host in list(models.hosts.items()):
        incarnation = host.spec.incarnation
        with _SKETCHES_LOCK:
            sketch = _SKETCHES.get((name, incarnation))
        if sketch is None or written.get((name, incarnation)) == sketch.changes:
            continue
        changes = sketch.changes
        try:
            await models.storage.save_requested_sets(name, models.process_id,
                                                     encode(incarnation, sketch))
            written[(name, incarnation)] = changes
        except Exception:  # noqa: BLE001 - counts are statistics: the next round retries
            log.debug("requested sets of %s not published", name, exc_info=True)


__all__ = ["COUNTERS", "PUBLISH_SECONDS", "SpaceSaving", "fit_params", "forget", "merge",
           "publish_loop", "publish_once", "ranked", "record", "requested", "sketch_for"]
