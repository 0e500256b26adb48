"""GBFS estimator: mu = 0 equals plain boosting, penalty semantics, anytime, round trip."""

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from algorithms.datasets.gbfs_synthetic import make_gbfs_synthetic
from algorithms.gbfs import GBFS
from tests.gbfs.naive import naive_gbfs

# the paper's model: no masked copies, the prefix of trees for a computed set
PAPER = dict(masked_copies=0, uncomputed="prefix", early_stopping_rounds=None)
PAPER_DEFAULTS = dict(n_estimators=100, reg_lambda=0.0, min_samples_leaf=1)


def paper_gbfs(**params) -> GBFS:
    """GBFS with the paper's rule and its earlier defaults, ``params`` on top."""
    return GBFS(**{**PAPER, **PAPER_DEFAULTS, **params})


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
    model = paper_gbfs(loss=loss, feature_penalty=0.0, min_samples_leaf=2, **params).fit(X, target)
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
    params = dict(n_estimators=6, learning_rate=0.3, max_depth=3, max_bins=12, feature_penalty=0.2,
                  min_samples_leaf=2, **extra)
    model = paper_gbfs(loss=loss, **params).fit(X, target)
    feats, thresholds, values, scores = naive_gbfs(X, target, loss=loss, **params)
    np.testing.assert_array_equal(model.tree_feature_, feats)
    np.testing.assert_array_equal(model.tree_threshold_, thresholds)
    np.testing.assert_allclose(model.tree_value_, values, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(model.decision_function(X), scores, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("singletons", [False, True])
def test_paper_options_reproduce_the_original_trees_bit_for_bit(singletons):
    # SHA-256 prefixes of (tree_feature_, tree_threshold_, tree_value_) bytes produced by the
    # kernels before reg_lambda / split_gain / feature_groups existed: lambda = 0 with the
    # gradient (paper) split criterion, and singleton groups, must give exactly the same trees.
    import hashlib

    X, y, _ = make_gbfs_synthetic(300, 12, random_state=5)
    groups = dict(feature_groups=[[f] for f in range(12)]) if singletons else {}
    fits = [paper_gbfs(n_estimators=25, max_depth=3, min_samples_leaf=3, reg_lambda=0.0,
                 split_gain="gradient", **groups, **kw).fit(X, y)
            for kw in (dict(feature_penalty=0.3),
                       dict(feature_penalty=0.0, leaf_values="mean"),
                       dict(feature_penalty=1.0, subsample=0.7, random_state=1))]
    fits.append(paper_gbfs(loss="squared", n_estimators=25, max_depth=3, feature_penalty=0.2,
                     reg_lambda=0.0, split_gain="gradient", **groups)
                .fit(X, X[:, 0] * y + X[:, 1] ** 2))
    digests = [hashlib.sha256(m.tree_feature_.tobytes() + m.tree_threshold_.tobytes()
                              + m.tree_value_.tobytes()).hexdigest()[:16] for m in fits]
    assert digests == ["c0a15f9a565ef519", "29931dcb270d61ce", "4acd89b4cc014c0c",
                       "dce68c3da40bc078"]


def test_penalized_fit_equals_oracle_with_costs(task):
    X, y, _ = task
    costs = np.linspace(0.5, 2.0, X.shape[1])
    params = dict(n_estimators=8, max_depth=2, max_bins=10, feature_penalty=0.4)
    model = paper_gbfs(feature_costs=costs, **params).fit(X, y)
    feats, thresholds, _, _ = naive_gbfs(X, y, costs=costs, **params)
    np.testing.assert_array_equal(model.tree_feature_, feats)
    np.testing.assert_array_equal(model.tree_threshold_, thresholds)


def test_large_mu_uses_only_the_single_most_useful_feature(task):
    X, y, _ = task
    root = paper_gbfs(feature_penalty=0.0, n_estimators=1, max_depth=1).fit(X, y)
    root = root.tree_feature_[0, 0]
    model = paper_gbfs(feature_penalty=1e6, n_estimators=40, max_depth=3).fit(X, y)
    np.testing.assert_array_equal(model.selected_features_, [root])
    np.testing.assert_array_equal(model.feature_entry_iteration_, [0])
    assert np.all(model.tree_feature_[1:, 0] == root)  # reusing it later is free


def test_feature_count_never_increases_with_mu(task):
    X, y, _ = task
    grid = [0.0] + [2.0**k for k in range(-3, 10)]
    counts = [paper_gbfs(feature_penalty=mu, n_estimators=60, max_depth=3, subsample=0.8,
                         random_state=0)
              .fit(X, y).n_features_used() for mu in grid]
    assert counts[0] > counts[-1] == 1
    assert all(a >= b for a, b in zip(counts, counts[1:], strict=False)), counts


def test_entry_order_and_iterations_match_the_trees(task):
    X, y, _ = task
    model = paper_gbfs(feature_penalty=0.5, n_estimators=30, max_depth=3).fit(X, y)
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
    model = paper_gbfs(feature_penalty=0.25, n_estimators=40, max_depth=3).fit(X, y)
    full = model.decision_function(X)
    assert len(model.selected_features_) >= 3
    np.testing.assert_array_equal(
        model.decision_function(X, computed_groups=range(X.shape[1])), full)
    np.testing.assert_array_equal(model.predict(X, computed_groups=set(model.selected_features_)),
                                  model.predict(X))
    np.testing.assert_array_equal(model.decision_function(X, computed_groups=set()),
                                  np.full(len(X), model.base_score_))
    staged = list(model.staged_decision_function(X))
    np.testing.assert_array_equal(staged[-1], full)
    for k in range(1, len(model.selected_features_)):
        prefix = model.feature_entry_iteration_[k]
        got = model.decision_function(X, computed_groups=set(model.selected_features_[:k]))
        expected = staged[prefix - 1] if prefix else np.full(len(X), model.base_score_)
        np.testing.assert_array_equal(got, expected)
    # a feature that is never used does not shorten the prefix
    unused = set(range(X.shape[1])) - set(model.selected_features_)
    assert model.n_trees_for(set(model.selected_features_)) == 40
    assert model.n_trees_for(unused) == model.feature_entry_iteration_[0]


def test_predictions_labels_probabilities_and_sparse_input(task):
    X, y, _ = task
    labels = np.where(y == 1, 8, 3)
    model = paper_gbfs(n_estimators=30, max_depth=3, learning_rate=0.5)
    model = model.fit(sp.csr_matrix(X), labels)
    np.testing.assert_array_equal(model.classes_, [3, 8])
    dense = paper_gbfs(n_estimators=30, max_depth=3, learning_rate=0.5).fit(X, labels)
    np.testing.assert_array_equal(model.tree_value_, dense.tree_value_)
    proba = model.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(model.predict(X), np.where(proba[:, 1] > 0.5, 8, 3))
    assert np.mean(model.predict(X) == labels) > 0.85
    staged = list(model.staged_predict(X))
    np.testing.assert_array_equal(staged[-1], model.predict(X))


def test_deterministic_for_a_seed(task):
    X, y, _ = task
    fits = [paper_gbfs(subsample=0.5, random_state=s, n_estimators=15).fit(X, y) for s in (7, 7, 8)]
    np.testing.assert_array_equal(fits[0].tree_value_, fits[1].tree_value_)
    np.testing.assert_array_equal(fits[0].tree_feature_, fits[1].tree_feature_)
    assert not np.array_equal(fits[0].tree_value_, fits[2].tree_value_)


def test_no_seed_reads_as_seed_0(task):
    """random_state=None subsamples as 0 does (the masks already did): a refit, a service
    retrain and a specialist answer the same."""
    X, y, _ = task
    fits = [paper_gbfs(subsample=0.5, random_state=s, n_estimators=15).fit(X, y)
            for s in (None, None, 0)]
    for other in fits[1:]:
        np.testing.assert_array_equal(fits[0].tree_value_, other.tree_value_)
        np.testing.assert_array_equal(fits[0].tree_feature_, other.tree_feature_)


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_state_round_trip_is_bit_exact(task, loss):
    X, y, _ = task
    model = paper_gbfs(loss=loss, feature_penalty=0.3, n_estimators=20,
                 feature_costs=np.arange(1.0, 13.0), learning_rate=0.1 + 1e-17 * 3,
                 random_state=5, subsample=0.9).fit(X, y)
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
    np.testing.assert_array_equal(clone.predict(X, computed_groups=computed),
                                  model.predict(X, computed_groups=computed))


def test_invalid_input_is_rejected(task):
    X, y, _ = task
    with pytest.raises(ValueError, match="infinite"):
        paper_gbfs().fit(np.where(X > 0.9, np.inf, X), y)
    with pytest.raises(ValueError, match="needs 2 classes"):   # (3 classes: softmax)
        paper_gbfs().fit(X, np.zeros(len(y)))
    with pytest.raises(ValueError, match="feature_costs"):
        paper_gbfs(feature_costs=np.ones(3)).fit(X, y)
    with pytest.raises(ValueError, match="split_gain"):
        paper_gbfs(split_gain="exact").fit(X, y)
    with pytest.raises(ValueError, match="leaf_values='newton'"):
        paper_gbfs(split_gain="newton", leaf_values="mean").fit(X, y)
    with pytest.raises(ValueError, match="reg_lambda"):
        paper_gbfs(reg_lambda=-1.0).fit(X, y)
    model = paper_gbfs(n_estimators=2).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :5])


