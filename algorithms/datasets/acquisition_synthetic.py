r"""Synthetic sets where the best next feature group depends on the values already seen
(for per-example acquisition). Each returns ``(X, y, groups, costs, names)``: float64
``X`` (n, d), ``y`` (n,) (class indices), the groups' feature indices, their costs and
names. O(n d) time and memory.

* :func:`make_cube` (after Shim, Hwang, Yang, "Joint active feature acquisition and
  classification with variable-size set encoding", NeurIPS 2018): 20 features, 8 classes
  drawn uniformly; for class ``c`` the features ``c, c+1, c+2`` are ``N(bit_j(c), sigma)``
  (``bit_j``: the j-th bit of ``c``), every other feature ``U(0, 1)``. Each feature its own
  group at cost 1, or (``nonuniform=True``) at costs cycling 1, 2, 3, 4, 5.
* :func:`make_cube_nm`: a cheap context group (one feature, cost 1) says which of three
  blocks (3 features each, cost 3) carries the signal: ``y = 1[w . x_{block(ctx)} +
  noise N(0, 1) > 0]`` with ``x ~ N(0, 1)``; the context is worth nothing alone, so a
  myopic rule never buys it first.
* :func:`make_switch` (Yoon, Jordon, van der Schaar, "INVASE: Instance-wise Variable
  Selection using Neural Networks", ICLR 2019, their switching sets Syn4-Syn6): ``x ~
  N(0, 1)^11``, ``P(y = 1 | x) = 1 / (1 + exp(f(x)))`` with ``f = f_a`` if ``x_11 < 0``
  else ``f_b``; ``f_1 = x_1 x_2``, ``f_2 = sum_{i=3..6} x_i^2 - 4``, ``f_3 = -10 sin(2 x_7)
  + 2 |x_8| + x_9 + exp(-x_10)``; kind 1: (f_1, f_2), 2: (f_1, f_3), 3: (f_2, f_3). Each
  feature its own group at cost 1.
"""

from __future__ import annotations

import numpy as np

Generated = tuple[np.ndarray, np.ndarray, list[list[int]], np.ndarray, list[str]]


def make_cube(n_samples: int = 2000, *, sigma: float = 0.3, nonuniform: bool = False,
              seed: int = 0) -> Generated:
    """The CUBE set (module docstring)."""
    rng = np.random.default_rng(seed)
    d = 20
    c = rng.integers(0, 8, size=n_samples)
    X = rng.uniform(0.0, 1.0, size=(n_samples, d))
    for j in range(3):
        bit = (c >> j) & 1
        X[np.arange(n_samples), c + j] = bit + sigma * rng.standard_normal(n_samples)
    costs = np.array([1.0 + (f % 5) if nonuniform else 1.0 for f in range(d)])
    return X, c.astype(np.float64), [[f] for f in range(d)], costs, \
        [f"x{f}" for f in range(d)]


def make_cube_nm(n_samples: int = 3000, *, noise: float = 0.3, seed: int = 0) -> Generated:
    """The CUBE-NM set (module docstring): context (cost 1), three blocks (cost 3 each)."""
    rng = np.random.default_rng(seed)
    context = rng.integers(0, 3, size=n_samples)
    blocks = rng.standard_normal((n_samples, 9))
    w = np.array([1.0, -0.8, 0.6])
    signal = np.einsum("ij,j->i", blocks.reshape(n_samples, 3, 3)[np.arange(n_samples),
                                                                   context], w)
    y = (signal + noise * rng.standard_normal(n_samples) > 0).astype(np.float64)
    X = np.column_stack([context.astype(np.float64), blocks])
    groups = [[0], [1, 2, 3], [4, 5, 6], [7, 8, 9]]
    return X, y, groups, np.array([1.0, 3.0, 3.0, 3.0]), \
        ["context", "block 0", "block 1", "block 2"]


def _f(kind: int, X: np.ndarray) -> np.ndarray:
    if kind == 1:
        return X[:, 0] * X[:, 1]
    if kind == 2:
        return np.sum(X[:, 2:6] ** 2, axis=1) - 4.0
    return -10.0 * np.sin(2.0 * X[:, 6]) + 2.0 * np.abs(X[:, 7]) + X[:, 8] + np.exp(-X[:, 9])


def make_switch(kind: int, n_samples: int = 2000, *, seed: int = 0) -> Generated:
    """INVASE's switching set ``kind`` in 1..3 (their Syn4-Syn6; module docstring)."""
    if kind not in (1, 2, 3):
        raise ValueError(f"kind must be 1, 2 or 3, got {kind!r}")
    a, b = {1: (1, 2), 2: (1, 3), 3: (2, 3)}[kind]
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_samples, 11))
    f = np.where(X[:, 10] < 0, _f(a, X), _f(b, X))
    p = 1.0 / (1.0 + np.exp(np.clip(f, -50, 50)))
    y = (rng.uniform(size=n_samples) < p).astype(np.float64)
    return X, y, [[f] for f in range(11)], np.ones(11), [f"x{f + 1}" for f in range(11)]


__all__ = ["make_cube", "make_cube_nm", "make_switch"]
