"""Which group next, per example: acquisition policies side by side (AFABench's protocol).

    python benchmarks/acquisition_quality.py                    # every set, 2 seeds, Spambase
    python benchmarks/acquisition_quality.py --quick            # smoke run: 2 small sets, 1 seed
    python benchmarks/acquisition_quality.py --datasets cube-nm,diabetes --seeds 2 --out /tmp/a.json
    python benchmarks/acquisition_quality.py --datasets none --spambase /path/to/spambase.csv
    python benchmarks/acquisition_quality.py --no-spambase         # the synthetic and bundled sets
    python benchmarks/acquisition_quality.py --datasets friedman1 --no-spambase --merge
                                        # rerun one set into the JSON, keeping the others
    python benchmarks/acquisition_quality.py --torch-peers      # also GDFS and DIME (torch)
    python benchmarks/acquisition_quality.py --add gdfs,dime    # only them, into the JSON

Protocol (after Aronsson et al., AFABench, 2025): each data set is split 60/20/20 (seeded)
into training rows (the predictor's fit), a held-out window (the policies' neighbours and
per-set figures; the predictor never saw it) and test rows (at most ``TEST_EPISODES`` of
them, a seeded random subset). Generated sets have ``ROWS`` rows (AFABench's CUBE size).
Each test row is an episode from the empty set: the policy picks a group, the row reveals
its features, until the policy stops or nothing fits the hard cap; the predictor then
answers with the groups acquired. Caps: ``CAP_FRACTIONS`` of the total cost; the exchange-rate sweep
(``LAMBDA_SCALES`` times ``(L(empty) - L(all)) / total cost`` of the window) without a cap
gives further points for the per-example policies.

Predictor (the same for every policy): the project's GBFS with its defaults
(``feature_groups``, ``group_costs``): logistic loss for binary sets, squared for
regression, softmax (K trees a round, ``p = softmax(H)``) for the 8-class CUBE sets.

Policies: ``ours`` (``ConditionedAcquisition``, gated, falling back to the per-set rule),
``aaco`` (the same without the gate: always per-example), ``greedy-knn``
(``GreedyNeighbours``), ``per-set`` (the project's rule: ``SetFigures.next_group`` over the
held-out window with the GBFS scorer, as the gbfs family serves it; for CUBE the same rule
on the held-out log-loss), ``random`` (a random order, skipping groups that do not fit),
``cegb`` (LightGBM's cost-efficient gradient boosting, ``cegb_penalty_feature_lazy`` =
scale x group cost / group size per feature, a sweep of scales, each early-stopped on
the window; a row pays for every group a tree path of it reads), with ``--torch-peers``
GDFS and DIME (``benchmarks/torch_peers.py``: their choices answered by the shared predictor, and
``own_area`` by their own networks), and the bounds ``full`` (every group) and ``oracle``
(per row, the set within the cap with the least loss on the row's own label). Beside
them ``ours-auto``: the product as deployed, the gated policy over the ``auto`` family's
predictor (``fit_auto_predictor``), answered by it: the system to set beside the neural
peers' own networks. Metrics:
accuracy (AUROC too for binary sets) or explained variance; per policy the normalised
area under metric vs mean cost (trapezoids through (0, metric of the empty set) and the
cap points, flat to the total cost, divided by it), the metric at each cap and the least
mean cost whose metric reaches 99 % of ``full``. In capped episodes the per-example
policies run with exchange rate 0 (``CAP_RATE``): they stop when no set within the cap
lowers the held-out loss; the per-set rule, the random order and ``ours`` when its gate
chose the per-set rule spend the cap.

Spambase (``--spambase``, the Spambase CSV from UCI): the protocol of Covert et al.,
"Learning to Maximize Mutual Information for Dynamic Feature Selection" (ICML 2023):
features mean-centred, rows shuffled by ``numpy.random.default_rng(0)``, the first 20 %
test, the next 20 % the held-out window, the rest training; each feature its own group at
cost 1; AUROC and accuracy after k acquisitions (a hard cap of k, no exchange rate, so
every policy spends it), next to their published table. Policies: ``per-set`` (the
project's rule over GBFS, answered by GBFS, as on the other sets); ``auto`` as a user fits
it for small budgets: ``forward_specialist_sets`` (``SPAMBASE_STEPS`` groups, each ranked
by a refit on exactly the candidate set, on ``SPAMBASE_FOLDS`` folds of the training and
held-out rows, for the ``SPAMBASE_SHORTLIST`` best on the held-out rows alone), its
prefixes as ``PerSetChoice(specialist_sets=...)`` fitted on the training rows with the
held-out window as validation; the k-th prefix of its sequence, answered by it; ``ours``,
``aaco``, ``greedy-knn``: the per-example policies over the same ``auto``
(``set_predictor``), their pool its first ``MAX_GROUPS`` groups, after them (and
wherever the plan is the computed set itself) its order.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightgbm as lgb
import numpy as np
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from algorithms.acquisition import (  # noqa: E402
    ConditionedAcquisition,
    GreedyNeighbours,
    LossTable,
    best_superset,
    masked_predictor,
    set_predictor,
)
from algorithms.datasets.acquisition_synthetic import (  # noqa: E402
    make_cube,
    make_cube_nm,
    make_switch,
)
from algorithms.datasets.grouped_synthetic import (  # noqa: E402
    make_latent_groups,
    make_regime_groups,
)
from algorithms.gbfs import GBFS  # noqa: E402
from algorithms.per_set import PerSetChoice, SetFigures  # noqa: E402
from algorithms.per_set.choice import GBFS_CLASSIFICATION  # noqa: E402
from algorithms.per_set.forward import forward_specialist_sets  # noqa: E402
from benchmarks._report import machine, table  # noqa: E402
from benchmarks.budget_quality import (  # noqa: E402
    load_breast_cancer_task,
    load_diabetes_task,
    load_digits_task,
    load_friedman_task,
)

CAP_FRACTIONS = (0.1, 0.25, 0.5, 0.75, 1.0)
LAMBDA_SCALES = (2.0, 1.0, 0.5, 0.25, 0.1)
CEGB_SCALES = (0.0, 0.03, 0.1, 0.3, 1.0, 3.0)
CEGB_ROUNDS, CEGB_PATIENCE = 5000, 50   # CEGB's boosting: early-stopped on the window
CAP_RATE = 0.0            # capped episodes: a policy stops when no set lowers its loss
POLICIES = ("ours", "aaco", "greedy-knn", "per-set", "random", "cegb", "full", "oracle")
TORCH_POLICIES = ("gdfs", "dime")   # --torch-peers (PyTorch on the CPU, benchmarks/torch_peers.py)
SYSTEM_POLICIES = ("ours-auto",)   # ours over the predictor a user deploys (``auto``)
MAX_GROUPS = 10           # the exact search's pool on sets with more groups
SPAMBASE_K = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 20, 25)
GDFS_AUROC = (82.74, 88.83, 92.62, 95.25, 95.76, 96.27, 96.36, 96.61, 96.66, 96.92, 97.99,
              97.95, 97.97)
GDFS_ACCURACY = (78.48, 82.28, 85.76, 90.54, 90.87, 91.20, 90.98, 91.85, 92.50, 92.17,
                 93.37, 93.26, 93.80)
SPAMBASE_STEPS = 6        # auto's forward path over specialists (Spambase)
SPAMBASE_FOLDS = 4        # ... ranked on 4 folds of the training and held-out rows
SPAMBASE_SHORTLIST = 5    # ... for the 5 best candidates on the held-out rows alone
# the UCI Spambase CSV (57 features, then the label; not bundled): --spambase PATH, or
# the SPAMBASE_CSV environment variable, or this file when present
DEFAULT_SPAMBASE = Path(os.environ.get("SPAMBASE_CSV", ROOT / "benchmarks" / "data" /
                                       "spambase.csv"))
LGB_PARAMS = {"learning_rate": 0.1, "num_leaves": 15, "min_data_in_leaf": 10,
              "num_threads": 1, "verbose": -1, "deterministic": True, "force_col_wise": True}


@dataclass
class Data:
    X: np.ndarray
    y: np.ndarray
    kind: str                 # "regression" | "binary" | "multiclass"
    groups: list[list[int]]
    costs: np.ndarray
    names: list[str]
    source: str


def _from_task(task) -> Data:
    kind = "regression" if task.kind == "regression" else "binary"
    return Data(task.X, task.y, kind, [g.tolist() for g in task.groups], task.costs,
                task.group_names, task.source)


def _grouped(made, source: str, kind: str = "binary") -> Data:
    """A ``GroupedDataset`` of ``algorithms.datasets.grouped_synthetic`` (``kind``: "binary"
    or "regression")."""
    return Data(made.X, made.y, kind, [g.tolist() for g in made.groups], made.costs,
                list(made.names) or [f"group {g}" for g in range(len(made.groups))], source)


def _generated(kind: str, source: str, made) -> Data:
    X, y, groups, costs, names = made
    return Data(X, y, kind, groups, costs, names, source)


ROWS = 20_000             # rows of each generated set: AFABench's CUBE size
TEST_EPISODES = 1000      # test rows run as episodes at most (a seeded random subset)
DATASETS: dict[str, Callable[[int, int], Data]] = {
    "cube-nm": lambda n, s: _generated("binary", f"make_cube_nm({n})", make_cube_nm(n, seed=s)),
    "syn1": lambda n, s: _generated("binary", f"make_switch(1, {n})", make_switch(1, n, seed=s)),
    "syn2": lambda n, s: _generated("binary", f"make_switch(2, {n})", make_switch(2, n, seed=s)),
    "syn3": lambda n, s: _generated("binary", f"make_switch(3, {n})", make_switch(3, n, seed=s)),
    "latent": lambda n, s: _grouped(make_latent_groups(n, "classification", seed=s),
                                    f"make_latent_groups({n}, 'classification')"),
    "regime": lambda n, s: _grouped(make_regime_groups(n, "classification", seed=s),
                                    f"make_regime_groups({n}, 'classification')"),
    "breast-cancer": lambda n, s: _from_task(load_breast_cancer_task(False)),
    "digits-parity": lambda n, s: _from_task(load_digits_task(False)),
    "diabetes": lambda n, s: _from_task(load_diabetes_task(False)),
    "friedman1": lambda n, s: _from_task(load_friedman_task(False)),
    "regime-regression": lambda n, s: _grouped(make_regime_groups(n, "regression", seed=s),
                                               f"make_regime_groups({n}, 'regression')",
                                               "regression"),
    "latent-regression": lambda n, s: _grouped(make_latent_groups(n, "regression", seed=s),
                                               f"make_latent_groups({n}, 'regression')",
                                               "regression"),
    "cube": lambda n, s: _generated("multiclass", f"make_cube({n})", make_cube(n, seed=s)),
    "cube-nonuniform": lambda n, s: _generated(
        "multiclass", f"make_cube({n}, nonuniform=True)", make_cube(n, nonuniform=True, seed=s)),
}
QUICK_DATASETS = ("cube-nm", "diabetes")


# ----------------------------------------------------------------------------- predictors
def fit_predictor(data: Data, Xtr: np.ndarray, ytr: np.ndarray, seed: int):
    """``(predict, scorer)``: the masked-row predictor and, for GBFS, its per-set scorer."""
    loss = {"regression": "squared", "binary": "logistic", "multiclass": "softmax"}[data.kind]
    model = GBFS(loss=loss, feature_groups=data.groups, group_costs=data.costs,
                 random_state=seed).fit(Xtr, ytr)
    task = "regression" if data.kind == "regression" else "classification"
    if data.kind == "multiclass":     # SetFigures (the per-set rule's scorer) is binary
        return masked_predictor(model, task), None
    return masked_predictor(model, task), (
        lambda Z, S: model.decision_function(Z, computed_groups=S))


def per_set_rule(data: Data, scorer, Xva: np.ndarray, yva: np.ndarray):
    """The project's per-set rule over the held-out window (None for multi-class)."""
    if scorer is None:
        return None
    task = "regression" if data.kind == "regression" else "classification"
    target = yva if task == "regression" else np.where(yva > 0, 1.0, -1.0)
    figures = SetFigures(scorer, Xva, target, task=task, groups=data.groups, costs=data.costs)

    def choose(S, max_cost):
        step = figures.next_group(S, max_cost=max_cost)
        return None if step is None else int(step[0])
    return choose


