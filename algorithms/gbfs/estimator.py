r"""GBFS: gradient boosted feature selection with feature costs (Xu et al., KDD 2014).

The model is ``H(x) = H_0 + alpha sum_t h_t(x)`` with depth-limited regression trees ``h_t``.
Tree ``t`` minimizes the paper's Eq. 14, the penalized squared loss

    1/2 sum_i (g_i - h(x_i))^2 + mu sum_f c_f phi_f F_f(h),

(``mu`` is the paper's trade-off, the parameter ``feature_penalty``; ``mu=`` is its
deprecated spelling)

where ``g_i = -dl/dH(x_i)``, ``F_f(h) = 1`` if ``h`` splits on ``f`` and ``phi_f = 1`` while no
earlier tree used ``f`` (so a feature is paid for once, the first time). With the leaf values
at their optimum (the leaf means of ``g``), a tree with leaves ``l`` has loss
``1/2 (sum_i g_i^2 - sum_l G_l^2 / n_l)``, so splitting a node (G, n) into (G_L, n_L),
(G_R, n_R) on ``f`` lowers Eq. 14 by exactly

    score = 1/2 (G_L^2/n_L + G_R^2/n_R - G^2/n) - mu c_f phi_f,

which greedy CART maximizes (``phi_f`` also drops to 0 once this tree has split on ``f``: the
charge ``F_f`` is per tree). A node splits when ``score > 0`` (up to a 1e-12 relative
tolerance), both children keep ``min_samples_leaf`` rows and the node's ``sum l''`` reaches
``min_split_hessian``. The paper's normalization ``sum_i h^2(x_i) = 1`` only rescales the tree by a
positive constant (it turns Eq. 13's ``-sum_i g_i h(x_i)`` into Eq. 14); as in its
Algorithm 1 we fit the tree by CART and step ``H += alpha h_t`` with ``alpha`` = learning rate.
Leaf values: ``leaf_values="mean"`` keeps CART's leaf means ``G_l / n_l`` (Algorithm 1
literally); the default ``"newton"`` re-fits each leaf of that same tree by one Newton step
``G_l / sum_{i in l} l''(H_i)`` (Friedman's TreeBoost line search, as scikit-learn's gradient
boosting does); identical for the squared loss. With ``split_gain="gradient"`` the tree
structure never depends on it.

Additions to the paper (both off with ``reg_lambda=0, split_gain="gradient"``, which
reproduce the paper's trees bit for bit, with ``masked_copies=0``,
``early_stopping_rounds=None`` and ``uncomputed="prefix"`` below):

* ``reg_lambda`` (lambda >= 0) adds the ridge term ``lambda/2 sum_l v_l^2`` on the leaf values
  to Eq. 14, so every denominator above becomes ``n + lambda`` and the leaves
  ``G_l / (W_l + lambda)`` (``W_l`` = ``n_l`` or ``sum l''``), as in XGBoost/LightGBM.
* ``split_gain="newton"`` grows the tree on the second-order model of the loss
  (``sum_i [-g_i h(x_i) + l''_i h(x_i)^2 / 2]``) instead of Eq. 14's unit-weight squared loss:
  the counts ``n`` become ``H = sum l''`` (``G_L^2/(H_L+lambda) + ...``), both children must
  keep ``H >= min_child_hessian`` (LightGBM's ``min_sum_hessian_in_leaf``), and the
  penalty ``mu c_f phi_f`` is charged exactly as before. For the squared loss
  (``l'' = 1``) it equals the gradient criterion. Needs ``leaf_values="newton"``.
Feature groups (``feature_groups``, a partition of the features, with ``group_costs`` c_g):
computing group ``g`` yields all its features, so Eq. 14's penalty becomes
``mu sum_g c_g phi_g F_g(h)`` with ``F_g(h) = 1`` if ``h`` splits on any feature of ``g`` and
``phi_g = 1`` while no earlier tree used a feature of ``g``. A split on ``f`` in group ``g(f)``
is charged ``mu c_{g(f)} phi_{g(f)}``, and once a node splits on a feature of ``g`` every
feature of ``g`` is free for the rest of that tree and all later trees. Singleton groups
``{f}`` with ``c_g = c_f`` are the per-feature penalty above, with bit-identical trees.
While the ensemble has no feature yet the root split is taken even when ``score <= 0``, so
``mu -> inf`` gives the single most useful (cost-adjusted) feature, not a constant model.
Early stopping (``n_estimators``) plays the paper's l1 term. Training: O(T (n d D + 2^D d B)).

Budgeted answers (additions to the paper). A caller that has computed only the groups ``S``
gets an answer from *every* tree (``uncomputed="missing"``, the default): the features of
the other groups are missing values, and each split sends a missing value along a learned
default direction (``_tree``: the missing rows are tried on both sides when the split is
chosen, as in XGBoost's sparsity-aware split finding). So that every split learns where
missing rows belong, training sees each row ``masked_copies`` (4) more times with groups
removed: each copy drops each group independently with probability ``mask_rate`` (0.5,
so the copies imitate computed sets drawn uniformly over all subsets; None draws the rate
uniformly in [0, 1) per copy and row instead). The copies are fixed for the whole fit
(each is an example with missing values, boosted like any other), the unmasked rows stay
in, and the masks come from ``random_state`` (0 when None), so a fit is reproducible. The
training cost grows by ``1 + masked_copies``. ``uncomputed="prefix"`` is the paper's own
anytime rule: the trees before the first one that splits on an uncomputed group
(``masked_copies=0`` with it gives the paper's model).
Early stopping (``early_stopping_rounds=20``): up to ``n_estimators`` (2000, a cap that
does not bind: 70-550 trees kept on the measured sets) trees, kept up to the lowest loss on
held-out rows (``fit``'s ``X_val, y_val``, else a seeded ``validation_fraction`` of the
rows) and their masked copies; None boosts every tree.
The unmasked ensemble (``unmasked_trees=True``, with masked copies and ``"missing"``): the
masking that teaches the trees where missing groups go costs the full-information answer
(on a regime-switch regression, ``algorithms.datasets.regime_synthetic``, held-out EV 0.25
with every group computed against 0.42 for the same trees without masking), so a fit also
boosts the trees ``masked_copies=0`` would (bit for bit: the unmasked rows, their own mu and
early stopping on the unmasked held-out rows; the fit costs about ``(2 + c) / (1 + c)``
times as much). It answers the prefix ``P_k`` of the cost order (cheapest first, ties by
id) when its loss on the held-out rows, groups outside ``P_k`` missing, is below the masked
trees' (``unmasked_sets_[k]``; without held-out rows: when ``P_k`` holds every group it
splits on), and any other set ``S`` that holds every group it splits on (its answer is then
exact) when it answers all groups; every other set gets the masked trees.
``feature_penalty="auto"`` (the default) sets ``mu = 0.0005 sum_i g_i^2 / mean_g c_g`` over
each ensemble's (masked, or unmasked) training rows' initial gradients: a group of average
cost must remove 0.1 % of the initial squared gradient at its first split, whatever n, the
target's scale or the cost unit (all costs zero: mu = 0). The defaults (also ``reg_lambda=1``,
``min_samples_leaf=5``) were chosen on ``benchmarks/budget_quality.py``.
``next_group(S)`` (``"missing"``) is the group outside ``S`` with the largest training
split gain per unit cost (``group_gain_``) that fits the budget.

K > 2 classes (``loss="logistic"`` with more than two labels, or ``loss="softmax"``, for
two as well): ``H(x)`` has K components, ``p = softmax(H)``, loss ``-log p_y``. Each round
``t`` grows K trees with the tree builder above, tree ``k`` on ``g_k = 1[y = k] - p_k`` with
Newton weights ``h_k = p_k (1 - p_k)`` (all K at the round's start scores), and scales its
leaves by ``(K - 1) / K`` (Friedman's multi-class step: at K = 2, ``H_1 - H_0`` moves by the
logistic model's step, the same trees without a penalty). The penalty ``phi_g`` is shared
by the round: a group is paid for by the first of the K trees that splits on it and is free
to the rest. Trees are stored round by round (tree ``t K + k``), ``n_estimators`` counts
rounds, early stopping watches the held-out multi-class log-loss per round, "auto" mu uses
``1/K sum_{i,k} g_ik^2``. Training O(T K (n d D + 2^D d B)); answering O(n T K D).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
from scipy.special import expit, softmax

from algorithms.batch import DEPRECATED, BatchModel, as_dense, cost_slack, deprecated_alias
from algorithms.estimator import (
    ClassifierMixin,
    RegressorMixin,
    available_if,
    check_n_features,
    column_or_1d,
    label_classes,
    not_fitted,
    sklearn_tags_as,
)
from algorithms.gbfs import _tree, binning, losses
from algorithms.states import envelope, open_envelope, renamed

_PARAMS = ("loss", "n_estimators", "learning_rate", "max_depth", "feature_penalty",
           "max_bins", "min_samples_leaf", "min_split_hessian", "subsample", "leaf_values",
           "reg_lambda", "split_gain", "min_child_hessian", "random_state")
_PARAMS_V2 = ("masked_copies", "mask_rate", "uncomputed", "early_stopping_rounds",
              "validation_fraction")  # format version 2 on
_LEAF_VALUES = ("newton", "mean")
_SPLIT_GAINS = ("gradient", "newton")
_UNCOMPUTED = ("missing", "prefix")
AUTO_PENALTY = 0.0005  # feature_penalty="auto": mu = AUTO_PENALTY sum g^2 / mean cost
_ARRAYS = ("bin_edges_", "bin_offsets_", "tree_feature_", "tree_threshold_",
           "tree_split_value_", "tree_value_", "selected_features_",
           "feature_entry_iteration_", "train_loss_")
_ARRAYS_V2 = ("tree_default_left_", "group_gain_", "validation_loss_")
_ARRAYS_V3 = ("unmasked_tree_feature_", "unmasked_tree_threshold_", "unmasked_tree_value_",
              "unmasked_tree_default_left_", "unmasked_sets_")


def _first_uses(tree_feature: np.ndarray, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ids ``key[f]`` of the split features in order of first use (tree by tree, nodes in
    heap order 0, 1, ...) and the tree index of each first use, both int64. O(T 2^D)."""
    ids: list[int] = []
    trees: list[int] = []
    seen: set[int] = set()
    for t, row in enumerate(tree_feature):
        for f in row[row >= 0]:
            k = int(key[f])
            if k not in seen:
                seen.add(k)
                ids.append(k)
                trees.append(t)
    return np.asarray(ids, dtype=np.int64), np.asarray(trees, dtype=np.int64)


