"""numpy arrays, pandas DataFrames and scipy sparse rows as examples, against a real
service (each skipped where its library is not installed)."""

from __future__ import annotations

import pytest

from featurebudget_client import as_examples


def test_numpy_rows_score_as_their_dicts(client, online_model):
    np = pytest.importorskip("numpy")
    rows = np.array([[2.0, 0.5, np.nan], [-2.0, 0.0, 1.0]], dtype=np.float32)
    as_dicts = [{"indices": [0, 1], "values": [2.0, 0.5]},
                {"indices": [0, 1, 2], "values": [-2.0, 0.0, 1.0]}]
    assert as_examples(rows) == as_dicts
    assert client.predict(online_model, rows).scores == \
        client.predict(online_model, as_dicts).scores
    assert client.post_examples(online_model, rows, labels=np.array([1, -1]),
                                wait=True).accepted == 2
    with pytest.raises(ValueError, match=r"one row per example \(2-D\).*reshape\(1, -1\)"):
        client.predict(online_model, rows[0])


def test_scipy_sparse_rows(client, online_model):
    sparse = pytest.importorskip("scipy.sparse")
    matrix = sparse.csr_matrix(([2.0, 1.0, -2.0], ([0, 0, 1], [0, 2, 0])), shape=(2, 10))
    expected = [{"indices": [0, 2], "values": [2.0, 1.0]}, {"indices": [0], "values": [-2.0]}]
    assert as_examples(matrix) == expected
    assert as_examples([matrix[0], matrix[1]]) == expected  # a list of sparse rows
    assert client.predict(online_model, matrix.tocoo()).labels == [1, -1]


def test_dataframes_by_index_by_pair_and_by_feature_name(client, online_model, batch_model):
    pd = pytest.importorskip("pandas")
    by_index = pd.DataFrame({0: [2.0, -2.0], 2: [0.0, None]})
    assert as_examples(by_index)[1] == {"indices": [0], "values": [-2.0]}
    assert client.predict(online_model, by_index).labels == [1, -1]
    by_name = pd.DataFrame({"bmi": [1.0, 1.0], "bp": [0.0, 0.0], "s1": [1.0, None]})
    answer = client.predict(batch_model, by_name)  # the groups read from the model
    assert sorted(answer.answers[0]["groups_used"]) == ["blood", "exam"]
    assert answer.answers[1]["groups_used"] == ["exam"]
    by_pair = pd.DataFrame({("exam", "bmi"): [1.0], ("exam", "bp"): [0.0]})
    assert as_examples(by_pair) == [{"features": {"exam": {"bmi": 1.0, "bp": 0.0}}}]
    assert client.predict(batch_model, by_pair).groups_used == ["exam"]
    with pytest.raises(ValueError, match=r"column 'age' is no feature of the model"):
        client.predict(batch_model, pd.DataFrame({"age": [1.0]}))
    with pytest.raises(ValueError, match="online model: name its columns by index"):
        client.predict(online_model, by_name)
