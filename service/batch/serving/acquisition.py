"""Per-example next group of a served batch version (``POST /next`` with ``examples``).

One :class:`~algorithms.acquisition.ConditionedAcquisition` per served version, built once
on a background thread that the first per-example request starts (never on the event
loop, never at a version swap: a model nobody asks per example costs nothing); until it is
built, examples are answered with the per-set rule and ``policy_building: true``; it is
kept as long as the version object lives:

* held-out rows: gbfs's and anytime classification's ``artifact.held_out``, auto's
  ``model.X_val_`` / ``y_val_`` (labels -1/+1 read as 0/1; a multi-class model's class
  indices as kept, its probabilities (n, K) and the K-class log-loss), at most
  ``MAX_ROWS`` of them (evenly spaced); families without any (nvsd, anytime regression,
  versions written before held-out rows were kept) or with fewer than ``MIN_ROWS`` get no
  policy and answer with the per-set rule;
* predictor: for rows whose uncomputed features are NaN, the rows are grouped by their
  computed set ``S`` and scored with the family's ``scorer(artifact)`` (classification:
  the set's calibrated probability where the version has held-out figures, else the
  sigmoid of the score), or where it has none through the answer path (``predictions``
  / ``probabilities``); loss: squared error or log-loss;
* pool: the first ``POOL_GROUPS`` groups of the version's trained order (every group
  when there are at most that many); fallback: the version's own ``next_group(S, cap)``.

Building costs ``n 2^P`` predicted rows (``n`` held-out rows, ``P`` pool groups; one
scorer call per set, whose calibration on the version's own held-out rows comes from the
same call) and the gate's episodes (numba, at most ``gate_rows`` rows); a decision one k-NN
over the window (O(n |F_S|)) and a superset search (O(2^(P-|s|) k)), both numba over flat
arrays. Measured with 5,000 held-out rows, 16 groups (a pool of 8), 100 trees: about 5 s
of CPU for the table and 2 s for the gate.
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, softmax

from algorithms.acquisition import ConditionedAcquisition, LossTable

log = logging.getLogger("featurebudget.batch")
POOL_GROUPS = 8
MAX_ROWS = 5000
MIN_ROWS = 20
_NONE = object()  # a version without a policy
BUILDING = object()  # a version whose policy is being built
NOT_STARTED = object()  # a version whose policy nobody asked for yet (peek)
_lock = threading.Lock()
_policies: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_building: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def held_out_rows(artifact) -> tuple[np.ndarray, np.ndarray] | None:
    """The version's held-out rows ``(X, y)`` (y: 0/1 for classification), or None."""
    rows = artifact.held_out
    if rows is None and hasattr(artifact.model, "X_val_"):
        rows = (artifact.model.X_val_, artifact.model.y_val_)
    if rows is None:
        return None
    X = rows[0] if isinstance(rows[0], np.ndarray) and rows[0].dtype == np.float64 else \
        np.asarray(rows[0], dtype=np.float64)  # (the version's own array where it can)
    y = np.asarray(rows[1], dtype=np.float64).ravel()
    if X.ndim != 2 or X.shape[0] < MIN_ROWS:
        return None
    if X.shape[0] > MAX_ROWS:
        keep = np.linspace(0, X.shape[0] - 1, MAX_ROWS).astype(np.int64)
        X, y = X[keep], y[keep]
    if artifact.task == "classification" and artifact.layout.classes is None:
        y = (y > 0).astype(np.float64)  # (a multi-class model's: class indices as kept)
    return X, y


