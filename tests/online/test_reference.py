"""Every learner equals its plain-numpy O(d) reference (tests/online/naive.py) to 1e-9."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from algorithms.online import AROW, FOFS, OGD, PET, SOFS, _featuremap
from tests.online import naive


@pytest.fixture(params=["direct", "cuckoo"])
def map_layout(request, monkeypatch):
    """Run a selector's test with each feature -> slot map layout (``_featuremap``)."""
    if request.param == "cuckoo":
        monkeypatch.setattr(_featuremap, "DIRECT_MAX_FEATURES", 0)
    return "int64" if request.param == "cuckoo" else "uint16"


def stream(seed, n=300, d=40, density=0.15, binary=False, empty_every=0):
    """Random sparse stream; indices repeat across examples; optional empty rows and ties."""
    rng = np.random.default_rng(seed)
    X = (rng.random((n, d)) < density).astype(float)
    if not binary:
        X *= rng.normal(size=(n, d))
    if empty_every:
        X[::empty_every] = 0.0
    w_true = rng.normal(size=d)
    y = np.where(X @ w_true + 0.3 * rng.normal(size=n) >= 0, 1.0, -1.0)
    return X, y


def dense_weights(learner, d):
    w = np.zeros(d)
    index, values = learner.weights()
    w[index] = values
    return w


CASES = [
    dict(seed=0),
    dict(seed=1, binary=True),            # many exact ties in |w| and in Sigma
    dict(seed=2, empty_every=7),          # empty examples
    dict(seed=3, density=0.5, d=12),      # dense-ish, small d
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("budget", [1, 5, 17, 100])   # 100 > d: budget larger than d
@pytest.mark.parametrize("hinge, power_t", [(False, 0.0), (True, 0.0), (True, 0.5)])
def test_pet_matches_reference(case, budget, hinge, power_t, map_layout):
    X, y = stream(**case)
    learner = PET(n_features=X.shape[1], budget=budget, eta=0.5, power_t=power_t,
                  update_on="hinge" if hinge else "mistake")
    assert learner._map_entries.dtype == map_layout
    for chunk in np.array_split(np.arange(len(y)), 3):   # batching must not matter
        learner.partial_fit(sp.csr_matrix(X[chunk]), y[chunk])
    expected = naive.pet(X, y, budget, eta=0.5, hinge=hinge, power_t=power_t)
    np.testing.assert_allclose(dense_weights(learner, X.shape[1]), expected, rtol=0, atol=1e-9)
    assert len(learner.selected_features()) <= budget


@pytest.mark.parametrize("hinge", [True, False])
def test_pet_matches_reference_on_a_long_synthetic_stream(hinge, map_layout):
    """Long enough for the hinge variant's newcomer scan to switch to its branch form (688
    of its 1,004 updates here, counted with an instrumented copy); the perceptron keeps
    the branch-free form."""
    from algorithms.datasets.online_synthetic import concatenate, make_task
    from algorithms.datasets.online_synthetic import stream as synthetic_stream

    task = make_task(1000, 40, 80, seed=3)
    batch, y = concatenate(synthetic_stream(task, 1500, seed=3))
    X = batch.normalized().to_scipy()
    learner = PET(n_features=1000, budget=40, update_on="hinge" if hinge else "mistake")
    learner.partial_fit(X, y)
    expected = naive.pet(X.toarray(), y, 40, eta=1.0, hinge=hinge)
    np.testing.assert_allclose(dense_weights(learner, 1000), expected, rtol=0, atol=1e-9)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("budget", [1, 5, 17, 100])
@pytest.mark.parametrize("lam", [0.0, 0.01, 0.5])
def test_fofs_matches_reference(case, budget, lam, map_layout):
    X, y = stream(**case)
    learner = FOFS(n_features=X.shape[1], budget=budget, eta=0.3, lam=lam)
    assert learner._map_entries.dtype == map_layout
    learner.partial_fit(X, y)
    expected = naive.fofs(X, y, budget, eta=0.3, lam=lam)
    got = dense_weights(learner, X.shape[1])
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-9 * max(1, np.abs(expected).max()))


