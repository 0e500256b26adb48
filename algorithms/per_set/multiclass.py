r"""Honest validation figures of a K-class scorer for any computed set of feature groups.

The multi-class counterpart of :class:`algorithms.per_set.figures.SetFigures`: a scorer
``score(X, S) -> (n, K)`` gives class scores (e.g. a softmax GBFS's ``H(x)``) of rows
knowing only the groups ``S``; labels are class indices ``y_i in {0..K-1}``.

Calibration per set is temperature scaling (C. Guo, G. Pleiss, Y. Sun, K. Q. Weinberger,
"On calibration of modern neural networks", ICML 2017): ``p(H) = softmax(a H)`` with one
parameter ``a >= 0`` (the inverse temperature) minimizing the cross-entropy against smoothed
targets that generalize Platt's (K = 2 gives exactly his): a row of class ``y`` puts
``1 / (N_y + 2)`` of its mass, shared equally, on the other K - 1 classes,

    t_ik = (N_k + 1) / (N_k + 2) if y_i = k,   t_ik = 1 / ((N_{y_i} + 2)(K - 1)) otherwise,
    L(a) = sum_i [logsumexp_k(a H_ik) - sum_k t_ik a H_ik],

(``N_k``: the rows of class ``k`` among those fitted). ``L`` is convex in ``a`` with
``L'(a) = sum_i (E_{p_i}[H_i] - E_{t_i}[H_i])`` and ``L''(a) = sum_i Var_{p_i}(H_i)``;
projected Newton with backtracking from ``a = 1`` on ``a >= 0``. Every target lies
strictly inside (0, 1), so the minimizer is finite even when the scores separate the
classes. Rows whose scores are equal for every class (``max_i Var_k H_ik <= 1e-24``) leave
``a = 1``. O(n K) per Newton step, a handful of steps.

Reported figures are cross-fitted as the binary ones are: two folds by row parity, ``a``
fitted on each and applied to the other; ``error`` (0/1 error of ``argmax_k H_ik``, which
no ``a > 0`` changes) and ``log_loss`` (mean ``-log p_i(y_i)``) on these out-of-fold
probabilities; the served ``a`` is one fit on all rows. Fewer than 4 rows: in-sample.

Cost per set on a miss: one scorer call on the ``n`` validation rows and three
temperature fits; a hit is a dict lookup.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import log_softmax, softmax

from algorithms.per_set.figures import CachedSetFigures

_FLAT = 1e-24


def smoothed_targets(y: np.ndarray, n_classes: int) -> np.ndarray:
    """The (n, K) smoothed targets of the module docstring. O(n K)."""
    y = np.asarray(y, dtype=np.int64)
    counts = np.bincount(y, minlength=n_classes).astype(np.float64)
    denominator = counts[y] + 2.0
    t = np.repeat((1.0 / (denominator * (n_classes - 1)))[:, None], n_classes, axis=1)
    t[np.arange(y.size), y] = (counts[y] + 1.0) / denominator
    return t


def _loss(a: float, H: np.ndarray, t: np.ndarray) -> float:
    f = a * H
    return float(np.sum(np.logaddexp.reduce(f, axis=1) - np.sum(t * f, axis=1)))


def temperature_fit(scores: np.ndarray, y: np.ndarray, n_classes: int, *,
                    max_iter: int = 100, tol: float = 1e-12) -> float:
    """``a >= 0`` of ``softmax(a H)`` minimizing the smoothed cross-entropy (module
    docstring). ``scores`` (n, K), ``y`` class indices (n,). O(n K) per step."""
    H = np.asarray(scores, dtype=np.float64)
    H = H - H.mean(axis=1, keepdims=True)  # softmax is shift-invariant per row
    if H.shape[0] == 0 or float(np.max(np.var(H, axis=1))) <= _FLAT:
        return 1.0
    t = smoothed_targets(y, n_classes)
    tH = np.sum(t * H, axis=1)
    a, loss = 1.0, _loss(1.0, H, t)
    n = H.shape[0]
    for _ in range(max_iter):
        p = softmax(a * H, axis=1)
        mean = np.sum(p * H, axis=1)
        gradient = float(np.sum(mean - tH))
        if abs(gradient) <= tol * n or (a == 0.0 and gradient > 0):
            break
        curvature = float(np.sum(np.sum(p * H * H, axis=1) - mean * mean)) + 1e-12 * n
        step_to = max(0.0, a - gradient / curvature)
        step = 1.0
        while step >= 1e-10:
            candidate = a + step * (step_to - a)
            new = _loss(candidate, H, t)
            if new <= loss + 1e-4 * step * gradient * (step_to - a):
                break
            step *= 0.5
        else:
            break
        improved = loss - new
        a, loss = candidate, new
        if improved <= 1e-15 * max(1.0, abs(loss)):
            break
    return float(a)


def mean_log_loss(logits: np.ndarray, y: np.ndarray) -> float:
    """Mean ``-log softmax(logits)_i(y_i)``, computed stably. O(n K)."""
    picked = np.take_along_axis(log_softmax(np.asarray(logits, dtype=np.float64), axis=1),
                                np.asarray(y, dtype=np.int64)[:, None], axis=1)
    return float(-np.mean(picked))


@dataclass(frozen=True)
class MulticlassFigures:
    """The validation figures of one computed set: ``error`` and ``log_loss`` (cross-fitted
    when ``cross_fitted``), ``figure = -log_loss`` (what comparisons use) and the served
    inverse temperature ``temperature_a``."""

    task: str
    groups: tuple[int, ...]
    cost: float
    n_rows: int
    figure: float
    error: float
    log_loss: float
    temperature_a: float
    cross_fitted: bool
    explained_variance: None = None
    rmse: None = None

    def logits(self, scores: np.ndarray) -> np.ndarray:
        """Calibrated logits ``a H`` of raw class scores (n, K)."""
        return self.temperature_a * np.asarray(scores, dtype=np.float64)


def multiclass_figures(scores: np.ndarray, y: np.ndarray, n_classes: int, *,
                       cross_fit: bool = True) -> tuple[float, float, float, bool]:
    """``(error, log_loss, a, cross_fitted)`` of class scores (n, K) against class
    indices ``y`` (module docstring). O(n K) per Newton step."""
    a = temperature_fit(scores, y, n_classes)
    n = scores.shape[0]
    if cross_fit and n >= 4:
        logits = np.empty_like(scores)
        for fold in (0, 1):
            fit_rows, out_rows = slice(1 - fold, None, 2), slice(fold, None, 2)
            logits[out_rows] = temperature_fit(scores[fit_rows], y[fit_rows],
                                               n_classes) * scores[out_rows]
        crossed = True
    else:
        logits, crossed = a * scores, False
    error = float(np.mean(np.argmax(scores, axis=1) != y))
    return error, mean_log_loss(logits, y), a, crossed


class MulticlassSetFigures(CachedSetFigures):
    """Validation figures of a K-class ``score`` for any computed set, cached per set
    (bounded LRU, thread-safe as :class:`~algorithms.per_set.figures.SetFigures`).

    ``score(X, S) -> (n, K)``; ``y_val`` class indices in ``0..n_classes-1``; ``groups``
    and ``costs`` one per group; ``next_group`` by validation gain of ``-log_loss`` per
    unit cost (:func:`~algorithms.per_set.figures.best_next_group`)."""

    def __init__(self, score: Callable[[np.ndarray, tuple[int, ...]], np.ndarray],
                 X_val: np.ndarray, y_val: np.ndarray, *, n_classes: int,
                 groups: Sequence[Sequence[int]], costs: Sequence[float],
                 cross_fit: bool = True, cache_size: int = 1024) -> None:
        X_val = np.asarray(X_val, dtype=np.float64)
        y = np.asarray(y_val, dtype=np.float64).ravel()
        if X_val.ndim != 2 or X_val.shape[0] < 1 or y.shape != (X_val.shape[0],):
            raise ValueError(f"need X_val of shape (n >= 1, D) and y_val (n,), got "
                             f"{X_val.shape} and {y.shape}")
        if n_classes < 2 or not np.all((y == np.round(y)) & (y >= 0) & (y < n_classes)):
            raise ValueError(f"y_val must hold class indices in [0, {n_classes})")
        costs = np.asarray(costs, dtype=np.float64).ravel()
        self.groups = [np.asarray(g, dtype=np.int64).ravel() for g in groups]
        if costs.shape != (len(self.groups),) or not np.all(np.isfinite(costs)) \
                or np.any(costs < 0):
            raise ValueError(f"costs must be {len(self.groups)} finite numbers >= 0")
        self.score, self.task, self.costs = score, "classification", costs
        self.n_classes = int(n_classes)
        self.X_val, self.y_val = X_val, y.astype(np.int64)
        self.cross_fit, self.cache_size = bool(cross_fit), int(cache_size)
        self._cache: OrderedDict[tuple[int, ...], MulticlassFigures] = OrderedDict()
        self._lock = threading.Lock()

    def validation_scores(self, computed_groups: Iterable[int] | None) -> np.ndarray:
        """Raw class scores (n, K) of the validation rows for the set (not cached)."""
        S = self.key(computed_groups)
        scores = np.asarray(self.score(self.X_val, S), dtype=np.float64)
        if scores.shape != (self.y_val.size, self.n_classes) or \
                not np.all(np.isfinite(scores)):
            raise ValueError(f"the scorer must return ({self.y_val.size}, {self.n_classes}) "
                             f"finite scores for {S}, got shape {scores.shape}")
        return scores

    def _measure(self, S: tuple[int, ...], scores: np.ndarray) -> MulticlassFigures:
        error, log_loss, a, crossed = multiclass_figures(scores, self.y_val, self.n_classes,
                                                         cross_fit=self.cross_fit)
        if not math.isfinite(log_loss):
            raise ValueError(f"the log-loss of {S} is not finite")
        return MulticlassFigures(task=self.task, groups=S, cost=self.cost(S),
                                 n_rows=int(scores.shape[0]), figure=-log_loss, error=error,
                                 log_loss=log_loss, temperature_a=a, cross_fitted=crossed)

    def probabilities(self, scores: np.ndarray, computed_groups: Iterable[int] | None
                      ) -> np.ndarray:
        """Calibrated class probabilities (n, K) of new raw scores of the set. O(n K)."""
        return softmax(self.figures(computed_groups).logits(scores), axis=1)


__all__ = ["MulticlassFigures", "MulticlassSetFigures", "mean_log_loss", "multiclass_figures",
           "smoothed_targets", "temperature_fit"]
