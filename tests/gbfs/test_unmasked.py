"""GBFS's unmasked ensemble: the trees ``masked_copies=0`` would boost, answering the sets
(prefixes of the cost order, full-information sets) where they did better on held-out rows."""

import numpy as np
import pytest

from algorithms.datasets.regime_synthetic import make_regime_products
from algorithms.gbfs import GBFS
from algorithms.registry import model_from_bytes

TOLERANCE = {"regression": 0.02, "classification": 0.02}  # EV / accuracy, held-out noise


def _split(task: str, seed: int, n: int = 2000):
    X, y, groups, costs = make_regime_products(n, task=task, random_state=seed)
    a, b = int(0.6 * n), int(0.8 * n)
    return X[:a], y[:a], X[a:b], y[a:b], X[b:], y[b:], groups, costs


def _score(task: str, model: GBFS, X, y, S) -> float:
    p = model.predict(X, computed_groups=S)
    if task == "regression":
        return float(1.0 - np.mean((p - y) ** 2) / np.var(y))
    return float(np.mean(p == y))


def test_generator_is_seeded_grouped_and_balanced():
    X, y, groups, costs = make_regime_products(400, task="classification", random_state=3)
    again = make_regime_products(400, task="classification", random_state=3)
    np.testing.assert_array_equal(X, again[0])
    np.testing.assert_array_equal(y, again[1])
    assert X.shape == (400, 18) and sorted(sum(groups, [])) == list(range(18))
    assert costs.shape == (6,) and 0.35 < y.mean() < 0.65
    with pytest.raises(ValueError, match="task"):
        make_regime_products(10, task="ranking")


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_all_groups_answer_at_least_as_well_as_trees_without_masking(task):
    """The defaults' full-information answer ties or beats the same trees with
    ``masked_copies=0`` on test rows (within ``TOLERANCE``), on every cost prefix too for
    regression; the masked trees alone lost 0.12-0.18 EV at full information here."""
    Xtr, ytr, Xva, yva, Xte, yte, groups, costs = _split(task, 1)
    loss = "squared" if task == "regression" else "logistic"
    common = dict(loss=loss, feature_groups=groups, group_costs=costs, random_state=1)
    model = GBFS(**common).fit(Xtr, ytr, X_val=Xva, y_val=yva)
    plain = GBFS(masked_copies=0, **common).fit(Xtr, ytr, X_val=Xva, y_val=yva)
    order = np.argsort(costs, kind="stable")
    prefixes = [sorted(order[:k].tolist()) for k in range(len(costs) + 1)]
    for S in prefixes if task == "regression" else [prefixes[-1]]:
        assert _score(task, model, Xte, yte, S) >= \
            _score(task, plain, Xte, yte, S) - TOLERANCE[task], S
    assert model.answers_unmasked(None) and model.trees_used(None) == \
        plain.tree_feature_.shape[0] < model.n_estimators   # early stopping, not the cap


def test_the_unmasked_trees_are_those_of_masked_copies_0_bit_for_bit():
    Xtr, ytr, Xva, yva, *_, groups, costs = _split("regression", 2, 800)
    common = dict(loss="squared", feature_groups=groups, group_costs=costs, max_depth=3,
                  n_estimators=60, subsample=0.8, random_state=5)
    model = GBFS(masked_copies=2, **common).fit(Xtr, ytr, X_val=Xva, y_val=yva)
    plain = GBFS(masked_copies=0, **common).fit(Xtr, ytr, X_val=Xva, y_val=yva)
    for name in ("tree_feature_", "tree_threshold_", "tree_value_", "tree_default_left_",
                 "tree_split_value_"):
        np.testing.assert_array_equal(getattr(model, "unmasked_" + name),
                                      getattr(plain, name))
    assert model.unmasked_base_score_ == plain.base_score_
    everything = list(range(len(groups)))
    if model.answers_unmasked(everything):
        np.testing.assert_array_equal(model.decision_function(Xva),
                                      plain.decision_function(Xva))


