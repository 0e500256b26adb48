r"""Honest validation figures of a scorer for any computed set of feature groups.

A *scorer* ``score(X, S) -> (n,)`` answers rows ``X`` knowing only the groups ``S`` (a
sorted tuple of group ids). :class:`SetFigures` measures it on held-out validation rows
``(X_val, y_val)`` for exactly the set ``S``, caches the result per set (bounded LRU,
thread-safe) and chooses the group to compute next by validation gain per unit cost.

Regression (the score is the prediction ``s``), over the ``n`` validation rows:

    MSE = 1/n sum_i (s_i - y_i)^2,   RMSE = sqrt(MSE),
    EV  = 1 - MSE / Var(y_val)       (population variance; 1 - MSE when y_val is constant).

Classification (labels ``y_i`` in {-1, +1}; the score is any real number, larger = more
positive) goes through Platt's calibration (J. Platt, "Probabilistic outputs for support
vector machines and comparisons to regularized likelihood methods", 1999):
``p(s) = sigmoid(a s + b)`` with ``(a, b)`` minimizing the cross-entropy against Platt's
smoothed targets

    t_i = (N+ + 1) / (N+ + 2) if y_i = +1,    t_i = 1 / (N- + 2) if y_i = -1,
    L(a, b) = sum_i [softplus(f_i) - t_i f_i],   f_i = a s_i + b,

(``N+``, ``N-``: the positives and negatives among the rows fitted), by Newton's method with
a backtracking line search (as H.-T. Lin, C.-J. Lin and R. C. Weng, "A note on Platt's
probabilistic outputs for support vector machines", 2007, recommend) on the standardized
score ``z = (s - mean s) / sd s``; gradient ``sum_i (p_i - t_i) (z_i, 1)``, Hessian
``sum_i p_i (1 - p_i) (z_i, 1)(z_i, 1)^T`` (+ 1e-12 n on its diagonal). Guards: every
target lies strictly inside (0, 1), so ``L`` is coercive and its minimizer finite even when
the scores separate the classes; a constant score (``sd <= 1e-12 max(1, |mean s|)``) gets
``a = 0`` and ``b = logit(mean t)``. Cost O(n) per Newton step, a handful of steps.

Reported classification figures are *cross-fitted* (default ``cross_fit=True``): the rows
are split by position parity into two folds, Platt is fitted on each fold and applied to the
other, and ``error`` (0/1 error of the calibrated label ``p >= 1/2``, i.e. ``f >= 0``) and
``log_loss`` (mean ``-[y log p + (1 - y) log(1 - p)]`` against the hard labels) are measured
on these out-of-fold probabilities, so fitting the two Platt parameters on the same rows does
not flatter them (each fold's fit sees n/2 rows: a slight pessimism of order 2/n instead of
the in-sample optimism of order 2/n). The ``(a, b)`` served by :meth:`SetFigures.probabilities`
is one fit on all validation rows. With ``cross_fit=False``, or fewer than 4 rows, the figures
are in-sample (optimistic by a 2-parameter fit on ``n`` rows; ``cross_fitted`` says which).

What is *not* corrected: choosing among candidates (groups, or two models) by the same
validation rows selects on their noise; the figure of a winner is biased up by the spread of
the candidates' errors.

Cost per set ``S`` on a miss: one scorer call on the ``n`` validation rows, then O(n) numpy
(regression) or three Platt fits (O(n) per Newton step); a hit is a dict lookup. No Python
loop runs per row.
"""

from __future__ import annotations

import math
import numbers
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.special import expit

from algorithms.batch import cost_slack

TASKS = ("regression", "classification")
ZERO_COST_EPSILON = 1e-9   # a zero cost counts as this times the largest cost (or 1)
_CONSTANT_SCORE = 1e-12
_HESSIAN_RIDGE = 1e-12


