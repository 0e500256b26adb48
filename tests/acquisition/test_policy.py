"""The per-example policy: stop rules, the gate's fallback on data without per-example
structure, and a strict win over the per-set rule on CUBE-NM (exact Bayes predictors, so
no model is fitted here)."""

import numpy as np
import pytest
from scipy.stats import norm

from algorithms.acquisition import NOT_WORTH, NOTHING_FITS, ConditionedAcquisition, GreedyNeighbours
from algorithms.datasets.acquisition_synthetic import make_cube_nm

W = np.array([1.0, -0.8, 0.6])
NOISE = 0.3


def cube_nm_bayes(Z):
    """P(y = 1 | what is known) for CUBE-NM: NaN = not computed."""
    out = np.empty(Z.shape[0])
    for i, z in enumerate(Z):
        def block(c):
            x = z[1 + 3 * c: 4 + 3 * c]
            return 0.5 if np.isnan(x).any() else norm.cdf(W @ x / NOISE)
        out[i] = block(int(z[0])) if not np.isnan(z[0]) else np.mean([block(c)
                                                                      for c in range(3)])
    return out


def run(policy, X, groups, costs, cap):
    """Accuracy of the Bayes predictor after each row's episode under ``cap``."""
    right = []
    for x, label in X:
        S = policy.episode(x, max_cost=cap)
        keep = [f for g in S for f in groups[g]]
        z = np.full_like(x, np.nan)
        z[keep] = x[keep]
        right.append((cube_nm_bayes(z[None])[0] > 0.5) == label)
    return float(np.mean(right))


@pytest.fixture(scope="module")
def cube_nm():
    X, y, groups, costs, _ = make_cube_nm(900, seed=3)
    return X, y, groups, costs


def test_strictly_beats_the_per_set_rule_on_cube_nm(cube_nm):
    X, y, groups, costs = cube_nm
    window, test = slice(0, 600), slice(600, 900)
    ours = ConditionedAcquisition().fit(cube_nm_bayes, X[window], y[window], groups=groups,
                                        costs=costs, loss="log")
    assert ours.per_example_, ours.gate_
    per_set = ConditionedAcquisition(gate=False).fit(cube_nm_bayes, X[window], y[window],
                                                     groups=groups, costs=costs, loss="log")
    per_set.per_example_ = False     # every decision by the per-set rule
    rows = list(zip(X[test], y[test], strict=True))
    ours_acc, theirs_acc = run(ours, rows, groups, costs, 4.0), run(per_set, rows, groups,
                                                                      costs, 4.0)
    assert ours_acc > theirs_acc + 0.15, (ours_acc, theirs_acc)
    # the first purchase is the context, worth nothing alone: non-myopic
    assert ours.decide(X[600], [], max_cost=4.0).group == 0
    greedy = GreedyNeighbours().fit(cube_nm_bayes, X[window], y[window], groups=groups,
                                    costs=costs, loss="log")
    assert greedy.decide(X[600], [], max_cost=4.0).group != 0


def test_gate_falls_back_without_per_example_structure():
    rng = np.random.default_rng(1)
    n, w = 800, np.array([2.0, 1.0, 0.5, 0.25])
    X = rng.standard_normal((n, 4))
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ w))).astype(float)

    def predict(Z):
        return 1 / (1 + np.exp(-np.nan_to_num(Z) @ w))

    groups, costs = [[0], [1], [2], [3]], np.array([4.0, 1.0, 1.0, 1.0])
    policy = ConditionedAcquisition().fit(predict, X, y, groups=groups, costs=costs,
                                          loss="log")
    assert not policy.per_example_, policy.gate_
    reference = ConditionedAcquisition(gate=False).fit(predict, X, y, groups=groups,
                                                       costs=costs, loss="log")
    for x in X[:20]:
        for S in ((), (1,), (0, 2)):
            got = policy.decide(x, S, max_cost=5.0)
            want = reference._per_set_choice(S, 5.0 - costs[list(S)].sum(), reference.rows_)
            assert got.group == want and not got.per_example


def test_stop_rules(cube_nm):
    X, y, groups, costs = cube_nm
    policy = ConditionedAcquisition(gate=False).fit(cube_nm_bayes, X[:300], y[:300],
                                                    groups=groups, costs=costs, loss="log")
    x = X[400]
    everything = policy.decide(x, [0, 1, 2, 3])
    assert everything.group is None and everything.stop_reason == NOTHING_FITS
    capped = policy.decide(x, [0], max_cost=3.5)     # 2.5 left, every block costs 3
    assert capped.group is None and capped.stop_reason == NOTHING_FITS
    dear = policy.decide(x, [], exchange_rate=10.0)  # no loss drop pays 10 per unit cost
    assert dear.group is None and dear.stop_reason == NOT_WORTH
    cheap = policy.decide(x, [0], exchange_rate=1e-4)
    right_block = 1 + int(x[0])
    assert cheap.group == right_block and cheap.expected_gain > 0
    lo, hi = cheap.interval
    assert lo < cheap.expected_gain < hi
    assert {c.group for c in cheap.candidates} == {1, 2, 3}
    # without an exchange rate the policy spends until nothing fits
    assert policy.decide(x, [0, right_block]).group is not None
