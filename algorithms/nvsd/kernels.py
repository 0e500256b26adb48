"""Kernels with the first and second derivatives NVSD needs (Gregorova et al., UAI 2018).

For a symmetric kernel ``k(s, t)`` and point sets ``S`` (m1, d), ``T`` (m2, d):

- ``value(S, T)[i, j] = k(s^i, t^j)``                                   shape (m1, m2)
- ``first(S, T)[a, i, j] = d k(s, t) / d s_a at (s^i, t^j)``             shape (d, m1, m2)
- ``second(S, T)[a, b, i, j] = d^2 k(s, t) / (d s_a d t_b) at (s^i, t^j)``  shape (d, d, m1, m2)

With ``S = T = X`` these are the seed's ``K``, ``D^a`` and ``L^{ab}``: ``first(X, X)[a] = D^a``,
``first(X, X)[a].T = D~^a`` and ``second(X, X)[a, b] = L^{ab}``, with ``L^{ab}_ij = L^{ba}_ji``.
Cost: O(m1 m2 d) for ``value``/``first``, O(m1 m2 d^2) time and memory for ``second``.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class PolynomialKernel:
    """``k(s, t) = (offset + s . t) ** degree``."""

    name = "polynomial"

    def __init__(self, degree: int = 3, offset: float = 1.0) -> None:
        if int(degree) != degree or degree < 1:
            raise ValueError(f"degree must be a positive integer, got {degree!r}")
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset!r}")
        self.degree = int(degree)
        self.offset = float(offset)

    def params(self) -> dict[str, Any]:
        """Constructor parameters (JSON scalars)."""
        return {"degree": self.degree, "offset": self.offset}

    def _base(self, S: np.ndarray, T: np.ndarray) -> np.ndarray:
        return self.offset + S @ T.T

    def value(self, S: np.ndarray, T: np.ndarray) -> np.ndarray:
        """Kernel matrix, (m1, m2)."""
        return self._base(S, T) ** self.degree

    def first(self, S: np.ndarray, T: np.ndarray) -> np.ndarray:
        """``p g^(p-1) t_a`` with ``g = offset + s . t``; (d, m1, m2)."""
        p = self.degree
        coef = p * self._base(S, T) ** (p - 1)
        return coef[None, :, :] * T.T[:, None, :]

    def second(self, S: np.ndarray, T: np.ndarray) -> np.ndarray:
        """``p(p-1) g^(p-2) t_a s_b + p g^(p-1) delta_ab``; (d, d, m1, m2)."""
        p, d = self.degree, S.shape[1]
        g = self._base(S, T)
        out = np.zeros((d, d) + g.shape)
        if p >= 2:
            c2 = p * (p - 1) * g ** (p - 2)
            out += c2[None, None] * T.T[:, None, None, :] * S.T[None, :, :, None]
        diag = p * g ** (p - 1)
        for a in range(d):
            out[a, a] += diag
        return out


class GaussianKernel:
    """``k(s, t) = exp(-||s - t||^2 / (2 sigma^2))``."""

    name = "gaussian"

    def __init__(self, sigma: float = 1.0) -> None:
        if not sigma > 0:
            raise ValueError(f"sigma must be > 0, got {sigma!r}")
        self.sigma = float(sigma)

    def params(self) -> dict[str, Any]:
        """Constructor parameters (JSON scalars)."""
        return {"sigma": self.sigma}

    def value(self, S: np.ndarray, T: np.ndarray) -> np.ndarray:
        """Kernel matrix, (m1, m2)."""
        sq = (S * S).sum(1)[:, None] + (T * T).sum(1)[None, :] - 2.0 * S @ T.T
        return np.exp(-np.maximum(sq, 0.0) / (2.0 * self.sigma**2))

    def first(self, S: np.ndarray, T: np.ndarray) -> np.ndarray:
        """``-(s_a - t_a) k / sigma^2``; (d, m1, m2)."""
        diff = S.T[:, :, None] - T.T[:, None, :]
        return -diff * self.value(S, T)[None] / self.sigma**2

    def second(self, S: np.ndarray, T: np.ndarray) -> np.ndarray:
        """``k (delta_ab / sigma^2 - (s_a - t_a)(s_b - t_b) / sigma^4)``; (d, d, m1, m2)."""
        d = S.shape[1]
        k = self.value(S, T)
        diff = S.T[:, :, None] - T.T[:, None, :]
        s2 = self.sigma**2
        out = -(diff[:, None] * diff[None, :]) * (k / s2**2)[None, None]
        for a in range(d):
            out[a, a] += k / s2
        return out


KERNELS = {"polynomial": PolynomialKernel, "gaussian": GaussianKernel}


def make_kernel(name: str, **params: Any) -> PolynomialKernel | GaussianKernel:
    """Kernel by name (``"polynomial"`` or ``"gaussian"``) with its parameters."""
    if name not in KERNELS:
        raise ValueError(f"unknown kernel {name!r}; expected one of {sorted(KERNELS)}")
    return KERNELS[name](**params)


def derivative_gram(kernel: Any, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Blocks of the Gram matrix ``Q`` of the representers ``k_{x^i}``, ``d_a k_{x^i}``.

    Returns ``K`` (n, n), ``G`` (nd, n) with ``G[a*n + i, j] = D^a_ij`` and ``H`` (nd, nd)
    with ``H[a*n + i, b*n + j] = L^{ab}_ij``, so ``Q = [[K, G^T], [G, H]]`` and, for
    ``omega = (alpha, beta)``: ``f(X) = K alpha + G^T beta`` and the partial derivatives at the
    training points ``phi = Z omega = G alpha + H beta``. O(n^2 d^2) time and memory.
    """
    n, d = X.shape
    K = kernel.value(X, X)
    G = kernel.first(X, X).reshape(d * n, n)
    H = kernel.second(X, X).transpose(0, 2, 1, 3).reshape(d * n, d * n)
    H = 0.5 * (H + H.T)
    return K, G, H


def evaluate_function(
    kernel: Any, X_train: np.ndarray, alpha: np.ndarray, beta: np.ndarray, X: np.ndarray
) -> np.ndarray:
    """``f(x) = sum_i alpha_i k(x^i, x) + sum_a sum_i beta_ai d_a k_{x^i}(x)``; (m,).

    ``beta`` has shape (d, n). O(m n d) memory and time.
    """
    out = kernel.value(X_train, X).T @ alpha
    first = kernel.first(X_train, X)
    return out + np.einsum("ai,aim->m", beta, first)
