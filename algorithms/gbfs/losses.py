"""Losses for GBFS: logistic (binary, the paper's setting) and squared (regression).

Each loss gives the constant base score ``H_0 = argmin_c sum_i l(y_i, c)``, the negative
gradient ``g_i = -dl(y_i, H)/dH`` and the second derivative ``w_i`` at the current scores,
and the mean loss. Labels of the
logistic loss are 0/1 here (the paper's ``y in {-1, +1}`` gives the same gradient:
``y / (1 + exp(y H)) = y01 - sigmoid(H)``). All O(n).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_expit

LOSSES = ("logistic", "squared")


def base_score(loss: str, y: np.ndarray) -> float:
    """``H_0``: log-odds of the positive rate (logistic) or the mean (squared)."""
    mean = float(np.mean(y))
    if loss == "squared":
        return mean
    mean = min(max(mean, 1e-12), 1.0 - 1e-12)
    return float(np.log(mean / (1.0 - mean)))


def negative_gradient(loss: str, y: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """``g = y - sigmoid(H)`` (logistic) or ``g = y - H`` (squared), float64 (n,)."""
    if loss == "squared":
        return y - scores
    return y - expit(scores)


def hessian(loss: str, scores: np.ndarray) -> np.ndarray:
    """``w = l''(H)``: ``sigmoid(H) (1 - sigmoid(H))`` (logistic) or ones (squared)."""
    if loss == "squared":
        return np.ones_like(scores)
    p = expit(scores)
    return p * (1.0 - p)


def mean_loss(loss: str, y: np.ndarray, scores: np.ndarray) -> float:
    """``mean_i log(1 + exp(-y_i H_i))`` (y in {-1, 1}) or ``mean_i (y_i - H_i)^2 / 2``."""
    if loss == "squared":
        return float(0.5 * np.mean((y - scores) ** 2))
    signed = np.where(y > 0.5, scores, -scores)
    return float(-np.mean(log_expit(signed)))
