"""A published version of a batch model: the fitted model in the algorithms' safe format,
the validation statistics an anytime answer needs, and the metadata; plus how it answers.

Blob: a state archive (``algorithms.serialization``) in the envelope of ``algorithms.states``
(``kind`` "featurebudget-artifact", ``format_version`` 1 or 2; blobs written before it have
no version and read as 1) with members ``model`` (the bytes of the model's ``to_bytes``),
``validation`` (statistics families: the bytes of the held-out ``SufficientStatistics``,
when there are any), ``held_out.X`` / ``held_out.y`` (version 2: the held-out rows the
per-set figures are measured on: gbfs's validation window, anytime classification's
reservoir) and the service's metadata ``meta`` as JSON values (version, family,
algorithm, task, params, metrics). Nothing in it is ever unpickled.

Answers (:meth:`Artifact.answer`) for a computed set ``S`` of groups come from the family's
adapter (``service.batch.families``; each module's docstring says how it answers). Figures
measured on held-out rows go through :class:`algorithms.per_set.figures.SetFigures` (cached
per set): explained variance and RMSE, or for classification the 0/1 error and log-loss of
probabilities calibrated for exactly ``S`` (Platt, cross-fitted on the held-out rows);
``labels`` are then the calibrated ``p >= 1/2``.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, softmax

from algorithms.batch import cost_slack
from algorithms.serialization import StateFormatError, dumps_state, loads_state
from algorithms.sparse import CSRBatch
from algorithms.states import FORMAT_VERSION as VERSION_MEMBER
from algorithms.states import envelope, open_envelope
from service.batch.checks import MAX_ABS_INPUT, check_json_values
from service.batch.curves import set_figures
from service.batch.families import family_of
from service.batch.jobs import VersionMeta
from service.batch.layout import BatchLayout

KIND = "featurebudget-artifact"
FORMAT_VERSION = 2
READS = (1, 2)  # the format versions this service reads


def held_out_for(family: str, rows, layout: BatchLayout | None = None):
    """The held-out rows a version of ``family`` keeps (its adapter says; a multi-class
    version, ``layout.classes``, always keeps them: its per-set figures are measured on
    them)."""
    if layout is not None and layout.classes is not None:
        return rows
    return family_of(family).held_out_for(rows)


def pack(model, validation_stats, meta: dict[str, Any], held_out=None) -> bytes:
    """The blob of a version: the model, the validation statistics (or None), the
    held-out rows ``(X, y)`` (or None) and ``meta``, in the envelope."""
    payload: dict[str, Any] = {"meta": meta,
                               "model": np.frombuffer(model.to_bytes(), dtype=np.uint8)}
    if validation_stats is not None:
        payload["validation"] = np.frombuffer(validation_stats.to_bytes(), dtype=np.uint8)
    if held_out is not None:
        payload["held_out.X"] = np.ascontiguousarray(held_out[0], dtype=np.float64)
        payload["held_out.y"] = np.ascontiguousarray(held_out[1], dtype=np.float64)
    return dumps_state(envelope(KIND, FORMAT_VERSION, payload))


def _payload(state: dict) -> dict[str, Any]:
    """The artifact's payload: out of the envelope (format 1 blobs may have no version)."""
    if state.get("kind") != KIND or not isinstance(state.get("meta"), dict):
        raise ValueError("not a featurebudget artifact")
    if VERSION_MEMBER not in state:  # written before the version: format 1
        return {key: value for key, value in state.items() if key != "kind"}
    if state[VERSION_MEMBER] not in READS:
        raise ValueError(f"artifact format_version {state.get(VERSION_MEMBER)!r}; this "
                         f"service reads {list(READS)}")
    return open_envelope(state, KIND, READS)[1]


def unpack(blob: bytes, family: str, layout: BatchLayout) -> Artifact:
    """Parse and check a version's blob; ValueError naming what is wrong. (A version about to
    be served: ``unpack(...).warm()``.)"""
    try:
        state = loads_state(blob)
    except StateFormatError as exc:
        raise ValueError(f"not a valid artifact: {exc}") from exc
    payload = _payload(state)
    meta = payload["meta"]
    check_json_values(meta)
    check_meta(meta)
    info = VersionMeta.from_dict(meta)  # (checked: read typed from here on)
    if info.family != family:
        raise ValueError(f"artifact of a {info.family!r} model, this model is {family!r}")
    raw = payload.get("model")
    if not isinstance(raw, np.ndarray) or raw.dtype != np.uint8 or raw.ndim != 1:
        raise ValueError("artifact has no model member")
    adapter = family_of(family)
    model = adapter.model_class(info).from_bytes(raw.tobytes())
    validation = None
    if isinstance(payload.get("validation"), np.ndarray):
        from algorithms.anytime import SufficientStatistics

        validation = SufficientStatistics.from_bytes(payload["validation"].tobytes())
    adapter.check_fits(model, layout, validation)
    if validation is not None:
        check_statistics(validation)
    held_out = _held_out(payload, layout, info.task)
    artifact = Artifact(info, family, model, validation, layout, held_out=held_out)
    adapter.check_artifact(artifact)
    return artifact


