"""The exact superset search against exhaustive enumeration in numpy, and the table's
lazy columns against direct predictor calls."""

import numpy as np
import pytest

from algorithms.acquisition import LossTable, best_superset, best_superset_reference, mask_costs
from algorithms.acquisition.losses import row_losses


@pytest.mark.parametrize("P", [1, 3, 6, 9])
def test_best_superset_equals_enumeration(P):
    rng = np.random.default_rng(P)
    values = rng.random((1 << P, 40))
    costs = rng.uniform(0.5, 3.0, size=P)
    mc = mask_costs(costs)
    full = (1 << P) - 1
    for _ in range(60):
        mask = int(rng.integers(0, full + 1))
        rows = np.sort(rng.choice(40, size=int(rng.integers(1, 40)), replace=False))
        room = -1.0 if rng.random() < 0.3 else float(rng.uniform(0, costs.sum()))
        lam = float(rng.choice([0.0, 0.01, 0.1, 1.0]))
        got = best_superset(values, rows, mask, full, room, mc, lam)
        want = best_superset_reference(values, rows, mask, full, room, mc, lam)
        assert got[0] == want[0]
        assert got[1] == pytest.approx(want[1], rel=1e-9)
        assert (got[0] & mask) == mask


def test_mask_costs_sum_bits():
    costs = np.array([1.0, 2.5, 4.0])
    mc = mask_costs(costs)
    for m in range(8):
        assert mc[m] == pytest.approx(sum(costs[b] for b in range(3) if m >> b & 1))


def test_table_columns_are_the_predictors_losses():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((25, 5))
    y = (rng.random(25) < 0.5).astype(float)
    w = np.array([1.0, -2.0, 0.5, 0.0, 3.0])
    calls = []

    def predict(Z):
        calls.append(Z.shape[0])
        return 1 / (1 + np.exp(-np.nansum(Z * w, axis=1)))

    groups = [[0, 1], [2], [3, 4]]
    table = LossTable(predict, X, y, groups=groups, costs=[1, 2, 3], loss="log", pool=[2, 0])
    table.ensure(range(4))
    for m in range(4):
        keep = [f for b, g in enumerate([2, 0]) if m >> b & 1 for f in groups[g]]
        Z = np.full_like(X, np.nan)
        Z[:, keep] = X[:, keep]
        np.testing.assert_allclose(table.values[m], row_losses("log", y, predict(Z)))
    n_calls = len(calls)
    table.ensure(range(4))          # cached: no new predictor call
    assert len(calls) == n_calls
    assert table.mask_of([0, 1]) == 2 and table.groups_of(3) == (0, 2)


def test_k_class_log_loss():
    p = np.array([[0.2, 0.5, 0.3], [0.9, 0.05, 0.05]])
    np.testing.assert_allclose(row_losses("log", np.array([1, 0]), p),
                               [-np.log(0.5), -np.log(0.9)])
    with pytest.raises(ValueError, match="K-class labels"):
        row_losses("log", np.array([3, 0]), p)
    np.testing.assert_allclose(row_losses("squared", np.array([1.0, 2.0]),
                                          np.array([0.5, 2.0])), [0.25, 0.0])