def set_predictor(artifact):
    """``predict(Z)`` for rows whose uncomputed features are NaN (module docstring)."""
    layout, task = artifact.layout, artifact.task
    adapter = artifact.adapter
    score = adapter.scorer(artifact)
    firsts = np.array([g[0] if len(g) else -1 for g in layout.groups], dtype=np.int64)

    def one_set(Z: np.ndarray, S: list[int]) -> np.ndarray:
        if score is not None:
            raw = np.asarray(score(Z, S), dtype=np.float64)
            if task != "classification":
                return raw
            if artifact.figures is not None:
                return _probabilities(artifact.figures.figures(S).logits(raw))
            return _probabilities(raw)
        out = adapter.answer(artifact, adapter.request_rows(sp.csr_matrix(Z)), S)
        key = "probabilities" if task == "classification" else "predictions"
        return np.asarray(out[key], dtype=np.float64)

    def predict(Z: np.ndarray) -> np.ndarray:
        computed = np.zeros((Z.shape[0], len(firsts)), dtype=bool)
        for g, f in enumerate(firsts):
            if f >= 0:
                computed[:, g] = ~np.isnan(Z[:, f])
        # one integer code per row's set (a byte string per row beyond 62 groups)
        codes = computed @ (1 << np.arange(len(firsts), dtype=np.int64)) \
            if len(firsts) <= 62 else np.array([r.tobytes() for r in np.packbits(computed, 1)])
        _, first, which = np.unique(codes, return_index=True, return_inverse=True)
        classes = artifact.layout.classes
        out = np.empty(Z.shape[0] if classes is None else (Z.shape[0], len(classes)),
                       dtype=np.float64)
        for k, at in enumerate(first):
            rows = np.flatnonzero(which.ravel() == k)
            out[rows] = one_set(np.nan_to_num(Z[rows], nan=0.0),
                                np.flatnonzero(computed[at]).tolist())
        return out

    return predict


def set_outputs(artifact, X: np.ndarray):
    """``predict_set(S)`` for :class:`~algorithms.acquisition.LossTable`: every window row
    ``X`` answered knowing exactly the groups ``S``, one scorer call per set (the features
    outside ``S`` zero, as the answer path sees them); on the version's own held-out rows
    the calibrated probabilities come with the set's figures from that one call. None
    where the family has no scorer (then :func:`set_predictor`)."""
    layout, task = artifact.layout, artifact.task
    score = artifact.adapter.scorer(artifact)
    if score is None:
        return None
    figures = artifact.figures
    own = artifact.held_out is not None and X is artifact.held_out[0]

    def predict_set(S: tuple[int, ...]) -> np.ndarray:
        S = list(S)
        if task == "classification" and figures is not None and own:
            fig, raw = figures.figures_with_scores(S)
            return _probabilities(fig.logits(raw))
        Z = np.zeros_like(X)
        features = layout.features_of(S)
        Z[:, features] = X[:, features]
        raw = np.asarray(score(Z, S), dtype=np.float64)
        if task != "classification":
            return raw
        return _probabilities(figures.figures(S).logits(raw) if figures is not None else raw)

    return predict_set


def _probabilities(logits: np.ndarray) -> np.ndarray:
    """``P(y = 1)`` of binary logits (n,), or class probabilities (n, K) of a multi-class
    model's calibrated class scores (the K-class log-loss of
    :mod:`algorithms.acquisition.losses`)."""
    return softmax(logits, axis=1) if logits.ndim == 2 else expit(logits)


def build(artifact) -> ConditionedAcquisition | None:
    """The version's policy (module docstring), or None where it has no held-out rows."""
    rows = held_out_rows(artifact)
    if rows is None:
        return None
    layout = artifact.layout
    J = layout.n_groups
    order = [int(g) for g in artifact.order()]
    pool = list(range(J)) if J <= POOL_GROUPS else \
        (order + [g for g in range(J) if g not in order])[:POOL_GROUPS]

    def fallback(S, max_cost):
        step = artifact.adapter.next_step(artifact, list(S), max_cost)
        return None if step is None else int(step[0])

    groups = [g.tolist() for g in layout.groups]
    loss = "log" if artifact.task == "classification" else "squared"
    table = LossTable(set_predictor(artifact), rows[0], rows[1], groups=groups,
                      costs=layout.costs, loss=loss, pool=pool,
                      predict_set=set_outputs(artifact, rows[0]))
    return ConditionedAcquisition(max_groups=max(1, min(J, POOL_GROUPS))).fit(
        None, rows[0], rows[1], groups=groups, costs=layout.costs, loss=loss,
        fallback=fallback, table=table)


