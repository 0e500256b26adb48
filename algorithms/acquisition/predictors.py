"""Adapters from a fitted budgeted model to the acquisition policies' ``predict``, which
answers rows whose uncomputed features are NaN: a binary classifier gives ``P(y = 1)``
(n,), a K-class one (n, K) probabilities, a regressor its predictions (n,)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def masked_predictor(model, task: str) -> Callable[[np.ndarray], np.ndarray]:
    """``predict`` for a model that reads NaN as missing (GBFS with
    ``uncomputed="missing"``, LightGBM, ...): ``predict_proba`` for ``task=
    "classification"`` (the positive column when there are two classes), else
    ``predict``."""
    if task == "classification":
        def predict(X: np.ndarray) -> np.ndarray:
            proba = np.asarray(model.predict_proba(X), dtype=np.float64)
            return proba[:, 1] if proba.shape[1] == 2 else proba
        return predict
    return lambda X: np.asarray(model.predict(X), dtype=np.float64)


__all__ = ["masked_predictor"]