# -------------------------------------------------------------------------------- metrics
def masked_rows(data: Data, X: np.ndarray, sets: list[tuple[int, ...]]) -> np.ndarray:
    Z = np.full_like(X, np.nan)
    for i, S in enumerate(sets):
        features = [f for g in S for f in data.groups[g]]
        Z[i, features] = X[i, features]
    return Z


def metrics(data: Data, y: np.ndarray, output: np.ndarray) -> dict[str, float]:
    if data.kind == "regression":
        return {"ev": float(1.0 - np.mean((y - output) ** 2) / np.var(y))}
    if data.kind == "multiclass":
        return {"accuracy": float(np.mean(np.argmax(output, axis=1) == y))}
    return {"accuracy": float(np.mean((output > 0.5) == (y > 0.5))),
            "auroc": float(roc_auc_score(y, output))}


def evaluate_sets(data: Data, predict, X: np.ndarray, y: np.ndarray,
                  sets: list[tuple[int, ...]]) -> dict[str, float]:
    """The metrics of ``predict`` on rows ``X`` (labels ``y``), each knowing only its set
    of ``sets``, and the mean cost of those sets."""
    out = metrics(data, y, predict(masked_rows(data, X, sets)))
    out["mean_cost"] = float(np.mean([data.costs[list(S)].sum() for S in sets]))
    return out


