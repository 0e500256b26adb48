"""Synthetic data for anytime group sequencing (Hu, Grubb, Bagnell, Hebert), seeded.

- :func:`make_anytime_groups`: groups of 1–20 correlated features with varied costs, built to
  separate the criteria: a *duplicate* group (``n_copies`` identical copies of one moderately
  useful feature; no-whiten counts it ``n_copies`` times) and a *span* group (two nearly
  identical features whose difference predicts y while neither does alone; single misses it).
- :func:`make_cost_lower_bound`: the paper's example ``Y = Σ_i e^i X_i``, ``X_i`` i.i.d. and
  ``c(X_i) = i`` (Theorem 4.1: no fixed sequence is competitive below 4x the budget).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class GroupedDataset:
    """``X`` (n, D), ``y`` (n,), ``groups`` (list of int arrays), ``costs`` (J,), notes."""

    X: np.ndarray
    y: np.ndarray
    groups: list[np.ndarray]
    costs: np.ndarray
    names: list[str] = field(default_factory=list)


def make_anytime_groups(n_samples: int = 2000, n_plain_groups: int = 12, n_copies: int = 12,
                        noise: float = 0.5, seed: int = 0) -> GroupedDataset:
    """Grouped regression data that separates CS-G-OMP / FR from no-whiten and single.

    Plain group ``j`` has ``d_j ∈ [1, 20]`` features ``ρ_j z_j + √(1−ρ_j²) ε`` sharing a latent
    ``z_j`` (``ρ_j ∈ [0.3, 0.95]``), sparse random weights and cost ``≈ d_j · U(0.5, 2)``.
    Special groups: *duplicate* (``n_copies`` copies of ``u``, weight 0.5, cost 8) and *span*
    (``s ± 0.05 t`` with weight 1 on ``t``, cost 2). O(n·D).
    """
    rng = np.random.default_rng(seed)
    columns, groups, costs, names = [], [], [], []
    y = np.zeros(n_samples)
    start = 0

    def add_group(block: np.ndarray, cost: float, name: str) -> None:
        nonlocal start
        columns.append(block)
        groups.append(np.arange(start, start + block.shape[1]))
        costs.append(cost)
        names.append(name)
        start += block.shape[1]

    for j in range(n_plain_groups):
        d = int(rng.integers(1, 21))
        rho = rng.uniform(0.3, 0.95)
        z = rng.standard_normal((n_samples, 1))
        block = rho * z + np.sqrt(1 - rho ** 2) * rng.standard_normal((n_samples, d))
        weights = rng.standard_normal(d) * (rng.random(d) < 0.4) * rng.uniform(0.05, 0.4)
        y += block @ weights
        add_group(block, float(d * rng.uniform(0.5, 2.0)), f"plain{j}")
    u = rng.standard_normal(n_samples)
    y += 0.5 * u
    add_group(np.repeat(u[:, None], n_copies, axis=1), 8.0, "duplicate")
    s, t = rng.standard_normal(n_samples), rng.standard_normal(n_samples)
    y += 1.0 * t
    add_group(np.stack([s + 0.05 * t, s - 0.05 * t], axis=1), 2.0, "span")
    y += noise * rng.standard_normal(n_samples)
    X = np.concatenate(columns, axis=1)
    return GroupedDataset(X, y, groups, np.array(costs), names)


def make_cost_lower_bound(n_features: int = 8, n_samples: int = 2000, seed: int = 0
                          ) -> GroupedDataset:
    """The paper's lower-bound instance: ``Y = Σ_{i=1}^{D} e^i X_i``, ``c(X_i) = i``. O(n·D)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_samples, n_features))
    y = X @ np.exp(np.arange(1, n_features + 1))
    groups = [np.array([i]) for i in range(n_features)]
    costs = np.arange(1, n_features + 1, dtype=np.float64)
    return GroupedDataset(X, y, groups, costs, [f"x{i + 1}" for i in range(n_features)])
