"""Greedy vs the exhaustive optimum at every selected budget (Theorem 3.2, γ of the instance).

``F(G_j) >= (1 − e^{−γ}) max{F(S) : c(S) <= c(G_j)}`` with ``γ = λ_min`` of the
group-whitened ``C`` (valid for CS-G-OMP and CS-G-FR) and, for CS-G-FR, also with the
exhaustive submodularity ratio of the instance.
"""

import numpy as np
import pytest

from algorithms.anytime.greedy import sequence_groups
from tests.anytime import naive


def _instance(seed):
    rng = np.random.default_rng(seed)
    J = int(rng.integers(5, 8))
    sizes = rng.integers(1, 4, J)
    D, n = int(sizes.sum()), 120
    X = rng.standard_normal((n, D)) + rng.uniform(0, 0.8) * rng.standard_normal((n, 1))
    y = X @ rng.standard_normal(D) + rng.standard_normal(n)
    C, b = naive.standardized(X, y, 0.01)
    groups = np.split(np.arange(D), np.cumsum(sizes)[:-1])
    return C, b, groups, rng.uniform(0.2, 3.0, J)


@pytest.mark.parametrize("seed", range(6))
def test_bound_against_exhaustive_optimum(seed, record_property):
    C, b, groups, costs = _instance(seed)
    values = naive.all_objectives(C, b, groups)
    gamma_spectral = naive.spectral_gamma(C, groups)
    gamma_ratio = naive.submodularity_ratio(values, len(groups))
    assert 0 < gamma_spectral <= gamma_ratio + 1e-9
    ratios = {}
    for method, gamma in [("cs-g-omp", gamma_spectral), ("cs-g-fr", gamma_ratio)]:
        result = sequence_groups(C, b, groups, costs, method)
        worst = 1.0
        for j in range(1, len(result.order) + 1):
            budget = result.cumulative_cost[j]
            optimum = naive.best_within(values, costs, budget)
            assert result.objective[j] == pytest.approx(
                values[frozenset(result.order[:j].tolist())], rel=1e-9)
            assert result.objective[j] >= (1 - np.exp(-gamma)) * optimum - 1e-12
            worst = min(worst, result.objective[j] / optimum)
        ratios[method] = worst
    record_property("worst_ratio_to_optimum", ratios)
    record_property("gamma", (gamma_spectral, gamma_ratio))
