r"""Logistic refits on a computed set of groups: the classification answer of an anytime
model (the sequence itself stays the ridge sequence of Hu, Grubb, Bagnell, Hebert).

On standardized training rows ``z = (x - x̄) / s`` with labels ``y ∈ {-1, +1}`` and the
features ``S`` of a computed set, the refit minimizes

    L(w, b) = 1/n Σ_i softplus(-y_i (z_{i,S}·w + b)) + λ/2 ‖w‖²

(the intercept unpenalized; scikit-learn's ``LogisticRegression(C=1/(λ n))`` on the same
standardized columns), by Newton's method: gradient ``(Zᵀ(p − t)/n + λw, mean(p − t))`` with
``t = (y + 1)/2``, ``p = sigmoid(Zw + b)``, Hessian ``[Z 1]ᵀ diag(p(1−p)) [Z 1]/n + λ`` on the
weights' diagonal, solved by Cholesky, each step halved until ``L`` decreases (Armijo,
1e-4). ``L`` is strictly convex in ``w`` for λ > 0, so the minimizer is unique and finite
even when the rows separate. Starts from ``w = 0``, ``b = logit(mean t)``; stops when the
gradient's largest entry is below ``tol``. O(n·k²) per step for ``k`` features, a handful
of steps.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve
from scipy.special import expit, log_expit

MAX_ITER = 100
TOL = 1e-10


def _loss(y: np.ndarray, scores: np.ndarray, w: np.ndarray, lam: float) -> float:
    return float(-np.mean(log_expit(y * scores)) + 0.5 * lam * (w @ w))


def logistic_refit(Z: np.ndarray, y: np.ndarray, lam: float, *, tol: float = TOL,
                   max_iter: int = MAX_ITER) -> tuple[np.ndarray, float]:
    """``(w (k,), b)`` minimizing ``L`` (module docstring) on rows ``Z`` (n, k) and labels
    ``y`` (n,) in {-1, +1}; ``lam > 0``. ValueError when there are no rows."""
    n, k = Z.shape
    if n == 0:
        raise ValueError("a logistic refit needs training rows")
    t = (np.asarray(y, dtype=np.float64) > 0).astype(np.float64)
    y = 2.0 * t - 1.0
    rate = float(np.clip(t.mean(), 0.5 / n, 1.0 - 0.5 / n))
    A = np.empty((n, k + 1))
    A[:, :k], A[:, k] = Z, 1.0
    theta = np.zeros(k + 1)
    theta[k] = np.log(rate / (1.0 - rate))
    scores = A @ theta
    loss = _loss(y, scores, theta[:k], lam)
    for _ in range(max_iter):
        p = expit(scores)
        grad = A.T @ (p - t) / n
        grad[:k] += lam * theta[:k]
        if np.max(np.abs(grad)) < tol:
            break
        hessian = (A * (p * (1.0 - p) / n)[:, None]).T @ A
        hessian[np.diag_indices(k)] += lam
        hessian[k, k] += 1e-12
        try:
            step = cho_solve(cho_factor(hessian), grad)
        except LinAlgError:
            step = np.linalg.lstsq(hessian, grad, rcond=None)[0]
        move, slope, size = A @ step, float(grad @ step), 1.0
        while size > 1e-10:
            new_theta, new_scores = theta - size * step, scores - size * move
            new = _loss(y, new_scores, new_theta[:k], lam)
            if new <= loss - 1e-4 * size * slope:
                break
            size *= 0.5
        else:
            break  # no decrease left at the rounding level
        theta, scores, loss = new_theta, new_scores, new
    return theta[:k].copy(), float(theta[k])
