from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from algorithms.sparse import CSRBatch, as_csr_batch


@pytest.mark.parametrize("indptr, indices, values, n, message", [
    ([0, 1], [5], [1.0], 5, "row 0: feature index 5 >= n_features 5"),
    ([0, 2], [1, 1], [1.0, 2.0], 5, "row 0: duplicate feature index"),
    ([0, 1, 2], [0, -1], [1.0, 2.0], 5, "row 1: negative feature index"),
    ([0, 1], [0], [np.inf], 5, "row 0: non-finite"),
    ([0, 2], [0], [1.0], 5, "entries"),
    ([1, 2], [0], [1.0], 5, "start at 0"),
    ([0, 1], [0], [1.0], 0, "n_features"),
])
def test_invalid_batches_name_the_row(indptr, indices, values, n, message):
    with pytest.raises(ValueError, match=message):
        CSRBatch.from_arrays(indptr, indices, values, n)


def test_conversions_and_helpers():
    X = sp.csr_matrix(np.array([[0.0, 3.0, 4.0], [0.0, 0.0, 0.0]]))
    batch = as_csr_batch(X, n_features=10)
    assert batch.n_features == 10 and batch.n_rows == 2 and batch.nnz == 2
    np.testing.assert_allclose(batch.normalized().values, [0.6, 0.8])
    assert batch.row_slice(1, 2).nnz == 0
    # Duplicates in scipy input are summed; dense 1-D input is one row.
    dup = sp.csr_matrix((np.array([1.0, 2.0]), np.array([1, 1]), np.array([0, 2])), shape=(1, 3))
    assert as_csr_batch(dup).values.tolist() == [3.0]
    assert as_csr_batch(np.array([0.0, 2.0])).indices.tolist() == [1]
    with pytest.raises(ValueError, match="features"):
        as_csr_batch(np.ones((1, 4)), n_features=3)


def test_scipy_input_unsorted_rows_and_duplicates_leave_the_matrix_alone():
    unsorted = sp.csr_matrix((np.array([1.0, 2.0, 3.0]), np.array([2, 0, 1]),
                              np.array([0, 2, 3])), shape=(2, 3))
    batch = as_csr_batch(unsorted)
    assert batch.indices.tolist() == [2, 0, 1] and batch.values.tolist() == [1.0, 2.0, 3.0]
    dup = sp.csr_matrix((np.array([1.0, 2.0, 5.0]), np.array([1, 1, 0]),
                         np.array([0, 2, 3])), shape=(2, 3))
    batch = as_csr_batch(dup)
    assert batch.indptr.tolist() == [0, 1, 2] and batch.values.tolist() == [3.0, 5.0]
    assert dup.data.tolist() == [1.0, 2.0, 5.0] and dup.indices.tolist() == [1, 1, 0]
    with pytest.raises(ValueError, match="non-finite"):
        as_csr_batch(sp.csr_matrix(np.array([[np.nan, 1.0]])))
    with pytest.raises(ValueError, match="features"):
        as_csr_batch(sp.csr_matrix(np.ones((1, 4))), n_features=3)


def test_product_is_scipys():
    """``batch @ w`` gives scipy's bits (rows summed in stored order); a 2-D right-hand
    side goes through scipy."""
    rng = np.random.default_rng(4)
    for n in (1, 3, 50):
        X = sp.random(n, 40, density=0.3, format="csr", random_state=n)
        for row in range(n):  # each row's entries in another order (summed as stored)
            lo, hi = X.indptr[row], X.indptr[row + 1]
            order = lo + rng.permutation(hi - lo)
            X.indices[lo:hi], X.data[lo:hi] = X.indices[order], X.data[order]
        batch = as_csr_batch(X, 40)
        w = rng.standard_normal(40)
        assert np.array_equal(batch @ w, X @ w)
        W = rng.standard_normal((40, 2))
        np.testing.assert_allclose(batch @ W, X @ W)
    empty = CSRBatch(np.zeros(2, dtype=np.int64), np.zeros(0, dtype=np.int32), np.zeros(0), 5)
    assert np.array_equal(empty @ np.ones(5), [0.0])
