"""Doubling: the eligibility rule, brute-force reference, the cost-lower-bound example."""

import numpy as np
import pytest

from algorithms.anytime.doubling import doubling_eligible, doubling_sequence
from algorithms.datasets.anytime_synthetic import make_cost_lower_bound
from tests.anytime import naive


def _reference(C, b, groups, costs):
    """Direct-solve Doubling: eligible = c(g) <= max(spent, cheapest left); best gain/cost."""
    order, spent = [], 0.0
    left = set(range(len(groups)))
    while left:
        limit = max(spent, min(costs[g] for g in left))
        eligible = sorted(g for g in left if costs[g] <= limit * (1 + 1e-12))
        best = max(eligible, key=lambda g: naive.criterion("cs-g-fr", C, b, groups, order, g)
                   / costs[g])
        order.append(best)
        left.remove(best)
        spent += costs[best]
    return order


@pytest.mark.parametrize("seed", range(4))
def test_doubling_matches_reference_and_doubles(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 4, 7)
    D, n = int(sizes.sum()), 150
    X = rng.standard_normal((n, D))
    y = X @ rng.standard_normal(D) + rng.standard_normal(n)
    C, b = naive.standardized(X, y, 1e-3)
    groups = np.split(np.arange(D), np.cumsum(sizes)[:-1])
    costs = rng.choice([0.5, 1.0, 2.0, 4.0, 8.0], len(groups))
    result = doubling_sequence(C, b, groups, costs)
    assert result.order.tolist() == _reference(C, b, groups, costs)
    cum = result.cumulative_cost
    for j in range(1, len(cum) - 1):
        cheapest_left = costs[result.order[j:]].min()
        assert cum[j + 1] <= cum[j] + max(cum[j], cheapest_left) + 1e-12


def test_eligibility_rule():
    costs = np.array([0.0, 1.0, 2.0, 5.0])
    remaining = np.array([False, True, True, True])
    assert doubling_eligible(costs, remaining, 0.0).tolist() == [False, True, False, False]
    assert doubling_eligible(costs, remaining, 2.0).tolist() == [False, True, True, False]
    remaining[0] = True
    assert doubling_eligible(costs, remaining, 0.0).tolist() == [True, False, False, False]


def test_cost_lower_bound_example_starts_cheap():
    data = make_cost_lower_bound(n_features=6, n_samples=500)
    C, b = naive.standardized(data.X, data.y, 1e-6)
    result = doubling_sequence(C, b, data.groups, data.costs)
    cum = result.cumulative_cost
    assert result.order[0] == 0  # cost 1, the only group within the doubling rule
    for j in range(1, len(cum) - 1):
        assert cum[j + 1] <= cum[j] + max(cum[j], data.costs[result.order[j:]].min()) + 1e-12
    assert result.order[:2].tolist() == [0, 1]  # c = 1, then 2 (nothing else fits)