def test_a_state_without_a_parameter_is_refused(task):
    """Every parameter is in the state (states older than reg_lambda, split_gain and
    min_child_hessian were never stored by the service: they are not read)."""
    X, y, _ = task
    model = paper_gbfs(feature_penalty=0.3, n_estimators=10).fit(X, y)
    for name in ("reg_lambda", "split_gain", "feature_penalty"):
        state = model.state_dict()
        del state[name]
        with pytest.raises(ValueError, match=name):
            GBFS.from_state_dict(state)


def test_the_deprecated_spellings_warn_and_mean_the_same(task):
    X, y, _ = task
    model = paper_gbfs(feature_penalty=0.3, n_estimators=10, feature_groups=GROUPS).fit(X, y)
    with pytest.warns(DeprecationWarning, match="mu"):
        old = paper_gbfs(mu=0.3, n_estimators=10, feature_groups=GROUPS).fit(X, y)
    assert old.get_params() == model.get_params()
    with pytest.warns(DeprecationWarning, match="mu"):
        assert old.mu == 0.3
    np.testing.assert_array_equal(old.tree_feature_, model.tree_feature_)
    # computed= held feature indices: group 2 is the features 2 and 3
    for method in (model.decision_function, model.predict, model.predict_proba):
        with pytest.warns(DeprecationWarning, match="computed"):
            old_way = method(X, computed=[2, 3])
        np.testing.assert_array_equal(old_way, method(X, computed_groups=[2]))
    with pytest.raises(TypeError, match="not both"):
        paper_gbfs(mu=1.0, feature_penalty=2.0)


