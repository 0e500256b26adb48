"""ADMM for NVSD with an inexact S1 (the seed's large-``nd`` variant).

Instead of eliminating ``beta`` through an eigendecomposition of ``H`` (O((nd)^3) once), S1's
system ``(Q + D) omega = v`` (see :mod:`.admm`) is solved approximately by a few conjugate
gradient steps warm-started at the previous ``omega``, with the number of steps growing over
the iterations (``cg_steps[0] + it // 5`` up to ``cg_steps[1]``). The seed uses steepest
descent steps; CG has the same O((nd)^2) cost per step and converges faster on a quadratic.
S2, S3, residuals, residual balancing and the stopping rule are those of
:func:`algorithms.nvsd.admm.solve_admm`. Memory O((nd)^2) for ``Q``; no O((nd)^3) step.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .admm import ADMMResult, NVSDProblem, objective, solve_admm
from .kernels import derivative_gram
from .prox import Regularizer


class DenseNVSDProblem:
    """``K`` (n, n), ``G`` (nd, n), ``H`` (nd, nd) and ``Q = [[K, G^T], [G, H]]``; O((nd)^2)."""

    def __init__(self, kernel: Any, X: np.ndarray) -> None:
        self.kernel = kernel
        self.X = np.ascontiguousarray(X, dtype=np.float64)
        self.n, self.d = self.X.shape
        self.K, self.G, self.H = derivative_gram(kernel, self.X)
        self.Q = np.block([[self.K, self.G.T], [self.G, self.H]])


def _cg(matvec, b: np.ndarray, x: np.ndarray, steps: int, rtol: float) -> np.ndarray:
    """At most ``steps`` conjugate-gradient steps on ``A x = b`` from ``x``."""
    r = b - matvec(x)
    p = r.copy()
    rr = r @ r
    stop = (rtol * np.linalg.norm(b)) ** 2
    for _ in range(steps):
        if rr <= stop:
            break
        Ap = matvec(p)
        step = rr / (p @ Ap)
        x = x + step * p
        r = r - step * Ap
        rr_new = r @ r
        p = r + (rr_new / rr) * p
        rr = rr_new
    return x


def solve_admm_inexact(
    problem: DenseNVSDProblem,
    y: np.ndarray,
    reg: Regularizer,
    tau: float,
    nu: float,
    *,
    kappa: float = 1.0,
    phi: np.ndarray | None = None,
    lam: np.ndarray | None = None,
    max_iter: int = 5000,
    tol: float = 1e-4,
    adapt_iter: int = 1000,
    cg_steps: tuple[int, int] = (5, 100),
    record: bool = False,
) -> ADMMResult:
    """ADMM with inexact S1; same arguments and result as :func:`~.admm.solve_admm`."""
    if not nu > 0:
        raise ValueError(f"nu must be > 0, got {nu!r}")
    n, d = problem.n, problem.d
    Q, H = problem.Q, problem.H
    phi = np.zeros(n * d) if phi is None else np.array(phi, dtype=float).reshape(-1)
    lam = np.zeros(n * d) if lam is None else np.array(lam, dtype=float).reshape(-1)
    omega = np.zeros(n + n * d)
    hist: dict[str, list[float]] = {"objective": [], "primal": [], "dual": [], "kappa": []}
    converged, it = False, 0
    for it in range(1, max_iter + 1):
        diag = np.concatenate([np.full(n, n * nu), np.full(n * d, 2.0 * nu / kappa)])
        v = np.concatenate([y, phi - lam])
        steps = min(cg_steps[0] + it // 5, cg_steps[1])
        omega = _cg(lambda x, diag=diag: Q @ x + diag * x, v, omega, steps, 1e-3 * tol)
        q_omega = Q @ omega
        uz = q_omega[n:]
        phi_new = reg.prox((uz + lam).reshape(d, n), tau / kappa).reshape(-1)
        lam += uz - phi_new
        r = float(np.linalg.norm(uz - phi_new))
        dphi = phi_new - phi
        s = kappa * float(np.sqrt(max(dphi @ H @ dphi, 0.0)))
        phi = phi_new
        f_norm2 = float(omega @ q_omega)
        if record:
            hist["objective"].append(objective(problem, y, omega[:n], omega[n:], reg, tau, nu))
            hist["primal"].append(r)
            hist["dual"].append(s)
            hist["kappa"].append(kappa)
        eps_pri = tol * max(np.linalg.norm(uz), np.linalg.norm(phi), np.linalg.norm(lam), 1e-300)
        lam_h = float(np.sqrt(max(lam @ H @ lam, 0.0)))
        eps_dual = tol * max(kappa * lam_h, 2 * nu * np.sqrt(max(f_norm2, 0.0)))
        if r <= eps_pri and s <= eps_dual:
            converged = True
            break
        if it <= adapt_iter and (r > 10.0 * s or s > 10.0 * r):
            factor = 2.0 if r > 10.0 * s else 0.5
            kappa *= factor
            lam /= factor
    alpha, beta = omega[:n], omega[n:].reshape(d, n)
    return ADMMResult(
        alpha=alpha, beta=beta, phi=phi.reshape(d, n), lam=lam.reshape(d, n), kappa=kappa,
        n_iter=it, converged=converged,
        objective=objective(problem, y, alpha, beta, reg, tau, nu), history=hist,
    )


def solver_for(problem: NVSDProblem | DenseNVSDProblem) -> Any:
    """:func:`~.admm.solve_admm` for an eigendecomposed problem, the inexact solver
    otherwise. O(1)."""
    return solve_admm_inexact if isinstance(problem, DenseNVSDProblem) else solve_admm