def test_which_ensemble_answers_which_set():
    """Prefixes by their held-out choice, a superset of the unmasked trees' groups by the
    choice for all groups (their answer is then exact), any other set by the masked trees;
    the answer is that ensemble's, and trees_used / groups_split_on say so."""
    Xtr, ytr, Xva, yva, *_, groups, costs = _split("regression", 0, 1200)
    model = GBFS(loss="squared", feature_groups=groups, group_costs=costs, max_depth=3,
                 n_estimators=80).fit(Xtr, ytr, X_val=Xva, y_val=yva)
    J = len(groups)
    order = np.argsort(costs, kind="stable")
    split_on = set(np.unique(model._group_of()[model.unmasked_tree_feature_[
        model.unmasked_tree_feature_ >= 0]]).tolist())
    masked_rows = Xva.copy()
    for k in range(J + 1):
        S = sorted(order[:k].tolist())
        assert model.answers_unmasked(S) == bool(model.unmasked_sets_[k])
    rng = np.random.default_rng(0)
    for _ in range(20):
        S = sorted(rng.choice(J, size=rng.integers(0, J + 1), replace=False).tolist())
        if sorted(order[:len(S)].tolist()) == S:
            continue
        expected = bool(model.unmasked_sets_[J]) and split_on <= set(S)
        assert model.answers_unmasked(S) == expected, S
        masked_rows = Xva.copy()
        masked_rows[:, [f for g in range(J) if g not in S for f in groups[g]]] = np.nan
        np.testing.assert_array_equal(model.decision_function(Xva, computed_groups=S),
                                      model._ensemble_scores(masked_rows, expected))
        trees = model.unmasked_tree_feature_ if expected else model.tree_feature_
        assert model.trees_used(S) == trees.shape[0]
        used = split_on if expected else set(model.selected_groups_.tolist())
        assert model.groups_split_on(S) == sorted(used & set(S))


def test_without_held_out_rows_the_unmasked_trees_answer_full_information_sets():
    Xtr, ytr, *_, groups, costs = _split("classification", 4, 600)
    model = GBFS(feature_groups=groups, group_costs=costs, max_depth=2, n_estimators=15,
                 early_stopping_rounds=None).fit(Xtr, ytr)
    plain = GBFS(feature_groups=groups, group_costs=costs, max_depth=2, n_estimators=15,
                 early_stopping_rounds=None, masked_copies=0).fit(Xtr, ytr)
    np.testing.assert_array_equal(model.predict_proba(Xtr), plain.predict_proba(Xtr))
    assert model.answers_unmasked(None) and model.unmasked_sets_[-1] == 1


def test_state_round_trip_old_format_and_bad_states():
    Xtr, ytr, Xva, yva, *_, groups, costs = _split("regression", 3, 600)
    common = dict(loss="squared", feature_groups=groups, group_costs=costs, max_depth=2,
                  n_estimators=20)
    model = GBFS(**common).fit(Xtr, ytr, X_val=Xva, y_val=yva)
    again = model_from_bytes(model.to_bytes())
    assert again.state_dict()["format_version"] == 3 and again.unmasked_trees is True
    for S in ([], [0, 1], [2, 4], None):
        np.testing.assert_array_equal(again.decision_function(Xva, computed_groups=S),
                                      model.decision_function(Xva, computed_groups=S))
    np.testing.assert_array_equal(again.unmasked_sets_, model.unmasked_sets_)
    # without the unmasked trees a model is written, and read back, as format 2 was
    off = GBFS(unmasked_trees=False, **common).fit(Xtr, ytr, X_val=Xva, y_val=yva)
    state = off.state_dict()
    assert state["format_version"] == 2 and "unmasked_trees" not in state
    back = GBFS.from_state_dict(state)
    assert back.unmasked_trees is False and back.unmasked_tree_feature_.shape[0] == 0
    np.testing.assert_array_equal(back.decision_function(Xva), off.decision_function(Xva))
    np.testing.assert_array_equal(off.tree_feature_, model.tree_feature_)
    bad = model.state_dict()
    bad["unmasked_sets_"] = np.zeros(3, dtype=np.uint8)
    with pytest.raises(ValueError, match="unmasked_sets_"):
        GBFS.from_state_dict(bad)
    bad = model.state_dict()
    bad["unmasked_tree_value_"] = np.full_like(model.unmasked_tree_value_, np.nan)
    with pytest.raises(ValueError, match="unmasked_tree_value_"):
        GBFS.from_state_dict(bad)
    with pytest.raises(TypeError, match="unmasked_trees"):
        GBFS(unmasked_trees=1, **common).fit(Xtr, ytr)
