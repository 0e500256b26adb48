"""Plain-numpy O(d)-per-example references, written straight from the papers' rules.

Top-B selection everywhere: a strict total order, larger key first, then lower index
(PET/FOFS key |w|, SOFS key -Sigma), exactly as documented in algorithms/online/_topset.
"""

from __future__ import annotations

import numpy as np


def top_b_mask(keys: np.ndarray, budget: int) -> np.ndarray:
    """Boolean mask of the ``budget`` best features: larger key first, then lower index."""
    order = np.lexsort((np.arange(len(keys)), -keys))
    mask = np.zeros(len(keys), dtype=bool)
    mask[order[:budget]] = True
    return mask


def rows(X: np.ndarray):
    yield from np.asarray(X, dtype=np.float64)


def pet(X, y, budget, eta=1.0, hinge=False, power_t=0.0):
    w = np.zeros(X.shape[1])
    for t, (x, label) in enumerate(zip(rows(X), y, strict=True), start=1):
        margin = label * (w @ x)
        if (hinge and margin < 1.0) or (not hinge and margin <= 0.0):
            w = w + eta / t**power_t * label * x
            w[~top_b_mask(np.abs(w), budget)] = 0.0
    return w


def fofs(X, y, budget, eta=0.2, lam=0.01):
    w = np.zeros(X.shape[1])
    for x, label in zip(rows(X), y, strict=True):
        if label * (w @ x) <= 1.0:
            w = (1.0 - lam * eta) * w + eta * label * x
            norm = np.linalg.norm(w)
            if lam > 0 and norm > 0:
                w = min(1.0, 1.0 / (np.sqrt(lam) * norm)) * w
            w[~top_b_mask(np.abs(w), budget)] = 0.0
        else:
            w = (1.0 - lam * eta) * w
    return w


def arow(X, y, r=1.0, budget=None):
    """AROW with diagonal covariance; with ``budget`` it is SOFS (keep B smallest Sigma)."""
    mu = np.zeros(X.shape[1])
    sigma = np.ones(X.shape[1])
    for x, label in zip(rows(X), y, strict=True):
        loss = 1.0 - label * (mu @ x)
        if loss > 0:
            beta = 1.0 / (np.sum(sigma * x * x) + r)
            mu = mu + loss * beta * label * sigma * x
            sigma = sigma - beta * sigma * sigma * x * x
            if budget is not None:
                mu[~top_b_mask(-sigma, budget)] = 0.0
    return mu, sigma


def ogd(X, y, eta=1.0, power_t=0.5):
    w = np.zeros(X.shape[1])
    for t, (x, label) in enumerate(zip(rows(X), y, strict=True), start=1):
        if label * (w @ x) < 1.0:
            w = w + eta / t**power_t * label * x
    return w