# ------------------------------------------------------------------------ feature groups
GROUPS = [[0, 5, 7], [1], [2, 3], [4, 8, 9, 10], [6, 11]]
GROUP_COSTS = np.array([2.0, 0.5, 1.0, 3.0, 1.5])


def _group_costs_per_feature(groups, group_costs, d):
    costs = np.zeros(d)
    for group, cost in zip(groups, group_costs, strict=True):
        costs[group] = cost
    return costs


def _first_groups(model, groups):
    """(groups in order of first use, tree of each), written out from the trees."""
    order, trees = [], []
    for t, tree in enumerate(model.tree_feature_):
        for f in tree[tree >= 0]:
            g = next(k for k, group in enumerate(groups) if f in group)
            if g not in order:
                order.append(g)
                trees.append(t)
    return order, trees


@pytest.mark.parametrize(("loss", "leaf_values"), [("logistic", "newton"), ("logistic", "mean"),
                                                   ("squared", "newton"), ("squared", "mean")])
def test_singleton_groups_give_the_feature_cost_trees_bit_for_bit(task, loss, leaf_values):
    X, y, _ = task
    target = y if loss == "logistic" else X[:, 0] * y + X[:, 1] ** 2
    costs = np.linspace(0.3, 2.0, X.shape[1])
    perm = np.random.default_rng(0).permutation(X.shape[1])  # group k is feature perm[k]
    params = dict(loss=loss, leaf_values=leaf_values, feature_penalty=0.4, n_estimators=25,
                  max_depth=3, subsample=0.8, random_state=2)
    plain = paper_gbfs(feature_costs=costs, **params).fit(X, target)
    grouped = paper_gbfs(feature_groups=[[int(f)] for f in perm], group_costs=costs[perm],
                   **params).fit(X, target)
    for name in ("tree_feature_", "tree_threshold_", "tree_value_", "tree_split_value_",
                 "train_loss_", "selected_features_", "feature_entry_iteration_"):
        np.testing.assert_array_equal(getattr(grouped, name), getattr(plain, name))
    assert len(plain.selected_features_) >= 3  # the penalty shaped these trees
    np.testing.assert_array_equal(grouped.selected_groups_,
                                  np.argsort(perm)[plain.selected_features_])
    np.testing.assert_array_equal(grouped.group_entry_iteration_, plain.feature_entry_iteration_)
    # without groups every feature is its own group
    np.testing.assert_array_equal(plain.selected_groups_, plain.selected_features_)
    np.testing.assert_array_equal(plain.group_entry_iteration_, plain.feature_entry_iteration_)


