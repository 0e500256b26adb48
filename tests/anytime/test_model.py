"""AnytimeLinearModel: prefixes, exact-subset predictions, next_group, state, the subset
cache, the deprecated spellings."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms.anytime import AnytimeLinearModel, SufficientStatistics
from algorithms.datasets.anytime_synthetic import make_anytime_groups
from algorithms.metrics.anytime import anytime_curve, explained_variance
from tests.anytime import naive

GREEDY = ["cs-g-omp", "cs-g-fr", "doubling", "no-whiten", "single"]


@pytest.fixture(scope="module")
def data():
    d = make_anytime_groups(n_samples=600, n_plain_groups=5, n_copies=4, seed=3)
    return d


def _ridge(X, y, idx, alpha):
    """Raw-scale (coef, intercept) of the standardized ridge on columns ``idx``."""
    mu, sd = X.mean(0), X.std(0)
    Xs, ys = (X - mu) / sd, (y - y.mean()) / y.std()
    n = len(y)
    w = np.zeros(X.shape[1])
    A = Xs[:, idx].T @ Xs[:, idx] / n + alpha * np.eye(len(idx))
    w[idx] = np.linalg.solve(A, Xs[:, idx].T @ ys / n)
    coef = w * y.std() / sd
    return coef, y.mean() - coef @ mu


@pytest.mark.parametrize("method", GREEDY)
def test_prefixes_subsets_and_next_group(data, method):
    X, y, groups, costs = data.X, data.y, data.groups, data.costs
    model = AnytimeLinearModel(groups=groups, costs=costs, method=method, alpha=1e-3)
    model.fit(X[:400], y[:400], X_val=X[400:], y_val=y[400:])
    J = len(groups)
    assert sorted(model.sequence_) == list(range(J))
    for j in [1, 3, J]:
        idx = naive.union(groups, model.sequence_[:j])
        coef, intercept = _ridge(X[:400], y[:400], idx, 1e-3)
        max_cost = model.cumulative_cost_[j] + 1e-9
        np.testing.assert_allclose(model.predict(X[400:], max_cost=max_cost),
                                   X[400:] @ coef + intercept, rtol=1e-7, atol=1e-7)
        assert model.next_group(model.sequence_[:j - 1]) == model.sequence_[j - 1]
    # a non-prefix set: exactly the best predictor on that set
    S = [J - 1, 0, 2]
    coef, intercept = _ridge(X[:400], y[:400], naive.union(groups, sorted(S)), 1e-3)
    np.testing.assert_allclose(model.predict(X[:50], computed_groups=S), X[:50] @ coef + intercept,
                               rtol=1e-7, atol=1e-7)
    assert model.predict(X[:5], max_cost=-1.0) == pytest.approx(np.full(5, y[:400].mean()))
    # stored training / validation EV are those of the predictions
    _, ev_val = anytime_curve(model, X[400:], y[400:])
    np.testing.assert_allclose(model.validation_explained_variance_, ev_val, atol=1e-9)
    ev_train = [explained_variance(y[:400], p) for p in model.predict_path(X[:400])]
    np.testing.assert_allclose(model.train_explained_variance_, ev_train, atol=1e-9)
    assert model.explained_variance(S) == pytest.approx(
        explained_variance(y[:400], model.predict(X[:400], computed_groups=S)), abs=1e-9)


def test_next_group_given_any_set_matches_brute_force(data):
    X, y, groups, costs = data.X, data.y, data.groups, data.costs
    C, b = naive.standardized(X, y, 1e-3)
    for method in ["cs-g-omp", "cs-g-fr", "single"]:
        model = AnytimeLinearModel(groups=groups, costs=costs, method=method, alpha=1e-3)
        model.fit(X, y)
        S = [4, 1]
        left = [g for g in range(len(groups)) if g not in S]
        want = max(left, key=lambda g: naive.criterion(method, C, b, groups, S, g) / costs[g])
        assert model.next_group(S) == want
        fits = [g for g in left if costs[g] <= 5.0 - costs[S].sum()]
        assert model.next_group(S, max_cost=5.0) in (fits or [None])
    assert model.next_group(range(len(groups))) is None


def test_fit_statistics_streaming_and_sparse_equal_batch(data):
    X, y, groups, costs = data.X, data.y, data.groups, data.costs
    whole = AnytimeLinearModel(groups=groups, costs=costs).fit(X, y)
    stats = SufficientStatistics(X.shape[1])
    for start in range(0, len(y), 64):
        stats.update(sp.csr_matrix(X[start:start + 64]), y[start:start + 64])
    streamed = AnytimeLinearModel(groups=groups, costs=costs).fit_statistics(stats)
    assert streamed.sequence_.tolist() == whole.sequence_.tolist()
    np.testing.assert_allclose(streamed.coef_path_, whole.coef_path_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(whole.predict(sp.csr_matrix(X[:7]), max_cost=10.0),
                               whole.predict(X[:7], max_cost=10.0), rtol=1e-12)


def test_merged_shards_give_the_same_model(data):
    X, y, groups, costs = data.X, data.y, data.groups, data.costs
    shards = [SufficientStatistics.from_data(X[i::4], y[i::4]) for i in range(4)]
    merged = shards[0] + shards[1] + shards[2] + shards[3]
    for method in ["cs-g-fr", "doubling"]:
        whole = AnytimeLinearModel(groups=groups, costs=costs, method=method).fit(X, y)
        model = AnytimeLinearModel(groups=groups, costs=costs, method=method)
        model.fit_statistics(merged)
        assert model.sequence_.tolist() == whole.sequence_.tolist()
        np.testing.assert_allclose(model.predict(X[:20]), whole.predict(X[:20]), rtol=1e-9)


def test_round_trip_bytes(data):
    X, y, groups, costs = data.X, data.y, data.groups, data.costs
    model = AnytimeLinearModel(groups=groups, costs=costs, method="doubling", max_cost=40.0)
    model.fit(X[:400], y[:400], X_val=X[400:], y_val=y[400:])
    blob = model.to_bytes()
    assert b"pickle" not in blob[:200]
    back = AnytimeLinearModel.from_bytes(blob)
    for name in ["sequence_", "cumulative_cost_", "coef_path_", "intercept_path_",
                 "train_explained_variance_", "validation_explained_variance_", "gram_"]:
        np.testing.assert_array_equal(getattr(back, name), getattr(model, name))
    np.testing.assert_array_equal(back.predict(X[:9], computed_groups=[0, 2]),
                                  model.predict(X[:9], computed_groups=[0, 2]))
    assert back.next_group([0]) == model.next_group([0])
    assert back.method == "doubling" and back.max_cost == 40.0


def test_subset_solutions_are_cached_per_set_and_bounded(data):
    """A set's solve is done once (its speed: ``benchmarks/anytime.py``, serving), in any
    order of its ids, and the cache keeps at most ``cache_size`` sets."""
    X, y, groups, costs = data.X, data.y, data.groups, data.costs
    model = AnytimeLinearModel(groups=groups, costs=costs, cache_size=2).fit(X, y)
    row = X[0]
    first = model.coef_for_groups([0, 3])
    np.testing.assert_array_equal(model.predict(row, computed_groups=[3, 0]),
                                  model.predict(X[:1], computed_groups=[0, 3]))
    assert model.coef_for_groups((3, 0))[0] is first[0]   # the cached solution itself
    assert list(model._subset_cache) == [frozenset({0, 3})]
    for S in ([1], [2], [0, 3]):
        model.predict(row, computed_groups=S)
    assert list(model._subset_cache) == [frozenset({2}), frozenset({0, 3})]
    assert model.coef_for_groups([0, 3])[0] is not first[0]   # evicted, then solved again
    np.testing.assert_array_equal(model.coef_for_groups([0, 3])[0], first[0])


def test_the_deprecated_spellings_warn_and_mean_the_same(data):
    X, y, groups, costs = data.X, data.y, data.groups, data.costs
    model = AnytimeLinearModel(groups=groups, costs=costs, max_cost=12.0).fit(X, y)
    with pytest.warns(DeprecationWarning, match="budget"):
        old = AnytimeLinearModel(groups=groups, costs=costs, budget=12.0).fit(X, y)
    assert old.max_cost == 12.0 and old.get_params() == model.get_params()
    assert old.sequence_.tolist() == model.sequence_.tolist()
    with pytest.warns(DeprecationWarning, match="budget"):
        assert old.budget == 12.0
    with pytest.warns(DeprecationWarning, match="groups"):
        np.testing.assert_array_equal(model.predict(X[:4], groups=[1]),
                                      model.predict(X[:4], computed_groups=[1]))
    with pytest.warns(DeprecationWarning, match="budget"):
        np.testing.assert_array_equal(model.predict(X[:4], budget=5.0),
                                      model.predict(X[:4], max_cost=5.0))
    with pytest.warns(DeprecationWarning):
        assert model.next_group(groups=[0], budget=9.0) == model.next_group([0], max_cost=9.0)
    with pytest.raises(TypeError, match="not both"):
        AnytimeLinearModel(groups=groups, costs=costs, budget=1.0, max_cost=2.0)


def test_bad_arguments(data):
    X, y, groups, costs = data.X, data.y, data.groups, data.costs
    model = AnytimeLinearModel(groups=groups, costs=costs).fit(X, y)
    with pytest.raises(ValueError):
        model.predict(X, max_cost=1.0, computed_groups=[0])
    with pytest.raises(ValueError):
        model.predict(X[:, :3])
    with pytest.raises(ValueError):
        model.predict(X, computed_groups=[len(groups)])
    with pytest.raises(ValueError):
        AnytimeLinearModel(groups=groups, costs=costs, method="lasso").fit(X, y)


_HYPOTHESIS_DATA = make_anytime_groups(n_samples=300, n_plain_groups=4, n_copies=3, seed=11)
_HYPOTHESIS_MODEL = AnytimeLinearModel(groups=_HYPOTHESIS_DATA.groups,
                                       costs=_HYPOTHESIS_DATA.costs, method="cs-g-fr",
                                       alpha=1e-2).fit(_HYPOTHESIS_DATA.X, _HYPOTHESIS_DATA.y)


@settings(max_examples=30, deadline=None)
@given(st.sets(st.integers(0, len(_HYPOTHESIS_DATA.groups) - 1)))
def test_any_subset_prediction_is_the_ridge_on_that_subset(subset):
    X, y = _HYPOTHESIS_DATA.X, _HYPOTHESIS_DATA.y
    idx = naive.union(_HYPOTHESIS_DATA.groups, sorted(subset))
    coef, intercept = _ridge(X, y, idx, 1e-2)
    np.testing.assert_allclose(_HYPOTHESIS_MODEL.predict(X[:10], computed_groups=subset),
                               X[:10] @ coef + intercept, rtol=1e-7, atol=1e-7)
    ev = _HYPOTHESIS_MODEL.explained_variance(subset)
    assert ev == pytest.approx(explained_variance(y, X @ coef + intercept), abs=1e-9)
    choice = _HYPOTHESIS_MODEL.next_group(subset)
    assert (choice is None) == (len(subset) == len(_HYPOTHESIS_DATA.groups))
