"""SubsetSolver: the block-updated factor of any set equals a fresh factorization, its
solves equal a plain solve, its next-group scores equal the criteria computed from scratch;
each through both paths: the numba kernels of small sets and LAPACK's (``SMALL_SOLVE``)."""

import itertools

import numpy as np
import pytest

from algorithms.anytime import _kernels as kernels
from algorithms.anytime import subsets
from algorithms.anytime.subsets import SubsetSolver
from tests.anytime.criteria_reference import next_group_scores


@pytest.fixture(autouse=True, params=["kernels", "lapack"])
def solve_path(request, monkeypatch):
    """Every test twice: small sets in one kernel call, and through LAPACK's wrappers."""
    if request.param == "lapack":
        monkeypatch.setattr(subsets, "SMALL_SOLVE", 0)
    return request.param


def _problem(seed: int, duplicate: bool = False):
    rng = np.random.default_rng(seed)
    n, D = 200, 14
    X = rng.normal(size=(n, D)) + 0.5 * rng.normal(size=(n, 1))  # correlated features
    if duplicate:
        X[:, 5] = X[:, 2]  # a dependent direction (alpha = 0)
    X = (X - X.mean(0)) / X.std(0)
    y = X @ rng.normal(size=D) + rng.normal(size=n)
    C = X.T @ X / n + (0.0 if duplicate else 1e-6) * np.eye(D)
    b = X.T @ (y - y.mean()) / n / y.std()
    groups = [np.array(g) for g in ([0, 1], [2, 3, 4], [5], [6, 7, 8], [9, 10], [11, 12, 13])]
    return C, b, groups


@pytest.mark.parametrize("seed", range(3))
def test_every_set_solves_as_a_fresh_factorization(seed):
    C, b, groups = _problem(seed)
    solver = SubsetSolver(C, b, groups, sequence=[3, 0, 4, 1])
    for size in range(1, 7):
        for S in itertools.combinations(range(6), size):
            idx, w = solver.weights(frozenset(S))
            want = np.linalg.solve(C[np.ix_(idx, idx)], b[idx])
            np.testing.assert_allclose(w, want, rtol=1e-9, atol=1e-12)
            factor = solver.factor(frozenset(S))
            np.testing.assert_allclose(factor.L @ factor.L.T, C[np.ix_(idx, idx)],
                                       atol=1e-12)
            prefix = 0
            while prefix < 4 and [3, 0, 4, 1][prefix] in S:
                prefix += 1
            head = np.concatenate([groups[g] for g in [3, 0, 4, 1][:prefix]] or [[]])
            fresh = SubsetSolver(C, b, groups, sequence=[3, 0, 4, 1]).factor(frozenset(S))
            np.testing.assert_array_equal(fresh.idx[:len(head)], head)  # the prefix first
            assert sorted(idx.tolist()) == sorted(np.concatenate(
                [groups[g] for g in S]).tolist())  # (maybe a cached subset's order first)


def test_a_set_extends_the_factor_of_its_largest_cached_subset():
    C, b, groups = _problem(0)
    solver = SubsetSolver(C, b, groups, sequence=[0, 1, 2])
    S = frozenset({0, 3, 4})  # prefix {0}; the cached {0, 3, 4} is larger
    base = solver.factor(S)
    grown = solver.factor(S | {1})  # extends S's factor, although {0, 1} is a longer prefix
    np.testing.assert_array_equal(grown.idx[:len(base.idx)], base.idx)
    np.testing.assert_array_equal(grown.L[:len(base.idx), :len(base.idx)], base.L)
    idx = grown.idx
    np.testing.assert_allclose(grown.L @ grown.L.T, C[np.ix_(idx, idx)], atol=1e-12)
    np.testing.assert_allclose(grown.solve(b[idx]), np.linalg.solve(C[np.ix_(idx, idx)],
                                                                     b[idx]), rtol=1e-9)


@pytest.mark.parametrize(("seed", "duplicate"), [(0, False), (1, False), (2, True)])
@pytest.mark.parametrize("kind", [kernels.OMP, kernels.FR, kernels.NO_WHITEN, kernels.SINGLE])
def test_scores_equal_the_criteria_from_scratch(seed, duplicate, kind):
    C, b, groups = _problem(seed, duplicate)
    solver = SubsetSolver(C, b, groups, sequence=[1, 2, 0])
    for size in range(0, 6):
        for S in itertools.combinations(range(6), size):
            remaining = np.ones(6, dtype=bool)
            remaining[list(S)] = False
            got = solver.scores(frozenset(S), kind, remaining)
            want = next_group_scores(C, b, groups, sorted(S), kind, remaining)
            np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10)


def test_nothing_is_factored_when_no_group_is_left():
    C, b, groups = _problem(0)
    solver = SubsetSolver(C, b, groups, sequence=[0, 1])
    scores = solver.scores(frozenset(range(6)), kernels.FR, np.zeros(6, dtype=bool))
    assert np.all(scores == -1.0) and solver.cached_bytes() == 0


def test_the_cache_is_bounded_in_bytes():
    C, b, groups = _problem(1)
    one = SubsetSolver(C, b, groups, sequence=[0]).factor(frozenset(range(6))).nbytes
    solver = SubsetSolver(C, b, groups, sequence=[0], cache_bytes=3 * one)
    for size in range(4, 7):
        for S in itertools.combinations(range(6), size):
            solver.factor(frozenset(S))
            assert solver.cached_bytes() <= 3 * one
