"""NVSD estimator: nonlinear variable selection by derivative-norm sparsity (UAI 2018).

``f = sum_i alpha_i k(x^i, .) + sum_a sum_i beta_ai d_a k(x^i, .)`` minimizing
``(1/n) sum_j (y_j - f(x^j))^2 + tau Omega(||d_1 f||_n, ..., ||d_d f||_n) + nu ||f||_H^2``
with ``Omega`` lasso (``"l"``), group lasso (``"gl"``) or elastic net (``"en"``), by ADMM.
Fit: O((nd)^3) once for the eigendecomposition plus O((nd)^2) per ADMM iteration;
predict: O(m n d).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..serialization import dumps_state, loads_state
from ._state import get_array, get_number
from .admm import NVSDProblem
from .inexact import DenseNVSDProblem
from .kernels import evaluate_function, make_kernel
from .path import solver_for
from .prox import make_regularizer

_PARAMS = (
    "regularizer", "kernel", "degree", "offset", "sigma", "tau", "nu", "mu", "groups",
    "group_weight", "max_iter", "tol", "selection_tol", "warm_start", "solver",
)
_ARRAYS = ("X_train_", "alpha_", "beta_", "phi_", "lambda_", "derivative_norms_", "support_")


class NVSD:
    """Nonlinear variable selection via derivatives (Gregorova et al., UAI 2018).

    Parameters
    ----------
    regularizer : ``"l"`` (lasso), ``"gl"`` (group lasso, needs ``groups``) or ``"en"``.
    kernel : ``"polynomial"`` (``(offset + s.t)^degree``) or ``"gaussian"``
        (``exp(-||s - t||^2 / (2 sigma^2))``).
    tau, nu : sparsity and RKHS-norm weights (``nu > 0``); ``tau = 0`` is kernel ridge with
        ``alpha = n nu`` in scikit-learn's ``KernelRidge``.
    mu : elastic-net mix in (0, 1]. groups : list of lists of 0-based variables.
    group_weight : ``"size"`` (``p_g``, the seed) or ``"sqrt"`` (``sqrt(p_g)``).
    selection_tol : a variable is selected when ``||d_a f||_n > selection_tol``.
    warm_start : reuse the previous ``phi``, dual and ``kappa`` when refitting same-sized data.
    solver : ``"direct"`` (exact S1 via one eigendecomposition of the (nd, nd) block, O((nd)^3)
        once) or ``"inexact"`` (warm-started conjugate-gradient S1, O((nd)^2) per step; for
        large ``nd``).

    Fitted attributes: ``alpha_`` (n,), ``beta_`` (d, n), ``phi_`` (d, n) derivative values,
    ``lambda_`` scaled dual, ``kappa_``, ``derivative_norms_`` (d,), ``support_`` (d,) bool,
    ``n_iter_``, ``converged_``, ``objective_``.

    Examples
    --------
    >>> from algorithms.datasets.nvsd_synthetic import make_e1
    >>> X, y = make_e1(30, seed=0)
    >>> model = NVSD(regularizer="gl", groups=[[0, 1, 2], [3, 4, 5]] + [[a] for a in range(6, 18)],
    ...              tau=1.0, nu=1e-3).fit(X, y)
    >>> model.support_.shape
    (18,)
    """

    def __init__(
        self, *, regularizer: str = "l", kernel: str = "polynomial", degree: int = 3,
        offset: float = 1.0, sigma: float = 1.0, tau: float = 1.0, nu: float = 1e-3,
        mu: float = 0.5, groups: list[list[int]] | None = None, group_weight: str = "size",
        max_iter: int = 5000, tol: float = 1e-4,
        selection_tol: float = 1e-8, warm_start: bool = False, solver: str = "direct",
    ) -> None:
        self.regularizer = regularizer
        self.kernel = kernel
        self.degree = degree
        self.offset = offset
        self.sigma = sigma
        self.tau = tau
        self.nu = nu
        self.mu = mu
        self.groups = groups
        self.group_weight = group_weight
        self.max_iter = max_iter
        self.tol = tol
        self.selection_tol = selection_tol
        self.warm_start = warm_start
        self.solver = solver

    def get_params(self) -> dict[str, Any]:
        """Constructor parameters."""
        return {name: getattr(self, name) for name in _PARAMS}

    def make_kernel(self) -> Any:
        """The kernel object these parameters describe."""
        if self.kernel == "gaussian":
            return make_kernel("gaussian", sigma=self.sigma)
        return make_kernel(self.kernel, degree=self.degree, offset=self.offset)

    def make_regularizer(self, d: int) -> Any:
        """The :class:`~algorithms.nvsd.prox.Regularizer` for ``d`` variables."""
        return make_regularizer(self.regularizer, d, groups=self.groups, mu=self.mu,
                                group_weight=self.group_weight)

    def make_problem(self, X: np.ndarray) -> NVSDProblem | DenseNVSDProblem:
        """Precompute the kernel matrices for ``X``; reusable across ``tau``, ``nu``, ``mu``."""
        if self.solver not in ("direct", "inexact"):
            raise ValueError(f"solver must be 'direct' or 'inexact', got {self.solver!r}")
        cls = NVSDProblem if self.solver == "direct" else DenseNVSDProblem
        return cls(self.make_kernel(), _check_inputs(X))

    def fit(self, X: np.ndarray, y: np.ndarray, *, problem: Any = None) -> NVSD:
        """Fit on ``X`` (n, d), ``y`` (n,); ``problem`` may be a precomputed
        :meth:`make_problem` for the same ``X``."""
        X = _check_inputs(X)
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        if y.shape[0] != X.shape[0] or not np.isfinite(y).all():
            raise ValueError(f"y must be finite with {X.shape[0]} entries, got shape {y.shape}")
        if not self.tau >= 0:
            raise ValueError(f"tau must be >= 0, got {self.tau!r}")
        if problem is None:
            problem = self.make_problem(X)
        elif problem.X.shape != X.shape or not np.array_equal(problem.X, X):
            raise ValueError("problem was built for different X")
        reg = self.make_regularizer(X.shape[1])
        warm: dict[str, Any] = {}
        if (self.warm_start and getattr(self, "phi_", None) is not None
                and self.phi_.shape == (X.shape[1], X.shape[0])):
            warm = {"phi": self.phi_, "lam": self.lambda_, "kappa": self.kappa_}
        res = solver_for(problem)(problem, y, reg, float(self.tau), float(self.nu),
                                  max_iter=self.max_iter, tol=self.tol, **warm)
        self._set_result(X, res, reg)
        return self

    def _set_result(self, X: np.ndarray, res: Any, reg: Any) -> None:
        self.X_train_ = X
        self.alpha_, self.beta_ = res.alpha, res.beta
        self.phi_, self.lambda_, self.kappa_ = res.phi, res.lam, float(res.kappa)
        self.n_iter_, self.converged_ = int(res.n_iter), bool(res.converged)
        self.objective_ = float(res.objective)
        self.derivative_norms_ = reg.block_norms(res.phi)
        self.support_ = self.derivative_norms_ > self.selection_tol

    def predict(self, X: np.ndarray) -> np.ndarray:
        """``f(X)``, (m,). O(m n d) in chunks of 2048 rows."""
        X = _check_inputs(X)
        if X.shape[1] != self.X_train_.shape[1]:
            raise ValueError(f"X has {X.shape[1]} features, expected {self.X_train_.shape[1]}")
        kern = self.make_kernel()
        parts = [evaluate_function(kern, self.X_train_, self.alpha_, self.beta_, X[i : i + 2048])
                 for i in range(0, X.shape[0], 2048)]
        return np.concatenate(parts) if parts else np.zeros(0)

    def selected_features(self) -> np.ndarray:
        """Indices of the selected variables."""
        return np.flatnonzero(self.support_)

    def state_dict(self) -> dict[str, Any]:
        """Parameters and fitted arrays for :func:`algorithms.serialization.dumps_state`."""
        state: dict[str, Any] = {"class": "NVSD", **self.get_params()}
        if hasattr(self, "alpha_"):
            state.update({name: getattr(self, name) for name in _ARRAYS})
            state.update(kappa_=self.kappa_, n_iter_=self.n_iter_, converged_=self.converged_,
                         objective_=self.objective_)
        return state

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> NVSD:
        """Inverse of :meth:`state_dict` (bit-exact); ``ValueError`` when the parameters are
        invalid, a fitted array is missing, of the wrong shape or dtype, or not finite."""
        if state.get("class") != "NVSD":
            raise ValueError(f"not an NVSD state: {state.get('class')!r}")
        missing = [name for name in _PARAMS if name not in state]
        if missing:
            raise ValueError(f"NVSD state lacks parameters {missing}")
        model = cls(**{name: state[name] for name in _PARAMS})
        if "alpha_" in state:
            X = get_array(state, "X_train_", (None, None))
            n, d = X.shape
            model.make_kernel()
            model.make_regularizer(d)
            model.X_train_ = X
            model.alpha_ = get_array(state, "alpha_", (n,))
            for name in ("beta_", "phi_", "lambda_"):
                setattr(model, name, get_array(state, name, (d, n)))
            model.derivative_norms_ = get_array(state, "derivative_norms_", (d,))
            model.support_ = get_array(state, "support_", (d,), kinds="b")
            model.kappa_ = get_number(state, "kappa_")
            model.n_iter_ = get_number(state, "n_iter_", integer=True)
            if not isinstance(state.get("converged_"), bool):
                raise ValueError("state 'converged_' must be a bool")
            model.converged_ = state["converged_"]
            model.objective_ = get_number(state, "objective_")
        return model

    def to_bytes(self) -> bytes:
        """:meth:`state_dict` serialized by :func:`algorithms.serialization.dumps_state`."""
        return dumps_state(self.state_dict())

    @classmethod
    def from_bytes(cls, data: bytes) -> NVSD:
        """Inverse of :meth:`to_bytes` (bit-exact); ``ValueError`` on a malformed state."""
        return cls.from_state_dict(loads_state(data))


def _check_inputs(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0 or not np.isfinite(X).all():
        raise ValueError(f"X must be a finite non-empty 2-D array, got shape {X.shape}")
    return np.ascontiguousarray(X)
