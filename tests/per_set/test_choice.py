"""PerSetChoice on a 4-group problem whose target is linear in groups 0-1 and an
interaction of thresholds in groups 2-3: the choice per set is the brute-force comparison of
the halves' validation figures, answers are the chosen half's own, states round-trip bit for
bit, string labels work, the combined sequence is greedy."""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import expit

from algorithms.per_set import PerSetChoice
from algorithms.per_set.choice import TIE_TOLERANCE
from algorithms.per_set.figures import platt_targets
from algorithms.registry import model_from_bytes
from algorithms.sparse import as_csr_batch

GROUPS = [[0, 1], [2, 3], [4, 5], [6, 7]]
COSTS = [1.0, 2.0, 1.5, 0.5]
SETS = [S for k in range(5) for S in itertools.combinations(range(4), k)]
GBFS_PARAMS = {"n_estimators": 40, "max_depth": 3, "learning_rate": 0.3,
               "feature_penalty": 0.5, "random_state": 0}


def data(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8))
    linear = 1.5 * X[:, 0] - X[:, 1] + 0.8 * X[:, 2]
    interaction = 3.0 * ((X[:, 4] > 0) & (X[:, 6] > 0)) - 1.5 * (X[:, 5] > 0.5)
    return X, linear + interaction + 0.3 * rng.normal(size=n), linear, interaction


@pytest.fixture(scope="module")
def regression():
    X, y, _, _ = data(700, 0)
    return PerSetChoice(groups=GROUPS, costs=COSTS, gbfs_params=GBFS_PARAMS,
                        anytime_params={"alpha": 1e-4}).fit(X, y)


@pytest.fixture(scope="module")
def classification():
    X, _, linear, interaction = data(700, 1)
    labels = np.where(linear + interaction + 0.5 * np.random.default_rng(9).normal(size=700)
                      > 0.8, "yes", "no")
    return PerSetChoice(groups=GROUPS, costs=COSTS, task="classification",
                        gbfs_params=GBFS_PARAMS).fit(X, labels), X, labels


def half_scores(model, X, S):
    anytime = model.anytime_   # classification: the logistic refit's logit
    score = anytime.decision_function if anytime.classification_answer == "logistic" \
        else anytime.predict
    return {"anytime": score(X, computed_groups=S),
            "gbfs": model.gbfs_.decision_function(X, computed_groups=S)}


def reference_log_loss(s, positive, rows=False):
    """Cross-fitted log-loss of Platt-calibrated scores (each row's with ``rows``), from
    scratch (two parity folds,
    the smoothed-target cross-entropy minimized by plain gradient-free Newton in numpy)."""
    logits = np.empty(len(s))
    for fold in (0, 1):
        fit, out = np.arange(1 - fold, len(s), 2), np.arange(fold, len(s), 2)
        x, t, theta = s[fit], platt_targets(positive[fit]), np.zeros(2)
        design = np.column_stack([x, np.ones_like(x)])
        for _ in range(200):
            p = expit(design @ theta)
            hessian = design.T @ (design * (p * (1 - p))[:, None]) + 1e-12 * np.eye(2)
            theta = theta - np.linalg.solve(hessian, design.T @ (p - t))
        logits[out] = theta[0] * s[out] + theta[1]
    losses = np.logaddexp(0, logits) - positive * logits
    return losses if rows else float(np.mean(losses))


def reference_figures(model, S, rows=False):
    """Both halves' validation figures for S, recomputed from the halves themselves (with
    ``rows``: each validation row's loss instead)."""
    out = {}
    for half, s in half_scores(model, model.X_val_, S).items():
        y = model.y_val_
        if model.task == "regression":
            losses = (s - y) ** 2 / np.var(y)
            out[half] = losses if rows else 1 - np.mean(losses)
        else:
            out[half] = reference_log_loss(s, y > 0, rows=True) if rows else \
                -reference_log_loss(s, y > 0)
    return out


