from __future__ import annotations

import numpy as np

from algorithms.datasets.online_synthetic import make_task, make_x1, stream


def test_x1_shape_sparsity_and_labels():
    X, y, task = make_x1(n_samples=500, seed=3)
    assert X.n_features == 20_000 and X.n_rows == 500
    assert np.all(np.diff(X.indptr) == 600)
    dense_informative = np.zeros((500, 200))
    for row in range(500):
        idx = X.indices[X.indptr[row]:X.indptr[row + 1]]
        val = X.values[X.indptr[row]:X.indptr[row + 1]]
        assert np.all(np.diff(idx) > 0)                          # sorted, distinct
        informative = np.isin(idx, task.informative)
        assert informative.sum() == 200                          # + 400 noise dimensions
        dense_informative[row] = val[informative]
    np.testing.assert_array_equal(y, np.where(dense_informative @ task.true_weights >= 0, 1, -1))
    assert np.all((task.true_weights >= 0) & (task.true_weights <= 1))
    assert abs(y.mean()) < 0.2


def test_stream_is_deterministic_and_chunked():
    task = make_task(1000, 10, 20, seed=1)
    a = list(stream(task, 250, chunk_size=100, seed=5))
    b = list(stream(task, 250, chunk_size=100, seed=5))
    assert [len(labels) for _, labels in a] == [100, 100, 50]
    for (xa, ya), (xb, yb) in zip(a, b, strict=True):
        assert xa.values.tobytes() == xb.values.tobytes() and np.array_equal(ya, yb)


def test_ultra_high_dimension_without_dense_arrays():
    task = make_task(n_features=2_000_000_000, n_informative=500, n_noise=500, seed=0)
    batch, labels = next(stream(task, 200, chunk_size=200))
    assert batch.n_features == 2_000_000_000 and batch.nnz == 200 * 1000
    assert batch.indices.max() < 2_000_000_000 and batch.indices.min() >= 0
