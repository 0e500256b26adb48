"""Prediction quality for whatever feature groups a client has computed: ours versus peers.

    python benchmarks/budget_quality.py                      # 7 data sets, 5 seeds (~1 min)
    python benchmarks/budget_quality.py --quick              # smoke run: 2 small sets, 2 seeds
    python benchmarks/budget_quality.py --datasets diabetes,phishing --seeds 3 \\
        --methods gbfs,lgbm-masked --out /tmp/bq.json

The question: a client has computed the features of a set ``S`` of feature groups (any
subset, not only the cheapest ones); how good is each method's prediction for ``S``?

Methods (all fitted on the same seeded 60/20/20 train/validation/test split):

* ``anytime``: ``AnytimeLinearModel(method="cs-g-omp")`` fitted with the validation split;
  ``predict(X, computed_groups=S)`` is the ridge refit on exactly ``S``. Classification: it
  regresses on +-1 labels, the score's sign is the label; its probability is a Platt scaling
  of the score for ``S`` fitted on the validation split (only for the log-loss).
* ``gbfs``: ``GBFS(loss=..., feature_groups=..., group_costs=...)`` with every other
  parameter at its default, answering with ``computed_groups=S``. ``gbfs-nomask``: the same
  with ``masked_copies=0``, present only if the constructor takes ``masked_copies`` (it
  states what masking costs at training time). For GBFS the table also gives the fraction of
  sets for which it answers with at least one tree (``trees_used(S) > 0``, or
  ``n_trees_for_groups(S) > 0`` for a model without it), when the model exposes that.
* ``auto``: ``algorithms.per_set.PerSetChoice`` (a row with a note if it cannot be imported;
  every call goes through the ``_auto_*`` adapters below).
* ``mean-impute``: LightGBM on all features, uncomputed features replaced by their training
  means. ``lgbm-plain``: the same booster (one shared fit), uncomputed features NaN
  (LightGBM's own handling: a feature never missing in training sends NaN where 0 goes).
  ``lgbm-masked``: one LightGBM on the training rows stacked with ``MASKED_COPIES`` copies in
  which every group is set to NaN independently with probability 1/2; uncomputed groups NaN.
  ``oracle``: a LightGBM retrained on exactly the features of ``S`` (a constant for S = {}),
  fitted for every prefix set but only for the first ``--oracle-nonprefix`` non-prefix sets
  of each seed (its non-prefix figure is over those sets only).
  LightGBM: ``LGB_PARAMS``, at most ``LGB_ROUNDS`` rounds with early stopping (patience
  ``LGB_PATIENCE``) on the validation split prepared as the model's training rows are (full
  rows; masked copies for ``lgbm-masked``; the features of ``S`` for ``oracle``).

Sets per seed: every prefix of the groups in cost order, cheapest first (the empty set and
all groups included: "prefix"), and ``--nonprefix`` sets drawn uniformly without
replacement among the non-empty subsets that are not prefixes ("non-prefix"; all of them
when there are fewer).

Figures on the test split: regression, explained variance ``1 - MSE / Var(y_test)``;
classification, error rate of the labels and log-loss of the probabilities clipped to
``[PROBA_CLIP, 1 - PROBA_CLIP]``. Aggregates per data set and method: the mean over seeds of
each seed's mean over its prefix (non-prefix) sets, with the standard error over seeds.
Verdict: a challenger (``gbfs``, ``auto``) *ties or beats* ``lgbm-masked`` on a kind of set
when the mean over seeds of the paired per-seed difference of the primary figure (EV;
error rate) is no worse than ``-max(TIE_ABS, one standard error of that difference)``
(``TIE_ABS`` = 0.005 EV, or 0.5 error points); it *beats* it when the difference is better
than ``+max(...)``. Fit seconds: the mean per seed of the method's training (the oracle: all
its fits of a seed; Platt scaling and prediction not included).

Data sets (groups and costs are assigned here, see ``DATASETS``; costs in arbitrary units):
diabetes, breast-cancer, digits-parity (scikit-learn), phishing and trump-approval (bundled
with River, no download) and two grouped synthetic generators with correlated groups
(``make_latent_groups``). Writes ``--out`` (default ``benchmarks/budget_quality.json``): the
configuration, the data sets with their groups, one row per (data set, seed, method, set),
the fit times, the aggregates and the verdicts. Needs scikit-learn and lightgbm (river for
phishing and trump-approval).
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
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from algorithms.anytime import AnytimeLinearModel  # noqa: E402
from algorithms.gbfs import GBFS  # noqa: E402
from benchmarks._report import machine, table  # noqa: E402

METHODS = ("anytime", "gbfs", "gbfs-nomask", "auto", "mean-impute", "lgbm-plain",
           "lgbm-masked", "oracle")
CHALLENGERS = ("gbfs", "auto")
BASELINE = "lgbm-masked"
LGB_PARAMS = {"learning_rate": 0.05, "num_leaves": 15, "min_data_in_leaf": 10,
              "num_threads": 1, "verbose": -1, "deterministic": True, "force_col_wise": True}
LGB_ROUNDS, LGB_PATIENCE = 200, 20
MASKED_COPIES = 4     # lgbm-masked: the original rows + this many group-masked copies
PROBA_CLIP = 1e-3     # log-loss: probabilities clipped to [PROBA_CLIP, 1 - PROBA_CLIP]
TIE_ABS = 0.005       # verdict tolerance: 0.005 explained variance / 0.5 error points
QUICK_DATASETS = ("diabetes", "breast-cancer")

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


def make_latent_groups(n: int, kind: str, seed: int = 0) -> Task:
    """Grouped data whose groups share latent factors, so a cheap group partly stands in for
    a costly one.

    Three shared latents ``z`` and one private latent ``u_g`` per group; group ``g`` has
    ``d_g`` features ``z A_g + u_g v_g + s_g eps`` (random loadings ``A_g``, ``v_g``), where the
    noise ``s_g`` falls as the cost rises (costly groups measure ``z`` precisely). Target
    ``f = sin(1.5 z0) + z1 z2 + [z0 > 0.5] + 0.8 u_3 [z1 > 0] + 0.6 |u_5| + 0.4 u_1``
    (an interaction, thresholds, and private parts only the costly groups carry);
    regression ``y = f + 0.3 N(0, 1)``, classification ``y = [f + 0.5 Logistic > median f]``.
    """
    rng = np.random.default_rng(1000 + seed)
    sizes, costs = (3, 4, 5, 6, 8, 10), (1.0, 2.0, 3.0, 5.0, 8.0, 13.0)
    noise = (1.2, 1.0, 0.7, 0.5, 0.35, 0.25)
    z = rng.standard_normal((n, 3))
    u = rng.standard_normal((n, len(sizes)))
    blocks, spec, start = [], [], 0
    for g, (d, s, cost) in enumerate(zip(sizes, noise, costs, strict=True)):
        load, private = rng.normal(size=(3, d)), 0.8 * rng.normal(size=d)
        blocks.append(z @ load + np.outer(u[:, g], private) + s * rng.standard_normal((n, d)))
        spec.append((f"group {g} ({d} features, noise {s})", range(start, start + d), cost))
        start += d
    f = (np.sin(1.5 * z[:, 0]) + z[:, 1] * z[:, 2] + (z[:, 0] > 0.5) + 0.8 * u[:, 3]
         * (z[:, 1] > 0) + 0.6 * np.abs(u[:, 5]) + 0.4 * u[:, 1])
    if kind == "regression":
        y = f + 0.3 * rng.standard_normal(n)
    else:
        y = (f + 0.5 * rng.logistic(size=n) > np.median(f)).astype(float)
    return _task(np.hstack(blocks), y, kind, spec,
                 f"make_latent_groups({n}, {kind!r}) in this file")


DATASETS: dict[str, Callable[[bool], Task]] = {
    "diabetes": load_diabetes_task,
    "breast-cancer": load_breast_cancer_task,
    "digits-parity": load_digits_task,
    "phishing": load_phishing_task,
    "trump-approval": load_trump_task,
    "synthetic-regression": lambda quick: make_latent_groups(1500 if quick else 4000,
                                                             "regression"),
    "synthetic-binary": lambda quick: make_latent_groups(1500 if quick else 4000,
                                                         "classification"),
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


# -------------------------------------------------------------------------------- methods
def fit_anytime(task: Task, split: Split, seed: int) -> tuple[Predictor, float, dict]:
    classify = task.kind == "classification"
    sign = (lambda y: 2.0 * y - 1.0) if classify else (lambda y: y)
    start = time.perf_counter()
    model = AnytimeLinearModel(groups=task.groups, costs=task.costs, method="cs-g-omp")
    model.fit(split.Xtr, sign(split.ytr), X_val=split.Xva, y_val=sign(split.yva))
    seconds = time.perf_counter() - start
    platt: dict[GroupSet, LogisticRegression] = {}

    def predict(X: np.ndarray, S: GroupSet) -> Output:
        score = model.predict(X, computed_groups=S)
        if not classify:
            return score, None
        if S not in platt:   # probability for the log-loss: Platt scaling on validation
            val = model.predict(split.Xva, computed_groups=S)[:, None]
            platt[S] = LogisticRegression(C=1e4).fit(val, split.yva)
        return (score > 0).astype(float), platt[S].predict_proba(score[:, None])[:, 1]

    return predict, seconds, {}


def gbfs_takes(name: str) -> bool:
    return name in inspect.signature(GBFS).parameters


def fit_gbfs(task: Task, split: Split, seed: int, **extra: Any) -> tuple[Predictor, float, dict]:
    loss = "squared" if task.kind == "regression" else "logistic"
    start = time.perf_counter()
    model = GBFS(loss=loss, feature_groups=[g.tolist() for g in task.groups],
                 group_costs=task.costs.tolist(), **extra).fit(split.Xtr, split.ytr,
                                                               X_val=split.Xva,
                                                               y_val=split.yva)
    seconds = time.perf_counter() - start

    def predict(X: np.ndarray, S: GroupSet) -> Output:
        if task.kind == "regression":
            return model.predict(X, computed_groups=S), None
        proba = model.predict_proba(X, computed_groups=S)[:, 1]
        return model.predict(X, computed_groups=S).astype(float), proba

    return predict, seconds, {"model": model}


def trees_used(model: Any, S: GroupSet) -> int | None:
    """Trees the GBFS model answers ``S`` with, when it says (else None): ``trees_used(S)``
    where the model has it (answers from every tree), else the anytime prefix
    ``n_trees_for_groups(S)``."""
    count = getattr(model, "trees_used", None) or getattr(model, "n_trees_for_groups", None)
    return None if count is None else int(count(S))


# -- auto (PerSetChoice): every call of its API is in these three adapters
def _auto_class():
    from algorithms.per_set import PerSetChoice

    return PerSetChoice


def _auto_fit(task: Task, split: Split) -> Any:
    model = _auto_class()(groups=[g.tolist() for g in task.groups], costs=task.costs.tolist(),
                          task=task.kind)
    return model.fit(split.Xtr, split.ytr, X_val=split.Xva, y_val=split.yva)


def _auto_output(model: Any, X: np.ndarray, S: GroupSet, kind: str) -> Output:
    if kind == "regression":
        return np.asarray(model.predict(X, computed_groups=S), dtype=float), None
    proba = np.asarray(model.predict_proba(X, computed_groups=S))[:, 1]
    return np.asarray(model.predict(X, computed_groups=S), dtype=float), proba


def fit_auto(task: Task, split: Split, seed: int) -> tuple[Predictor, float, dict]:
    start = time.perf_counter()
    model = _auto_fit(task, split)
    seconds = time.perf_counter() - start
    return (lambda X, S: _auto_output(model, X, S, task.kind)), seconds, {}


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
    params = {**LGB_PARAMS, "seed": seed,
              "objective": "regression" if kind == "regression" else "binary"}
    return lgb.train(params, lgb.Dataset(Xtr, ytr), num_boost_round=LGB_ROUNDS,
                     valid_sets=[lgb.Dataset(Xva, yva)],
                     callbacks=[lgb.early_stopping(LGB_PATIENCE, verbose=False)])


def lgbm_output(kind: str, booster: lgb.Booster, X: np.ndarray) -> Output:
    out = booster.predict(X, num_iteration=booster.best_iteration or None)
    return (out, None) if kind == "regression" else ((out > 0.5).astype(float), out)


def fit_lgbm_full(task: Task, split: Split, seed: int) -> tuple[Predictor, Predictor, float]:
    """One booster on full rows; predictors (mean-impute, lgbm-plain) and fit seconds."""
    start = time.perf_counter()
    booster = train_lgbm(task.kind, split.Xtr, split.ytr, split.Xva, split.yva, seed)
    seconds = time.perf_counter() - start
    means = split.Xtr.mean(axis=0)

    def fill(X: np.ndarray, S: GroupSet, value: np.ndarray | float) -> Output:
        X = X.copy()
        cols = uncomputed(task, S)
        X[:, cols] = value if np.isscalar(value) else value[cols]
        return lgbm_output(task.kind, booster, X)

    return (lambda X, S: fill(X, S, means)), (lambda X, S: fill(X, S, np.nan)), seconds


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


def fit_lgbm_masked(task: Task, split: Split, seed: int) -> tuple[Predictor, float, dict]:
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

    return predict, seconds, {}


def fit_oracle(task: Task, split: Split, S: GroupSet, seed: int) -> tuple[Output, float]:
    """Test output of a LightGBM retrained on the features of ``S`` and its fit seconds."""
    cols = features_of(task, S)
    start = time.perf_counter()
    if cols.size == 0:   # nothing computed: the training mean (class frequency)
        mean = float(split.ytr.mean())
        seconds = time.perf_counter() - start
        constant = np.full(len(split.yte), mean)
        if task.kind == "regression":
            return (constant, None), seconds
        return ((constant > 0.5).astype(float), constant), seconds
    booster = train_lgbm(task.kind, split.Xtr[:, cols], split.ytr, split.Xva[:, cols],
                         split.yva, seed)
    seconds = time.perf_counter() - start
    return lgbm_output(task.kind, booster, split.Xte[:, cols]), seconds


# ------------------------------------------------------------------------------- running
def run_seed(name: str, task: Task, seed: int, methods: Sequence[str], cfg: dict,
             skipped: dict[str, str]) -> tuple[list[dict], list[dict]]:
    """Every method on one split: (rows per method and set, fit rows per method)."""
    split = make_split(task, seed)
    salt = sum(map(ord, name))   # per-data-set stream of random sets
    sets = [("prefix", S) for S in prefix_sets(task.costs)]
    rng = np.random.default_rng([seed, salt])
    nonprefix = nonprefix_sets(task.costs, cfg["nonprefix"], rng)
    sets += [("non-prefix", S) for S in nonprefix]
    oracle_sets = set(prefix_sets(task.costs)) | set(nonprefix[:cfg["oracle_nonprefix"]])
    predictors: dict[str, tuple[Predictor, float, dict]] = {}
    for method in methods:
        if method in skipped:
            continue
        if method == "anytime":
            predictors[method] = fit_anytime(task, split, seed)
        elif method == "gbfs":
            predictors[method] = fit_gbfs(task, split, seed)
        elif method == "gbfs-nomask":
            predictors[method] = fit_gbfs(task, split, seed, masked_copies=0)
        elif method == "auto":
            try:
                predictors[method] = fit_auto(task, split, seed)
            except Exception as exc:  # noqa: BLE001 - a module being written: note, go on
                skipped[method] = f"PerSetChoice failed: {type(exc).__name__}: {exc}"
        elif method == "lgbm-masked":
            predictors[method] = fit_lgbm_masked(task, split, seed)
    if {"mean-impute", "lgbm-plain"} & set(methods):
        impute, plain, seconds = fit_lgbm_full(task, split, seed)
        predictors["mean-impute"] = (impute, seconds, {"shared": True})
        predictors["lgbm-plain"] = (plain, seconds, {"shared": True})
    rows, fits = [], []
    for method in methods:
        if method in predictors:
            predict, seconds, info = predictors[method]
            fits.append({"dataset": name, "seed": seed, "method": method,
                         "fit_seconds": seconds})
            for kind, S in sets:
                row = _row(name, seed, method, kind, S, task)
                row.update(figures(task.kind, split.yte, predict(split.Xte, S)))
                if "model" in info:
                    used = trees_used(info["model"], S)
                    if used is not None:
                        row["trees_used"] = used
                rows.append(row)
        elif method == "oracle":
            total = 0.0
            for kind, S in sets:
                if S not in oracle_sets:
                    continue
                output, seconds = fit_oracle(task, split, S, seed)
                total += seconds
                row = _row(name, seed, method, kind, S, task)
                row.update(figures(task.kind, split.yte, output))
                rows.append(row)
            fits.append({"dataset": name, "seed": seed, "method": method,
                         "fit_seconds": total})
    return rows, fits


def _row(name: str, seed: int, method: str, kind: str, S: GroupSet, task: Task) -> dict:
    return {"dataset": name, "seed": seed, "method": method, "kind": kind, "set": list(S),
            "cost": float(task.costs[list(S)].sum())}


# ---------------------------------------------------------------------------- aggregates
def _mean_se(values: list[float]) -> tuple[float, float]:
    a = np.asarray(values, dtype=float)
    se = float(a.std(ddof=1) / np.sqrt(a.size)) if a.size > 1 else 0.0
    return float(a.mean()), se


def per_seed(rows: list[dict], method: str, kind: str, figure: str) -> dict[int, float]:
    """Each seed's mean of ``figure`` over its sets of ``kind`` ("all": S = every group)."""
    out: dict[int, list[float]] = {}
    for row in rows:
        if row["method"] != method or figure not in row:
            continue
        everything = row["kind"] == "prefix" and len(row["set"]) == row["n_groups"]
        if (kind == "all" and everything) or row["kind"] == kind:
            out.setdefault(row["seed"], []).append(row[figure])
    return {seed: float(np.mean(v)) for seed, v in sorted(out.items())}


