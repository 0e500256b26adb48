"""Retraining: the estimator a batch spec describes, fitted on the fold's statistics or
window, with the metrics that go into the version's metadata.

Runs in a worker thread (``asyncio.to_thread``): numpy/scipy release the GIL in their
kernels, so a fit delays neither the fold nor the API. Never re-reads the log.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from service.batch.spec import BatchLayout, BatchParams

Progress = Callable[[float], None]


class FitError(ValueError):
    """A retrain that cannot succeed on this data (too few examples, a singular fit...)."""


def build_estimator(family: str, algorithm: str, task: str, layout: BatchLayout,
                    params: BatchParams):
    """The unfitted estimator (raises TypeError / ValueError on bad parameters)."""
    kwargs = dict(params.algorithm)
    if family == "anytime":
        from algorithms.anytime import AnytimeLinearModel

        return AnytimeLinearModel(groups=layout.groups, costs=layout.costs, method=algorithm,
                                  **kwargs)
    if family == "gbfs":
        from algorithms.gbfs import GBFS

        loss = "logistic" if task == "classification" else "squared"
        return GBFS(loss=loss, feature_groups=[g.tolist() for g in layout.groups],
                    group_costs=layout.costs, **kwargs)
    if family == "auto":
        from algorithms.per_set import PerSetChoice

        return PerSetChoice(groups=[g.tolist() for g in layout.groups], costs=layout.costs,
                            task=task, **kwargs)
    from algorithms.nvsd import NVSD, RelaxedNVSD

    groups = [g.tolist() for g in layout.groups]
    kwargs.setdefault("regularizer", "gl")
    if kwargs["regularizer"] == "gl":
        kwargs["groups"] = groups
    if params.estimator == "plain":
        return NVSD(**kwargs)
    return RelaxedNVSD(**kwargs)


def check_estimator(family: str, algorithm: str, task: str, layout: BatchLayout,
                    params: BatchParams) -> None:
    """Validate the parameters' values at creation (ValueError / TypeError): the checks
    the estimator's ``fit`` makes of them (``check_params``, ``algorithms.batch``)."""
    estimator = build_estimator(family, algorithm, task, layout, params)
    estimator.check_params(layout.n_features)


def fit(family: str, algorithm: str, task: str, layout: BatchLayout, params: BatchParams,
        training, validation, progress: Progress | None = None) -> tuple[Any, dict[str, Any]]:
    """Fit on ``training`` (statistics, or an ``(X, y)`` window) and score on
    ``validation`` (same kind, or None) -> (fitted model, metrics). FitError when the data
    cannot support a fit."""
    progress = progress or (lambda fraction: None)
    estimator = build_estimator(family, algorithm, task, layout, params)
    if family == "anytime":
        if training.n < 2:
            raise FitError(f"needs at least 2 training examples, the statistics hold "
                           f"{training.n}")
        progress(0.1)
        model = estimator.fit_statistics(training, validation=validation)
        progress(0.9)
        return model, _anytime_metrics(model, layout)
    X, y = training
    if len(y) < 2:
        raise FitError(f"needs at least 2 training examples, the window holds {len(y)}")
    if task == "classification" and len(np.unique(y)) < 2:
        raise FitError("the training window holds one class only; classification needs both")
    progress(0.05)

    def scaled(fraction: float) -> None:  # the fit itself is 5%..90% of the job
        progress(0.05 + 0.85 * fraction)

    if family == "gbfs":  # early stopping holds out its own rows: validation stays unseen
        model = estimator.fit(X, y, progress=scaled)
        progress(0.9)
        return model, _gbfs_metrics(model, layout, task, X, y, validation)
    if family == "auto":
        held = {} if validation is None else {"X_val": validation[0], "y_val": validation[1]}
        model = estimator.fit(X, y, progress=scaled, **held)
        progress(0.9)
        return model, _auto_metrics(model, layout)
    if params.estimator == "relaxed" and validation is not None:
        model = estimator.fit(X, y, validation=validation, progress=scaled)
    elif params.estimator == "relaxed":
        if len(y) < 4:
            raise FitError(f"needs at least 4 training examples, the window holds {len(y)}")
        model = estimator.fit(X, y, progress=scaled)
    else:
        model = estimator.fit(X, y)
    progress(0.9)
    return model, _nvsd_metrics(model, X, y, validation)


