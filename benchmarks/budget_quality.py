"""Prediction quality for whatever feature groups a client has computed: ours versus peers.

    python benchmarks/budget_quality.py            # 10 data sets, 5 seeds (~10 min of CPU)
    python benchmarks/budget_quality.py --quick    # smoke run: 2 small sets, 2 seeds (~1 min)
    python benchmarks/budget_quality.py --datasets diabetes,phishing --seeds 3 \\
        --methods gbfs,lgbm-masked --out /tmp/bq.json

The question: a client has computed the features of a set ``S`` of feature groups (any
subset, not only the cheapest ones); how good is each method's prediction for ``S``?

Methods (all fitted on the same seeded 60/20/20 train/validation/test split; the
validation split chooses and early-stops, the test split only scores):

* ``anytime``: ``AnytimeLinearModel(method="cs-g-omp")`` fitted with the validation split;
  ``predict(X, computed_groups=S)`` is the ridge refit on exactly ``S``. Classification:
  ``classification_answer="logistic"``, the logistic refit on exactly ``S``; the sign of
  its logit is the label, its sigmoid the probability.
* ``gbfs``: ``GBFS(loss=..., feature_groups=..., group_costs=..., n_estimators=GBFS_TREES)``
  with every other parameter at its default (its early stopping on the validation split
  decides the trees kept; the table reports them against the cap), answering with
  ``computed_groups=S`` (which of its ensembles answers, ``answers_unmasked(S)``, is
  recorded where the model has an unmasked twin). ``gbfs-nomask``: the same with
  ``masked_copies=0`` (present only if the constructor takes it): the same trees trained
  without masking.
* ``auto``: ``algorithms.per_set.PerSetChoice`` with its defaults (a row with a note if it
  cannot be imported; every call goes through the ``_auto_*`` adapters below). When its
  constructor takes ``specialist_sets``, it is given the request mix's hot sets (below), as
  the service's traffic would; the set's answering model (``answered_by(S)`` or
  ``choice(S)``) is recorded per row.
* ``mean-impute``: LightGBM on all features, uncomputed features replaced by their training
  means. ``lgbm-plain``: the same booster (one shared fit), uncomputed features NaN
  (LightGBM's own handling: a feature never missing in training sends NaN where 0 goes).
  ``lgbm-masked``: one LightGBM on the training rows stacked with ``MASKED_COPIES`` copies in
  which every group is set to NaN independently with probability 1/2; uncomputed groups NaN.
* Per-set refits, one model per evaluated set ``S`` on exactly its features (a constant, the
  training mean or class frequency, for S = {}): ``refit-linear``, ridge (regression; alpha
  from ``RIDGE_ALPHAS`` times the training rows) or logistic regression (classification; C
  from ``LOGISTIC_CS``) on standardized features, the value with the best validation figure;
  ``refit-lgbm``, LightGBM; ``refit``, whichever of the two has the better validation figure
  for ``S`` (MSE; log-loss): the bar a practitioner reaches by training for that set.
  LightGBM everywhere: ``LGB_PARAMS``, up to ``LGB_ROUNDS`` rounds with early stopping
  (patience ``LGB_PATIENCE``) on the validation split prepared as the model's training rows
  are (full rows; masked copies for ``lgbm-masked``; the features of ``S`` for refits); the
  best iterations are reported so that a reader sees the cap never binds.

Sets per seed: every prefix of the groups in cost order, cheapest first (the empty set and
all groups included: "prefix"), and ``--nonprefix`` sets drawn uniformly without
replacement among the non-empty subsets that are not prefixes ("non-prefix"; all of them
when there are fewer). Request mix ("mix"): ``HOT_SETS`` of the evaluated non-empty sets,
drawn uniformly per seed ("hot"), receive ``HOT_SHARE`` of the requests in equal shares,
every other evaluated set an equal share of the rest; a method's mix figure is the
request-weighted mean of its per-set test figures (replaying the requests over the test
rows, in expectation), its hot figure the mean over the hot sets.

Figures on the test split: regression, explained variance ``1 - MSE / Var(y_test)``;
classification, error rate of the labels and log-loss of the probabilities clipped to
``[PROBA_CLIP, 1 - PROBA_CLIP]``. Aggregates per data set and method: the mean over seeds of
each seed's mean over its prefix (non-prefix, hot) sets or its mix figure, with the standard
error over seeds. Verdicts (``COMPARISONS``): a challenger *ties or beats* its baseline on a
kind of set when the mean over seeds of the paired per-seed difference of the primary
figure (EV; error rate) is no worse than ``-max(TIE_ABS, one standard error of that
difference)`` (``TIE_ABS`` = 0.005 EV, or 0.5 error points); it *beats* it when the
difference is better than ``+max(...)``. GBFS (and ``auto``'s GBFS half): the trees kept
(each ensemble's) and the share of non-empty sets ``S`` for which some tree answering ``S``
splits on a feature of a group in ``S`` (for the others every tree follows its default
directions: a constant answer).
Fit seconds: the mean per seed of the method's training (refits: all their fits of a seed;
``refit``: both kinds; Platt scaling and prediction not included).

Data sets (groups and costs are assigned here, see ``DATASETS``; costs in arbitrary units):
diabetes, breast-cancer, digits-parity and friedman1 (scikit-learn, bundled or generated),
phishing and trump-approval (bundled with River, no download), and four grouped synthetic
sets of 6,000 rows (``algorithms.datasets.grouped_synthetic``): latent groups with an
interaction, and regime switches with a product, each for regression and classification.
Writes ``--out`` (default ``benchmarks/budget_quality.json``): the configuration, the data
sets with their groups, the fit rows (best iterations, trees kept), the aggregates and the
verdicts (with ``--rows`` also one row per data set, seed, method and set). Needs
scikit-learn and lightgbm (river for phishing and trump-approval).
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import json
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightgbm as lgb
import numpy as np
from scipy.special import expit
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from algorithms.anytime import AnytimeLinearModel  # noqa: E402
from algorithms.datasets.grouped_synthetic import (  # noqa: E402
    make_latent_groups,
    make_regime_groups,
)
from algorithms.gbfs import GBFS  # noqa: E402
from benchmarks._report import machine, table  # noqa: E402

METHODS = ("anytime", "gbfs", "gbfs-nomask", "auto", "mean-impute", "lgbm-plain",
           "lgbm-masked", "refit-linear", "refit-lgbm", "refit")
REFITS = ("refit-linear", "refit-lgbm", "refit")
# (challenger, baseline, kinds of sets): the verdicts
COMPARISONS = (("gbfs", "lgbm-masked", ("prefix", "non-prefix")),
               ("auto", "lgbm-masked", ("prefix", "non-prefix")),
               ("auto", "refit", ("prefix", "non-prefix", "hot", "mix")),
               ("anytime", "refit-linear", ("prefix", "non-prefix")),
               ("gbfs", "gbfs-nomask", ("all",)))
LGB_PARAMS = {"learning_rate": 0.05, "num_leaves": 15, "min_data_in_leaf": 10,
              "num_threads": 1, "verbose": -1, "deterministic": True, "force_col_wise": True}
LGB_ROUNDS, LGB_PATIENCE = 5000, 50
GBFS_TREES = 5000     # gbfs, gbfs-nomask: n_estimators; their early stopping keeps fewer
MASKED_COPIES = 4     # lgbm-masked: the original rows + this many group-masked copies
RIDGE_ALPHAS = np.logspace(-5, 1, 13)   # refit-linear, regression: times the training rows
LOGISTIC_CS = np.logspace(-3, 3, 7)     # refit-linear, classification
HOT_SETS, HOT_SHARE = 5, 0.8   # request mix: HOT_SHARE of the requests on HOT_SETS sets
PROBA_CLIP = 1e-3     # log-loss: probabilities clipped to [PROBA_CLIP, 1 - PROBA_CLIP]
TIE_ABS = 0.005       # verdict tolerance: 0.005 explained variance / 0.5 error points
QUICK_DATASETS = ("diabetes", "breast-cancer")
KINDS = ("prefix", "non-prefix", "all", "hot", "mix")

Groups = list[np.ndarray]
GroupSet = tuple[int, ...]
Output = tuple[np.ndarray, np.ndarray | None]  # (values or 0/1 labels, P(y = 1) or None)
Predictor = Callable[[np.ndarray, GroupSet], Output]


@dataclass
class Task:
    """A data set with its feature groups: ``X`` (n, d), ``y`` (n,; 0/1 when classifying)."""

    X: np.ndarray
    y: np.ndarray
    kind: str                 # "regression" | "classification"
    groups: Groups
    costs: np.ndarray
    group_names: list[str]
    source: str


@dataclass
class Split:
    Xtr: np.ndarray
    ytr: np.ndarray
    Xva: np.ndarray
    yva: np.ndarray
    Xte: np.ndarray
    yte: np.ndarray


@dataclass
class Fitted:
    """A fitted method: its predictor, fit seconds, and what the table reports about it."""

    predict: Predictor
    seconds: float
    info: dict


# ------------------------------------------------------------------------------ data sets
def _task(X, y, kind: str, spec: Sequence[tuple[str, Sequence[int], float]],
          source: str) -> Task:
    """Task from ``spec`` = [(group name, feature indices, cost), ...]."""
    return Task(np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64), kind,
                [np.asarray(f, dtype=np.int64) for _, f, _ in spec],
                np.array([c for _, _, c in spec], dtype=np.float64),
                [name for name, _, _ in spec], source)


def load_diabetes_task(quick: bool) -> Task:
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)   # age sex bmi bp s1..s6
    spec = [("demographics (age, sex)", [0, 1], 1.0), ("body (bmi, bp)", [2, 3], 2.0),
            ("glucose (s6)", [9], 3.0), ("triglycerides (s5)", [8], 6.0),
            ("lipid panel (s1-s4)", [4, 5, 6, 7], 8.0)]
    return _task(X, y, "regression", spec, "sklearn load_diabetes (442 x 10)")


def load_breast_cancer_task(quick: bool) -> Task:
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)   # 10 mean, 10 standard error, 10 worst
    spec = [("mean size (radius, perimeter, area)", [0, 2, 3], 1.0),
            ("mean texture and shape", [1, 4, 5, 6, 7, 8, 9], 3.0),
            ("standard errors", list(range(10, 20)), 4.0),
            ("worst size", [20, 22, 23], 6.0),
            ("worst texture and shape", [21, 24, 25, 26, 27, 28, 29], 10.0)]
    return _task(X, y, "classification", spec, "sklearn load_breast_cancer (569 x 30)")


def load_digits_task(quick: bool) -> Task:
    from sklearn.datasets import load_digits

    X, digit = load_digits(return_X_y=True)
    quadrant = [[r * 8 + c for r in rows for c in cols]
                for rows in (range(4), range(4, 8)) for cols in (range(4), range(4, 8))]
    spec = [(name, q, cost) for name, q, cost in zip(
        ("top-left pixels", "top-right pixels", "bottom-left pixels", "bottom-right pixels"),
        quadrant, (1.0, 2.0, 4.0, 7.0), strict=True)]
    return _task(X, digit % 2, "classification", spec,
                 "sklearn load_digits, odd digit (1797 x 64)")


def _river_arrays(dataset, columns: list[str]) -> tuple[np.ndarray, np.ndarray]:
    rows = list(dataset)
    X = np.array([[float(x[c]) for c in columns] for x, _ in rows])
    return X, np.array([float(y) for _, y in rows])


def load_phishing_task(quick: bool) -> Task:
    from river.datasets import Phishing

    columns = ["long_url", "ip_in_url", "https", "empty_server_form_handler", "popup_window",
               "request_from_other_domain", "anchor_from_other_domain", "is_popular",
               "age_of_domain"]
    X, y = _river_arrays(Phishing(), columns)
    spec = [("URL string (long_url, ip_in_url, https)", [0, 1, 2], 1.0),
            ("domain lookups (is_popular, age_of_domain)", [7, 8], 3.0),
            ("page fetch (forms, popups, foreign requests/anchors)", [3, 4, 5, 6], 5.0)]
    return _task(X, y, "classification", spec, "river Phishing (1250 x 9)")


def load_trump_task(quick: bool) -> Task:
    from river.datasets import TrumpApproval

    columns = ["ordinal_date", "gallup", "ipsos", "morning_consult", "rasmussen", "you_gov"]
    X, y = _river_arrays(TrumpApproval(), columns)
    spec = [("date", [0], 1.0), ("you_gov poll", [5], 2.0), ("ipsos poll", [2], 3.0),
            ("gallup poll", [1], 4.0), ("morning_consult + rasmussen polls", [3, 4], 5.0)]
    return _task(X, y, "regression", spec, "river TrumpApproval (1001 x 6)")


def load_friedman_task(quick: bool) -> Task:
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(n_samples=1000 if quick else 2000, n_features=10, noise=1.0,
                          random_state=0)   # 10 sin(pi x0 x1) + 20 (x2 - .5)^2 + 10 x3 + 5 x4
    spec = [("x3 and noise x5", [3, 5], 1.0), ("x4 and noise x6, x7", [4, 6, 7], 2.0),
            ("x0", [0], 3.0), ("x1 and noise x8", [1, 8], 4.0), ("x2 and noise x9", [2, 9], 6.0)]
    return _task(X, y, "regression", spec,
                 f"sklearn make_friedman1({len(y)}, noise=1, random_state=0)")


def _generated(make: Callable, n: int, kind: str) -> Task:
    data = make(n, kind)
    spec = list(zip(data.names, data.groups, data.costs, strict=True))
    return _task(data.X, data.y, kind, spec,
                 f"algorithms.datasets.grouped_synthetic.{make.__name__}({n}, {kind!r})")


def _synthetic(make: Callable, kind: str) -> Callable[[bool], Task]:
    return lambda quick: _generated(make, 1500 if quick else 6000, kind)


DATASETS: dict[str, Callable[[bool], Task]] = {
    "diabetes": load_diabetes_task,
    "breast-cancer": load_breast_cancer_task,
    "digits-parity": load_digits_task,
    "phishing": load_phishing_task,
    "trump-approval": load_trump_task,
    "friedman1": load_friedman_task,
    "synthetic-regression": _synthetic(make_latent_groups, "regression"),
    "synthetic-binary": _synthetic(make_latent_groups, "classification"),
    "regime-regression": _synthetic(make_regime_groups, "regression"),
    "regime-binary": _synthetic(make_regime_groups, "classification"),
}

def make_split(task: Task, seed: int) -> Split:
    """Seeded 60/20/20 train/validation/test split (stratified when classifying)."""
    strat = task.y if task.kind == "classification" else None
    index = np.arange(len(task.y))
    rest, test = train_test_split(index, test_size=0.2, stratify=strat, random_state=seed)
    train, val = train_test_split(rest, test_size=0.25, random_state=seed,
                                  stratify=None if strat is None else strat[rest])
    X, y = task.X, task.y
    return Split(X[train], y[train], X[val], y[val], X[test], y[test])


# ----------------------------------------------------------------------------------- sets
def cost_order(costs: np.ndarray) -> np.ndarray:
    """Group ids, cheapest first (ties: lower id first)."""
    return np.argsort(costs, kind="stable")


def prefix_sets(costs: np.ndarray) -> list[GroupSet]:
    """Every prefix of the cost order, from the empty set to all groups."""
    order = cost_order(costs)
    return [tuple(sorted(int(g) for g in order[:k])) for k in range(len(order) + 1)]


def nonprefix_sets(costs: np.ndarray, count: int, rng: np.random.Generator) -> list[GroupSet]:
    """``count`` distinct non-empty subsets that are not prefixes, drawn uniformly."""
    prefixes = set(prefix_sets(costs))
    J = len(costs)
    pool = [s for r in range(1, J + 1) for s in itertools.combinations(range(J), r)
            if s not in prefixes]
    picks = rng.choice(len(pool), size=min(count, len(pool)), replace=False)
    return [pool[int(i)] for i in picks]


def features_of(task: Task, S: GroupSet) -> np.ndarray:
    return np.sort(np.concatenate([task.groups[g] for g in S])) if S else np.zeros(0, int)


def uncomputed(task: Task, S: GroupSet) -> np.ndarray:
    return features_of(task, tuple(g for g in range(len(task.groups)) if g not in S))


# -------------------------------------------------------------------------------- figures
def figures(kind: str, y: np.ndarray, output: Output) -> dict[str, float]:
    """EV (regression) or error rate and clipped log-loss (classification) on ``y``."""
    values, proba = output
    if kind == "regression":
        return {"ev": float(1.0 - np.mean((y - values) ** 2) / np.var(y))}
    p = np.clip(proba, PROBA_CLIP, 1.0 - PROBA_CLIP)
    return {"error": float(np.mean(values != y)),
            "log_loss": float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))}


def primary(kind: str) -> tuple[str, float]:
    """The verdict's figure and its sign (+1: higher is better)."""
    return ("ev", 1.0) if kind == "regression" else ("error", -1.0)


