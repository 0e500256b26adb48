"""RelaxedNVSD's nested supports: one refit per support, partial-input prediction, the next
unit to compute, and the byte state (bit-exact round trip, old states, corrupted states)."""

import numpy as np
import pytest

from algorithms.datasets.nvsd_synthetic import EXPERIMENTS, RELEVANT, D, make_e1
from algorithms.nvsd import NVSD, RelaxedNVSD, SubsetKernelRidge
from algorithms.serialization import dumps_state, loads_state

GROUPS = EXPERIMENTS["E1"]["groups"]
NEW_KEYS = ("ranking_", "support_index_", "supports_flat_", "supports_sizes_",
            "support_alphas_", "support_validation_rmse_")


@pytest.fixture(scope="module")
def gl():
    """Group lasso, validation rows held out inside fit, refits on all rows."""
    X, y = make_e1(60, seed=3)
    model = RelaxedNVSD(nus=(1.0,), n_taus=4, ratio=1e-2, regularizer="gl", groups=GROUPS,
                        tol=1e-3).fit(X, y)
    return {"model": model, "X": X, "y": y, "units": [np.array(g) for g in GROUPS]}


@pytest.fixture(scope="module")
def lasso():
    """Lasso with an explicit validation set: refits on X only."""
    X, y = make_e1(60, seed=3)
    Xv, yv = make_e1(40, seed=4)
    model = RelaxedNVSD(nus=(1.0,), n_taus=4, ratio=1e-2, regularizer="l",
                        tol=1e-3).fit(X, y, validation=(Xv, yv))
    return {"model": model, "X": X, "y": y, "Xv": Xv, "yv": yv,
            "units": [np.array([a]) for a in range(D)]}


@pytest.fixture(params=["gl", "lasso"])
def fitted(request):
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="module")
def x_test():
    return make_e1(50, seed=5)[0]


def test_nested_supports_start_empty_and_add_ranked_units(fitted):
    model, units = fitted["model"], fitted["units"]
    assert model.ranking_.dtype == np.int64
    assert len(set(model.ranking_.tolist())) == model.ranking_.size
    assert len(model.supports_) == model.ranking_.size + 1
    assert model.supports_[0].size == 0
    for k, unit in enumerate(model.ranking_):
        before, after = model.supports_[k], model.supports_[k + 1]
        assert after.dtype == np.int64 and after.tolist() == sorted(after.tolist())
        assert set(before.tolist()) < set(after.tolist())
        assert sorted(set(after.tolist()) - set(before.tolist())) == units[unit].tolist()
        np.testing.assert_array_equal(model.unit_variables(int(unit)), units[unit])
    k = model.support_index_
    np.testing.assert_array_equal(model.supports_[k], model.support_)
    assert model.model_ is model.support_models_[k]
    assert model.alpha_ == model.support_alphas_[k]
    assert model.validation_rmse_ == model.support_validation_rmse_[k]
    assert len(model.support_models_) == len(model.supports_) == model.support_alphas_.size \
        == model.support_validation_rmse_.size


def test_group_lasso_chooses_the_relevant_groups(gl):
    model = gl["model"]
    assert model.selected_features().tolist() == list(RELEVANT)
    assert model.support_index_ == 2 and set(model.ranking_[:2].tolist()) == {0, 2}


def test_each_support_refit_is_kernel_ridge_on_its_columns(fitted, x_test):
    model = fitted["model"]
    for k, support in enumerate(model.supports_):
        direct = SubsetKernelRidge(kernel="polynomial", kernel_params={"degree": 3,
                                                                       "offset": 1.0},
                                   columns=support, alpha=model.support_alphas_[k])
        direct.fit(fitted["X"], fitted["y"])  # all rows: held-out or given validation
        np.testing.assert_allclose(model.support_models_[k].predict(x_test), direct.predict(x_test),
                                   rtol=1e-12, atol=1e-12)


def test_each_support_has_its_own_validation_best_alpha(lasso):
    model, X, y, Xv, yv = (lasso[k] for k in ("model", "X", "y", "Xv", "yv"))
    assert len(set(model.support_alphas_.tolist())) > 1
    for k, support in enumerate(model.supports_):
        rmse = [np.sqrt(np.mean((SubsetKernelRidge(columns=support, alpha=a).fit(X, y)
                                 .predict(Xv) - yv) ** 2)) for a in model.alphas]
        assert model.support_alphas_[k] == model.alphas[int(np.argmin(rmse))]
        assert model.support_validation_rmse_[k] == pytest.approx(min(rmse), rel=1e-12)


def whole_units(units, variables) -> list[int]:
    """The units all of whose variables are in ``variables``."""
    have = set(variables)
    return [u for u, members in enumerate(units) if set(members.tolist()) <= have]


