"""Greedy criteria against direct solves, sklearn OMP, exact forward regression."""

import numpy as np
import pytest

from algorithms.anytime import _kernels as kernels
from algorithms.anytime.greedy import GroupGreedy, pick_group, sequence_groups
from tests.anytime import naive

METHODS = ["cs-g-omp", "cs-g-fr", "no-whiten", "single"]


def _problem(seed, n=200, sizes=(1, 3, 2, 5, 1, 4), alpha=1e-3, shared=0.6):
    rng = np.random.default_rng(seed)
    D = sum(sizes)
    X = rng.standard_normal((n, D)) + shared * rng.standard_normal((n, 1))
    y = X @ (rng.standard_normal(D) * (rng.random(D) < 0.6)) + rng.standard_normal(n)
    C, b = naive.standardized(X, y, alpha)
    groups = np.split(np.arange(D), np.cumsum(sizes)[:-1])
    costs = rng.uniform(0.5, 3.0, len(sizes))
    return X, y, C, b, groups, costs


@pytest.mark.parametrize("method", METHODS)
def test_scores_match_direct_solves_at_every_step(method):
    _, _, C, b, groups, costs = _problem(0)
    kind = {"cs-g-omp": kernels.OMP, "cs-g-fr": kernels.FR, "no-whiten": kernels.NO_WHITEN,
            "single": kernels.SINGLE}[method]
    engine = GroupGreedy(C, b, groups, track_schur=True)
    for g in [3, 0, 5, 1]:
        scores = engine.scores(kind)
        for h in np.flatnonzero(engine.active):
            want = naive.criterion(method, C, b, groups, engine.selected, h)
            assert scores[h] == pytest.approx(want, rel=1e-8, abs=1e-12)
        assert np.all(scores[~engine.active] == -1)
        engine.add(g)
        np.testing.assert_allclose(engine.r, naive.gradient(C, b, groups, engine.selected)
                                   [engine.perm], atol=1e-10)
        assert engine.objective == pytest.approx(
            naive.objective(C, b, groups, engine.selected), rel=1e-10)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sequence_matches_brute_force_greedy(method, seed):
    _, _, C, b, groups, costs = _problem(seed)
    result = sequence_groups(C, b, groups, costs, method)
    assert result.order.tolist() == naive.greedy_order(method, C, b, groups, costs)
    W = result.prefix_coefficients(len(b))
    for j in range(len(result.order) + 1):
        idx = naive.union(groups, result.order[:j])
        w = np.zeros(len(b))
        if len(idx):
            w[idx] = np.linalg.solve(C[np.ix_(idx, idx)], b[idx])
        np.testing.assert_allclose(W[j], w, atol=1e-10)
        assert result.objective[j] == pytest.approx(0.5 * w @ b, abs=1e-12)
    np.testing.assert_allclose(result.cumulative_cost,
                               np.concatenate([[0], np.cumsum(costs[result.order])]))


def test_omp_criterion_is_projection_of_residual():
    """r_gᵀ C_gg⁻¹ r_g = ‖P_g (Y − Ŷ)‖² / n with λ = 0 (the paper's identity)."""
    X, y, C, b, groups, _ = _problem(4, alpha=0.0)
    Xs, ys = (X - X.mean(0)) / X.std(0), (y - y.mean()) / y.std()
    engine = GroupGreedy(C, b, groups)
    engine.add(2)
    engine.add(4)
    idx = naive.union(groups, [2, 4])
    w, *_ = np.linalg.lstsq(Xs[:, idx], ys, rcond=None)
    residual = ys - Xs[:, idx] @ w
    scores = engine.scores(kernels.OMP)
    for g in [0, 1, 3, 5]:
        Xg = Xs[:, groups[g]]
        projection = Xg @ np.linalg.lstsq(Xg, residual, rcond=None)[0]
        assert scores[g] == pytest.approx(projection @ projection / len(y), rel=1e-9)