def validation_loss(kind: str, y: np.ndarray, output: Output) -> float:
    """What the validation split minimizes when choosing: MSE, or the clipped log-loss."""
    if kind == "regression":
        return float(np.mean((y - output[0]) ** 2))
    return figures(kind, y, output)["log_loss"]


def request_mix(sets: Sequence[GroupSet], rng: np.random.Generator
                ) -> tuple[dict[GroupSet, float], list[GroupSet]]:
    """Request shares over ``sets`` (summing to 1) and the hot sets: ``HOT_SETS`` non-empty
    sets drawn uniformly share ``HOT_SHARE`` equally, the others share the rest equally."""
    candidates = [S for S in sets if S]
    hot = [candidates[int(i)] for i in rng.choice(len(candidates), replace=False,
                                                  size=min(HOT_SETS, len(candidates)))]
    cold = [S for S in sets if S not in hot]
    hot_share = HOT_SHARE if cold else 1.0
    shares = {S: hot_share / len(hot) for S in hot}
    shares.update({S: (1.0 - hot_share) / len(cold) for S in cold})
    return shares, hot


# -------------------------------------------------------------------------------- methods
def fit_anytime(task: Task, split: Split, seed: int) -> Fitted:
    classify = task.kind == "classification"
    sign = (lambda y: 2.0 * y - 1.0) if classify else (lambda y: y)
    start = time.perf_counter()
    answer = {"classification_answer": "logistic"} if classify else {}
    model = AnytimeLinearModel(groups=task.groups, costs=task.costs, method="cs-g-omp",
                               **answer)
    model.fit(split.Xtr, sign(split.ytr), X_val=split.Xva, y_val=sign(split.yva))
    seconds = time.perf_counter() - start

    def predict(X: np.ndarray, S: GroupSet) -> Output:
        if not classify:
            return model.predict(X, computed_groups=S), None
        logit = model.decision_function(X, computed_groups=S)   # the logistic refit on S
        return (logit > 0).astype(float), expit(logit)

    return Fitted(predict, seconds, {})


