"""ADMM for the finite NVSD problem (Gregorova et al., UAI 2018, eq. 13 and Algorithm 1).

With ``omega = (alpha, beta)``, ``F omega = K alpha + G^T beta`` (function values) and
``Z omega = G alpha + H beta`` (partial derivatives at the training points, see
:func:`algorithms.nvsd.kernels.derivative_gram`), NVSD solves::

    min_omega  (1/n) ||y - F omega||^2 + nu omega^T Q omega + tau Omega(Z omega)

as ``min E(omega) + tau I(phi)  s.t.  Z omega = phi`` with scaled dual ``lam``:

- S1 ``omega = argmin E(omega) + kappa/2 ||Z omega - phi + lam||^2``. Its normal equations are
  ``Q (W Q + 2 nu I) omega = Q W v`` with ``v = (y, phi - lam)``, solved by
  ``(Q + D) omega = v``, ``D = diag(n nu I_n, (2 nu / kappa) I_nd)``. We eliminate ``beta``
  with one eigendecomposition ``H = U diag(s) U^T`` (per training set, O((nd)^3)); then every
  ``kappa`` and ``nu`` costs an n x n Schur complement (O(n^2 nd)) and every iteration two
  (nd x nd) mat-vecs: O((nd)^2), exact, with no refactorization when ``kappa`` adapts.
- S2 ``phi = prox_{tau/kappa Omega}(Z omega + lam)`` (closed form, :mod:`.prox`).
- S3 ``lam += Z omega - phi``.

Residuals (Boyd et al. 2010, sec. 3.3): primal ``r = ||Z omega - phi||``, dual
``s = kappa ||phi - phi_old||_H`` (the norm of ``kappa Z^T (phi - phi_old)`` in the RKHS,
``||x||_H^2 = x^T H x``). ``kappa`` is adapted by residual balancing (sec. 3.4.1, mu=10,
factor 2) during the first ``adapt_iter`` iterations, then frozen so ADMM converges.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.linalg

from .kernels import derivative_gram
from .prox import Regularizer


class NVSDProblem:
    """Precomputed matrices for one training set ``X`` (n, d) and kernel.

    Holds ``K`` (n, n), ``G`` (nd, n), ``H`` (nd, nd), its eigenpairs ``s``, ``U`` and
    ``P = U^T G``. Building costs O((nd)^3) once; it is shared across ``tau``, ``nu``, ``mu``.
    """

    def __init__(self, kernel: Any, X: np.ndarray) -> None:
        self.kernel = kernel
        self.X = np.ascontiguousarray(X, dtype=np.float64)
        self.n, self.d = self.X.shape
        self.K, self.G, H = derivative_gram(kernel, self.X)
        s, U = scipy.linalg.eigh(H, overwrite_a=False, check_finite=False, driver="evd")
        self.H = H
        self.s = np.maximum(s, 0.0)
        self.U = np.ascontiguousarray(U)
        self.Ut = np.ascontiguousarray(U.T)
        self.P = self.Ut @ self.G
        self._schur: dict[tuple[float, float], tuple[np.ndarray, bool]] = {}

    def schur(self, nu: float, kappa: float) -> tuple[np.ndarray, bool]:
        """Cholesky factor of ``K + n nu I - P^T diag(1 / (s + c)) P``, ``c = 2 nu / kappa``."""
        key = (nu, kappa)
        if key not in self._schur:
            if len(self._schur) > 64:
                self._schur.clear()
            c = 2.0 * nu / kappa
            S = self.K + self.n * nu * np.eye(self.n) - self.P.T @ (self.P / (self.s + c)[:, None])
            self._schur[key] = scipy.linalg.cho_factor(0.5 * (S + S.T), check_finite=False)
        return self._schur[key]

    def step1(self, y: np.ndarray, t: np.ndarray, nu: float, kappa: float):
        """S1 in rotated coordinates: ``t = U^T (phi - lam)`` -> ``alpha``, ``U^T beta``,
        ``U^T Z omega``. O(nd n)."""
        c = 2.0 * nu / kappa
        inv = 1.0 / (self.s + c)
        alpha = scipy.linalg.cho_solve(self.schur(nu, kappa), y - self.P.T @ (inv * t))
        beta_r = inv * (t - self.P @ alpha)
        return alpha, beta_r, t - c * beta_r

    def h_norm(self, x_rot: np.ndarray) -> float:
        """``||x||_H`` from rotated coordinates ``U^T x``."""
        return float(np.sqrt(np.dot(self.s * x_rot, x_rot)))


@dataclass
class ADMMResult:
    """Solution and diagnostics. ``phi``/``lam`` are (d, n); ``beta`` is (d, n)."""

    alpha: np.ndarray
    beta: np.ndarray
    phi: np.ndarray
    lam: np.ndarray
    kappa: float
    n_iter: int
    converged: bool
    objective: float
    history: dict[str, list[float]] = field(default_factory=dict)


def objective(
    problem: NVSDProblem, y: np.ndarray, alpha: np.ndarray, beta: np.ndarray,
    reg: Regularizer, tau: float, nu: float,
) -> float:
    """``(1/n)||y - F omega||^2 + tau Omega(Z omega) + nu omega^T Q omega``, computed directly."""
    b = beta.reshape(-1)
    f = problem.K @ alpha + problem.G.T @ b
    phi = (problem.G @ alpha + problem.H @ b).reshape(problem.d, problem.n)
    norm2 = alpha @ f + b @ phi.reshape(-1)
    return float(np.mean((y - f) ** 2) + tau * reg.value(phi) + nu * norm2)


def solve_admm(
    problem: NVSDProblem,
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
    record: bool = False,
) -> ADMMResult:
    """Run ADMM; ``phi``, ``lam`` and ``kappa`` warm-start it (``lam`` scaled by ``kappa``).

    Stops when ``r <= tol max(||Z omega||, ||phi||, ||lam||)`` (``lam`` keeps the test
    meaningful when ``phi = 0``) and
    ``s <= tol max(kappa ||lam||_H, 2 nu ||f||_H)``. The second term is scale-free: ``E`` is
    ``2 nu``-strongly convex in the RKHS, so ``||f - f*||_H <= s / (2 nu)``. O((nd)^2) per
    iteration.
    """
    if not nu > 0:
        raise ValueError(f"nu must be > 0, got {nu!r}")
    n, d = problem.n, problem.d
    U, Ut = problem.U, problem.Ut
    phi = np.zeros(n * d) if phi is None else np.array(phi, dtype=float).reshape(-1)
    lam = np.zeros(n * d) if lam is None else np.array(lam, dtype=float).reshape(-1)
    phi_r, lam_r = Ut @ phi, Ut @ lam
    hist: dict[str, list[float]] = {"objective": [], "primal": [], "dual": [], "kappa": []}
    converged, it = False, 0
    for it in range(1, max_iter + 1):
        alpha, beta_r, uz_r = problem.step1(y, phi_r - lam_r, nu, kappa)
        uz = U @ uz_r
        phi_new = reg.prox((uz + lam).reshape(d, n), tau / kappa).reshape(-1)
        phi_new_r = Ut @ phi_new
        lam += uz - phi_new
        lam_r += uz_r - phi_new_r
        r = float(np.linalg.norm(uz - phi_new))
        s = kappa * problem.h_norm(phi_new_r - phi_r)
        phi, phi_r = phi_new, phi_new_r
        f_norm2 = alpha @ (y - n * nu * alpha) + beta_r @ uz_r  # omega^T Q omega
        if record:
            penalty = tau * reg.value(uz.reshape(d, n)) if tau > 0 else 0.0
            obj = np.mean((n * nu * alpha) ** 2) + penalty + nu * f_norm2
            for key, val in zip(hist, (obj, r, s, kappa), strict=True):
                hist[key].append(float(val))
        eps_pri = tol * max(np.linalg.norm(uz), np.linalg.norm(phi), np.linalg.norm(lam), 1e-300)
        eps_dual = tol * max(kappa * problem.h_norm(lam_r), 2 * nu * np.sqrt(max(f_norm2, 0.0)))
        if r <= eps_pri and s <= eps_dual:
            converged = True
            break
        if it <= adapt_iter and (r > 10.0 * s or s > 10.0 * r):
            factor = 2.0 if r > 10.0 * s else 0.5
            kappa *= factor
            lam /= factor
            lam_r /= factor
    beta = (U @ beta_r).reshape(d, n)
    return ADMMResult(
        alpha=alpha, beta=beta, phi=phi.reshape(d, n), lam=lam.reshape(d, n), kappa=kappa,
        n_iter=it, converged=converged,
        objective=objective(problem, y, alpha, beta, reg, tau, nu), history=hist,
    )


def kkt_residual(
    problem: NVSDProblem, y: np.ndarray, res: ADMMResult, reg: Regularizer, tau: float,
    nu: float,
) -> dict[str, float]:
    """Relative violations of the optimality conditions, recomputed from ``omega`` and ``lam``.

    With ``phi^ = Z omega`` and the dual ``u = kappa lam``:
    ``primal = ||phi^ - phi|| / ||phi^||``, stationarity in ``alpha``
    ``||(2/n)(F omega - y) + 2 nu alpha||``, stationarity in ``beta`` ``||2 nu beta + u||_H``
    (both relative to ``||u||_H``), and ``subgrad``: the distance of ``u`` from
    ``tau dOmega(phi^)`` on the support of ``phi`` relative to ``tau``. O((nd)^2).
    """
    n, d = problem.n, problem.d
    b = res.beta.reshape(-1)
    f = problem.K @ res.alpha + problem.G.T @ b
    phi_hat = (problem.G @ res.alpha + problem.H @ b).reshape(d, n)
    u = res.kappa * res.lam
    stat_b = 2 * nu * b + u.reshape(-1)
    u_norm = max(np.sqrt(max(u.reshape(-1) @ problem.H @ u.reshape(-1), 0.0)),
                 2 * nu * np.sqrt(max(b @ problem.H @ b, 0.0)), 1e-300)
    out = {
        "primal": float(np.linalg.norm(phi_hat - res.phi) / max(np.linalg.norm(phi_hat), 1e-300)),
        "stationarity_alpha": float(
            np.linalg.norm(2.0 / n * (f - y) + 2 * nu * res.alpha) / np.linalg.norm(y)
        ),
        "stationarity_beta": float(np.sqrt(max(stat_b @ problem.H @ stat_b, 0.0)) / u_norm),
    }
    out["subgrad"] = _subgradient_gap(reg, phi_hat, res.phi, u, tau) if tau > 0 else 0.0
    return out


def _subgradient_gap(
    reg: Regularizer, phi_hat: np.ndarray, phi: np.ndarray, u: np.ndarray, tau: float
) -> float:
    """Max relative gap of ``u`` to ``tau dOmega(phi_hat)``; blocks zero in ``phi`` use the ball."""
    n = phi.shape[1]
    sqrt_n = np.sqrt(n)
    active = (phi * phi).sum(1) > 0
    gaps = [0.0]
    if reg.kind == "gl":
        for g, w in enumerate(reg.weights):
            members = reg.group_of == g
            if active[members].any():
                ph = phi_hat[members]
                expected = tau * w * ph / (sqrt_n * np.linalg.norm(ph))
                gaps.append(np.linalg.norm(u[members] - expected) / (tau * w / sqrt_n))
            else:
                gaps.append(max(np.linalg.norm(u[members]) / (tau * w / sqrt_n) - 1.0, 0.0))
        return float(max(gaps))
    ratio = reg.l1_ratio
    for a in range(reg.d):
        if active[a]:
            ph = phi_hat[a]
            expected = tau * ratio * ph / (sqrt_n * np.linalg.norm(ph))
            expected = expected + tau * (1.0 - ratio) * 2.0 * ph / n
            gaps.append(np.linalg.norm(u[a] - expected) / (tau * ratio / sqrt_n))
        else:
            gaps.append(max(np.linalg.norm(u[a]) / (tau * ratio / sqrt_n) - 1.0, 0.0))
    return float(max(gaps))
