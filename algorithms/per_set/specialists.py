r"""Specialists: a model trained on exactly the features of one computed set ``S``.

For a set ``S`` of feature groups (columns ``C_S``, the union of its groups' features) two
candidates are fitted on the training rows restricted to ``C_S``:

- *linear*: on standardized columns ``z = (x - mean) / sd`` (``sd`` the population standard
  deviation, 1 where it is 0), regression is ridge,
  ``min_w,b ||y - Z w - b||^2 + alpha ||w||^2`` (intercept unpenalized; solved in closed
  form on the centered columns, O(n k^2 + k^3) for ``k = |C_S|``); classification
  (labels -1 / +1) is L2-logistic regression,
  ``min_w,b C sum_i log(1 + exp(-y_i (z_i w + b))) + ||w||^2 / 2``, by Newton's method with
  a backtracking line search (O(n k^2 + k^3) per step, a few steps). Both equal
  scikit-learn's ``Ridge(alpha)`` / ``LogisticRegression(C)`` on ``StandardScaler``-ed
  columns. The penalty is the one of ``RIDGE_ALPHAS`` / ``LOGISTIC_CS`` with the best
  held-out figure.
- *gbfs*: :class:`~algorithms.gbfs.GBFS` on the columns ``C_S`` only, every group of ``S``
  computed: no masked copies (``masked_copies=0``), no feature penalty, second-order split
  gains, learning rate 0.05, each tree on a random 70 % of the rows (``subsample=0.7``,
  seeded: stochastic gradient boosting, which closed the gap to a LightGBM refit on the
  budgeted-answers benchmark), up to 5,000 trees early-stopped (patience 50) on the
  held-out rows, as a practitioner early-stops LightGBM on a validation split; ``gbfs_params``
  (the GBFS half's) may change any of these but the first two.

The candidate with the better figure on the held-out validation rows (explained variance,
or cross-fitted -log-loss of Platt-calibrated scores: :mod:`algorithms.per_set.figures`)
is kept; ties go to the linear one, and the trees must win by more than ``margin``
standard errors of the mean paired difference of the rows' losses, their losses measured
by cross-fitting (the trees refitted twice, each early-stopped on one half of the
held-out rows and scoring the other: two more fits), since the kept trees' early stopping
read the very rows that compare them. The held-out rows are never trained on; choosing on
them (a penalty, then one of two candidates) biases the kept figure up by the spread of
the candidates (as choosing between the halves does). Scores: the prediction (regression)
or the raw logit / margin (classification), answered on the full-width rows by reading
``C_S`` only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from algorithms.gbfs import GBFS
from algorithms.nvsd._state import get_array, get_number, sub_state
from algorithms.per_set.figures import (
    classification_figures,
    regression_figures,
    row_losses,
    wins_beyond_noise,
)

KINDS = ("linear", "gbfs")
RIDGE_ALPHA = 1.0     # ridge_fit's default penalty on standardized columns
LOGISTIC_C = 1.0      # logistic_fit's default inverse L2 penalty
RIDGE_ALPHAS = (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)   # tried by a specialist (regression)
LOGISTIC_CS = (0.01, 0.1, 1.0, 10.0, 100.0)            # tried by a specialist (classification)
_GBFS_FIXED = {"masked_copies": 0, "feature_penalty": 0.0, "unmasked_trees": False}
_GBFS_DEFAULTS = {"split_gain": "newton", "learning_rate": 0.05, "n_estimators": 5000,
                  "early_stopping_rounds": 50, "subsample": 0.7}   # gbfs_params override these


# ----------------------------------------------------------------------- linear fits
def _standardize(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    mean = X.mean(axis=0)
    sd = X.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    return (X - mean) / sd, mean, sd


def ridge_fit(X: np.ndarray, y: np.ndarray, alpha: float = RIDGE_ALPHA
              ) -> tuple[np.ndarray, float]:
    """``(coef, intercept)`` on the raw columns of ridge with penalty ``alpha`` on the
    standardized columns (module docstring). O(n k^2 + k^3)."""
    Z, mean, sd = _standardize(np.asarray(X, dtype=np.float64))
    y = np.asarray(y, dtype=np.float64)
    y_mean = float(y.mean())
    k = Z.shape[1]
    if k == 0:
        return np.zeros(0), y_mean
    gram = Z.T @ Z + float(alpha) * np.eye(k)
    w = np.linalg.solve(gram, Z.T @ (y - y_mean))
    coef = w / sd
    return coef, y_mean - float(mean @ coef)


def logistic_fit(X: np.ndarray, y: np.ndarray, C: float = LOGISTIC_C, *,
                 max_iter: int = 100, tol: float = 1e-10) -> tuple[np.ndarray, float]:
    """``(coef, intercept)`` on the raw columns of L2-logistic regression on the
    standardized columns, labels -1 / +1 (module docstring): Newton with backtracking,
    stopped when the largest gradient entry is below ``tol * n``. O(n k^2 + k^3) a step."""
    Z, mean, sd = _standardize(np.asarray(X, dtype=np.float64))
    y = np.asarray(y, dtype=np.float64)
    n, k = Z.shape
    A = np.column_stack([Z, np.ones(n)])
    t = (y > 0).astype(np.float64)
    reg = np.ones(k + 1)
    reg[k] = 0.0  # the intercept is not penalized
    C = float(C)

    def loss(theta: np.ndarray) -> float:
        f = A @ theta
        return C * float(np.sum(np.logaddexp(0.0, f) - t * f)) + 0.5 * float(
            reg @ (theta * theta))

    p_mean = min(max(float(t.mean()), 1e-12), 1.0 - 1e-12)
    theta = np.zeros(k + 1)
    theta[k] = np.log(p_mean / (1.0 - p_mean))
    current = loss(theta)
    for _ in range(max_iter):
        f = A @ theta
        p = 1.0 / (1.0 + np.exp(-f))
        grad = C * (A.T @ (p - t)) + reg * theta
        if float(np.max(np.abs(grad))) <= tol * max(n, 1):
            break
        hess = C * (A.T * (p * (1.0 - p))) @ A + np.diag(reg) + 1e-12 * np.eye(k + 1)
        step_dir = -np.linalg.solve(hess, grad)
        slope = float(grad @ step_dir)
        step = 1.0
        while step >= 1e-10:
            candidate = theta + step * step_dir
            new = loss(candidate)
            if new <= current + 1e-4 * step * slope:
                break
            step *= 0.5
        else:
            break
        theta, improved, current = candidate, current - new, new
        if improved <= 1e-15 * max(1.0, abs(current)):
            break
    coef = theta[:k] / sd
    return coef, float(theta[k] - mean @ coef)


# ----------------------------------------------------------------------- one set
class Specialist:
    """The kept model of one set: ``groups`` (sorted ids), ``columns`` (their features,
    sorted), ``kind`` ("linear" | "gbfs"), ``coef`` / ``intercept`` / ``penalty`` (linear:
    ridge alpha or logistic C) or ``trees`` (a GBFS on ``columns``), and its held-out
    ``figure``."""

    def __init__(self, groups: tuple[int, ...], columns: np.ndarray, kind: str, *,
                 coef: np.ndarray | None = None, intercept: float = 0.0,
                 trees: GBFS | None = None, figure: float = float("nan"),
                 penalty: float | None = None) -> None:
        self.groups, self.columns, self.kind = tuple(groups), columns, kind
        self.coef, self.intercept, self.trees, self.figure = coef, float(intercept), trees, \
            float(figure)
        self.penalty = penalty

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """Scores of full-width rows ``X`` from the columns of the set only. O(n k) or
        one tree ensemble's scoring."""
        part = X[:, self.columns]
        if self.kind == "linear":
            return part @ self.coef + self.intercept
        return self.trees.decision_function(part)

    def n_bytes(self) -> int:
        """Approximate bytes of the fitted parameters (the state's arrays)."""
        if self.kind == "linear":
            return int(8 * (self.coef.size + self.columns.size + 1))
        trees = self.trees
        return int(8 * self.columns.size + sum(
            v.nbytes for v in trees.state_dict().values() if isinstance(v, np.ndarray)))

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"kind": KINDS.index(self.kind), "figure": self.figure}
        if self.kind == "linear":
            state.update(coef=np.asarray(self.coef, dtype=np.float64),
                         intercept=self.intercept, penalty=float(self.penalty or 0.0))
        else:
            state.update({f"trees.{k}": v for k, v in self.trees.state_dict().items()})
        return state

    @classmethod
    def from_state_dict(cls, state: dict[str, Any], groups: tuple[int, ...],
                        columns: np.ndarray) -> Specialist:
        kind = get_number(state, "kind", integer=True)
        if kind not in (0, 1):
            raise ValueError("'kind' must be 0 (linear) or 1 (gbfs)")
        figure = state.get("figure")
        if not isinstance(figure, (int, float)) or isinstance(figure, bool):
            raise ValueError("'figure' must be a number")
        if kind == 0:
            coef = get_array(state, "coef", (columns.size,))
            return cls(groups, columns, "linear", coef=coef,
                       intercept=get_number(state, "intercept"), figure=figure,
                       penalty=get_number(state, "penalty"))
        trees = GBFS.from_state_dict(sub_state(state, "trees."))
        if trees.n_features_in_ != columns.size:
            raise ValueError(f"'trees.' must read {columns.size} columns, reads "
                             f"{trees.n_features_in_}")
        return cls(groups, columns, "gbfs", trees=trees, figure=figure)