def check_statistics(stats) -> None:
    """ValueError unless held-out statistics are finite, of a count >= 0, with sums of
    squares >= 0 and means within the inputs' range (|x| < 2^50). O(D²)."""
    values = np.concatenate([stats.mean_x, stats.mxx.ravel(), stats.mxy,
                             [stats.mean_y, stats.myy]])
    if not np.all(np.isfinite(values)) or stats.n < 0 or stats.myy < 0 or \
            np.any(np.diag(stats.mxx) < 0) or \
            np.any(np.abs(stats.mean_x) > MAX_ABS_INPUT) or abs(stats.mean_y) > MAX_ABS_INPUT:
        raise ValueError("artifact's validation statistics are not finite or out of range")


_COUNTS = ("examples_used", "validation_examples", "restored_from")


def check_meta(meta: dict) -> None:
    """The members of a version's metadata the service reads, typed and in range
    (ValueError naming the member): a version in 1..2^53, finite times, counts below 2^62,
    log ids as strings. O(members)."""
    version = meta.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version < 1 << 53:
        raise ValueError(f"meta.version must be an integer in 1..2^53, got {version!r}")
    for name in ("created_at",):
        value = meta.get(name)
        if value is not None and (isinstance(value, bool) or
                                  not isinstance(value, int | float) or
                                  not math.isfinite(value)):
            raise ValueError(f"meta.{name} must be a finite number, got {value!r}")
    for name in _COUNTS:
        value = meta.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or
                                  not 0 <= value < 1 << 62):
            raise ValueError(f"meta.{name} must be a count below 2^62, got {value!r}")
    for name in ("trained_through", "job"):
        value = meta.get(name)
        if value is not None and (not isinstance(value, str) or len(value) > 64):
            raise ValueError(f"meta.{name} must be a string of at most 64 characters")


def _held_out(state: dict, layout: BatchLayout, task: str):
    """The artifact's held-out rows ``(X, y)``, checked (ValueError), or None."""
    X, y = state.get("held_out.X"), state.get("held_out.y")
    if X is None and y is None:
        return None
    D = layout.n_features
    if not isinstance(X, np.ndarray) or X.dtype != np.float64 or X.ndim != 2 or \
            X.shape[1] != D or X.shape[0] < 1:
        raise ValueError(f"artifact's held_out.X must be float64 rows of {D} features")
    if not isinstance(y, np.ndarray) or y.dtype != np.float64 or y.shape != (X.shape[0],):
        raise ValueError(f"artifact's held_out.y must be {X.shape[0]} float64 targets")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        raise ValueError("artifact's held-out rows hold NaN or infinite values")
    if layout.classes is not None:
        K = len(layout.classes)
        if not np.all((y >= 0) & (y < K) & (y == np.floor(y))):
            raise ValueError(f"artifact's held-out labels must be class indices 0..{K - 1}")
    elif task == "classification" and not np.all(np.abs(y) == 1.0):
        raise ValueError("artifact's held-out labels must be -1 or +1")
    return X, y