def gbfs_takes(name: str) -> bool:
    return name in inspect.signature(GBFS).parameters


def gbfs_info(model: Any) -> dict:
    """Trees kept (and those of an unmasked twin ensemble, if the model has one), the cap,
    early stopping's patience, and ``splits_on(S)``: whether a tree answering ``S`` splits
    on a group of ``S`` (``groups_split_on(S)`` where the model has it, else the groups
    its trees split on)."""
    info: dict[str, Any] = {"trees_kept": int(model.tree_feature_.shape[0]),
                            "tree_cap": int(model.n_estimators),
                            "tree_patience": getattr(model, "early_stopping_rounds", None) or 0}
    twin = getattr(model, "unmasked_tree_feature_", None)
    if twin is not None and twin.shape[0] > 0:
        info["unmasked_trees_kept"] = int(twin.shape[0])
    if callable(getattr(model, "groups_split_on", None)):
        info["splits_on"] = lambda S: bool(model.groups_split_on(S))
    else:
        used = {int(g) for g in model.selected_groups_}
        info["splits_on"] = lambda S: bool(set(S) & used)
    return info


def fit_gbfs(task: Task, split: Split, seed: int, **extra: Any) -> Fitted:
    loss = "squared" if task.kind == "regression" else "logistic"
    start = time.perf_counter()
    model = GBFS(loss=loss, feature_groups=[g.tolist() for g in task.groups],
                 group_costs=task.costs.tolist(), n_estimators=GBFS_TREES,
                 **extra).fit(split.Xtr, split.ytr, X_val=split.Xva, y_val=split.yva)
    seconds = time.perf_counter() - start

    def predict(X: np.ndarray, S: GroupSet) -> Output:
        if task.kind == "regression":
            return model.predict(X, computed_groups=S), None
        proba = model.predict_proba(X, computed_groups=S)[:, 1]
        return model.predict(X, computed_groups=S).astype(float), proba

    info = gbfs_info(model)
    if "unmasked_trees_kept" in info and callable(getattr(model, "answers_unmasked", None)):
        info["answered_by"] = lambda S: ("unmasked" if model.answers_unmasked(S)
                                         else "masked")
    return Fitted(predict, seconds, info)


