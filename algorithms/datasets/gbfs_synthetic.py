"""A synthetic nonlinear binary task with known relevant features (for GBFS).

Friedman's #1 regression function, thresholded: ``x ~ U(0, 1)^d`` and, with ``a..e`` the
five relevant features (positions drawn by the seed),

    s(x) = 10 sin(pi x_a x_b) + 20 (x_c - 1/2)^2 + 10 x_d + 5 x_e,

``y = 1[s(x) + noise * N(0, 1) > 14.4]`` (``E s(x) ~= 14.41``, so classes are about even).
Every other feature is pure noise. O(n d) time and memory.
"""

from __future__ import annotations

import numpy as np

THRESHOLD = 14.4


def make_gbfs_synthetic(n_samples: int = 2000, n_features: int = 50, *, noise: float = 1.0,
                        random_state: int | None = 0,
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return ``X`` float64 (n, d), ``y`` int64 (n,) in {0, 1}, ``relevant`` int64 (5,)."""
    if n_features < 5 or n_samples < 1 or noise < 0:
        raise ValueError("need n_features >= 5, n_samples >= 1 and noise >= 0")
    rng = np.random.default_rng(random_state)
    X = rng.uniform(0.0, 1.0, size=(n_samples, n_features))
    relevant = rng.permutation(n_features)[:5].astype(np.int64)
    a, b, c, d, e = (X[:, k] for k in relevant)
    score = 10.0 * np.sin(np.pi * a * b) + 20.0 * (c - 0.5) ** 2 + 10.0 * d + 5.0 * e
    y = (score + noise * rng.standard_normal(n_samples) > THRESHOLD).astype(np.int64)
    return X, y, relevant