def aggregate(rows: list[dict], fits: list[dict], task: Task, methods: Sequence[str],
              skipped: dict[str, str]) -> dict[str, dict]:
    """Per method: mean and SE over seeds of each figure on prefix / non-prefix / all."""
    names = ["ev"] if task.kind == "regression" else ["error", "log_loss"]
    out: dict[str, dict] = {}
    for method in methods:
        if method in skipped:
            out[method] = {"skipped": skipped[method]}
            continue
        entry: dict[str, Any] = {}
        for kind in ("prefix", "non-prefix", "all"):
            for figure in names:
                seeds = per_seed(rows, method, kind, figure)
                if seeds:
                    mean, se = _mean_se(list(seeds.values()))
                    entry[f"{kind}_{figure}"], entry[f"{kind}_{figure}_se"] = mean, se
        secs = [f["fit_seconds"] for f in fits if f["method"] == method]
        entry["fit_seconds"] = float(np.mean(secs)) if secs else None
        own = [r for r in rows if r["method"] == method]
        entry["sets_per_seed"] = {kind: len([r for r in own if r["kind"] == kind])
                                  // max(1, len({r["seed"] for r in own}))
                                  for kind in ("prefix", "non-prefix")}
        if own and all("trees_used" in r for r in own):
            for kind in ("prefix", "non-prefix"):
                used = [r["trees_used"] > 0 for r in own if r["kind"] == kind]
                entry[f"{kind}_fraction_with_trees"] = float(np.mean(used)) if used else None
        out[method] = entry
    return out