def test_predict_with_computed_groups_uses_the_largest_nested_support(fitted, x_test):
    model, units = fitted["model"], fitted["units"]
    rank, k_star = model.ranking_, model.support_index_
    assert k_star >= 2 and rank.size >= k_star + 2
    every = range(len(units))
    np.testing.assert_array_equal(model.predict(x_test, computed_groups=every),
                                  model.predict(x_test))
    np.testing.assert_array_equal(model.predict(x_test, computed_groups=set()),
                                  np.full(len(x_test), fitted["y"].mean()))
    # units 0 and 2 of the ranking, not unit 1: only the top-1 support is inside
    computed = [int(rank[0]), int(rank[2])]
    assert model.support_for_groups(computed) == 1
    assert model.support_for(set(units[rank[0]].tolist()) | set(units[rank[2]].tolist())) == 1
    np.testing.assert_array_equal(model.predict(x_test, computed_groups=computed),
                                  model.support_models_[1].predict(x_test))
    assert not np.allclose(model.predict(x_test, computed_groups=computed),
                           model.predict(x_test))
    # the top unit less one variable (variables, support_for): the mean
    assert model.support_for(set(units[rank[0]].tolist()[1:]) | set(units[rank[1]].tolist())) == 0
    # more than the chosen support (two more units): the chosen model, not a larger support
    computed = [int(u) for u in rank[:k_star + 1]] + [int(rank[-1])]
    assert model.support_for_groups(computed) == k_star
    np.testing.assert_array_equal(model.predict(x_test, computed_groups=computed),
                                  model.predict(x_test))
    # inputs a client has not computed may be NaN
    partial = set(model.supports_[1].tolist())
    X_nan = x_test.copy()
    X_nan[:, [a for a in range(D) if a not in partial]] = np.nan
    groups = whole_units(units, partial)
    np.testing.assert_array_equal(model.predict(X_nan, computed_groups=groups),
                                  model.predict(x_test, computed_groups=groups))
    with pytest.raises(ValueError, match="computed"):
        model.support_for([D])
    with pytest.raises(ValueError, match="computed_groups"):
        model.support_for_groups([len(units)])


def test_next_group_walks_the_ranking_and_skips_computed_units(fitted):
    model, units = fitted["model"], fitted["units"]
    k_star = model.support_index_
    computed: set[int] = set()
    for step in range(k_star):
        unit = model.next_group(computed)
        assert unit == model.ranking_[step] and model.support_for_groups(computed) == step
        assert unit not in computed
        computed.add(unit)
    assert model.next_group(computed) is None and model.support_for_groups(computed) == k_star
    rng = np.random.default_rng(0)
    for _ in range(200):
        variables = set(rng.choice(D, size=rng.integers(0, D + 1), replace=False).tolist())
        if rng.random() < 0.5:  # a ranked prefix plus noise reaches deeper supports
            variables |= set(model.supports_[rng.integers(0, k_star + 1)].tolist())
        computed = set(whole_units(units, variables))
        unit = model.next_group(computed)
        k = model.support_for_groups(computed)
        assert k == model.support_for(variables)   # units and their variables agree
        if unit is None:
            assert k == k_star
            continue
        assert unit in model.ranking_[:k_star].tolist() and unit not in computed
        position = model.ranking_.tolist().index(unit)
        assert k == position
        assert all(u in computed for u in model.ranking_[:position])


def test_the_deprecated_spellings_warn_and_mean_the_same(fitted, x_test):
    model, units = fitted["model"], fitted["units"]
    variables = set(model.supports_[1].tolist()) | {0}
    groups = whole_units(units, variables)
    with pytest.warns(DeprecationWarning, match="computed"):
        old = model.predict(x_test, computed=variables)
    np.testing.assert_array_equal(old, model.predict(x_test, computed_groups=groups))
    with pytest.warns(DeprecationWarning, match="next_unit"):
        assert model.next_unit(variables) == model.next_group(groups)
    with pytest.warns(DeprecationWarning, match="mu_"):
        assert model.mu_ == model.l1_ratio_
    with pytest.warns(DeprecationWarning, match="mus"):
        assert RelaxedNVSD(mus=(0.5,)).l1_ratios == (0.5,)
    with pytest.warns(DeprecationWarning, match="mu="):
        assert RelaxedNVSD(mu=0.3).nvsd_params == {"l1_ratio": 0.3}


def _assert_same_state(a, b):
    assert a.keys() == b.keys()
    for key, value in a.items():
        if isinstance(value, np.ndarray):
            other = b[key]
            assert other.dtype == value.dtype and other.shape == value.shape, key
            assert other.tobytes() == value.tobytes(), key
        else:
            assert b[key] == value, key


