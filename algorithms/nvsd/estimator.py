"""NVSD estimator: nonlinear variable selection by derivative-norm sparsity (UAI 2018).

``f = sum_i alpha_i k(x^i, .) + sum_a sum_i beta_ai d_a k(x^i, .)`` minimizing
``(1/n) sum_j (y_j - f(x^j))^2 + tau Omega(||d_1 f||_n, ..., ||d_d f||_n) + nu ||f||_H^2``
with ``Omega`` lasso (``"l"``), group lasso (``"gl"``) or elastic net (``"en"``), by ADMM.
Fit: O((nd)^3) once for the eigendecomposition plus O((nd)^2) per ADMM iteration;
predict: O(m n d). The protocol is the batch models' (``algorithms.batch``); ``mu=`` is the
deprecated spelling of ``l1_ratio=``.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..batch import DEPRECATED, BatchModel, as_dense, deprecated_alias
from ..estimator import RegressorMixin, check_n_features, column_or_1d, not_fitted
from ..states import envelope, open_envelope, renamed
from ._state import get_array, get_number
from .admm import NVSDProblem
from .inexact import DenseNVSDProblem, solver_for
from .kernels import evaluate_function, make_kernel
from .prox import make_regularizer
from .ranking import ranked_units

_PARAMS = (
    "regularizer", "kernel", "degree", "offset", "sigma", "tau", "nu", "l1_ratio", "groups",
    "group_weight", "max_iter", "tol", "selection_tol", "warm_start", "solver",
)
_ARRAYS = ("X_train_", "alpha_", "beta_", "phi_", "lambda_", "derivative_norms_", "support_")


class NVSD(RegressorMixin, BatchModel):
    """Nonlinear variable selection via derivatives (Gregorova et al., UAI 2018); a
    scikit-learn regressor.

    Parameters
    ----------
    regularizer : ``"l"`` (lasso), ``"gl"`` (group lasso, needs ``groups``) or ``"en"``.
    kernel : ``"polynomial"`` (``(offset + s.t)^degree``) or ``"gaussian"``
        (``exp(-||s - t||^2 / (2 sigma^2))``).
    tau, nu : sparsity and RKHS-norm weights (``nu > 0``); ``tau = 0`` is kernel ridge with
        ``alpha = n nu`` in scikit-learn's ``KernelRidge``.
    l1_ratio : elastic-net mix in (0, 1], the weight of the l1 part (the paper's mu;
        ``mu`` is its deprecated spelling). groups : list of lists of 0-based variables
        (the units of ``"gl"``: what ``computed_groups`` and ``next_group`` count).
    group_weight : ``"size"`` (``p_g``, the seed) or ``"sqrt"`` (``sqrt(p_g)``).
    selection_tol : a variable is selected when ``||d_a f||_n > selection_tol``.
    warm_start : reuse the previous ``phi``, dual and ``kappa`` when refitting same-sized data.
    solver : ``"direct"`` (exact S1 via one eigendecomposition of the (nd, nd) block, O((nd)^3)
        once) or ``"inexact"`` (warm-started conjugate-gradient S1, O((nd)^2) per step; for
        large ``nd``).

    Fitted attributes: ``alpha_`` (n,), ``beta_`` (d, n), ``phi_`` (d, n) derivative values,
    ``lambda_`` scaled dual, ``kappa_``, ``derivative_norms_`` (d,), ``support_`` (d,) bool,
    ``n_iter_``, ``converged_``, ``objective_``.

    Input: dense arrays, scipy sparse matrices or ``CSRBatch`` (the kernels are dense).
    ``predict(X, computed_groups=S)`` evaluates ``f`` with the variables outside the groups
    ``S`` set to 0 (not computed; they may hold anything, NaN included), the service's
    convention for a client that has not computed them; ``next_group(S)`` is the first
    group by derivative norm (group norm for ``"gl"``) with a selected variable outside
    ``S``. Without ``"gl"`` groups, group ``a`` is variable ``a``.

    Examples
    --------
    >>> from algorithms.datasets.nvsd_synthetic import make_e1
    >>> X, y = make_e1(30, seed=0)
    >>> model = NVSD(regularizer="gl", groups=[[0, 1, 2], [3, 4, 5]] + [[a] for a in range(6, 18)],
    ...              tau=1.0, nu=1e-3).fit(X, y)
    >>> model.support_.shape
    (18,)
    """

    kind = "nvsd"
    _renamed = {"mu": "l1_ratio"}

    def __init__(
        self, *, regularizer: str = "l", kernel: str = "polynomial", degree: int = 3,
        offset: float = 1.0, sigma: float = 1.0, tau: float = 1.0, nu: float = 1e-3,
        l1_ratio: float = 0.5, groups: list[list[int]] | None = None,
        group_weight: str = "size", max_iter: int = 5000, tol: float = 1e-4,
        selection_tol: float = 1e-8, warm_start: bool = False, solver: str = "direct",
        mu: float | None = None,
    ) -> None:
        self.regularizer = regularizer
        self.kernel = kernel
        self.degree = degree
        self.offset = offset
        self.sigma = sigma
        self.tau = tau
        self.nu = nu
        self.l1_ratio = deprecated_alias("NVSD", "mu", "l1_ratio",
                                         DEPRECATED if mu is None else mu, l1_ratio, 0.5)
        self.groups = groups
        self.group_weight = group_weight
        self.max_iter = max_iter
        self.tol = tol
        self.selection_tol = selection_tol
        self.warm_start = warm_start
        self.solver = solver

    def make_kernel(self) -> Any:
        """The kernel object these parameters describe."""
        if self.kernel == "gaussian":
            return make_kernel("gaussian", sigma=self.sigma)
        return make_kernel(self.kernel, degree=self.degree, offset=self.offset)

    def make_regularizer(self, d: int) -> Any:
        """The :class:`~algorithms.nvsd.prox.Regularizer` for ``d`` variables."""
        return make_regularizer(self.regularizer, d, groups=self.groups,
                                l1_ratio=self.l1_ratio, group_weight=self.group_weight)

    def check_params(self, n_features: int) -> None:
        """ValueError / TypeError naming the first parameter :meth:`fit` would refuse for
        ``n_features`` variables (kernel, regularizer and groups included)."""
        for name, low, strict in (("tau", 0.0, False), ("nu", 0.0, False),
                                  ("tol", 0.0, True), ("selection_tol", 0.0, False)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(f"{name} must be a number, got {value!r}")
            if not (value > low if strict else value >= low):
                raise ValueError(f"{name} must be {'>' if strict else '>='} {low}, "
                                 f"got {value!r}")
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, numbers.Integral) \
                or self.max_iter < 1:
            raise ValueError(f"max_iter must be an integer >= 1, got {self.max_iter!r}")
        if self.solver not in ("direct", "inexact"):
            raise ValueError(f"solver must be 'direct' or 'inexact', got {self.solver!r}")
        try:
            self.make_kernel()
        except TypeError as exc:
            raise ValueError(f"bad kernel parameters: {exc}") from exc
        self.make_regularizer(int(n_features))

    def make_problem(self, X: np.ndarray) -> NVSDProblem | DenseNVSDProblem:
        """Precompute the kernel matrices for ``X``; reusable across ``tau``, ``nu``,
        ``l1_ratio``."""
        if self.solver not in ("direct", "inexact"):
            raise ValueError(f"solver must be 'direct' or 'inexact', got {self.solver!r}")
        cls = NVSDProblem if self.solver == "direct" else DenseNVSDProblem
        return cls(self.make_kernel(), _check_inputs(X))

    def fit(self, X: np.ndarray, y: np.ndarray, *, problem: Any = None) -> NVSD:
        """Fit on ``X`` (n, d), ``y`` (n,); ``problem`` may be a precomputed
        :meth:`make_problem` for the same ``X``."""
        X = _check_inputs(X)
        y = _check_target(y, X.shape[0])
        self.check_params(X.shape[1])
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
        self.n_features_in_ = X.shape[1]
        self.X_train_ = X
        self.alpha_, self.beta_ = res.alpha, res.beta
        self.phi_, self.lambda_, self.kappa_ = res.phi, res.lam, float(res.kappa)
        self.n_iter_, self.converged_ = int(res.n_iter), bool(res.converged)
        self.objective_ = float(res.objective)
        self.derivative_norms_ = reg.block_norms(res.phi)
        self.support_ = self.derivative_norms_ > self.selection_tol

    def predict(self, X: np.ndarray, *,
                computed_groups: Iterable[int] | None = None) -> np.ndarray:
        """``f(X)``, (m,), with the variables outside ``computed_groups`` set to 0 (None:
        all computed). O(m n d) in chunks of 2048 rows."""
        if not hasattr(self, "X_train_"):
            raise not_fitted(self)
        if computed_groups is not None:
            X = _zero_uncomputed(X, self._units()[1], computed_groups)
        X = _check_inputs(X)
        check_n_features(self, X.shape[1])
        kern = self.make_kernel()
        parts = [evaluate_function(kern, self.X_train_, self.alpha_, self.beta_, X[i : i + 2048])
                 for i in range(0, X.shape[0], 2048)]
        return np.concatenate(parts) if parts else np.zeros(0)

    def selected_features(self) -> np.ndarray:
        """Indices of the selected variables."""
        return np.flatnonzero(self.support_)

    def _units(self) -> tuple[np.ndarray, np.ndarray]:
        """(ranked units, unit of each variable): see :func:`~.ranking.ranked_units`."""
        return ranked_units(self)

    def next_group(self, computed_groups: Iterable[int] = ()) -> int | None:
        """The first unit (a group of ``"gl"``, else a variable) by derivative norm that
        holds a selected variable and is not in ``computed_groups``; None when every such
        unit is computed. O(d log d)."""
        units, unit_of = self._units()
        have = set(_unit_ids(computed_groups, int(unit_of.max()) + 1))
        selected = set(unit_of[self.support_].tolist())
        return next((int(u) for u in units if int(u) in selected and int(u) not in have),
                    None)

    def state_dict(self) -> dict[str, Any]:
        """Parameters (and the fitted arrays, once fitted) in the envelope of
        ``algorithms.states``."""
        state: dict[str, Any] = {name: getattr(self, name) for name in self._signature_names()}
        if hasattr(self, "alpha_"):
            state.update({name: getattr(self, name) for name in _ARRAYS})
            state.update(kappa_=self.kappa_, n_iter_=self.n_iter_, converged_=self.converged_,
                         objective_=self.objective_)
        return envelope(self.kind, self.format_version, state)

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> NVSD:
        """Inverse of :meth:`state_dict` (bit-exact), also of the states written before the
        envelope (``"class": "NVSD"``, ``mu`` for ``l1_ratio``); ``ValueError`` when the
        parameters are invalid, a fitted array is missing, of the wrong shape or dtype, or
        not finite."""
        version, state = open_envelope(state, cls.kind, (0, cls.format_version))
        if version == 0:
            state = renamed(state, cls._renamed)
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
            model.n_features_in_ = d
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


def _check_inputs(X: Any) -> np.ndarray:
    """``X`` (dense, scipy sparse or CSRBatch) as a finite non-empty C-ordered float64 2-D
    array; ValueError (TypeError: not a matrix) otherwise."""
    return as_dense(X, min_samples=1)


def _check_target(y: Any, n: int) -> np.ndarray:
    """``y`` as ``n`` finite float64 values (a column vector is raveled with a warning);
    ValueError otherwise."""
    y = column_or_1d(y, n)
    try:
        y = y.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"y must hold numbers: {exc}") from exc
    if not np.isfinite(y).all():
        raise ValueError(f"y must be finite with {n} entries, got NaN or infinity")
    return y


def _unit_ids(computed_groups: Iterable[Any], n_units: int) -> list[int]:
    """Unit ids in [0, n_units) as ints; ValueError otherwise."""
    ids = []
    for g in computed_groups:
        if isinstance(g, bool) or not isinstance(g, numbers.Integral) or not 0 <= g < n_units:
            raise ValueError(f"computed_groups must hold group ids in [0, {n_units}), got "
                             f"{g!r}")
        ids.append(int(g))
    return ids


def _zero_uncomputed(X: Any, unit_of: np.ndarray, computed_groups: Iterable[int]) -> np.ndarray:
    """A dense copy of ``X`` with the variables of the units outside ``computed_groups``
    set to 0 (whatever they held, NaN included)."""
    from scipy import sparse as sp

    from ..sparse import CSRBatch

    if isinstance(X, CSRBatch):
        X = X.to_scipy()
    X = X.toarray() if sp.issparse(X) else np.array(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != unit_of.size:
        raise ValueError(f"X must have {unit_of.size} columns, got shape {X.shape}")
    have = np.zeros(int(unit_of.max()) + 1, dtype=bool)
    have[_unit_ids(computed_groups, have.size)] = True
    X[:, ~have[unit_of]] = 0.0
    return X
