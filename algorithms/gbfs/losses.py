"""Losses for GBFS: logistic (binary, the paper's setting), squared (regression) and
softmax (K classes).

Each loss gives the constant base score ``H_0 = argmin_c sum_i l(y_i, c)``, the negative
gradient ``g_i = -dl(y_i, H)/dH`` and the second derivative ``w_i`` at the current scores,
and the mean loss. Labels of the
logistic loss are 0/1 here (the paper's ``y in {-1, +1}`` gives the same gradient:
``y / (1 + exp(y H)) = y01 - sigmoid(H)``). The softmax loss reads class indices
``y in {0..K-1}`` and scores ``H`` of shape (n, K): ``p = softmax(H)``,
``l = -log p_y``, ``g_k = 1[y = k] - p_k`` and the diagonal Newton weight
``w_k = p_k (1 - p_k)``. All O(n K).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_expit, log_softmax, softmax

LOSSES = ("logistic", "squared", "softmax")


def base_score(loss: str, y: np.ndarray, n_classes: int = 2) -> float | np.ndarray:
    """``H_0``: log-odds of the positive rate (logistic), the mean (squared), or the log of
    each class's rate (softmax, float64 (K,), rates floored at 1e-12)."""
    if loss == "softmax":
        rates = np.bincount(y.astype(np.int64), minlength=n_classes) / max(y.shape[0], 1)
        return np.log(np.maximum(rates, 1e-12))
    mean = float(np.mean(y))
    if loss == "squared":
        return mean
    mean = min(max(mean, 1e-12), 1.0 - 1e-12)
    return float(np.log(mean / (1.0 - mean)))


def _one_hot(y: np.ndarray, n_classes: int) -> np.ndarray:
    return (y.astype(np.int64)[:, None] == np.arange(n_classes)).astype(np.float64)


def negative_gradient(loss: str, y: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """``g = y - sigmoid(H)`` (logistic), ``g = y - H`` (squared), float64 (n,), or
    ``g_k = 1[y = k] - softmax(H)_k`` (softmax, (n, K))."""
    if loss == "softmax":
        return _one_hot(y, scores.shape[1]) - softmax(scores, axis=1)
    if loss == "squared":
        return y - scores
    return y - expit(scores)


def hessian(loss: str, scores: np.ndarray) -> np.ndarray:
    """``w = l''(H)``: ``sigmoid(H) (1 - sigmoid(H))`` (logistic), ones (squared), or the
    diagonal ``p_k (1 - p_k)`` with ``p = softmax(H)`` (softmax, (n, K))."""
    if loss == "softmax":
        p = softmax(scores, axis=1)
        return p * (1.0 - p)
    if loss == "squared":
        return np.ones_like(scores)
    p = expit(scores)
    return p * (1.0 - p)


def mean_loss(loss: str, y: np.ndarray, scores: np.ndarray) -> float:
    """``mean_i log(1 + exp(-y_i H_i))`` (y in {-1, 1}), ``mean_i (y_i - H_i)^2 / 2``, or
    ``mean_i -log softmax(H_i)_{y_i}`` (softmax)."""
    if loss == "softmax":
        picked = np.take_along_axis(log_softmax(scores, axis=1),
                                    y.astype(np.int64)[:, None], axis=1)
        return float(-np.mean(picked))
    if loss == "squared":
        return float(0.5 * np.mean((y - scores) ** 2))
    signed = np.where(y > 0.5, scores, -scores)
    return float(-np.mean(log_expit(signed)))