def _anytime_metrics(model, layout: BatchLayout) -> dict[str, Any]:
    validation = model.validation_explained_variance_
    return {"sequence": [layout.group_names[int(g)] for g in model.sequence_],
            "cumulative_cost": [float(c) for c in model.cumulative_cost_],
            "train_explained_variance": [float(v) for v in model.train_explained_variance_],
            "validation_explained_variance": None if validation is None else
            [float(v) for v in validation]}


FIGURE_NAMES = {"regression": ("explained_variance", "rmse"),
                "classification": ("error", "log_loss")}
TRAIN_ROWS = 5000  # training rows the curves of a GBFS version are measured on, at most


def set_figures(score, rows: tuple[np.ndarray, np.ndarray], task: str, layout: BatchLayout):
    """:class:`~algorithms.per_set.figures.SetFigures` of ``score(X, S)`` on ``rows``."""
    from algorithms.per_set.figures import SetFigures

    return SetFigures(score, rows[0], rows[1], task=task, groups=layout.groups,
                      costs=layout.costs)


def curve(figures, order: list[int], task: str) -> dict[str, list[float]]:
    """The figures of every prefix of ``order`` (0..J groups) by name."""
    names = FIGURE_NAMES[task]
    prefixes = [figures.figures(order[:j]) for j in range(len(order) + 1)]
    return {name: [float(getattr(f, name)) for f in prefixes] for name in names}


def greedy_order(figures, n_groups: int) -> list[int]:
    """Groups in the order of ``figures.next_group`` from the empty set (the greedy
    sequence of validation gain per unit cost). O(J²) figures, each cached."""
    order: list[int] = []
    while (step := figures.next_group(order)) is not None:
        order.append(int(step[0]))
    return order + [g for g in range(n_groups) if g not in order]


def _gbfs_metrics(model, layout: BatchLayout, task: str, X, y, validation) -> dict[str, Any]:
    """The version's trees and its greedy sequence of groups with each prefix's figures:
    ordered by validation gain per unit cost when rows are held out, else by the training
    split gain per unit cost; curves on the held-out rows and on (up to ``TRAIN_ROWS``)
    training rows, every tree answering with the other groups missing."""
    def score(rows: np.ndarray, S) -> np.ndarray:
        return model.decision_function(rows, computed_groups=S)

    step = max(1, len(y) // TRAIN_ROWS)
    train = set_figures(score, (X[::step], y[::step]), task, layout)
    held = None if validation is None else set_figures(score, validation, task, layout)
    if held is not None:
        order = greedy_order(held, layout.n_groups)
    else:
        order = []
        while (g := model.next_group(order)) is not None:
            order.append(int(g))
    cumulative = np.cumsum([0.0] + [float(layout.costs[g]) for g in order])
    return {"selected_groups": [layout.group_names[int(g)] for g in model.selected_groups_],
            "group_entry_tree": [int(t) for t in model.group_entry_iteration_],
            "n_trees": int(model.tree_feature_.shape[0]),
            "sequence": [layout.group_names[g] for g in order],
            "cumulative_cost": [float(c) for c in cumulative],
            "train": curve(train, order, task),
            "validation": None if held is None else curve(held, order, task)}


def _auto_metrics(model, layout: BatchLayout) -> dict[str, Any]:
    """PerSetChoice's combined greedy sequence, which half answers each prefix, and both
    halves' validation curves along it."""
    order = [int(g) for g in model.sequence_]
    task = model.task
    halves = {half: curve(model.half_figures(half), order, task) for half in ("anytime", "gbfs")}
    return {"sequence": [layout.group_names[g] for g in order],
            "cumulative_cost": [float(c) for c in model.cumulative_cost_],
            "answered_by": list(model.sequence_half_),
            "validation": {name: [halves[half][name][j]
                                  for j, half in enumerate(model.sequence_half_)]
                           for name in FIGURE_NAMES[task]},
            "validation_by_half": halves}


def _rmse(prediction: np.ndarray, y: np.ndarray) -> float:
    return float(np.sqrt(np.mean((prediction - y) ** 2)))


def _nvsd_metrics(model, X, y, validation) -> dict[str, Any]:
    metrics: dict[str, Any] = {"train_rmse": _rmse(model.predict(X), y),
                               "selected_features": [int(f) for f in
                                                     model.selected_features()]}
    metrics["validation_rmse"] = None if validation is None else \
        _rmse(model.predict(validation[0]), validation[1])
    return metrics
