"""Grouped synthetic data with nonlinear targets for budgeted answers, seeded.

- :func:`make_latent_groups`: six groups sharing three latent factors (a cheap group partly
  stands in for a costly one), a target with an interaction and thresholds.
- :func:`make_regime_groups`: a cheap context group reveals which of three regimes a row is
  in, and each regime's target reads different groups (a linear part, a product, a
  threshold), so the useful groups depend on the cheap one.

Both return a :class:`~algorithms.datasets.anytime_synthetic.GroupedDataset`; regression
``y = f + 0.3 N(0, 1)``, classification ``y = [f + 0.5 Logistic > median f]`` (0/1). O(n D).
"""

from __future__ import annotations

import numpy as np

from algorithms.datasets.anytime_synthetic import GroupedDataset

KINDS = ("regression", "classification")


def _target(f: np.ndarray, kind: str, rng: np.random.Generator) -> np.ndarray:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if kind == "regression":
        return f + 0.3 * rng.standard_normal(f.shape[0])
    return (f + 0.5 * rng.logistic(size=f.shape[0]) > np.median(f)).astype(np.float64)


def _assemble(blocks: list[np.ndarray], costs: list[float], names: list[str], y: np.ndarray
              ) -> GroupedDataset:
    starts = np.cumsum([0] + [b.shape[1] for b in blocks])
    groups = [np.arange(starts[g], starts[g + 1]) for g in range(len(blocks))]
    return GroupedDataset(np.hstack(blocks), y, groups, np.asarray(costs, dtype=np.float64),
                          names)


def make_latent_groups(n: int, kind: str = "regression", seed: int = 0) -> GroupedDataset:
    """Groups whose features share latent factors.

    Three shared latents ``z`` and one private latent ``u_g`` per group; group ``g`` has
    ``d_g`` features ``z A_g + u_g v_g + s_g eps`` (random loadings ``A_g``, ``v_g``), where
    the noise ``s_g`` falls as the cost rises (costly groups measure ``z`` precisely).
    ``f = sin(1.5 z0) + z1 z2 + [z0 > 0.5] + 0.8 u_3 [z1 > 0] + 0.6 |u_5| + 0.4 u_1``.
    """
    rng = np.random.default_rng(1000 + seed)
    sizes, costs = (3, 4, 5, 6, 8, 10), [1.0, 2.0, 3.0, 5.0, 8.0, 13.0]
    noise = (1.2, 1.0, 0.7, 0.5, 0.35, 0.25)
    z = rng.standard_normal((n, 3))
    u = rng.standard_normal((n, len(sizes)))
    blocks, names = [], []
    for g, (d, s) in enumerate(zip(sizes, noise, strict=True)):
        load, private = rng.normal(size=(3, d)), 0.8 * rng.normal(size=d)
        blocks.append(z @ load + np.outer(u[:, g], private) + s * rng.standard_normal((n, d)))
        names.append(f"group {g} ({d} features, noise {s})")
    f = (np.sin(1.5 * z[:, 0]) + z[:, 1] * z[:, 2] + (z[:, 0] > 0.5) + 0.8 * u[:, 3]
         * (z[:, 1] > 0) + 0.6 * np.abs(u[:, 5]) + 0.4 * u[:, 1])
    return _assemble(blocks, costs, names, _target(f, kind, rng))


def make_regime_groups(n: int, kind: str = "regression", seed: int = 0) -> GroupedDataset:
    """Three regimes, each with its own groups.

    Latents: a regime driver ``s`` and ``a, b, c, d, e``, all N(0, 1); regime
    ``r = [s > -0.5] + [s > 0.5]`` (about 31 / 38 / 31 %). Groups (cost): context (1), two
    noisy copies of ``s``; A (2), four noisy views of ``a``; B (3), of ``b``; CD (5), five
    mixtures of ``c`` and ``d``; AB (8), six precise mixtures of ``a`` and ``b``; exact (12),
    ``s`` and ``e`` with little noise. Target
    ``f = [r = 0] (1.5 a + b) + [r = 1] 2 c d + [r = 2] (sin 2a + 1.2 [b > 0] - e)``:
    a regime switch, a product and a threshold.
    """
    rng = np.random.default_rng(2000 + seed)
    s, a, b, c, d, e = rng.standard_normal((6, n))
    r = (s > -0.5).astype(int) + (s > 0.5)

    def views(latents: list[np.ndarray], k: int, noise: float) -> np.ndarray:
        load = rng.uniform(0.5, 1.5, size=(len(latents), k)) * rng.choice([-1, 1], k)
        return np.column_stack(latents) @ load + noise * rng.standard_normal((n, k))

    blocks = [views([s], 2, 0.3), views([a], 4, 0.6), views([b], 4, 0.6),
              views([c, d], 5, 0.3), views([a, b], 6, 0.2), views([s, e], 3, 0.1)]
    names = ["context (2 views of s)", "A (4 views of a)", "B (4 views of b)",
             "CD (5 mixtures of c, d)", "AB (6 mixtures of a, b)", "exact (s, e)"]
    f = np.select([r == 0, r == 1], [1.5 * a + b, 2.0 * c * d],
                  np.sin(2.0 * a) + 1.2 * (b > 0) - e)
    return _assemble(blocks, [1.0, 2.0, 3.0, 5.0, 8.0, 12.0], names, _target(f, kind, rng))
