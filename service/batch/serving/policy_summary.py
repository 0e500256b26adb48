"""What the per-example policy of a served batch version does (``GET
/v1/models/{model}/acquisition``, the ``acquisition`` field of ``GET /v1/models/{model}``,
the sequence page and ``/ui``): :func:`algorithms.acquisition.summary.summarize` on the
version's policy, with group names.

One summary per served version, computed once on a background thread (lower priority,
yielding to predictions between rows) that the acquisition route or the sequence page
starts: the thread waits for the version's policy (starting its build if nobody has:
:func:`service.batch.serving.acquisition.policy_of`), then runs the summary's episodes, at most
:data:`~algorithms.acquisition.summary.SUMMARY_ROWS` held-out rows times five exchange
rates, each at most ``J`` decisions of O(n/2 |F_S| + 2^(P-|s|) k): 1.2 s for 291 rows and
4 groups; 6.6 s of CPU for 5,000 held-out rows and 16 groups (a pool of 8) when the policy
is per-example, 0.2 s when the gate chose the per-set rule (its decisions read no value
and are kept per set). ``GET /v1/models/{model}`` and ``/ui`` start it only for a version
whose policy was asked for already, and never the policy itself (O(1)).

States: ``"ready"`` (the summary), ``"building"`` (the policy or its summary is being
computed), ``"not started"`` (nobody asked yet), ``"none"`` with a ``reason`` (no held-out
rows, too few, or a build that failed: the version answers with its per-set rule).
"""

from __future__ import annotations

import logging
import math
import threading
import time
import weakref
from typing import Any

from algorithms.acquisition.summary import summarize
from service import priority
from service.batch.serving import acquisition

log = logging.getLogger("featurebudget.batch")
_lock = threading.Lock()
_summaries: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # artifact -> dict
_RUNNING = object()
LOSS_NAMES = {"log": "log-loss", "squared": "squared error"}


def no_policy_reason(artifact) -> str | None:
    """Why the version has no per-example policy, before any build (None: it may have
    one). O(1)."""
    rows = artifact.held_out
    if rows is None and hasattr(artifact.model, "X_val_"):
        rows = (artifact.model.X_val_, artifact.model.y_val_)
    if rows is None:
        return (f"this {artifact.family} {artifact.task} version keeps no held-out rows "
                "(nvsd and anytime regression never do; versions trained before held-out "
                "rows were kept neither), so every example is told the per-set next group")
    n = int(getattr(rows[0], "shape", (len(rows[0]),))[0])
    if n < acquisition.MIN_ROWS:
        return (f"the version holds {n} held-out rows, fewer than the {acquisition.MIN_ROWS} "
                "the policy needs, so every example is told the per-set next group")
    return None


def describe(artifact, *, start: bool) -> dict[str, Any]:
    """The version's summary or its state (module docstring); ``start``: begin computing it
    (and the policy) if nobody has; without ``start`` it begins only where the policy was
    asked for already (it follows the policy). Thread-safe; O(1) on the caller's thread."""
    head = {"version": artifact.version}
    reason = no_policy_reason(artifact)
    if reason is not None:
        return {**head, "state": "none", "reason": reason}
    with _lock:
        hit = _summaries.get(artifact)
    if isinstance(hit, dict):
        return hit
    if hit is None:
        if not start and acquisition.peek(artifact) is acquisition.NOT_STARTED:
            return {**head, "state": "not started"}
        with _lock:
            launch = artifact not in _summaries
            if launch:
                _summaries[artifact] = _RUNNING
        if launch:
            threading.Thread(target=_compute, args=(artifact,), daemon=True,
                             name=f"acquisition-summary-v{artifact.version}").start()
    return {**head, "state": "building"}


def _compute(artifact) -> None:
    """Wait for the version's policy, summarize it and keep the answer."""
    priority.lower_priority()
    head = {"version": artifact.version}
    started = time.perf_counter()
    try:
        policy = acquisition.policy_of(artifact, wait=True)
        if policy is None:
            out = {**head, "state": "none", "reason": "the policy could not be built (the "
                   "service log says why), so every example is told the per-set next group"}
        else:
            out = {**head, "state": "ready",
                   **named(artifact, summarize(policy, pause=priority.yield_to_predictions)),
                   "seconds": round(time.perf_counter() - started, 3)}
    except Exception as exc:  # noqa: BLE001 - the version answers as before
        log.exception("the per-example policy of version %s could not be summarized",
                      artifact.version)
        out = {**head, "state": "none", "reason": f"the summary failed: {exc}"}
    with _lock:
        _summaries[artifact] = out


def named(artifact, summary: dict[str, Any]) -> dict[str, Any]:
    """The summary with group names for ids; the metric dropped where the version has more
    than two classes (its log-loss does not give the accuracy). O(size)."""
    names = artifact.layout.group_names
    multi = getattr(artifact.layout, "classes", None) is not None

    def choices(entries):
        return [{"name": None if e["group"] is None else names[e["group"]],
                 "count": e["count"], "share": e["share"]} for e in entries]

    rates = [{**entry, "metric": None if multi else entry["metric"],
              "first_choice": choices(entry["first_choice"]),
              "second_choice": choices(entry["second_choice"])}
             for entry in summary["exchange_rates"]]
    gate = None if summary["gate"] is None else {  # (one scored row: an infinite stderr)
        key: None if isinstance(v, float) and not math.isfinite(v) else v
        for key, v in summary["gate"].items()}
    return {"policy": "per-example" if summary["per_example"] else "per-set",
            "gate": gate, "rows": summary["rows"],
            "window_rows": summary["window_rows"],
            "pool": [names[g] for g in summary["pool"]],
            "loss": LOSS_NAMES.get(summary["loss"], summary["loss"]),
            "metric": None if multi else summary["metric"],
            "unit_rate": summary["unit_rate"], "exchange_rates": rates}


__all__ = ["describe", "named", "no_policy_reason"]
