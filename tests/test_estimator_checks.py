"""One check suite over every registered model (``algorithms.registry.model_kinds``), as
scikit-learn's ``check_estimator`` and River's ``check_estimator`` run over theirs: the state
round trip, input left as it was, the three input forms, determinism with a seed, clean
errors on bad input, and the batch models' shared protocol (``algorithms.batch``).

A model added to a registry must get a case in ``CASES`` (how to build a small one):
``test_every_registered_model_has_a_case`` fails until it does."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from algorithms.registry import (
    model_from_bytes,
    model_from_state,
    model_kinds,
    model_to_bytes,
    state_kinds,
)
from algorithms.serialization import dumps_state, loads_state
from algorithms.sparse import CSRBatch, as_csr_batch

D = 6
GROUPS = [[0, 1], [2, 3], [4, 5]]


def data(n: int = 48, seed: int = 0):
    """(X dense with zeros, regression target, labels in {-1, +1})."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D))
    X[rng.random((n, D)) < 0.3] = 0.0
    target = X @ np.array([1.5, 0.0, -2.0, 0.5, 0.0, 1.0]) + 0.1 * rng.normal(size=n)
    labels = np.where(target >= 0, 1, -1)
    return X, target, labels


def _online(kind, **params):
    from algorithms.online import LEARNERS

    def make():
        cls = LEARNERS[kind]
        return cls(n_features=D, budget=3, **params) if cls.selects else cls(n_features=D,
                                                                               **params)
    return make


def _anytime():
    from algorithms.anytime import AnytimeLinearModel

    return AnytimeLinearModel(groups=GROUPS, costs=[1.0, 2.0, 0.5], method="cs-g-fr",
                              alpha=1e-3)


def _gbfs():
    from algorithms.gbfs import GBFS

    return GBFS(n_estimators=6, max_depth=2, feature_penalty=0.2, subsample=0.7,
                random_state=3, feature_groups=GROUPS, group_costs=[1.0, 2.0, 0.5])


def _nvsd():
    from algorithms.nvsd import NVSD

    return NVSD(regularizer="gl", groups=GROUPS, tau=0.05, nu=1e-2, max_iter=200)


def _relaxed():
    from algorithms.nvsd import RelaxedNVSD

    return RelaxedNVSD(nus=(1e-2,), n_taus=3, alphas=(1e-3, 1e-1), random_state=5,
                       regularizer="gl", groups=GROUPS, max_iter=150)


def _per_set():
    from algorithms.per_set import PerSetChoice

    return PerSetChoice(groups=GROUPS, costs=[1.0, 2.0, 0.5], method="cs-g-fr",
                        anytime_params={"alpha": 1e-3},
                        gbfs_params={"n_estimators": 6, "max_depth": 2, "subsample": 0.7,
                                     "random_state": 3}, random_state=1,
                        specialist_sets=[[0, 1], [2]])


# kind -> (a new unfitted model, which target it learns)
CASES = {
    "pet": (_online("pet", update_on="hinge"), "labels"),
    "fofs": (_online("fofs"), "labels"),
    "sofs": (_online("sofs"), "labels"),
    "ogd": (_online("ogd"), "labels"),
    "arow": (_online("arow"), "labels"),
    "anytime-linear-model": (_anytime, "target"),
    "gbfs": (_gbfs, "labels"),
    "nvsd": (_nvsd, "target"),
    "relaxed-nvsd": (_relaxed, "target"),
    "per-set-choice": (_per_set, "target"),
}
ONLINE = ("pet", "fofs", "sofs", "ogd", "arow")
BATCH = sorted(set(CASES) - set(ONLINE))


@pytest.fixture(params=sorted(CASES))
def kind(request):
    return request.param


def fit(model, X, y):
    return model.partial_fit(X, y) if hasattr(model, "partial_fit") else model.fit(X, y)


def outputs(model, X) -> np.ndarray:
    """What the model answers for X: scores (online) or predictions."""
    if hasattr(model, "decision_function") and hasattr(model, "partial_fit"):
        return model.decision_function(X)
    return np.asarray(model.predict(X), dtype=np.float64)


def fitted(kind: str, X=None, seed: int = 0):
    make, target = CASES[kind]
    X_, t, labels = data(seed=seed)
    return fit(make(), X_ if X is None else X, labels if target == "labels" else t)


