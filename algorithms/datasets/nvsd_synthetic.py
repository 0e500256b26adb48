"""Synthetic experiments E1-E3 of NVSD (Gregorova et al., UAI 2018, sec. 5.1).

All have d = 18 inputs of which the 0-based variables ``RELEVANT = (0, 1, 2, 6, 7, 8)``
(the seed's {1, 2, 3, 7, 8, 9}) are relevant, and noise ``eps ~ N(0, 0.01)`` (variance 0.01,
standard deviation 0.1). Each generator returns ``X`` (n, 18), ``y`` (n,) and is seeded.

- E1: ``x ~ N(0, I)``; ``y = h3(x1, x2, x3) + h3(x7, x8, x9) + eps`` with
  ``h3(a, b, c) = sum_{i <= j <= k} v_i v_j v_k``; groups of three consecutive variables.
- E2: pairs ``(a, a + 6)`` for a = 1..6 (1-based) and (13, 14), (15, 16), (17, 18) are
  standard normal with correlation 0.95, pairs independent; ``y = (x1 + x2 + x3)^3 +
  (x7 + x8 + x9)^3 + eps``. Groups (for NVSD(GL)): the correlated pairs.
- E3: ``z ~ N(0, I_6)``; ``y = 10 (z1^2 + z3^2) exp(-2 (z1^2 + z3^2)) + eps``; inputs are three
  noisy copies ``x_ij = z_i + N(0, 0.1)`` (variance 0.1) of each ``z_i``; groups of three.
"""

from __future__ import annotations

import numpy as np

D = 18
RELEVANT = (0, 1, 2, 6, 7, 8)
NOISE_SD = 0.1  # N(0, 0.01): variance 0.01
E2_PAIRS = ((0, 6), (1, 7), (2, 8), (3, 9), (4, 10), (5, 11), (12, 13), (14, 15), (16, 17))
TRIPLES = tuple(tuple(range(3 * g, 3 * g + 3)) for g in range(6))


def _h3(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    v = (a, b, c)
    out = np.zeros_like(a)
    for i in range(3):
        for j in range(i, 3):
            for k in range(j, 3):
                out = out + v[i] * v[j] * v[k]
    return out


def make_e1(n: int, seed: int | np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray]:
    """E1: independent N(0, 1) inputs, two complete cubic symmetric polynomials. O(n d)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, D))
    y = _h3(X[:, 0], X[:, 1], X[:, 2]) + _h3(X[:, 6], X[:, 7], X[:, 8])
    return X, y + NOISE_SD * rng.standard_normal(n)


def make_e2(
    n: int, seed: int | np.random.Generator | None = None, rho: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """E2: pairwise-correlated N(0, 1) inputs (rho), ``y = s1^3 + s2^3 + eps``. O(n d)."""
    rng = np.random.default_rng(seed)
    X = np.empty((n, D))
    for a, b in E2_PAIRS:
        u, v = rng.standard_normal(n), rng.standard_normal(n)
        X[:, a] = u
        X[:, b] = rho * u + np.sqrt(1.0 - rho**2) * v
    y = X[:, 0:3].sum(1) ** 3 + X[:, 6:9].sum(1) ** 3
    return X, y + NOISE_SD * rng.standard_normal(n)


def make_e3(n: int, seed: int | np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray]:
    """E3: three noisy measurements of each of 6 latent N(0, 1) variables. O(n d)."""
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, 6))
    r2 = Z[:, 0] ** 2 + Z[:, 2] ** 2
    y = 10.0 * r2 * np.exp(-2.0 * r2) + NOISE_SD * rng.standard_normal(n)
    X = np.repeat(Z, 3, axis=1) + np.sqrt(0.1) * rng.standard_normal((n, D))
    return X, y


EXPERIMENTS = {
    "E1": {"make": make_e1, "kernel": "polynomial", "kernel_params": {"degree": 3, "offset": 1.0},
           "groups": [list(g) for g in TRIPLES]},
    "E2": {"make": make_e2, "kernel": "polynomial", "kernel_params": {"degree": 3, "offset": 1.0},
           "groups": [list(p) for p in E2_PAIRS]},
    "E3": {"make": make_e3, "kernel": "gaussian", "kernel_params": {"sigma": 4.0},
           "groups": [list(g) for g in TRIPLES]},
}