def reference_choice(figures, model=None, S=None):
    """GBFS when its figure is better and (with ``model``) by more than one standard error
    of the mean paired difference of the rows' losses (the default ``choice_margin``)."""
    if not figures["gbfs"] > figures["anytime"] + TIE_TOLERANCE:
        return "anytime"
    if model is None:
        return "gbfs"
    losses = reference_figures(model, S, rows=True)
    diff = losses["anytime"] - losses["gbfs"]
    return "gbfs" if diff.mean() > diff.std(ddof=1) / np.sqrt(diff.size) else "anytime"


# ---------------------------------------------------------------------- the choice
def test_choice_is_the_brute_force_comparison_for_every_set(regression):
    chosen = set()
    for S in SETS:
        ref = reference_figures(regression, S)
        assert regression.choice(S) == reference_choice(ref, regression, S), S
        chosen.add(regression.choice(S))
        figures = regression.figures(S)
        assert figures["half"] == regression.choice(S)
        assert figures["anytime_figure"] == pytest.approx(ref["anytime"], abs=1e-12)
        assert figures["gbfs_figure"] == pytest.approx(ref["gbfs"], abs=1e-12)
        assert figures["explained_variance"] == figures[f"{figures['half']}_figure"]
    assert chosen == {"anytime", "gbfs"}     # each half is better somewhere
    assert regression.choice(None) == regression.choice((0, 1, 2, 3))


def test_classification_choice_is_the_brute_force_comparison(classification):
    model, _, _ = classification
    chosen = set()
    for S in SETS:
        ref = reference_figures(model, S)
        if abs(ref["gbfs"] - ref["anytime"]) < 1e-6:
            continue          # the reference's own rounding could flip a near tie
        assert model.choice(S) == reference_choice(ref, model, S), S
        assert model.figures(S)["log_loss"] == pytest.approx(-ref[model.choice(S)], abs=1e-8)
        chosen.add(model.choice(S))
    assert chosen == {"anytime", "gbfs"}


# --------------------------------------------------------------------- the answers
def test_answers_are_the_chosen_halfs_own_bit_for_bit(regression):
    X, _, _, _ = data(50, 7)
    for S in SETS:
        own = half_scores(regression, X, S)[regression.choice(S)]
        assert regression.predict(X, computed_groups=S).tobytes() == own.tobytes()
        assert regression.decision_function(X, computed_groups=S).tobytes() == own.tobytes()
    with pytest.raises(AttributeError):
        regression.predict_proba(X)


def test_classification_answers_are_calibrated_chosen_scores(classification):
    model, _, _ = classification
    X, _, _, _ = data(40, 8)
    for S in SETS:
        half = model.choice(S)
        own = half_scores(model, X, S)[half]
        figures = model.half_figures(half).figures(S)
        logits = figures.platt_a * own + figures.platt_b
        np.testing.assert_array_equal(model.decision_function(X, computed_groups=S), logits)
        proba = model.predict_proba(X, computed_groups=S)
        np.testing.assert_array_equal(proba[:, 1], expit(logits))
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)
        np.testing.assert_array_equal(model.predict(X, computed_groups=S),
                                      np.where(logits >= 0, "yes", "no"))
    assert model.classes_.tolist() == ["no", "yes"]


def test_threads_answer_as_one_thread_does(regression):
    X, _, _, _ = data(200, 11)
    model = PerSetChoice.from_bytes(regression.to_bytes())     # cold caches
    want = {S: regression.predict(X, computed_groups=S) for S in SETS}
    got, errors = [], []

    def work(offset):
        try:
            for S in SETS[offset:] + SETS[:offset]:
                got.append((S, model.predict(X, computed_groups=S)))
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(got) == 4 * len(SETS)
    for S, answer in got:  # (a set's factor extends whichever of its subsets was cached
        # first, so the order sets are first asked in may move the last bits: to 1e-12)
        np.testing.assert_allclose(answer, want[S], rtol=1e-12, atol=1e-12)


