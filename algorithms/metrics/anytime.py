"""Anytime metrics (Hu et al.): explained variance, the anytime curve and timeliness.

Explained variance of a prediction is ``EV = 1 − mean((y − ŷ)²) / var(y)``. The anytime curve
of a sequence is the step function ``B ↦ EV(G⟨B⟩)`` (the longest prefix of cost <= B).
Timeliness is its normalized area up to a budget ``B``:
``T(B) = (1/B) ∫₀^B EV(G⟨b⟩) db / EV_ref`` (``EV_ref`` defaults to the curve's last value,
the model with every group), so 1 means "all of the final accuracy at no cost".
"""

from __future__ import annotations

import numpy as np


def explained_variance(y, prediction) -> float:
    """``1 − mean((y − ŷ)²) / var(y)``; 0 when ``var(y) = 0``. O(n)."""
    y = np.asarray(y, dtype=np.float64).ravel()
    prediction = np.asarray(prediction, dtype=np.float64).ravel()
    var = float(np.var(y))
    if var <= 0:
        return 0.0
    return 1.0 - float(np.mean((y - prediction) ** 2)) / var


def explained_variance_from_statistics(stats, coef: np.ndarray, intercept) -> np.ndarray:
    """EV of linear predictors ``x·coef + intercept`` on the sample summarized by ``stats``.

    ``coef`` (D,) or (P, D), ``intercept`` scalar or (P,); ``stats`` a
    ``SufficientStatistics``. ``MSE = Var(y) − 2 coefᵀCov(x,y) + coefᵀCov(x) coef + bias²``
    with ``bias = ȳ − intercept − x̄ᵀcoef``. O(P·D²), no data re-read; one predictor with
    ``k`` non-zero coefficients (a computed set's) O(k² + D), reading only those rows and
    columns of ``Cov(x)``.
    """
    coef = np.atleast_2d(np.asarray(coef, dtype=np.float64))
    intercept = np.broadcast_to(np.asarray(intercept, dtype=np.float64), (coef.shape[0],))
    if coef.shape[0] == 1:
        support = np.flatnonzero(coef[0])
        return np.array([explained_variance_on_support(stats, support, coef[0, support],
                                                       float(intercept[0]))])
    n = stats.n
    var_y = stats.myy / n
    if var_y <= 0:
        return np.zeros(coef.shape[0])
    quad = np.einsum("pi,pi->p", coef @ stats.mxx, coef) / n
    bias = stats.mean_y - intercept - coef @ stats.mean_x
    mse = var_y - 2.0 * coef @ (stats.mxy / n) + quad + bias ** 2
    return 1.0 - mse / var_y


def explained_variance_on_support(stats, support: np.ndarray, values: np.ndarray,
                                  intercept: float) -> float:
    """EV (as :func:`explained_variance_from_statistics`) of the one predictor whose
    coefficients are ``values`` on the features ``support`` (int64), 0 elsewhere: one
    kernel call reading only those rows and columns of ``Cov(x)``. O(k²)."""
    from algorithms.anytime._subset_kernels import support_explained_variance

    return support_explained_variance(
        np.ascontiguousarray(stats.mxx, dtype=np.float64), stats.mxy, stats.mean_x,
        float(stats.n), float(stats.mean_y), float(stats.myy),
        np.ascontiguousarray(support, dtype=np.int64),
        np.ascontiguousarray(values, dtype=np.float64), float(intercept))


def anytime_curve(model, X=None, y=None) -> tuple[np.ndarray, np.ndarray]:
    """``(cumulative_cost, EV)`` per prefix (both (J_s + 1,)) of a fitted anytime model.

    Without data: the training EV stored in the model; with ``X`` (n, D), ``y`` (n,): the EV
    of every prefix predictor on that sample. O(J_s·nnz(X)).
    """
    costs = np.asarray(model.cumulative_cost_, dtype=np.float64)
    if X is None:
        return costs, np.asarray(model.train_explained_variance_, dtype=np.float64)
    predictions = model.predict_path(X)
    ev = np.array([explained_variance(y, p) for p in predictions])
    return costs, ev


def timeliness(cumulative_cost, values, budget: float | None = None,
               reference: float | None = None) -> float:
    """Normalized area under the anytime step curve up to ``budget``; see module docstring.

    ``cumulative_cost`` (P,) non-decreasing with ``[0] = 0``, ``values`` (P,) the EV of each
    prefix; ``budget`` defaults to the last cumulative cost, ``reference`` to ``values[-1]``.
    Negative EVs count as 0. O(P).
    """
    cost = np.asarray(cumulative_cost, dtype=np.float64)
    ev = np.maximum(np.asarray(values, dtype=np.float64), 0.0)
    if cost.shape != ev.shape or cost.ndim != 1 or len(cost) == 0:
        raise ValueError("cumulative_cost and values must be 1-D of the same length")
    budget = float(cost[-1]) if budget is None else float(budget)
    reference = float(ev[-1]) if reference is None else float(reference)
    if budget <= 0 or reference <= 0:
        return 0.0
    starts = np.minimum(cost, budget)
    ends = np.minimum(np.append(cost[1:], np.inf), budget)
    area = float(np.sum(ev * np.maximum(ends - starts, 0.0)))
    return area / (budget * reference)
