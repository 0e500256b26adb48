"""Loading a damaged state: ``from_state_dict`` raises ValueError or returns a learner that
runs. Property test over all five learners: take a trained learner's ``state_dict()``,
damage it (random values of random arrays set to huge, negative, NaN, out-of-range ones;
entries copied or swapped; arrays shrunk, grown or cast; members dropped or added; scalars
and params of the wrong type or value), then either ValueError or a learner whose
partial_fit and decision_function give finite scores and whose state still loads. Never a
crash, never another exception. ``test_fuzz_under_numba_boundscheck`` reruns this file in a
subprocess with ``NUMBA_BOUNDSCHECK=1``: an index out of range in any kernel then raises
IndexError instead of reading or writing out of bounds unnoticed.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from algorithms.online import LEARNERS, PET, _featuremap, learner_from_state
from algorithms.serialization import dumps_state, loads_state

D, BUDGET = 50, 8
NAMES = sorted(LEARNERS)
EXAMPLES = int(os.environ.get("FEATUREBUDGET_FUZZ_EXAMPLES", "300"))

INTS = [-2**63, -2**31, -10**8, -2, -1, 0, 1, 2, 3, 7, 8, 9, 16, 31, 32, 48, 49, 50, 51,
        2**16 - 1, 2**31 - 1, 2**31, 10**8, 2**62, 2**63 - 1]
FLOATS = [np.nan, np.inf, -np.inf, 1e300, -1e300, 1e8, -1e8, -1.0, -0.0, 0.0, 5e-324, 1e-300,
          1e-60, 0.5, 1.0, 1.5, 2.0, 7.0, 8.0, 10.0]
SCALARS = ["5", 5.0, None, [5], True, False, -1, 10**30, 2**63, np.int64(3), 0, 1, 10**6,
           np.nan, {"a": 1}, "pet", "sofs", b"x"]
PARAMS = [None, "1", "hinge", "mistake", -1, 0, 0.5, 1.0, 2, 3.0, np.nan, np.inf, True, 7,
          9, 49, 51, 10**30, [1], np.float64(0.25), np.int64(8)]
DTYPES = [np.int64, np.int32, np.uint64, np.uint16, np.float64, np.float32, np.bool_, np.int8,
          np.complex128]


def data(seed: int, n: int, width: int = D):
    """Rows of about 10 non-zeros in [-1, 1], 30% of them exactly 1 (ties in |w|)."""
    rng = np.random.default_rng(seed)
    values = np.where(rng.random((n, width)) < 0.3, 1.0, rng.uniform(-1, 1, (n, width)))
    X = (rng.random((n, width)) < 0.2) * values
    X[:, :3] *= rng.random((n, min(width, 3))) < 0.9   # recurring features: less churn
    return X, np.where(rng.random(n) < 0.5, -1, 1)


@functools.cache
def trained_state(name: str, seed: int) -> dict:
    """A learner's state after 0 to 60 examples: empty, partly filled and full top sets,
    logged touches, heaps to rebuild (which occur depends on the seed)."""
    cls = LEARNERS[name]
    params = {"pet": {"update_on": ("mistake", "hinge")[seed % 2], "eta": 0.5},
              "fofs": {"lam": (0.01, 4.0)[seed % 2]}}.get(name, {})
    learner = cls(n_features=D, budget=BUDGET, **params)
    n = (0, 1, 3, 12, 60, 60, 60, 60)[seed % 8]
    X, y = data(seed, n)
    for start in range(0, n, 7):
        learner.partial_fit(X[start:start + 7], y[start:start + 7])
    return learner.state_dict()


def _set(array: np.ndarray, position, value) -> None:
    # a value that does not fit the dtype is skipped
    with np.errstate(all="ignore"), contextlib.suppress(OverflowError, ValueError, TypeError):
        array[position] = value


@st.composite
def damaged(draw, name: str):
    """(state, list of the mutations applied)."""
    state = copy.deepcopy(trained_state(name, draw(st.integers(0, 15))))
    applied = []
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3]))):
        arrays = sorted(k for k, v in state.items() if isinstance(v, np.ndarray))
        kind = draw(st.sampled_from(["value"] * 6 + ["copy", "copy", "swap", "swap", "resize",
                                     "dtype", "drop", "add", "scalar", "param", "param"]))
        if kind in ("value", "copy", "swap", "resize", "dtype") and not arrays:
            kind = "add"
        if kind in ("value", "copy", "swap"):
            key = draw(st.sampled_from(arrays))
            array = state[key] = np.array(state[key], copy=True)
            if array.size == 0:
                continue
            flat = array.reshape(-1)   # a view: writing it writes the array
            at = draw(st.integers(0, array.size - 1))
            if kind == "value":
                pool = FLOATS if array.dtype.kind == "f" else INTS
                value = draw(st.sampled_from(pool) | (
                    st.floats(-3, 3) if array.dtype.kind == "f" else st.integers(-3, 60)))
                _set(flat, at, value)
            else:
                other = draw(st.integers(0, array.size - 1))
                if kind == "copy":
                    flat[at] = flat[other]
                else:
                    flat[at], flat[other] = flat[other], flat[at]
            applied.append((kind, key, at))
        elif kind == "resize":
            key = draw(st.sampled_from(arrays))
            array = state[key]
            axis = draw(st.integers(0, max(array.ndim - 1, 0)))
            change = draw(st.sampled_from([-2, -1, 1, 3]))
            if array.ndim == 0:
                state[key] = array.reshape(1)
            elif change < 0:
                state[key] = np.delete(array, np.s_[:-change], axis=axis) if array.shape[
                    axis] else array
            else:
                pad = [(0, 0)] * array.ndim
                pad[axis] = (0, change)
                state[key] = np.pad(array, pad, mode="edge" if array.size else "constant")
            applied.append((kind, key, axis, change))
        elif kind == "dtype":
            key = draw(st.sampled_from(arrays))
            dtype = draw(st.sampled_from(DTYPES))
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
                state[key] = state[key].astype(dtype)
            applied.append((kind, key, dtype.__name__))
        elif kind == "drop":
            key = draw(st.sampled_from(sorted(state, key=repr)))
            del state[key]
            applied.append((kind, key))
        elif kind == "add":
            key = draw(st.sampled_from(["extra", "map_entries", "weights", "norm_state",
                                        "coefficients", "svc_log_id"]))
            if key in state:
                continue
            state[key] = draw(st.sampled_from([np.zeros(3), 0, "x", None]))
            applied.append((kind, key))
        elif kind == "scalar":
            key = draw(st.sampled_from(["n_examples", "n_updates", "kind", "format_version",
                                        "algorithm", "params"]))
            state[key] = draw(st.sampled_from(SCALARS))
            applied.append((kind, key, state[key]))
        else:
            if not isinstance(state.get("params"), dict):
                continue
            params = state["params"] = dict(state["params"])
            key = draw(st.sampled_from(sorted(params, key=repr) + ["unknown", 3]))
            if draw(st.booleans()) and key in params:
                del params[key]
                applied.append(("drop param", key))
            else:
                params[key] = draw(st.sampled_from(PARAMS))
                applied.append(("param", key, params[key]))
    return state, applied


def check_loads_or_refuses(name: str, state: dict) -> None:
    try:
        learner = learner_from_state(state)
    except ValueError as exc:
        event(f"refused: {str(exc)[:60]}")
        return
    event("accepted")
    width = min(learner.n_features, D)
    X, y = data(7, 6, width)
    progressive = learner.progressive_fit(X, y)
    scores = learner.decision_function(X)
    assert np.isfinite(progressive).all() and np.isfinite(scores).all()
    assert learner.n_updates_ <= learner.n_examples_
    if learner.selects:
        assert len(learner.selected_features()) <= learner.budget
    # an accepted state is as good as a trained one: what it becomes still loads, but for
    # AROW's negative variances (the kernel's own rounding with r << x' Sigma x, accepted
    # as such) whose magnitude an update multiplies by up to 2, past the bound of 1
    negative_sigma = name == "arow" and np.any(np.asarray(state["coefficients_value"])[:, 1] < 0)
    try:
        learner_from_state(loads_state(dumps_state(learner.state_dict())))
    except ValueError as exc:
        assert negative_sigma and "variance" in str(exc), exc


@contextlib.contextmanager
def map_layout(layout: str):
    """Load selectors with the direct feature table (d = 50) or the cuckoo hash map, whose
    kernels index with the hash seed and shift of ``meta`` (the state is the same)."""
    saved = _featuremap.DIRECT_MAX_FEATURES
    _featuremap.DIRECT_MAX_FEATURES = 0 if layout == "cuckoo" else saved
    try:
        yield
    finally:
        _featuremap.DIRECT_MAX_FEATURES = saved


@pytest.mark.parametrize("name, layout", [(name, "direct") for name in NAMES] + [
    (name, "cuckoo") for name in NAMES if LEARNERS[name].selects])
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_damaged_state_is_refused_or_runs(name, layout, data):
    state, applied = data.draw(damaged(name), label="state, mutations")
    with map_layout(layout):
        check_loads_or_refuses(name, state)


@pytest.mark.parametrize("name", NAMES)
def test_trained_states_load(name):
    """The damage starts from states that load (all five learners, every seed)."""
    for seed in range(16):
        learner_from_state(trained_state(name, seed))


def test_out_of_range_slot_is_refused():
    """The reported crash: PUT /snapshot with a PET slot holding feature 10^8 reached the
    kernels (SIGSEGV in the server)."""
    learner = PET(n_features=D, budget=BUDGET).partial_fit(*data(0, 40))
    state = learner.state_dict()
    state["slot_ints"][0, 0] = 10**8
    with pytest.raises(ValueError, match="slot_ints"):
        PET.from_state_dict(state)
    with pytest.raises(ValueError, match="slot_ints"):
        learner_from_state(loads_state(dumps_state(state)))


@pytest.mark.parametrize("layout", ["direct", "cuckoo"])
def test_feature_in_three_slots_is_refused(layout):
    """Rebuilding the cuckoo map from slots holding one feature three times never ended (two
    buckets per key, whatever the seed): the load hung. Refused before the rebuild now."""
    state = PET(n_features=D, budget=BUDGET).partial_fit(*data(0, 40)).state_dict()
    state["slot_ints"][0, :3] = state["slot_ints"][0, 0]
    with map_layout(layout), pytest.raises(ValueError, match="two slots"):
        PET.from_state_dict(state)


@pytest.mark.parametrize("state", [None, [1, 2], "pet", {"algorithm": ["pet"]},
                                   {"algorithm": None}, {"kind": ["pet"]},
                                   {"kind": "pet", "format_version": 2},
                                   {"kind": "pet", "format_version": True},
                                   {"kind": "pet", "format_version": 0},
                                   {"kind": "gbfs", "format_version": 1}])
def test_not_a_state_is_refused(state):
    with pytest.raises(ValueError):
        learner_from_state(state)


@pytest.mark.skipif(os.environ.get("NUMBA_BOUNDSCHECK") == "1",
                    reason="already running with bounds checks")
@pytest.mark.slow
def test_fuzz_under_numba_boundscheck(tmp_path):
    """This file again with numba's bounds checks compiled into every kernel (their own
    on-disk cache: the normal one keeps the kernels without them)."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=str(tmp_path / "numba"),
               FEATUREBUDGET_FUZZ_EXAMPLES=os.environ.get("FEATUREBUDGET_FUZZ_EXAMPLES",
                                                          "150"))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(Path(__file__)),
         "-k", "not boundscheck"], cwd=root, env=env, capture_output=True, text=True,
        timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