def test_uncomputed_groups_may_be_missing_or_garbage(regression):
    X, _, _, _ = data(30, 3)
    S = (0, 3)
    want = regression.predict(X, computed_groups=S)
    for fill in (np.nan, np.inf, 1e6):
        other = X.copy()
        other[:, GROUPS[1] + GROUPS[2]] = fill
        np.testing.assert_array_equal(regression.predict(other, computed_groups=S), want)
    other = X.copy()
    other[0, 0] = np.nan
    with pytest.raises(ValueError, match="computed"):
        regression.predict(other, computed_groups=S)
    np.testing.assert_allclose(regression.predict(sp.csr_matrix(X), computed_groups=S), want,
                               rtol=1e-12)
    np.testing.assert_allclose(regression.predict(as_csr_batch(X), computed_groups=S), want,
                               rtol=1e-12)
    with pytest.raises(ValueError, match="group ids"):
        regression.predict(X, computed_groups=[4])


# ----------------------------------------------------------------- the sequence
def reference_combined(model, S):
    """The figure of the half the reference chooses for S."""
    ref = reference_figures(model, S)
    return ref[reference_choice(ref, model, S)]


def test_the_combined_sequence_is_greedy(regression):
    S, costs = (), np.asarray(COSTS)
    for j, g in enumerate(regression.sequence_.tolist()):
        base = reference_combined(regression, S)
        ratios = {}
        for h in set(range(4)) - set(S):
            gain = reference_combined(regression, tuple(sorted(S + (h,)))) - base
            ratios[h] = gain / costs[h]
        best = max(ratios.values())
        assert ratios[g] == pytest.approx(best, abs=1e-9), (S, ratios)
        assert regression.sequence_figure_[j] == pytest.approx(base, abs=1e-12)
        assert regression.sequence_half_[j] == regression.choice(S)
        S = tuple(sorted(S + (g,)))
    assert S == (0, 1, 2, 3)
    assert regression.sequence_figure_[-1] == regression.combined_figure(S)
    np.testing.assert_allclose(regression.cumulative_cost_,
                               np.r_[0.0, np.cumsum(costs[regression.sequence_])])
    assert regression.next_group(regression.sequence_[:1]) == regression.sequence_[1]


def test_next_group_respects_max_cost(regression):
    costs = np.asarray(COSTS)
    for S in SETS:
        for max_cost in (0.5, 1.0, 2.0, 3.5, None):
            g = regression.next_group(S, max_cost=max_cost)
            room = np.inf if max_cost is None else max_cost - costs[list(S)].sum()
            fits = [h for h in range(4) if h not in S and costs[h] <= room + 1e-12]
            assert (g is None) == (not fits)
            if g is not None:
                assert g in fits
    assert regression.next_group((0, 1, 2, 3)) is None


# ------------------------------------------------------------------------- states
def _answers(model, X):
    return np.array([model.decision_function(X, computed_groups=S) for S in SETS])


def test_state_round_trip_answers_bit_for_bit(regression, classification):
    """The state round-trips bit for bit; the clone's answers equal the model's to 1e-12 (a
    set's factor extends whichever of its subsets is cached, and the clone's caches start
    empty: the last bits may differ)."""
    X, _, _, _ = data(30, 4)
    for model in (regression, classification[0]):
        for clone in (PerSetChoice.from_bytes(model.to_bytes()),
                      model_from_bytes(model.to_bytes())):
            assert type(clone) is PerSetChoice
            np.testing.assert_allclose(_answers(clone, X), _answers(model, X), rtol=1e-12,
                                       atol=1e-12)
            assert [clone.choice(S) for S in SETS] == [model.choice(S) for S in SETS]
            assert clone.sequence_.tolist() == model.sequence_.tolist()
            assert clone.sequence_half_ == model.sequence_half_
            assert clone.get_params() == {**model.get_params(), "groups": GROUPS,
                                          "costs": COSTS}
    clone = PerSetChoice.from_bytes(classification[0].to_bytes())
    assert clone.predict(X, computed_groups=(0, 2)).tolist() == \
        classification[0].predict(X, computed_groups=(0, 2)).tolist()