def _group_csr(groups: list) -> tuple[np.ndarray, np.ndarray]:
    """Groups as CSR: ``members[indptr[g]:indptr[g + 1]]`` is group ``g`` (both int64)."""
    sizes = np.array([len(g) for g in groups], dtype=np.int64)
    indptr = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(sizes)])
    members = [np.asarray(g, dtype=np.int64) for g in groups]
    return indptr, np.concatenate(members + [np.zeros(0, dtype=np.int64)])


def _group_of(indptr: np.ndarray, members: np.ndarray) -> np.ndarray:
    """``group_of[f]`` = the group holding feature ``f`` (members must be a permutation)."""
    group_of = np.empty(members.shape[0], dtype=np.int64)
    group_of[members] = np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int64),
                                  np.diff(indptr))
    return group_of


def _scaled(progress: Callable[[float], None] | None, low: float, high: float
            ) -> Callable[[float], None] | None:
    """``progress`` with its fractions mapped from [0, 1] onto [low, high]."""
    if progress is None:
        return None
    return lambda fraction: progress(low + (high - low) * fraction)


def _start_scores(base: float | np.ndarray, n: int) -> np.ndarray:
    """Scores of ``n`` rows at the base score: (n,), or (K, n) for K classes' bases."""
    if np.ndim(base) == 0:
        return np.full(n, base, dtype=np.float64)
    return np.repeat(np.asarray(base, dtype=np.float64)[:, None], n, axis=1)


def _by_row(scores: np.ndarray) -> np.ndarray:
    """Scores as the losses read them: (n,) as they are, (K, n) transposed to (n, K)."""
    return scores if scores.ndim == 1 else scores.T


def _base(value: Any, n_classes: int) -> float | np.ndarray:
    """A base score as stored: float (one score), float64 (K,) (K classes)."""
    if n_classes == 1:
        return float(value)
    return np.asarray(value, dtype=np.float64).reshape(n_classes)


class _EarlyStop:
    """The loss of the fit's trees on held-out (masked) rows, round by round (one tree, or
    K for K classes): stops when ``early_stopping_rounds`` rounds in a row did not lower it
    by a relative 1e-9, and keeps the rounds up to the lowest (none if no round helped).
    O(n_val D K) per round."""

    def __init__(self, model: GBFS, loss: str, base_score: float | np.ndarray,
                 codes: np.ndarray, target: np.ndarray) -> None:
        self.model, self.loss, self.codes, self.target = model, loss, codes, target
        self.scores = _start_scores(base_score, len(target))
        self.best = losses.mean_loss(loss, target, _by_row(self.scores))
        self.best_trees = 0
        self.losses = np.zeros(model.n_estimators, dtype=np.float64)

    def step(self, t: int, trees: list[tuple]) -> bool:
        """Add round ``t``'s trees, (feature, threshold, default_left, value) for each
        class in order; True when the fit should stop."""
        for k, tree in enumerate(trees):
            _tree._add_tree_binned(self.codes, *tree, float(self.model.learning_rate),
                                   self.scores if self.scores.ndim == 1 else self.scores[k])
        self.losses[t] = loss = losses.mean_loss(self.loss, self.target, _by_row(self.scores))
        if loss < self.best - 1e-9 * abs(self.best):
            self.best, self.best_trees = loss, t + 1
        return t + 1 - self.best_trees >= self.model.early_stopping_rounds


