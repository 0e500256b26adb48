"""The project's CSR batch type and conversions to it.

A :class:`CSRBatch` holds ``n`` sparse examples in compressed-sparse-row form:
``indptr`` (int64, n+1), ``indices`` (int32, nnz), ``values`` (float64, nnz) and the
dimension ``n_features``. Row ``i`` is ``indices[indptr[i]:indptr[i+1]]``. Indices within a
row are unique (not necessarily sorted); every index is in ``[0, n_features)``. Kernels
trust these invariants; :func:`as_csr_batch` establishes them once at the edge.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numba import njit, types

from algorithms.sparse._validate import DUPLICATE, NEGATIVE, NOT_FINITE, TOO_LARGE, check_rows

INDEX_DTYPE = np.int32
INDPTR_DTYPE = np.int64
VALUE_DTYPE = np.float64
MAX_FEATURES = int(np.iinfo(np.int32).max)  # 2**31 - 1


class DuplicateIndexError(ValueError):
    """A row holds the same feature index twice."""


@dataclass(frozen=True)
class CSRBatch:
    """A batch of sparse examples. Construct with :meth:`from_arrays` to validate."""

    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    n_features: int

    @property
    def n_rows(self) -> int:
        return len(self.indptr) - 1

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])

    def __len__(self) -> int:
        return self.n_rows

    @classmethod
    def from_arrays(cls, indptr, indices, values, n_features: int) -> CSRBatch:
        """Validate and wrap flat arrays (copies only when a dtype must change). O(nnz)."""
        n_features = int(n_features)
        if not 0 < n_features <= MAX_FEATURES:
            raise ValueError(f"n_features must be in [1, {MAX_FEATURES}], got {n_features}")
        indptr = np.ascontiguousarray(indptr, dtype=INDPTR_DTYPE)
        indices = np.ascontiguousarray(indices, dtype=INDEX_DTYPE) if _fits_int32(indices) \
            else _raise(ValueError("feature index out of the int32 range"))
        values = np.ascontiguousarray(values, dtype=VALUE_DTYPE)
        if indptr.ndim != 1 or len(indptr) < 1 or indptr[0] != 0:
            raise ValueError("indptr must be 1-D and start at 0")
        if np.any(np.diff(indptr) < 0):
            raise ValueError("indptr must be non-decreasing")
        if indices.shape != values.shape or indices.ndim != 1 or len(indices) != indptr[-1]:
            raise ValueError(
                f"indices ({indices.shape}) and values ({values.shape}) must both have "
                f"indptr[-1] = {int(indptr[-1])} entries")
        code, row, position = check_rows(indptr, indices, values, n_features)
        if code == NEGATIVE:
            raise ValueError(f"row {row}: negative feature index")
        if code == TOO_LARGE:
            raise ValueError(f"row {row}: feature index {int(indices[position])} >= "
                             f"n_features {n_features}")
        if code == NOT_FINITE:
            raise ValueError(f"row {row}: non-finite feature value")
        if code == DUPLICATE:
            raise DuplicateIndexError(f"row {row}: duplicate feature index")
        return cls(indptr, indices, values, n_features)

    def to_scipy(self) -> sp.csr_matrix:
        """The batch as a scipy CSR matrix (int32 index arrays when they fit, as scipy
        would convert them: handed over as such, it skips scanning them). O(rows)."""
        indptr = self.indptr
        if len(indptr) and indptr[-1] <= MAX_FEATURES:
            indptr = indptr.astype(np.int32)
        return sp.csr_matrix((self.values, self.indices, indptr),
                             shape=(self.n_rows, self.n_features))

    def __matmul__(self, w) -> np.ndarray:
        """``X @ w`` for a dense vector ``w`` (n_features,): float64 (n,), each row summed in
        stored order as scipy's product sums it (the same bits), in one kernel call (scipy's
        checks cost tens of microseconds for a row of a hundred entries). O(nnz)."""
        w = np.asarray(w)
        if w.shape != (self.n_features,):
            return self.to_scipy() @ w
        out = np.empty(self.n_rows)
        _matvec(self.indptr, self.indices, self.values,
                np.ascontiguousarray(w, dtype=np.float64), out)
        return out

    def row_slice(self, start: int, stop: int) -> CSRBatch:
        """Rows ``start:stop`` as a new batch (views of the value arrays). O(rows)."""
        lo, hi = self.indptr[start], self.indptr[stop]
        return CSRBatch(self.indptr[start:stop + 1] - lo, self.indices[lo:hi],
                        self.values[lo:hi], self.n_features)

    def normalized(self) -> CSRBatch:
        """Each row scaled to unit L2 norm (empty / all-zero rows unchanged). O(nnz)."""
        lengths = np.diff(self.indptr)
        rows = np.repeat(np.arange(self.n_rows), lengths)
        norms = np.sqrt(np.bincount(rows, weights=self.values ** 2, minlength=self.n_rows))
        norms = np.where(norms > 0, norms, 1.0)
        return CSRBatch(self.indptr, self.indices,
                        self.values / np.repeat(norms, lengths), self.n_features)


_INDPTR = types.Array(types.int64, 1, "C", readonly=True)
_INDICES = types.Array(types.int32, 1, "C", readonly=True)
_FLOATS = types.Array(types.float64, 1, "C", readonly=True)


@njit(types.void(_INDPTR, _INDICES, _FLOATS, _FLOATS, types.float64[::1]), cache=True,
      nogil=True)
def _matvec(indptr, indices, values, w, out):
    """``out[i] = Σ values[k]·w[indices[k]]`` over row ``i``'s entries, in stored order."""
    for row in range(indptr.shape[0] - 1):
        total = 0.0
        for k in range(indptr[row], indptr[row + 1]):
            total += values[k] * w[indices[k]]
        out[row] = total


