"""What the per-set temperature calibration of a multi-class gbfs version gives, and how
honest its held-out figures are: CUBE (8 classes, 20 one-feature groups) as a service
version sees it.

    python benchmarks/multiclass_calibration.py            # 3 seeds, 3,000 rows each
    python benchmarks/multiclass_calibration.py --quick    # 1 seed

Per seed: a seeded 60/20/20 split into training rows (the fit), held-out rows (what a
version keeps: the temperature of each set and its expected figures) and test rows (never
seen). A softmax GBFS (200 rounds, depth 3) is fitted; for the prefixes of 0, 3, 6, 10 and
20 groups of the held-out greedy order (the version's sequence) the test log-loss of the
raw ``softmax(H)`` and of the calibrated ``softmax(a H)``, the test expected calibration
error (15 bins of the top probability) of both, the test 0/1 error, and the version's
``expected_log_loss`` / ``expected_error`` (cross-fitted on the held-out rows) beside the
test figures they forecast.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from scipy.special import softmax

from algorithms.datasets.acquisition_synthetic import make_cube
from algorithms.gbfs import GBFS
from algorithms.per_set.multiclass import MulticlassSetFigures, mean_log_loss

PREFIXES = (0, 3, 6, 10, 20)


def ece(p: np.ndarray, y: np.ndarray, bins: int = 15) -> float:
    """Expected calibration error of the top class: sum_b |B|/n |acc(B) - conf(B)|."""
    top, hit = p.max(axis=1), p.argmax(axis=1) == y
    edges = np.minimum((top * bins).astype(np.int64), bins - 1)
    out = 0.0
    for b in range(bins):
        rows = edges == b
        if rows.any():
            out += rows.mean() * abs(hit[rows].mean() - top[rows].mean())
    return float(out)


def run(seed: int, n: int) -> list[dict]:
    X, y, groups, costs, _ = make_cube(n, seed=seed)
    y = y.astype(np.int64)
    order = np.random.default_rng(seed).permutation(n)
    train, held, test = np.split(order, [int(0.6 * n), int(0.8 * n)])
    model = GBFS(loss="softmax", n_estimators=200, max_depth=3, feature_groups=groups,
                 group_costs=costs).fit(X[train], y[train])

    def score(rows, S):
        return model.decision_function(rows, computed_groups=S)

    figures = MulticlassSetFigures(score, X[held], y[held], n_classes=8, groups=groups,
                                   costs=costs)
    sequence: list[int] = []
    while (step := figures.next_group(sequence)) is not None:
        sequence.append(int(step[0]))
    rows = []
    for k in PREFIXES:
        S = sorted(sequence[:k])
        mine = figures.figures(S)
        H = score(np.where(np.isin(np.arange(X.shape[1]), S), X[test], 0.0), S)
        raw, calibrated = softmax(H, axis=1), softmax(mine.logits(H), axis=1)
        rows.append({"seed": seed, "groups": k, "temperature_a": mine.temperature_a,
                     "test_error": float(np.mean(H.argmax(axis=1) != y[test])),
                     "expected_error": mine.error,
                     "test_log_loss_raw": mean_log_loss(H, y[test]),
                     "test_log_loss_calibrated": mean_log_loss(mine.logits(H), y[test]),
                     "expected_log_loss": mine.log_loss,
                     "test_ece_raw": ece(raw, y[test]),
                     "test_ece_calibrated": ece(calibrated, y[test])})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rows", type=int, default=3000)
    args = parser.parse_args()
    seeds = [0] if args.quick else [0, 1, 2]
    rows = [r for s in seeds for r in run(s, args.rows)]
    print("| groups | test error (expected) | test log-loss raw → calibrated (expected) "
          "| test ECE raw → calibrated | a |")
    print("| --- | --- | --- | --- | --- |")
    for k in PREFIXES:
        part = [r for r in rows if r["groups"] == k]

        def cell(key: str, part=part) -> str:
            return "/".join(f"{r[key]:.3f}" for r in part)

        print(f"| {k} | {cell('test_error')} ({cell('expected_error')}) | "
              f"{cell('test_log_loss_raw')} → {cell('test_log_loss_calibrated')} "
              f"({cell('expected_log_loss')}) | {cell('test_ece_raw')} → "
              f"{cell('test_ece_calibrated')} | {cell('temperature_a')} |")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
