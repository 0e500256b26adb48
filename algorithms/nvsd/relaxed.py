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
(``benchmarks/nvsd.py``, E1-E3, 24-72 path points: at most 3.2 s wall clock per
selection, shared machine).

:class:`RelaxedNVSD` also keeps every nested support of the chosen path point's ranking with
its own refit, so a client that has computed only some inputs gets the refit on the largest
nested support it has (``predict(X, computed_groups=...)``) and is told which unit to compute
next (``next_group``). The protocol is the batch models' (``algorithms.batch``).
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from ..batch import DEPRECATED, BatchModel, as_dense, canonical_params, deprecated_alias
from ..estimator import RegressorMixin, check_matrix_shape, not_fitted
from ..sparse import CSRBatch
from ..states import envelope, open_envelope, renamed
from ._state import get_array, get_number, sub_state
from .estimator import NVSD, _check_inputs, _check_target
from .kernels import make_kernel
from .path import nvsd_path
from .ranking import ranked_supports, ranked_units

DEFAULT_ALPHAS = tuple(np.logspace(-6, 1, 8))


class SubsetKernelRidge:
    """Kernel ridge regression on a subset of the input columns.

    ``min_c ||y - K_S c||^2 + alpha c^T K_S c`` with ``K_S[i, j] = k(x^i_S, x^j_S)``, solved as
    ``(K_S + alpha I) c = y`` (scikit-learn's ``KernelRidge`` parametrization; NVSD with
    ``tau = 0`` is this with ``alpha = n nu`` on all columns). An empty subset predicts the
    training mean. Fit O(n^2 |S| + n^3); predict O(m n |S|).
    """

    kind = "subset-kernel-ridge"
    format_version = 1

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
        """Predictions for ``X`` (m, d: dense, scipy sparse or CSRBatch), (m,); the columns
        outside ``columns`` are not read (they may hold NaN)."""
        if isinstance(X, CSRBatch):
            X = X.to_scipy()
        X = X.toarray() if sp.issparse(X) else np.asarray(X)
        check_matrix_shape(X, min_samples=0)
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"X must have {self.n_features_in_} columns, got shape {X.shape}")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X must have {self.n_features_in_} columns: X has "
                             f"{X.shape[1]} features, but {type(self).__name__} is expecting "
                             f"{self.n_features_in_} features as input.")
        if self.columns.size == 0:
            return np.full(X.shape[0], self.intercept_)
        used = X[:, self.columns]
        if not np.isfinite(used).all():
            raise ValueError("X holds NaN or infinite values in the columns the refit uses")
        kern = make_kernel(self.kernel, **self.kernel_params)
        return kern.value(used, self.X_fit_) @ self.dual_coef_

    def state_dict(self) -> dict[str, Any]:
        """Parameters and fitted arrays in the envelope of ``algorithms.states``."""
        return envelope(self.kind, self.format_version, {
            "kernel": self.kernel, "kernel_params": self.kernel_params,
            "columns": self.columns, "alpha": self.alpha,
            "n_features_in_": self.n_features_in_, "X_fit_": self.X_fit_,
            "dual_coef_": self.dual_coef_, "intercept_": self.intercept_})

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> SubsetKernelRidge:
        """Inverse of :meth:`state_dict` (bit-exact), also of the states written before the
        envelope (``"class": "SubsetKernelRidge"``); ``ValueError`` when the kernel is
        unknown, ``alpha <= 0``, a column is out of range or an array has the wrong shape or
        non-finite values."""
        _, state = open_envelope(state, cls.kind, (0, cls.format_version))
        if not isinstance(state.get("kernel"), str) or \
                not isinstance(state.get("kernel_params"), dict):
            raise ValueError("SubsetKernelRidge state needs a kernel name and kernel_params")
        try:
            make_kernel(state["kernel"], **state["kernel_params"])
        except TypeError as exc:
            raise ValueError(f"bad kernel_params {state['kernel_params']!r}") from exc
        d = get_number(state, "n_features_in_", integer=True)
        columns = get_array(state, "columns", (None,), kinds="iu")
        if columns.size and (columns.min() < 0 or columns.max() >= d):
            raise ValueError(f"columns must lie in [0, {d}), got {columns}")
        if not get_number(state, "alpha") > 0:
            raise ValueError(f"alpha must be > 0, got {state['alpha']!r}")
        X_fit = get_array(state, "X_fit_", (None, columns.size))
        model = cls(kernel=state["kernel"], kernel_params=state["kernel_params"],
                    columns=columns, alpha=state["alpha"])
        model.n_features_in_ = d
        model.X_fit_ = X_fit
        model.dual_coef_ = get_array(state, "dual_coef_", (X_fit.shape[0],))
        model.intercept_ = get_number(state, "intercept_")
        return model


