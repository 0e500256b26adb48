"""AnytimeLinearModel: the trained anytime artifact (Hu, Grubb, Bagnell, Hebert).

Fitting sequences the groups (any method of :data:`METHODS`) from sufficient statistics and
stores, per prefix ``G_j``: cumulative cost, raw-scale weights ``w(G_j)`` and intercept, the
objective ``F(G_j) = ½ b_Sᵀ C_S⁻¹ b_S`` and the explained variance on training (and validation)
data. At serving time ``predict(X, max_cost=B)`` uses the longest prefix of cost <= B;
``predict(X, computed_groups=S)`` the best ridge predictor for exactly the set ``S`` (an
O(|S|³) solve from the stored standardized ``C``, ``b``, cached per set, then O(nnz) per
row); ``next_group(S)`` the method's greedy choice given ``S``. The protocol is the batch
models' (``algorithms.batch``); ``budget=`` and ``groups=`` are the deprecated spellings of
``max_cost=`` and ``computed_groups=``.

Classification (labels ±1, ``y > 0`` positive): ``classification_answer="logistic"`` keeps
a seeded sample of at most ``logistic_rows`` training rows and answers a set ``S`` with the
logistic refit on exactly ``S`` (``algorithms.anytime.logistic``: Newton on those rows,
standardized by the training statistics, L2 ``logistic_alpha``; cached per set like the
ridge solves); ``"regression"`` (and None, a regressor) answers with the ridge on the ±1
labels. The sequence, the prefix weights and ``coef_for_groups`` are the ridge's either
way; :meth:`answer_coef` / :meth:`decision_function` are the answer.
"""

from __future__ import annotations

import numbers
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from algorithms.anytime.doubling import doubling_eligible, doubling_sequence
from algorithms.anytime.greedy import (
    CRITERIA,
    normalize_groups,
    pick_group,
    sequence_groups,
    sequence_in_order,
)
from algorithms.anytime.logistic import logistic_refit
from algorithms.anytime.statistics import SufficientStatistics, _as_matrix
from algorithms.anytime.subsets import SubsetSolver
from algorithms.batch import DEPRECATED, BatchModel, cost_slack, deprecated_alias
from algorithms.estimator import (
    RegressorMixin,
    available_if,
    check_matrix_shape,
    check_n_features,
    column_or_1d,
    not_fitted,
)
from algorithms.metrics.anytime import explained_variance_from_statistics
from algorithms.states import envelope, open_envelope, renamed

METHODS = ("cs-g-omp", "cs-g-fr", "doubling", "no-whiten", "single", "group-lasso")
SOLVE_CACHE_BYTES = 64 << 20  # factors, and coefficients, of recent sets kept (each)
SOLVE_RTOL = 1e-14  # a solve's pivot <= SOLVE_RTOL * C_jj is a dependent direction
ANSWERS = ("regression", "logistic")  # classification_answer (None: a regressor)
ROWS_SEED = 0x6C6F67  # the sample of training rows a logistic answer keeps