def verdicts(rows: list[dict], task: Task, methods: Sequence[str],
             skipped: dict[str, str]) -> dict[str, dict]:
    """Per challenger and kind of set: paired difference to lgbm-masked and the verdict."""
    figure, sign = primary(task.kind)
    out: dict[str, dict] = {}
    if BASELINE not in methods or BASELINE in skipped:
        return out
    for challenger in CHALLENGERS:
        if challenger not in methods or challenger in skipped:
            continue
        out[challenger] = {}
        for kind in ("prefix", "non-prefix"):
            ours = per_seed(rows, challenger, kind, figure)
            base = per_seed(rows, BASELINE, kind, figure)
            diffs = [sign * (ours[s] - base[s]) for s in ours if s in base]
            if not diffs:
                continue
            diff, se = _mean_se(diffs)
            tol = max(TIE_ABS, se)
            verdict = "beats" if diff > tol else "ties" if diff >= -tol else "loses"
            out[challenger][kind] = {"figure": figure, "better_by": diff, "se": se,
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
    for kind, figs in (("regression", ["ev"]), ("classification", ["error", "log_loss"])):
        names = [n for n, d in results["datasets"].items() if d["kind"] == kind]
        if not names:
            continue
        columns = ["data set", "method"]
        for fig in figs:
            columns += [f"prefix {fig}", f"non-prefix {fig}", f"all-groups {fig}"]
        columns += ["fit s", "note"]
        rows = []
        for name in names:
            for method, entry in results["aggregates"][name].items():
                row = {"data set": name, "method": method}
                if "skipped" in entry:
                    rows.append({**row, "note": "skipped: " + entry["skipped"][:80]})
                    continue
                for fig in figs:
                    for part in ("prefix", "non-prefix", "all"):
                        label = "all-groups" if part == "all" else part
                        row[f"{label} {fig}"] = _cell(entry, f"{part}_{fig}")
                row["fit s"] = f"{entry['fit_seconds']:.2f}"
                row["note"] = _note(method, entry, cfg)
                rows.append(row)
        what = ("explained variance (higher is better)" if kind == "regression" else
                "test error rate and log-loss (lower is better)")
        print(table(rows, columns, f"{kind}: {what}, mean ± SE over {cfg['seeds']} seeds"))
    print(f"\ntie: within max({TIE_ABS}, one SE of the paired per-seed difference) of "
          f"{BASELINE} on EV (regression) or error rate (classification)")
    for name, per in results["verdicts"].items():
        parts = []
        for challenger, kinds in per.items():
            for kind, v in kinds.items():
                parts.append(f"{challenger} {v['verdict']} {BASELINE} on {kind} "
                             f"({v['figure']} better by {v['better_by']:+.4f}, "
                             f"tol {v['tolerance']:.4f})")
        print(f"verdict {name}: " + ("; ".join(parts) if parts else "n/a"))


def _note(method: str, entry: dict, cfg: dict) -> str:
    notes = []
    if "prefix_fraction_with_trees" in entry:
        notes.append(f"sets with >=1 tree: prefix {entry['prefix_fraction_with_trees']:.2f}, "
                     f"non-prefix {entry.get('non-prefix_fraction_with_trees') or 0:.2f}")
    if method in ("mean-impute", "lgbm-plain"):
        notes.append("one shared fit")
    if method == "oracle":
        notes.append(f"non-prefix: {entry['sets_per_seed']['non-prefix']} of "
                     f"{cfg['nonprefix']} sets/seed; fit s = all its fits")
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
    """Compile the numba kernels of GBFS and of the anytime model outside the timings."""
    X = np.random.default_rng(0).normal(size=(40, 3))
    y = (np.arange(40) % 2).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        GBFS(n_estimators=2).fit(X, y)
        model = AnytimeLinearModel(groups=[[0], [1, 2]], costs=[1.0, 2.0]).fit(X, y)
        model.predict(X, computed_groups=(0, 1))


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
    parser.add_argument("--oracle-nonprefix", type=int, default=None,
                        help="non-prefix sets per seed the oracle is retrained for "
                             "(default 4; quick 1)")
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
           "oracle_nonprefix": (args.oracle_nonprefix if args.oracle_nonprefix is not None
                                else (1 if quick else 4)),
           "lgb_params": LGB_PARAMS, "lgb_rounds": LGB_ROUNDS, "lgb_patience": LGB_PATIENCE,
           "masked_copies": MASKED_COPIES, "proba_clip": PROBA_CLIP, "tie_abs": TIE_ABS,
           "lightgbm": lgb.__version__}
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