def primary(data: Data) -> str:
    return "ev" if data.kind == "regression" else "accuracy"


def curve_area(points: list[tuple[float, float]], empty: float, total: float) -> float:
    """Normalised area under metric vs mean cost: (0, empty), the points, flat to total."""
    pts = sorted([(0.0, empty)] + [(min(c, total), m) for c, m in points])
    xs = np.array([p[0] for p in pts] + [total])
    ys = np.array([p[1] for p in pts] + [pts[-1][1]])
    return float(np.sum((xs[1:] - xs[:-1]) * (ys[1:] + ys[:-1]) / 2) / total)


def cost_to_reach(points: list[tuple[float, float]], target: float) -> float | None:
    reached = [c for c, m in points if m >= target]
    return min(reached) if reached else None


# ------------------------------------------------------------------------------ policies
def cegb_points(data: Data, Xtr, ytr, Xva, yva, Xte, yte, seed: int
                ) -> list[dict[str, Any]]:
    """LightGBM CEGB over a sweep of penalty scales: (mean cost paid, metric) per scale,
    each booster early-stopped on the window (``CEGB_PATIENCE`` rounds, at most
    ``CEGB_ROUNDS``: a cap that does not bind) and used at its best iteration."""
    group_of = np.empty(data.X.shape[1], dtype=np.int64)
    for g, features in enumerate(data.groups):
        group_of[features] = g
    per_feature = [float(data.costs[group_of[f]]) / len(data.groups[group_of[f]])
                   for f in range(data.X.shape[1])]
    objective = {"regression": {"objective": "regression"}, "binary": {"objective": "binary"},
                 "multiclass": {"objective": "multiclass",
                                "num_class": int(data.y.max()) + 1}}[data.kind]
    out = []
    for scale in CEGB_SCALES:
        params = dict(LGB_PARAMS, **objective, seed=seed, cegb_tradeoff=1.0,
                      cegb_penalty_feature_lazy=[scale * c for c in per_feature])
        booster = lgb.train(params, lgb.Dataset(Xtr, ytr), num_boost_round=CEGB_ROUNDS,
                            valid_sets=[lgb.Dataset(Xva, yva)],
                            callbacks=[lgb.early_stopping(CEGB_PATIENCE, verbose=False)])
        best = booster.best_iteration
        paths = _leaf_paths(booster.dump_model(num_iteration=best))
        leaves = booster.predict(Xte, pred_leaf=True, num_iteration=best).reshape(
            Xte.shape[0], -1)
        cost = np.empty(Xte.shape[0])
        for i, row in enumerate(leaves):
            used = set()
            for t, leaf in enumerate(row):
                used |= paths[t][int(leaf)]
            cost[i] = sum(data.costs[g] for g in {int(group_of[f]) for f in used})
        out.append({"scale": scale, "mean_cost": float(cost.mean()),
                    "rounds": int(best), **metrics(data, yte, booster.predict(
                        Xte, num_iteration=best))})
    return out


def _leaf_paths(dump: dict) -> list[dict[int, frozenset]]:
    """Per tree: leaf index -> the features its path reads."""
    out = []
    for tree in dump["tree_info"]:
        paths: dict[int, frozenset] = {}
        stack = [(tree["tree_structure"], frozenset())]
        while stack:
            node, seen = stack.pop()
            if "leaf_index" in node or "split_feature" not in node:
                paths[int(node.get("leaf_index", 0))] = seen
                continue
            here = seen | {int(node["split_feature"])}
            stack += [(node["left_child"], here), (node["right_child"], here)]
        out.append(paths)
    return out


def random_episode(costs: np.ndarray, cap: float, rng: np.random.Generator) -> list[int]:
    order, spent = [], 0.0
    for g in rng.permutation(costs.size):
        if spent + costs[g] <= cap + 1e-9:
            order.append(int(g))
            spent += costs[g]
    return order


def oracle_sets(test_table: LossTable, cap: float) -> list[tuple[int, ...]]:
    """Per test row, the pool set within ``cap`` with the least loss on its own label."""
    subs = test_table.supersets(0, cap)
    test_table.ensure(subs)
    return [test_table.groups_of(best_superset(test_table.values, np.array([i]), 0,
                                               test_table.full, cap, test_table.mask_cost,
                                               0.0)[0])
            for i in range(test_table.n_rows)]


