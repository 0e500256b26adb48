"""Relaxed NVSD: kernel ridge refitted on the inputs that NVSD's derivative norms rank first.

NVSD ranks input ``a`` by ``||d_a f||_n``. When ``n`` is small against the RKHS (the cubic
polynomial kernel in 18 inputs spans 1,330 monomials; E1 has n = 100), the penalized fit at
the validation-best ``tau`` interpolates the data with small derivatives in every direction,
so its own support is all inputs — yet the ranking is right. As the relaxed lasso does
(Meinshausen 2007), the relaxed estimator keeps the ranking and drops the shrinkage: for each
path point it takes the nested supports "top k inputs" (top k groups, in order of group norm,
for ``"gl"``), fits kernel ridge on those columns only, and keeps the (path point, k, ridge)
with the lowest validation RMSE.

Cost: each distinct support is fitted once per ridge value, O(n^2 |S| + n^3) (kernel matrix
and Cholesky of ``K_S``); a path point adds at most ``d + 1`` supports, and neighbouring
points mostly repeat them, so a path of P points costs at most ``P (d + 1) len(alphas)`` fits
(E1-E3 benchmark, 24-72 path points: at most 3.2 s wall clock per selection, shared machine).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg

from .kernels import make_kernel

DEFAULT_ALPHAS = tuple(np.logspace(-6, 1, 8))


def ranked_supports(model: Any) -> list[np.ndarray]:
    """Nested supports of a fitted NVSD: top-1, top-2, ... variables by derivative norm.

    For ``regularizer="gl"`` the steps are whole groups, ordered by group norm. Variables
    (groups) with a zero norm are never added. Ties: lower index first. O(d log d).
    """
    norms = np.asarray(model.derivative_norms_, dtype=float)
    reg = model.make_regularizer(norms.size)
    units = reg.group_of if model.regularizer == "gl" else np.arange(norms.size)
    unit_norms = reg.group_norms(norms) if model.regularizer == "gl" else norms
    order = np.lexsort((np.arange(unit_norms.size), -unit_norms))
    supports, chosen = [], np.zeros(norms.size, dtype=bool)
    for unit in order:
        if not unit_norms[unit] > 0:
            break
        chosen |= units == unit
        supports.append(np.flatnonzero(chosen))
    return supports


class SubsetKernelRidge:
    """Kernel ridge regression on a subset of the input columns.

    ``min_c ||y - K_S c||^2 + alpha c^T K_S c`` with ``K_S[i, j] = k(x^i_S, x^j_S)``, solved as
    ``(K_S + alpha I) c = y`` (scikit-learn's ``KernelRidge`` parametrization; NVSD with
    ``tau = 0`` is this with ``alpha = n nu`` on all columns). An empty subset predicts the
    training mean. Fit O(n^2 |S| + n^3); predict O(m n |S|).
    """

    def __init__(self, *, kernel: str = "polynomial", kernel_params: dict | None = None,
                 columns: Any = (), alpha: float = 1e-3) -> None:
        self.kernel = kernel
        self.kernel_params = dict(kernel_params or {})
        self.columns = np.asarray(columns, dtype=np.int64).reshape(-1)
        self.alpha = float(alpha)

    def fit(self, X: np.ndarray, y: np.ndarray) -> SubsetKernelRidge:
        """Fit on ``X`` (n, d) and ``y`` (n,)."""
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        if not self.alpha > 0:
            raise ValueError(f"alpha must be > 0, got {self.alpha!r}")
        if self.columns.size and (self.columns.min() < 0 or self.columns.max() >= X.shape[1]):
            raise ValueError(f"columns must lie in [0, {X.shape[1]}), got {self.columns}")
        self.n_features_in_ = X.shape[1]
        self.X_fit_ = np.ascontiguousarray(X[:, self.columns])
        if self.columns.size == 0:
            self.intercept_, self.dual_coef_ = float(np.mean(y)), np.zeros(X.shape[0])
            return self
        K = make_kernel(self.kernel, **self.kernel_params).value(self.X_fit_, self.X_fit_)
        K[np.diag_indices_from(K)] += self.alpha
        self.intercept_ = 0.0
        self.dual_coef_ = scipy.linalg.cho_solve(
            scipy.linalg.cho_factor(K, check_finite=False), y, check_finite=False)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Predictions for ``X`` (m, d), (m,)."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X must have {self.n_features_in_} columns, got shape {X.shape}")
        if self.columns.size == 0:
            return np.full(X.shape[0], self.intercept_)
        kern = make_kernel(self.kernel, **self.kernel_params)
        return kern.value(X[:, self.columns], self.X_fit_) @ self.dual_coef_

    def state_dict(self) -> dict[str, Any]:
        """Parameters and fitted arrays for :func:`algorithms.serialization.dumps_state`."""
        return {"class": "SubsetKernelRidge", "kernel": self.kernel,
                "kernel_params": self.kernel_params, "columns": self.columns,
                "alpha": self.alpha, "n_features_in_": self.n_features_in_,
                "X_fit_": self.X_fit_, "dual_coef_": self.dual_coef_,
                "intercept_": self.intercept_}

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> SubsetKernelRidge:
        """Inverse of :meth:`state_dict` (bit-exact)."""
        if state.get("class") != "SubsetKernelRidge":
            raise ValueError(f"not a SubsetKernelRidge state: {state.get('class')!r}")
        model = cls(kernel=state["kernel"], kernel_params=state["kernel_params"],
                    columns=state["columns"], alpha=state["alpha"])
        model.n_features_in_ = int(state["n_features_in_"])
        model.X_fit_ = np.asarray(state["X_fit_"])
        model.dual_coef_ = np.asarray(state["dual_coef_"])
        model.intercept_ = float(state["intercept_"])
        return model


@dataclass
class RelaxedSelection:
    """The chosen refit: ``model`` (fitted), its ``support``, ``alpha``, validation RMSE, the
    index of the path model whose ranking produced it, and how many distinct fits were made."""

    model: SubsetKernelRidge
    support: np.ndarray
    alpha: float
    validation_rmse: float
    path_index: int
    n_fits: int


def select_relaxed(
    path: list[Any], X: np.ndarray, y: np.ndarray, X_val: np.ndarray, y_val: np.ndarray,
    *, alphas: tuple[float, ...] = DEFAULT_ALPHAS,
) -> RelaxedSelection:
    """Best kernel-ridge refit over the nested supports of every fitted NVSD in ``path``.

    Every model in ``path`` must share the kernel and have been fitted on ``X``; the empty
    support (the mean) is a candidate too. Ties keep the earlier candidate (sparser path
    point, smaller support, smaller alpha).
    """
    if not path:
        raise ValueError("path must hold at least one fitted NVSD")
    first = path[0]
    kernel_params = first.make_kernel().params()
    seen: dict[tuple[int, ...], tuple[float, float, SubsetKernelRidge]] = {}
    best: tuple[float, int, tuple[int, ...]] | None = None
    for index, model in enumerate(path):
        for cols in [np.zeros(0, dtype=np.int64), *ranked_supports(model)]:
            key = tuple(int(c) for c in cols)
            if key not in seen:
                seen[key] = _best_alpha(first.kernel, kernel_params, cols, X, y, X_val, y_val,
                                        alphas)
            if best is None or seen[key][0] < best[0]:
                best = (seen[key][0], index, key)
    assert best is not None
    rmse, index, key = best
    _, alpha, refit = seen[key]
    return RelaxedSelection(model=refit, support=np.asarray(key, dtype=np.int64), alpha=alpha,
                            validation_rmse=rmse, path_index=index,
                            n_fits=len(seen) * len(alphas))


def _best_alpha(kernel, kernel_params, cols, X, y, X_val, y_val, alphas):
    best = None
    for alpha in alphas:
        model = SubsetKernelRidge(kernel=kernel, kernel_params=kernel_params, columns=cols,
                                  alpha=alpha).fit(X, y)
        rmse = float(np.sqrt(np.mean((model.predict(X_val) - y_val) ** 2)))
        if best is None or rmse < best[0]:
            best = (rmse, float(alpha), model)
    return best


class RelaxedNVSD:
    """One-call relaxed NVSD: τ paths over ``nus`` (and ``mus`` for ``"en"``), ranking,
    kernel-ridge refit on the top-ranked inputs, choice on validation data.

    ``fit(X, y)`` holds out ``validation_fraction`` of the rows (seeded) for the choice and
    then refits the chosen support and ridge on all rows; ``fit(X, y, validation=(Xv, yv))``
    uses the given set and fits on ``X`` only. ``nvsd_params`` are :class:`NVSD` parameters
    (kernel, groups, tol, ...). Fitted: ``support_``, ``alpha_``, ``model_``
    (:class:`SubsetKernelRidge`), ``validation_rmse_``, ``tau_``, ``nu_``, ``mu_``.
    Cost: the paths (see :func:`~algorithms.nvsd.nvsd_path`) plus :func:`select_relaxed`.
    """

    def __init__(self, *, nus: tuple[float, ...] = (1e-3, 1e-1, 1.0),
                 mus: tuple[float, ...] = (0.25, 0.5, 0.75), n_taus: int = 8,
                 ratio: float = 1e-3, alphas: tuple[float, ...] = DEFAULT_ALPHAS,
                 validation_fraction: float = 0.25, random_state: int = 0,
                 **nvsd_params: Any) -> None:
        self.nus, self.mus, self.n_taus, self.ratio = tuple(nus), tuple(mus), n_taus, ratio
        self.alphas = tuple(alphas)
        self.validation_fraction = validation_fraction
        self.random_state = random_state
        self.nvsd_params = nvsd_params

    def fit(self, X: np.ndarray, y: np.ndarray, *,
            validation: tuple[np.ndarray, np.ndarray] | None = None) -> RelaxedNVSD:
        from .estimator import NVSD, _check_inputs
        from .path import nvsd_path

        X = _check_inputs(X)
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        if validation is None:
            if not 0.0 < self.validation_fraction < 1.0:
                raise ValueError("validation_fraction must be in (0, 1)")
            order = np.random.default_rng(self.random_state).permutation(len(y))
            n_val = max(1, int(round(self.validation_fraction * len(y))))
            val, train = order[:n_val], np.sort(order[n_val:])
            X_fit, y_fit, X_val, y_val = X[train], y[train], X[val], y[val]
        else:
            X_fit, y_fit = X, y
            X_val, y_val = (np.asarray(a, dtype=np.float64) for a in validation)
        base = NVSD(**self.nvsd_params)
        problem = base.make_problem(X_fit)
        mus = self.mus if base.regularizer == "en" else (base.mu,)
        path = []
        for nu in self.nus:
            for mu in mus:
                params = {**base.get_params(), "nu": nu, "mu": mu}
                params.pop("tau")
                path += nvsd_path(X_fit, y_fit, problem=problem, n_taus=self.n_taus,
                                  ratio=self.ratio, **params)
        chosen = select_relaxed(path, X_fit, y_fit, X_val, y_val, alphas=self.alphas)
        source = path[chosen.path_index]
        self.support_, self.alpha_ = chosen.support, chosen.alpha
        self.validation_rmse_ = chosen.validation_rmse
        self.tau_, self.nu_, self.mu_ = float(source.tau), float(source.nu), float(source.mu)
        self.model_ = chosen.model if validation is not None else SubsetKernelRidge(
            kernel=chosen.model.kernel, kernel_params=chosen.model.kernel_params,
            columns=chosen.support, alpha=chosen.alpha).fit(X, y)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Predictions of the refitted kernel ridge, (m,)."""
        return self.model_.predict(X)

    def selected_features(self) -> np.ndarray:
        """Indices of the selected inputs."""
        return self.support_

    def state_dict(self) -> dict[str, Any]:
        """Flat state for :func:`algorithms.serialization.dumps_state` (the refit's arrays
        under ``model.``)."""
        state: dict[str, Any] = {
            "class": "RelaxedNVSD", "nus": list(self.nus), "mus": list(self.mus),
            "n_taus": self.n_taus, "ratio": self.ratio, "alphas": list(self.alphas),
            "validation_fraction": self.validation_fraction,
            "random_state": self.random_state, "nvsd_params": self.nvsd_params}
        if hasattr(self, "model_"):
            state.update(support_=self.support_, alpha_=self.alpha_,
                         validation_rmse_=self.validation_rmse_, tau_=self.tau_,
                         nu_=self.nu_, mu_=self.mu_)
            state.update({f"model.{k}": v for k, v in self.model_.state_dict().items()})
        return state

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> RelaxedNVSD:
        """Inverse of :meth:`state_dict` (bit-exact predictions)."""
        if state.get("class") != "RelaxedNVSD":
            raise ValueError(f"not a RelaxedNVSD state: {state.get('class')!r}")
        model = cls(nus=state["nus"], mus=state["mus"], n_taus=state["n_taus"],
                    ratio=state["ratio"], alphas=state["alphas"],
                    validation_fraction=state["validation_fraction"],
                    random_state=state["random_state"], **state["nvsd_params"])
        if "support_" in state:
            model.support_ = np.asarray(state["support_"])
            model.alpha_ = float(state["alpha_"])
            model.validation_rmse_ = float(state["validation_rmse_"])
            model.tau_, model.nu_, model.mu_ = (float(state[k]) for k in ("tau_", "nu_", "mu_"))
            model.model_ = SubsetKernelRidge.from_state_dict(
                {k[len("model."):]: v for k, v in state.items() if k.startswith("model.")})
        return model
