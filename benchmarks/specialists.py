"""What specialists cost and give: ``auto`` (PerSetChoice) without and with specialists for
the hot sets of a skewed request mix, on the grouped generators.

    python benchmarks/specialists.py                 # 2 generators x 2 tasks, 3 seeds
    python benchmarks/specialists.py --quick         # 1 generator, regression, 1 seed

Per seed: a seeded 60/20/20 train/validation/test split; every non-empty set of groups is a
request set; 5 of them (drawn uniformly) get 80 % of the requests, the others share the
rest equally. The model is fitted with the validation rows as its held-out rows, without
specialists and with ``specialist_sets`` = the hot sets. Reported: fit seconds (after a
warm-up fit that loads the compiled kernels), the state's bytes (what a version holds of the
model), and the request-weighted figure over all sets (explained variance or error rate)
on the validation rows (what the model chose on) and on the test rows (never seen).
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

from algorithms.datasets.grouped_synthetic import make_latent_groups, make_regime_groups
from algorithms.per_set import PerSetChoice
from algorithms.per_set.figures import regression_figures
from algorithms.serialization import dumps_state

GENERATORS = {"regime": make_regime_groups, "latent": make_latent_groups}
HOT_SETS, HOT_SHARE = 5, 0.8


def figure(kind: str, model: PerSetChoice, X: np.ndarray, y: np.ndarray, S) -> float:
    """Explained variance (regression) or error rate (classification) of the set."""
    prediction = model.predict(X, computed_groups=S)
    if kind == "regression":
        return regression_figures(prediction, y)[0]
    return float(np.mean(prediction != y))


def run(name: str, kind: str, n: int, seed: int) -> None:
    data = GENERATORS[name](n, kind, seed)
    X, y = data.X, data.y
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    a, b = int(0.6 * len(y)), int(0.8 * len(y))
    tr, va, te = order[:a], order[a:b], order[b:]
    J = len(data.groups)
    sets = [S for k in range(1, J + 1) for S in itertools.combinations(range(J), k)]
    hot = [sets[i] for i in rng.choice(len(sets), size=HOT_SETS, replace=False)]
    cold = [S for S in sets if S not in hot]
    share = {S: HOT_SHARE / HOT_SETS for S in hot} | {S: (1 - HOT_SHARE) / len(cold)
                                                     for S in cold}
    common = {"groups": [g.tolist() for g in data.groups], "costs": data.costs.tolist(),
              "task": kind}
    PerSetChoice(**common, specialist_sets=[[0]], gbfs_params={"n_estimators": 5}).fit(
        X[tr[:300]], y[tr[:300]])   # warm-up: loads the compiled kernels
    for label, extra in (("without", {}), ("with", {"specialist_sets": [list(S)
                                                                         for S in hot]})):
        start = time.perf_counter()
        model = PerSetChoice(**common, **extra).fit(X[tr], y[tr], X_val=X[va], y_val=y[va])
        seconds = time.perf_counter() - start
        size = len(dumps_state(model.state_dict()))
        val = sum(share[S] * figure(kind, model, X[va], y[va], S) for S in sets)
        test = sum(share[S] * figure(kind, model, X[te], y[te], S) for S in sets)
        answered = sum(model.choice(S) == "specialist" for S in hot)
        print(f"{name:7s} {kind:14s} seed {seed} {label:8s} fit {seconds:6.1f} s  state "
              f"{size / 1e6:5.2f} MB  mix validation {val:.4f}  mix test {test:.4f}  "
              f"hot sets answered by a specialist {answered}/{len(hot)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="regime, regression, 1 seed")
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--seeds", type=int, default=None)
    args = parser.parse_args()
    cases = [("regime", "regression")] if args.quick else [
        (name, kind) for name in GENERATORS for kind in ("regression", "classification")]
    seeds = args.seeds or (1 if args.quick else 3)
    print(f"figure: explained variance (regression, higher is better) or error rate "
          f"(classification, lower is better), weighted by a mix with {HOT_SHARE:.0%} of "
          f"the requests on {HOT_SETS} sets")
    for name, kind in cases:
        for seed in range(seeds):
            run(name, kind, args.rows, seed)


if __name__ == "__main__":
    main()