def split(data: Data, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(train, window, test)`` row indices: the seeded 60/20/20 split (stratified for
    classification); of more than ``TEST_EPISODES`` test rows, a seeded random subset of
    that many (sorted), the same for every policy."""
    strat = data.y if data.kind != "regression" else None
    index = np.arange(data.y.size)
    rest, test = train_test_split(index, test_size=0.2, stratify=strat, random_state=seed)
    train, val = train_test_split(rest, test_size=0.25, random_state=seed,
                                  stratify=None if strat is None else strat[rest])
    if test.size > TEST_EPISODES:
        test = np.sort(np.random.default_rng(seed).choice(test, TEST_EPISODES, replace=False))
    return train, val, test


def torch_peer_results(data: Data, seed: int, predict=None, quick: bool = False
                       ) -> dict[str, Any]:
    """GDFS and DIME (``benchmarks/torch_peers.py``) on the seeded split: per policy its
    cap points (the groups it acquires answered by the shared predictor ``predict``, the
    GBFS of the other policies, fitted here when None; ``own``: by the network's own
    predictor), area, cost to 99 %, and for DIME the exchange-rate sweep."""
    import torch

    from benchmarks.torch_peers import DIME, GDFS

    torch.set_num_threads(1)
    train, val, test = split(data, seed)
    X, y = data.X, data.y
    if predict is None:
        predict, _ = fit_predictor(data, X[train], y[train], seed)
    key, total = primary(data), float(data.costs.sum())
    n_classes = int(y.max()) + 1 if data.kind == "multiclass" else 2

    def evaluate(model, sets) -> dict[str, Any]:
        return {**evaluate_sets(data, predict, X[test], y[test], sets),
                "own": metrics(data, y[test], model.predict_output(X[test], sets))}

    empty = metrics(data, y[test], predict(masked_rows(data, X[test], [()] * len(test))))
    full = metrics(data, y[test], predict(masked_rows(
        data, X[test], [tuple(range(len(data.groups)))] * len(test))))
    out: dict[str, Any] = {}
    for name, cls in (("gdfs", GDFS), ("dime", DIME)):
        started = time.perf_counter()
        model = cls(data.groups, data.costs, data.kind, n_classes, random_state=seed).fit(
            X[train], y[train], X[val], y[val])
        fit_seconds = time.perf_counter() - started
        caps, decide = [], 0.0
        for fraction in CAP_FRACTIONS:
            started = time.perf_counter()
            sets = model.episodes(X[test], max_cost=fraction * total)
            decide += time.perf_counter() - started
            caps.append({"fraction": fraction, "cap": fraction * total, **evaluate(model, sets)})
        points = [(c["mean_cost"], c[key]) for c in caps]
        own_empty = metrics(data, y[test], model.predict_output(X[test], [()] * len(test)))
        entry = {"caps": caps, "area": curve_area(points, empty[key], total),
                 "own_area": curve_area([(c["mean_cost"], c["own"][key]) for c in caps],
                                        own_empty[key], total),
                 "cost_to_99": cost_to_reach(points, 0.99 * full[key]),
                 "fit_seconds": fit_seconds,
                 "ms_per_decision": 1000 * decide / (len(test) * len(CAP_FRACTIONS))}
        if name == "dime" and not quick:
            unit = model.loss_unit(X[val], y[val])
            entry["lambda_sweep"] = [
                {"lambda": scale * unit,
                 **evaluate(model, model.episodes(X[test], max_cost=None,
                                                  exchange_rate=scale * unit))}
                for scale in LAMBDA_SCALES]
        out[name] = entry
    return out


def fit_auto_predictor(data: Data, Xtr, ytr, Xva, yva, seed: int):
    """The predictor the service's ``auto`` family fits: ``PerSetChoice`` with its defaults
    (binary labels as -1 / +1), the window as its validation rows; for K classes its GBFS
    half alone, a softmax GBFS with that half's defaults. The masked-row ``predict``."""
    task = "regression" if data.kind == "regression" else "classification"
    if data.kind == "multiclass":
        model = GBFS(loss="softmax", feature_groups=data.groups, group_costs=data.costs,
                     random_state=seed, **GBFS_CLASSIFICATION).fit(Xtr, ytr)
        return masked_predictor(model, task)
    target = ytr if task == "regression" else np.where(ytr > 0.5, 1.0, -1.0)
    held = yva if task == "regression" else np.where(yva > 0.5, 1.0, -1.0)
    model = PerSetChoice(task=task, groups=data.groups, costs=data.costs).fit(
        Xtr, target, X_val=Xva, y_val=held)
    return set_predictor(model, data.groups, task)


def system_results(data: Data, seed: int) -> dict[str, Any]:
    """``ours-auto``: the product as a user deploys it, the gated per-example policy over
    ``auto``'s predictor (``fit_auto_predictor``, its per-set rule the fallback inside the
    policy), episodes answered by ``auto``; to set beside the neural peers' own networks."""
    train, val, test = split(data, seed)
    X, y = data.X, data.y
    loss = "squared" if data.kind == "regression" else "log"
    started = time.perf_counter()
    predict = fit_auto_predictor(data, X[train], y[train], X[val], y[val], seed)
    fit_seconds = time.perf_counter() - started
    started = time.perf_counter()
    policy = ConditionedAcquisition(max_groups=MAX_GROUPS, random_state=seed).fit(
        predict, X[val], y[val], groups=data.groups, costs=data.costs, loss=loss)
    policy_seconds = time.perf_counter() - started
    key, total = primary(data), float(data.costs.sum())

    def evaluate(sets) -> dict[str, float]:
        return evaluate_sets(data, predict, X[test], y[test], sets)

    empty = evaluate([()] * len(test))
    full = evaluate([tuple(range(len(data.groups)))] * len(test))
    rate = CAP_RATE if policy.per_example_ else None
    caps = [{"fraction": f, "cap": f * total,
             **evaluate([tuple(sorted(policy.episode(x, max_cost=f * total,
                                                     exchange_rate=rate)))
                         for x in X[test]])} for f in CAP_FRACTIONS]
    points = [(c["mean_cost"], c[key]) for c in caps]
    return {"ours-auto": {"caps": caps, "area": curve_area(points, empty[key], total),
                          "cost_to_99": cost_to_reach(points, 0.99 * full[key]),
                          "full": full, "gate": policy.gate_, "fit_seconds": fit_seconds,
                          "policy_fit_seconds": policy_seconds}}


def run_dataset(name: str, data: Data, seed: int, quick: bool,
                torch_peers: bool = False) -> dict[str, Any]:
    """Every policy on one seeded split of one data set (GDFS and DIME with
    ``torch_peers``)."""
    train, val, test = split(data, seed)
    X, y = data.X, data.y
    Xtr, ytr, Xva, yva, Xte, yte = X[train], y[train], X[val], y[val], X[test], y[test]
    loss = "squared" if data.kind == "regression" else "log"
    started = time.perf_counter()
    predict, scorer = fit_predictor(data, Xtr, ytr, seed)
    fit_seconds = time.perf_counter() - started
    fallback = per_set_rule(data, scorer, Xva, yva)
    started = time.perf_counter()
    ours = ConditionedAcquisition(max_groups=MAX_GROUPS, random_state=seed).fit(
        predict, Xva, yva, groups=data.groups, costs=data.costs, loss=loss, fallback=fallback)
    policy_seconds = time.perf_counter() - started
    aaco = ConditionedAcquisition(max_groups=MAX_GROUPS, gate=False).fit(
        predict, Xva, yva, groups=data.groups, costs=data.costs, loss=loss,
        fallback=fallback, table=ours.table_)
    greedy = GreedyNeighbours(max_groups=MAX_GROUPS).fit(
        predict, Xva, yva, groups=data.groups, costs=data.costs, loss=loss,
        fallback=fallback, table=ours.table_)
    total = float(data.costs.sum())
    key = primary(data)

    def evaluate(sets: list[tuple[int, ...]]) -> dict[str, float]:
        return evaluate_sets(data, predict, Xte, yte, sets)

    full = evaluate([tuple(range(len(data.groups)))] * len(yte))
    empty = evaluate([()] * len(yte))
    test_table = LossTable(predict, Xte, yte, groups=data.groups, costs=data.costs, loss=loss,
                           pool=ours.pool_)
    rng = np.random.default_rng(seed)
    runners = {
        "ours": lambda x, cap: ours.episode(x, max_cost=cap, exchange_rate=CAP_RATE
                                            if ours.per_example_ else None),
        "aaco": lambda x, cap: aaco.episode(x, max_cost=cap, exchange_rate=CAP_RATE),
        "greedy-knn": lambda x, cap: greedy.episode(x, max_cost=cap, exchange_rate=CAP_RATE),
        "random": lambda x, cap: random_episode(data.costs, cap, rng),
    }
    result: dict[str, Any] = {"dataset": name, "seed": seed, "full": full, "empty": empty,
                              "gate": ours.gate_, "fit_seconds": fit_seconds,
                              "policy_fit_seconds": policy_seconds, "policies": {}}
    for policy in ("ours", "aaco", "greedy-knn", "per-set", "random", "oracle"):
        caps = []
        decide_seconds, decisions = 0.0, 0
        for fraction in CAP_FRACTIONS:
            cap = fraction * total
            if policy == "per-set":
                path = ours.episode(Xte[0], max_cost=cap, per_example=False,
                                    fallback=fallback)
                sets = [tuple(sorted(path))] * len(yte)
            elif policy == "oracle":
                sets = oracle_sets(test_table, cap)
            else:
                started = time.perf_counter()
                sets = [tuple(sorted(runners[policy](x, cap))) for x in Xte]
                decide_seconds += time.perf_counter() - started
                decisions += sum(len(S) + 1 for S in sets)
            caps.append({"fraction": fraction, "cap": cap, **evaluate(sets)})
        points = [(c["mean_cost"], c[key]) for c in caps]
        entry = {"caps": caps, "area": curve_area(points, empty[key], total),
                 "cost_to_99": cost_to_reach(points, 0.99 * full[key])}
        if decisions:
            entry["ms_per_decision"] = 1000 * decide_seconds / decisions
        result["policies"][policy] = entry
    if not quick:   # the exchange-rate sweep, no cap
        base = ours.table_.column_means(np.array([0, ours.table_.full]))
        unit = max(float(base[0] - base[1]), 1e-12) / total
        for policy, model in (("ours", ours), ("aaco", aaco), ("greedy-knn", greedy)):
            sweep = []
            for scale in LAMBDA_SCALES:
                sets = [tuple(sorted(model.episode(x, max_cost=None,
                                                   exchange_rate=scale * unit)))
                        for x in Xte]
                sweep.append({"lambda": scale * unit, **evaluate(sets)})
            result["policies"][policy]["lambda_sweep"] = sweep
    cegb = cegb_points(data, Xtr, ytr, Xva, yva, Xte, yte, seed)
    points = [(c["mean_cost"], c[key]) for c in cegb]
    result["policies"]["cegb"] = {"points": cegb, "area": curve_area(points, empty[key], total),
                                  "cost_to_99": cost_to_reach(points, 0.99 * full[key])}
    result["policies"]["full"] = {"area": full[key], "cost_to_99": total}
    result["policies"].update(system_results(data, seed))
    if torch_peers:
        result["policies"].update(torch_peer_results(data, seed, predict, quick))
    return result


# ----------------------------------------------------------------------------- Spambase
SPAMBASE_POLICIES = ("per-set", "auto", "ours", "aaco", "greedy-knn")


def load_spambase(path: Path) -> tuple[Data, np.ndarray, np.ndarray, np.ndarray]:
    """Spambase as GDFS's protocol has it (module docstring): ``(data, train, val, test)``."""
    raw = np.genfromtxt(path, delimiter=",", skip_header=1)
    X, y = raw[:, :-1] - raw[:, :-1].mean(axis=0), raw[:, -1]
    index = np.arange(y.size)
    np.random.default_rng(0).shuffle(index)
    n_test = int(0.2 * y.size)
    test, val, train = index[:n_test], index[n_test:2 * n_test], index[2 * n_test:]
    data = Data(X, y, "binary", [[f] for f in range(X.shape[1])], np.ones(X.shape[1]),
                [f"feature {f}" for f in range(X.shape[1])], str(path.name))
    return data, train, val, test


def fit_auto(data: Data, Xtr, ytr, Xva, yva, steps: int, folds: int | None):
    """``auto`` as a user fits it for small budgets: the forward path over specialists
    (``forward_specialist_sets``, ``steps`` long, ranked on ``folds`` folds of the training
    and held-out rows for a shortlist), its prefixes as ``PerSetChoice``'s ``specialist_sets``."""
    path = forward_specialist_sets(Xtr, ytr, Xva, yva, groups=data.groups, costs=data.costs,
                                   task="classification", steps=steps, folds=folds,
                                   shortlist=SPAMBASE_SHORTLIST)
    auto = PerSetChoice(task="classification", groups=data.groups, costs=data.costs,
                        specialist_sets=[list(S) for S in path.sets],
                        max_specialists=len(path.sets)).fit(Xtr, ytr, X_val=Xva, y_val=yva)
    return path, auto


def run_spambase(path: Path, steps: int = SPAMBASE_STEPS,
                 folds: int | None = SPAMBASE_FOLDS) -> dict[str, Any]:
    """GDFS's Spambase protocol (module docstring): AUROC and accuracy (%) at each k."""
    data, train, val, test = load_spambase(path)
    X, y = data.X, data.y
    started = time.perf_counter()
    predict, scorer = fit_predictor(data, X[train], y[train], 0)
    fit_seconds = time.perf_counter() - started
    rule = per_set_rule(data, scorer, X[val], y[val])
    gbfs_order = _order(lambda S: rule(S, None), max(SPAMBASE_K))
    started = time.perf_counter()
    forward, auto = fit_auto(data, X[train], y[train], X[val], y[val], steps, folds)
    auto_seconds = time.perf_counter() - started
    auto_predict = set_predictor(auto, data.groups, "classification")
    order = [int(g) for g in auto.sequence_]
    print(f"spambase: forward path {list(forward.order)}, auto's sequence {order[:10]} "
          f"({auto_seconds:.0f} s)", flush=True)

    def fallback(S, max_cost):
        """``auto``'s per-set order: the next group of its sequence not yet computed
        (each feature costs 1)."""
        have = set(S)
        room = len(order) if max_cost is None else max_cost - len(have)
        return next((g for g in order if g not in have), None) if room >= 1 else None

    pool = order[:MAX_GROUPS]
    common = {"groups": data.groups, "costs": data.costs, "loss": "log", "pool": pool,
              "fallback": fallback}
    started = time.perf_counter()
    ours = ConditionedAcquisition(max_groups=MAX_GROUPS).fit(auto_predict, X[val], y[val],
                                                              **common)
    policy_seconds = time.perf_counter() - started
    aaco = ConditionedAcquisition(max_groups=MAX_GROUPS, gate=False).fit(
        auto_predict, X[val], y[val], **common, table=ours.table_)
    greedy = GreedyNeighbours(max_groups=MAX_GROUPS).fit(auto_predict, X[val], y[val],
                                                         **common, table=ours.table_)
    Xte, yte = X[test], y[test]
    rows = []
    for j, k in enumerate(SPAMBASE_K):
        row: dict[str, Any] = {"k": k, "gdfs_auroc": GDFS_AUROC[j],
                               "gdfs_accuracy": GDFS_ACCURACY[j]}
        for name in SPAMBASE_POLICIES:
            if name == "per-set":     # the project's rule over GBFS, answered by GBFS
                sets, answer = [tuple(sorted(gbfs_order[:k]))] * yte.size, predict
            elif name == "auto":      # auto's own sequence, answered by auto
                sets, answer = [tuple(sorted(order[:k]))] * yte.size, auto_predict
            else:
                model = {"ours": ours, "aaco": aaco, "greedy-knn": greedy}[name]
                sets = [tuple(sorted(model.episode(x, max_cost=k))) for x in Xte]
                answer = auto_predict
            out = metrics(data, yte, answer(masked_rows(data, Xte, sets)))
            row[f"{name}_auroc"] = round(100 * out["auroc"], 2)
            row[f"{name}_accuracy"] = round(100 * out["accuracy"], 2)
        rows.append(row)
        print(f"spambase k={k}: " + ", ".join(f"{key} {value}" for key, value in row.items()
                                              if key != "k"), flush=True)
    return {"rows": rows, "gate": ours.gate_, "order": order[:max(SPAMBASE_K)],
            "gbfs_order": gbfs_order[:max(SPAMBASE_K)],
            "forward": {"steps": steps, "folds": folds, "shortlist": SPAMBASE_SHORTLIST,
                        "order": list(forward.order),
                        "figures": list(forward.figures)},
            "auto_answerers": auto.sequence_half_[:max(SPAMBASE_K) + 1],
            "fit_seconds": fit_seconds, "auto_fit_seconds": auto_seconds,
            "policy_fit_seconds": policy_seconds, "split": {"train": int(train.size),
                                                            "val": int(val.size),
                                                            "test": int(test.size)}}


def spambase_torch_peers(path: Path) -> dict[str, Any]:
    """GDFS and DIME re-implemented (``benchmarks/torch_peers.py``) on GDFS's Spambase
    protocol, each answered by its own network: per k, AUROC and accuracy (%) as
    ``gdfs_torch_*`` and ``dime_torch_*`` (beside the published ``gdfs_*``), trained
    unrolling ``max(SPAMBASE_K)`` selections."""
    import torch

    from benchmarks.torch_peers import DIME, GDFS

    torch.set_num_threads(1)
    data, train, val, test = load_spambase(path)
    X, y = data.X, data.y
    figures: dict[int, dict[str, float]] = {k: {} for k in SPAMBASE_K}
    seconds = {}
    for name, cls in (("gdfs_torch", GDFS), ("dime_torch", DIME)):
        started = time.perf_counter()
        model = cls(data.groups, data.costs, "binary", steps=max(SPAMBASE_K),
                    random_state=0).fit(X[train], y[train], X[val], y[val])
        seconds[name] = time.perf_counter() - started
        for k in SPAMBASE_K:
            sets = model.episodes(X[test], max_cost=float(k))
            out = metrics(data, y[test], model.predict_output(X[test], sets))
            figures[k][f"{name}_auroc"] = round(100 * out["auroc"], 2)
            figures[k][f"{name}_accuracy"] = round(100 * out["accuracy"], 2)
        print(f"spambase {name}: " + ", ".join(
            f"k={k} {figures[k][name + '_auroc']} / {figures[k][name + '_accuracy']}"
            for k in SPAMBASE_K) + f" ({seconds[name]:.0f} s)", flush=True)
    return {"figures": figures, "fit_seconds": seconds}


def _order(choose: Callable[[tuple[int, ...]], int | None], steps: int) -> list[int]:
    """The per-set path of ``choose`` from the empty set, ``steps`` groups long."""
    order: list[int] = []
    while len(order) < steps and (g := choose(tuple(sorted(order)))) is not None:
        order.append(int(g))
    return order


# ---------------------------------------------------------------------------- aggregates
def aggregate(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per data set and policy: mean and standard error over seeds of the area, the paired
    difference to the per-set rule and to AACO, the metric at each cap, cost to 99 %."""
    out: dict[str, Any] = {}
    for name in sorted({r["dataset"] for r in results}):
        mine = [r for r in results if r["dataset"] == name]
        entry = {}
        for policy in present_policies(mine):
            areas = np.array([r["policies"][policy]["area"] for r in mine])
            row: dict[str, Any] = {"area": float(areas.mean()),
                                   "area_se": _se(areas)}
            for other in ("per-set", "aaco"):
                diff = areas - np.array([r["policies"][other]["area"] for r in mine])
                row[f"vs_{other}"] = float(diff.mean())
                row[f"vs_{other}_se"] = _se(diff)
            reach = [r["policies"][policy]["cost_to_99"] for r in mine]
            row["cost_to_99"] = None if None in reach else float(np.mean(reach))
            if "caps" in mine[0]["policies"][policy]:
                key = "ev" if "ev" in mine[0]["full"] else "accuracy"
                row["at_caps"] = [float(np.mean([r["policies"][policy]["caps"][j][key]
                                                 for r in mine]))
                                  for j in range(len(CAP_FRACTIONS))]
            ms = [r["policies"][policy].get("ms_per_decision") for r in mine]
            if ms[0] is not None:
                row["ms_per_decision"] = float(np.mean(ms))
            if "own_area" in mine[0]["policies"][policy]:
                own = np.array([r["policies"][policy]["own_area"] for r in mine])
                row["own_area"], row["own_area_se"] = float(own.mean()), _se(own)
            entry[policy] = row
        entry["gate_on"] = sum(bool(r["gate"]["per_example"]) for r in mine)
        entry["seeds"] = len(mine)
        out[name] = entry
    return out


def present_policies(results: list[dict[str, Any]]) -> list[str]:
    """The policies every one of ``results`` ran, in table order."""
    return [p for p in (*POLICIES, *SYSTEM_POLICIES, *TORCH_POLICIES)
            if all(p in r["policies"] for r in results)]


MERGE_KEYS = ("quick", "seeds", "n", "test_episodes", "cap_fractions", "lambda_scales",
              "cegb_scales", "max_groups", "policies")


def merge_payload(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A partial run ``new`` merged into an earlier payload ``old`` (``--merge``).

    The sets with results in ``new`` replace theirs in ``old``; every other set's results,
    ``old``'s Spambase part (unless ``new`` has one) and its configuration stay; the
    aggregates are recomputed over the merged results; ``runs`` lists each run's sets and
    machine. Raises ``ValueError`` when the two configurations differ in a key of
    ``MERGE_KEYS`` (seeds, rows, caps, ...): their figures would not be comparable.
    O(results)."""
    def plain(value):
        return json.loads(json.dumps(value, default=float))

    differ = [k for k in MERGE_KEYS if plain(old["config"].get(k)) != plain(new["config"].get(k))]
    if differ:
        raise ValueError("cannot merge runs whose configurations differ in "
                         + ", ".join(f"{k} ({old['config'].get(k)} vs {new['config'].get(k)})"
                                     for k in differ))
    rerun = [name for name in new["config"]["datasets"]
             if any(r["dataset"] == name for r in new["results"])]
    names = list(old["config"]["datasets"])
    names += [name for name in rerun if name not in names]
    results = [r for r in old["results"] if r["dataset"] not in rerun] + new["results"]
    results.sort(key=lambda r: (names.index(r["dataset"]), r["seed"]))
    described = {**old["datasets"], **new["datasets"]}
    runs = old.get("runs") or [{"datasets": list(old["config"]["datasets"]),
                                "spambase": old.get("spambase") is not None,
                                "machine": old.get("machine")}]
    runs = [*runs, {"datasets": rerun, "spambase": new.get("spambase") is not None,
                    "machine": new.get("machine")}]
    return {**old, "config": {**old["config"], "datasets": names},
            "datasets": {name: described[name] for name in names if name in described},
            "results": results, "aggregates": aggregate(results) if results else {},
            "spambase": new["spambase"] if new.get("spambase") is not None
            else old.get("spambase"),
            "runs": runs}


def _se(values: np.ndarray) -> float:
    return float(values.std(ddof=1) / np.sqrt(values.size)) if values.size > 1 else 0.0


def report(aggregates: dict[str, Any], spambase: dict[str, Any] | None) -> str:
    rows = []
    for name, entry in aggregates.items():
        for policy in [p for p in (*POLICIES, *SYSTEM_POLICIES, *TORCH_POLICIES)
                       if p in entry]:
            a = entry[policy]
            caps = a.get("at_caps")
            rows.append({"data set": name, "policy": policy,
                         "area": f"{a['area']:.4f} ± {a['area_se']:.4f}",
                         "vs per-set": f"{a['vs_per-set']:+.4f}",
                         "vs aaco": f"{a['vs_aaco']:+.4f}",
                         "at 25 / 50 / 100 %": "" if caps is None else
                         " / ".join(f"{caps[j]:.3f}" for j in (1, 2, 4)),
                         "cost to 99 %": a["cost_to_99"],
                         "gate on": f"{entry['gate_on']}/{entry['seeds']}"
                         if policy == "ours" else ""})
    text = table(rows, ["data set", "policy", "area", "vs per-set", "vs aaco",
                        "at 25 / 50 / 100 %", "cost to 99 %", "gate on"],
                 "Area under metric vs mean cost (mean ± se over seeds)")
    if spambase:
        peers = [p for p in ("gdfs_torch", "dime_torch") if f"{p}_auroc" in spambase["rows"][0]]
        columns = ["k", "gdfs_auroc", *(f"{p}_auroc" for p in (*SPAMBASE_POLICIES, *peers)),
                   "gdfs_accuracy",
                   *(f"{p}_accuracy" for p in (*SPAMBASE_POLICIES, *peers))]
        text += "\n" + table(spambase["rows"], columns, "Spambase, GDFS's protocol (%)")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 small sets, 1 seed")
    parser.add_argument("--datasets", help="comma-separated names, or 'none'")
    parser.add_argument("--seeds", type=int)
    parser.add_argument("--n", type=int, help="rows of each generated set")
    parser.add_argument("--spambase", type=Path, help="the Spambase CSV (UCI); default: "
                        "the data folder next to the repository, skipped by --quick")
    parser.add_argument("--no-spambase", action="store_true", help="skip Spambase")
    parser.add_argument("--spambase-steps", type=int, default=SPAMBASE_STEPS,
                        help="auto's forward path over specialists on Spambase")
    parser.add_argument("--spambase-folds", type=int, default=SPAMBASE_FOLDS,
                        help="folds ranking that path (0: the held-out rows alone)")
    parser.add_argument("--out", type=Path,
                        default=ROOT / "benchmarks" / "acquisition_quality.json")
    parser.add_argument("--merge", action="store_true",
                        help="merge into the existing --out: the sets run here replace "
                        "theirs, every other set (and Spambase, unless run) stays; the "
                        "configuration (seeds, n, caps, ...) must match")
    parser.add_argument("--torch-peers", action="store_true",
                        help="also GDFS and DIME (PyTorch on the CPU: pip install torch)")
    parser.add_argument("--add", metavar="POLICIES",
                        help="only these of " + ", ".join((*SYSTEM_POLICIES, *TORCH_POLICIES))
                        + " (comma-separated), added to the results already in --out for "
                        "the same sets and splits; every other policy stays")
    args = parser.parse_args(argv)
    if args.add:
        extra = args.add.split(",")
        unknown = [p for p in extra if p not in (*SYSTEM_POLICIES, *TORCH_POLICIES)]
        if unknown:
            parser.error(f"--add: unknown policies {unknown}")
        return add_policies(args.out, extra, args.datasets, None if args.no_spambase else
                            args.spambase or DEFAULT_SPAMBASE)
    names = list(QUICK_DATASETS if args.quick else DATASETS) if args.datasets is None else \
        [] if args.datasets == "none" else args.datasets.split(",")
    unknown = [n for n in names if n not in DATASETS]
    if unknown:
        parser.error(f"unknown data sets {unknown}; known: {sorted(DATASETS)}")
    seeds = args.seeds or (1 if args.quick else 2)
    n = args.n or (800 if args.quick else ROWS)
    results: list[dict[str, Any]] = []
    spambase = None
    earlier = json.loads(args.out.read_text()) if args.merge and args.out.exists() else None

    def write() -> str:
        aggregates = aggregate(results) if results else {}
        payload = {"config": {"quick": args.quick, "datasets": names, "seeds": seeds, "n": n,
                              "test_episodes": TEST_EPISODES,
                              "cap_fractions": CAP_FRACTIONS, "lambda_scales": LAMBDA_SCALES,
                              "cegb_scales": CEGB_SCALES, "max_groups": MAX_GROUPS,
                              "policies": POLICIES},
                   "machine": machine(),
                   "datasets": {name: _describe(DATASETS[name](n, 0)) for name in names},
                   "results": results, "aggregates": aggregates, "spambase": spambase}
        if earlier is not None:
            payload = merge_payload(earlier, payload)
        args.out.write_text(json.dumps(payload, indent=1, default=float))
        return report(payload["aggregates"], payload["spambase"])

    for name in names:
        for seed in range(seeds):
            started = time.perf_counter()
            data = DATASETS[name](n, seed)
            results.append(run_dataset(name, data, seed, args.quick, args.torch_peers))
            ours = results[-1]["policies"]
            print(f"{name} seed {seed}: ours {ours['ours']['area']:.4f}, per-set "
                  f"{ours['per-set']['area']:.4f}, aaco {ours['aaco']['area']:.4f} "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
        write()
    spambase_path = None if args.no_spambase else \
        args.spambase or (None if args.quick else DEFAULT_SPAMBASE)
    if spambase_path is not None:
        if spambase_path.exists():
            spambase = run_spambase(spambase_path, args.spambase_steps,
                                    args.spambase_folds or None)
        else:
            print(f"no Spambase CSV at {spambase_path}: skipped", flush=True)
    print(write())
    return 0


def add_policies(out: Path, policies: list[str], datasets: str | None,
                 spambase: Path | None) -> int:
    """``policies`` (of ``SYSTEM_POLICIES`` and ``TORCH_POLICIES``) on every result already
    in ``out`` (or those of ``datasets``), on the same seeded splits and rows, and the
    neural peers on Spambase when ``out`` has its part and ``spambase`` is given; the
    aggregates recomputed, the run listed in ``runs``."""
    payload = json.loads(out.read_text())
    torch_peers = any(p in TORCH_POLICIES for p in policies)
    on_spambase = torch_peers and spambase is not None and bool(payload.get("spambase"))
    if on_spambase and not spambase.exists():
        print(f"no Spambase CSV at {spambase}: its peers skipped", flush=True)
    elif on_spambase:
        peers = spambase_torch_peers(spambase)
        for row in payload["spambase"]["rows"]:
            row.update(peers["figures"][row["k"]])
        payload["spambase"]["torch_fit_seconds"] = peers["fit_seconds"]
        out.write_text(json.dumps(payload, indent=1, default=float))
    n = payload["config"]["n"]
    names = payload["config"]["datasets"] if datasets is None else \
        [] if datasets == "none" else datasets.split(",")
    for r in payload["results"]:
        if r["dataset"] not in names:
            continue
        started = time.perf_counter()
        data = DATASETS[r["dataset"]](n, r["seed"])
        peers = system_results(data, r["seed"]) if "ours-auto" in policies else {}
        if torch_peers:
            peers.update(torch_peer_results(data, r["seed"], quick=payload["config"]["quick"]))
        peers = {p: entry for p, entry in peers.items() if p in policies}
        r["policies"].update(peers)
        print(f"{r['dataset']} seed {r['seed']}: " + ", ".join(
            f"{p} {peers[p]['area']:.4f}" + (f" (own {peers[p]['own_area']:.4f})"
                                             if "own_area" in peers[p] else "")
            for p in peers)
            + f", ours {r['policies']['ours']['area']:.4f}, aaco "
            f"{r['policies']['aaco']['area']:.4f} ({time.perf_counter() - started:.0f} s)",
            flush=True)
        payload["aggregates"] = aggregate(payload["results"])
        out.write_text(json.dumps(payload, indent=1, default=float))
    payload.setdefault("runs", []).append({"datasets": names, "policies": policies,
                                           "spambase": on_spambase and spambase.exists(),
                                           "machine": machine()})
    out.write_text(json.dumps(payload, indent=1, default=float))
    print(report(payload["aggregates"], payload["spambase"]))
    return 0


def _describe(data: Data) -> dict[str, Any]:
    return {"kind": data.kind, "source": data.source, "rows": int(data.y.size),
            "groups": [{"name": n, "features": len(g), "cost": float(c)}
                       for n, g, c in zip(data.names, data.groups, data.costs, strict=True)]}


if __name__ == "__main__":
    sys.exit(main())
