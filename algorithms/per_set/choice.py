"""PerSetChoice: for each computed set of feature groups, the better of two models.

Two halves are fitted on the same training rows: an :class:`AnytimeLinearModel` (a ridge
refit on exactly the computed groups ``S``; for classification a logistic refit,
``ANYTIME_CLASSIFICATION``, unless ``anytime_params`` say otherwise) and :class:`GBFS`
(trees; uncomputed groups' features are never read). Each half gets a
:class:`~algorithms.per_set.figures.SetFigures` on the same held-out validation rows, and
a set ``S`` is answered by the half with the better validation figure *for exactly S*:
explained variance (regression) or cross-fitted log-loss of the Platt-calibrated
probabilities (classification). Optionally, for a few named sets (``specialist_sets``), a
model trained on exactly that set's features (:mod:`algorithms.per_set.specialists`) is a
third candidate for that set alone. Trees (the GBFS half, a specialist's trees) replace a
linear answer (the anytime half, a specialist's linear candidate) only when their figure
is better by more than ``choice_margin`` standard errors of the mean paired difference of
the validation rows' losses (the one-standard-error rule: the trees early-stopped on those
same rows, so their figure is optimistic by about that much on a few hundred rows; the
linear answers have no such optimism to correct). The combined figure of a set is its chosen
answerer's; ``next_group`` and the greedy ``sequence_`` maximize its gain per unit cost.
GBFS (its half and the specialists' trees) early-stops on those validation rows, as a
practitioner early-stops a booster on a validation split (the per-set refit a
practitioner would compare against has the same optimism). Classification trees use
second-order split gains (``GBFS_CLASSIFICATION``); the GBFS half has no feature penalty
and early-stops with patience 50 (``GBFS_HALF``), unless ``gbfs_params`` say otherwise.
The protocol is the batch models' (``algorithms.batch``).
"""

from __future__ import annotations

import numbers
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from algorithms.anytime import METHODS, AnytimeLinearModel
from algorithms.batch import BatchModel, as_dense
from algorithms.estimator import (
    ClassifierMixin,
    RegressorMixin,
    available_if,
    binary_classes,
    check_matrix_shape,
    check_n_features,
    column_or_1d,
    label_array,
    not_fitted,
    sklearn_tags_as,
)
from algorithms.gbfs import GBFS
from algorithms.nvsd._state import get_array, get_number, sub_state
from algorithms.per_set.figures import (
    TASKS,
    SetFigures,
    ValidationFigures,
    best_next_group,
    group_ids,
    wins_beyond_noise,
)
from algorithms.per_set.specialists import Specialist, clean_sets, fit_specialist
from algorithms.sparse import CSRBatch
from algorithms.states import envelope, open_envelope

HALVES = ("anytime", "gbfs")
ANSWERERS = (*HALVES, "specialist")   # what may answer a set (sequence_half_ codes 0, 1, 2)
VALIDATION_FRACTION = 0.2   # held out by fit() when no validation rows are given
TIE_TOLERANCE = 1e-12       # figure differences below this are ties (-> the anytime half)
_ANYTIME_OWN = ("groups", "costs", "method", "budget")
_GBFS_OWN = ("loss", "feature_groups", "group_costs", "feature_costs")
# the GBFS half's defaults (gbfs_params win): its job is the best answer for each set, which
# the anytime half's sequence and the figures' gain per cost already make cost-aware, so no
# feature penalty; early stopping with a practitioner's patience (50, as LightGBM's peer)
GBFS_HALF = {"feature_penalty": 0.0, "early_stopping_rounds": 50}
GBFS_CLASSIFICATION = {**GBFS_HALF, "split_gain": "newton"}   # (classification adds these)
ANYTIME_CLASSIFICATION = {"classification_answer": "logistic"}   # the anytime half's (idem)