# -- auto (PerSetChoice): every call of its API is in these adapters
def _auto_class():
    from algorithms.per_set import PerSetChoice

    return PerSetChoice


def _auto_fit(task: Task, split: Split, hot: Sequence[GroupSet]) -> Any:
    cls = _auto_class()
    extra: dict[str, Any] = {}
    if "specialist_sets" in inspect.signature(cls).parameters:   # the traffic's hot sets
        extra["specialist_sets"] = [list(S) for S in hot]
    model = cls(groups=[g.tolist() for g in task.groups], costs=task.costs.tolist(),
                task=task.kind, **extra)
    return model.fit(split.Xtr, split.ytr, X_val=split.Xva, y_val=split.yva)


def _auto_output(model: Any, X: np.ndarray, S: GroupSet, kind: str) -> Output:
    if kind == "regression":
        return np.asarray(model.predict(X, computed_groups=S), dtype=float), None
    proba = np.asarray(model.predict_proba(X, computed_groups=S))[:, 1]
    return np.asarray(model.predict(X, computed_groups=S), dtype=float), proba


def _auto_answered_by(model: Any, S: GroupSet) -> str | None:
    """The model answering ``S`` (``answered_by(S)``, else ``choice(S)``), if it says."""
    for name in ("answered_by", "choice"):
        method = getattr(model, name, None)
        if callable(method):
            return str(method(S))
    return None


def fit_auto(task: Task, split: Split, seed: int, hot: Sequence[GroupSet]) -> Fitted:
    start = time.perf_counter()
    model = _auto_fit(task, split, hot)
    seconds = time.perf_counter() - start
    info: dict[str, Any] = {}
    half = getattr(model, "gbfs_", None)
    if half is not None and hasattr(half, "selected_groups_"):
        info.update(gbfs_info(half))
    info["answered_by"] = lambda S: _auto_answered_by(model, S)
    return Fitted(lambda X, S: _auto_output(model, X, S, task.kind), seconds, info)


def auto_unavailable() -> str | None:
    """Why the auto row is skipped (None: PerSetChoice imports)."""
    try:
        _auto_class()
    except ImportError as exc:
        return f"algorithms.per_set.PerSetChoice not importable: {exc}"
    return None


# -- LightGBM peers
def train_lgbm(kind: str, Xtr: np.ndarray, ytr: np.ndarray, Xva: np.ndarray, yva: np.ndarray,
               seed: int) -> lgb.Booster:
    """Up to ``LGB_ROUNDS`` rounds, early-stopped on ``(Xva, yva)``; best iteration kept."""
    params = {**LGB_PARAMS, "seed": seed,
              "objective": "regression" if kind == "regression" else "binary"}
    return lgb.train(params, lgb.Dataset(Xtr, ytr), num_boost_round=LGB_ROUNDS,
                     valid_sets=[lgb.Dataset(Xva, yva)],
                     callbacks=[lgb.early_stopping(LGB_PATIENCE, verbose=False)])


def best_iteration(booster: lgb.Booster) -> int:
    return int(booster.best_iteration or booster.current_iteration())


def lgbm_output(kind: str, booster: lgb.Booster, X: np.ndarray) -> Output:
    out = booster.predict(X, num_iteration=best_iteration(booster))
    return (out, None) if kind == "regression" else ((out > 0.5).astype(float), out)


def fit_lgbm_full(task: Task, split: Split, seed: int) -> tuple[Predictor, Predictor, float,
                                                                 dict]:
    """One booster on full rows; predictors (mean-impute, lgbm-plain), seconds, info."""
    start = time.perf_counter()
    booster = train_lgbm(task.kind, split.Xtr, split.ytr, split.Xva, split.yva, seed)
    seconds = time.perf_counter() - start
    means = split.Xtr.mean(axis=0)

    def fill(X: np.ndarray, S: GroupSet, value: np.ndarray | float) -> Output:
        X = X.copy()
        cols = uncomputed(task, S)
        X[:, cols] = value if np.isscalar(value) else value[cols]
        return lgbm_output(task.kind, booster, X)

    info = {"best_iterations": [best_iteration(booster)], "shared": True}
    return (lambda X, S: fill(X, S, means)), (lambda X, S: fill(X, S, np.nan)), seconds, info