def same_state(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key, value in a.items():
        if isinstance(value, np.ndarray):
            assert b[key].dtype == value.dtype and b[key].tobytes() == value.tobytes(), key
        else:
            assert b[key] == value, key


def test_every_registered_model_has_a_case():
    assert set(model_kinds()) == set(CASES)
    assert set(model_kinds()) < set(state_kinds())


def test_state_round_trip_is_bit_exact(kind):
    model = fitted(kind)
    cls = model_kinds()[kind]
    state = model.state_dict()
    assert isinstance(model, cls) and model.kind == kind
    # (the anytime model writes its newest format only with the classification answer, so
    # readers of format 1 load the rest; GBFS its newest only for K > 2 classes, so
    # readers of format 3 load binary and regression models)
    older = 3 if kind == "gbfs" else 1 if kind == "anytime-linear-model" and \
        model.classification_answer != "logistic" else None
    assert state["kind"] == kind and \
        state["format_version"] == (cls.format_version if older is None else older)
    X, _, _ = data(seed=1)
    for clone in (model_from_state(state), model_from_bytes(model_to_bytes(model)),
                  cls.from_bytes(model.to_bytes()), cls.from_state_dict(loads_state(
                      dumps_state(state)))):
        assert type(clone) is cls
        same_state(state, clone.state_dict())
        assert outputs(clone, X).tobytes() == outputs(model, X).tobytes()


def test_fitting_and_answering_leave_the_input_as_it_was(kind):
    X, target, labels = data()
    y = labels if CASES[kind][1] == "labels" else target
    forms = [X.copy(), sp.csr_matrix(X), as_csr_batch(X)]
    copies = [X.copy(), sp.csr_matrix(X).copy(), as_csr_batch(X.copy())]
    y_copy = y.copy()
    for form in forms:
        model = fit(CASES[kind][0](), form, y)
        outputs(model, form)
    np.testing.assert_array_equal(forms[0], copies[0])
    assert (forms[1] != copies[1]).nnz == 0
    for name in ("indptr", "indices", "values"):
        np.testing.assert_array_equal(getattr(forms[2], name), getattr(copies[2], name))
    np.testing.assert_array_equal(y, y_copy)


def test_dense_csr_and_csrbatch_input_agree(kind):
    X, target, labels = data()
    y = labels if CASES[kind][1] == "labels" else target
    forms = [X, sp.csr_matrix(X), as_csr_batch(X)]
    assert isinstance(forms[2], CSRBatch)
    answers = []
    for form in forms:
        model = fit(CASES[kind][0](), form, y)
        answers.append([outputs(model, other) for other in forms])
    reference = answers[0][0]
    for per_fit in answers:
        for answer in per_fit:
            # the anytime statistics sum a sparse batch in another order than a dense one
            np.testing.assert_allclose(answer, reference, rtol=1e-9, atol=1e-9)


def test_a_seed_makes_fitting_deterministic(kind):
    first, second = fitted(kind), fitted(kind)
    same_state(first.state_dict(), second.state_dict())
    X, _, _ = data(seed=2)
    assert outputs(first, X).tobytes() == outputs(second, X).tobytes()


def _bad_inputs(kind):
    X, target, labels = data()
    y = labels if CASES[kind][1] == "labels" else target
    nan = X.copy()
    nan[0, 0] = np.nan
    bad_nan = [] if getattr(model_kinds()[kind], "allow_nan", False) else [("NaN", nan, y)]
    return bad_nan + [("infinite", np.where(X > 1.5, np.inf, X), y),
            ("too few targets", X, y[:-1]), ("3-D", X[None], y),
            ("strings", np.full(X.shape, "a"), y), ("not a matrix", object(), y)]


def _message(exc: BaseException) -> str:
    assert isinstance(exc, ValueError | TypeError), type(exc)
    text = str(exc)
    assert len(text) > 8, text
    return text


def test_bad_input_to_fit_is_a_clean_error(kind):
    for what, X, y in _bad_inputs(kind):
        try:
            fit(CASES[kind][0](), X, y)
        except (ValueError, TypeError) as exc:
            _message(exc)
        else:
            pytest.fail(f"{kind} fitted on {what} input")


def test_bad_input_to_predict_is_a_clean_error(kind):
    model = fitted(kind)
    X, _, _ = data()
    wide = np.hstack([X, X[:, :1]])
    nan = X.copy()
    nan[:, 0] = np.nan
    if getattr(model_kinds()[kind], "allow_nan", False):  # a missing value: answered, finite
        assert np.all(np.isfinite(outputs(model, nan)))
    bad_nan = [] if getattr(model_kinds()[kind], "allow_nan", False) else [("NaN", nan)]
    for what, bad in [("a column too many", wide), *bad_nan,
                      ("strings", np.full(X.shape, "a")), ("not a matrix", object())]:
        try:
            outputs(model, bad)
        except (ValueError, TypeError) as exc:
            _message(exc)
        else:
            pytest.fail(f"{kind} answered {what} input")


@pytest.mark.parametrize("state", [None, [], {}, {"kind": "gbfs"},
                                   {"kind": "nope", "format_version": 1},
                                   {"format_version": 1}])
def test_a_foreign_state_is_a_clean_error(kind, state):
    cls = model_kinds()[kind]
    for load in (cls.from_state_dict, model_from_state):
        with pytest.raises(ValueError) as caught:
            load(state)
        _message(caught.value)


def test_a_newer_format_version_is_refused(kind):
    state = fitted(kind).state_dict()
    state["format_version"] = model_kinds()[kind].format_version + 1
    with pytest.raises(ValueError, match="format_version"):
        model_from_state(state)


def test_get_params_builds_an_equal_unfitted_model(kind):
    model = CASES[kind][0]()
    params = model.get_params()
    clone = type(model)(**params)
    assert clone.get_params() == params
    assert repr(clone).startswith(type(model).__name__ + "(")


def test_selected_features_are_sorted_feature_indices(kind):
    selected = fitted(kind).selected_features()
    assert selected.dtype.kind in "iu" and selected.ndim == 1
    assert selected.tolist() == sorted(set(selected.tolist()))
    assert all(0 <= f < D for f in selected.tolist())


@pytest.mark.parametrize("kind", BATCH)
def test_batch_models_take_what_was_computed_as_computed_groups(kind):
    model = fitted(kind)
    X, _, _ = data(seed=4)
    every = range(len(GROUPS))
    # (the anytime model solves a set afresh, its prefix path came from one factorization)
    np.testing.assert_allclose(model.predict(X, computed_groups=every), model.predict(X),
                               rtol=1e-10, atol=1e-12)
    assert model.next_group(every) is None
    first = model.next_group(())
    if first is not None:
        assert first in every
        assert model.next_group([first]) != first
    # features outside the computed groups do not matter
    only = [g for g in every if g != 1]
    garbage = X.copy()
    garbage[:, GROUPS[1]] = 1e3
    np.testing.assert_allclose(model.predict(garbage, computed_groups=only),
                               model.predict(X, computed_groups=only), rtol=1e-12)
    with pytest.raises((ValueError, TypeError)):
        model.predict(X, computed_groups=["a"])


@pytest.mark.parametrize("kind", BATCH)
def test_batch_models_store_in_init_and_check_in_fit(kind):
    model = CASES[kind][0]()
    name = {"anytime-linear-model": "alpha", "gbfs": "learning_rate", "nvsd": "tau",
            "relaxed-nvsd": "ratio", "per-set-choice": "max_validation_rows"}[kind]
    broken = type(model)(**{**model.get_params(), name: -1.0})   # stored, not checked
    assert getattr(broken, name) == -1.0
    with pytest.raises(ValueError, match=name):
        broken.check_params(D)
    X, target, labels = data()
    with pytest.raises(ValueError, match=name):
        fit(broken, X, labels if CASES[kind][1] == "labels" else target)


@pytest.mark.parametrize("kind", ONLINE)
def test_online_learners_check_and_allocate_in_the_constructor(kind):
    """The exception to the batch convention (algorithms/batch.py): a learner's state is
    the model, so one that could not run is never built."""
    from algorithms.online import LEARNERS

    cls = LEARNERS[kind]
    name = "r" if kind in ("sofs", "arow") else "eta"
    with pytest.raises(ValueError, match=name):
        cls(n_features=D, budget=3, **{name: -1.0})
    learner = CASES[kind][0]()
    allocated = sum(v.nbytes for v in vars(learner).values() if isinstance(v, np.ndarray))
    assert 0 < allocated <= cls.memory_bytes(n_features=D, budget=learner.budget)