class Artifact:
    """One loaded version; thread-safe to read (its caches are bounded and locked)."""

    def __init__(self, info: VersionMeta, family: str, model, validation,
                 layout: BatchLayout, cache_size: int = 1024, held_out=None) -> None:
        self.info = info  # what the version says of itself, typed (checked by unpack)
        self.version = int(info.version)
        self.family = family
        self.adapter = family_of(family)
        self.model = model
        self.validation = validation
        self.layout = layout
        self.task = info.task
        self.held_out = held_out
        self._per_set: OrderedDict = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()  # the family's per-set cache (the model locks its own)
        self.figures = self._set_figures()

    def _set_figures(self):
        """Per-set figures on the held-out rows, where this version has them."""
        if self.held_out is None:
            return None
        score = self.adapter.scorer(self)
        return None if score is None else set_figures(score, self.held_out, self.task,
                                                      self.layout)

    def warm(self) -> Artifact:
        """Answer one row with the whole trained sequence computed (and with none), so the
        per-version solves every later answer builds on (for the statistics families the
        factor of the sequence's Gram block, O(k³/3) for its k features) are made before
        this version is served, off the event loop, not by its first request."""
        row = CSRBatch(np.zeros(2, dtype=np.int64), np.zeros(0, dtype=np.int32),
                       np.zeros(0), self.layout.n_features)  # as a request's
        for S in (sorted(self.order()), []):
            self.answer(row, S, None)
        return self

    # ------------------------------------------------------------------ sets
    def budget_set(self, budget: float) -> list[int]:
        """The groups of the longest trained prefix whose cost is within ``budget``."""
        chosen = self.adapter.budget_set(self, budget)
        if chosen is not None:
            return chosen
        chosen, spent = [], 0.0
        for g in self.adapter.order(self):
            cost = float(self.layout.costs[g])
            if spent + cost > budget + cost_slack(budget):
                break
            chosen.append(g)
            spent += cost
        return sorted(chosen)

    def room(self, S: list[int], budget: float | None) -> float | None:
        """What ``budget`` leaves after ``S`` (with the cost slack); None: no cap."""
        spent = self.layout.cost_of(S)
        return None if budget is None else budget - spent + cost_slack(budget)

    # ------------------------------------------------------------------ answers
    def answer(self, X: CSRBatch | sp.csr_matrix, S: list[int], budget: float | None
               ) -> dict[str, Any]:
        """Predictions for rows ``X`` (a request's ``CSRBatch`` or a scipy CSR matrix; the
        family's adapter takes them as it needs them) that all have the computed set ``S``
        (sorted ids)."""
        out = self.adapter.answer(self, self.adapter.request_rows(X), S)
        out["next_group"] = self.next_group(S, budget)
        return out

    def labels(self, scores: np.ndarray, out: dict[str, Any]) -> dict[str, Any]:
        """``out`` with the labels of ``scores`` (classification): ±1, or for a
        multi-class model (scores (n, K)) the class of the largest score, as the user's
        label, and the model's ``classes`` (the order of each probability list)."""
        if self.task == "classification" and scores.ndim == 2:
            classes = self.layout.classes
            out["labels"] = classes.labels(np.argmax(scores, axis=1))
            out["classes"] = list(classes.values)
        elif self.task == "classification":
            out["labels"] = [1 if s >= 0 else -1 for s in scores.tolist()]
        return out

    def held_out_figures(self, S: list[int], scores: np.ndarray,
                         out: dict[str, Any]) -> dict[str, Any]:
        """``out`` with the held-out figures of ``S`` (and, classifying, the calibrated
        probabilities and labels of ``scores``)."""
        figures = self.figures.figures(S)
        out["expected_on"] = "validation"
        if self.task == "regression":
            out.update(expected_explained_variance=figures.explained_variance,
                       expected_rmse=figures.rmse)
            return out
        out.update(expected_error=figures.error, expected_log_loss=figures.log_loss)
        return self.calibrated(figures.logits(scores), out, scores)

    def calibrated(self, logits: np.ndarray, out: dict[str, Any],
                   scores: np.ndarray | None = None) -> dict[str, Any]:
        """``out`` with the probabilities and labels of ``logits`` (n,), or of a multi-class
        model's calibrated class scores (n, K): ``softmax`` per row."""
        out["probabilities"] = (softmax(logits, axis=1) if logits.ndim == 2 else
                                expit(logits)).tolist()
        if logits.ndim == 2 and scores is not None:  # the class of the largest raw score
            return self.labels(scores, out)  # (a temperature of 0 leaves it measured)
        return self.labels(logits, out)

    def republished(self, meta: dict[str, Any]) -> None:
        """Serve this checked version as the one ``meta`` describes (a snapshot's version
        published again under a new number: ``meta`` is its stored metadata)."""
        self.info = VersionMeta.from_dict(meta)
        self.version = int(self.info.version)

    def per_set(self, S: list[int], compute):
        """The family's value for the set ``S``, ``compute()`` on a miss (outside the lock;
        at most ``cache_size`` sets kept, the oldest dropped first). Thread-safe."""
        key = tuple(S)
        with self._lock:
            hit = self._per_set.get(key)
        if hit is None:
            hit = compute()
            with self._lock:
                self._per_set[key] = hit
                if len(self._per_set) > self._cache_size:
                    self._per_set.popitem(last=False)
        return hit

    def next_group(self, S: list[int], budget: float | None) -> dict[str, Any] | None:
        """The group to compute next given ``S``, its cost and expected gain; None if none."""
        step = self.adapter.next_step(self, S, budget)
        if step is None:
            return None
        g, gain = int(step[0]), step[1]
        return {"name": self.layout.group_names[g], "cost": float(self.layout.costs[g]),
                "expected_gain": None if gain is None else float(gain)}

    def sequence(self) -> dict[str, Any]:
        """The trained sequence with cost, cumulative cost and the per-prefix figures."""
        info = self.info
        layout, metrics = self.layout, info.metrics
        order = self.adapter.order(self)
        cumulative = np.cumsum([0.0] + [float(layout.costs[g]) for g in order])
        prefixes = []
        for j in range(len(order) + 1):
            S = sorted(order[:j])
            row: dict[str, Any] = {"groups": j, "cumulative_cost": float(cumulative[j])}
            if j:
                row.update(name=layout.group_names[order[j - 1]],
                           cost=float(layout.costs[order[j - 1]]))
            row.update(self.adapter.sequence_figures(self, S, j, metrics))
            prefixes.append(row)
        specialists = metrics.get("specialists")  # (auto: the sets with a specialist)
        return {"version": self.version, "created_at": info.created_at,
                "algorithm": info.algorithm, "prefixes": prefixes,
                **({"specialists": specialists} if specialists else {})}

    def order(self) -> list[int]:
        """The trained sequence of groups (the family's adapter says which)."""
        return self.adapter.order(self)

    def names(self, groups) -> list[str]:
        return [self.layout.group_names[int(g)] for g in groups]
