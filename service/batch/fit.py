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

    if family == "gbfs":
        model = estimator.fit(X, y, progress=scaled)
        progress(0.9)
        return model, _gbfs_metrics(model, layout, task, X, y, validation)
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


def prefix_losses(model, task: str, X: np.ndarray, y: np.ndarray) -> dict[str, list[float]]:
    """Per tree prefix (0..T trees) on ``(X, y)``: error rate and log-loss
    (classification) or RMSE and explained variance (regression). O(n·T·depth)."""
    scores = [np.full(len(y), model.base_score_)] + list(model.staged_decision_function(X))
    if task == "classification":
        positive = y > 0
        error, log_loss = [], []
        for s in scores:
            error.append(float(np.mean((s > 0) != positive)))
            margin = np.where(positive, s, -s)
            log_loss.append(float(np.mean(np.logaddexp(0.0, -margin))))
        return {"error": error, "log_loss": log_loss}
    var = float(np.var(y))
    rmse, ev = [], []
    for s in scores:
        mse = float(np.mean((y - s) ** 2))
        rmse.append(float(np.sqrt(mse)))
        ev.append(1.0 - mse / var if var > 0 else 0.0)
    return {"rmse": rmse, "explained_variance": ev}


def _gbfs_metrics(model, layout: BatchLayout, task: str, X, y, validation) -> dict[str, Any]:
    metrics: dict[str, Any] = {
        "selected_groups": [layout.group_names[int(g)] for g in model.selected_groups_],
        "group_entry_tree": [int(t) for t in model.group_entry_iteration_],
        "n_trees": int(model.tree_feature_.shape[0]),
        "train": prefix_losses(model, task, X, y)}
    metrics["validation"] = None if validation is None else \
        prefix_losses(model, task, *validation)
    return metrics


def _rmse(prediction: np.ndarray, y: np.ndarray) -> float:
    return float(np.sqrt(np.mean((prediction - y) ** 2)))


def _nvsd_metrics(model, X, y, validation) -> dict[str, Any]:
    metrics: dict[str, Any] = {"train_rmse": _rmse(model.predict(X), y),
                               "selected_features": [int(f) for f in
                                                     model.selected_features()]}
    metrics["validation_rmse"] = None if validation is None else \
        _rmse(model.predict(validation[0]), validation[1])
    return metrics