def mask_groups(task: Task, X: np.ndarray, copies: int, rng: np.random.Generator) -> np.ndarray:
    """``X`` stacked with ``copies`` copies whose groups are NaN, each with probability 1/2."""
    out = [X]
    for _ in range(copies):
        copy = X.copy()
        hidden = rng.random((X.shape[0], len(task.groups))) < 0.5
        for g, cols in enumerate(task.groups):
            copy[np.ix_(hidden[:, g], cols)] = np.nan
        out.append(copy)
    return np.vstack(out)


def fit_lgbm_masked(task: Task, split: Split, seed: int) -> Fitted:
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    Xtr = mask_groups(task, split.Xtr, MASKED_COPIES, rng)
    Xva = mask_groups(task, split.Xva, MASKED_COPIES, rng)
    booster = train_lgbm(task.kind, Xtr, np.tile(split.ytr, MASKED_COPIES + 1), Xva,
                         np.tile(split.yva, MASKED_COPIES + 1), seed)
    seconds = time.perf_counter() - start

    def predict(X: np.ndarray, S: GroupSet) -> Output:
        X = X.copy()
        X[:, uncomputed(task, S)] = np.nan
        return lgbm_output(task.kind, booster, X)

    return Fitted(predict, seconds, {"best_iterations": [best_iteration(booster)]})


# -- per-set refits: each returns (test output, validation loss, seconds, info)
Refit = tuple[Output, float, float, dict]


