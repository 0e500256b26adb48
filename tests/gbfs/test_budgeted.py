"""GBFS's budgeted answers: every tree answers for any computed set, uncomputed groups
follow learned default directions, training sees masked copies; all against the
plain-numpy oracle (``tests/gbfs/naive.py``)."""

import itertools

import numpy as np
import pytest

from algorithms.gbfs import GBFS, binning
from algorithms.gbfs.estimator import AUTO_PENALTY
from algorithms.registry import model_from_bytes
from tests.gbfs.naive import MISSING, naive_gbfs

GROUPS = [[0, 1], [2, 3, 4], [5]]
COSTS = [1.0, 3.0, 0.5]


def _data(n=160, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    X[:, 3] = X[:, 0] + 0.3 * rng.normal(size=n)  # group 1 partly stands in for group 0
    score = X[:, 0] + np.where(X[:, 2] > 0, 1.0, -1.0) * X[:, 4] + 0.5 * X[:, 5]
    return X, (score + 0.3 * rng.normal(size=n) > 0).astype(int), score


@pytest.mark.parametrize(("loss", "extra"), [
    ("logistic", dict()),
    ("logistic", dict(mask_rate=0.5, split_gain="newton", reg_lambda=1.0)),
    ("squared", dict(masked_copies=1, leaf_values="mean")),
    ("squared", dict(mask_rate=0.25, random_state=7)),
])
def test_masked_fit_equals_the_oracle(loss, extra):
    X, labels, score = _data()
    y = labels if loss == "logistic" else score
    params = dict(n_estimators=5, learning_rate=0.3, max_depth=3, max_bins=16,
                  feature_penalty=0.3, min_samples_leaf=2,
                  **{"masked_copies": 2, "reg_lambda": 0.0, **extra})
    model = GBFS(loss=loss, feature_groups=GROUPS, group_costs=COSTS,
                 early_stopping_rounds=None, unmasked_trees=False, **params).fit(X, y)
    lefts: list = []
    feats, thresholds, values, scores = naive_gbfs(X, y, loss=loss, groups=GROUPS,
                                                   group_costs=COSTS, default_lefts=lefts,
                                                   **params)
    np.testing.assert_array_equal(model.tree_feature_, feats)
    np.testing.assert_array_equal(model.tree_threshold_, thresholds)
    np.testing.assert_array_equal(model.tree_default_left_, lefts[0])
    np.testing.assert_allclose(model.tree_value_, values, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(model.decision_function(X), scores, rtol=1e-9, atol=1e-12)
    assert np.any(model.tree_default_left_ == 1) and np.any(
        (model.tree_default_left_ == 0) & (model.tree_feature_ >= 0))


def _oracle_scores(model, X, computed):
    """Every tree walked by hand on bin codes, features outside ``computed`` coded missing."""
    codes = binning.apply_bins(X, model.bin_edges_, model.bin_offsets_)
    keep = np.zeros(X.shape[1], dtype=bool)
    for g in computed:
        keep[GROUPS[g]] = True
    codes[:, ~keep] = MISSING
    out = np.full(len(X), model.base_score_)
    for t in range(model.tree_feature_.shape[0]):
        out += model.learning_rate * _oracle_codes_tree(model, t, codes)
    return out


def test_every_computed_set_is_answered_by_every_tree():
    X, labels, _ = _data(300)
    model = GBFS(feature_groups=GROUPS, group_costs=COSTS, n_estimators=12, max_depth=3,
                 random_state=1).fit(X[:200], labels[:200])
    probe = X[200:]
    for size in range(4):
        for S in itertools.combinations(range(3), size):
            got = model.decision_function(probe, computed_groups=S)
            np.testing.assert_allclose(got, _oracle_scores(model, probe, S), rtol=1e-12)
            assert model.trees_used(S) == model.tree_feature_.shape[0] > 0
            nan = probe.copy()
            nan[:, [f for g in range(3) if g not in S for f in GROUPS[g]]] = np.nan
            np.testing.assert_array_equal(model.decision_function(nan), got)
    # what the caller did not compute is never read
    scrambled = probe.copy()
    scrambled[:, GROUPS[1]] = 1e6
    np.testing.assert_array_equal(model.decision_function(scrambled, computed_groups=[0, 2]),
                                  model.decision_function(probe, computed_groups=[0, 2]))


def test_masking_teaches_the_trees_where_uncomputed_groups_go():
    # the target is group 0's; group 1 holds a noisy copy of it. Without masking, the trees
    # use group 0 and a caller without it gets little; with masking, group 1 stands in.
    X, _, score = _data(3000, seed=4)
    train, test = slice(0, 2000), slice(2000, None)
    y = X[:, 0] + 0.5 * X[:, 5]
    errors = {}
    for copies in (0, 4):
        model = GBFS(loss="squared", feature_groups=GROUPS, group_costs=COSTS,
                     feature_penalty=0.0, n_estimators=60, max_depth=3,
                     masked_copies=copies).fit(X[train], y[train])
        pred = model.predict(X[test], computed_groups=[1, 2])
        errors[copies] = float(np.mean((pred - y[test]) ** 2))
        full = model.predict(X[test], computed_groups=[0, 1, 2])
        assert np.mean((full - y[test]) ** 2) < 0.1 * np.var(y[test])
    assert errors[4] < 0.6 * errors[0], errors


def test_auto_penalty_scales_with_the_gradients_and_the_costs():
    X, _, score = _data(400)
    model = GBFS(loss="squared", feature_groups=GROUPS, group_costs=COSTS, n_estimators=3,
                 masked_copies=1, early_stopping_rounds=None).fit(X, score)
    g = score - score.mean()
    expected = AUTO_PENALTY * 2 * float(g @ g) / np.mean(COSTS)  # two copies of every row
    assert model.feature_penalty_ == pytest.approx(expected, rel=1e-12)
    scaled = GBFS(loss="squared", feature_groups=GROUPS, group_costs=[10 * c for c in COSTS],
                  n_estimators=3, masked_copies=1, early_stopping_rounds=None).fit(X, 7.0 * score)
    np.testing.assert_array_equal(scaled.tree_feature_, model.tree_feature_)
    free = GBFS(loss="squared", feature_groups=GROUPS, group_costs=[0.0] * 3,
                n_estimators=3).fit(X, score)
    assert free.feature_penalty_ == 0.0


def test_next_group_is_the_best_training_gain_per_unit_cost_within_the_budget():
    X, labels, _ = _data(400)
    model = GBFS(feature_groups=GROUPS, group_costs=COSTS, n_estimators=20, max_depth=3,
                 feature_penalty=0.0).fit(X, labels)
    gain = model.group_gain_
    assert gain.shape == (3,) and np.all(gain > 0)
    for size in range(3):
        for S in itertools.combinations(range(3), size):
            rest = [g for g in range(3) if g not in S]
            best = max(rest, key=lambda g: gain[g] / COSTS[g])
            assert model.next_group(S) == best
            spent = sum(COSTS[g] for g in S)
            for cap in (spent + 0.4, spent + 0.5, spent + 1.0, spent + 3.0):
                fits = [g for g in rest if COSTS[g] <= cap - spent]
                want = max(fits, key=lambda g: gain[g] / COSTS[g]) if fits else None
                assert model.next_group(S, max_cost=cap) == want
    assert model.next_group([0, 1, 2]) is None and model.next_group(None) is None


def test_state_round_trip_and_the_paper_rule_as_an_option():
    X, labels, _ = _data(300)
    model = GBFS(feature_groups=GROUPS, group_costs=COSTS, n_estimators=8, max_depth=2,
                 mask_rate=0.4).fit(X, labels)
    again = model_from_bytes(model.to_bytes())
    assert again.state_dict()["format_version"] == 3
    for S in ([], [1], [0, 2], None):
        np.testing.assert_array_equal(again.decision_function(X, computed_groups=S),
                                      model.decision_function(X, computed_groups=S))
    np.testing.assert_array_equal(again.group_gain_, model.group_gain_)
    prefix = GBFS(feature_groups=GROUPS, group_costs=COSTS, n_estimators=8, max_depth=2,
                  mask_rate=0.4, uncomputed="prefix").fit(X, labels)
    np.testing.assert_array_equal(prefix.tree_feature_, model.tree_feature_)
    for S in ([], [1], [0, 2]):
        n = prefix.trees_used(S)
        assert n == prefix.n_trees_for_groups(S)
        staged = [np.full(len(X), prefix.base_score_)] + list(
            prefix.staged_decision_function(X))
        np.testing.assert_array_equal(prefix.decision_function(X, computed_groups=S),
                                      staged[n])


@pytest.mark.parametrize(("name", "value", "match"), [
    ("masked_copies", -1, "masked_copies"), ("masked_copies", 1.5, "masked_copies"),
    ("mask_rate", 1.5, "mask_rate"), ("uncomputed", "zero", "uncomputed"),
    ("feature_penalty", "big", "feature_penalty"), ("feature_penalty", -1.0, "feature_penalty"),
])
def test_bad_budget_parameters_are_named(name, value, match):
    X, labels, _ = _data(50)
    with pytest.raises((ValueError, TypeError), match=match):
        GBFS(**{name: value}).fit(X, labels)


def test_a_missingness_split_and_a_constant_feature_predict_from_raw_values():
    # feature 0 is constant where present (one bin): only its missingness can split it
    rng = np.random.default_rng(3)
    X = np.column_stack([np.where(rng.random(200) < 0.4, np.nan, 1.0), rng.normal(size=200)])
    y = np.where(np.isnan(X[:, 0]), 2.0, -1.0) + 0.1 * X[:, 1]
    model = GBFS(loss="squared", n_estimators=5, max_depth=1, feature_penalty=0.0,
                 masked_copies=0).fit(X, y)
    assert model.tree_feature_[0, 0] == 0 and model.tree_threshold_[0, 0] == 0
    binned = np.full(len(y), model.base_score_)
    for t in range(5):  # the trees walked by hand on raw values
        f, edge = model.tree_feature_[t, 0], model.tree_split_value_[t, 0]
        x = X[:, f]
        left = np.where(np.isnan(x), model.tree_default_left_[t, 0] == 1, x <= edge)
        binned += model.learning_rate * model.tree_value_[t][np.where(left, 1, 2)]
    np.testing.assert_allclose(model.decision_function(X), binned, rtol=1e-12)
    again = model_from_bytes(model.to_bytes())
    np.testing.assert_array_equal(again.decision_function(X), model.decision_function(X))


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_early_stopping_keeps_the_trees_up_to_the_best_held_out_loss(loss):
    X, labels, score = _data(400, seed=2)
    y = labels if loss == "logistic" else score
    train, held = slice(0, 300), slice(300, None)
    common = dict(loss=loss, feature_groups=GROUPS, group_costs=COSTS, n_estimators=60,
                  max_depth=3, learning_rate=0.3, masked_copies=2)
    full = GBFS(early_stopping_rounds=None, **common).fit(X[train], y[train])
    stopped = GBFS(early_stopping_rounds=5, **common).fit(X[train], y[train], X_val=X[held],
                                                         y_val=y[held])
    # the held-out loss by hand: the held-out rows and their masked copies (stream 1)
    codes = binning.apply_bins(X[held], full.bin_edges_, full.bin_offsets_)
    target = (y[held] == full.classes_[1]).astype(float) if loss == "logistic" else y[held]
    codes, target = full._masked_rows(codes, target, full._group_of(), 3, 1)
    scores = np.full(len(target), full.base_score_)
    curve = []
    for t in range(60):
        walked = _oracle_codes_tree(full, t, codes)
        scores = scores + full.learning_rate * walked
        curve.append(np.mean(np.logaddexp(0, np.where(target > 0.5, -scores, scores)))
                     if loss == "logistic" else 0.5 * np.mean((target - scores) ** 2))
    stop_at = next(t for t in range(60) if t + 1 - (int(np.argmin(curve[:t + 1])) + 1) >= 5)
    best = int(np.argmin(curve[:stop_at + 1])) + 1
    assert stopped.tree_feature_.shape[0] == best < 60
    np.testing.assert_array_equal(stopped.tree_feature_, full.tree_feature_[:best])
    np.testing.assert_allclose(stopped.validation_loss_, curve[:best], rtol=1e-9)
    np.testing.assert_array_equal(stopped.decision_function(X, computed_groups=[0]),
                                  _prefix_scores(full, X, [0], best))
    again = model_from_bytes(stopped.to_bytes())
    np.testing.assert_array_equal(again.decision_function(X), stopped.decision_function(X))


def _oracle_codes_tree(model, t, codes):
    feature, threshold = model.tree_feature_[t], model.tree_threshold_[t]
    out = np.empty(len(codes))
    for i in range(len(codes)):
        j = 0
        while feature[j] >= 0:
            c = codes[i, feature[j]]
            left = c <= threshold[j] if c != MISSING else model.tree_default_left_[t, j]
            j = 2 * j + 1 if left else 2 * j + 2
        out[i] = model.tree_value_[t, j]
    return out


def _prefix_scores(model, X, computed, n_trees):
    nan = X.copy()
    nan[:, [f for g in range(3) if g not in computed for f in GROUPS[g]]] = np.nan
    out = np.full(len(X), model.base_score_)
    for t in range(n_trees):
        for i in range(len(X)):
            j = 0
            while model.tree_feature_[t, j] >= 0:
                x = nan[i, model.tree_feature_[t, j]]
                left = model.tree_default_left_[t, j] if np.isnan(x) else \
                    x <= model.tree_split_value_[t, j]
                j = 2 * j + 1 if left else 2 * j + 2
            out[i] += model.learning_rate * model.tree_value_[t, j]
    return out


def test_early_stopping_without_a_validation_set_holds_out_a_seeded_fraction():
    X, labels, _ = _data(400, seed=5)
    a = GBFS(n_estimators=80, learning_rate=0.5, random_state=3).fit(X, labels)
    b = GBFS(n_estimators=80, learning_rate=0.5, random_state=3).fit(X, labels)
    np.testing.assert_array_equal(a.tree_value_, b.tree_value_)
    assert 0 < a.tree_feature_.shape[0] < 80 and a.validation_loss_.shape == (
        a.tree_feature_.shape[0],)
    with pytest.raises(ValueError, match="both X_val and y_val"):
        GBFS().fit(X, labels, X_val=X)
    with pytest.raises(ValueError, match="training classes"):
        GBFS().fit(X, labels, X_val=X[:5], y_val=np.full(5, 7))


def test_a_fit_that_keeps_no_tree_is_a_constant_that_stores():
    # labels unrelated to X: no tree lowers the held-out loss, early stopping keeps none
    X = np.random.default_rng(8).normal(size=(40, 6))
    y = np.tile([0, 1], 20)
    model = GBFS(feature_groups=GROUPS, group_costs=COSTS, n_estimators=5,
                 learning_rate=2.0, random_state=4).fit(X, y)
    again = model_from_bytes(model.to_bytes())
    assert again.group_gain_.dtype == np.float64 and again.group_gain_.shape == (3,)
    np.testing.assert_array_equal(again.decision_function(X), model.decision_function(X))
    assert model.tree_feature_.shape[0] == 0
    np.testing.assert_array_equal(model.decision_function(X), model.base_score_)
    assert model.next_group([]) is None