def join_indptrs(indptrs) -> np.ndarray:
    """The indptr of CSR pieces stacked in order (each piece's starts at 0). O(rows)."""
    offsets = np.cumsum([0] + [int(p[-1]) for p in indptrs[:-1]])
    indptr = np.concatenate([np.zeros(1, dtype=INDPTR_DTYPE)]
                            + [p[1:] + o for p, o in zip(indptrs, offsets, strict=True)])
    return indptr.astype(INDPTR_DTYPE, copy=False)


def join_rows(indptrs, indices, values) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stack CSR pieces (lists of indptr / indices / values arrays) into one CSR, rows in
    order. O(total nnz + rows); one piece is returned as it is (no copy)."""
    if not indptrs:
        return (np.zeros(1, dtype=INDPTR_DTYPE), np.zeros(0, dtype=INDEX_DTYPE),
                np.zeros(0, dtype=VALUE_DTYPE))
    if len(indptrs) == 1:
        return indptrs[0].astype(INDPTR_DTYPE, copy=False), indices[0], values[0]
    return join_indptrs(indptrs), np.concatenate(indices), np.concatenate(values)


def concat_batches(batches: list[CSRBatch]) -> CSRBatch:
    """One batch holding the rows of ``batches`` in order (same ``n_features``)."""
    if len(batches) == 1:
        return batches[0]
    indptr, indices, values = join_rows([b.indptr for b in batches],
                                        [b.indices for b in batches],
                                        [b.values for b in batches])
    return CSRBatch(indptr, indices, values, batches[0].n_features)


def as_csr_batch(X, n_features: int | None = None) -> CSRBatch:
    """Convert ``X`` (CSRBatch, scipy sparse, or dense 1-D/2-D array) to a valid batch.

    Scipy input is canonicalized (duplicates summed); dense input keeps its non-zeros.
    ``n_features`` defaults to the width of ``X``; a narrower ``X`` is accepted (it is the
    same examples in a larger space), a wider one is an error.
    """
    if isinstance(X, CSRBatch):
        if n_features is not None and X.n_features > n_features:
            raise ValueError(f"X has {X.n_features} features, the model {n_features}")
        if n_features is not None and X.n_features != n_features:
            return CSRBatch(X.indptr, X.indices, X.values, n_features)
        return X
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        if X.dtype.kind == "c":
            raise ValueError("Complex data not supported")
        width = X.shape[1]
        if n_features is not None and width > n_features:
            raise ValueError(f"X has {width} features, the model {n_features}")
        try:  # the batch's own checks prove the usual matrix canonical (scipy's would re-read)
            return CSRBatch.from_arrays(X.indptr, X.indices, X.data, n_features or width)
        except DuplicateIndexError:  # scipy's meaning of duplicates: they add up
            X = X.copy()
            X.sum_duplicates()
        indptr, indices, values = X.indptr, X.indices, X.data
    else:
        dense = np.asarray(X)
        if dense.dtype.kind == "c":
            raise ValueError("Complex data not supported")
        dense = dense.astype(VALUE_DTYPE, copy=False)
        if dense.ndim == 1:
            dense = dense[None, :]
        if dense.ndim != 2:
            raise ValueError(f"X must be 1-D or 2-D, got shape {dense.shape}")
        if not np.all(np.isfinite(dense)):
            raise ValueError("X contains NaN or infinite values")
        width = dense.shape[1]
        mask = dense != 0
        indptr = np.concatenate([[0], np.cumsum(mask.sum(axis=1))])
        indices = np.nonzero(mask)[1]
        values = dense[mask]
    if n_features is None:
        n_features = width
    elif width > n_features:
        raise ValueError(f"X has {width} features, the model {n_features}")
    return CSRBatch.from_arrays(indptr, indices, values, n_features)


def _fits_int32(indices) -> bool:
    indices = np.asarray(indices)
    if indices.size == 0 or indices.dtype == INDEX_DTYPE:
        return True
    return bool(indices.max() <= MAX_FEATURES and indices.min() >= np.iinfo(np.int32).min)


def _raise(exc: Exception):
    raise exc
