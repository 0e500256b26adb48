"""One check suite run over every registered online learner (LEARNERS)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from algorithms.datasets.online_synthetic import make_task, stream
from algorithms.online import LEARNERS, learner_from_state
from algorithms.serialization import dumps_state, loads_state
from algorithms.sparse import as_csr_batch

D = 60


def make(name, **params):
    cls = LEARNERS[name]
    return cls(n_features=D, budget=8, **params) if cls.selects else cls(n_features=D, **params)


def data(seed=0, n=400):
    """An X1-like stream (Wu, Hoi et al.): 5 informative features in every row, 10 noise ones."""
    task = make_task(n_features=D, n_informative=5, n_noise=10, seed=seed)
    batch, y = next(stream(task, n, chunk_size=n, seed=seed))
    return batch.to_scipy(), y.astype(int)


@pytest.fixture(params=sorted(LEARNERS))
def name(request):
    return request.param


def test_learns_a_linear_concept(name):
    X, y = data()
    learner = make(name)
    for _ in range(3):
        learner.partial_fit(X, y)
    assert (learner.predict(X) == y).mean() > 0.7
    assert learner.n_examples_ == 3 * X.shape[0]


def test_state_round_trip_is_bit_exact_and_resumes_identically(name):
    X, y = data()
    learner = make(name).partial_fit(X[:200], y[:200])
    restored = learner_from_state(loads_state(dumps_state(learner.state_dict())))
    before, after = learner.state_dict(), restored.state_dict()
    assert before.keys() == after.keys()
    for key, value in before.items():
        if isinstance(value, np.ndarray):
            assert value.dtype == after[key].dtype and value.tobytes() == after[key].tobytes()
        else:
            assert value == after[key]
    learner.partial_fit(X[200:], y[200:])
    restored.partial_fit(X[200:], y[200:])
    for a, b in zip(learner.weights(), restored.weights(), strict=True):
        assert a.tobytes() == b.tobytes()


def test_input_forms_agree_and_input_is_not_mutated(name):
    X, y = data(1)
    copy = X.copy()
    forms = [X, X.toarray(), as_csr_batch(X)]
    results = []
    for form in forms:
        learner = make(name).partial_fit(form, y)
        results.append((learner.decision_function(form), learner.weights()[1]))
    for scores, weights in results[1:]:
        np.testing.assert_array_equal(scores, results[0][0])
        np.testing.assert_array_equal(weights, results[0][1])
    assert (X - copy).nnz == 0


def test_selectors_never_exceed_budget(name):
    X, y = data(2)
    learner = make(name)
    for chunk in range(0, X.shape[0], 37):
        learner.partial_fit(X[chunk:chunk + 37], y[chunk:chunk + 37])
        if learner.selects:
            assert len(learner.selected_features()) <= learner.budget


def test_unseen_features_and_empty_rows_score_zero(name):
    learner = make(name).partial_fit(*data(3, n=50))
    empty = sp.csr_matrix((2, D))
    np.testing.assert_array_equal(learner.decision_function(empty), [0.0, 0.0])
    assert learner.predict(empty).tolist() == [1, 1]


@pytest.mark.parametrize("bad_y, classes, message", [
    ([0, 1], [-1, 1], r"not -1 or \+1"), ([1], None, "labels for"),
    ([0, 0], None, "classes="), ([0, 1], ["a", "b"], "not one of the classes")])
def test_bad_labels_are_rejected_and_change_nothing(name, bad_y, classes, message):
    learner = make(name)
    X = np.zeros((2, D))
    X[0, 0] = 1.0
    with pytest.raises(ValueError, match=message):
        learner.partial_fit(X, bad_y, classes=classes)
    assert learner.n_examples_ == 0 and len(learner.weights()[0]) == 0
    assert not hasattr(learner, "classes_")


def test_any_two_labels_name_their_classes(name):
    X, y = data(4, n=120)
    signed = make(name).partial_fit(X, y)
    for labels in (np.where(y > 0, "spam", "ham"), (y > 0).astype(int), y > 0):
        learner = make(name).partial_fit(X, labels)   # both classes in the first batch
        assert learner.classes_.tolist() == sorted(set(labels.tolist()))
        np.testing.assert_array_equal(learner.decision_function(X),
                                      signed.decision_function(X))
        np.testing.assert_array_equal(learner.predict(X) == learner.classes_[1],
                                      signed.predict(X) == 1)
    assert signed.classes_.tolist() == [-1, 1] and signed.predict(X).dtype == np.int8
    first = make(name).partial_fit(X[:1], ["b"], classes=["a", "b"])
    assert first.classes_.tolist() == ["a", "b"]
    with pytest.raises(ValueError, match="differ"):
        first.partial_fit(X[:1], ["b"], classes=["b", "c"])


def test_bad_inputs_are_rejected(name):
    learner = make(name)
    with pytest.raises(ValueError, match="features"):
        learner.partial_fit(np.ones((1, D + 1)), [1])
    with pytest.raises(ValueError, match="NaN"):
        learner.partial_fit(np.full((1, D), np.nan), [1])
    with pytest.raises(TypeError):
        make(name, not_a_parameter=1)


def test_bad_hyperparameters_are_rejected(name):
    cls = LEARNERS[name]
    with pytest.raises(ValueError):
        cls(n_features=0, budget=3)
    if cls.selects:
        with pytest.raises(ValueError, match="budget"):
            cls(n_features=D, budget=0)
    numeric = [k for k, v in make(name).get_params().items()
               if isinstance(v, float) and k not in ("n_features", "budget")]
    for key in numeric:
        with pytest.raises(ValueError, match=key):
            make(name, **{key: -1.0})


def test_get_params_rebuilds_the_learner(name):
    learner = make(name)
    clone = type(learner)(**learner.get_params())
    assert clone.get_params() == learner.get_params()
    assert repr(learner).startswith(type(learner).__name__)


def test_unknown_algorithm_state_is_rejected():
    with pytest.raises(ValueError, match="unknown algorithm"):
        learner_from_state({"algorithm": "nope"})


def test_state_with_wrong_shapes_is_rejected():
    state = make("pet").state_dict()
    state["slot_ints"] = state["slot_ints"][:, :2]
    with pytest.raises(ValueError, match="slot_ints"):
        learner_from_state(state)


def test_memory_estimate_bounds_the_allocated_state(name):
    learner = make(name)
    allocated = sum(v.nbytes for v in vars(learner).values() if isinstance(v, np.ndarray))
    estimate = type(learner).memory_bytes(n_features=D, budget=learner.budget)
    assert allocated <= estimate <= 2 * allocated + 4096


def test_step_decay_is_pow_to_the_last_ulp():
    """OGD/PET take sqrt for power_t = 0.5 (correctly rounded; numba's pow was up to one
    ulp off it) and pow otherwise."""
    import math

    from numba import njit

    from algorithms.online.ogd import _decay

    decay = njit(lambda t, p: _decay(t, p))
    for t in np.concatenate([np.arange(1.0, 5000.0), np.geomspace(1.0, 1e12, 997)]):
        assert decay(t, 0.5) == math.sqrt(t)
        for p in (0.5, 0.25, 1.0):
            assert abs(decay(t, p) - t ** p) <= np.spacing(t ** p), (t, p)


@pytest.mark.parametrize("name", ["pet", "fofs", "sofs"])
def test_state_moves_between_feature_map_layouts(name, monkeypatch):
    """A state saved with the cuckoo map (d > 2^21) resumes bit-exactly with the direct
    table, and back: the map is not saved, it is rebuilt from the slots on load."""
    from algorithms.online import _featuremap

    X, y = data(5, n=200)
    with monkeypatch.context() as patch:
        patch.setattr(_featuremap, "DIRECT_MAX_FEATURES", 0)
        cuckoo = make(name).partial_fit(X[:100], y[:100])
        assert cuckoo._map_entries.dtype == np.int64
    direct = learner_from_state(cuckoo.state_dict())
    assert direct._map_entries.dtype == np.uint16
    for learner in (cuckoo, direct):
        learner.partial_fit(X[100:], y[100:])
    np.testing.assert_array_equal(direct.decision_function(X), cuckoo.decision_function(X))
    for key, value in cuckoo.state_dict().items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(direct.state_dict()[key], value)