# --------------------------------------------------------------------------- Platt
def platt_targets(positive: np.ndarray) -> np.ndarray:
    """Platt's smoothed targets: ``(N+ + 1)/(N+ + 2)`` for the positives, ``1/(N- + 2)``
    for the negatives (``positive``: bool (n,)). O(n)."""
    positive = np.asarray(positive, dtype=bool)
    n_pos = int(np.count_nonzero(positive))
    n_neg = positive.size - n_pos
    return np.where(positive, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))


def _cross_entropy(f: np.ndarray, t: np.ndarray) -> float:
    """``sum_i softplus(f_i) - t_i f_i`` (the cross-entropy of sigmoid(f) against t)."""
    return float(np.sum(np.logaddexp(0.0, f) - t * f))


def platt_fit(scores: np.ndarray, positive: np.ndarray, *, smoothed: bool = True,
              max_iter: int = 100, tol: float = 1e-12) -> tuple[float, float]:
    """``(a, b)`` of ``p = sigmoid(a s + b)`` minimizing the cross-entropy of ``p`` against
    Platt's smoothed targets (``smoothed=False``: the hard labels, i.e. unregularized
    1-D logistic regression, whose minimizer is infinite when the scores separate the
    classes: then the iterations stop at ``max_iter`` with large finite values).

    Newton's method with backtracking (Armijo) on the standardized score, stopped when the
    mean gradient is below ``tol`` or a step no longer lowers the loss; see the module
    docstring for the formulas and guards. O(n) per step."""
    s = np.asarray(scores, dtype=np.float64).ravel()
    positive = np.asarray(positive, dtype=bool).ravel()
    n = s.size
    if n == 0 or positive.size != n:
        raise ValueError("platt_fit needs as many labels as scores, at least one")
    t = platt_targets(positive) if smoothed else positive.astype(np.float64)
    mean_t = min(max(float(np.mean(t)), 1e-12), 1.0 - 1e-12)
    b0 = math.log(mean_t / (1.0 - mean_t))
    m = float(np.mean(s))
    sd = float(np.std(s))
    if not sd > _CONSTANT_SCORE * max(1.0, abs(m)):
        return 0.0, b0
    z = (s - m) / sd
    alpha, beta = 0.0, b0
    loss = _cross_entropy(beta + alpha * z, t)
    ridge = _HESSIAN_RIDGE * n
    for _ in range(max_iter):
        f = alpha * z + beta
        p = expit(f)
        r = p - t
        g_a, g_b = float(r @ z), float(np.sum(r))
        if max(abs(g_a), abs(g_b)) <= tol * n:
            break
        w = p * (1.0 - p)
        h_aa, h_ab, h_bb = float(w @ (z * z)) + ridge, float(w @ z), float(np.sum(w)) + ridge
        det = h_aa * h_bb - h_ab * h_ab
        if not det > 0:
            break
        d_a = -(h_bb * g_a - h_ab * g_b) / det
        d_b = -(h_aa * g_b - h_ab * g_a) / det
        slope = g_a * d_a + g_b * d_b
        step = 1.0
        while step >= 1e-10:
            new_alpha, new_beta = alpha + step * d_a, beta + step * d_b
            new_loss = _cross_entropy(new_alpha * z + new_beta, t)
            if new_loss <= loss + 1e-4 * step * slope:
                break
            step *= 0.5
        else:
            break
        alpha, beta, improved = new_alpha, new_beta, loss - new_loss
        loss = new_loss
        if improved <= 1e-15 * max(1.0, abs(loss)) and step < 1.0:
            break
    return alpha / sd, beta - alpha * m / sd


def mean_log_loss(logits: np.ndarray, positive: np.ndarray) -> float:
    """Mean ``-[y log p + (1 - y) log(1 - p)]`` of ``p = sigmoid(logits)`` against the
    labels ``positive`` (bool), computed stably as ``softplus(f) - y f``. O(n)."""
    f = np.asarray(logits, dtype=np.float64)
    return float(np.mean(np.logaddexp(0.0, f) - np.asarray(positive, dtype=np.float64) * f))


