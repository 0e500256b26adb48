"""forward_specialist_sets: the greedy path ranked by a refit on exactly each candidate set
(held-out figure per unit cost), on one split or on K folds of all the rows."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms.per_set.forward import forward_specialist_sets
from algorithms.per_set.specialists import fit_specialist

GROUPS = [[0], [1], [2, 3], [4]]
PARAMS = {"n_estimators": 30, "learning_rate": 0.3, "max_depth": 3,
          "early_stopping_rounds": None}


def _data(n, seed):
    """Group 2 carries most of the signal, group 0 some, groups 1 and 3 none."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    y = 2.0 * X[:, 2] - X[:, 3] + 0.8 * X[:, 0] + 0.5 * rng.normal(size=n)
    return X, y


def test_path_takes_the_signal_first_and_its_figures_are_the_specialists():
    X, y = _data(400, 0)
    Xv, yv = _data(200, 1)
    path = forward_specialist_sets(X, y, Xv, yv, groups=GROUPS, task="regression", steps=3,
                                   gbfs_params=PARAMS)
    assert path.order[:2] == (2, 0)
    assert path.sets == ((2,), (0, 2), tuple(sorted((0, 2, path.order[2]))))
    assert len(path.figures) == 4 and path.figures[1] < path.figures[2]
    assert abs(path.figures[0]) < 0.05     # a constant explains nothing held out
    want = fit_specialist(X, y, Xv, yv, [np.array(g) for g in GROUPS], np.ones(4), (0, 2),
                          "regression", PARAMS).figure
    assert path.figures[2] == pytest.approx(want, rel=1e-12)


def test_costs_divide_the_gain_and_max_cost_caps_the_path():
    X, y = _data(400, 2)
    Xv, yv = _data(200, 3)
    costs = [1.0, 1.0, 30.0, 1.0]          # group 2: the most gain, the least per unit
    common = {"groups": GROUPS, "costs": costs, "task": "regression", "gbfs_params": PARAMS}
    assert forward_specialist_sets(X, y, Xv, yv, steps=2, **common).order == (0, 2)
    capped = forward_specialist_sets(X, y, Xv, yv, steps=4, max_cost=3.0, **common)
    assert capped.order[0] == 0 and 2 not in capped.order and len(capped.order) == 3


def test_folds_rank_on_every_row_and_classification_labels():
    X, y = _data(300, 4)
    Xv, yv = _data(150, 5)
    labels, labels_val = np.where(y > 0, "spam", "ham"), np.where(yv > 0, "spam", "ham")
    path = forward_specialist_sets(X, labels, Xv, labels_val, groups=GROUPS,
                                   task="classification", steps=1, folds=2,
                                   gbfs_params=PARAMS)
    assert path.order == (2,)
    X_all, y_all = np.vstack([X, Xv]), np.concatenate([y, yv])
    t = np.where(y_all > 0, 1.0, -1.0)    # "spam" > "ham": the positive label
    fold = np.random.default_rng(0).permutation(t.size) % 2
    want = sum((fold == k).mean() * fit_specialist(
        X_all[fold != k], t[fold != k], X_all[fold == k], t[fold == k],
        [np.array(g) for g in GROUPS], np.ones(4), (2,), "classification", PARAMS).figure
        for k in range(2))
    assert path.figures[1] == pytest.approx(want, rel=1e-12)
    assert path.figures[1] > path.figures[0]   # -log-loss above the constant's


def test_a_shortlist_of_one_follows_the_held_out_ranking_with_fold_figures():
    X, y = _data(300, 7)
    Xv, yv = _data(150, 8)
    common = {"groups": GROUPS, "task": "regression", "steps": 2, "gbfs_params": PARAMS}
    single = forward_specialist_sets(X, y, Xv, yv, **common)
    fits = []
    short = forward_specialist_sets(X, y, Xv, yv, folds=2, shortlist=1,
                                    progress=fits.append, **common)
    assert short.order == single.order
    full = forward_specialist_sets(X, y, Xv, yv, folds=2, **common)
    assert short.figures[1] == pytest.approx(full.figures[1], rel=1e-12)
    # fits: 4 + 3 candidates on the held-out rows, one shortlisted set on 2 folds a step,
    # out of steps (J + M K) = 12
    assert len(fits) == 4 + 1 + 3 + 1 and fits[-1] == pytest.approx(11 / 12)


@pytest.mark.parametrize("kwargs, message", [
    ({"task": "ranking"}, "task"), ({"steps": 0}, "steps"), ({"folds": 1}, "folds"),
    ({"shortlist": 0}, "shortlist"),
    ({"costs": [1.0, 1.0]}, "costs")])
def test_bad_arguments(kwargs, message):
    X, y = _data(50, 6)
    args = {"groups": GROUPS, "task": "regression", "steps": 1, **kwargs}
    with pytest.raises(ValueError, match=message):
        forward_specialist_sets(X, y, X, y, **args)