def _figure(task: str, scores: np.ndarray, y: np.ndarray) -> float:
    if task == "regression":
        return regression_figures(scores, y)[0]
    return -classification_figures(scores, y > 0)[1]


def tree_params(gbfs_params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The keywords of a specialist's GBFS: its defaults, then ``gbfs_params``, then the
    fixed ones (no masking, no penalty)."""
    return {**_GBFS_DEFAULTS, **dict(gbfs_params or {}), **_GBFS_FIXED}


def fit_specialist(X: np.ndarray, y: np.ndarray, X_val: np.ndarray, y_val: np.ndarray,
                   groups: Sequence[np.ndarray], costs: np.ndarray, S: tuple[int, ...],
                   task: str, gbfs_params: Mapping[str, Any] | None = None,
                   progress: Callable[[float], None] | None = None, *,
                   margin: float = 0.0) -> Specialist:
    """The better of the linear and the GBFS candidate for the set ``S`` (non-empty; ids
    into ``groups``) on the held-out rows ``(X_val, y_val)`` (module docstring). ``y``:
    targets, or -1 / +1 labels. Cost: a linear fit per penalty and one GBFS fit on
    ``n x k``."""
    columns = np.sort(np.concatenate([np.asarray(groups[g], dtype=np.int64) for g in S]))
    Xs, Xv = np.ascontiguousarray(X[:, columns]), np.ascontiguousarray(X_val[:, columns])
    fit_linear = ridge_fit if task == "regression" else logistic_fit
    linear = None
    for penalty in RIDGE_ALPHAS if task == "regression" else LOGISTIC_CS:
        coef, intercept = fit_linear(Xs, y, penalty)
        candidate = Specialist(S, columns, "linear", coef=coef, intercept=intercept,
                               penalty=penalty)
        candidate.figure = _figure(task, candidate.decision_function(X_val), y_val)
        if linear is None or candidate.figure > linear.figure + 1e-12:
            linear = candidate
    position = {int(f): j for j, f in enumerate(columns)}
    sub_groups = [[position[int(f)] for f in groups[g]] for g in S]
    params = tree_params(gbfs_params)
    trees = GBFS(loss="squared" if task == "regression" else "logistic",
                 feature_groups=sub_groups, group_costs=np.asarray(costs)[list(S)],
                 **params)
    held = {"X_val": Xv, "y_val": y_val} if trees.early_stopping_rounds is not None else {}
    trees.fit(Xs, y, progress=progress, **held)
    tree_model = Specialist(S, columns, "gbfs", trees=trees)
    tree_scores = trees.decision_function(Xv)
    tree_model.figure = _figure(task, tree_scores, y_val)
    if tree_model.figure <= linear.figure + 1e-12:
        return linear
    if margin > 0:
        if held:   # early-stopped on the held-out rows: judge them cross-fitted
            tree_scores = _cross_fitted_scores(trees, Xs, y, Xv, y_val)
        if not wins_beyond_noise(row_losses(task, tree_scores, y_val),
                                 row_losses(task, linear.decision_function(X_val), y_val),
                                 margin):
            return linear
    return tree_model


def _cross_fitted_scores(trees: GBFS, X: np.ndarray, y: np.ndarray, X_val: np.ndarray,
                         y_val: np.ndarray) -> np.ndarray:
    """Held-out scores of ``trees``' parameters refitted twice, each early-stopped on one
    half of the held-out rows (a seeded permutation) and scoring the other: the trees'
    held-out losses without the optimism of choosing their length on the rows that score
    them. The full fit's scores below 4 held-out rows. Two fits."""
    n = len(y_val)
    if n < 4:
        return trees.decision_function(X_val)
    order = np.random.default_rng(0).permutation(n)
    halves = (order[: n // 2], order[n // 2:])
    scores = np.empty(n, dtype=np.float64)
    for stop_on, score_on in (halves, halves[::-1]):
        half = type(trees)(**trees.get_params())   # an unfitted copy (algorithms.batch)
        half.fit(X, y, X_val=X_val[stop_on], y_val=y_val[stop_on])
        scores[score_on] = half.decision_function(X_val[score_on])
    return scores


def clean_sets(sets: Any, n_groups: int, limit: int) -> list[tuple[int, ...]]:
    """``sets`` (iterables of group ids) as distinct non-empty sorted tuples, in their
    order, the first ``limit``; ValueError naming the first bad entry."""
    if sets is None:
        return []
    if isinstance(sets, (str, bytes)) or not isinstance(sets, Sequence):
        raise ValueError(f"specialist_sets must be a list of lists of group ids, got "
                         f"{sets!r}")
    out: list[tuple[int, ...]] = []
    for entry in sets:
        if isinstance(entry, (str, bytes)) or not hasattr(entry, "__iter__"):
            raise ValueError(f"specialist_sets must hold lists of group ids, got {entry!r}")
        ids = set()
        for g in entry:
            if isinstance(g, (bool, np.bool_)) or not isinstance(g, (int, np.integer)) \
                    or not 0 <= g < n_groups:
                raise ValueError(f"specialist_sets: {g!r} is not a group id in "
                                 f"[0, {n_groups})")
            ids.add(int(g))
        key = tuple(sorted(ids))
        if key and key not in out:
            out.append(key)
    return out[:limit]


__all__ = ["KINDS", "LOGISTIC_C", "LOGISTIC_CS", "RIDGE_ALPHA", "RIDGE_ALPHAS", "Specialist",
           "clean_sets", "fit_specialist", "logistic_fit", "ridge_fit", "tree_params"]
