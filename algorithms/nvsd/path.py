"""Regularization path of NVSD over ``tau`` with warm starts."""

from __future__ import annotations

from typing import Any

import numpy as np

from .admm import ADMMResult, NVSDProblem
from .estimator import NVSD, _check_inputs
from .inexact import DenseNVSDProblem, solver_for
from .prox import Regularizer


def tau_max(
    problem: NVSDProblem | DenseNVSDProblem, y: np.ndarray, reg: Regularizer, nu: float,
    max_iter: int = 500,
) -> float:
    """Smallest ``tau`` at which ``phi = 0`` (no variable selected) is optimal.

    Solves ``min E(omega) s.t. Z omega = 0`` by the method of multipliers (ADMM with
    ``tau = inf``, at most ``max_iter`` iterations) and returns the dual norm of its
    multiplier. O((nd)^2) per iteration.
    """
    res = solver_for(problem)(problem, y, reg, np.inf, nu, kappa=100.0, adapt_iter=0,
                              max_iter=max_iter)
    return reg.dual_bound(res.kappa * res.lam)


def tau_grid(
    problem: Any, y: np.ndarray, reg: Regularizer, nu: float, n_taus: int = 10,
    ratio: float = 1e-3, max_iter: int = 500,
) -> np.ndarray:
    """``n_taus`` values log-spaced from ``tau_max`` (``max_iter`` iterations at most)
    down to ``ratio * tau_max``."""
    top = tau_max(problem, y, reg, nu, max_iter)
    return top * np.logspace(0.0, np.log10(ratio), n_taus)


def solve_path(
    problem: Any, y: np.ndarray, reg: Regularizer, taus: np.ndarray, nu: float,
    **admm_kwargs: Any,
) -> list[ADMMResult]:
    """Solve for each ``tau`` in the given order, warm-starting ``phi``, ``lam`` and ``kappa``.

    Decreasing ``taus`` is the natural order (sparse to dense).
    """
    out: list[ADMMResult] = []
    phi = lam = None
    kappa = admm_kwargs.pop("kappa", 1.0)
    for tau in taus:
        res = solver_for(problem)(problem, y, reg, float(tau), nu, kappa=kappa, phi=phi,
                                  lam=lam, **admm_kwargs)
        out.append(res)
        phi, lam, kappa = res.phi, res.lam, res.kappa
    return out


def nvsd_path(
    X: np.ndarray, y: np.ndarray, *, taus: np.ndarray | None = None, n_taus: int = 10,
    ratio: float = 1e-3, problem: Any = None, **params: Any,
) -> list[Any]:
    """Fitted :class:`~algorithms.nvsd.NVSD` models along ``taus`` (default :func:`tau_grid`).

    ``params`` are NVSD constructor parameters (``tau`` is ignored; ``max_iter`` also
    bounds :func:`tau_max`'s 500 iterations). One eigendecomposition is shared by all fits
    and each fit is warm-started from the previous one.
    """
    X = _check_inputs(X)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    base = NVSD(**params)
    problem = base.make_problem(X) if problem is None else problem
    reg = base.make_regularizer(X.shape[1])
    if taus is None:
        taus = tau_grid(problem, y, reg, float(base.nu), n_taus, ratio,
                        min(500, int(base.max_iter)))
    results = solve_path(problem, y, reg, np.asarray(taus, dtype=float), float(base.nu),
                         max_iter=base.max_iter, tol=base.tol)
    models = []
    for tau, res in zip(taus, results, strict=True):
        model = NVSD(**{**base.get_params(), "tau": float(tau)})
        model._set_result(X, res, reg)
        models.append(model)
    return models