@pytest.mark.parametrize("member, edit, message", [
    ("X_val", lambda v: np.where(v > 2, np.nan, v), "X_val"),
    ("X_val", lambda v: v[:, :5], "X_val"),
    ("y_val", lambda v: v[:-1], "y_val"),
    ("sequence", lambda v: np.zeros_like(v), "sequence"),
    ("cumulative_cost", lambda v: v + 1.0, "cumulative_cost"),
    ("sequence_half", lambda v: v + 2, "sequence_half"),
    ("anytime.coef_path", lambda v: v[:-1], "anytime."),
    ("gbfs.group_costs", lambda v: v + 1.0, "gbfs."),
    ("gbfs.tree_value_", lambda v: v * np.nan, "gbfs."),
    ("costs", lambda v: v[:-1], "costs"),
])
def test_a_corrupt_state_is_a_value_error_naming_the_member(regression, member, edit,
                                                             message):
    state = regression.state_dict()
    state[member] = edit(state[member])
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        PerSetChoice.from_state_dict(state)


def test_a_classification_state_checks_labels_and_classes(classification):
    state = classification[0].state_dict()
    assert state["classes"] == ["no", "yes"]
    for key, value in (("classes", ["no", "no"]), ("classes", None),
                       ("y_val", state["y_val"] * 2)):
        bad = {**state, key: value}
        with pytest.raises(ValueError, match=key):
            PerSetChoice.from_state_dict(bad)


# -------------------------------------------------------------------------- fitting
def test_hold_out_is_deterministic_and_validation_is_capped():
    X, y, _, _ = data(200, 5)
    params = {"groups": GROUPS, "costs": COSTS, "gbfs_params": {"n_estimators": 5}}
    first = PerSetChoice(**params).fit(X, y)
    second = PerSetChoice(**params).fit(X, y)
    assert first.X_val_.shape == (40, 8)
    assert first.X_val_.tobytes() == second.X_val_.tobytes()
    rows = {tuple(r) for r in X.tolist()}
    assert all(tuple(r) in rows for r in first.X_val_.tolist())
    capped = PerSetChoice(**params, max_validation_rows=25).fit(X[:100], y[:100],
                                                               X_val=X[100:], y_val=y[100:])
    assert capped.X_val_.shape == (25, 8)
    given = {tuple(r) for r in X[100:].tolist()}
    assert all(tuple(r) in given for r in capped.X_val_.tolist())
    full = PerSetChoice(**params).fit(X[:100], y[:100], X_val=X[100:], y_val=y[100:])
    np.testing.assert_array_equal(full.X_val_, X[100:])
    seen = []
    PerSetChoice(**params).fit(X, y, progress=seen.append)
    assert seen == sorted(seen) and seen[-1] == 1.0


def test_bad_parameters_and_labels_are_clean_errors():
    X, y, _, _ = data(60, 6)
    for params, match in (({"task": "ranking"}, "task"), ({"method": "nope"}, "method"),
                          ({"gbfs_params": {"loss": "squared"}}, "gbfs_params"),
                          ({"anytime_params": {"costs": [1.0]}}, "anytime_params"),
                          ({"max_validation_rows": 1}, "max_validation_rows")):
        with pytest.raises(ValueError, match=match):
            PerSetChoice(groups=GROUPS, costs=COSTS, **params).fit(X, y)
    with pytest.raises(ValueError, match="no feature group"):
        PerSetChoice(groups=GROUPS[:3], costs=COSTS[:3]).fit(X, y)
    with pytest.raises(ValueError, match="2 classes"):
        PerSetChoice(groups=GROUPS, costs=COSTS, task="classification").fit(
            X, np.arange(60) % 3)
    with pytest.raises(ValueError, match="not fitted"):
        PerSetChoice(groups=GROUPS, costs=COSTS).predict(X)
