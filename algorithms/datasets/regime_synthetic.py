"""Grouped synthetic data with regime switches and products (for tree models), seeded.

Six groups of three features each, ``x ~ N(0, I)`` with costs ``1, 1, 2, 3, 4, 6``; with
``g_k`` the features of group ``k`` and ``r = 1[x_{0,0} > 0]`` the regime (group 0 decides it),

    f(x) = r (2 x_{1,0} x_{2,0} + x_{3,0}) + (1 - r) (2 sin(2 x_{1,1}) - x_{4,0} x_{2,1})
           + x_{5,0} x_{3,1} + 0.5 |x_{4,1}| + 0.5 x_{0,1},

so no group answers alone, half of the signal switches with the regime and most of it is a
product of two groups. Regression: ``y = f(x) + noise N(0, 1)``; classification:
``y = 1[f(x) + noise N(0, 1) > median f]`` (about even classes). O(n) time and memory.
"""

from __future__ import annotations

import numpy as np

GROUP_SIZE = 3
COSTS = (1.0, 1.0, 2.0, 3.0, 4.0, 6.0)


def make_regime_products(n_samples: int = 3000, *, task: str = "regression",
                         noise: float = 1.0, random_state: int | None = 0,
                         ) -> tuple[np.ndarray, np.ndarray, list[list[int]], np.ndarray]:
    """Return ``X`` float64 (n, 18), ``y`` (float64, or int64 in {0, 1} when
    ``task="classification"``), the groups (lists of feature indices) and their costs."""
    if task not in ("regression", "classification") or n_samples < 1 or noise < 0:
        raise ValueError("need task 'regression' or 'classification', n_samples >= 1 and "
                         "noise >= 0")
    rng = np.random.default_rng(random_state)
    J = len(COSTS)
    X = rng.standard_normal((n_samples, J * GROUP_SIZE))

    def x(group: int, k: int) -> np.ndarray:
        return X[:, group * GROUP_SIZE + k]

    regime = x(0, 0) > 0
    f = np.where(regime, 2.0 * x(1, 0) * x(2, 0) + x(3, 0),
                 2.0 * np.sin(2.0 * x(1, 1)) - x(4, 0) * x(2, 1))
    f = f + x(5, 0) * x(3, 1) + 0.5 * np.abs(x(4, 1)) + 0.5 * x(0, 1)
    y = f + noise * rng.standard_normal(n_samples)
    groups = [list(range(g * GROUP_SIZE, (g + 1) * GROUP_SIZE)) for g in range(J)]
    if task == "classification":
        return X, (y > np.median(f)).astype(np.int64), groups, np.array(COSTS)
    return X, y, groups, np.array(COSTS)