def _standardize(Xtr: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    mean, scale = Xtr.mean(axis=0), Xtr.std(axis=0)
    scale[scale == 0] = 1.0
    return [(X - mean) / scale for X in (Xtr, *others)]


def refit_linear(kind: str, split: Split, cols: np.ndarray) -> Refit:
    """Ridge (regression; alpha in ``RIDGE_ALPHAS`` x n, all from one SVD) or logistic
    regression (C in ``LOGISTIC_CS``, rising, each Newton solve warm-started from the last)
    on standardized ``cols``, the value with the best validation loss. O(n d^2)."""
    start = time.perf_counter()
    Z, Zv, Zt = _standardize(split.Xtr[:, cols], split.Xva[:, cols], split.Xte[:, cols])
    best: tuple[float, float, Any] | None = None
    if kind == "regression":
        offset = split.ytr.mean()
        U, s, Vt = np.linalg.svd(Z, full_matrices=False)
        Uy = U.T @ (split.ytr - offset)
        for alpha in RIDGE_ALPHAS * len(split.ytr):
            w = Vt.T @ (s / (s ** 2 + alpha) * Uy)
            loss = validation_loss(kind, split.yva, (offset + Zv @ w, None))
            if best is None or loss < best[0]:
                best = (loss, float(alpha / len(split.ytr)), w)
        loss, value, w = best
        seconds = time.perf_counter() - start
        return (offset + Zt @ w, None), loss, seconds, {"alpha_per_row": value}
    model = LogisticRegression(solver="newton-cholesky", max_iter=200, warm_start=True)
    for C in LOGISTIC_CS:
        model.set_params(C=float(C)).fit(Z, split.ytr)
        p = model.predict_proba(Zv)[:, 1]
        loss = validation_loss(kind, split.yva, ((p > 0.5).astype(float), p))
        if best is None or loss < best[0]:
            best = (loss, float(C), model.predict_proba(Zt)[:, 1])
    loss, value, p = best
    seconds = time.perf_counter() - start
    return ((p > 0.5).astype(float), p), loss, seconds, {"C": value}


def refit_lgbm(kind: str, split: Split, cols: np.ndarray, seed: int) -> Refit:
    start = time.perf_counter()
    booster = train_lgbm(kind, split.Xtr[:, cols], split.ytr, split.Xva[:, cols], split.yva,
                         seed)
    seconds = time.perf_counter() - start
    loss = validation_loss(kind, split.yva, lgbm_output(kind, booster, split.Xva[:, cols]))
    return (lgbm_output(kind, booster, split.Xte[:, cols]), loss, seconds,
            {"best_iteration": best_iteration(booster)})


def refit_constant(kind: str, split: Split) -> Refit:
    """S = {}: the training mean (class frequency) for every row."""
    mean = float(split.ytr.mean())
    constant = np.full(len(split.yte), mean)
    if kind == "regression":
        return (constant, None), 0.0, 0.0, {}
    return ((constant > 0.5).astype(float), constant), 0.0, 0.0, {}


def fit_refits(task: Task, split: Split, S: GroupSet, seed: int,
               wanted: Sequence[str]) -> dict[str, Refit]:
    """The refit methods of ``wanted`` for ``S``; ``refit`` is the validation-chosen one of
    ``refit-linear`` and ``refit-lgbm`` (ties: linear), its seconds both fits'."""
    cols = features_of(task, S)
    if cols.size == 0:
        return dict.fromkeys(wanted, refit_constant(task.kind, split))
    out: dict[str, Refit] = {}
    if {"refit-linear", "refit"} & set(wanted):
        out["refit-linear"] = refit_linear(task.kind, split, cols)
    if {"refit-lgbm", "refit"} & set(wanted):
        out["refit-lgbm"] = refit_lgbm(task.kind, split, cols, seed)
    if "refit" in wanted:
        linear, trees = out["refit-linear"], out["refit-lgbm"]
        chosen = "refit-linear" if linear[1] <= trees[1] else "refit-lgbm"
        output, loss, _, info = out[chosen]
        out["refit"] = (output, loss, linear[2] + trees[2], {**info, "chosen": chosen})
    return {m: out[m] for m in wanted}


# ------------------------------------------------------------------------------- running
def fit_methods(task: Task, split: Split, seed: int, methods: Sequence[str],
                skipped: dict[str, str], hot: Sequence[GroupSet]) -> dict[str, Fitted]:
    """Every method fitted once per split (the refits are fitted per set, elsewhere)."""
    fitted: dict[str, Fitted] = {}
    for method in methods:
        if method in skipped:
            continue
        if method == "anytime":
            fitted[method] = fit_anytime(task, split, seed)
        elif method == "gbfs":
            fitted[method] = fit_gbfs(task, split, seed)
        elif method == "gbfs-nomask":
            fitted[method] = fit_gbfs(task, split, seed, masked_copies=0)
        elif method == "auto":
            try:
                fitted[method] = fit_auto(task, split, seed, hot)
            except Exception as exc:  # noqa: BLE001 - a module being written: note, go on
                skipped[method] = f"PerSetChoice failed: {type(exc).__name__}: {exc}"
        elif method == "lgbm-masked":
            fitted[method] = fit_lgbm_masked(task, split, seed)
    if {"mean-impute", "lgbm-plain"} & set(methods):
        impute, plain, seconds, info = fit_lgbm_full(task, split, seed)
        fitted["mean-impute"] = Fitted(impute, seconds, info)
        fitted["lgbm-plain"] = Fitted(plain, seconds, info)
    return fitted


def run_seed(name: str, task: Task, seed: int, methods: Sequence[str], cfg: dict,
             skipped: dict[str, str]) -> tuple[list[dict], list[dict]]:
    """Every method on one split: (rows per method and set, fit rows per method)."""
    split = make_split(task, seed)
    salt = sum(map(ord, name))   # per-data-set stream of random sets
    sets = [("prefix", S) for S in prefix_sets(task.costs)]
    rng = np.random.default_rng([seed, salt])
    sets += [("non-prefix", S) for S in nonprefix_sets(task.costs, cfg["nonprefix"], rng)]
    shares, hot = request_mix([S for _, S in sets], rng)

    def row(method: str, kind: str, S: GroupSet, output: Output) -> dict:
        return {"dataset": name, "seed": seed, "method": method, "kind": kind,
                "set": list(S), "cost": float(task.costs[list(S)].sum()),
                "share": shares[S], "hot": S in hot,
                **figures(task.kind, split.yte, output)}

    rows, fits = [], []
    for method, fit in fit_methods(task, split, seed, methods, skipped, hot).items():
        fits.append(_fit_row(name, seed, method, fit.seconds, fit.info))
        for kind, S in sets:
            rows.append(row(method, kind, S, fit.predict(split.Xte, S)))
            if "splits_on" in fit.info:
                rows[-1]["splits_on_computed"] = fit.info["splits_on"](S)
            if "answered_by" in fit.info and (who := fit.info["answered_by"](S)) is not None:
                rows[-1]["answered_by"] = who
    refits = [m for m in methods if m in REFITS]
    if refits:
        seconds = dict.fromkeys(refits, 0.0)
        iterations: list[int] = []
        for kind, S in sets:
            for method, (output, _, secs, info) in fit_refits(task, split, S, seed,
                                                               refits).items():
                seconds[method] += secs
                rows.append({**row(method, kind, S, output), **info})
                if method == "refit-lgbm" and "best_iteration" in info:
                    iterations.append(info["best_iteration"])
        for method in refits:
            info = {"best_iterations": iterations} if method == "refit-lgbm" else {}
            fits.append(_fit_row(name, seed, method, seconds[method], info))
    return rows, fits


def _fit_row(name: str, seed: int, method: str, seconds: float, info: dict) -> dict:
    keep = ("best_iterations", "trees_kept", "unmasked_trees_kept", "tree_cap",
            "tree_patience")
    return {"dataset": name, "seed": seed, "method": method, "fit_seconds": seconds,
            **{k: info[k] for k in keep if k in info}}


# ---------------------------------------------------------------------------- aggregates
def _mean_se(values: list[float]) -> tuple[float, float]:
    a = np.asarray(values, dtype=float)
    se = float(a.std(ddof=1) / np.sqrt(a.size)) if a.size > 1 else 0.0
    return float(a.mean()), se


def per_seed(rows: list[dict], method: str, kind: str, figure: str) -> dict[int, float]:
    """Each seed's figure over its sets of ``kind``: the mean over the prefix, non-prefix
    or hot sets, S = every group ("all"), or the request-weighted sum ("mix")."""
    out: dict[int, list[float]] = {}
    for row in rows:
        if row["method"] != method or figure not in row:
            continue
        everything = row["kind"] == "prefix" and len(row["set"]) == row["n_groups"]
        if kind == "mix":
            out.setdefault(row["seed"], []).append(row["share"] * row[figure])
        elif ((kind == "all" and everything) or (kind == "hot" and row["hot"])
              or row["kind"] == kind):
            out.setdefault(row["seed"], []).append(row[figure])
    reduce = np.sum if kind == "mix" else np.mean
    return {seed: float(reduce(v)) for seed, v in sorted(out.items())}


def aggregate(rows: list[dict], fits: list[dict], task: Task, methods: Sequence[str],
              skipped: dict[str, str]) -> dict[str, dict]:
    """Per method: mean and SE over seeds of each figure per kind of set; LightGBM's best
    iterations, GBFS's trees kept and split share; fit seconds."""
    names = ["ev"] if task.kind == "regression" else ["error", "log_loss"]
    out: dict[str, dict] = {}
    for method in methods:
        if method in skipped:
            out[method] = {"skipped": skipped[method]}
            continue
        entry: dict[str, Any] = {}
        for kind in KINDS:
            for figure in names:
                seeds = per_seed(rows, method, kind, figure)
                if seeds:
                    mean, se = _mean_se(list(seeds.values()))
                    entry[f"{kind}_{figure}"], entry[f"{kind}_{figure}_se"] = mean, se
        mine = [f for f in fits if f["method"] == method]
        entry["fit_seconds"] = float(np.mean([f["fit_seconds"] for f in mine])) if mine else None
        own = [r for r in rows if r["method"] == method]
        entry["sets_per_seed"] = {kind: len([r for r in own if r["kind"] == kind])
                                  // max(1, len({r["seed"] for r in own}))
                                  for kind in ("prefix", "non-prefix")}
        entry.update(_fit_summary(mine))
        if own and all("splits_on_computed" in r for r in own):
            for kind in ("prefix", "non-prefix"):
                split = [r["splits_on_computed"] for r in own if r["kind"] == kind and r["set"]]
                entry[f"{kind}_share_split_on_computed"] = (float(np.mean(split)) if split
                                                            else None)
        answered = [r["answered_by"] for r in own if "answered_by" in r]
        if answered:
            entry["answered_by"] = {who: answered.count(who) / len(answered)
                                    for who in sorted(set(answered))}
        out[method] = entry
    return out


def _fit_summary(fits: list[dict]) -> dict[str, dict]:
    """LightGBM best iterations and GBFS trees kept over ``fits``; ``binds``: some fit
    stopped within its patience of the cap (early stopping may not have triggered)."""
    out: dict[str, dict] = {}
    its = [i for f in fits for i in f.get("best_iterations", [])]
    if its:
        out["best_iteration"] = {"median": float(np.median(its)), "max": int(max(its)),
                                 "cap": LGB_ROUNDS,
                                 "binds": max(its) > LGB_ROUNDS - LGB_PATIENCE}
    for key in ("trees_kept", "unmasked_trees_kept"):
        kept = [f for f in fits if key in f]
        if kept:
            out[key] = {"mean": float(np.mean([f[key] for f in kept])),
                        "max": int(max(f[key] for f in kept)),
                        "cap": int(max(f["tree_cap"] for f in kept)),
                        "binds": any(f[key] > f["tree_cap"] - (f.get("tree_patience") or 0)
                                     for f in kept)}
    return out


def verdicts(rows: list[dict], task: Task, methods: Sequence[str],
             skipped: dict[str, str]) -> dict[str, dict]:
    """Per comparison ("challenger vs baseline") and kind of set: the paired per-seed
    difference of the primary figure and the verdict."""
    figure, sign = primary(task.kind)
    out: dict[str, dict] = {}
    usable = [m for m in methods if m not in skipped]
    for challenger, baseline, kinds in COMPARISONS:
        if challenger not in usable or baseline not in usable:
            continue
        pair = out.setdefault(f"{challenger} vs {baseline}", {})
        for kind in kinds:
            ours = per_seed(rows, challenger, kind, figure)
            base = per_seed(rows, baseline, kind, figure)
            diffs = [sign * (ours[s] - base[s]) for s in ours if s in base]
            if not diffs:
                continue
            diff, se = _mean_se(diffs)
            tol = max(TIE_ABS, se)
            verdict = "beats" if diff > tol else "ties" if diff >= -tol else "loses"
            pair[kind] = {"figure": figure, "better_by": diff, "se": se,
                          "tolerance": tol, "verdict": verdict,
                          "tie_or_beat": verdict != "loses"}
    return out


# ------------------------------------------------------------------------------ printing
def _cell(entry: dict, key: str) -> str:
    if key not in entry:
        return ""
    return f"{entry[key]:.3f} ± {entry.get(key + '_se', 0.0):.3f}"


def print_tables(results: dict) -> None:
    cfg = results["config"]
    for kind, figs in (("regression", [("ev", KINDS)]),
                       ("classification", [("error", KINDS),
                                           ("log_loss", ("prefix", "non-prefix"))])):
        names = [n for n, d in results["datasets"].items() if d["kind"] == kind]
        if not names:
            continue
        columns = ["data set", "method"]
        columns += [f"{'all-groups' if part == 'all' else part} {fig}"
                    for fig, parts in figs for part in parts]
        columns += ["fit s", "note"]
        rows = []
        for name in names:
            for method, entry in results["aggregates"][name].items():
                row = {"data set": name, "method": method}
                if "skipped" in entry:
                    rows.append({**row, "note": "skipped: " + entry["skipped"][:80]})
                    continue
                for fig, parts in figs:
                    for part in parts:
                        label = "all-groups" if part == "all" else part
                        row[f"{label} {fig}"] = _cell(entry, f"{part}_{fig}")
                row["fit s"] = f"{entry['fit_seconds']:.2f}"
                row["note"] = _note(entry)
                rows.append(row)
        what = ("explained variance (higher is better)" if kind == "regression" else
                "test error rate and log-loss (lower is better)")
        print(table(rows, columns, f"{kind}: {what}, mean ± SE over {cfg['seeds']} seeds"))
    print(table(summary_rows(results), SUMMARY_COLUMNS,
                "verdicts (primary figure's paired difference), LightGBM best iterations "
                "(max), GBFS trees kept (max of the cap), fit seconds"))
    print(f"\ntie: within max({TIE_ABS}, one SE of the paired per-seed difference) on EV "
          f"(regression) or error rate (classification); mix: {HOT_SHARE:.0%} of the "
          f"requests on {HOT_SETS} sets")


SUMMARY_COLUMNS = ["data set", "n", "groups", "auto vs lgbm-masked (prefix / non-prefix)",
                   "auto vs refit (prefix / non-prefix / hot / mix)",
                   "gbfs vs gbfs-nomask (all groups)", "best iteration (masked / refit)",
                   "gbfs trees kept (masked / unmasked)", "gbfs splits on S (non-prefix)",
                   "fit s (auto / gbfs / lgbm-masked / refit)",
                   "anytime vs refit-linear (prefix / non-prefix)"]


def summary_rows(results: dict) -> list[dict]:
    rows = []
    for name, info in results["datasets"].items():
        agg, per = results["aggregates"][name], results["verdicts"][name]

        def verdict(pair: str, kinds: Sequence[str]) -> str:
            parts = [per.get(pair, {}).get(kind) for kind in kinds]
            return " / ".join(f"{v['verdict']} ({v['better_by']:+.3f})" if v else "-"
                              for v in parts)

        def number(method: str, *keys: str, fmt: str = "{}") -> str:
            value: Any = agg.get(method, {})
            for key in keys:
                value = value.get(key) if isinstance(value, dict) else None
            return "-" if value is None else fmt.format(value)

        trees = " / ".join(f"{t['max']} of {t['cap']}" if t else "-" for t in (
            agg.get("gbfs", {}).get(key) for key in ("trees_kept", "unmasked_trees_kept")))
        rows.append({
            "data set": name, "n": info["n"], "groups": len(info["groups"]),
            SUMMARY_COLUMNS[3]: verdict("auto vs lgbm-masked", ("prefix", "non-prefix")),
            SUMMARY_COLUMNS[4]: verdict("auto vs refit", ("prefix", "non-prefix", "hot", "mix")),
            SUMMARY_COLUMNS[5]: verdict("gbfs vs gbfs-nomask", ("all",)),
            SUMMARY_COLUMNS[6]: (number("lgbm-masked", "best_iteration", "max") + " / "
                                 + number("refit-lgbm", "best_iteration", "max")),
            SUMMARY_COLUMNS[7]: trees,
            SUMMARY_COLUMNS[8]: number("gbfs", "non-prefix_share_split_on_computed",
                                       fmt="{:.0%}"),
            SUMMARY_COLUMNS[9]: " / ".join(number(m, "fit_seconds", fmt="{:.2f}") for m in
                                           ("auto", "gbfs", "lgbm-masked", "refit")),
            SUMMARY_COLUMNS[10]: verdict("anytime vs refit-linear", ("prefix", "non-prefix"))})
    return rows


def _note(entry: dict) -> str:
    notes = []
    if "best_iteration" in entry:
        b = entry["best_iteration"]
        notes.append(f"best iteration median {b['median']:.0f}, max {b['max']} of {b['cap']}")
    for key, what in (("trees_kept", "trees kept"), ("unmasked_trees_kept", "unmasked")):
        if key in entry:
            t = entry[key]
            notes.append(f"{what} mean {t['mean']:.0f}, max {t['max']} of {t['cap']}")
    if "non-prefix_share_split_on_computed" in entry:
        notes.append("a tree splits on S: prefix "
                     f"{entry['prefix_share_split_on_computed'] or 0:.0%}, non-prefix "
                     f"{entry['non-prefix_share_split_on_computed'] or 0:.0%}")
    if "answered_by" in entry:
        notes.append("answered by " + ", ".join(f"{who} {share:.0%}" for who, share
                                                 in entry["answered_by"].items()))
    return "; ".join(notes)


def write_results(path: Path, payload: dict) -> None:
    """JSON with one line per row (thousands of them)."""
    rows = payload.pop("rows")
    head = json.dumps(payload, indent=1)
    body = ",\n  ".join(json.dumps(r) for r in rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(head[:-2] + ',\n "rows": [\n  ' + body + "\n ]\n}\n")
    payload["rows"] = rows


# ---------------------------------------------------------------------------------- main
def warm_up() -> None:
    """Compile the numba kernels of GBFS, the anytime model and ``auto`` outside the timings."""
    X = np.random.default_rng(0).normal(size=(40, 3))
    y = (np.arange(40) % 2).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        GBFS(n_estimators=2).fit(X, y)
        GBFS(n_estimators=2, loss="squared").fit(X, y)
        model = AnytimeLinearModel(groups=[[0], [1, 2]], costs=[1.0, 2.0]).fit(X, y)
        model.predict(X, computed_groups=(0, 1))
        if auto_unavailable() is None:
            for task in ("regression", "classification"):
                auto = _auto_class()(groups=[[0], [1, 2]], task=task).fit(X, y)
                auto.predict(X, computed_groups=(0,))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"{', '.join(QUICK_DATASETS)}; 2 seeds; 3 non-prefix sets")
    parser.add_argument("--datasets", type=str, default=None,
                        help=f"comma separated, of {', '.join(DATASETS)}")
    parser.add_argument("--methods", type=str, default=",".join(METHODS),
                        help="comma separated, of " + ", ".join(METHODS))
    parser.add_argument("--seeds", type=int, default=None, help="splits (default 5; quick 2)")
    parser.add_argument("--nonprefix", type=int, default=None,
                        help="random non-prefix sets per seed (default 10; quick 3)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/budget_quality.json")
    parser.add_argument("--rows", action="store_true",
                        help="also write every (seed, method, set) row to the JSON")
    args = parser.parse_args(argv)
    quick = args.quick
    names = (args.datasets.split(",") if args.datasets else
             list(QUICK_DATASETS if quick else DATASETS))
    methods = [m for m in args.methods.split(",") if m]
    for bad in [n for n in names if n not in DATASETS] + [m for m in methods
                                                          if m not in METHODS]:
        parser.error(f"unknown data set or method {bad!r}")
    cfg = {"quick": quick, "datasets": names, "methods": methods,
           "seeds": args.seeds or (2 if quick else 5),
           "nonprefix": args.nonprefix if args.nonprefix is not None else (3 if quick else 10),
           "lgb_params": LGB_PARAMS, "lgb_rounds": LGB_ROUNDS, "lgb_patience": LGB_PATIENCE,
           "gbfs_trees": GBFS_TREES, "masked_copies": MASKED_COPIES,
           "ridge_alphas_per_row": RIDGE_ALPHAS.tolist(), "logistic_cs": LOGISTIC_CS.tolist(),
           "hot_sets": HOT_SETS, "hot_share": HOT_SHARE, "proba_clip": PROBA_CLIP,
           "tie_abs": TIE_ABS, "lightgbm": lgb.__version__}
    skipped: dict[str, str] = {}
    if "gbfs-nomask" in methods and not gbfs_takes("masked_copies"):
        skipped["gbfs-nomask"] = "GBFS takes no masked_copies (no masking to measure)"
    if "auto" in methods and (reason := auto_unavailable()):
        skipped["auto"] = reason
    start = time.perf_counter()
    warm_up()
    results: dict[str, Any] = {"machine": machine(),
                               "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
                               "config": cfg, "datasets": {}, "aggregates": {},
                               "verdicts": {}, "skipped": skipped, "fits": [], "rows": []}
    for name in names:
        task = DATASETS[name](quick)
        J = len(task.groups)
        results["datasets"][name] = {
            "kind": task.kind, "n": int(task.X.shape[0]), "d": int(task.X.shape[1]),
            "source": task.source, "cost_order": cost_order(task.costs).tolist(),
            "groups": [{"name": n, "features": g.tolist(), "cost": float(c)}
                       for n, g, c in zip(task.group_names, task.groups, task.costs,
                                          strict=True)]}
        rows, fits = [], []
        for seed in range(cfg["seeds"]):
            seed_rows, seed_fits = run_seed(name, task, seed, methods, cfg, skipped)
            rows += [{**r, "n_groups": J} for r in seed_rows]
            fits += seed_fits
        results["aggregates"][name] = aggregate(rows, fits, task, methods, skipped)
        results["verdicts"][name] = verdicts(rows, task, methods, skipped)
        results["rows"] += rows
        results["fits"] += fits
        print(f"done {name} ({time.perf_counter() - start:.0f} s)", flush=True)
    results["wall_seconds"] = time.perf_counter() - start
    print_tables(results)
    if not args.rows:
        results["rows"] = []
    write_results(args.out, results)
    print(f"\nwall {results['wall_seconds']:.0f} s; wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