def policy_of(artifact, *, wait: bool = False):
    """The cached policy of a served version (None: it has none), or ``BUILDING`` while
    its one build runs on a background thread, started by the first call (``wait``: build
    it in this thread if need be and return it). Thread-safe."""
    with _lock:
        hit = _policies.get(artifact)
        start = hit is None and artifact not in _building
        if start:
            _building[artifact] = threading.Lock()
        building = _building.get(artifact)
    if hit is not None:
        return None if hit is _NONE else hit
    if wait:
        _build_once(artifact, building)
        return policy_of(artifact)
    if start:
        threading.Thread(target=_build_once, args=(artifact, building), daemon=True,
                         name=f"acquisition-v{artifact.version}").start()
    return BUILDING


def peek(artifact):
    """The cached policy of a served version without starting its build: the policy, None
    (it has none), ``BUILDING`` (its build runs) or ``NOT_STARTED``. Thread-safe, O(1)."""
    with _lock:
        hit = _policies.get(artifact)
        if hit is None:
            return BUILDING if artifact in _building else NOT_STARTED
    return None if hit is _NONE else hit


def _build_once(artifact, building: threading.Lock) -> None:
    """Build and keep the version's policy unless another call did (one build each)."""
    with building:
        with _lock:
            if artifact in _policies:
                return
        try:
            policy = build(artifact)
        except Exception:  # the version still answers with its per-set rule
            log.exception("per-example policy of version %s could not be built",
                          artifact.version)
            policy = None
        with _lock:
            _policies[artifact] = _NONE if policy is None else policy


def _next(layout, g: int | None, gain, interval) -> dict[str, Any] | None:
    if g is None:
        return None
    return {"name": layout.group_names[g], "cost": float(layout.costs[g]),
            "expected_gain": None if gain is None else float(gain),
            "expected_gain_interval": None if interval is None else
            [float(interval[0]), float(interval[1])]}


def _candidate(layout, c, fits: bool) -> dict[str, Any]:
    return {"name": layout.group_names[c.group], "cost": float(c.cost),
            "expected_gain": c.expected_gain, "gain_per_cost": c.gain_per_cost,
            "within_max_cost": fits}


def answer(artifact, x: np.ndarray, S: list[int], max_cost: float | None,
           exchange_rate: float | None) -> dict[str, Any]:
    """One example's answer: ``x`` dense (d,), NaN outside the groups ``S``."""
    layout = artifact.layout
    out: dict[str, Any] = {"computed_groups": [layout.group_names[g] for g in S],
                           "cost": layout.cost_of(S), "next_group": None, "stop_reason": None,
                           "policy": "per-set", "policy_building": False}  # (in order)
    policy = policy_of(artifact)
    missing = [g for g in range(layout.n_groups) if g not in S]
    if policy is BUILDING:  # answered by the per-set rule until the build is done
        out["policy_building"] = True
        policy = None
    if policy is None:  # the per-set rule, in its own units
        step = artifact.next_group(S, max_cost)
        if step is not None:
            step["expected_gain_interval"] = None
        out.update(next_group=step, stop_reason=None if step is not None else
                   "nothing left within max_cost", policy="per-set",
                   candidates=[{"name": layout.group_names[g], "cost": float(layout.costs[g]),
                                "expected_gain": None, "gain_per_cost": None,
                                "within_max_cost": None} for g in missing])
        return out
    d = policy.decide(x, S, max_cost=max_cost, exchange_rate=exchange_rate,
                      every_missing=True)  # (over the cap too, with the same neighbours)
    candidates = [_candidate(layout, c, c.within_max_cost) for c in d.candidates]
    out.update(next_group=_next(layout, d.group, d.expected_gain, d.interval),
               stop_reason=d.stop_reason,
               policy="per-example" if d.per_example else "per-set", candidates=candidates)
    return out


__all__ = ["BUILDING", "MAX_ROWS", "MIN_ROWS", "NOT_STARTED", "POOL_GROUPS", "answer", "build",
           "held_out_rows", "peek", "policy_of", "set_outputs", "set_predictor"]