# ------------------------------------------------------------------ one set's figures
@dataclass(frozen=True)
class ValidationFigures:
    """The validation figures of one computed set ``groups`` (cost ``cost``, ``n_rows``
    rows). ``figure`` is what comparisons use: ``explained_variance`` (regression) or
    ``-log_loss`` (classification). Regression fills ``explained_variance`` and ``rmse``;
    classification ``error``, ``log_loss`` (cross-fitted when ``cross_fitted``) and the
    served calibration ``platt_a``, ``platt_b``."""

    task: str
    groups: tuple[int, ...]
    cost: float
    n_rows: int
    figure: float
    explained_variance: float | None = None
    rmse: float | None = None
    error: float | None = None
    log_loss: float | None = None
    platt_a: float | None = None
    platt_b: float | None = None
    cross_fitted: bool | None = None

    def logits(self, scores: np.ndarray) -> np.ndarray:
        """Calibrated logits ``a s + b`` (classification) of raw scores."""
        if self.platt_a is None:
            raise ValueError("calibration exists for classification only")
        return self.platt_a * np.asarray(scores, dtype=np.float64) + self.platt_b

    def as_dict(self) -> dict[str, Any]:
        """The fields as a dict (``groups`` as a list)."""
        out = asdict(self)
        out["groups"] = list(self.groups)
        return out


