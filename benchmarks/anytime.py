"""Benchmark: anytime group sequencing (Hu, Grubb, Bagnell, Hebert) — timeliness, optimality, speed.

Run ``python benchmarks/anytime.py [--quick]``; prints tables and writes
``benchmarks/results/anytime.json``.

1. Timeliness (normalized area under the explained-variance-vs-cost curve, budget = total
   cost and a quarter of it) of CS-G-OMP, CS-G-FR, Doubling, no-whiten, single and the
   cost-weighted Group Lasso (celer) on synthetic data built to separate them, the paper's
   cost-lower-bound example, diabetes and digits (70/30 split, test numbers reported).
2. Greedy vs the exhaustive optimum on small instances, with the instance's bound 1 − e^(−γ).
3. Speed: sequencing D = 2,000 features in 200 groups from statistics; singleton CS-G-OMP vs
   scikit-learn ``orthogonal_mp_gram`` (precomputed Gram); CS-G-FR vs
   ``SequentialFeatureSelector(direction="forward")``; serving latency.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from algorithms.anytime import AnytimeLinearModel, SufficientStatistics, sequence_groups  # noqa: E402
from algorithms.anytime.doubling import doubling_sequence  # noqa: E402
from algorithms.datasets.anytime_synthetic import (  # noqa: E402
    GroupedDataset,
    make_anytime_groups,
    make_cost_lower_bound,
)
from algorithms.metrics.anytime import anytime_curve, timeliness  # noqa: E402

METHODS = ["cs-g-omp", "cs-g-fr", "doubling", "no-whiten", "single", "group-lasso"]
DIABETES_GROUPS = {  # name: (feature indices, cost) — costs chosen here (docs/benchmarks.md)
    "demographics (age, sex)": ([0, 1], 1.0), "body (bmi, bp)": ([2, 3], 2.0),
    "s1 total cholesterol": ([4], 4.0), "s2 LDL": ([5], 6.0), "s3 HDL": ([6], 6.0),
    "s4 TC/HDL": ([7], 5.0), "s5 triglycerides": ([8], 8.0), "s6 glucose": ([9], 3.0)}


def _best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def datasets(quick: bool) -> dict[str, GroupedDataset]:
    from sklearn.datasets import load_diabetes, load_digits

    out = {"synthetic": make_anytime_groups(n_samples=1500 if quick else 4000, seed=0),
           "cost-lower-bound": make_cost_lower_bound(n_features=8, n_samples=2000)}
    X, y = load_diabetes(return_X_y=True)
    out["diabetes"] = GroupedDataset(X, y, [np.array(v[0]) for v in DIABETES_GROUPS.values()],
                                     np.array([v[1] for v in DIABETES_GROUPS.values()]),
                                     list(DIABETES_GROUPS))
    X, digit = load_digits(return_X_y=True)
    y = (digit % 2 == 1).astype(float)  # binary task: odd digit
    for block in (4, 2):
        groups = [np.array([r * 8 + c for r in range(i, i + block) for c in range(j, j + block)])
                  for i in range(0, 8, block) for j in range(0, 8, block)]
        out[f"digits-{block}x{block}"] = GroupedDataset(X, y, groups, np.ones(len(groups)))
    return out


def timeliness_table(quick: bool) -> dict:
    """Mean over random 70/30 splits (seeded per dataset) of the anytime metrics per method."""
    n_splits = 2 if quick else 5
    results = {}
    for number, (name, data) in enumerate(datasets(quick).items()):
        rng = np.random.default_rng(100 + number)
        n = len(data.y)
        runs: dict[str, list[dict]] = {method: [] for method in METHODS}
        errors = {}
        for _ in range(n_splits):
            order = rng.permutation(n)
            train, test = order[: int(0.7 * n)], order[int(0.7 * n):]
            for method in METHODS:
                start = time.perf_counter()
                try:
                    model = AnytimeLinearModel(groups=data.groups, costs=data.costs,
                                               method=method, alpha=1e-6)
                    model.fit(data.X[train], data.y[train])
                except ImportError as exc:
                    errors[method] = str(exc)
                    continue
                seconds = time.perf_counter() - start
                cost, ev_train = anytime_curve(model)
                _, ev_test = anytime_curve(model, data.X[test], data.y[test])
                total = float(cost[-1])
                runs[method].append({
                    "timeliness_train": timeliness(cost, ev_train),
                    "timeliness_test": timeliness(cost, ev_test),
                    "timeliness_test_quarter": timeliness(cost, ev_test, budget=total / 4,
                                                          reference=ev_test[-1]),
                    "final_ev_test": float(ev_test[-1]), "fit_seconds": seconds,
                    "sequence": [int(g) for g in model.sequence_]})
        row = {}
        for method in METHODS:
            if method in errors:
                row[method] = {"error": errors[method]}
                continue
            row[method] = {key: float(np.mean([r[key] for r in runs[method]]))
                           for key in runs[method][0] if key != "sequence"}
            row[method]["timeliness_test_std"] = float(
                np.std([r["timeliness_test"] for r in runs[method]]))
            row[method]["sequence_first_split"] = runs[method][0]["sequence"]
        results[name] = {"n_samples": n, "n_features": int(data.X.shape[1]),
                         "n_groups": len(data.groups), "costs": data.costs.tolist(),
                         "splits": n_splits, "methods": row}
    return results


def optimality(quick: bool) -> dict:
    """min over budgets of F(G_j) / max{F(S): c(S) <= c(G_j)}, vs 1 − e^(−γ)."""
    rng = np.random.default_rng(1)
    worst = {"cs-g-omp": 1.0, "cs-g-fr": 1.0}
    bounds = []
    for _ in range(5 if quick else 20):
        J = 8
        sizes = rng.integers(1, 4, J)
        D = int(sizes.sum())
        X = rng.standard_normal((200, D)) + rng.uniform(0, 1) * rng.standard_normal((200, 1))
        y = X @ rng.standard_normal(D) + rng.standard_normal(200)
        C, b = SufficientStatistics.from_data(X, y).standardized(1e-3)
        groups = np.split(np.arange(D), np.cumsum(sizes)[:-1])
        costs = rng.uniform(0.2, 3.0, J)
        values = {}
        for r in range(J + 1):
            for subset in itertools.combinations(range(J), r):
                idx = np.concatenate([groups[g] for g in subset]) if subset else []
                values[frozenset(subset)] = (0.5 * b[idx] @ np.linalg.solve(
                    C[np.ix_(idx, idx)], b[idx]) if subset else 0.0)
        whiten = np.zeros_like(C)
        for g in groups:
            vals, vecs = np.linalg.eigh(C[np.ix_(g, g)])
            whiten[np.ix_(g, g)] = (vecs / np.sqrt(vals)) @ vecs.T
        gamma = float(np.linalg.eigvalsh(whiten @ C @ whiten).min())
        bounds.append(1 - np.exp(-gamma))
        for method in worst:
            result = sequence_groups(C, b, groups, costs, method)
            for j in range(1, J + 1):
                budget = result.cumulative_cost[j]
                best = max(v for s, v in values.items()
                           if sum(costs[g] for g in s) <= budget + 1e-12)
                worst[method] = min(worst[method], result.objective[j] / best)
    return {"worst_ratio": worst, "largest_bound_1_minus_exp_minus_gamma": float(max(bounds)),
            "instances": len(bounds), "groups_per_instance": 8}


def speed(quick: bool) -> dict:
    from sklearn.feature_selection import SequentialFeatureSelector
    from sklearn.linear_model import LinearRegression, orthogonal_mp_gram

    out = {}
    rng = np.random.default_rng(2)
    n, D = 3000, 2000
    X = rng.standard_normal((n, D)) + 0.3 * rng.standard_normal((n, 1))
    y = X @ (rng.standard_normal(D) * (rng.random(D) < 0.1)) + rng.standard_normal(n)
    stats = SufficientStatistics.from_data(X, y)
    C, b = stats.standardized(1e-6)
    groups = np.split(np.arange(D), 200)
    costs = rng.uniform(1.0, 5.0, 200)
    sequence_groups(C[:40, :40], b[:40], groups[:4], costs[:4], "cs-g-fr")  # warm numba
    repeats = 1 if quick else 3
    out["groups_2000x200"] = {
        "cs-g-omp_s": _best_of(lambda: sequence_groups(C, b, groups, costs, "cs-g-omp"),
                               repeats),
        "cs-g-fr_s": _best_of(lambda: sequence_groups(C, b, groups, costs, "cs-g-fr"), repeats),
        "doubling_s": _best_of(lambda: doubling_sequence(C, b, groups, costs), repeats),
        "model_fit_statistics_s": _best_of(lambda: AnytimeLinearModel(
            groups=groups, costs=costs).fit_statistics(stats), repeats)}

    D1, k = (500, 100) if quick else (1000, 200)
    C1, b1 = C[:D1, :D1] - 1e-6 * np.eye(D1), b[:D1]
    singletons = [np.array([i]) for i in range(D1)]
    ours = sequence_groups(C1, b1, singletons, np.ones(D1), "cs-g-omp", max_groups=k)
    path = orthogonal_mp_gram(C1, b1, n_nonzero_coefs=k, return_path=True)
    sk_order: list[int] = []
    for step in range(path.shape[1]):
        sk_order += [i for i in np.flatnonzero(path[:, step]) if i not in sk_order]
    t_ours = _best_of(lambda: sequence_groups(C1, b1, singletons, np.ones(D1), "cs-g-omp",
                                              max_groups=k), 5)
    t_sk = _best_of(lambda: orthogonal_mp_gram(C1, b1, n_nonzero_coefs=k), 5)
    out["omp_vs_sklearn"] = {"n_features": D1, "steps": k, "ours_s": t_ours, "sklearn_s": t_sk,
                             "ratio_ours_over_sklearn": t_ours / t_sk,
                             "same_order": ours.order.tolist() == sk_order[:k]}

    n2, D2, k2 = (400, 30, 8) if quick else (1000, 50, 10)
    X2, y2 = X[:n2, :D2], y[:n2]
    single2 = [np.array([i]) for i in range(D2)]

    def ours_fr():
        C2, b2 = SufficientStatistics.from_data(X2, y2).standardized(0.0)
        return sequence_groups(C2, b2, single2, np.ones(D2), "cs-g-fr", max_groups=k2)

    sfs = SequentialFeatureSelector(LinearRegression(), n_features_to_select=k2,
                                    direction="forward", cv=5)
    start = time.perf_counter()
    sfs.fit(X2, y2)
    t_sfs = time.perf_counter() - start
    t_fr = _best_of(ours_fr, 5)
    out["fr_vs_sequential_feature_selector"] = {
        "n_samples": n2, "n_features": D2, "selected": k2, "ours_s_from_data": t_fr,
        "sklearn_s": t_sfs, "speedup": t_sfs / t_fr,
        "same_selected_set": set(ours_fr().order.tolist())
        == set(np.flatnonzero(sfs.get_support()).tolist())}

    model = AnytimeLinearModel(groups=groups, costs=costs).fit_statistics(stats)
    row = X[0]
    subset = [int(g) for g in model.sequence_[[0, 3, 7, 20, 41]]]
    miss = _best_of(lambda: (model._subset_cache.clear(),
                             model.predict(row, computed_groups=subset)), 3)
    model.predict(row, computed_groups=subset)
    reps = 2000
    hit = _best_of(lambda: [model.predict(row, computed_groups=subset) for _ in range(reps)],
                   3) / reps
    prefix = _best_of(lambda: [model.predict(row, max_cost=50.0) for _ in range(reps)], 3) / reps
    next_miss = _best_of(lambda: (model._next_cache.clear(), model.next_group(subset)), 3)
    out["serving_2000x200"] = {"predict_groups_cached_us": hit * 1e6,
                               "predict_groups_first_call_ms": miss * 1e3,
                               "predict_budget_us": prefix * 1e6,
                               "next_group_first_call_ms": next_miss * 1e3,
                               "artifact_MB": len(model.to_bytes()) / 1e6}
    return out


def print_tables(report: dict) -> None:
    print("\nTimeliness on held-out data, mean over random 70/30 splits "
          "(budget = total cost; in brackets: budget = total/4)")
    header = f"{'dataset':18s}" + "".join(f"{m:>17s}" for m in METHODS)
    print(header)
    for name, entry in report["timeliness"].items():
        cells = []
        for method in METHODS:
            cell = entry["methods"][method]
            cells.append(f"{'n/a':>17s}" if "error" in cell else
                         f"{cell['timeliness_test']:>9.3f} ({cell['timeliness_test_quarter']:.3f})")
        print(f"{name:18s}" + "".join(cells))
    opt = report["optimality"]
    print(f"\nExhaustive optimum ({opt['instances']} instances x 8 groups): worst F(G_j)/OPT = "
          + ", ".join(f"{m} {v:.3f}" for m, v in opt["worst_ratio"].items())
          + f"; bound 1-e^-gamma <= {opt['largest_bound_1_minus_exp_minus_gamma']:.3f}")
    s = report["speed"]
    g = s["groups_2000x200"]
    print("\nSequencing D=2000 in 200 groups from statistics: "
          f"CS-G-OMP {g['cs-g-omp_s']:.2f} s, "
          f"CS-G-FR {g['cs-g-fr_s']:.2f} s, Doubling {g['doubling_s']:.2f} s, "
          f"full model fit {g['model_fit_statistics_s']:.2f} s (target < 2 s)")
    o = s["omp_vs_sklearn"]
    print(f"Singleton CS-G-OMP vs sklearn orthogonal_mp_gram (D={o['n_features']}, "
          f"{o['steps']} steps): {o['ours_s'] * 1e3:.1f} ms vs {o['sklearn_s'] * 1e3:.1f} ms, "
          f"ratio {o['ratio_ours_over_sklearn']:.2f} (target <= 2), same order "
          f"{o['same_order']}")
    f = s["fr_vs_sequential_feature_selector"]
    print(f"Singleton CS-G-FR (stats + sequence) vs SequentialFeatureSelector "
          f"(n={f['n_samples']}, D={f['n_features']}, k={f['selected']}): "
          f"{f['ours_s_from_data'] * 1e3:.2f} ms vs "
          f"{f['sklearn_s']:.2f} s, speedup {f['speedup']:.0f}x (target >= 100x)")
    v = s["serving_2000x200"]
    print(f"Serving (D=2000, 200 groups): predict(row, computed_groups=S) cached "
          f"{v['predict_groups_cached_us']:.1f} us, first call "
          f"{v['predict_groups_first_call_ms']:.2f} ms; predict(row, max_cost) "
          f"{v['predict_budget_us']:.1f} us; next_group first call "
          f"{v['next_group_first_call_ms']:.1f} ms; artifact {v['artifact_MB']:.1f} MB")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller problems, fewer repeats")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    report = {"quick": args.quick, "python": platform.python_version(),
              "cpu_count": os.cpu_count(),
              "timeliness": timeliness_table(args.quick),
              "optimality": optimality(args.quick), "speed": speed(args.quick)}
    report["total_seconds"] = time.perf_counter() - start
    print_tables(report)
    path = Path(__file__).resolve().parent / "results" / "anytime.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1))
    print(f"\nwrote {path} ({report['total_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
