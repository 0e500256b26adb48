"""Adapters from a fitted budgeted model to the acquisition policies' ``predict``, which
answers rows whose uncomputed features are NaN: a binary classifier gives ``P(y = 1)``
(n,), a K-class one (n, K) probabilities, a regressor its predictions (n,)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

Predict = Callable[[np.ndarray], np.ndarray]


def _output(model, task: str) -> Callable[..., np.ndarray]:
    """``model.predict_proba`` (its positive column for two classes) for
    classification, else ``model.predict``; keywords are passed on."""
    if task == "classification":
        def proba(X: np.ndarray, **kwargs) -> np.ndarray:
            p = np.asarray(model.predict_proba(X, **kwargs), dtype=np.float64)
            return p[:, 1] if p.shape[1] == 2 else p
        return proba
    return lambda X, **kwargs: np.asarray(model.predict(X, **kwargs), dtype=np.float64)


def masked_predictor(model, task: str) -> Predict:
    """``predict`` for a model that reads NaN as missing (GBFS with
    ``uncomputed="missing"``, LightGBM, ...): ``predict_proba`` for ``task=
    "classification"`` (the positive column when there are two classes), else
    ``predict``."""
    output = _output(model, task)
    return lambda X: output(X)


def set_predictor(model, groups: Sequence[Sequence[int]], task: str) -> Predict:
    """``predict`` for a model answering a named computed set, ``predict_proba(X,
    computed_groups=S)`` / ``predict(X, computed_groups=S)`` (``PerSetChoice``, whose
    specialists and per-set choice of half need ``S``; GBFS too): a row's set ``S`` is the
    groups whose first feature is not NaN; rows are answered set by set, their NaN entries
    (never read: they lie outside ``S``) set to 0. O(n J) to find the sets, then one model
    call per distinct set among the rows."""
    firsts = np.array([g[0] if len(g) else -1 for g in groups], dtype=np.int64)
    output = _output(model, task)

    def predict(X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        computed = np.zeros((X.shape[0], firsts.size), dtype=bool)
        for g, f in enumerate(firsts):
            if f >= 0:
                computed[:, g] = ~np.isnan(X[:, f])
        sets, which = np.unique(computed, axis=0, return_inverse=True)
        which = which.ravel()
        out: np.ndarray | None = None
        for k, mask in enumerate(sets):
            rows = np.flatnonzero(which == k)
            answer = output(np.nan_to_num(X[rows], nan=0.0),
                            computed_groups=np.flatnonzero(mask).tolist())
            if out is None:
                out = np.empty((X.shape[0], *answer.shape[1:]), dtype=np.float64)
            out[rows] = answer
        return out if out is not None else np.zeros(0)

    return predict


__all__ = ["masked_predictor", "set_predictor"]