def test_nvsd_bytes_round_trip_is_bit_exact():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((20, 4))
    y = np.sin(X[:, 0]) + X[:, 2] ** 2
    model = NVSD(regularizer="gl", kernel="gaussian", sigma=2.0, tau=0.05, nu=1e-3,
                 groups=[[0, 1], [2, 3]], tol=1e-5).fit(X, y)
    clone = NVSD.from_bytes(model.to_bytes())
    _assert_same_state(model.state_dict(), clone.state_dict())
    np.testing.assert_array_equal(clone.predict(X), model.predict(X))
    unfitted = NVSD.from_bytes(NVSD(tau=3.0).to_bytes())
    assert unfitted.tau == 3.0 and not hasattr(unfitted, "alpha_")


def test_relaxed_bytes_round_trip_is_bit_exact_with_all_refits(fitted, x_test):
    model = fitted["model"]
    blob = model.to_bytes()
    assert f"support.{len(model.supports_) - 1}.dual_coef_" in loads_state(blob)
    clone = RelaxedNVSD.from_bytes(blob)
    _assert_same_state(model.state_dict(), clone.state_dict())
    assert clone.model_ is clone.support_models_[clone.support_index_]
    for k in range(len(model.supports_)):
        np.testing.assert_array_equal(clone.support_models_[k].predict(x_test),
                                      model.support_models_[k].predict(x_test))
    computed = [int(model.ranking_[0])]
    np.testing.assert_array_equal(clone.predict(x_test, computed_groups=computed),
                                  model.predict(x_test, computed_groups=computed))
    np.testing.assert_array_equal(clone.predict(x_test), model.predict(x_test))
    assert clone.next_group(computed) == model.next_group(computed)


def test_state_without_nested_supports_still_loads(gl, x_test):
    model = gl["model"]
    old = {k: v for k, v in model.state_dict().items()
           if k not in NEW_KEYS and not k.startswith("support.")}
    clone = RelaxedNVSD.from_bytes(dumps_state(old))
    np.testing.assert_array_equal(clone.predict(x_test), model.predict(x_test))
    assert clone.support_.tolist() == model.support_.tolist()
    assert not hasattr(clone, "supports_")
    with pytest.raises(ValueError, match="nested supports"):
        clone.predict(x_test, computed_groups=[0])


def _set(key, index, value):
    def corrupt(state):
        state[key] = state[key].copy()
        state[key][index] = value
    return corrupt


def _shorten(key):
    def corrupt(state):
        state[key] = state[key][:-1].copy()
    return corrupt


def _shift_sizes(state):
    state["supports_sizes_"] = state["supports_sizes_"].copy()
    state["supports_sizes_"][1] += 1
    state["supports_sizes_"][2] -= 1


@pytest.mark.parametrize("corrupt,message", [
    (_set("supports_sizes_", 1, 4), "add up"),
    (_set("supports_sizes_", 0, -1), "add up"),
    (_shift_sizes, r"supports_\[1\] is not"),
    (_set("supports_flat_", -1, D), "outside"),
    (_set("ranking_", 0, 6), "ranking_"),
    (_set("ranking_", 1, 0), "ranking_"),
    (_shorten("ranking_"), "ranking_"),
    (_shorten("support_validation_rmse_"), "support_validation_rmse_"),
    (_set("support_alphas_", 1, 123.0), "refit 1"),
    (_set("support_alphas_", 1, np.inf), "non-finite"),
    (_shorten("support.1.dual_coef_"), "dual_coef_"),
    (_set("support.1.X_fit_", (0, 0), np.nan), "non-finite"),
    (_set("support.1.columns", 0, 5), "refit 1"),
    (_set("model.columns", -1, 99), "columns"),
    (lambda s: s.update(support_index_=7), "support_index_"),
    (lambda s: s.update(support_index_=1), "support_index_"),
    (lambda s: s.pop("support.3.dual_coef_"), r"support\.3\..*dual_coef_"),
    (lambda s: (s.update({"support.1.alpha": -1.0}), _set("support_alphas_", 1, -1.0)(s)),
     "alpha must be > 0"),
])
def test_corrupted_relaxed_state_raises_value_error(gl, corrupt, message):
    state = loads_state(gl["model"].to_bytes())
    RelaxedNVSD.from_bytes(dumps_state(state))  # the intact state loads
    corrupt(state)
    with pytest.raises(ValueError, match=message):
        RelaxedNVSD.from_bytes(dumps_state(state))


@pytest.mark.parametrize("corrupt,message", [
    (_shorten("alpha_"), "alpha_"),
    (_set("beta_", (0, 0), np.nan), "non-finite"),
    (lambda s: s.pop("X_train_"), "X_train_"),
    (lambda s: s.update(support_=s["support_"].astype(np.int64)), "support_"),
    (lambda s: s.update(kappa_=float("nan")), "kappa_"),
])
def test_corrupted_nvsd_state_raises_value_error(corrupt, message):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((12, 3))
    state = loads_state(NVSD(tau=0.1, tol=1e-4).fit(X, X[:, 0] ** 2).to_bytes())
    corrupt(state)
    with pytest.raises(ValueError, match=message):
        NVSD.from_bytes(dumps_state(state))