@dataclass
class RelaxedSelection:
    """The chosen refit: ``model`` (fitted), its ``support``, ``alpha``, validation RMSE, the
    index of the path model whose ranking produced it, and how many distinct fits were made.
    ``candidates`` maps every support tried (a tuple of columns) to its ``(validation RMSE,
    alpha, fitted model)``."""

    model: SubsetKernelRidge
    support: np.ndarray
    alpha: float
    validation_rmse: float
    path_index: int
    n_fits: int
    candidates: dict[tuple[int, ...], tuple[float, float, SubsetKernelRidge]] = field(
        default_factory=dict)


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
                            n_fits=len(seen) * len(alphas), candidates=seen)


def _best_alpha(kernel, kernel_params, cols, X, y, X_val, y_val, alphas):
    best = None
    for alpha in alphas:
        model = SubsetKernelRidge(kernel=kernel, kernel_params=kernel_params, columns=cols,
                                  alpha=alpha).fit(X, y)
        rmse = float(np.sqrt(np.mean((model.predict(X_val) - y_val) ** 2)))
        if best is None or rmse < best[0]:
            best = (rmse, float(alpha), model)
    return best


class RelaxedNVSD(RegressorMixin, BatchModel):
    """One-call relaxed NVSD: τ paths over ``nus`` (and ``l1_ratios`` for ``"en"``), ranking,
    kernel-ridge refit on the top-ranked inputs, choice on validation data.

    ``fit(X, y)`` holds out ``validation_fraction`` of the rows (seeded by
    ``random_state``) for the choice and then refits the chosen support and ridge on all
    rows; ``fit(X, y, validation=(Xv, yv))`` uses the given set and fits on ``X`` only.
    ``nvsd_params`` are :class:`NVSD` parameters (kernel, groups, tol, ...). Fitted:
    ``support_``, ``alpha_``, ``model_`` (:class:`SubsetKernelRidge`),
    ``validation_rmse_``, ``tau_``, ``nu_``, ``l1_ratio_``. (``mus``, ``mu`` and ``mu_``
    are the deprecated spellings of ``l1_ratios``, ``l1_ratio`` and ``l1_ratio_``.)

    Nested supports of the chosen path point (the NVSD whose ranking produced ``support_``):
    ``ranking_`` (int64) its units with a non-zero norm in rank order (variables; group ids,
    the positions in ``groups``, for ``"gl"``); ``supports_`` the int64 supports
    ``supports_[k]`` = variables of ``ranking_[:k]`` (``supports_[0]`` empty: the mean);
    ``support_models_`` one :class:`SubsetKernelRidge` per support with its own
    validation-best ridge ``support_alphas_[k]`` (validation RMSE
    ``support_validation_rmse_[k]``), refitted on all rows like ``model_`` when no
    validation set was given; ``support_index_`` the ``k`` with ``supports_[k] = support_``,
    and ``model_ is support_models_[support_index_]``. What a caller has computed is
    ``computed_groups``, unit ids (``predict``, ``next_group``).
    Cost: the paths (see :func:`~algorithms.nvsd.nvsd_path`) plus :func:`select_relaxed`
    plus, without a validation set, ``len(supports_)`` refits on all rows.
    """

    kind = "relaxed-nvsd"
    _renamed = {"mus": "l1_ratios", "mu": "l1_ratio"}
    _renamed_attributes = {"mu_": "l1_ratio_"}

    def __init__(self, *, nus: tuple[float, ...] = (1e-3, 1e-1, 1.0),
                 l1_ratios: tuple[float, ...] = (0.25, 0.5, 0.75), n_taus: int = 8,
                 ratio: float = 1e-3, alphas: tuple[float, ...] = DEFAULT_ALPHAS,
                 validation_fraction: float = 0.25, random_state: int = 0,
                 mus: tuple[float, ...] | None = None, **nvsd_params: Any) -> None:
        self.nus = nus
        self.l1_ratios = deprecated_alias("RelaxedNVSD", "mus", "l1_ratios",
                                          DEPRECATED if mus is None else mus, l1_ratios,
                                          (0.25, 0.5, 0.75))
        self.n_taus, self.ratio = n_taus, ratio
        self.alphas = alphas
        self.validation_fraction = validation_fraction
        self.random_state = random_state
        if "mu" in nvsd_params:
            warnings.warn("RelaxedNVSD: mu= is deprecated, use l1_ratio=", DeprecationWarning,
                          stacklevel=2)
        self._nvsd_params = canonical_params(RelaxedNVSD, nvsd_params)

    @property
    def nvsd_params(self) -> dict[str, Any]:
        """The :class:`NVSD` keywords given (``get_params`` spreads them out)."""
        return self._nvsd_params

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's arguments, ``nvsd_params`` spread out."""
        params = super().get_params(deep)
        params.update(self._nvsd_params)
        return params

    def set_params(self, **params: Any) -> RelaxedNVSD:
        """Set arguments: this class's own, or :class:`NVSD` keywords (kept in
        ``nvsd_params``)."""
        params = self._current_names(params)
        own = set(self._get_param_names())
        nvsd = (set(NVSD._get_param_names()) | set(self._nvsd_params)) - own
        mine = {key: value for key, value in params.items() if key not in nvsd}
        if mine:
            super().set_params(**mine)
        for key, value in params.items():
            if key in nvsd:
                self._nvsd_params[key] = value
        return self

    def _base(self) -> Any:
        try:
            return NVSD(**self.nvsd_params)
        except TypeError as exc:
            raise TypeError(f"bad NVSD parameters {sorted(self.nvsd_params)}: {exc}") from exc

    def check_params(self, n_features: int) -> None:
        """ValueError / TypeError naming the first parameter :meth:`fit` would refuse for
        ``n_features`` variables (the NVSD parameters included)."""
        if not _is_real(self.validation_fraction) or not 0.0 <= self.validation_fraction < 1.0:
            raise ValueError(f"validation_fraction must be in (0, 1), got "
                             f"{self.validation_fraction!r}")
        if not isinstance(self.n_taus, int) or isinstance(self.n_taus, bool) or self.n_taus < 1:
            raise ValueError(f"n_taus must be an integer >= 1, got {self.n_taus!r}")
        if not _is_real(self.ratio) or not 0.0 < self.ratio <= 1.0:
            raise ValueError(f"ratio must be in (0, 1], got {self.ratio!r}")
        for name, low, high in (("nus", 0.0, np.inf), ("alphas", 0.0, np.inf),
                                ("l1_ratios", 0.0, 1.0)):
            values = getattr(self, name)
            try:
                values = tuple(values)
            except TypeError as exc:
                raise TypeError(f"{name} must be a sequence of numbers, got {values!r}") from exc
            if not values or not all(_is_real(v) and low < v <= high for v in values):
                raise ValueError(f"{name} must be a non-empty list of numbers in ({low}, "
                                 f"{high}], got {list(values)!r}")
        self._base().check_params(n_features)

    def fit(self, X: np.ndarray, y: np.ndarray, *,
            validation: tuple[np.ndarray, np.ndarray] | None = None,
            progress: Any = None) -> RelaxedNVSD:
        """Fit as described in the class docstring; ``progress(fraction)``, if given, is
        called after each tau path (fraction of the paths done)."""
        X = _check_inputs(X)
        y = _check_target(y, X.shape[0])
        self.check_params(X.shape[1])
        if validation is None:
            if not self.validation_fraction > 0.0:
                raise ValueError("validation_fraction must be in (0, 1)")
            if len(y) < 2:
                raise ValueError(f"need 2 rows or more to hold out validation rows, got "
                                 f"n_samples={len(y)}")
            order = np.random.default_rng(self.random_state).permutation(len(y))
            n_val = max(1, int(round(self.validation_fraction * len(y))))
            val, train = order[:n_val], np.sort(order[n_val:])
            X_fit, y_fit, X_val, y_val = X[train], y[train], X[val], y[val]
        else:
            X_fit, y_fit = X, y
            X_val, y_val = _check_inputs(validation[0]), np.asarray(validation[1],
                                                                     dtype=np.float64)
        base = self._base()
        problem = base.make_problem(X_fit)
        ratios = tuple(self.l1_ratios) if base.regularizer == "en" else (base.l1_ratio,)
        path = []
        grid = [(nu, r) for nu in self.nus for r in ratios]
        for done, (nu, r) in enumerate(grid, start=1):
            params = {**base.get_params(), "nu": nu, "l1_ratio": r}
            params.pop("tau")
            path += nvsd_path(X_fit, y_fit, problem=problem, n_taus=self.n_taus,
                              ratio=self.ratio, **params)
            if progress is not None:
                progress(done / len(grid))
        chosen = select_relaxed(path, X_fit, y_fit, X_val, y_val, alphas=tuple(self.alphas))
        source = path[chosen.path_index]
        self.support_, self.alpha_ = chosen.support, chosen.alpha
        self.validation_rmse_ = chosen.validation_rmse
        self.tau_, self.nu_ = float(source.tau), float(source.nu)
        self.l1_ratio_ = float(source.l1_ratio)
        self.ranking_ = ranked_units(source)[0]
        self.supports_ = [np.zeros(0, dtype=np.int64), *ranked_supports(source)]
        keys = [tuple(int(c) for c in s) for s in self.supports_]
        self.support_index_ = keys.index(tuple(int(c) for c in chosen.support))
        fits = [chosen.candidates[key] for key in keys]
        self.support_validation_rmse_ = np.array([f[0] for f in fits], dtype=np.float64)
        self.support_alphas_ = np.array([f[1] for f in fits], dtype=np.float64)
        self.support_models_ = [f[2] if validation is not None else SubsetKernelRidge(
            kernel=f[2].kernel, kernel_params=f[2].kernel_params, columns=f[2].columns,
            alpha=f[1]).fit(X, y) for f in fits]
        self.model_ = self.support_models_[self.support_index_]
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X: np.ndarray, computed: Iterable[int] | None = DEPRECATED, *,
                computed_groups: Iterable[int] | None = None) -> np.ndarray:
        """Predictions (m,) of ``model_`` (``computed_groups=None``: every group computed,
        so every column must be finite), else of the refit on the largest nested support
        whose units are all in ``computed_groups`` (:meth:`support_for_groups`). ``X`` keeps
        all ``d`` columns; with ``computed_groups`` the columns outside the support used are
        ignored (may hold NaN). ``computed`` (variable indices, :meth:`support_for`) is the
        deprecated spelling. O(m n |S|)."""
        if not hasattr(self, "model_"):
            raise not_fitted(self)
        if computed is DEPRECATED and computed_groups is None:
            X = as_dense(X)   # finite: every group is computed
        if computed is not DEPRECATED:
            deprecated_alias("RelaxedNVSD.predict", "computed", "computed_groups", computed,
                             computed_groups, note=" (unit ids: groups for 'gl', else "
                             "variables)")
            if computed is None:
                return self.model_.predict(X)
            k = self.support_for(computed)
            return self.support_models_[k].predict(X)
        if computed_groups is None:
            return self.model_.predict(X)
        k = self.support_for_groups(computed_groups)
        return self.support_models_[k].predict(X)

    def support_for_groups(self, computed_groups: Iterable[int]) -> int:
        """Index ``k`` into ``supports_`` of the largest ``supports_[k]`` whose units
        (``ranking_[:k]``) are all in ``computed_groups``, with ``k <= support_index_``.
        O(|computed_groups| + k)."""
        self._check_supports()
        have = set(self._unit_ids(computed_groups))
        k = 0
        while k < self.support_index_ and int(self.ranking_[k]) in have:
            k += 1
        return k

    def support_for(self, computed: Iterable[int]) -> int:
        """Index ``k`` into ``supports_`` of the largest ``supports_[k]`` inside ``computed``
        (variable indices in ``[0, d)``) with ``k <= support_index_``: a client that has
        more than the chosen support gets the chosen model. O(|computed| + d k)."""
        have = self._computed_mask(computed)
        k = 0
        while k < self.support_index_ and have[self.supports_[k + 1]].all():
            k += 1
        return k

    def next_group(self, computed_groups: Iterable[int] = ()) -> int | None:
        """First unit of ``ranking_[:support_index_]`` not in ``computed_groups``, or None
        when the chosen support is computed: ``ranking_[support_for_groups(S)]``, whose
        computing moves :meth:`support_for_groups` one step up. O(|S| + k)."""
        k = self.support_for_groups(computed_groups)
        return None if k == self.support_index_ else int(self.ranking_[k])

    def next_unit(self, computed: Iterable[int]) -> int | None:
        """Deprecated: :meth:`next_group` of the units whose variables are all in
        ``computed`` (variable indices)."""
        warnings.warn("RelaxedNVSD.next_unit(variables) is deprecated, use "
                      "next_group(computed_groups)", DeprecationWarning, stacklevel=2)
        k = self.support_for(computed)
        return None if k == self.support_index_ else int(self.ranking_[k])

    def unit_variables(self, unit: int) -> np.ndarray:
        """Variables (int64, sorted) of the ranked unit ``unit``:
        ``supports_[j + 1] \\ supports_[j]`` for ``ranking_[j] = unit``. O(d)."""
        self._check_supports()
        hits = np.flatnonzero(self.ranking_ == unit)
        if hits.size == 0:
            raise ValueError(f"unit {unit!r} is not in ranking_")
        j = int(hits[0])
        return np.setdiff1d(self.supports_[j + 1], self.supports_[j]).astype(np.int64)

    def _check_supports(self) -> None:
        if not hasattr(self, "supports_"):
            raise ValueError("this RelaxedNVSD has no nested supports (not fitted, or loaded "
                             "from a state written before they were kept): refit it")

    def _unit_ids(self, computed_groups: Iterable[Any]) -> list[int]:
        """Unit ids (variables; groups for ``"gl"``) as ints; ValueError outside the units."""
        d = self.model_.n_features_in_
        base = self._base()
        n_units = (int(base.make_regularizer(d).group_of.max()) + 1
                   if base.regularizer == "gl" else d)
        ids = []
        for g in computed_groups:
            if isinstance(g, bool) or not isinstance(g, numbers.Integral) or \
                    not 0 <= g < n_units:
                raise ValueError(f"computed_groups must hold unit ids in [0, {n_units}), got "
                                 f"{g!r}")
            ids.append(int(g))
        return ids

    def _computed_mask(self, computed: Iterable[int]) -> np.ndarray:
        self._check_supports()
        d = self.model_.n_features_in_
        idx = np.fromiter((int(c) for c in computed), dtype=np.int64)
        bad = idx[(idx < 0) | (idx >= d)]
        if bad.size:
            raise ValueError(f"computed variables must lie in [0, {d}), got {bad.tolist()}")
        mask = np.zeros(d, dtype=bool)
        mask[idx] = True
        return mask

    def selected_features(self) -> np.ndarray:
        """Indices of the selected inputs."""
        return self.support_

    def state_dict(self) -> dict[str, Any]:
        """Flat state in the envelope of ``algorithms.states``: the chosen refit's state
        (with its own envelope) under ``model.``; the nested supports as
        ``supports_flat_`` (their concatenation) and ``supports_sizes_``; the refit of
        support ``k`` under ``support.{k}.`` (for ``k = support_index_`` it is the one
        under ``model.``)."""
        state: dict[str, Any] = {
            "nus": list(self.nus), "l1_ratios": list(self.l1_ratios),
            "n_taus": self.n_taus, "ratio": self.ratio, "alphas": list(self.alphas),
            "validation_fraction": self.validation_fraction,
            "random_state": self.random_state, "nvsd_params": self.nvsd_params}
        if hasattr(self, "model_"):
            state.update(support_=self.support_, alpha_=self.alpha_,
                         validation_rmse_=self.validation_rmse_, tau_=self.tau_,
                         nu_=self.nu_, l1_ratio_=self.l1_ratio_)
            state.update({f"model.{k}": v for k, v in self.model_.state_dict().items()})
        if hasattr(self, "supports_"):
            state.update(
                ranking_=self.ranking_, support_index_=self.support_index_,
                supports_flat_=np.concatenate(self.supports_).astype(np.int64),
                supports_sizes_=np.array([s.size for s in self.supports_], dtype=np.int64),
                support_alphas_=self.support_alphas_,
                support_validation_rmse_=self.support_validation_rmse_)
            for k, refit in enumerate(self.support_models_):
                if k != self.support_index_:
                    state.update({f"support.{k}.{key}": v
                                  for key, v in refit.state_dict().items()})
        return envelope(self.kind, self.format_version, state)

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> RelaxedNVSD:
        """Inverse of :meth:`state_dict` (bit-exact predictions), also of the states written
        before the envelope (``"class": "RelaxedNVSD"``, ``mus`` and ``mu_``). States
        without nested supports (written before they were kept) load without them.
        ``ValueError`` when the contents disagree: sizes, indices out of range, non-finite
        values."""
        version, state = open_envelope(state, cls.kind, (0, cls.format_version))
        if version == 0:
            state = renamed(state, {"mus": "l1_ratios", **cls._renamed_attributes})
        if not isinstance(state.get("nvsd_params"), dict):
            raise ValueError("RelaxedNVSD state needs a dict nvsd_params")
        try:
            nvsd_params = canonical_params(cls, state["nvsd_params"])
            model = cls(nus=state["nus"], l1_ratios=state["l1_ratios"],
                        n_taus=state["n_taus"], ratio=state["ratio"], alphas=state["alphas"],
                        validation_fraction=state["validation_fraction"],
                        random_state=state["random_state"], **nvsd_params)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"RelaxedNVSD state is incomplete or malformed: {exc!r}") from exc
        if "support_" in state:
            model.model_ = SubsetKernelRidge.from_state_dict(sub_state(state, "model."))
            model.n_features_in_ = model.model_.n_features_in_
            model.support_ = get_array(state, "support_", (None,), kinds="iu")
            if not np.array_equal(model.support_, model.model_.columns):
                raise ValueError("support_ differs from the refit's columns")
            model.alpha_ = get_number(state, "alpha_")
            if model.alpha_ != model.model_.alpha:
                raise ValueError("alpha_ differs from the refit's alpha")
            model.validation_rmse_ = get_number(state, "validation_rmse_")
            model.tau_, model.nu_, model.l1_ratio_ = (get_number(state, k)
                                                      for k in ("tau_", "nu_", "l1_ratio_"))
        if "supports_sizes_" in state:
            if "support_" not in state:
                raise ValueError("state has nested supports but no chosen refit")
            model._load_supports(state)
        return model

    def _load_supports(self, state: dict[str, Any]) -> None:
        """Read and check the nested supports: they must be the prefixes of ``ranking_``
        (whole groups for ``"gl"``) and each refit must use its support. O(d^2 + sizes)."""
        d = self.model_.n_features_in_
        sizes = get_array(state, "supports_sizes_", (None,), kinds="iu")
        flat = get_array(state, "supports_flat_", (None,), kinds="iu")
        if sizes.size == 0 or (sizes < 0).any() or int(sizes.sum()) != flat.size:
            raise ValueError(f"supports_sizes_ {sizes} do not add up to the {flat.size} "
                             "entries of supports_flat_")
        if flat.size and (flat.min() < 0 or flat.max() >= d):
            raise ValueError(f"supports_flat_ has variables outside [0, {d})")
        supports = [s.astype(np.int64) for s in np.split(flat, np.cumsum(sizes)[:-1])]
        ranking = get_array(state, "ranking_", (sizes.size - 1,), kinds="iu").astype(np.int64)
        try:
            base = self._base()
        except TypeError as exc:
            raise ValueError(f"bad nvsd_params {self.nvsd_params!r}") from exc
        unit_of = (base.make_regularizer(d).group_of if base.regularizer == "gl"
                   else np.arange(d))
        if ranking.size and (ranking.min() < 0 or ranking.max() > unit_of.max()
                             or np.unique(ranking).size != ranking.size):
            raise ValueError(f"ranking_ must hold distinct units in [0, {unit_of.max() + 1})")
        for k, support in enumerate(supports):
            if not np.array_equal(support, np.flatnonzero(np.isin(unit_of, ranking[:k]))):
                raise ValueError(f"supports_[{k}] is not the variables of ranking_[:{k}]")
        index = get_number(state, "support_index_", integer=True)
        if not 0 <= index < len(supports) or not np.array_equal(supports[index], self.support_):
            raise ValueError(f"support_index_ {index} does not point at support_")
        alphas = get_array(state, "support_alphas_", (len(supports),))
        rmse = get_array(state, "support_validation_rmse_", (len(supports),))
        refits = []
        for k, support in enumerate(supports):
            try:
                refit = self.model_ if k == index else SubsetKernelRidge.from_state_dict(
                    sub_state(state, f"support.{k}."))
            except ValueError as exc:
                raise ValueError(f"refit support.{k}.: {exc}") from exc
            if (not np.array_equal(refit.columns, support) or refit.alpha != alphas[k]
                    or refit.n_features_in_ != d):
                raise ValueError(f"refit {k} does not match supports_[{k}] and its alpha")
            refits.append(refit)
        self.ranking_, self.supports_, self.support_index_ = ranking, supports, index
        self.support_alphas_, self.support_validation_rmse_ = alphas, rmse
        self.support_models_ = refits


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
