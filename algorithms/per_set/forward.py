r"""Forward selection over specialists: the sets worth a model of their own, chosen by a
refit on exactly each candidate set.

The per-set rules (``SetFigures.next_group``, ``PerSetChoice.sequence_``) rank a candidate
set ``S + g`` by a model fitted once for every set (masked trees or a linear refit). With
few groups computed that model is weakest, and its ranking decides the first groups every
example computes. Here every candidate is ranked by the held-out figure of a
*specialist*, the better of a linear and a tree model trained on exactly its features
(:func:`~algorithms.per_set.specialists.fit_specialist`):

    S_0 = {},   S_{t+1} = S_t + argmax_g [F(S_t + g) - F(S_t)] / c_g   (g not in S_t,
                                                                         within max_cost)

with ``F`` the held-out figure (explained variance, or -log-loss of Platt-calibrated scores,
cross-fitted over two folds of the held-out rows) and ``F({})`` that of a constant (the
training mean); the ratio, its zero-cost rule and ties (lower id) are
:func:`~algorithms.per_set.figures.best_next_group`'s. With ``folds = K >= 2``, ``F(T)`` is
instead the row-weighted mean over a seeded K-fold partition of the training and held-out
rows together of the figure on each fold of a specialist trained on the other folds (its
trees early-stopped on that fold): K times the work for a ranking with about
``n_val / (n + n_val)`` of the single split's variance, the choice among near-equal
candidates being the noisy part of a greedy path. ``shortlist = M`` then ranks only the
M candidates with the best ratio on the single split on the folds (the rest cannot win):
``J + M K`` fits a step instead of ``J K``.

The prefixes ``S_1, ..., S_steps`` are meant as ``PerSetChoice(specialist_sets=...)``:
refitted there on the training rows, each answers its own set when it beats both halves
on the validation rows, and the combined sequence then follows the path wherever the
specialists win. Cost: ``steps * J * max(1, K)`` specialist fits (``steps * (J + M K)``
with a shortlist; a few logistic or ridge fits and one early-stopped GBFS on ``|C_S|``
columns each); memory: one specialist at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from algorithms.per_set.figures import best_next_group
from algorithms.per_set.specialists import _figure, fit_specialist


@dataclass(frozen=True)
class ForwardPath:
    """``sets``: the prefixes ``S_1 .. S_m`` (sorted group ids), ``order``: the group added
    at each step, ``figures``: ``F(S_0) .. F(S_m)`` (length m + 1)."""

    sets: tuple[tuple[int, ...], ...]
    order: tuple[int, ...]
    figures: tuple[float, ...]


def forward_specialist_sets(X: np.ndarray, y: np.ndarray, X_val: np.ndarray,
                            y_val: np.ndarray, *, groups: Sequence[Sequence[int]],
                            costs: Sequence[float] | None = None, task: str, steps: int,
                            max_cost: float | None = None, folds: int | None = None,
                            shortlist: int | None = None, random_state: int = 0,
                            gbfs_params: Mapping[str, Any] | None = None,
                            progress: Callable[[float], None] | None = None) -> ForwardPath:
    """The greedy path of the module docstring, ``steps`` groups long at most (shorter when
    no group is left within ``max_cost``). ``y``, ``y_val``: targets (regression) or two
    labels, the larger one positive (classification, as ``PerSetChoice``'s ``-1 / +1``).
    ``folds``: None (rank on ``(X_val, y_val)``) or K >= 2, ``shortlist``: None (every
    candidate on the folds) or M >= 1 (module docstring)."""
    if task not in ("regression", "classification"):
        raise ValueError(f"task must be 'regression' or 'classification', got {task!r}")
    if int(steps) < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if folds is not None and int(folds) < 2:
        raise ValueError(f"folds must be None or >= 2, got {folds}")
    if shortlist is not None and int(shortlist) < 1:
        raise ValueError(f"shortlist must be None or >= 1, got {shortlist}")
    groups = [np.asarray(g, dtype=np.int64).ravel() for g in groups]
    costs = np.ones(len(groups)) if costs is None else \
        np.asarray(costs, dtype=np.float64).ravel()
    if costs.shape != (len(groups),):
        raise ValueError(f"costs must hold {len(groups)} numbers")
    X, X_val = np.asarray(X, dtype=np.float64), np.asarray(X_val, dtype=np.float64)
    y, y_val = _targets(task, y, y_val)
    single = [(X, y, X_val, y_val)]
    if folds is None:
        splits = single
    else:
        X_all, y_all = np.vstack([X, X_val]), np.concatenate([y, y_val])
        fold = np.random.default_rng(int(random_state)).permutation(y_all.size) % int(folds)
        splits = [(X_all[fold != k], y_all[fold != k], X_all[fold == k], y_all[fold == k])
                  for k in range(int(folds))]
    screen = folds is not None and shortlist is not None
    fit = {"groups": groups, "costs": costs, "task": task, "gbfs_params": gbfs_params}
    per_step = len(groups) + (int(shortlist) * int(folds) if screen else
                              len(groups) * (len(splits) - 1))
    progress_of = _Progress(progress, int(steps) * max(per_step, 1))
    ranked = _Figures(splits, fit, progress_of)
    screened = _Figures(single, fit, progress_of) if screen else ranked

    S: tuple[int, ...] = ()
    sets, order, figures = [], [], [ranked(S)]
    for _ in range(int(steps)):
        allowed = None
        if screen:
            allowed = _best_ratios(screened, S, costs, max_cost, int(shortlist))
        step = best_next_group(ranked if allowed is None else _among(ranked, S, allowed),
                               S, costs, max_cost)
        if step is None:
            break
        S = tuple(sorted((*S, step[0])))
        sets.append(S)
        order.append(int(step[0]))
        figures.append(ranked(S))
    return ForwardPath(tuple(sets), tuple(order), tuple(figures))


class _Progress:
    """``progress(fraction)`` after each fit, out of ``total``."""

    def __init__(self, progress: Callable[[float], None] | None, total: int) -> None:
        self.progress, self.total, self.done = progress, total, 0

    def step(self, fits: int) -> None:
        self.done += fits
        if self.progress is not None:
            self.progress(min(self.done / self.total, 1.0))


class _Figures:
    """``F(T)`` over ``splits`` (row-weighted mean of each split's held-out figure of a
    specialist on ``T``; a constant, the training mean, for the empty set), cached."""

    def __init__(self, splits, fit: dict[str, Any], progress: _Progress) -> None:
        weights = np.array([s[3].size for s in splits], dtype=np.float64)
        self.splits, self.weights = splits, weights / weights.sum()
        self.fit, self.progress = fit, progress
        self.cache: dict[tuple[int, ...], float] = {}

    def __call__(self, T: tuple[int, ...]) -> float:
        if T not in self.cache:
            task = self.fit["task"]
            if not T:
                values = [_figure(task, np.full(v.size, b.mean()), v)
                          for _, b, _, v in self.splits]
            else:
                values = [fit_specialist(a, b, c, d, self.fit["groups"], self.fit["costs"],
                                         T, task, self.fit["gbfs_params"]).figure
                          for a, b, c, d in self.splits]
                self.progress.step(len(self.splits))
            self.cache[T] = float(np.dot(self.weights, values))
        return self.cache[T]


def _among(figure: _Figures, S: tuple[int, ...], among: set[int]
           ) -> Callable[[tuple[int, ...]], float]:
    """``figure`` for ``S`` and ``S`` plus a group of ``among``; -inf (never chosen) for
    any other candidate, which is then not fitted."""
    return lambda T: figure(T) if T == S or set(T) - set(S) <= among else -np.inf


def _best_ratios(figure: _Figures, S: tuple[int, ...], costs: np.ndarray,
                 max_cost: float | None, M: int) -> set[int]:
    """The ``M`` groups outside ``S`` (within ``max_cost``) with the best gain per unit cost
    by ``figure`` (:func:`best_next_group`'s ratio), ties to the lower id."""
    ratios = []
    remaining = [g for g in range(costs.size) if g not in S]
    while remaining and len(ratios) < M:
        step = best_next_group(_among(figure, S, set(remaining)), S, costs, max_cost)
        if step is None:
            break
        ratios.append(step[0])
        remaining.remove(step[0])
    return set(ratios)


def _targets(task: str, y: Any, y_val: Any) -> tuple[np.ndarray, np.ndarray]:
    """Targets as float arrays; classification labels as -1 / +1 (the larger label +1)."""
    y, y_val = np.asarray(y).ravel(), np.asarray(y_val).ravel()
    if task == "regression":
        return y.astype(np.float64), y_val.astype(np.float64)
    labels = np.unique(np.concatenate([y, y_val]))
    if labels.size != 2:
        raise ValueError(f"classification needs two labels, got {labels.size}")
    return np.where(y == labels[1], 1.0, -1.0), np.where(y_val == labels[1], 1.0, -1.0)


__all__ = ["ForwardPath", "forward_specialist_sets"]