@pytest.mark.parametrize(("loss", "extra"), [
    ("logistic", dict()), ("logistic", dict(leaf_values="mean")), ("squared", dict()),
    ("logistic", dict(split_gain="newton", reg_lambda=0.5)),
])
def test_grouped_fit_equals_the_oracle(task, loss, extra):
    X, y, _ = task
    X, y = X[:150], y[:150]
    target = y if loss == "logistic" else X[:, 0] * y + X[:, 1] ** 2
    mu = 0.3 if loss == "logistic" else 0.1
    params = dict(n_estimators=8, learning_rate=0.3, max_depth=3, max_bins=12, feature_penalty=mu,
                  min_samples_leaf=2, **extra)
    model = paper_gbfs(loss=loss, feature_groups=GROUPS, group_costs=GROUP_COSTS, **params)
    model.fit(X, target)
    feats, thresholds, values, scores = naive_gbfs(X, target, loss=loss, groups=GROUPS,
                                                   group_costs=GROUP_COSTS, **params)
    np.testing.assert_array_equal(model.tree_feature_, feats)
    np.testing.assert_array_equal(model.tree_threshold_, thresholds)
    np.testing.assert_allclose(model.tree_value_, values, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(model.decision_function(X), scores, rtol=1e-9, atol=1e-12)
    order, trees = _first_groups(model, GROUPS)
    np.testing.assert_array_equal(model.selected_groups_, order)
    np.testing.assert_array_equal(model.group_entry_iteration_, trees)
    assert model.selected_groups_.dtype == model.group_entry_iteration_.dtype == np.int64
    # the group rule matters here: charging each feature its group's cost gives other trees
    ungrouped = naive_gbfs(X, target, loss=loss,
                           costs=_group_costs_per_feature(GROUPS, GROUP_COSTS, X.shape[1]),
                           **params)[0]
    assert not np.array_equal(feats, ungrouped)


@pytest.mark.parametrize(("depth", "n_trees", "free_node"), [(2, 1, (0, 1)), (1, 2, (1, 0))])
def test_a_used_group_makes_its_other_features_free(depth, n_trees, free_node):
    # y = 10 x0 + x1 + 1.2 x2 on the full binary design: {x0, x1} is one group of cost 5, x2
    # alone costs 2, mu = 15. Splitting a half (200 rows) on x1 gains 200/8 = 25, on x2
    # 200/8 * 1.44 = 36 (the whole 400 rows in tree 1: 50 and 72). x0 enters at the root
    # (gain 5000 > 75); after that x1 is free, so it beats x2 (25 > 36 - 30, 50 > 72 - 30),
    # in the same tree (depth 2) and in the next one (depth 1), while x1 alone never pays off
    # (25 < 75): charged per feature the model takes x2 instead.
    X = np.array(list(itertools.product([0.0, 1.0], repeat=3)) * 50)
    y = 10 * X[:, 0] + X[:, 1] + 1.2 * X[:, 2]
    params = dict(loss="squared", n_estimators=n_trees, learning_rate=1.0, max_depth=depth,
                  feature_penalty=15.0)
    grouped = paper_gbfs(feature_groups=[[0, 1], [2]], group_costs=[5.0, 2.0], **params).fit(X, y)
    per_feature = paper_gbfs(feature_costs=[5.0, 5.0, 2.0], **params).fit(X, y)
    t, j = free_node
    assert grouped.tree_feature_[0, 0] == per_feature.tree_feature_[0, 0] == 0
    assert grouped.tree_feature_[t, j] == 1 and per_feature.tree_feature_[t, j] == 2
    np.testing.assert_array_equal(grouped.selected_features_, [0, 1])
    np.testing.assert_array_equal(grouped.selected_groups_, [0])  # paid once: cost 5
    np.testing.assert_array_equal(grouped.group_entry_iteration_, [0])
    np.testing.assert_array_equal(per_feature.selected_features_, [0, 2])


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_grouped_state_round_trip_is_bit_exact(task, loss):
    X, y, _ = task
    costs = np.array([0.1 + 3e-17, 1 / 3, 2.0**-30, 7.0, np.nextafter(1.5, 2.0)])
    groups = [[0, 5, 7], [1], [3, 2], [10, 9, 4, 8], [6, 11]]  # members kept in given order
    model = paper_gbfs(loss=loss, feature_penalty=0.3, n_estimators=20, feature_groups=groups,
                 group_costs=costs, random_state=5, subsample=0.9).fit(X, y)
    state = model.state_dict()
    np.testing.assert_array_equal(state["feature_groups_members"], sum(groups, []))
    np.testing.assert_array_equal(state["feature_groups_sizes"], [3, 1, 2, 4, 2])
    assert state["feature_groups_members"].dtype == state["feature_groups_sizes"].dtype == np.int64
    clone = GBFS.from_bytes(model.to_bytes())
    assert clone.feature_groups == groups
    assert np.asarray(clone.group_costs).tobytes() == costs.tobytes()
    again = clone.state_dict()
    assert set(again) == set(state)
    for name, value in state.items():
        if isinstance(value, np.ndarray):
            assert value.dtype == again[name].dtype, name
            np.testing.assert_array_equal(value, again[name])
        else:
            assert value == again[name] and type(value) is type(again[name]), name
    for name in ("selected_groups_", "group_entry_iteration_"):
        np.testing.assert_array_equal(getattr(clone, name), getattr(model, name))
    np.testing.assert_array_equal(clone.decision_function(X), model.decision_function(X))
    for computed in (set(), {int(model.selected_groups_[0])}, {0, 2, 4}):
        assert clone.n_trees_for_groups(computed) == model.n_trees_for_groups(computed)
        assert clone.next_group(computed) == model.next_group(computed)
    refit = clone.fit(X, y)  # the rebuilt parameters give the same model
    np.testing.assert_array_equal(refit.tree_value_, model.tree_value_)


def test_state_without_groups_loads_with_singleton_groups(task):
    X, y, _ = task
    model = paper_gbfs(feature_penalty=0.3, n_estimators=15).fit(X, y)
    state = model.state_dict()
    assert not {"feature_groups_members", "feature_groups_sizes", "group_costs"} & set(state)
    clone = GBFS.from_state_dict(state)
    assert clone.feature_groups is None and clone.group_costs is None
    np.testing.assert_array_equal(clone.selected_groups_, model.selected_features_)
    np.testing.assert_array_equal(clone.group_entry_iteration_, model.feature_entry_iteration_)
    computed = set(model.selected_features_[:2].tolist())
    assert clone.n_trees_for_groups(computed) == model.n_trees_for(computed)


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(feature_groups=[[0, 1, 2], [2, 3]] + [[f] for f in range(4, 12)]), "more than one"),
    (dict(feature_groups=[[0, 1, 2, 3]] + [[f] for f in range(4, 11)]), "no feature group"),
    (dict(feature_groups=[[0, 12]] + [[f] for f in range(1, 12)]), "outside"),
    (dict(feature_groups=[[-1, 0]] + [[f] for f in range(1, 12)]), "outside"),
    (dict(feature_groups=[[0.0, 1.5]] + [[f] for f in range(1, 12)]), "integer"),
    (dict(feature_groups=GROUPS, group_costs=[1.0, -0.5, 1.0, 1.0, 1.0]), "group_costs"),
    (dict(feature_groups=GROUPS, group_costs=[1.0, np.inf, 1.0, 1.0, 1.0]), "group_costs"),
    (dict(feature_groups=GROUPS, group_costs=[1.0, 1.0]), "group_costs"),
    (dict(feature_groups=GROUPS, feature_costs=np.ones(12)), "not both"),
    (dict(group_costs=np.ones(12)), "needs feature_groups"),
])
def test_invalid_groups_are_rejected(task, kwargs, match):
    X, y, _ = task
    with pytest.raises(ValueError, match=match):
        paper_gbfs(n_estimators=2, **kwargs).fit(X, y)