def test_fofs_long_stream_folds_scale():
    """Strong shrinkage drives the lazy scale below its floor: folding keeps it exact."""
    X, y = stream(4, n=3000, d=30)
    learner = FOFS(n_features=30, budget=8, eta=0.5, lam=1.0)
    learner.partial_fit(X, y)
    np.testing.assert_allclose(dense_weights(learner, 30), naive.fofs(X, y, 8, 0.5, 1.0),
                               rtol=0, atol=1e-9)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("budget", [1, 5, 17, 100])
@pytest.mark.parametrize("r", [0.1, 1.0])
def test_sofs_matches_reference(case, budget, r, map_layout):
    X, y = stream(**case)
    learner = SOFS(n_features=X.shape[1], budget=budget, r=r)
    assert learner._map_entries.dtype == map_layout
    for chunk in np.array_split(np.arange(len(y)), 4):
        learner.partial_fit(X[chunk], y[chunk])
    mu, sigma = naive.arow(X, y, r=r, budget=budget)
    np.testing.assert_allclose(dense_weights(learner, X.shape[1]), mu, rtol=0, atol=1e-9)
    np.testing.assert_allclose(learner.sigma_, sigma, rtol=0, atol=1e-12)


@pytest.mark.parametrize("case", CASES)
def test_arow_and_ogd_match_reference(case):
    X, y = stream(**case)
    arow = AROW(n_features=X.shape[1], r=0.5).partial_fit(X, y)
    mu, sigma = naive.arow(X, y, r=0.5)
    np.testing.assert_allclose(dense_weights(arow, X.shape[1]), mu, rtol=0, atol=1e-9)
    np.testing.assert_allclose(arow.sigma_, sigma, rtol=0, atol=1e-12)
    ogd = OGD(n_features=X.shape[1], eta=0.7, power_t=0.5)
    for chunk in np.array_split(np.arange(len(y)), 5):
        ogd.partial_fit(X[chunk], y[chunk])
    np.testing.assert_allclose(ogd._weights, naive.ogd(X, y, 0.7, 0.5), rtol=0, atol=1e-9)


@pytest.mark.parametrize("r", [0.1, 10.0])
def test_sofs_means_outside_the_kept_set_are_exactly_positive_zero(r):
    """The branch-free mean update adds step * 0.0 (possibly -0.0) to features not kept:
    their stored means must stay +0.0, and only kept features may hold a non-zero mean."""
    X, y = stream(11, n=600, d=60, density=0.3)
    learner = SOFS(n_features=X.shape[1], budget=7, r=r).partial_fit(X, y)
    mean = learner._coefficients[:, 0]
    outside = np.setdiff1d(np.arange(X.shape[1]), learner.selected_features())
    assert learner.n_updates_ > 0 and len(outside) > 0
    assert np.all(mean[outside] == 0.0) and not np.any(np.signbit(mean[outside]))
    assert np.count_nonzero(mean) <= 7


def test_sofs_budget_at_least_touched_equals_arow():
    """With B >= d nothing is truncated: SOFS is AROW."""
    X, y = stream(5)
    sofs = SOFS(n_features=X.shape[1], budget=X.shape[1]).partial_fit(X, y)
    arow = AROW(n_features=X.shape[1]).partial_fit(X, y)
    np.testing.assert_array_equal(dense_weights(sofs, X.shape[1]), dense_weights(arow, X.shape[1]))


@pytest.mark.parametrize("make", [
    lambda d: SOFS(n_features=d, budget=5),
    lambda d: FOFS(n_features=d, budget=5, eta=0.5, lam=0.1),
    lambda d: PET(n_features=d, budget=5),
    lambda d: PET(n_features=d, budget=5, update_on="hinge"),
    lambda d: OGD(n_features=d),
    lambda d: AROW(n_features=d),
], ids=["sofs", "fofs", "pet", "pet-hinge", "ogd", "arow"])
def test_progressive_scores_are_pre_update_scores(make):
    """fit's scores are decision_function's before each update, bit for bit (both kernels
    sum in the same order), over rows of odd and even length."""
    X, y = stream(6, n=50)
    learner = make(X.shape[1])
    scores = learner.progressive_fit(X, y)
    replay = make(X.shape[1])
    for i in range(len(y)):
        assert replay.decision_function(X[i:i + 1])[0] == scores[i]
        replay.partial_fit(X[i:i + 1], y[i:i + 1])