def test_singletons_omp_matches_sklearn_and_fr_matches_forward_regression():
    from sklearn.linear_model import orthogonal_mp_gram

    rng = np.random.default_rng(5)
    n, D, k = 400, 30, 12
    X = rng.standard_normal((n, D)) + 0.5 * rng.standard_normal((n, 1))
    y = X @ (rng.standard_normal(D) * (rng.random(D) < 0.5)) + 0.3 * rng.standard_normal(n)
    C, b = naive.standardized(X, y, 0.0)
    groups = [np.array([i]) for i in range(D)]
    ours = sequence_groups(C, b, groups, np.ones(D), "cs-g-omp", max_groups=k).order
    path = orthogonal_mp_gram(C, b, n_nonzero_coefs=k, return_path=True)
    sklearn_order = []
    for step in range(path.shape[1]):
        new = [i for i in np.flatnonzero(path[:, step]) if i not in sklearn_order]
        sklearn_order += new
    assert ours.tolist() == sklearn_order
    # the estimator itself, on the standardized data: the support grows in our order
    from sklearn.linear_model import OrthogonalMatchingPursuit

    Xs = (X - X.mean(0)) / X.std(0)
    support: list[int] = []
    for j in range(1, k + 1):
        coef = OrthogonalMatchingPursuit(n_nonzero_coefs=j).fit(Xs, y).coef_
        support += [i for i in np.flatnonzero(coef) if i not in support]
    assert ours.tolist() == support
    fr = sequence_groups(C, b, groups, np.ones(D), "cs-g-fr", max_groups=k).order
    exact = []
    for _ in range(k):
        gains = {i: naive.objective(C, b, groups, exact + [i]) for i in range(D)
                 if i not in exact}
        exact.append(max(gains, key=gains.get))
    assert fr.tolist() == exact


@pytest.mark.parametrize("method", METHODS)
def test_duplicates_singular_and_constant_features_give_no_nan(method):
    rng = np.random.default_rng(6)
    n = 150
    base = rng.standard_normal((n, 4))
    X = np.column_stack([base, base[:, 0], base[:, 0], base[:, 1] + base[:, 2],
                         np.full(n, 3.0), base[:, 3]])
    y = base @ [1.0, -2.0, 0.5, 0.0] + 0.1 * rng.standard_normal(n)
    groups = [np.array([0, 1]), np.array([4, 5]), np.array([2, 3, 6]), np.array([7]),
              np.array([8])]  # group 4 duplicates feature 3
    Xs = (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1.0)
    ys = (y - y.mean()) / y.std()
    C, b = Xs.T @ Xs / n, Xs.T @ ys / n  # λ = 0: singular C
    result = sequence_groups(C, b, groups, np.ones(5), method)
    W = result.prefix_coefficients(X.shape[1])
    assert sorted(result.order) == list(range(5))
    assert np.all(np.isfinite(W)) and np.all(np.isfinite(result.objective))
    assert np.all(np.diff(result.objective) >= -1e-12)
    np.testing.assert_allclose(Xs @ W[-1], Xs @ np.linalg.lstsq(Xs, ys, rcond=None)[0],
                               atol=1e-6)


def test_zero_cost_first_budget_cap_and_max_groups():
    _, _, C, b, groups, costs = _problem(7)
    costs = costs.copy()
    costs[[2, 4]] = 0.0
    result = sequence_groups(C, b, groups, costs, "cs-g-omp")
    assert set(result.order[:2]) == {2, 4}
    capped = sequence_groups(C, b, groups, costs, "cs-g-fr", max_cost=3.0)
    assert capped.cumulative_cost[-1] <= 3.0
    left = set(range(len(groups))) - set(capped.order)
    assert all(costs[g] > 3.0 - capped.cumulative_cost[-1] for g in left)
    assert len(sequence_groups(C, b, groups, costs, "single", max_groups=2).order) == 2


def test_invalid_groups_rejected():
    _, _, C, b, groups, costs = _problem(8)
    with pytest.raises(ValueError):
        sequence_groups(C, b, [[0, 1], [1, 2]], [1, 1])
    with pytest.raises(ValueError):
        sequence_groups(C, b, groups, costs[:-1])
    with pytest.raises(ValueError):
        sequence_groups(C, b, groups, -costs)
    with pytest.raises(ValueError):
        sequence_groups(C, b, groups, costs, "nope")


def _pick_by_definition(gains, costs, eligible):
    """The pick in numpy: zero-cost candidates (gain >= 0) by gain, else the best gain per
    cost; the first of ties; -1 when none."""
    candidates = eligible & (gains >= 0)
    if not candidates.any():
        return -1
    free = candidates & (costs <= 0)
    if free.any():
        return int(np.argmax(np.where(free, gains, -np.inf)))
    return int(np.argmax(np.where(candidates, gains / np.where(costs > 0, costs, 1.0),
                                  -np.inf)))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # (NaN and inf gains, on purpose)
def test_pick_group_is_the_definition():
    rng = np.random.default_rng(3)
    for trial in range(3000):
        J = int(rng.integers(1, 9))
        gains = rng.choice([-1.0, 0.0, 0.5, 1.0, 2.0, np.nan, np.inf], J) if trial % 2 \
            else rng.standard_normal(J)
        costs = rng.choice([0.0, 0.5, 1.0, 2.0], J)
        eligible = rng.random(J) < 0.7
        assert pick_group(gains, costs, eligible) == \
            _pick_by_definition(gains, costs, eligible), (gains, costs, eligible)