def test_group_prefix_and_next_group_follow_the_trees(task):
    X, y, _ = task
    model = paper_gbfs(feature_penalty=0.15, n_estimators=40, max_depth=3, feature_groups=GROUPS,
                 group_costs=GROUP_COSTS).fit(X, y)
    T = model.tree_feature_.shape[0]
    assert len(model.selected_groups_) >= 3 and model.group_entry_iteration_[-1] > 0
    assert model.n_trees_for_groups(None) == T and model.next_group(None) is None
    group_of = {f: g for g, group in enumerate(GROUPS) for f in group}
    staged = [np.full(len(X), model.base_score_)] + list(model.staged_decision_function(X))
    for r in range(len(GROUPS) + 1):
        for computed in map(set, itertools.combinations(range(len(GROUPS)), r)):
            features = [f for g in computed for f in GROUPS[g]]
            t = model.n_trees_for_groups(computed)
            assert t == model.n_trees_for(features)
            np.testing.assert_array_equal(
                model.decision_function(X, computed_groups=computed), staged[t])
            g = model.next_group(computed)
            assert model.next_group(iter(sorted(computed))) == g  # any iterable, read once
            if g is None:
                assert t == T
                continue
            assert g not in computed and isinstance(g, int)
            first = next(group_of[f] for f in model.tree_feature_[t]
                         if f >= 0 and group_of[f] not in computed)
            assert g == first
    # computing next_group until None reaches every tree, each group once
    computed: list[int] = []
    while (g := model.next_group(computed)) is not None:
        assert g not in computed
        before = model.n_trees_for_groups(computed)
        computed.append(g)
        assert model.n_trees_for_groups(computed) >= before
    assert model.n_trees_for_groups(computed) == T
    assert set(computed) == set(model.selected_groups_.tolist())
    assert computed[0] == group_of[int(model.tree_feature_[0, 0])]


def test_next_group_without_groups_is_a_feature(task):
    X, y, _ = task
    model = paper_gbfs(feature_penalty=0.25, n_estimators=30, max_depth=3).fit(X, y)
    for k in range(len(model.selected_features_) + 1):
        computed = set(model.selected_features_[:k].tolist())
        assert model.n_trees_for_groups(computed) == model.n_trees_for(computed)
        g = model.next_group(computed)
        if k == len(model.selected_features_):
            assert g is None
        else:
            t = model.n_trees_for(computed)
            assert g not in computed and g in model.tree_feature_[t]
