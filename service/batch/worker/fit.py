"""Retraining: the estimator a batch spec describes, fitted on the fold's statistics or
window, with the metrics that go into the version's metadata. What differs by family is
its adapter's (``service.batch.families``); the figures and curves every family shares
are ``service.batch.curves`` (named here too).

Runs in a worker thread (``asyncio.to_thread``): numpy/scipy release the GIL in their
kernels, so a fit delays neither the fold nor the API. Never re-reads the log.
"""

from __future__ import annotations

from typing import Any

from service.batch.curves import (
    FIGURE_NAMES,
    TRAIN_ROWS,
    FitError,
    Progress,
    curve,
    greedy_order,
    set_figures,
)
from service.batch.families import family_of
from service.batch.layout import BatchLayout, BatchParams


def build_estimator(family: str, algorithm: str, task: str, layout: BatchLayout,
                    params: BatchParams):
    """The unfitted estimator (raises TypeError / ValueError on bad parameters)."""
    return family_of(family).build_estimator(algorithm, task, layout, params)


def check_estimator(family: str, algorithm: str, task: str, layout: BatchLayout,
                    params: BatchParams) -> None:
    """Validate the parameters' values at creation (ValueError / TypeError): the checks
    the estimator's ``fit`` makes of them (``check_params``, ``algorithms.batch``)."""
    estimator = build_estimator(family, algorithm, task, layout, params)
    estimator.check_params(layout.n_features)


def fit(family: str, algorithm: str, task: str, layout: BatchLayout, params: BatchParams,
        training, validation, progress: Progress | None = None, rows=None
        ) -> tuple[Any, dict[str, Any]]:
    """Fit on ``training`` (statistics, or an ``(X, y)`` window) and score on
    ``validation`` (same kind, or None) -> (fitted model, metrics). ``rows``: training
    rows ``(X, y)`` beside statistics (``BatchFoldState.training_rows_copy``), passed to
    the adapter's fit when there are any. FitError when the data cannot support a fit."""
    progress = progress or (lambda fraction: None)
    adapter = family_of(family)
    estimator = adapter.build_estimator(algorithm, task, layout, params)
    extra = {} if rows is None else {"rows": rows}
    return adapter.fit(estimator, task, layout, params, training, validation, progress,
                       **extra)


__all__ = ["FIGURE_NAMES", "TRAIN_ROWS", "FitError", "Progress", "build_estimator",
           "check_estimator", "curve", "fit", "greedy_order", "set_figures"]