class PerSetChoice(RegressorMixin, BatchModel):
    """Per computed set, the better of an anytime linear model and GBFS on validation data;
    a scikit-learn regressor (``task="regression"``) or classifier (``"classification"``).

    Parameters (keyword-only)
    -------------------------
    groups : feature-index lists, a partition of the features (GBFS needs every feature
        in a group); None (the default): every feature is its own group
    costs : one cost >= 0 per group; None (the default): 1 each
    task : "regression" (default) | "classification" (any two labels; both halves learn
        them as -1 / +1, ``classes_`` keeps the originals, sorted)
    method : the anytime half's method (default "cs-g-omp")
    anytime_params, gbfs_params : further keywords of :class:`AnytimeLinearModel` and
        :class:`GBFS` (not their groups, costs, method or loss)
    max_validation_rows : the validation rows kept (and scored per set) are a uniform
        subsample of this many when there are more (default 5000)
    random_state : seed of the hold-out and of that subsample (default 0)
    cache_size : computed sets whose figures each half keeps (LRU)
    specialist_sets : sets of group ids (lists) that get a specialist each, in priority
        order; None (the default): none
    max_specialists : at most this many of ``specialist_sets`` are fitted (default 8)
    choice_margin : standard errors (of the mean paired difference of the validation
        rows' losses) by which trees must beat a linear answer: the GBFS half the anytime
        half, a tree specialist the anytime half, a specialist's trees its linear candidate
        (default 1.0; 0: any gain wins, the rule of states written before the margin
        existed)

    ``fit(X, y)`` without validation rows holds out a fixed 20 % of the rows (a
    permutation seeded by ``random_state``) for validation and fits both halves on the
    rest; ``fit(X, y, X_val=, y_val=)`` fits on all of ``X``.

    Fitted: ``anytime_``, ``gbfs_`` (the halves), ``anytime_figures_``, ``gbfs_figures_``
    (their :class:`SetFigures`), ``X_val_``, ``y_val_`` (the stored validation rows; labels
    as -1.0 / +1.0), ``classes_`` (classification), ``groups_``, ``costs_``,
    ``n_features_in_``, and the greedy combined sequence: ``sequence_`` (group ids),
    ``cumulative_cost_``, ``sequence_figure_`` (combined validation figure) and
    ``sequence_half_`` (the half answering), the last three per prefix (length J + 1);
    ``specialists_`` (set -> :class:`~algorithms.per_set.specialists.Specialist`, every
    one fitted, winning or not) and ``specialist_figures_``.

    Serving a set ``S`` first costs two validation scorings (one per half, cached per set),
    then one scoring of the request by the chosen half. Rows may hold NaN (missing) in the
    features of uncomputed groups; the features of computed groups must be finite.
    """

    kind = "per-set-choice"
    format_version = 2   # 2: with specialist_sets (written as 1 without them, as before)

    def __init__(self, *, groups: Sequence[Sequence[int]] | None = None,
                 costs: Sequence[float] | None = None, task: str = "regression",
                 method: str = "cs-g-omp",
                 anytime_params: Mapping[str, Any] | None = None,
                 gbfs_params: Mapping[str, Any] | None = None,
                 max_validation_rows: int = 5000, random_state: int = 0,
                 cache_size: int = 1024, specialist_sets: Sequence[Sequence[int]] | None = None,
                 max_specialists: int = 8, choice_margin: float = 1.0) -> None:
        self.groups = groups
        self.costs = costs
        self.task = task
        self.method = method
        self.anytime_params = anytime_params
        self.gbfs_params = gbfs_params
        self.max_validation_rows = max_validation_rows
        self.random_state = random_state
        self.cache_size = cache_size
        self.specialist_sets = specialist_sets
        self.max_specialists = max_specialists
        self.choice_margin = choice_margin

    # ------------------------------------------------------------------ parameters
    def check_params(self, n_features: int) -> None:
        """ValueError / TypeError naming the first parameter :meth:`fit` would refuse for
        ``n_features`` features (both halves' parameters included)."""
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        for name, low in (("max_validation_rows", 2), ("random_state", 0), ("cache_size", 0),
                          ("max_specialists", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) \
                    or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        margin = self.choice_margin
        if isinstance(margin, bool) or not isinstance(margin, numbers.Real) \
                or not 0 <= margin < float("inf"):
            raise ValueError(f"choice_margin must be a number >= 0, got {margin!r}")
        for name, own in (("anytime_params", _ANYTIME_OWN), ("gbfs_params", _GBFS_OWN)):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Mapping):
                raise TypeError(f"{name} must be a dict or None, got {type(value).__name__}")
            clash = sorted(set(value or ()) & set(own))
            if clash:
                raise ValueError(f"{name} may not set {clash}: PerSetChoice sets them")
        self._anytime(n_features).check_params(n_features)
        self._gbfs(n_features).check_params(n_features)
        self._specialist_keys(n_features)

    def _specialist_keys(self, n_features: int) -> list[tuple[int, ...]]:
        """The sets that get a specialist: ``specialist_sets`` cleaned (distinct, non-empty,
        sorted ids), the first ``max_specialists``; ValueError naming a bad entry."""
        groups, _ = self._groups_and_costs(n_features)
        return clean_sets(self.specialist_sets, len(groups), int(self.max_specialists))

    def _groups_and_costs(self, n_features: int) -> tuple[Any, Any]:
        """``groups`` (None: one per feature) and ``costs`` (None: 1 per group)."""
        groups = [[f] for f in range(int(n_features))] if self.groups is None else self.groups
        costs = self.costs
        if costs is None:
            try:
                costs = [1.0] * len(groups)
            except TypeError as exc:
                raise ValueError(f"groups must be lists of feature indices, got "
                                 f"{groups!r}") from exc
        return groups, costs

    def _anytime(self, n_features: int) -> AnytimeLinearModel:
        groups, costs = self._groups_and_costs(n_features)
        defaults = ANYTIME_CLASSIFICATION if self.task == "classification" else {}
        try:
            return AnytimeLinearModel(groups=groups, costs=costs, method=self.method,
                                      **{**defaults, **dict(self.anytime_params or {})})
        except TypeError as exc:
            raise TypeError(f"bad anytime_params {sorted(self.anytime_params or {})}: "
                            f"{exc}") from exc

    def _gbfs(self, n_features: int) -> GBFS:
        loss = "squared" if self.task == "regression" else "logistic"
        groups, costs = self._groups_and_costs(n_features)
        try:
            groups = [np.asarray(g, dtype=np.int64).ravel().tolist() for g in groups]
            costs = np.asarray(costs, dtype=np.float64).ravel()
        except (TypeError, ValueError) as exc:
            raise ValueError(f"groups must be lists of feature indices and costs numbers: "
                             f"{exc}") from exc
        defaults = GBFS_CLASSIFICATION if loss == "logistic" else GBFS_HALF
        try:
            return GBFS(loss=loss, feature_groups=groups, group_costs=costs,
                        **{**defaults, **dict(self.gbfs_params or {})})
        except TypeError as exc:
            raise TypeError(f"bad gbfs_params {sorted(self.gbfs_params or {})}: {exc}") from exc

    # --------------------------------------------------------------------- fitting
    def _encode(self, y: Any, n: int, classes: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray | None]:
        """Targets as float64 (classification: -1 / +1 for ``classes[0]`` / ``classes[1]``,
        ``classes`` found from ``y`` when None) and the classes."""
        y = column_or_1d(y, n)
        if self.task == "regression":
            try:
                y = y.astype(np.float64)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"regression targets must be numbers: {exc}") from exc
            if not np.all(np.isfinite(y)):
                raise ValueError("y contains NaN or infinite values")
            return y, None
        y = label_array(y)
        if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
            raise ValueError("labels contain NaN or infinite values")
        if classes is None:
            classes = binary_classes(y, "classification")
        unknown = ~np.isin(y, classes)
        if unknown.any():
            raise ValueError(f"label {y[np.argmax(unknown)]!r} is not one of {classes}")
        return np.where(y == classes[1], 1.0, -1.0), classes

    def fit(self, X: Any, y: Any, *, X_val: Any = None, y_val: Any = None,
            progress: Callable[[float], None] | None = None) -> PerSetChoice:
        """Fit both halves on the training rows, measure them on the validation rows and
        build the greedy combined sequence (class docstring). ``X``: dense, scipy sparse or
        ``CSRBatch``, finite. ``progress(fraction)`` is called as the work advances. Cost:
        the two fits, plus up to ``J (J + 1)`` validation scorings for the sequence."""
        X = as_dense(X, min_samples=1)
        n, d = X.shape
        self.check_params(d)
        target, classes = self._encode(y, n)
        if (X_val is None) != (y_val is None):
            raise ValueError("pass both X_val and y_val, or neither")
        rng = np.random.default_rng(int(self.random_state))
        if X_val is None:
            n_val = max(1, int(round(VALIDATION_FRACTION * n)))
            if n - n_val < 2:
                raise ValueError(f"need at least 3 rows to hold out validation rows, got "
                                 f"n_samples={n}")
            order = rng.permutation(n)
            val, train = np.sort(order[:n_val]), np.sort(order[n_val:])
            X_fit, t_fit, Xv, tv = X[train], target[train], X[val], target[val]
        else:
            Xv = as_dense(X_val)
            if Xv.shape[1] != d or Xv.shape[0] < 1:
                raise ValueError(f"X_val must have {d} columns and a row, got {Xv.shape}")
            tv, _ = self._encode(y_val, Xv.shape[0], classes)
            X_fit, t_fit = X, target
        if Xv.shape[0] > self.max_validation_rows:
            keep = np.sort(rng.choice(Xv.shape[0], size=int(self.max_validation_rows),
                                      replace=False))
            Xv, tv = Xv[keep], tv[keep]
        Xv, tv = np.ascontiguousarray(Xv), np.ascontiguousarray(tv)
        anytime = self._anytime(d).fit(X_fit, t_fit, X_val=Xv, y_val=tv)
        if progress is not None:
            progress(0.05)
        keys = self._specialist_keys(d)
        share = 0.65 if keys else 0.85   # of the progress, GBFS's; the specialists' the rest
        gbfs = self._gbfs(d).fit(X_fit, t_fit, X_val=Xv, y_val=tv,
                                 progress=None if progress is None else (
                                     lambda f: progress(0.05 + share * f)))
        specialists = []
        groups = [np.asarray(g, dtype=np.int64) for g in anytime.groups_]
        for i, S in enumerate(keys):
            specialists.append(fit_specialist(
                X_fit, t_fit, Xv, tv, groups, np.asarray(anytime.costs_), S, self.task,
                self.gbfs_params, margin=float(self.choice_margin)))
            if progress is not None:
                progress(0.7 + 0.2 * (i + 1) / len(keys))
        self._attach(anytime, gbfs, Xv, tv, classes, specialists)
        self._build_sequence()
        if progress is not None:
            progress(1.0)
        return self

    def _attach(self, anytime: AnytimeLinearModel, gbfs: GBFS, X_val: np.ndarray,
                y_val: np.ndarray, classes: np.ndarray | None,
                specialists: Sequence[Specialist] = ()) -> None:
        self.anytime_, self.gbfs_ = anytime, gbfs
        self.n_features_in_ = int(anytime.n_features_in_)
        self.groups_ = [np.asarray(g, dtype=np.int64) for g in anytime.groups_]
        self.costs_ = np.asarray(anytime.costs_, dtype=np.float64)
        self.X_val_, self.y_val_ = X_val, y_val
        if classes is not None:
            self.classes_ = classes
        common = {"task": self.task, "groups": self.groups_, "costs": self.costs_,
                  "cache_size": int(self.cache_size)}
        self.anytime_figures_ = SetFigures(self._score_anytime, X_val, y_val, **common)
        self.gbfs_figures_ = SetFigures(self._score_gbfs, X_val, y_val, **common)
        self.specialists_ = {s.groups: s for s in specialists}
        self._margin_wins: OrderedDict[tuple, bool] = OrderedDict()
        self._margin_lock = threading.Lock()
        self.specialist_figures_ = SetFigures(self._score_specialist, X_val, y_val, **common)

    def _build_sequence(self) -> None:
        """Greedy combined sequence from the empty set: ``next_group_gain`` until no group
        is left. O(J^2) figures per half (cached)."""
        S: tuple[int, ...] = ()
        order, figures, halves = [], [self.combined_figure(S)], [self.choice(S)]
        while (step := self.next_group_gain(S)) is not None:
            order.append(step[0])
            S = tuple(sorted((*S, step[0])))
            figures.append(self.combined_figure(S))
            halves.append(self.choice(S))
        self.sequence_ = np.asarray(order, dtype=np.int64)
        self.cumulative_cost_ = np.concatenate([[0.0], np.cumsum(self.costs_[self.sequence_])])
        self.sequence_figure_ = np.asarray(figures, dtype=np.float64)
        self.sequence_half_ = halves

    # --------------------------------------------------------------------- scorers
    def _score_anytime(self, X: np.ndarray, S: tuple[int, ...]) -> np.ndarray:
        """The anytime half's answer for ``S`` (its ridge prediction, or with a logistic
        answer its logit), the same operations on the same arrays as its own ``predict``
        (its per-set solves are cached and thread-safe); ``X`` is already checked
        (``_rows``)."""
        coef, intercept = self.anytime_.answer_coef(S)
        return X @ coef + intercept

    def _score_gbfs(self, X: np.ndarray, S: tuple[int, ...]) -> np.ndarray:
        return self.gbfs_.decision_function(X, computed_groups=S)

    def _score_specialist(self, X: np.ndarray, S: tuple[int, ...]) -> np.ndarray:
        specialist = self.specialists_.get(S)
        if specialist is None:
            raise ValueError(f"no specialist was fitted for the set {list(S)}")
        return specialist.decision_function(X)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_margin_lock", None)   # a lock does not pickle: a new one on loading
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if "_margin_wins" in state:
            self._margin_lock = threading.Lock()

    def _check_fitted(self) -> None:
        if not hasattr(self, "anytime_figures_"):
            raise not_fitted(self)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        return sklearn_tags_as(tags, "classifier" if self.task == "classification"
                               else "regressor")

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """R^2 (regression) or mean accuracy (classification) of :meth:`predict`."""
        if self.task == "classification":
            return ClassifierMixin.score(self, X, y, sample_weight)
        return super().score(X, y, sample_weight)

    def _key(self, computed_groups: Iterable[int] | None) -> tuple[int, ...]:
        self._check_fitted()
        return group_ids(computed_groups, len(self.groups_))

    def half_figures(self, half: str) -> SetFigures:
        """The :class:`SetFigures` of ``half`` ("anytime" | "gbfs" | "specialist"; the
        specialists' figures exist for their own sets only)."""
        self._check_fitted()
        if half not in ANSWERERS:
            raise ValueError(f"half must be one of {ANSWERERS}, got {half!r}")
        return {"anytime": self.anytime_figures_, "gbfs": self.gbfs_figures_,
                "specialist": self.specialist_figures_}[half]

    def specialist_figure(self, computed_groups: Iterable[int] | None) -> float | None:
        """The validation figure of the set's specialist; None when it has none."""
        S = self._key(computed_groups)
        return self.specialist_figures_.figure(S) if S in self.specialists_ else None

    def _rows(self, X: Any, S: tuple[int, ...]) -> np.ndarray:
        """``X`` as dense float64 rows for the set ``S``: non-finite entries of uncomputed
        groups' features become 0 (no half reads them); ValueError for non-finite entries in
        computed groups' features. The same array when it is finite float64. O(n D)."""
        if isinstance(X, CSRBatch):
            X = X.to_scipy()
        if sp.issparse(X):
            X = X.toarray()
        try:
            X = np.asarray(X, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"X must be a numeric matrix (array, scipy sparse or CSRBatch), "
                            f"got {type(X).__name__}: {exc}") from exc
        check_matrix_shape(X, min_samples=0)
        if X.ndim != 2:
            raise ValueError(f"X must have {self.n_features_in_} columns, got shape {X.shape}")
        check_n_features(self, X.shape[1])
        finite = np.isfinite(X)
        if finite.all():
            return X
        computed = np.concatenate([self.groups_[g] for g in S]) if S else np.zeros(0, int)
        if not finite[:, computed].all():
            raise ValueError("X holds NaN or infinite values in features of the computed "
                             f"groups {list(S)}")
        return np.where(finite, X, 0.0)

    # --------------------------------------------------------------------- serving
    def choice(self, computed_groups: Iterable[int] | None = None) -> str:
        """"anytime", "gbfs" or "specialist": the one with the better validation figure for
        exactly the set (None: every group); "gbfs" only when its figure exceeds the anytime
        half's by more than ``TIE_TOLERANCE`` (ties go to the anytime half, cheaper to
        serve), "specialist" (a set with one) only when its figure is better than the
        better half's. Trees (the GBFS half, a specialist's trees) that challenge a linear
        answer (the anytime half) must win by more than ``choice_margin`` standard errors
        (:meth:`_beats`): they early-stopped on the rows that compare them; between two
        early-stopped tree models, or for a linear specialist, any gain wins."""
        S = self._key(computed_groups)
        anytime = self.anytime_figures_.figure(S)
        gbfs = self.gbfs_figures_.figure(S)
        half, best = "anytime", anytime
        if gbfs > anytime + TIE_TOLERANCE and self._beats(S, "gbfs", "anytime"):
            half, best = "gbfs", gbfs
        if S in self.specialists_ and \
                self.specialist_figures_.figure(S) > best + TIE_TOLERANCE and \
                (half == "gbfs" or self.specialists_[S].kind != "gbfs" or
                 self._beats(S, "specialist", half)):
            return "specialist"
        return half

    def _beats(self, S: tuple[int, ...], challenger: str, incumbent: str) -> bool:
        """Whether ``challenger`` beats ``incumbent`` for ``S`` on the validation rows by
        more than ``choice_margin`` standard errors (:func:`wins_beyond_noise`; asked
        only when its figure is better): True with margin 0, else decided once per set
        and pair (two scorings of the validation rows; the last ``cache_size`` kept)."""
        margin = float(self.choice_margin)
        if margin <= 0:
            return True
        key = (S, challenger, incumbent)
        with self._margin_lock:
            won = self._margin_wins.get(key)
        if won is None:
            won = wins_beyond_noise(self.half_figures(challenger).row_losses(S),
                                    self.half_figures(incumbent).row_losses(S), margin,
                                    TIE_TOLERANCE)
            with self._margin_lock:
                self._margin_wins[key] = won
                while len(self._margin_wins) > max(int(self.cache_size), 1):
                    self._margin_wins.popitem(last=False)
        return won

    def combined_figure(self, computed_groups: Iterable[int] | None = None) -> float:
        """The chosen half's validation figure for the set (explained variance or
        -log-loss)."""
        S = self._key(computed_groups)
        return self.half_figures(self.choice(S)).figure(S)

    def figures(self, computed_groups: Iterable[int] | None = None) -> dict[str, Any]:
        """The chosen answerer's :class:`ValidationFigures` as a dict, with ``half`` (which)
        and ``anytime_figure`` / ``gbfs_figure`` (both halves' comparison figures), and
        ``specialist_figure`` when the set has a specialist."""
        S = self._key(computed_groups)
        half = self.choice(S)
        chosen: ValidationFigures = self.half_figures(half).figures(S)
        out = {"half": half, **chosen.as_dict(),
               "anytime_figure": self.anytime_figures_.figure(S),
               "gbfs_figure": self.gbfs_figures_.figure(S)}
        if S in self.specialists_:
            out["specialist_figure"] = self.specialist_figures_.figure(S)
        return out

    def decision_function(self, X: Any, *, computed_groups: Iterable[int] | None = None
                          ) -> np.ndarray:
        """Scores (n,) for rows knowing the groups ``computed_groups`` (None: all): the
        chosen half's raw score (regression: its prediction, the very array its own
        ``predict`` returns); classification: the logit ``a s + b`` of the chosen half's
        calibrated probability, so both halves' scores are on one scale. O(scoring)."""
        S = self._key(computed_groups)
        half = self.choice(S)
        X = self._rows(X, S)
        scores = {"anytime": self._score_anytime, "gbfs": self._score_gbfs,
                  "specialist": self._score_specialist}[half](X, S)
        if self.task == "classification":
            return self.half_figures(half).figures(S).logits(scores)
        return scores

    def predict(self, X: Any, *, computed_groups: Iterable[int] | None = None) -> np.ndarray:
        """Values (regression) or labels in ``classes_`` (calibrated ``p >= 1/2``)."""
        scores = self.decision_function(X, computed_groups=computed_groups)
        if self.task == "regression":
            return scores
        return self.classes_[(scores >= 0.0).astype(np.int64)]

    @available_if(lambda model: model.task == "classification")
    def predict_proba(self, X: Any, *, computed_groups: Iterable[int] | None = None
                      ) -> np.ndarray:
        """``[1 - p, p]`` (n, 2), ``p`` the chosen half's calibrated probability of
        ``classes_[1]``; classification only."""
        p = expit(self.decision_function(X, computed_groups=computed_groups))
        return np.column_stack([1.0 - p, p])

    def next_group_gain(self, computed_groups: Iterable[int] | None = (), *,
                        max_cost: float | None = None) -> tuple[int, float] | None:
        """``(g, gain)`` maximizing the combined figure's gain per unit cost over the groups
        not in ``S`` within ``max_cost - cost(S)`` (:func:`best_next_group`); None when none
        is left or fits. Two cached validation figures per candidate."""
        S = self._key(computed_groups if computed_groups is not None else ())
        return best_next_group(self.combined_figure, S, self.costs_, max_cost)

    def next_group(self, computed_groups: Iterable[int] | None = (), *,
                   max_cost: float | None = None) -> int | None:
        """The group of :meth:`next_group_gain` (None when none is left or fits)."""
        step = self.next_group_gain(computed_groups, max_cost=max_cost)
        return None if step is None else step[0]

    def selected_features(self) -> np.ndarray:
        """Sorted feature indices (int64) that either half uses."""
        self._check_fitted()
        used = [self.anytime_.selected_features(), self.gbfs_.selected_features(),
                *(s.columns for s in self.specialists_.values())]
        return np.unique(np.concatenate(used)).astype(np.int64)

    # ----------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """Parameters, validation rows, labels, classes and sequence in the envelope of
        ``algorithms.states``; the halves' states (each with its envelope) under
        ``anytime.`` and ``gbfs.``. Classes are an array when numeric, a list when strings;
        ``sequence_half`` is 0 (anytime) / 1 (gbfs) / 2 (specialist) per prefix. With
        ``specialist_sets`` (format 2): those parameters, the fitted sets
        (``specialist_groups`` flat, ``specialist_sizes``) and each specialist under
        ``specialist.<i>.``; without them the state is format 1, as before."""
        if self.groups is None or self.costs is None:   # resolved by fit
            if not hasattr(self, "groups_"):
                raise ValueError("the state of a PerSetChoice without groups or costs needs "
                                 "a fitted model (fit resolves them)")
            groups, costs = self.groups_, self.costs_
        else:
            groups, costs = self.groups, self.costs
        try:
            groups = [np.asarray(g, dtype=np.int64).ravel() for g in groups]
            costs = np.asarray(costs, dtype=np.float64).ravel()
        except (TypeError, ValueError) as exc:
            raise ValueError(f"groups and costs must be numeric: {exc}") from exc
        payload: dict[str, Any] = {
            "group_features": np.concatenate([*groups, np.zeros(0, np.int64)]),
            "group_sizes": np.array([g.size for g in groups], dtype=np.int64),
            "costs": costs, "task": self.task, "method": self.method,
            "anytime_params": _plain(self.anytime_params),
            "gbfs_params": _plain(self.gbfs_params),
            "max_validation_rows": int(self.max_validation_rows),
            "random_state": int(self.random_state), "cache_size": int(self.cache_size)}
        if self.choice_margin:   # (absent: 0, as in the states written before it existed)
            payload["choice_margin"] = float(self.choice_margin)
        if hasattr(self, "anytime_figures_"):
            payload.update(
                n_features_in=self.n_features_in_, X_val=self.X_val_, y_val=self.y_val_,
                sequence=self.sequence_, cumulative_cost=self.cumulative_cost_,
                sequence_figure=self.sequence_figure_,
                sequence_half=np.array([ANSWERERS.index(h) for h in self.sequence_half_],
                                       dtype=np.int8))
            if self.task == "classification":
                classes = self.classes_
                payload["classes"] = classes if classes.dtype.kind in "biuf" \
                    else [str(c) for c in classes]
            payload.update({f"anytime.{k}": v for k, v in self.anytime_.state_dict().items()})
            payload.update({f"gbfs.{k}": v for k, v in self.gbfs_.state_dict().items()})
        if self.specialist_sets is None:
            return envelope(self.kind, 1, payload)
        payload["specialist_sets"] = [[int(g) for g in S] for S in self.specialist_sets]
        payload["max_specialists"] = int(self.max_specialists)
        if hasattr(self, "anytime_figures_"):
            fitted = list(self.specialists_.values())
            payload["specialist_groups"] = np.array(
                [g for s in fitted for g in s.groups], dtype=np.int64)
            payload["specialist_sizes"] = np.array([len(s.groups) for s in fitted],
                                                   dtype=np.int64)
            for i, specialist in enumerate(fitted):
                payload.update({f"specialist.{i}.{k}": v
                                for k, v in specialist.state_dict().items()})
        return envelope(self.kind, self.format_version, payload)

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> PerSetChoice:
        """Inverse of :meth:`state_dict`, answering bit for bit as the saved model did;
        ValueError naming the member when the contents disagree (shapes, finiteness, groups
        and costs the same in both halves, labels, classes, the sequence)."""
        _, payload = open_envelope(state, cls.kind, (1, cls.format_version))
        sizes = get_array(payload, "group_sizes", (None,), kinds="iu")
        features = get_array(payload, "group_features", (None,), kinds="iu")
        if np.any(sizes < 1) or int(sizes.sum()) != features.size:
            raise ValueError("state 'group_sizes' must be >= 1 and add up to the length of "
                             "'group_features'")
        groups = [g.tolist() for g in np.split(features.astype(np.int64),
                                               np.cumsum(sizes)[:-1])]
        costs = get_array(payload, "costs", (len(groups),))
        for name, kind in (("task", str), ("method", str)):
            if not isinstance(payload.get(name), kind):
                raise ValueError(f"state {name!r} must be a string")
        for name in ("anytime_params", "gbfs_params"):
            if payload.get(name) is not None and not isinstance(payload[name], dict):
                raise ValueError(f"state {name!r} must be a dict or None")
        model = cls(groups=groups, costs=costs.tolist(), task=payload["task"],
                    method=payload["method"], anytime_params=payload.get("anytime_params"),
                    gbfs_params=payload.get("gbfs_params"),
                    max_validation_rows=get_number(payload, "max_validation_rows",
                                                   integer=True),
                    random_state=get_number(payload, "random_state", integer=True),
                    cache_size=get_number(payload, "cache_size", integer=True))
        if "specialist_sets" in payload:
            raw = payload["specialist_sets"]
            if not isinstance(raw, list) or not all(isinstance(S, list) for S in raw):
                raise ValueError("state 'specialist_sets' must be a list of lists")
            model.specialist_sets = raw
            model.max_specialists = get_number(payload, "max_specialists", integer=True)
        # (states written before the margin existed chose by any gain)
        model.choice_margin = get_number(payload, "choice_margin") \
            if "choice_margin" in payload else 0.0
        if "n_features_in" not in payload:
            return model
        d = get_number(payload, "n_features_in", integer=True)
        try:
            model.check_params(d)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"state parameters: {exc}") from exc
        anytime = _nested(payload, "anytime.", AnytimeLinearModel)
        gbfs = _nested(payload, "gbfs.", GBFS)
        _check_halves(anytime, gbfs, groups, costs, d, model)
        X_val = get_array(payload, "X_val", (None, d))
        n = X_val.shape[0]
        if not 1 <= n <= model.max_validation_rows:
            raise ValueError(f"state 'X_val' must have 1 to {model.max_validation_rows} rows, "
                             f"got {n}")
        y_val = get_array(payload, "y_val", (n,))
        classes = None
        if model.task == "classification":
            if not np.all(np.abs(y_val) == 1.0):
                raise ValueError("state 'y_val' must hold -1.0 / +1.0 labels")
            raw = payload.get("classes")
            if isinstance(raw, list) and all(isinstance(c, str) for c in raw):
                raw = np.asarray(raw)
            classes = raw if isinstance(raw, np.ndarray) else None
            if classes is None or classes.shape != (2,) or classes.dtype.kind not in "biufU" \
                    or classes[0] == classes[1]:
                raise ValueError("state 'classes' must be two distinct labels")
        J = len(groups)
        sequence = get_array(payload, "sequence", (J,), kinds="iu").astype(np.int64)
        if not np.array_equal(np.sort(sequence), np.arange(J)):
            raise ValueError(f"state 'sequence' must be an ordering of the {J} groups")
        cumulative = get_array(payload, "cumulative_cost", (J + 1,))
        if not np.allclose(cumulative, np.concatenate([[0.0], np.cumsum(costs[sequence])]),
                           rtol=1e-12, atol=0.0):
            raise ValueError("state 'cumulative_cost' disagrees with 'costs' and 'sequence'")
        figures = get_array(payload, "sequence_figure", (J + 1,))
        halves = get_array(payload, "sequence_half", (J + 1,), kinds="iu")
        specialists = _specialists(payload, groups, d) if "specialist_sets" in payload else []
        allowed = (0, 1, 2) if specialists else (0, 1)
        if np.any(~np.isin(halves, allowed)):
            raise ValueError("state 'sequence_half' must hold 0 (anytime), 1 (gbfs) or, with "
                             "specialists, 2 (specialist)")
        model._attach(anytime, gbfs, np.ascontiguousarray(X_val),
                      np.ascontiguousarray(y_val), classes, specialists)
        model.sequence_, model.cumulative_cost_ = sequence, cumulative
        model.sequence_figure_ = figures
        model.sequence_half_ = [ANSWERERS[int(h)] for h in halves]
        return model


def _specialists(payload: dict[str, Any], groups: list, d: int) -> list[Specialist]:
    """The specialists stored under ``specialist.<i>.``; ValueError naming the member."""
    sizes = get_array(payload, "specialist_sizes", (None,), kinds="iu")
    flat = get_array(payload, "specialist_groups", (None,), kinds="iu").astype(np.int64)
    if np.any(sizes < 1) or int(sizes.sum()) != flat.size or \
            np.any((flat < 0) | (flat >= len(groups))):
        raise ValueError("state 'specialist_sizes' / 'specialist_groups' must describe "
                         "non-empty sets of group ids")
    out = []
    for i, ids in enumerate(np.split(flat, np.cumsum(sizes)[:-1]) if sizes.size else []):
        S = tuple(int(g) for g in ids)
        if list(S) != sorted(set(S)):
            raise ValueError(f"state 'specialist_groups' set {i} must be sorted and distinct")
        columns = np.sort(np.concatenate([np.asarray(groups[g], dtype=np.int64) for g in S]))
        if columns.size and columns[-1] >= d:
            raise ValueError(f"state specialist {i} reads features beyond {d}")
        try:
            out.append(Specialist.from_state_dict(sub_state(payload, f"specialist.{i}."),
                                                  S, columns))
        except ValueError as exc:
            raise ValueError(f"state member 'specialist.{i}.': {exc}") from exc
    return out


def _nested(payload: dict[str, Any], prefix: str, cls: type) -> Any:
    """The half stored under ``prefix``; ValueError naming the prefix otherwise."""
    try:
        return cls.from_state_dict(sub_state(payload, prefix))
    except ValueError as exc:
        raise ValueError(f"state member {prefix!r}: {exc}") from exc


def _check_halves(anytime: AnytimeLinearModel, gbfs: GBFS, groups: list, costs: np.ndarray,
                  d: int, model: PerSetChoice) -> None:
    """Both halves were fitted on ``d`` features with exactly these groups and costs, the
    anytime half with ``method``, GBFS with the task's loss; ValueError otherwise."""
    same = (len(anytime.groups_) == len(groups) and all(
        np.array_equal(a, g) for a, g in zip(anytime.groups_, groups, strict=True)))
    if anytime.n_features_in_ != d or not same or anytime.method != model.method \
            or not np.array_equal(anytime.costs_, costs):
        raise ValueError("state member 'anytime.': its features, groups, costs or method "
                         "differ from the model's")
    loss = "squared" if model.task == "regression" else "logistic"
    gbfs_groups = gbfs.feature_groups or []
    same = (len(gbfs_groups) == len(groups) and all(
        np.array_equal(a, g) for a, g in zip(gbfs_groups, groups, strict=True)))
    if gbfs.n_features_in_ != d or not same or gbfs.loss != loss or gbfs.group_costs is None \
            or not np.array_equal(np.asarray(gbfs.group_costs, dtype=np.float64), costs) \
            or gbfs.n_trees_per_iteration_ != 1:   # (softmax: K > 2 classes)
        raise ValueError("state member 'gbfs.': its features, groups, costs or loss differ "
                         "from the model's")


def _plain(value: Any) -> Any:
    """``value`` with numpy scalars and arrays as Python numbers and lists, tuples as
    lists: what the state's JSON part can hold."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


__all__ = ["ANSWERERS", "HALVES", "TIE_TOLERANCE", "VALIDATION_FRACTION", "PerSetChoice"]