class AnytimeLinearModel(RegressorMixin, BatchModel):
    """Anytime linear predictor over costed feature groups (a scikit-learn regressor).

    Parameters
    ----------
    groups : sequence of int sequences, optional
        Disjoint feature groups (features outside every group are never used); None (the
        default): every feature is its own group.
    costs : sequence of float, optional
        Cost ``c(g) >= 0`` of each group; None (the default): 1 each.
    method : str
        One of ``cs-g-omp`` (default), ``cs-g-fr``, ``doubling``, ``no-whiten``, ``single``,
        ``group-lasso`` (needs celer).
    alpha : float
        Ridge ``λ >= 0`` in ``C = XᵀX/n + λI`` (standardized features); > 0 keeps
        duplicates finite.
    max_cost : float, optional
        Cost cap of the sequence (``budget``: its deprecated spelling); ``max_groups`` caps
        its length.
    cache_size : int
        Number of subset solutions kept by ``predict(computed_groups=...)`` and
        ``next_group``.
    classification_answer : str, optional
        None (a regressor), ``"regression"`` (labels ±1, the ridge answers) or
        ``"logistic"`` (the logistic refit on exactly ``S`` answers; module docstring).
    logistic_alpha : float
        The refit's L2 ``λ > 0`` on standardized weights (default 1e-4).
    logistic_rows : int
        Training rows a logistic answer keeps (a seeded sample; default 5,000).
    """

    kind = "anytime-linear-model"
    format_version = 2  # 2: the classification answer (written only with it; else 1)
    _renamed = {"budget": "max_cost"}

    def __init__(self, *, groups: Sequence[Sequence[int]] | None = None,
                 costs: Sequence[float] | None = None, method: str = "cs-g-omp",
                 alpha: float = 1e-6, max_cost: float | None = None,
                 max_groups: int | None = None, cache_size: int = 1024,
                 classification_answer: str | None = None, logistic_alpha: float = 1e-4,
                 logistic_rows: int = 5000, budget: float | None = None) -> None:
        self.groups = groups
        self.costs = costs
        self.method = method
        self.alpha = alpha
        self.max_cost = deprecated_alias("AnytimeLinearModel", "budget", "max_cost",
                                         DEPRECATED if budget is None else budget, max_cost)
        self.max_groups = max_groups
        self.cache_size = cache_size
        self.classification_answer = classification_answer
        self.logistic_alpha = logistic_alpha
        self.logistic_rows = logistic_rows

    def check_params(self, n_features: int) -> None:
        """ValueError naming the first parameter :meth:`fit` would refuse (groups and costs
        included) for ``n_features`` features."""
        if self.method not in METHODS:
            raise ValueError(f"unknown method {self.method!r}; expected one of {METHODS}")
        if not _is_number(self.alpha) or not self.alpha >= 0:
            raise ValueError(f"alpha must be a number >= 0, got {self.alpha!r}")
        for name in ("max_cost", "max_groups"):
            value = getattr(self, name)
            if value is not None and (not _is_number(value) or not value >= 0):
                raise ValueError(f"{name} must be a number >= 0 or None, got {value!r}")
        if isinstance(self.cache_size, bool) or not isinstance(self.cache_size, numbers.Integral) \
                or self.cache_size < 0:
            raise ValueError(f"cache_size must be an integer >= 0, got {self.cache_size!r}")
        if self.classification_answer is not None and self.classification_answer not in ANSWERS:
            raise ValueError(f"classification_answer must be None or one of {ANSWERS}, got "
                             f"{self.classification_answer!r}")
        if not _is_number(self.logistic_alpha) or not self.logistic_alpha > 0 or \
                not np.isfinite(self.logistic_alpha):
            raise ValueError(f"logistic_alpha must be a finite number > 0, got "
                             f"{self.logistic_alpha!r}")
        if isinstance(self.logistic_rows, bool) or \
                not isinstance(self.logistic_rows, numbers.Integral) or self.logistic_rows < 1:
            raise ValueError(f"logistic_rows must be an integer >= 1, got "
                             f"{self.logistic_rows!r}")
        self._groups_and_costs(n_features)

    def _groups_and_costs(self, n_features: int) -> tuple[list[np.ndarray], np.ndarray]:
        """:func:`normalize_groups` of ``groups`` (None: one group per feature) and
        ``costs`` (None: 1 per group)."""
        groups = self.groups
        if groups is None:
            groups = [[f] for f in range(int(n_features))]
        costs = self.costs
        if costs is None:
            try:
                costs = np.ones(len(groups))
            except TypeError as exc:
                raise ValueError(f"groups must be a sequence of feature-index lists, got "
                                 f"{groups!r}") from exc
        return normalize_groups(groups, costs, n_features)

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y, *, X_val=None, y_val=None) -> AnytimeLinearModel:
        """Fit from data (dense, scipy sparse or CSRBatch); O(nnz·D) + sequencing."""
        check_matrix_shape(X if hasattr(X, "shape") else np.asarray(X))
        X = _as_matrix(X)
        y = column_or_1d(y, X.shape[0])
        stats = SufficientStatistics.from_data(X, y)
        validation = None
        if (X_val is None) != (y_val is None):
            raise ValueError("pass both X_val and y_val, or neither")
        if X_val is not None:
            validation = SufficientStatistics.from_data(X_val, y_val, X.shape[1])
        rows = None
        if self.classification_answer == "logistic":
            n = X.shape[0]
            keep = np.arange(n) if n <= self.logistic_rows else np.sort(
                np.random.default_rng(ROWS_SEED).choice(n, size=self.logistic_rows,
                                                        replace=False))
            part = X[keep]
            rows = (part.toarray() if sp.issparse(part) else np.asarray(part),
                    np.asarray(y, dtype=np.float64)[keep])
        return self.fit_statistics(stats, validation=validation, rows=rows)

    def fit_statistics(self, stats: SufficientStatistics, *,
                       validation: SufficientStatistics | None = None,
                       rows: tuple[np.ndarray, np.ndarray] | None = None
                       ) -> AnytimeLinearModel:
        """Fit from statistics alone (never re-reads data). Sequencing as documented per method,
        then all prefix weights by one triangular solve, O(k²·J). A logistic
        ``classification_answer`` needs ``rows``: training rows ``(X (R, D), y (R,))``, at
        most ``logistic_rows`` of them (kept, and refitted per set)."""
        self.check_params(stats.n_features)
        logistic_rows = self._checked_rows(rows, stats.n_features)
        if stats.n < 1:
            raise ValueError("statistics are empty")
        D = stats.n_features
        groups, costs = self._groups_and_costs(D)
        C, b = stats.standardized(float(self.alpha))
        options = {"max_cost": self.max_cost, "max_groups": self.max_groups}
        if self.method == "doubling":
            result = doubling_sequence(C, b, groups, costs, **options)
        elif self.method == "group-lasso":
            from algorithms.anytime.group_lasso import group_lasso_order

            order = group_lasso_order(C, b, groups, costs)
            order = _cap_order(order, costs, self.max_cost, self.max_groups)
            result = sequence_in_order(C, b, groups, costs, order)
        else:
            result = sequence_groups(C, b, groups, costs, self.method, **options)
        sx, sy = stats.scales()
        W = result.prefix_coefficients(D)
        self.n_features_in_ = D
        self.groups_ = groups
        self.costs_ = costs
        self.x_mean_, self.x_scale_ = stats.mean_x.copy(), sx
        self.y_mean_, self.y_scale_ = float(stats.mean_y), float(sy)
        self.gram_, self.correlation_ = C, b
        self.sequence_ = result.order
        self.cumulative_cost_ = result.cumulative_cost
        self.objective_path_ = result.objective
        self.coef_path_ = W * (sy / sx)
        self.intercept_path_ = self.y_mean_ - self.coef_path_ @ self.x_mean_
        self.train_explained_variance_ = self._standardized_ev(W)
        self.validation_explained_variance_ = None
        if validation is not None:
            self.validation_explained_variance_ = explained_variance_from_statistics(
                validation, self.coef_path_, self.intercept_path_)
        self.logistic_X_, self.logistic_y_ = logistic_rows
        self._reset_caches()
        return self

    def _checked_rows(self, rows, D: int) -> tuple[np.ndarray | None, np.ndarray | None]:
        """The rows a logistic answer keeps (None, None otherwise); ValueError unless they
        are at most ``logistic_rows`` finite float64 rows of ``D`` features with labels ±1
        (``y > 0`` positive, the rest -1) of both classes."""
        if self.classification_answer != "logistic":
            return None, None
        if rows is None:
            raise ValueError("classification_answer='logistic' needs training rows")
        X, y = np.asarray(rows[0], dtype=np.float64), np.asarray(rows[1], dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != D or y.shape != (X.shape[0],) or \
                not 1 <= X.shape[0] <= self.logistic_rows:
            raise ValueError(f"logistic rows must be 1..{self.logistic_rows} rows of {D} "
                             f"features with one label each")
        if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
            raise ValueError("logistic rows hold NaN or infinite values")
        labels = np.where(y > 0, 1.0, -1.0)
        return np.ascontiguousarray(X), labels

    def _standardized_ev(self, W: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:
        """Training EV ``2wᵀb − wᵀC₀w`` (``C₀ = C − λI``) of standardized weights ``W`` (P, D),
        or of their entries ``idx`` only (the rest being zero). O(P·|idx|²)."""
        C, b = self.gram_, self.correlation_
        if idx is not None:
            W, C, b = W[:, idx], C[np.ix_(idx, idx)], b[idx]
        quad = np.einsum("pi,pi->p", W @ C, W) - float(self.alpha) * np.einsum("pi,pi->p", W, W)
        return 2.0 * W @ b - quad

    def _reset_caches(self) -> None:
        self._subset_cache: OrderedDict = OrderedDict()
        self._next_cache: OrderedDict = OrderedDict()
        self._logistic_cache: OrderedDict = OrderedDict()
        self._kind = CRITERIA.get(self.method, CRITERIA["cs-g-fr"])
        self._lock = threading.Lock()  # the caches, read by several serving threads
        self._solver: SubsetSolver | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Pickling keeps the fitted model, not its caches (rebuilt on load)."""
        state = dict(self.__dict__)
        for name in ("_subset_cache", "_next_cache", "_logistic_cache", "_lock", "_solver"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if hasattr(self, "gram_"):
            self._reset_caches()

    def _subsets(self) -> SubsetSolver:
        """Factors of ``C_S`` sharing the sequence's (``algorithms.anytime.subsets``)."""
        with self._lock:
            if self._solver is None:
                self._solver = SubsetSolver(self.gram_, self.correlation_, self.groups_,
                                            self.sequence_, cache_bytes=SOLVE_CACHE_BYTES,
                                            rtol=SOLVE_RTOL)
            return self._solver

    # ------------------------------------------------------------------ serving
    def prefix_length(self, max_cost: float) -> int:
        """Length of the longest prefix of cost <= ``max_cost``. O(log J)."""
        slack = cost_slack(max_cost)
        return int(np.searchsorted(self.cumulative_cost_, float(max_cost) + slack, "right")
                   - 1)

    def selected_features(self) -> np.ndarray:
        """Sorted indices (int64) of the features of the sequenced groups."""
        parts = [self.groups_[int(g)] for g in self.sequence_]
        return np.sort(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)

    def coef_for_groups(self, computed_groups: Iterable[int]) -> tuple[np.ndarray, float]:
        """Raw-scale ``(coef (D,), intercept)`` of ``w(S) = C_S⁻¹ b_S``; cached. On a miss
        the factor of ``C_S`` extends the sequence's prefix factor (``SubsetSolver``):
        O(k_P²·r + r³ + k²) for ``S`` = a prefix of ``k_P`` features plus ``r`` others."""
        return self._subset(computed_groups)[:2]

    def explained_variance(self, computed_groups: Iterable[int]) -> float:
        """Training explained variance of the best predictor on exactly ``computed_groups``."""
        return self._subset(computed_groups)[2]

    def _subset(self, groups: Iterable[int]) -> tuple[np.ndarray, float, float]:
        """(coef, intercept, training EV) of exactly ``groups``; an LRU of at most
        ``cache_size`` sets and ``SOLVE_CACHE_BYTES`` of coefficients."""
        key = frozenset(_group_ids(groups))
        with self._lock:
            hit = self._subset_cache.get(key)
            if hit is not None:
                self._subset_cache.move_to_end(key)
                return hit
        if any(g < 0 or g >= len(self.groups_) for g in key):
            raise ValueError(f"group ids must be in [0, {len(self.groups_)})")
        w = np.zeros(self.n_features_in_)
        solver = self._subsets()
        idx, w_S = solver.weights(key)
        w[idx] = w_S
        coef = w * (self.y_scale_ / self.x_scale_)
        if key and not solver.factor(key).dependent.any():
            # C_S w = b_S exactly, so 2wᵀb − wᵀ(C − λI)w = wᵀb + λ‖w‖²: O(k), not O(k²)
            ev = float(w_S @ self.correlation_[idx] + float(self.alpha) * (w_S @ w_S))
        else:
            ev = float(self._standardized_ev(w[None, :], idx)[0])
        entry = (coef, float(self.y_mean_ - coef[idx] @ self.x_mean_[idx]), ev)
        limit = max(1, min(int(self.cache_size), SOLVE_CACHE_BYTES // max(1, coef.nbytes)))
        with self._lock:
            self._subset_cache[key] = entry
            while len(self._subset_cache) > limit:
                self._subset_cache.popitem(last=False)
        return entry

    def logistic_for_groups(self, computed_groups: Iterable[int]) -> tuple[np.ndarray, float]:
        """Raw-scale ``(coef (D,), intercept)`` of the logistic refit on exactly
        ``computed_groups`` (``algorithms.anytime.logistic`` on the kept rows, standardized
        by the training means and scales); cached (LRU of ``cache_size`` sets and
        ``SOLVE_CACHE_BYTES``). O(R·k) to standardize, O(R·k²) per Newton step."""
        if getattr(self, "logistic_X_", None) is None:
            raise ValueError("this model keeps no rows for logistic answers "
                             "(classification_answer is not 'logistic')")
        key = frozenset(_group_ids(computed_groups))
        with self._lock:
            hit = self._logistic_cache.get(key)
            if hit is not None:
                self._logistic_cache.move_to_end(key)
                return hit
        if any(g < 0 or g >= len(self.groups_) for g in key):
            raise ValueError(f"group ids must be in [0, {len(self.groups_)})")
        parts = [self.groups_[g] for g in sorted(key)]
        idx = np.sort(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)
        mean, scale = self.x_mean_[idx], self.x_scale_[idx]
        w, b = logistic_refit((self.logistic_X_[:, idx] - mean) / scale, self.logistic_y_,
                              float(self.logistic_alpha))
        coef = np.zeros(self.n_features_in_)
        coef[idx] = w / scale
        entry = (coef, float(b - coef[idx] @ mean))
        limit = max(1, min(int(self.cache_size), SOLVE_CACHE_BYTES // max(1, coef.nbytes)))
        with self._lock:
            self._logistic_cache[key] = entry
            while len(self._logistic_cache) > limit:
                self._logistic_cache.popitem(last=False)
        return entry

    def answer_coef(self, computed_groups: Iterable[int]) -> tuple[np.ndarray, float]:
        """Raw-scale ``(coef, intercept)`` answering exactly ``computed_groups``: the logistic
        refit (``classification_answer="logistic"``), else the ridge's
        (:meth:`coef_for_groups`)."""
        if self.classification_answer == "logistic":
            return self.logistic_for_groups(computed_groups)
        return self.coef_for_groups(computed_groups)

    @available_if(lambda model: model.classification_answer == "logistic")
    def decision_function(self, X, *, max_cost: float | None = None,
                          computed_groups: Iterable[int] | None = None) -> np.ndarray:
        """Logits (n,) of the logistic refit for exactly ``computed_groups`` (default: the
        sequence's groups; with ``max_cost``, those of the longest prefix within it); only
        with ``classification_answer="logistic"`` (a regressor has no decision function)."""
        if max_cost is not None and computed_groups is not None:
            raise ValueError("pass either max_cost or computed_groups, not both")
        if computed_groups is None:
            j = len(self.sequence_) if max_cost is None else max(self.prefix_length(max_cost), 0)
            computed_groups = [int(g) for g in self.sequence_[:j]]
        coef, intercept = self.logistic_for_groups(computed_groups)
        return self._matrix(X) @ coef + intercept

    def predict(self, X, *, max_cost: float | None = None,
                computed_groups: Iterable[int] | None = None, budget: float | None = DEPRECATED,
                groups: Iterable[int] | None = DEPRECATED) -> np.ndarray:
        """Predictions (n,) with the prefix within ``max_cost``, or the best ridge predictor
        on exactly the set ``computed_groups`` (default: every sequenced group). O(nnz(X))
        once the set's solve is cached. ``budget`` and ``groups``: the deprecated spellings."""
        if not hasattr(self, "coef_path_"):
            raise not_fitted(self)
        max_cost = deprecated_alias("predict", "budget", "max_cost", budget, max_cost)
        computed_groups = deprecated_alias("predict", "groups", "computed_groups", groups,
                                           computed_groups)
        if max_cost is not None and computed_groups is not None:
            raise ValueError("pass either max_cost or computed_groups, not both")
        if computed_groups is not None:
            coef, intercept = self.coef_for_groups(computed_groups)
        else:
            j = len(self.sequence_) if max_cost is None else self.prefix_length(max_cost)
            coef, intercept = self.coef_path_[max(j, 0)], self.intercept_path_[max(j, 0)]
        return self._matrix(X) @ coef + intercept

    def predict_path(self, X) -> np.ndarray:
        """Predictions of every prefix, (J_s + 1, n). O(J_s·nnz(X))."""
        return (self._matrix(X) @ self.coef_path_.T).T + self.intercept_path_[:, None]

    def _matrix(self, X):
        """``X`` (2-D, or one 1-D row) as a float64 matrix of ``n_features_in_`` columns."""
        if not hasattr(self, "coef_path_"):
            raise not_fitted(self)
        if not sp.issparse(X) and isinstance(X, np.ndarray) and X.dtype == np.float64:
            X = X[None, :] if X.ndim == 1 else X
        else:
            if getattr(X, "dtype", None) is not None and np.dtype(X.dtype).kind == "c":
                raise ValueError("Complex data not supported")
            X = _as_matrix(X)
        if X.ndim != 2:
            raise ValueError(f"X must have {self.n_features_in_} columns, got shape {X.shape}")
        check_n_features(self, X.shape[1])
        if not np.isfinite(X.data if sp.issparse(X) else X).all():
            raise ValueError("X contains NaN or infinite values")
        return X

    def next_group(self, computed_groups: Iterable[int] = (), *,
                   max_cost: float | None = None, groups: Iterable[int] = DEPRECATED,
                   budget: float | None = DEPRECATED) -> int | None:
        """The group to compute next given the computed set ``S = computed_groups`` (None if
        none is left).

        Greedy methods score every remaining group given exactly ``S`` (O(|S|²·m + Σ d_g³),
        cached); ``group-lasso`` returns the first group of its path not in ``S``.
        ``max_cost`` restricts the choice to groups with ``c(S) + c(g) <= max_cost``.
        ``groups`` and ``budget``: the deprecated spellings.
        """
        computed_groups = deprecated_alias("next_group", "groups", "computed_groups", groups,
                                           computed_groups, ())
        max_cost = deprecated_alias("next_group", "budget", "max_cost", budget, max_cost)
        key = (frozenset(_group_ids(computed_groups)),
               None if max_cost is None else float(max_cost))
        with self._lock:
            if key in self._next_cache:
                return self._next_cache[key]
        S = key[0]
        J = len(self.groups_)
        spent = float(sum(self.costs_[g] for g in S))
        remaining = np.ones(J, dtype=bool)
        remaining[list(S)] = False
        if max_cost is not None:
            remaining &= self.costs_ <= max_cost - spent + cost_slack(max_cost)
        if self.method == "group-lasso":
            choice = next((int(g) for g in self.sequence_ if remaining[g]), None)
        else:
            if self.method == "doubling":
                remaining = doubling_eligible(self.costs_, remaining, spent)
            choice = None
            if remaining.any():  # scored against S's factor, shared with the solve of S
                scores = self._subsets().scores(S, self._kind, remaining)
                g = pick_group(scores, self.costs_, remaining)
                choice = None if g < 0 else g
        with self._lock:
            self._next_cache[key] = choice
            if len(self._next_cache) > self.cache_size:
                self._next_cache.popitem(last=False)
        return choice

    # ------------------------------------------------------------------ state
    _ARRAYS = ("costs_", "x_mean_", "x_scale_", "correlation_", "sequence_",
               "cumulative_cost_", "objective_path_", "coef_path_", "intercept_path_",
               "train_explained_variance_")

    def state_dict(self) -> dict[str, Any]:
        """Parameters and fitted arrays in the envelope of ``algorithms.states`` (the
        symmetric ``C`` as its upper triangle)."""
        payload: dict[str, Any] = {
            "method": self.method, "alpha": float(self.alpha),
            "max_cost": None if self.max_cost is None else float(self.max_cost),
            "max_groups": None if self.max_groups is None else int(self.max_groups),
            "cache_size": int(self.cache_size), "n_features_in": int(self.n_features_in_),
            "y_mean": self.y_mean_, "y_scale": self.y_scale_,
            "group_features": np.concatenate(self.groups_),
            "group_sizes": np.array([len(g) for g in self.groups_], dtype=np.int64),
            "gram_upper": self.gram_[np.triu_indices(self.n_features_in_)]}
        for name in self._ARRAYS:
            payload[name.rstrip("_")] = getattr(self, name)
        if self.validation_explained_variance_ is not None:
            payload["validation_explained_variance"] = self.validation_explained_variance_
        if self.classification_answer is None:  # written as before the option existed
            return envelope(self.kind, 1, payload)
        payload.update(classification_answer=self.classification_answer,
                       logistic_alpha=float(self.logistic_alpha),
                       logistic_rows=int(self.logistic_rows))
        if self.logistic_X_ is not None:
            payload.update(logistic_X=self.logistic_X_, logistic_y=self.logistic_y_)
        return envelope(self.kind, self.format_version, payload)

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> AnytimeLinearModel:
        """Inverse of :meth:`state_dict` (and of the states written before the envelope);
        contents checked (ValueError)."""
        version, payload = open_envelope(state, cls.kind, (0, 1, cls.format_version))
        if version == 0:
            payload = renamed(payload, cls._renamed)
        try:
            return cls._from_payload(payload)
        except (KeyError, TypeError, OverflowError, IndexError) as exc:
            raise ValueError(f"anytime state is incomplete or malformed: {exc!r}") from exc

    @classmethod
    def _from_payload(cls, state: dict[str, Any]) -> AnytimeLinearModel:
        sizes = np.asarray(state["group_sizes"], dtype=np.int64)
        groups = np.split(np.asarray(state["group_features"], dtype=np.int64),
                          np.cumsum(sizes)[:-1])
        costs = np.asarray(state["costs"], dtype=np.float64)
        answer = {}
        if "classification_answer" in state:  # format 2
            answer = {name: state[name] for name in ("classification_answer", "logistic_alpha",
                                                     "logistic_rows")}
        model = cls(groups=groups, costs=costs, method=state["method"], alpha=state["alpha"],
                    max_cost=state["max_cost"], max_groups=state["max_groups"],
                    cache_size=state["cache_size"], **answer)
        model.n_features_in_ = int(state["n_features_in"])
        model.groups_ = list(groups)
        model.y_mean_, model.y_scale_ = float(state["y_mean"]), float(state["y_scale"])
        for name in cls._ARRAYS:
            setattr(model, name, np.asarray(state[name.rstrip("_")]))
        D = model.n_features_in_
        gram = np.zeros((D, D))
        gram[np.triu_indices(D)] = np.asarray(state["gram_upper"], dtype=np.float64)
        model.gram_ = gram + np.triu(gram, 1).T
        model.validation_explained_variance_ = state.get("validation_explained_variance")
        model.logistic_X_ = model.logistic_y_ = None
        if model.classification_answer == "logistic":
            model.logistic_X_, model.logistic_y_ = model._checked_rows(
                (state["logistic_X"], state["logistic_y"]), model.n_features_in_)
            if not np.all(np.abs(np.asarray(state["logistic_y"])) == 1.0):
                raise ValueError("anytime state: logistic_y must hold labels -1 or +1")
        model._check_fitted()
        model._reset_caches()
        return model

    def _check_fitted(self) -> None:
        """What serving assumes of a loaded state (ValueError otherwise): groups disjoint and
        in range, a sequence of distinct groups, every array of its shape and finite. O(D²)."""
        D = self.n_features_in_
        if not 1 <= D < 2**31 or self.method not in METHODS:
            raise ValueError("anytime state: bad n_features_in or method")
        self.check_params(D)
        groups, costs = normalize_groups(self.groups_, self.costs_, D)
        J, order = len(groups), np.asarray(self.sequence_)
        if order.ndim != 1 or order.dtype.kind not in "iu" or len(np.unique(order)) != len(order) \
                or (order.size and (order.min() < 0 or order.max() >= J)):
            raise ValueError("anytime state: the sequence must hold distinct group ids")
        P = len(order) + 1
        shapes = {"coef_path_": (P, D), "intercept_path_": (P,), "cumulative_cost_": (P,),
                  "objective_path_": (P,), "train_explained_variance_": (P,),
                  "x_mean_": (D,), "x_scale_": (D,), "correlation_": (D,), "gram_": (D, D)}
        for name, shape in shapes.items():
            array = np.asarray(getattr(self, name), dtype=np.float64)
            if array.shape != shape or not np.all(np.isfinite(array)):
                raise ValueError(f"anytime state: {name} must be finite of shape {shape}")
        if np.any(np.asarray(self.x_scale_) <= 0) or not self.y_scale_ > 0 or \
                not np.isfinite(self.y_mean_) or not np.isfinite(self.y_scale_):
            raise ValueError("anytime state: scales must be finite and > 0")
        validation = self.validation_explained_variance_
        if validation is not None and np.asarray(validation).shape != (P,):
            raise ValueError("anytime state: validation_explained_variance has the wrong shape")
        self.groups_, self.costs_ = groups, costs


def _cap_order(order: np.ndarray, costs: np.ndarray, max_cost: float | None,
               max_groups: int | None) -> np.ndarray:
    """Prefix of ``order`` within the cost / length caps."""
    if max_cost is not None:
        within = np.cumsum(costs[order]) <= max_cost + cost_slack(max_cost)
        order = order[:int(np.argmin(within)) if not within.all() else len(order)]
    return order if max_groups is None else order[:int(max_groups)]


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _group_ids(groups: Iterable[Any]) -> list[int]:
    """Group ids as ints; ValueError for anything that is not an integer. A list of plain
    ints (what serving passes) is checked with one C-level type pass, no ABC check per id."""
    if type(groups) is list and all(type(g) is int for g in groups):
        return groups.copy()
    ids = []
    for g in groups:
        if isinstance(g, bool) or not isinstance(g, numbers.Integral):
            raise ValueError(f"group ids must be integers, got {g!r}")
        ids.append(int(g))
    return ids
