"""GBFS estimator: mu = 0 equals plain boosting, penalty semantics, anytime, round trip."""

import numpy as np
import pytest
import scipy.sparse as sp

from algorithms.datasets.gbfs_synthetic import make_gbfs_synthetic
from algorithms.gbfs import GBFS
from tests.gbfs.naive import naive_gbfs


@pytest.fixture(scope="module")
def task():
    X, y, relevant = make_gbfs_synthetic(240, 12, random_state=3)
    return X, y, relevant


@pytest.mark.parametrize(("loss", "leaf_values"),
                         [("logistic", "newton"), ("logistic", "mean"), ("squared", "newton")])
def test_mu_zero_equals_plain_boosting_oracle(task, loss, leaf_values):
    X, y, _ = task
    X, y = X[:120], y[:120]
    target = y if loss == "logistic" else X[:, 0] * y + X[:, 1] ** 2
    params = dict(n_estimators=6, learning_rate=0.3, max_depth=3, max_bins=12,
                  leaf_values=leaf_values)
    model = GBFS(loss=loss, mu=0.0, min_samples_leaf=2, **params).fit(X, target)
    feats, thresholds, values, scores = naive_gbfs(X, target, loss=loss, min_samples_leaf=2,
                                                   **params)
    np.testing.assert_array_equal(model.tree_feature_, feats)
    np.testing.assert_array_equal(model.tree_threshold_, thresholds)
    np.testing.assert_allclose(model.tree_value_, values, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(model.decision_function(X), scores, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(("loss", "extra"), [
    ("logistic", dict(reg_lambda=1.0)),
    ("logistic", dict(split_gain="newton")),
    ("logistic", dict(split_gain="newton", reg_lambda=0.5, min_child_hessian=0.5)),
    ("logistic", dict(leaf_values="mean", reg_lambda=2.0)),
    ("squared", dict(split_gain="newton", reg_lambda=1.0)),
])
def test_regularized_and_newton_fits_equal_the_oracle(task, loss, extra):
    X, y, _ = task
    X, y = X[:150], y[:150]
    target = y if loss == "logistic" else X[:, 0] * y + X[:, 1] ** 2
    params = dict(n_estimators=6, learning_rate=0.3, max_depth=3, max_bins=12, mu=0.2,
                  min_samples_leaf=2, **extra)
    model = GBFS(loss=loss, **params).fit(X, target)
    feats, thresholds, values, scores = naive_gbfs(X, target, loss=loss, **params)
    np.testing.assert_array_equal(model.tree_feature_, feats)
    np.testing.assert_array_equal(model.tree_threshold_, thresholds)
    np.testing.assert_allclose(model.tree_value_, values, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(model.decision_function(X), scores, rtol=1e-9, atol=1e-12)


def test_paper_options_reproduce_the_original_trees_bit_for_bit():
    # SHA-256 prefixes of (tree_feature_, tree_threshold_, tree_value_) bytes produced by the
    # kernels before reg_lambda / split_gain existed: lambda = 0 with the gradient (paper)
    # split criterion must give exactly the same trees.
    import hashlib

    X, y, _ = make_gbfs_synthetic(300, 12, random_state=5)
    fits = [GBFS(n_estimators=25, max_depth=3, min_samples_leaf=3, reg_lambda=0.0,
                 split_gain="gradient", **kw).fit(X, y)
            for kw in (dict(mu=0.3), dict(mu=0.0, leaf_values="mean"),
                       dict(mu=1.0, subsample=0.7, random_state=1))]
    fits.append(GBFS(loss="squared", n_estimators=25, max_depth=3, mu=0.2, reg_lambda=0.0,
                     split_gain="gradient").fit(X, X[:, 0] * y + X[:, 1] ** 2))
    digests = [hashlib.sha256(m.tree_feature_.tobytes() + m.tree_threshold_.tobytes()
                              + m.tree_value_.tobytes()).hexdigest()[:16] for m in fits]
    assert digests == ["c0a15f9a565ef519", "29931dcb270d61ce", "4acd89b4cc014c0c",
                       "dce68c3da40bc078"]


def test_penalized_fit_equals_oracle_with_costs(task):
    X, y, _ = task
    costs = np.linspace(0.5, 2.0, X.shape[1])
    params = dict(n_estimators=8, max_depth=2, max_bins=10, mu=0.4)
    model = GBFS(feature_costs=costs, **params).fit(X, y)
    feats, thresholds, _, _ = naive_gbfs(X, y, costs=costs, **params)
    np.testing.assert_array_equal(model.tree_feature_, feats)
    np.testing.assert_array_equal(model.tree_threshold_, thresholds)


def test_large_mu_uses_only_the_single_most_useful_feature(task):
    X, y, _ = task
    root = GBFS(mu=0.0, n_estimators=1, max_depth=1).fit(X, y).tree_feature_[0, 0]
    model = GBFS(mu=1e6, n_estimators=40, max_depth=3).fit(X, y)
    np.testing.assert_array_equal(model.selected_features_, [root])
    np.testing.assert_array_equal(model.feature_entry_iteration_, [0])
    assert np.all(model.tree_feature_[1:, 0] == root)  # reusing it later is free


def test_feature_count_never_increases_with_mu(task):
    X, y, _ = task
    grid = [0.0] + [2.0**k for k in range(-3, 10)]
    counts = [GBFS(mu=mu, n_estimators=60, max_depth=3, subsample=0.8, random_state=0)
              .fit(X, y).n_features_used() for mu in grid]
    assert counts[0] > counts[-1] == 1
    assert all(a >= b for a, b in zip(counts, counts[1:], strict=False)), counts


def test_entry_order_and_iterations_match_the_trees(task):
    X, y, _ = task
    model = GBFS(mu=0.5, n_estimators=30, max_depth=3).fit(X, y)
    seen: list[int] = []
    for t, tree in enumerate(model.tree_feature_):
        for f in tree[tree >= 0]:
            if f not in seen:
                seen.append(int(f))
                k = list(model.selected_features_).index(f)
                assert model.feature_entry_iteration_[k] == t
    np.testing.assert_array_equal(model.selected_features_, seen)


def test_anytime_prediction_uses_the_longest_allowed_prefix(task):
    X, y, _ = task
    model = GBFS(mu=0.25, n_estimators=40, max_depth=3).fit(X, y)
    full = model.decision_function(X)
    assert len(model.selected_features_) >= 3
    np.testing.assert_array_equal(model.decision_function(X, computed=range(X.shape[1])), full)
    np.testing.assert_array_equal(model.predict(X, computed=set(model.selected_features_)),
                                  model.predict(X))
    np.testing.assert_array_equal(model.decision_function(X, computed=set()),
                                  np.full(len(X), model.base_score_))
    staged = list(model.staged_decision_function(X))
    np.testing.assert_array_equal(staged[-1], full)
    for k in range(1, len(model.selected_features_)):
        prefix = model.feature_entry_iteration_[k]
        got = model.decision_function(X, computed=set(model.selected_features_[:k]))
        expected = staged[prefix - 1] if prefix else np.full(len(X), model.base_score_)
        np.testing.assert_array_equal(got, expected)
    # a feature that is never used does not shorten the prefix
    unused = set(range(X.shape[1])) - set(model.selected_features_)
    assert model.n_trees_for(set(model.selected_features_)) == 40
    assert model.n_trees_for(unused) == model.feature_entry_iteration_[0]


def test_predictions_labels_probabilities_and_sparse_input(task):
    X, y, _ = task
    labels = np.where(y == 1, 8, 3)
    model = GBFS(n_estimators=30, max_depth=3, learning_rate=0.5).fit(sp.csr_matrix(X), labels)
    np.testing.assert_array_equal(model.classes_, [3, 8])
    dense = GBFS(n_estimators=30, max_depth=3, learning_rate=0.5).fit(X, labels)
    np.testing.assert_array_equal(model.tree_value_, dense.tree_value_)
    proba = model.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(model.predict(X), np.where(proba[:, 1] > 0.5, 8, 3))
    assert np.mean(model.predict(X) == labels) > 0.85
    staged = list(model.staged_predict(X))
    np.testing.assert_array_equal(staged[-1], model.predict(X))


def test_deterministic_for_a_seed(task):
    X, y, _ = task
    fits = [GBFS(subsample=0.5, random_state=s, n_estimators=15).fit(X, y) for s in (7, 7, 8)]
    np.testing.assert_array_equal(fits[0].tree_value_, fits[1].tree_value_)
    np.testing.assert_array_equal(fits[0].tree_feature_, fits[1].tree_feature_)
    assert not np.array_equal(fits[0].tree_value_, fits[2].tree_value_)


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_state_round_trip_is_bit_exact(task, loss):
    X, y, _ = task
    model = GBFS(loss=loss, mu=0.3, n_estimators=20, feature_costs=np.arange(1.0, 13.0),
                 learning_rate=0.1 + 1e-17 * 3, random_state=5, subsample=0.9).fit(X, y)
    clone = GBFS.from_bytes(model.to_bytes())
    for name, value in model.state_dict().items():
        again = clone.state_dict()[name]
        if isinstance(value, np.ndarray):
            assert value.dtype == again.dtype
            np.testing.assert_array_equal(value, again)
        else:
            assert value == again and type(value) is type(again), name
    np.testing.assert_array_equal(clone.decision_function(X), model.decision_function(X))
    computed = set(model.selected_features_[:2])
    np.testing.assert_array_equal(clone.predict(X, computed), model.predict(X, computed))


def test_invalid_input_is_rejected(task):
    X, y, _ = task
    with pytest.raises(ValueError, match="NaN"):
        GBFS().fit(np.where(X > 0.9, np.nan, X), y)
    with pytest.raises(ValueError, match="2 numeric classes"):
        GBFS().fit(X, np.arange(len(y)) % 3)
    with pytest.raises(ValueError, match="feature_costs"):
        GBFS(feature_costs=np.ones(3)).fit(X, y)
    with pytest.raises(ValueError, match="split_gain"):
        GBFS(split_gain="exact").fit(X, y)
    with pytest.raises(ValueError, match="leaf_values='newton'"):
        GBFS(split_gain="newton", leaf_values="mean").fit(X, y)
    with pytest.raises(ValueError, match="reg_lambda"):
        GBFS(reg_lambda=-1.0).fit(X, y)
    model = GBFS(n_estimators=2).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :5])


def test_state_without_the_newer_parameters_loads_with_the_paper_values(task):
    X, y, _ = task
    model = GBFS(mu=0.3, n_estimators=10).fit(X, y)
    state = model.state_dict()
    for name in ("reg_lambda", "split_gain", "min_child_hessian"):
        del state[name]
    clone = GBFS.from_state_dict(state)
    assert (clone.reg_lambda, clone.split_gain) == (0.0, "gradient")
    np.testing.assert_array_equal(clone.decision_function(X), model.decision_function(X))