def regression_figures(scores: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """``(explained variance, RMSE)`` of predictions ``scores`` against ``y``; a constant
    ``y`` divides by 1 instead of its zero variance. O(n)."""
    mse = float(np.mean((scores - y) ** 2))
    var = float(np.mean((y - np.mean(y)) ** 2))
    return 1.0 - mse / (var if var > 0 else 1.0), math.sqrt(mse)


def classification_figures(scores: np.ndarray, positive: np.ndarray, *, cross_fit: bool = True
                           ) -> tuple[float, float, float, float, bool]:
    """``(error, log_loss, a, b, cross_fitted)``: Platt's ``(a, b)`` on all rows; error and
    log-loss of the calibrated probabilities, out of fold (two folds by row parity) when
    ``cross_fit`` and there are at least 4 rows, else in-sample. O(n) per Newton step."""
    a, b = platt_fit(scores, positive)
    crossed = cross_fit and scores.size >= 4
    logits = cross_fitted_logits(scores, positive) if crossed else a * scores + b
    error = float(np.mean((logits >= 0.0) != positive))
    return error, mean_log_loss(logits, positive), a, b, crossed


def cross_fitted_logits(scores: np.ndarray, positive: np.ndarray) -> np.ndarray:
    """Out-of-fold Platt logits: two folds by row parity, each calibrated on the other
    (at least 4 rows). O(n) per Newton step."""
    logits = np.empty(scores.size)
    for fold in (0, 1):
        fit_rows, out_rows = slice(1 - fold, None, 2), slice(fold, None, 2)
        fa, fb = platt_fit(scores[fit_rows], positive[fit_rows])
        logits[out_rows] = fa * scores[out_rows] + fb
    return logits


def row_losses(task: str, scores: np.ndarray, y: np.ndarray, *, cross_fit: bool = True
               ) -> np.ndarray:
    """Each held-out row's share of the comparison figure, as a loss: regression
    ``(s_i - y_i)^2 / Var(y)`` (their mean is ``1 - EV``), classification the row's
    log-loss of the cross-fitted calibrated probability (their mean is ``-figure``;
    in-sample calibration below 4 rows or without ``cross_fit``). A paired difference of
    two models' row losses has the figures' difference as its mean and gives its standard
    error. O(n)."""
    scores = np.asarray(scores, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if task == "regression":
        var = float(np.mean((y - np.mean(y)) ** 2))
        return (scores - y) ** 2 / (var if var > 0 else 1.0)
    positive = y > 0
    if cross_fit and scores.size >= 4:
        f = cross_fitted_logits(scores, positive)
    else:
        a, b = platt_fit(scores, positive)
        f = a * scores + b
    return np.logaddexp(0.0, f) - positive * f


def wins_beyond_noise(challenger: np.ndarray, incumbent: np.ndarray, margin: float,
                      tolerance: float = 1e-12) -> bool:
    """Whether row losses ``challenger`` beat ``incumbent`` (paired, same rows) by more
    than ``margin`` standard errors of the mean paired difference (and more than
    ``tolerance``): the one-standard-error rule of model choice (Breiman et al.,
    "Classification and Regression Trees", 1984) with ``margin = 1``; ``margin = 0``
    is the plain comparison. O(n)."""
    diff = np.asarray(incumbent, dtype=np.float64) - np.asarray(challenger, dtype=np.float64)
    gain = float(np.mean(diff))
    if gain <= tolerance:
        return False
    if margin <= 0 or diff.size < 2:
        return True
    return gain > margin * float(np.std(diff, ddof=1)) / math.sqrt(diff.size)


# -------------------------------------------------------------------- next group
def best_next_group(figure: Callable[[tuple[int, ...]], float], computed: tuple[int, ...],
                    costs: np.ndarray, max_cost: float | None = None
                    ) -> tuple[int, float] | None:
    """``(g, gain)`` maximizing ``gain / cost`` over the groups ``g`` not in ``computed``
    with ``cost(computed) + c_g <= max_cost`` (no cap when None; 1e-12 relative slack),
    where ``gain = figure(computed + g) - figure(computed)``; None when no group is left or
    fits. A zero cost counts as ``ZERO_COST_EPSILON`` times the largest cost (1 when all are
    zero): a free group with a positive gain outranks every paid one, with a negative gain
    ranks below them. Ties: the lower group id. ``figure`` is called once per candidate
    plus once for ``computed``."""
    costs = np.asarray(costs, dtype=np.float64)
    have = set(computed)
    spent = float(sum(costs[g] for g in have))
    candidates = [g for g in range(costs.size) if g not in have]
    if max_cost is not None:
        room = float(max_cost) - spent + cost_slack(max_cost)
        candidates = [g for g in candidates if costs[g] <= room]
    if not candidates:
        return None
    base = figure(tuple(sorted(have)))
    epsilon = ZERO_COST_EPSILON * (float(costs.max()) if costs.max() > 0 else 1.0)
    best: tuple[float, int, float] | None = None
    for g in candidates:
        gain = figure(tuple(sorted(have | {g}))) - base
        ratio = gain / max(float(costs[g]), epsilon)
        if best is None or ratio > best[0]:
            best = (ratio, g, gain)
    assert best is not None
    return best[1], best[2]


def group_ids(computed_groups: Iterable[Any] | None, n_groups: int) -> tuple[int, ...]:
    """``computed_groups`` as a sorted tuple of distinct ids in ``[0, n_groups)`` (None:
    every group); ValueError for anything else."""
    if computed_groups is None:
        return tuple(range(n_groups))
    if isinstance(computed_groups, (str, bytes)):
        raise ValueError(f"computed_groups must be group ids, got {computed_groups!r}")
    ids = set()
    for g in computed_groups:
        if isinstance(g, (bool, np.bool_)) or not isinstance(g, numbers.Integral) or \
                not 0 <= g < n_groups:
            raise ValueError(f"computed_groups must hold group ids in [0, {n_groups}), "
                             f"got {g!r}")
        ids.add(int(g))
    return tuple(sorted(ids))


# ------------------------------------------------------------------------- the class
class CachedSetFigures:
    """What the binary and the K-class set figures share: sets as sorted group ids, their
    cost, and a bounded LRU cache of each set's figures (thread-safe: a miss is computed
    outside the lock and the first result stored wins, so two threads asking for one set
    get one object). A subclass sets ``groups``, ``costs``, ``cache_size``, ``_cache`` and
    ``_lock`` and defines ``validation_scores(S)`` and ``_measure(S, scores)``."""

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_lock"]   # a lock does not pickle: a new one on loading
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def n_groups(self) -> int:
        return len(self.groups)

    def key(self, computed_groups: Iterable[int] | None) -> tuple[int, ...]:
        """The cache key of a set: sorted distinct ids (None: every group)."""
        return group_ids(computed_groups, self.n_groups)

    def cost(self, computed_groups: Iterable[int] | None) -> float:
        """Total cost of the set. O(|S|)."""
        return float(sum(self.costs[g] for g in self.key(computed_groups)))

    def _store(self, S: tuple[int, ...], entry):
        """``entry`` cached for ``S`` unless another thread stored one first (returned)."""
        with self._lock:
            hit = self._cache.get(S)
            if hit is not None:
                return hit
            if self.cache_size:
                self._cache[S] = entry
                if len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return entry

    def figures(self, computed_groups: Iterable[int] | None):
        """The validation figures of exactly the set (cached; a miss costs one scorer call
        plus O(n) numpy, see the module docstring)."""
        S = self.key(computed_groups)
        with self._lock:
            hit = self._cache.get(S)
            if hit is not None:
                self._cache.move_to_end(S)
                return hit
        return self._store(S, self._measure(S, self.validation_scores(S)))

    def figures_with_scores(self, computed_groups: Iterable[int] | None):
        """``(figures, raw validation scores)`` of the set with one scorer call; the
        figures are cached as :meth:`figures` caches them (the first stored wins)."""
        S = self.key(computed_groups)
        scores = self.validation_scores(S)
        return self._store(S, self._measure(S, scores)), scores

    def figure(self, computed_groups: Iterable[int] | None) -> float:
        """The comparison figure of the set: explained variance or -log-loss."""
        return self.figures(computed_groups).figure

    def next_group(self, computed_groups: Iterable[int] | None = (), *,
                   max_cost: float | None = None) -> tuple[int, float] | None:
        """``(g, gain)``: the group not in ``S`` (within ``max_cost - cost(S)``; no cap when
        None) with the largest validation gain per unit cost, ``gain = figure(S + g) -
        figure(S)`` (:func:`best_next_group`); None when nothing fits or no group is left.
        One scorer call per candidate (and one for ``S``) on a cache miss."""
        S = self.key(computed_groups if computed_groups is not None else ())
        return best_next_group(self.figure, S, self.costs, max_cost)

    def cache_len(self) -> int:
        """Number of sets cached now."""
        with self._lock:
            return len(self._cache)


class SetFigures(CachedSetFigures):
    """Validation figures of ``score`` for any computed set, cached per set.

    Parameters
    ----------
    score : callable ``(X, S) -> (n,)``
        Raw scores of rows ``X`` knowing the groups ``S`` (a sorted tuple of group ids).
    X_val, y_val : validation rows (float64, n x D; NaN only where ``score`` handles it)
        and targets (classification: labels -1.0 / +1.0).
    task : "regression" | "classification"
    groups : list of feature-index arrays (the layout; only their number matters here)
    costs : one cost >= 0 per group
    cross_fit : report cross-fitted classification figures (module docstring)
    cache_size : sets kept (least recently used dropped first); 0 keeps none

    Reads are thread-safe: the cache is guarded by a lock, a miss is computed outside it
    and the first result stored wins, so two threads asking for one set get one object.
    """

    def __init__(self, score: Callable[[np.ndarray, tuple[int, ...]], np.ndarray],
                 X_val: np.ndarray, y_val: np.ndarray, *, task: str,
                 groups: Sequence[Sequence[int]], costs: Sequence[float],
                 cross_fit: bool = True, cache_size: int = 1024) -> None:
        if task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {task!r}")
        X_val = np.asarray(X_val, dtype=np.float64)
        y_val = np.asarray(y_val, dtype=np.float64).ravel()
        if X_val.ndim != 2 or X_val.shape[0] < 1 or y_val.shape != (X_val.shape[0],):
            raise ValueError(f"need X_val of shape (n >= 1, D) and y_val (n,), got "
                             f"{X_val.shape} and {y_val.shape}")
        if not np.all(np.isfinite(y_val)):
            raise ValueError("y_val holds NaN or infinite values")
        if task == "classification" and not np.all(np.abs(y_val) == 1.0):
            raise ValueError("classification labels must be -1.0 or +1.0")
        costs = np.asarray(costs, dtype=np.float64).ravel()
        self.groups = [np.asarray(g, dtype=np.int64).ravel() for g in groups]
        if costs.shape != (len(self.groups),) or not np.all(np.isfinite(costs)) \
                or np.any(costs < 0):
            raise ValueError(f"costs must be {len(self.groups)} finite numbers >= 0")
        if isinstance(cache_size, bool) or not isinstance(cache_size, numbers.Integral) \
                or cache_size < 0:
            raise ValueError(f"cache_size must be an integer >= 0, got {cache_size!r}")
        self.score, self.task, self.costs = score, task, costs
        self.X_val, self.y_val = X_val, y_val
        self.positive = y_val > 0
        self.cross_fit, self.cache_size = bool(cross_fit), int(cache_size)
        self._cache: OrderedDict[tuple[int, ...], ValidationFigures] = OrderedDict()
        self._lock = threading.Lock()

    def validation_scores(self, computed_groups: Iterable[int] | None) -> np.ndarray:
        """Raw scores of the validation rows for the set (one scorer call, not cached)."""
        S = self.key(computed_groups)
        scores = np.asarray(self.score(self.X_val, S), dtype=np.float64).ravel()
        if scores.shape != self.y_val.shape or not np.all(np.isfinite(scores)):
            raise ValueError(f"the scorer must return {self.y_val.size} finite scores for "
                             f"{S}, got shape {scores.shape}")
        return scores

    def _measure(self, S: tuple[int, ...], scores: np.ndarray) -> ValidationFigures:
        common = {"task": self.task, "groups": S, "cost": self.cost(S),
                  "n_rows": int(scores.size)}
        if self.task == "regression":
            ev, rmse = regression_figures(scores, self.y_val)
            return ValidationFigures(**common, figure=ev, explained_variance=ev, rmse=rmse)
        error, log_loss, a, b, crossed = classification_figures(
            scores, self.positive, cross_fit=self.cross_fit)
        return ValidationFigures(**common, figure=-log_loss, error=error, log_loss=log_loss,
                                 platt_a=a, platt_b=b, cross_fitted=crossed)

    def row_losses(self, computed_groups: Iterable[int] | None) -> np.ndarray:
        """Each validation row's loss for the set (:func:`row_losses`; their mean is
        ``1 - figure`` or ``-figure``): one scorer call, not cached."""
        return row_losses(self.task, self.validation_scores(computed_groups), self.y_val,
                          cross_fit=self.cross_fit)

    def probabilities(self, scores: np.ndarray, computed_groups: Iterable[int] | None
                      ) -> np.ndarray:
        """Calibrated ``P(y = +1)`` of new raw ``scores`` of the set (classification):
        ``sigmoid(a s + b)`` with the set's Platt fit on all validation rows. O(n)."""
        if self.task != "classification":
            raise ValueError("probabilities need task='classification'")
        return expit(self.figures(computed_groups).logits(scores))


__all__ = ["TASKS", "ZERO_COST_EPSILON", "CachedSetFigures", "SetFigures", "ValidationFigures",
           "best_next_group", "classification_figures", "cross_fitted_logits", "group_ids",
           "mean_log_loss", "platt_fit", "platt_targets", "regression_figures", "row_losses",
           "wins_beyond_noise"]
