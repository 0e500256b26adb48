"""Regularizers of NVSD on the derivative values and their closed-form proximal operators.

``phi`` has shape (d, n): ``phi[a] = (d_a f(x^1), ..., d_a f(x^n))`` and
``||d_a f||_n = ||phi[a]||_2 / sqrt(n)``. With ``norms_a = ||phi[a]|| / sqrt(n)``:

- lasso ``"l"``:        ``Omega = sum_a norms_a``
- group ``"gl"``:       ``Omega = sum_g w_g ||(norms_a)_{a in g}||_2`` (``w_g = p_g`` in the seed)
- elastic ``"en"``:     ``Omega = r sum_a norms_a + (1 - r) sum_a norms_a^2``, ``r = l1_ratio``
  (the paper's mu)

``prox(v, t) = argmin_x 0.5 ||x - v||^2 + t Omega(x)`` is block soft-thresholding per
variable (lasso), per group (group lasso), followed by a shrink for the elastic net.
All O(nd).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from algorithms.batch import DEPRECATED, deprecated_alias


@dataclass(frozen=True)
class Regularizer:
    """A structured sparsity penalty over the ``d`` partial-derivative blocks.

    ``kind`` is ``"l"``, ``"gl"`` or ``"en"``; ``group_of`` (d,) maps a variable to its group
    (``gl`` only); ``weights`` (G,) are the group weights; ``l1_ratio`` is the elastic-net
    mix (the weight of the l1 part; 1 for the other kinds).
    """

    kind: str
    d: int
    group_of: np.ndarray
    weights: np.ndarray
    l1_ratio: float = 1.0

    def block_norms(self, phi: np.ndarray) -> np.ndarray:
        """``||phi[a]|| / sqrt(n)`` per variable, (d,)."""
        return np.sqrt((phi * phi).sum(axis=1) / phi.shape[1])

    def group_norms(self, norms: np.ndarray) -> np.ndarray:
        """``||(norms_a)_{a in g}||_2`` per group, (G,)."""
        return np.sqrt(np.bincount(self.group_of, norms * norms, minlength=self.weights.size))

    def value(self, phi: np.ndarray) -> float:
        """``Omega(phi)``."""
        norms = self.block_norms(phi)
        if self.kind == "gl":
            return float(self.weights @ self.group_norms(norms))
        if self.kind == "en":
            return float(self.l1_ratio * norms.sum()
                         + (1.0 - self.l1_ratio) * (norms * norms).sum())
        return float(norms.sum())

    def prox(self, v: np.ndarray, t: float) -> np.ndarray:
        """``argmin_x 0.5 ||x - v||_F^2 + t Omega(x)`` for ``v`` (d, n)."""
        sqrt_n = np.sqrt(v.shape[1])
        norms = np.sqrt((v * v).sum(axis=1))  # Euclidean, not divided by sqrt(n)
        if self.kind == "gl":
            gnorm = np.sqrt(np.bincount(self.group_of, norms * norms, minlength=self.weights.size))
            thresh = t * self.weights / sqrt_n
            scale = _shrink(gnorm, thresh)[self.group_of]
        elif self.kind == "en":
            ridge = 1.0 + 2.0 * t * (1.0 - self.l1_ratio) / v.shape[1]
            scale = _shrink(norms, t * self.l1_ratio / sqrt_n) / ridge
        else:
            scale = _shrink(norms, t / sqrt_n)
        return v * scale[:, None]

    def dual_bound(self, y_dual: np.ndarray) -> float:
        """Smallest ``tau`` with ``y_dual in tau * dOmega(0)``: ``phi = 0`` is then optimal."""
        sqrt_n = np.sqrt(y_dual.shape[1])
        norms = np.sqrt((y_dual * y_dual).sum(axis=1))
        if self.kind == "gl":
            gnorm = np.sqrt(np.bincount(self.group_of, norms * norms, minlength=self.weights.size))
            return float(np.max(gnorm * sqrt_n / self.weights))
        ratio = self.l1_ratio if self.kind == "en" else 1.0
        return float(np.max(norms) * sqrt_n / ratio)


def _shrink(norms: np.ndarray, thresh: np.ndarray | float) -> np.ndarray:
    """``max(0, 1 - thresh / norms)`` with 0 where ``norms == 0``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = 1.0 - thresh / norms
    return np.where(norms > 0, np.maximum(scale, 0.0), 0.0)


def make_regularizer(
    kind: str,
    d: int,
    *,
    groups: list[list[int]] | np.ndarray | None = None,
    l1_ratio: float = 0.5,
    group_weight: str = "size",
    mu: float = DEPRECATED,
) -> Regularizer:
    """Build a :class:`Regularizer`.

    ``groups`` (``gl`` only) is a list of lists of 0-based variable indices forming a
    partition of ``range(d)``, or a (d,) array of group labels. ``l1_ratio`` (``en`` only,
    in (0, 1]; ``mu`` is its deprecated spelling) weighs the l1 part. ``group_weight`` is
    ``"size"`` (``w_g = p_g``, the seed's choice) or ``"sqrt"`` (``w_g = sqrt(p_g)``, Yuan
    and Lin).
    """
    l1_ratio = deprecated_alias("make_regularizer", "mu", "l1_ratio", mu, l1_ratio, 0.5)
    if kind not in ("l", "gl", "en"):
        raise ValueError(f"regularizer must be 'l', 'gl' or 'en', got {kind!r}")
    group_of = np.arange(d, dtype=np.int64)
    if kind == "gl":
        group_of = _group_labels(groups, d)
    if kind == "en" and (isinstance(l1_ratio, bool) or not isinstance(l1_ratio, numbers.Real)
                         or not 0.0 < l1_ratio <= 1.0):
        raise ValueError(f"l1_ratio must be in (0, 1], got {l1_ratio!r}")
    sizes = np.bincount(group_of).astype(float)
    if group_weight == "size":
        weights = sizes
    elif group_weight == "sqrt":
        weights = np.sqrt(sizes)
    else:
        raise ValueError(f"group_weight must be 'size' or 'sqrt', got {group_weight!r}")
    if kind != "gl":
        weights = np.ones(d)
    return Regularizer(kind, d, group_of, weights, float(l1_ratio) if kind == "en" else 1.0)


def _group_labels(groups: list[list[int]] | np.ndarray | None, d: int) -> np.ndarray:
    if groups is None:
        raise ValueError("regularizer 'gl' needs groups")
    arr = np.asarray(groups, dtype=object)
    if arr.ndim == 1 and len(arr) == d and all(np.isscalar(g) for g in arr):
        labels = np.asarray(groups, dtype=np.int64)
        _, labels = np.unique(labels, return_inverse=True)
        return labels.astype(np.int64)
    labels = np.full(d, -1, dtype=np.int64)
    for g, members in enumerate(groups):
        for a in members:
            if not 0 <= int(a) < d or labels[int(a)] != -1:
                raise ValueError(f"groups must partition range({d}); bad or repeated index {a}")
            labels[int(a)] = g
    if (labels < 0).any():
        raise ValueError(f"groups must cover range({d}); missing {np.flatnonzero(labels < 0)}")
    return labels
