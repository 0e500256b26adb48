"""Mergeable sufficient statistics of (X, y) for anytime linear prediction (Hu et al.).

The statistics are the count ``n``, the means ``x̄`` (D,), ``ȳ`` and the centred co-moments
``Mxx = Σ(x−x̄)(x−x̄)ᵀ`` (D, D), ``Mxy = Σ(x−x̄)(y−ȳ)`` (D,), ``Myy = Σ(y−ȳ)²``. They are
equivalent to the raw sums (n, Σx, Σxxᵀ, Σxy, Σy, Σy²) but merge without cancellation
(Chan, Golub and LeVeque's pairwise update): with ``δ = x̄_b − x̄_a``,
``Mxx = Mxx_a + Mxx_b + δδᵀ n_a n_b / n``. Streaming a data set in batches and merging shards
give the statistics of one batch computation up to rounding.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from algorithms.anytime import _statistics_kernels as _kernels
from algorithms.memory import check_fits
from algorithms.serialization import dumps_state, loads_state
from algorithms.sparse import CSRBatch
from algorithms.states import envelope, open_envelope


class SufficientStatistics:
    """Streaming, mergeable second-order statistics of ``n`` examples with ``D`` features.

    Parameters
    ----------
    n_features : int
        Dimension ``D``; memory is O(D²).

    ``update(X, y)`` costs O(Σ nnz_row² + D²) for sparse batches (in place, one sweep of
    ``Mxx``: :mod:`algorithms.anytime._statistics_kernels`) and O(m·D²) for dense ones;
    ``merge`` O(D²).
    """

    kind = "anytime-sufficient-statistics"
    format_version = 1

    def __init__(self, n_features: int) -> None:
        if int(n_features) < 1:
            raise ValueError(f"n_features must be >= 1, got {n_features}")
        self.n_features = int(n_features)
        check_fits(f"statistics over {self.n_features:,} features",
                   8 * (self.n_features + 2) * self.n_features)
        self.n = 0
        self.mean_x = np.zeros(self.n_features)
        self.mean_y = 0.0
        self.mxx = np.zeros((self.n_features, self.n_features))
        self.mxy = np.zeros(self.n_features)
        self.myy = 0.0
        self._exported = False  # state_dict handed the arrays out (_own_arrays)

    # ------------------------------------------------------------------ building
    @classmethod
    def from_data(cls, X, y, n_features: int | None = None) -> SufficientStatistics:
        """Statistics of one batch (dense array, scipy sparse or CSRBatch)."""
        X = _as_matrix(X)
        stats = cls(n_features or X.shape[1])
        return stats.update(X, y)

    def update(self, X, y) -> SufficientStatistics:
        """Fold a batch ``X`` (m, D) / ``y`` (m,) into the statistics in place; returns self."""
        X = _as_matrix(X)
        y = np.asarray(y, dtype=np.float64).ravel()
        m = X.shape[0]
        if X.shape[1] > self.n_features:
            raise ValueError(f"X has {X.shape[1]} features, the statistics {self.n_features}")
        if len(y) != m:
            raise ValueError(f"X has {m} rows but y has {len(y)} values")
        if not np.all(np.isfinite(y)):
            raise ValueError("y contains NaN or infinite values")
        if m == 0:
            return self
        if sp.issparse(X):
            if X.nnz and not np.all(np.isfinite(X.data)):
                raise ValueError("X contains NaN or infinite values")
            # in place, no (D, D) temporary: O(Σ nnz_row² + D²) (_statistics_kernels)
            X = X.tocsr()
            self._own_arrays()
            self.mean_y, self.myy = _kernels.fold_sparse_rows(
                np.ascontiguousarray(X.indptr, dtype=np.int64),
                np.ascontiguousarray(X.indices, dtype=np.int64),
                np.ascontiguousarray(X.data, dtype=np.float64),
                np.ascontiguousarray(y), float(self.n),
                self.mean_x, self.mxx, self.mxy, float(self.mean_y), float(self.myy))
            self.n += m
            return self
        if not np.all(np.isfinite(X)):
            raise ValueError("X contains NaN or infinite values")
        batch = SufficientStatistics.__new__(SufficientStatistics)
        width = X.shape[1]
        batch.n_features, batch.n = self.n_features, m
        batch.mean_y = float(y.mean())
        yc = y - batch.mean_y
        batch.myy = float(yc @ yc)
        mean = X.mean(axis=0)
        Xc = X - mean
        if width == self.n_features:
            batch.mxx, batch.mxy, batch.mean_x = Xc.T @ Xc, Xc.T @ yc, mean
        else:
            batch.mxx = np.zeros((self.n_features, self.n_features))
            batch.mxy, batch.mean_x = np.zeros(self.n_features), np.zeros(self.n_features)
            batch.mxx[:width, :width] = Xc.T @ Xc
            batch.mxy[:width] = Xc.T @ yc
            batch.mean_x[:width] = mean
        batch._exported = False
        return self.merge(batch, inplace=True)

    def merge(self, other: SufficientStatistics, *, inplace: bool = False) -> SufficientStatistics:
        """Statistics of the union of both samples (pairwise update). O(D²), one sweep of
        ``Mxx`` in place (``inplace``) or of a copy."""
        if other.n_features != self.n_features:
            raise ValueError("cannot merge statistics of different dimensions")
        out = self if inplace else self.copy()
        if other.n == 0:
            return out
        if out.n == 0:
            out.n, out.mean_y, out.myy = other.n, other.mean_y, other.myy
            out.mean_x, out.mxx, out.mxy = other.mean_x.copy(), other.mxx.copy(), other.mxy.copy()
            out._exported = False
            return out
        n = out.n + other.n
        factor = out.n * other.n / n
        dx = other.mean_x - out.mean_x
        dy = other.mean_y - out.mean_y
        out._own_arrays()
        _kernels.merge_into(out.mxx, np.ascontiguousarray(other.mxx, dtype=np.float64), dx,
                            float(factor))
        out.mxy = out.mxy + other.mxy + factor * dx * dy
        out.myy = out.myy + other.myy + factor * dy * dy
        out.mean_x = out.mean_x + dx * (other.n / n)
        out.mean_y = out.mean_y + dy * (other.n / n)
        out.n = n
        return out

    def _own_arrays(self) -> None:
        """Before an in-place change: arrays handed out by :meth:`state_dict` (which a
        snapshot may still be serializing) are replaced by copies first (copy on write),
        as are read-only or non-contiguous ones."""
        if getattr(self, "_exported", False) or not self.mxx.flags.writeable or \
                not self.mxx.flags.c_contiguous or self.mxx.dtype != np.float64:
            self.mxx = np.array(self.mxx, dtype=np.float64, order="C")
            self.mean_x = np.array(self.mean_x, dtype=np.float64)
            self.mxy = np.array(self.mxy, dtype=np.float64)
        elif not all(a.flags.writeable and a.flags.c_contiguous and a.dtype == np.float64
                     for a in (self.mean_x, self.mxy)):
            self.mean_x = np.array(self.mean_x, dtype=np.float64)
            self.mxy = np.array(self.mxy, dtype=np.float64)
        self._exported = False

    def __add__(self, other: SufficientStatistics) -> SufficientStatistics:
        return self.merge(other)

    def copy(self) -> SufficientStatistics:
        out = SufficientStatistics(self.n_features)
        out.n, out.mean_y, out.myy = self.n, self.mean_y, self.myy
        out.mean_x, out.mxx, out.mxy = self.mean_x.copy(), self.mxx.copy(), self.mxy.copy()
        return out

    # ------------------------------------------------------------------ raw sums
    @property
    def sum_x(self) -> np.ndarray:
        """Σx (D,)."""
        return self.n * self.mean_x

    @property
    def sum_xx(self) -> np.ndarray:
        """Σxxᵀ (D, D) = Mxx + n x̄x̄ᵀ."""
        return self.mxx + self.n * np.outer(self.mean_x, self.mean_x)

    @property
    def sum_xy(self) -> np.ndarray:
        """Σxy (D,) = Mxy + n x̄ȳ."""
        return self.mxy + self.n * self.mean_x * self.mean_y

    @property
    def sum_y(self) -> float:
        return self.n * self.mean_y

    @property
    def sum_yy(self) -> float:
        return self.myy + self.n * self.mean_y ** 2

    # ------------------------------------------------------------------ standardizing
    def scales(self) -> tuple[np.ndarray, float]:
        """Standard deviations σ_x (D,) and σ_y; a constant column gets σ = 1 (it stays 0)."""
        if self.n == 0:
            raise ValueError("statistics are empty")
        sx = np.sqrt(np.maximum(np.diag(self.mxx), 0.0) / self.n)
        sx = np.where(sx > 1e-12 * max(1.0, float(np.abs(self.mean_x).max(initial=0.0))),
                      sx, 1.0)
        sy = float(np.sqrt(max(self.myy, 0.0) / self.n))
        return sx, (sy if sy > 0 else 1.0)

    def standardized(self, alpha: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """``C = XᵀX/n + αI`` (D, D) and ``b = XᵀY/n`` (D,) of standardized X, Y. O(D²)."""
        sx, sy = self.scales()
        C = self.mxx / (self.n * np.outer(sx, sx))
        C = 0.5 * (C + C.T)
        C[np.diag_indices_from(C)] += alpha
        b = self.mxy / (self.n * sx * sy)
        return C, b

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """The statistics in the envelope of ``algorithms.states``."""
        self._exported = True  # the next in-place change copies first (_own_arrays)
        return envelope(self.kind, self.format_version, {
            "n": int(self.n), "mean_y": float(self.mean_y), "myy": float(self.myy),
            "mean_x": self.mean_x, "mxx": self.mxx, "mxy": self.mxy})

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> SufficientStatistics:
        """Inverse of :meth:`state_dict` (and of the states written before the envelope);
        ValueError when the shapes disagree. (The service checks the values it folds:
        ``service/batch/worker/fold_state.py``.)"""
        _, state = open_envelope(state, cls.kind, (0, cls.format_version))
        mean_x = np.asarray(state["mean_x"], dtype=np.float64)
        out = cls(len(mean_x))
        out.n, out.mean_y, out.myy = int(state["n"]), float(state["mean_y"]), float(state["myy"])
        out.mean_x = mean_x.copy()
        out.mxx = np.asarray(state["mxx"], dtype=np.float64).copy()
        out.mxy = np.asarray(state["mxy"], dtype=np.float64).copy()
        if out.mxx.shape != (out.n_features, out.n_features) or out.mxy.shape != mean_x.shape:
            raise ValueError("inconsistent shapes in sufficient-statistics state")
        return out

    def to_bytes(self) -> bytes:
        """:meth:`state_dict` in the safe archive format (``algorithms.serialization``)."""
        return dumps_state(self.state_dict())

    @classmethod
    def from_bytes(cls, data: bytes, *, max_bytes: int = 1 << 34) -> SufficientStatistics:
        """Inverse of :meth:`to_bytes`."""
        return cls.from_state_dict(loads_state(data, max_bytes=max_bytes))


def _as_matrix(X):
    """Dense float64 2-D array or scipy CSR matrix."""
    if isinstance(X, CSRBatch):
        return X.to_scipy()
    if sp.issparse(X):
        return sp.csr_matrix(X, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[None, :]
    if X.ndim != 2:
        raise ValueError(f"X must be 1-D or 2-D, got shape {X.shape}")
    return X