class GBFS(ClassifierMixin, BatchModel):
    """Gradient boosted feature selection: a scikit-learn classifier (any labels,
    ``classes_``, ``predict_proba``; softmax for more than two) with ``loss="logistic"``,
    a regressor (R^2 ``score``) with ``loss="squared"``.

    Parameters (keyword-only): ``loss`` ("logistic": two classes, softmax for more |
    "squared" | "softmax": K trees a round for any K >= 2), ``n_estimators`` (T rounds),
    ``learning_rate`` (alpha, paper 0.1), ``max_depth`` (paper 4-5), ``feature_penalty``
    (the paper's mu: a split on a feature not used before pays ``feature_penalty * c_f``;
    ``mu`` is its deprecated spelling), ``feature_costs`` (c_f, default 1),
    ``feature_groups`` (disjoint lists of
    feature indices covering 0..d-1; a group's cost is paid once, at the first split on any
    of its features; not with ``feature_costs``), ``group_costs`` (c_g, one per group,
    default 1), ``max_bins`` (<= 255),
    ``min_samples_leaf``, ``min_split_hessian`` (a node splits only if its
    ``sum_i l''(H_i) >=`` this; ``l'' = 1`` for mean leaves; LightGBM's
    ``min_sum_hessian_in_leaf = 1e-3`` on both children implies the default ``2e-3``),
    ``subsample`` (row fraction per tree), ``leaf_values`` ("newton" | "mean"),
    ``reg_lambda`` (L2 on leaf values, default 1; 0 = the paper), ``split_gain`` ("gradient",
    the paper's Eq. 14, default | "newton", second-order gain), ``min_child_hessian``
    (children's ``sum l''`` floor, only with ``split_gain="newton"``, default 1e-3),
    ``random_state`` (the rows each tree sees when ``subsample < 1``, and the masks; 0
    when None, so a fit is reproducible),
    ``masked_copies`` (masked copies of each training row, default 4; 0: none),
    ``mask_rate`` (the probability that a copy drops a group, default 0.5; None: a uniform
    rate per copy and row), ``early_stopping_rounds`` (20; None: every tree) and
    ``validation_fraction`` (held out for it when ``fit`` gets no ``X_val``),
    ``unmasked_trees`` (True: also boost the trees without masking and answer with them
    the sets they did better on; False: the masked trees only, format 2),
    ``uncomputed`` ("missing": every tree answers, uncomputed groups follow the default
    directions | "prefix": the paper's prefix of trees); see the module docstring.
    ``feature_penalty="auto"`` (default) scales mu with the data and costs.

    Input: dense arrays, scipy sparse matrices or ``CSRBatch``, converted to dense once.
    What a caller has computed is ``computed_groups`` (group ids; without
    ``feature_groups``, group ``f`` is feature ``f``); ``computed=`` (feature indices) is
    its deprecated spelling.

    Fitted: ``selected_features_`` (in order of entry), ``feature_entry_iteration_`` (tree
    index where each entered), ``selected_groups_`` / ``group_entry_iteration_`` (the same
    for groups; without ``feature_groups`` group ``f`` is feature ``f``), ``base_score_``,
    ``tree_*_`` arrays of shape (T, 2^(D+1)-1),
    ``train_loss_`` (T,, on the unmasked rows), ``classes_`` (logistic),
    ``tree_default_left_`` (uint8, T x nodes: where a missing value goes),
    ``group_gain_`` (training split gain per group), ``feature_penalty_`` (mu as used),
    ``unmasked_tree_*_`` and ``unmasked_base_score_`` (the unmasked ensemble; zero trees
    without it), ``unmasked_sets_`` (uint8 (J + 1,): which prefixes it answers),
    ``n_trees_per_iteration_`` (K trees a round for softmax, else 1; ``base_score_`` is then
    (K,) and ``decision_function`` (n, K), or ``H_1 - H_0`` for two classes).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(200, 3))
    >>> y = (X[:, 0] + 0.1 * X[:, 2] > 0).astype(int)
    >>> model = GBFS(feature_penalty=2.0, n_estimators=20, max_depth=2).fit(X, y)
    >>> model.selected_features_.tolist()
    [0]
    >>> model.predict(X[:3], computed_groups={0}).tolist(), y[:3].tolist()
    ([1, 1, 1], [1, 1, 1])
    >>> model.predict(X[:3], computed_groups=set()).tolist()  # feature 0 missing everywhere
    [0, 0, 0]
    >>> grouped = GBFS(n_estimators=20, max_depth=2,
    ...                feature_groups=[[0, 1], [2]], group_costs=[3.0, 1.0]).fit(X, y)
    >>> grouped.next_group(set())
    0
    """

    kind = "gbfs"
    format_version = 4   # 4: softmax (K classes), written only for it; else 3 or 2
    allow_nan = True
    _renamed = {"mu": "feature_penalty"}

    def __init__(self, *, loss: str = "logistic", n_estimators: int = 2000,
                 learning_rate: float = 0.1, max_depth: int = 4,
                 feature_penalty: float | str = "auto",
                 feature_costs: np.ndarray | None = None,
                 feature_groups: list[list[int]] | None = None,
                 group_costs: np.ndarray | None = None, max_bins: int = 255,
                 min_samples_leaf: int = 5, min_split_hessian: float = 2e-3,
                 subsample: float = 1.0,
                 leaf_values: str = "newton", reg_lambda: float = 1.0,
                 split_gain: str = "gradient", min_child_hessian: float = 1e-3,
                 random_state: int | None = None, masked_copies: int = 4,
                 mask_rate: float | None = 0.5, uncomputed: str = "missing",
                 early_stopping_rounds: int | None = 20, validation_fraction: float = 0.1,
                 unmasked_trees: bool = True, mu: float | None = None) -> None:
        self.loss = loss
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.feature_penalty = deprecated_alias("GBFS", "mu", "feature_penalty",
                                                DEPRECATED if mu is None else mu,
                                                feature_penalty, "auto")
        self.feature_costs = feature_costs
        self.feature_groups = feature_groups
        self.group_costs = group_costs
        self.max_bins = max_bins
        self.min_samples_leaf = min_samples_leaf
        self.min_split_hessian = min_split_hessian
        self.subsample = subsample
        self.leaf_values = leaf_values
        self.reg_lambda = reg_lambda
        self.split_gain = split_gain
        self.min_child_hessian = min_child_hessian
        self.random_state = random_state
        self.masked_copies = masked_copies
        self.mask_rate = mask_rate
        self.uncomputed = uncomputed
        self.early_stopping_rounds = early_stopping_rounds
        self.validation_fraction = validation_fraction
        self.unmasked_trees = unmasked_trees

    # ------------------------------------------------------------------ fitting
    def check_params(self, n_features: int) -> None:
        """ValueError / TypeError naming the first parameter :meth:`fit` would refuse for
        ``n_features`` features (groups and costs included)."""
        self._check_params(n_features)

    def _check_params(self, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Validate every parameter; returns :meth:`_check_groups`."""
        if self.loss not in losses.LOSSES:
            raise ValueError(f"loss must be one of {losses.LOSSES}, got {self.loss!r}")
        for name in ("n_estimators", "max_depth", "max_bins", "min_samples_leaf",
                     "masked_copies"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise TypeError(f"{name} must be an integer, got {value!r}")
        rounds = self.early_stopping_rounds
        if rounds is not None and (isinstance(rounds, bool) or
                                   not isinstance(rounds, numbers.Integral) or rounds < 1):
            raise ValueError(f"early_stopping_rounds must be None or an integer >= 1, got "
                             f"{rounds!r}")
        fraction = self.validation_fraction
        if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real) or \
                not 0 <= fraction < 1:
            raise ValueError(f"validation_fraction must be a number in [0, 1), got "
                             f"{fraction!r}")
        if not isinstance(self.unmasked_trees, bool | np.bool_):
            raise TypeError(f"unmasked_trees must be True or False, got "
                            f"{self.unmasked_trees!r}")
        if not 0 <= self.masked_copies <= 64:
            raise ValueError(f"masked_copies must be in [0, 64], got {self.masked_copies}")
        if self.uncomputed not in _UNCOMPUTED:
            raise ValueError(f"uncomputed must be one of {_UNCOMPUTED}, got "
                             f"{self.uncomputed!r}")
        if self.mask_rate is not None and (
                isinstance(self.mask_rate, bool) or not isinstance(self.mask_rate, numbers.Real)
                or not 0 <= self.mask_rate <= 1):
            raise ValueError(f"mask_rate must be None or a number in [0, 1], got "
                             f"{self.mask_rate!r}")
        if isinstance(self.feature_penalty, str) and self.feature_penalty != "auto":
            raise ValueError(f"feature_penalty must be 'auto' or a number >= 0, got "
                             f"{self.feature_penalty!r}")
        for name in ("learning_rate", "feature_penalty", "min_split_hessian", "subsample",
                     "reg_lambda", "min_child_hessian"):
            if name == "feature_penalty" and self.feature_penalty == "auto":
                continue
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(f"{name} must be a number, got {value!r}")
        if self.n_estimators < 0 or not 0 <= self.max_depth <= 16:
            raise ValueError("need n_estimators >= 0 and 0 <= max_depth <= 16")
        if not 2 <= self.max_bins <= 255:
            raise ValueError(f"max_bins must be in [2, 255], got {self.max_bins}")
        if not self.learning_rate > 0 or not self.min_samples_leaf >= 1 or \
                not (self.feature_penalty == "auto" or self.feature_penalty >= 0):
            raise ValueError("need learning_rate > 0, feature_penalty >= 0 and "
                             "min_samples_leaf >= 1")
        if not self.min_split_hessian >= 0:
            raise ValueError("min_split_hessian must be >= 0")
        if self.leaf_values not in _LEAF_VALUES:
            raise ValueError(f"leaf_values must be one of {_LEAF_VALUES}")
        if self.split_gain not in _SPLIT_GAINS:
            raise ValueError(f"split_gain must be one of {_SPLIT_GAINS}")
        if self.split_gain == "newton" and self.leaf_values != "newton":
            raise ValueError("split_gain='newton' needs leaf_values='newton'")
        if not self.reg_lambda >= 0 or not self.min_child_hessian >= 0:
            raise ValueError("reg_lambda and min_child_hessian must be >= 0")
        if not 0 < self.subsample <= 1:
            raise ValueError(f"subsample must be in (0, 1], got {self.subsample}")
        return self._check_groups(d)

    def _check_groups(self, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Validated groups as (indptr, members, group_of, costs): CSR int64, the group of each
        feature (int64, d) and ``c_g`` (float64). No groups: singletons, costs ``c_f``. O(d)."""
        if self.feature_groups is None:
            if self.group_costs is not None:
                raise ValueError("group_costs needs feature_groups")
            costs = np.ones(d) if self.feature_costs is None else self.feature_costs
            costs = np.asarray(costs, dtype=np.float64)
            if costs.shape != (d,) or not np.all(np.isfinite(costs)) or np.any(costs < 0):
                raise ValueError(f"feature_costs must be {d} finite non-negative numbers")
            single = np.arange(d, dtype=np.int64)
            return np.arange(d + 1, dtype=np.int64), single, single, costs
        if self.feature_costs is not None:
            raise ValueError("give feature_costs or feature_groups (with group_costs), not both")
        groups = [np.asarray(group) for group in self.feature_groups]
        if any(g.ndim != 1 or (g.size and g.dtype.kind not in "iu") for g in groups):
            raise ValueError("feature_groups must be lists of integer feature indices")
        indptr, members = _group_csr(groups)
        if np.any(members < 0) or np.any(members >= d):
            raise ValueError(f"feature_groups has indices outside 0..{d - 1}")
        count = np.bincount(members, minlength=d)
        if np.any(count > 1):
            raise ValueError(f"features {np.flatnonzero(count > 1)} are in more than one group")
        if np.any(count == 0):
            raise ValueError(f"features {np.flatnonzero(count == 0)} are in no feature group")
        costs = np.ones(len(groups)) if self.group_costs is None else self.group_costs
        costs = np.asarray(costs, dtype=np.float64)
        if costs.shape != (len(groups),) or not np.all(np.isfinite(costs)) or np.any(costs < 0):
            raise ValueError(f"group_costs must be {len(groups)} finite non-negative numbers")
        return indptr, members, _group_of(indptr, members), costs

    def _encode_labels(self, y: Any, n: int) -> np.ndarray:
        y = column_or_1d(y, n)
        if self.loss == "squared":
            try:
                y = y.astype(np.float64)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"the squared loss needs numeric targets: {exc}") from exc
            if not np.all(np.isfinite(y)):
                raise ValueError("y contains NaN or infinite values")
            self.n_trees_per_iteration_ = 1
            return y
        self.classes_ = label_classes(y, f"the {self.loss} loss")
        multi = self.loss == "softmax" or self.classes_.size > 2
        self.n_trees_per_iteration_ = int(self.classes_.size) if multi else 1
        return self._class_target(y)

    def _class_target(self, y: np.ndarray) -> np.ndarray:
        """Labels in ``classes_`` as the loss reads them: 0/1 (binary), class index."""
        if self.n_trees_per_iteration_ == 1:
            return (y == self.classes_[1]).astype(np.float64)
        return np.searchsorted(self.classes_, y).astype(np.float64)

    def _fit_loss(self) -> str:
        """The loss the trees were boosted on: ``loss``, or "softmax" for K > 2 classes."""
        return "softmax" if self.n_trees_per_iteration_ > 1 else self.loss

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True   # NaN is a missing value
        tags = sklearn_tags_as(tags, "regressor" if self.loss == "squared" else "classifier")
        if tags.classifier_tags is not None:
            tags.classifier_tags.multi_class = True   # softmax for more than two classes
        return tags

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Mean accuracy (logistic loss) or R^2 (squared loss) of :meth:`predict`."""
        if self.loss == "squared":
            return RegressorMixin.score(self, X, y, sample_weight)
        return super().score(X, y, sample_weight)

    def fit(self, X: Any, y: Any, *, X_val: Any = None, y_val: Any = None,
            progress: Callable[[float], None] | None = None) -> GBFS:
        """Boost up to ``n_estimators`` penalized trees on ``X`` (n, d: dense, scipy sparse or
        ``CSRBatch``; NaN is a missing value) and ``y``, with ``masked_copies`` masked copies
        of the rows (module docstring). Early stopping (``early_stopping_rounds``) watches
        the loss on ``X_val, y_val`` (or a held-out ``validation_fraction``) and their
        masked copies, and keeps the trees up to the best. With ``unmasked_trees`` (and
        masked copies) a second ensemble is boosted on the rows alone, as
        ``masked_copies=0`` would, and answers the sets it did better on (module
        docstring). ``progress(fraction)``, if given, is called after each tree."""
        X = as_dense(X, allow_nan=True, min_samples=1)
        n, d = X.shape
        indptr, members, group_of, costs = self._check_params(d)
        target = self._encode_labels(y, n)
        X, target, held = self._held_out(X, target, X_val, y_val)
        self.n_features_in_ = d
        self.bin_edges_, self.bin_offsets_ = binning.fit_bin_edges(X, self.max_bins)
        n_groups = indptr.shape[0] - 1
        plain = binning.apply_bins(X, self.bin_edges_, self.bin_offsets_)
        held_plain = None if held is None else binning.apply_bins(held[0], self.bin_edges_,
                                                                    self.bin_offsets_)
        graph = (group_of, indptr, members, costs)
        codes, rows_target = self._masked_rows(plain, target, group_of, n_groups, 0)
        stop_rows = None if held is None else self._masked_rows(held_plain, held[1], group_of,
                                                               n_groups, 1)
        twin = self._has_unmasked()
        share = (1.0 + self.masked_copies) / (2.0 + self.masked_copies) if twin else 1.0
        main = self._boost(codes, rows_target, target.shape[0], stop_rows, graph,
                           _scaled(progress, 0.0, share))
        (self.base_score_, self.feature_penalty_, self.tree_feature_, self.tree_threshold_,
         self.tree_value_, self.tree_default_left_, self.train_loss_, self.validation_loss_,
         split_gains) = main
        inner = self.tree_feature_ >= 0
        self.group_gain_ = np.bincount(  # float64 even with no split (bincount: int64)
            group_of[self.tree_feature_[inner]], weights=split_gains[inner],
            minlength=n_groups).astype(np.float64)
        self.selected_features_, self.feature_entry_iteration_ = _first_uses(
            self.tree_feature_, np.arange(d))
        self.selected_groups_, self.group_entry_iteration_ = _first_uses(
            self.tree_feature_, group_of)
        self.tree_split_value_ = self._split_values(self.tree_feature_, self.tree_threshold_)
        self._set_unmasked(None)
        if twin:
            twin_fit = self._boost(plain, target, target.shape[0],
                                   None if held is None else (held_plain, held[1]), graph,
                                   _scaled(progress, share, 1.0))
            self._set_unmasked(twin_fit[0], *twin_fit[2:6])
            self.unmasked_sets_ = self._choose_unmasked(held, group_of)
        return self

    def _has_unmasked(self) -> bool:
        """Whether a fit boosts the unmasked ensemble too (only beside masked copies and
        with every tree answering)."""
        return bool(self.unmasked_trees) and self.masked_copies > 0 and \
            self.uncomputed == "missing"

    def _boost(self, codes: np.ndarray, target: np.ndarray, n: int,
               stop_rows: tuple[np.ndarray, np.ndarray] | None, graph: tuple,
               progress: Callable[[float], None] | None) -> tuple:
        """Boost up to ``n_estimators`` rounds on binned ``codes`` / ``target`` (the first
        ``n`` rows unmasked: ``train_loss`` is theirs), early-stopped on the binned
        ``stop_rows``: one tree a round, or with K classes (softmax) one per class, tree
        ``t K + k`` for class ``k`` of round ``t``. Returns (base score, mu, feature,
        threshold, value, default_left, train loss, validation loss, split gains) of the
        trees kept. O(T K (n d D + 2^D d B))."""
        group_of, indptr, members, costs = graph
        d = codes.shape[1]
        n_rows = codes.shape[0]
        n_bins = binning.n_bins_per_feature(self.bin_offsets_)
        loss, K = self._fit_loss(), self.n_trees_per_iteration_
        base = losses.base_score(loss, target, K)
        T, depth, n_nodes = self.n_estimators, self.max_depth, 2 ** (self.max_depth + 1) - 1
        tree_feature = np.full((T * K, n_nodes), -1, dtype=np.int32)
        tree_threshold = np.zeros((T * K, n_nodes), dtype=np.int32)
        tree_value = np.zeros((T * K, n_nodes), dtype=np.float64)
        tree_default_left = np.zeros((T * K, n_nodes), dtype=np.uint8)
        train_loss = np.zeros(T, dtype=np.float64)
        split_gains = np.zeros((T * K, n_nodes), dtype=np.float64)
        stopper = None if stop_rows is None else _EarlyStop(self, loss, base, *stop_rows)
        slots, width = max(1, 2 ** (depth - 1)), int(n_bins.max(initial=1)) + 1
        hists = [np.zeros((slots, d, width), dtype=dt) for dt in (np.float64, np.int32) * 2]
        m = n_rows if self.subsample >= 1 else max(1, int(np.ceil(self.subsample * n_rows)))
        tmp = np.empty(m, dtype=np.int32)
        split_newton = self.split_gain == "newton"
        hess_hists = [np.zeros((slots, d, width) if split_newton else (1, 1, 1))
                      for _ in range(2)]
        rng = np.random.default_rng(0 if self.random_state is None else self.random_state)
        scores = _start_scores(base, n_rows)
        mu = self._resolved_penalty(target, scores, costs)
        penalty = mu * costs[group_of]
        any_split = False
        newton, ones = self.leaf_values == "newton", np.ones(n_rows, dtype=np.float64)
        for t in range(T):
            grad, hess = self._round_gradients(loss, target, scores, newton, ones)
            if m == n_rows:
                rows = np.arange(n_rows, dtype=np.int32)
            else:
                rows = np.sort(rng.choice(n_rows, size=m, replace=False)).astype(np.int32)
            trees = []
            for k in range(K):
                tree = _tree._grow_tree(
                    codes, grad[k], hess[k], rows if K == 1 else rows.copy(), n_bins,
                    penalty, depth, self.min_samples_leaf, float(self.min_split_hessian),
                    not any_split, *hists, tmp, float(self.reg_lambda), split_newton,
                    float(self.min_child_hessian), *hess_hists, group_of, indptr, members)
                i = t * K + k
                feature, threshold, value, default_left, split_gains[i] = tree
                if K > 1:
                    value *= (K - 1) / K
                any_split = any_split or bool(feature[0] >= 0)
                tree_feature[i], tree_threshold[i], tree_value[i] = feature, threshold, value
                tree_default_left[i] = default_left
                _tree._add_tree_binned(codes, feature, threshold, default_left, value,
                                       float(self.learning_rate),
                                       scores if K == 1 else scores[k])
                trees.append((feature, threshold, default_left, value))
            train_loss[t] = losses.mean_loss(loss, target[:n], _by_row(scores[..., :n]))
            if progress is not None:
                progress((t + 1) / T)
            if stopper is not None and stopper.step(t, trees):
                break
        kept = T if stopper is None else stopper.best_trees
        validation_loss = np.zeros(0) if stopper is None else stopper.losses[:kept]
        return (base, mu, tree_feature[:kept * K].copy(), tree_threshold[:kept * K].copy(),
                tree_value[:kept * K].copy(), tree_default_left[:kept * K].copy(),
                train_loss[:kept].copy(), validation_loss, split_gains[:kept * K])

    @staticmethod
    def _round_gradients(loss: str, target: np.ndarray, scores: np.ndarray, newton: bool,
                         ones: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Negative gradients and leaf weights (``l''``, or ones for mean leaves) of one
        round, one contiguous (n,) array per tree: K of each for scores (K, n). O(n K)."""
        if scores.ndim == 1:
            return [losses.negative_gradient(loss, target, scores)], \
                [losses.hessian(loss, scores) if newton else ones]
        K = scores.shape[0]
        grad = np.ascontiguousarray(losses.negative_gradient(loss, target, scores.T).T)
        hess = list(np.ascontiguousarray(losses.hessian(loss, scores.T).T)) if newton else \
            [ones] * K
        return list(grad), hess

    def _set_unmasked(self, base: float | None, feature: np.ndarray | None = None,
                      threshold: np.ndarray | None = None, value: np.ndarray | None = None,
                      default_left: np.ndarray | None = None) -> None:
        """Store the unmasked ensemble (None: none, zero trees and no set it answers)."""
        if base is None:
            if not 0 <= int(self.max_depth) <= 16:  # before 2^depth: a loaded state's value
                raise ValueError("need 0 <= max_depth <= 16")
            n_nodes = 2 ** (int(self.max_depth) + 1) - 1
            feature = np.full((0, n_nodes), -1, dtype=np.int32)
            threshold = np.zeros((0, n_nodes), dtype=np.int32)
            value = np.zeros((0, n_nodes), dtype=np.float64)
            default_left = np.zeros((0, n_nodes), dtype=np.uint8)
            base = 0.0 if self.n_trees_per_iteration_ == 1 else \
                np.zeros(self.n_trees_per_iteration_)
        self.unmasked_base_score_ = _base(base, self.n_trees_per_iteration_)
        self.unmasked_tree_feature_, self.unmasked_tree_threshold_ = feature, threshold
        self.unmasked_tree_value_, self.unmasked_tree_default_left_ = value, default_left
        self.unmasked_tree_split_value_ = self._split_values(feature, threshold)
        self.unmasked_sets_ = np.zeros(self._group_costs().size + 1, dtype=np.uint8)
        self._unmasked_groups = self._split_groups(feature)

    def _split_groups(self, feature: np.ndarray) -> frozenset[int]:
        """The groups some tree of ``feature`` splits on."""
        return frozenset(int(g) for g in np.unique(self._group_of()[feature[feature >= 0]]))

    def _choose_unmasked(self, held: tuple[np.ndarray, np.ndarray] | None,
                         group_of: np.ndarray) -> np.ndarray:
        """``unmasked_sets_[k]`` = 1 when the unmasked ensemble answers the first ``k``
        groups of the cost order (cheapest first, ties by id): its loss on the held-out rows
        (their groups outside the prefix missing) is below the masked ensemble's; without
        held-out rows, when the prefix holds every group it splits on (its exact answer).
        O((J + 1) T n_val D)."""
        order = self._cost_order()
        chosen = np.zeros(order.size + 1, dtype=np.uint8)
        for k in range(order.size + 1):
            S = order[:k]
            if held is None:
                chosen[k] = self._unmasked_groups <= set(S.tolist())
                continue
            X = held[0].copy()
            X[:, ~np.isin(group_of, S)] = np.nan
            loss = self._fit_loss()
            masked = losses.mean_loss(loss, held[1], self._ensemble_scores(X, False))
            unmasked = losses.mean_loss(loss, held[1], self._ensemble_scores(X, True))
            chosen[k] = unmasked < masked
        return chosen

    def _cost_order(self) -> np.ndarray:
        """Group ids, cheapest first (ties: lower id first), int64."""
        return np.argsort(self._group_costs(), kind="stable").astype(np.int64)

    def answers_unmasked(self, computed_groups: Iterable[int] | None) -> bool:
        """Whether the unmasked ensemble answers ``computed_groups`` (None: all): a prefix
        of the cost order by its held-out choice (``unmasked_sets_``), any other set that
        holds every group the unmasked trees split on (then their answer is exact) by the
        choice for all groups. O(J)."""
        if self.unmasked_tree_feature_.shape[0] == 0:
            return False
        J = self.unmasked_sets_.size - 1
        if computed_groups is None:
            return bool(self.unmasked_sets_[J])
        S = {int(g) for g in computed_groups}
        order = self._cost_order()
        k = len(S)
        if k <= J and S == set(order[:k].tolist()):
            return bool(self.unmasked_sets_[k])
        return bool(self.unmasked_sets_[J]) and self._unmasked_groups <= S

    def groups_split_on(self, computed_groups: Iterable[int] | None) -> list[int]:
        """Sorted groups of ``computed_groups`` (None: all) that a tree answering them
        splits on (every group for the prefix rule's trees: see ``n_trees_for_groups``)."""
        J = self._group_costs().size
        S = set(range(J)) if computed_groups is None else {int(g) for g in computed_groups}
        if self.answers_unmasked(computed_groups):
            return sorted(S & self._unmasked_groups)
        return sorted(S & {int(g) for g in self.selected_groups_})

    def _held_out(self, X: np.ndarray, target: np.ndarray, X_val: Any, y_val: Any
                  ) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
        """(training rows, their targets, the early-stopping rows or None): ``X_val, y_val``
        when given, else (with ``early_stopping_rounds``) a seeded ``validation_fraction``
        of the rows, at least one and leaving at least two for training."""
        if (X_val is None) != (y_val is None):
            raise ValueError("pass both X_val and y_val, or neither")
        if self.early_stopping_rounds is None:
            return X, target, None
        if X_val is not None:
            X_val = as_dense(X_val, allow_nan=True)
            if X_val.shape[1] != X.shape[1]:
                raise ValueError(f"X_val has {X_val.shape[1]} features, X {X.shape[1]}")
            return X, target, (X_val, self._encode_more_labels(y_val, X_val.shape[0]))
        n = X.shape[0]
        k = int(np.ceil(float(self.validation_fraction) * n))
        if k < 1 or n - k < 2:
            return X, target, None
        rng = np.random.default_rng([0 if self.random_state is None else
                                     int(self.random_state), 0x76616C])
        order = rng.permutation(n)
        held, kept = np.sort(order[:k]), np.sort(order[k:])
        return X[kept], target[kept], (X[held], target[held])

    def _encode_more_labels(self, y: Any, n: int) -> np.ndarray:
        """Targets of rows beyond the training ones, in the classes ``fit`` found."""
        y = np.asarray(y)
        if y.shape != (n,):
            raise ValueError(f"y_val must have shape ({n},), got {y.shape}")
        if self.loss == "squared":
            y = y.astype(np.float64)
            if not np.all(np.isfinite(y)):
                raise ValueError("y_val contains NaN or infinite values")
            return y
        if not np.all(np.isin(y, self.classes_)):
            raise ValueError(f"y_val holds labels outside the training classes {self.classes_}")
        return self._class_target(y)

    def _masked_rows(self, codes: np.ndarray, target: np.ndarray, group_of: np.ndarray,
                     n_groups: int, stream: int) -> tuple[np.ndarray, np.ndarray]:
        """The binned rows followed by ``masked_copies`` copies in which each group is
        dropped (coded ``MISSING``) with probability ``p``: ``p`` uniform in [0, 1) per copy
        and row, or ``mask_rate``. Seeded by ``random_state`` (0 when None) and ``stream``
        (0: training rows, 1: early-stopping rows). O(K n d)."""
        copies = int(self.masked_copies)
        if copies == 0:
            return codes, target
        n = codes.shape[0]
        rng = np.random.default_rng([0 if self.random_state is None else
                                     int(self.random_state), 0x6D61736B + stream])
        rate = rng.random((copies * n, 1)) if self.mask_rate is None else \
            float(self.mask_rate)
        dropped = rng.random((copies * n, n_groups)) < rate
        masked = np.tile(codes, (copies, 1))
        masked[dropped[:, group_of]] = binning.MISSING
        return np.concatenate([codes, masked]), np.tile(target, copies + 1)

    def _resolved_penalty(self, target: np.ndarray, scores: np.ndarray,
                          costs: np.ndarray) -> float:
        """mu: ``feature_penalty``, or for "auto" ``AUTO_PENALTY sum_i g_i^2 / mean(c)``
        with the initial negative gradients ``g`` (0 when every cost is 0); with K classes
        ``sum_i g_i^2`` is the mean over the classes' trees ``1/K sum_{i,k} g_ik^2``."""
        if self.feature_penalty != "auto":
            return float(self.feature_penalty)
        mean_cost = float(np.mean(costs)) if costs.size else 0.0
        if mean_cost <= 0:
            return 0.0
        if scores.ndim == 2:
            grad = losses.negative_gradient("softmax", target, scores.T)
            return AUTO_PENALTY * float(np.sum(grad * grad)) / scores.shape[0] / mean_cost
        grad = losses.negative_gradient(self.loss, target, scores)
        return AUTO_PENALTY * float(grad @ grad) / mean_cost

    def _group_of(self) -> np.ndarray:
        """Group of each fitted feature (int64, d); feature ``f`` is group ``f`` without groups."""
        if self.feature_groups is None:
            return np.arange(self.n_features_in_, dtype=np.int64)
        return _group_of(*_group_csr(list(self.feature_groups)))

    def _split_values(self, feature: np.ndarray, threshold: np.ndarray) -> np.ndarray:
        """Raw thresholds ``e_b`` of every split (``x <= e_b`` goes left), float64 (T, nodes);
        a split on missingness (``b = B_f - 1``: every present value left) gets the largest
        float, which every finite value is below."""
        split = np.zeros(feature.shape, dtype=np.float64)
        inner = feature >= 0
        features, bins = feature[inner], threshold[inner]
        start, stop = self.bin_offsets_[features], self.bin_offsets_[features + 1]
        index = start + bins
        values = np.full(index.shape, np.finfo(np.float64).max)
        below = index < stop
        values[below] = self.bin_edges_[index[below]]
        split[inner] = values
        return split

    # --------------------------------------------------------------- prediction
    def n_trees_for(self, computed: Iterable[int] | None) -> int:
        """Longest prefix of trees using only features in ``computed`` (all trees if None).

        The first tree using a feature is where it entered, so the prefix ends at the
        earliest entry of a selected feature outside ``computed``. O(#selected).
        """
        n_trees = self.tree_feature_.shape[0]
        if computed is None:
            return n_trees
        allowed = {int(f) for f in computed}
        missing = [int(t) for f, t in zip(self.selected_features_, self.feature_entry_iteration_,
                                          strict=True) if int(f) not in allowed]
        return min(missing, default=n_trees)

    def n_trees_for_groups(self, computed_groups: Iterable[int] | None) -> int:
        """Longest prefix of trees using only features of the groups ``computed_groups`` (all
        trees if None): ``n_trees_for`` of their features. O(#selected groups)."""
        n_trees = self.tree_feature_.shape[0]
        if computed_groups is None:
            return n_trees
        allowed = {int(g) for g in computed_groups}
        missing = [int(t) for g, t in zip(self.selected_groups_, self.group_entry_iteration_,
                                          strict=True) if int(g) not in allowed]
        return min(missing, default=n_trees)

    def trees_used(self, computed_groups: Iterable[int] | None) -> int:
        """Trees that answer for ``computed_groups``: all of the answering ensemble's
        (``uncomputed="missing"`` or None; the unmasked one's where it answers), else
        :meth:`n_trees_for_groups`."""
        if self.answers_unmasked(computed_groups):
            return int(self.unmasked_tree_feature_.shape[0])
        if computed_groups is None or self.uncomputed == "missing":
            return int(self.tree_feature_.shape[0])
        return self.n_trees_for_groups(computed_groups)

    def next_group(self, computed_groups: Iterable[int] | None = (), *,
                   max_cost: float | None = None) -> int | None:
        """Group to compute next given ``computed_groups`` (None: nothing is missing).

        ``uncomputed="missing"``: the group outside them with the largest training split
        gain per unit cost (``group_gain_ / c_g``; a zero-cost group with gain comes first)
        among those with gain > 0 whose cost fits ``max_cost - cost(computed)``; None if
        none. O(J). ``"prefix"``: the group of the first feature (heap order) of tree
        ``t = n_trees_for_groups(computed_groups)`` outside them, None if all trees are
        usable (the paper's rule; computing it is necessary for tree ``t``)."""
        if computed_groups is None:
            return None
        allowed = {int(g) for g in computed_groups}
        costs = self._group_costs()
        room = None if max_cost is None else \
            float(max_cost) - float(sum(costs[g] for g in allowed if 0 <= g < costs.size))
        if self.uncomputed == "missing":
            best, best_key = None, None
            for g in range(costs.size):
                gain = float(self.group_gain_[g])
                if g in allowed or gain <= 0 or (
                        room is not None and costs[g] > room + cost_slack(room)):
                    continue
                key = (1, gain) if costs[g] <= 0 else (0, gain / costs[g])
                if best_key is None or key > best_key:
                    best, best_key = g, key
            return best
        t = self.n_trees_for_groups(allowed)
        if t == self.tree_feature_.shape[0]:
            return None
        group_of = self._group_of()
        g = next(int(group_of[f]) for f in self.tree_feature_[t]
                 if f >= 0 and int(group_of[f]) not in allowed)
        if room is not None and costs[g] > room + cost_slack(room):
            return None
        return g

    def _group_costs(self) -> np.ndarray:
        """``c_g`` of every group (feature costs without groups), float64."""
        return self._check_groups(self.n_features_in_)[3]

    def n_features_used(self, n_trees: int | None = None) -> int:
        """Number of distinct features used by the first ``n_trees`` trees."""
        n_trees = self.tree_feature_.shape[0] if n_trees is None else n_trees
        return int(np.sum(self.feature_entry_iteration_ < n_trees))

    def selected_features(self) -> np.ndarray:
        """Sorted indices (int64) of the features some tree splits on."""
        return np.sort(np.asarray(self.selected_features_, dtype=np.int64))

    def _check_input(self, X: Any) -> np.ndarray:
        if not hasattr(self, "tree_feature_"):
            raise not_fitted(self)
        X = as_dense(X, allow_nan=True)
        check_n_features(self, X.shape[1])
        return X

    def _answer(self, X: Any, computed_groups: Iterable[int] | None,
                computed: Any) -> np.ndarray:
        """Scores for rows whose callers computed ``computed_groups`` (or, deprecated, the
        features ``computed``): every tree with the other features missing, or the prefix
        of trees (``uncomputed``)."""
        X = self._check_input(X)
        if computed is DEPRECATED:
            if computed_groups is None:
                return self._ensemble_scores(X, self.answers_unmasked(None))
            groups = [int(g) for g in computed_groups]
            keep = np.isin(self._group_of(), groups)
            n_trees = self.n_trees_for_groups(groups)
        else:
            deprecated_alias("GBFS", "computed", "computed_groups", computed, computed_groups,
                             note=" (ids of feature_groups; without them, feature indices)",
                             stacklevel=4)
            if computed is None:
                return self._scores(X, self.tree_feature_.shape[0])
            features = [int(f) for f in computed]
            keep = np.isin(np.arange(self.n_features_in_), features)
            n_trees = self.n_trees_for(features)
            group_of = self._group_of()  # the groups whose features were all computed
            groups = np.setdiff1d(np.arange(self._group_costs().size),
                                  group_of[~keep]).tolist()
        if self.uncomputed == "prefix":
            return self._scores(X, n_trees)
        missing = ~keep
        if missing.any():
            X = X.copy()
            X[:, missing] = np.nan
        return self._ensemble_scores(X, self.answers_unmasked(groups))

    def decision_function(self, X: Any, computed: Iterable[int] | None = DEPRECATED, *,
                          computed_groups: Iterable[int] | None = None) -> np.ndarray:
        """Scores ``H(x)`` (n,) for a caller that computed ``computed_groups`` (None: all):
        every tree, the other groups' features missing (``uncomputed="missing"``), or the
        trees before the first that splits on one of them (``"prefix"``). NaN in ``X`` is
        missing too. K > 2 classes: the class scores (n, K); softmax with two classes:
        ``H_1 - H_0`` (n,), the log-odds of ``classes_[1]`` as for the logistic loss.
        ``computed`` (feature indices) is the deprecated spelling."""
        return self._decision(self._answer(X, computed_groups, computed))

    def _decision(self, raw: np.ndarray) -> np.ndarray:
        """The public decision function of raw scores ((n,), or (n, K) for K classes)."""
        return raw[:, 1] - raw[:, 0] if raw.ndim == 2 and raw.shape[1] == 2 else raw

    def _scores(self, X: np.ndarray, n_trees: int) -> np.ndarray:
        return self._add_trees(X, self.base_score_, (
            self.tree_feature_, self.tree_split_value_, self.tree_default_left_,
            self.tree_value_), n_trees)

    def _add_trees(self, X: np.ndarray, base: float | np.ndarray, trees: tuple,
                   n_trees: int) -> np.ndarray:
        """``base`` plus the first ``n_trees`` of ``trees`` (feature, split value, default
        left, value): scores (n,), or for K classes (n, K), tree ``t`` adding to class
        ``t mod K``. O(n n_trees D)."""
        rate = float(self.learning_rate)
        if np.ndim(base) == 0:
            out = np.full(X.shape[0], base, dtype=np.float64)
            _tree._add_trees_raw(X, *trees, 0, n_trees, rate, out)
            return out
        K = len(base)
        out = _start_scores(base, X.shape[0])
        for k in range(K):
            mine = [np.ascontiguousarray(array[k:n_trees:K]) for array in trees]
            _tree._add_trees_raw(X, *mine, 0, mine[0].shape[0], rate, out[k])
        return out.T

    def _ensemble_scores(self, X: np.ndarray, unmasked: bool) -> np.ndarray:
        """Scores of every tree of the masked (or the unmasked) ensemble. O(n T D)."""
        if not unmasked:
            return self._scores(X, self.tree_feature_.shape[0])
        return self._add_trees(X, self.unmasked_base_score_, (
            self.unmasked_tree_feature_, self.unmasked_tree_split_value_,
            self.unmasked_tree_default_left_, self.unmasked_tree_value_),
            self.unmasked_tree_feature_.shape[0])

    @available_if(lambda model: model.loss != "squared")
    def predict_proba(self, X: Any, computed: Iterable[int] | None = DEPRECATED, *,
                      computed_groups: Iterable[int] | None = None) -> np.ndarray:
        """``[1 - p, p]`` with ``p = sigmoid(H(x))``, shape (n, 2) (logistic loss), or
        ``softmax(H(x))`` (n, K) (K classes); not for the squared loss."""
        raw = self._answer(X, computed_groups, computed)
        if raw.ndim == 2:
            return softmax(raw, axis=1)
        p = expit(raw)
        return np.column_stack([1.0 - p, p])

    def _link(self, scores: np.ndarray) -> np.ndarray:
        if self.loss == "squared":
            return scores
        if scores.ndim == 2:
            return self.classes_[np.argmax(scores, axis=1)]
        return self.classes_[(scores > 0).astype(np.int64)]

    def predict(self, X: Any, computed: Iterable[int] | None = DEPRECATED, *,
                computed_groups: Iterable[int] | None = None) -> np.ndarray:
        """Class labels (logistic, softmax) or values (squared) for ``computed_groups``
        (see :meth:`decision_function`)."""
        return self._link(self._answer(X, computed_groups, computed))

    def _staged_scores(self, X: Any) -> Iterator[np.ndarray]:
        """Raw scores after each round: one tree, or K trees for K classes. O(n D) a tree."""
        X = self._check_input(X)
        K = self.n_trees_per_iteration_
        out = _start_scores(self.base_score_, X.shape[0])
        for t in range(self.tree_feature_.shape[0]):
            _tree._add_trees_raw(X, self.tree_feature_, self.tree_split_value_,
                                 self.tree_default_left_, self.tree_value_, t, t + 1,
                                 float(self.learning_rate), out if K == 1 else out[t % K])
            if (t + 1) % K == 0:
                yield _by_row(out).copy()

    def staged_decision_function(self, X: Any) -> Iterator[np.ndarray]:
        """Yield ``decision_function(X)`` after each round (one tree, or K trees with K
        classes), bit-identical to it at the last. O(n D) a tree."""
        for raw in self._staged_scores(X):
            yield self._decision(raw)

    def staged_predict(self, X: Any) -> Iterator[np.ndarray]:
        """Yield predictions after each round."""
        for raw in self._staged_scores(X):
            yield self._link(raw)

    # ------------------------------------------------------------ serialization
    def state_dict(self) -> dict[str, Any]:
        """Parameters and fitted arrays in the envelope of ``algorithms.states``: format 3,
        or without ``unmasked_trees`` format 2 (as a model of format 2 was written); a
        softmax model (K classes) format 4, format 3 with K base scores per ensemble."""
        state: dict[str, Any] = {name: getattr(self, name) for name in _PARAMS + _PARAMS_V2}
        twin, multi = bool(self.unmasked_trees), self.n_trees_per_iteration_ > 1
        if twin or multi:
            state["unmasked_trees"] = twin
            state["unmasked_base_score_"] = _base(self.unmasked_base_score_,
                                                  self.n_trees_per_iteration_)
        if self.feature_costs is not None:
            state["feature_costs"] = np.asarray(self.feature_costs, dtype=np.float64)
        if self.feature_groups is not None:
            groups = list(self.feature_groups)
            state["feature_groups_members"] = _group_csr(groups)[1]
            state["feature_groups_sizes"] = np.array([len(g) for g in groups], dtype=np.int64)
        if self.group_costs is not None:
            state["group_costs"] = np.asarray(self.group_costs, dtype=np.float64)
        state["base_score_"] = _base(self.base_score_, self.n_trees_per_iteration_)
        state["n_features_in_"] = int(self.n_features_in_)
        state["feature_penalty_"] = float(self.feature_penalty_)
        for name in _ARRAYS + _ARRAYS_V2 + (_ARRAYS_V3 if twin or multi else ()) + (
                ("classes_",) if self.loss != "squared" else ()):
            state[name] = getattr(self, name)
        if self.loss != "squared" and self.classes_.dtype.kind not in "biuf":
            state["classes_"] = [str(c) for c in self.classes_]   # JSON: labels as strings
        return envelope(self.kind, 4 if multi else 3 if twin else 2, state)

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> GBFS:
        """Rebuild a fitted model from :meth:`state_dict` (bit-exact), or from a state
        written before the envelope (``"algorithm": "GBFS"``, ``mu`` for
        ``feature_penalty``); ValueError when it is incomplete or its contents are not a
        model the prediction kernels can run (``_check_fitted``). States of format 0 and 1
        (before the budgeted answers with every tree) load as the paper's model:
        ``uncomputed="prefix"``, ``masked_copies=0``, and answer exactly as they did.
        Format 4 is read only for softmax models, the others only for one score."""
        version, state = open_envelope(state, cls.kind, (0, 2, 3, cls.format_version))
        if version == 0:
            state = renamed(state, cls._renamed)
        try:
            params = {name: state[name] for name in _PARAMS}
            if version >= 2:
                params.update({name: state[name] for name in _PARAMS_V2})
                params["unmasked_trees"] = bool(state["unmasked_trees"]) if version >= 3 \
                    else False
            else:
                params.update(masked_copies=0, mask_rate=None, uncomputed="prefix",
                              early_stopping_rounds=None, unmasked_trees=False)
            groups = None
            if "feature_groups_sizes" in state:
                members = np.asarray(state["feature_groups_members"], dtype=np.int64)
                ends = np.cumsum(np.asarray(state["feature_groups_sizes"], dtype=np.int64))
                parts = np.split(members, ends[:-1]) if len(ends) else []
                groups = [part.tolist() for part in parts]
            model = cls(**params, feature_costs=state.get("feature_costs"),
                        feature_groups=groups, group_costs=state.get("group_costs"))
            model.n_features_in_ = int(state["n_features_in_"])
            for name in _ARRAYS + (("classes_",) if model.loss != "squared" else ()):
                setattr(model, name, np.asarray(state[name]))
            K = model._n_classes_trees(version)
            model.base_score_ = _base(state["base_score_"], K)
            if version >= 2:
                model.feature_penalty_ = float(state["feature_penalty_"])
                for name in _ARRAYS_V2:
                    setattr(model, name, np.asarray(state[name]))
            else:
                model.feature_penalty_ = float(model.feature_penalty)
                model.tree_default_left_ = np.zeros(model.tree_feature_.shape, dtype=np.uint8)
                model.group_gain_ = np.zeros(len(groups) if groups is not None else
                                             model.n_features_in_, dtype=np.float64)
                model.validation_loss_ = np.zeros(0)
            model._set_unmasked(None)
            if version >= 3:
                model._set_unmasked(_base(state["unmasked_base_score_"], K),
                                    *(np.asarray(state[name]) for name in _ARRAYS_V3[:4]))
                model.unmasked_sets_ = np.asarray(state["unmasked_sets_"])
            model._check_fitted()
            model.selected_groups_, model.group_entry_iteration_ = _first_uses(
                model.tree_feature_, model._group_of())
        except (KeyError, TypeError, OverflowError, IndexError) as exc:
            raise ValueError(f"GBFS state is incomplete or malformed: {exc!r}") from exc
        return model

    def _n_classes_trees(self, version: int) -> int:
        """Set and return ``n_trees_per_iteration_`` of a loaded state (K for a softmax
        model: ``loss="softmax"`` or more than two ``classes_``, else 1); ValueError when
        the state's format is not its kind's (4 for softmax, older for the others)."""
        classes = getattr(self, "classes_", np.zeros(0))
        multi = self.loss == "softmax" or classes.shape[0] > 2
        if multi != (version == 4):
            raise ValueError(f"GBFS state: format_version {version} holds "
                             f"{'no ' if version == 4 else ''}softmax model; softmax "
                             f"(loss='softmax' or more than two classes_) is format 4 only")
        if multi and (classes.ndim != 1 or classes.shape[0] < 2 or
                      np.unique(classes).shape[0] != classes.shape[0]):
            raise ValueError("GBFS state: classes_ must be at least two distinct labels")
        self.n_trees_per_iteration_ = int(classes.shape[0]) if multi else 1
        return self.n_trees_per_iteration_

    def _check_trees(self, prefix: str, shape: tuple[int, int]) -> None:
        """ValueError unless the arrays of one ensemble (``prefix`` "" or "unmasked_") are
        heap-shaped trees of ``shape`` whose splits name features in [0, d), leaves only on
        the last level, with finite values. O(T 2^D)."""
        for name in ("tree_feature_", "tree_threshold_", "tree_split_value_", "tree_value_",
                     "tree_default_left_"):
            array = getattr(self, prefix + name)
            if array.shape != shape:
                raise ValueError(f"GBFS state: {prefix}{name} has shape {array.shape}, "
                                 f"expected {shape}")
        left = getattr(self, prefix + "tree_default_left_")
        if left.dtype != np.uint8 or np.any(left > 1):
            raise ValueError(f"GBFS state: {prefix}tree_default_left_ must be uint8 zeros "
                             f"and ones")
        feature = getattr(self, prefix + "tree_feature_")
        if feature.dtype != np.int32 or getattr(self, prefix + "tree_threshold_").dtype != \
                np.int32:
            raise ValueError(f"GBFS state: {prefix}tree_feature_ and {prefix}tree_threshold_ "
                             f"must be int32")
        d = self.n_features_in_
        if feature.size and (feature.min() < -1 or feature.max() >= d):
            raise ValueError(f"GBFS state: a split names a feature outside [0, {d})")
        inner = 2 ** int(self.max_depth) - 1  # nodes below this have children in the heap
        if np.any(feature[:, inner:] >= 0):
            raise ValueError("GBFS state: a node of the last level splits")
        for name in ("tree_split_value_", "tree_value_"):
            values = np.asarray(getattr(self, prefix + name), dtype=np.float64)
            if not np.all(np.isfinite(values)):
                raise ValueError(f"GBFS state: {prefix}{name} holds NaN or infinite values")

    def _check_fitted(self) -> None:
        """What the prediction kernels assume of a loaded state (ValueError otherwise):
        heap-shaped trees whose splits name features in [0, d) with finite thresholds and
        leaves only on the last level, finite values and base score; with K classes K
        trees a round and K base scores. O(T·2^D + d)."""
        d, K = self.n_features_in_, self.n_trees_per_iteration_
        self._check_params(d)
        if not 1 <= d < 2**31 or not np.all(np.isfinite(self.base_score_)):
            raise ValueError("GBFS state: bad n_features_in_ or base_score_")
        if K > 1 and np.asarray(self.classes_).shape != (K,):
            raise ValueError(f"GBFS state: {K} trees a round need {K} classes_")
        n_nodes = 2 ** (int(self.max_depth) + 1) - 1
        feature = self.tree_feature_
        shape = (feature.shape[0] if feature.ndim == 2 else -1, n_nodes)
        if not 0 <= shape[0] <= int(self.n_estimators) * K or shape[0] % K:
            raise ValueError(f"GBFS state: {shape[0]} trees, n_estimators is "
                             f"{self.n_estimators} ({K} trees a round)")
        rounds = shape[0] // K
        if np.asarray(self.train_loss_).shape != (rounds,) or \
                np.asarray(self.validation_loss_).shape not in ((0,), (rounds,)):
            raise ValueError("GBFS state: train_loss_ / validation_loss_ do not match the trees")
        self._check_trees("", shape)
        twin = self.unmasked_tree_feature_
        self._check_trees("unmasked_", (twin.shape[0] if twin.ndim == 2 else -1, n_nodes))
        if not 0 <= twin.shape[0] <= int(self.n_estimators) * K or twin.shape[0] % K or \
                not np.all(np.isfinite(self.unmasked_base_score_)):
            raise ValueError("GBFS state: bad unmasked trees or unmasked_base_score_")
        n_groups = d if self.feature_groups is None else len(self.feature_groups)
        sets = np.asarray(self.unmasked_sets_)
        if sets.shape != (n_groups + 1,) or sets.dtype != np.uint8 or np.any(sets > 1):
            raise ValueError(f"GBFS state: unmasked_sets_ must be {n_groups + 1} uint8 zeros "
                             f"and ones")
        gains = np.asarray(self.group_gain_)
        if gains.shape != (n_groups,) or gains.dtype != np.float64 or \
                not np.all(np.isfinite(gains)) or np.any(gains < 0):
            raise ValueError(f"GBFS state: group_gain_ must be {n_groups} finite gains >= 0")
        if not np.isfinite(self.feature_penalty_) or self.feature_penalty_ < 0:
            raise ValueError("GBFS state: feature_penalty_ must be finite and >= 0")
        for name in ("train_loss_", "bin_edges_", "validation_loss_"):
            values = np.asarray(getattr(self, name), dtype=np.float64)
            if not np.all(np.isfinite(values)):
                raise ValueError(f"GBFS state: {name} holds NaN or infinite values")
        offsets = np.asarray(self.bin_offsets_)
        if offsets.shape != (d + 1,) or offsets[0] != 0 or np.any(np.diff(offsets) < 0) or \
                offsets[-1] != len(self.bin_edges_):
            raise ValueError("GBFS state: bin_offsets_ do not index bin_edges_")
        for name in ("selected_features_", "feature_entry_iteration_"):
            values = np.asarray(getattr(self, name))
            if values.size and (values.min() < 0 or values.max() >= max(d, shape[0])):
                raise ValueError(f"GBFS state: {name} holds an out-of-range value")
