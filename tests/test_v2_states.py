"""Batch artifacts of format 2 and fold snapshots without a format version, written by the
code before the family adapters (``tests/states/v2/make_fixtures.py``), load bit for bit
(the model's state, the fold's members) and answer as they did then: every answer, next
group, budget set and sequence row the same, numbers to 1e-9 relative (a computed set's
solve, which every family's answers and figures go through, and its validation explained
variance have been computed in fewer operations since, by numba kernels instead of LAPACK
for small sets, which may change the last bits; a classifier's calibrated figures come from
an iterative fit stopped at its tolerance, which turns those into about 5e-10)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from algorithms.serialization import dumps_state, loads_state
from service.batch import artifact as artifacts
from service.batch.spec import BatchLayout, split_params
from service.batch.worker.fold_state import BatchFoldState
from service.batch.worker.fold_worker import load_fold_blob
from service.schemas import ModelSpec

FOLDER = Path(__file__).parent / "states" / "v2"
EXPECTED = json.loads((FOLDER / "expected.json").read_text())
ARTIFACTS = sorted(name for name in EXPECTED if name.startswith("artifact-"))
FOLDS = sorted(name for name in EXPECTED if name.startswith("fold-"))


def blob(name: str) -> bytes:
    return (FOLDER / f"{name}.state").read_bytes()


def _spec(name: str):
    spec = ModelSpec(**EXPECTED[name]["spec"])
    return spec, BatchLayout(spec), split_params(spec)


def _json(value):
    return json.loads(json.dumps(value))


ADDED = {"splits", "splits_on_groups"}  # sequence-row fields added since (GBFS split counts)
RTOL = 1e-9  # (module docstring: a calibrated figure moves up to ~5e-10 with its scores' last bits)


def _same(got, want, where, exact: bool) -> None:
    """Equal answers; numbers bit for bit when ``exact``, else to ``RTOL`` relative."""
    if isinstance(want, float) and isinstance(got, float) and not exact:
        assert got == pytest.approx(want, rel=RTOL, abs=RTOL), where
    elif isinstance(want, dict) and isinstance(got, dict):
        assert want.keys() <= got.keys() and got.keys() - want.keys() <= ADDED, where
        for key in want:
            _same(got[key], want[key], (*where, key), exact)
    elif isinstance(want, list) and isinstance(got, list):
        assert len(got) == len(want), where
        for a, b in zip(got, want, strict=True):
            _same(a, b, where, exact)
    else:
        assert got == want, where


def test_every_fixture_is_checked():
    assert {path.stem for path in FOLDER.glob("*.state")} == set(EXPECTED)
    assert len(ARTIFACTS) == len(FOLDS) == 7


@pytest.mark.parametrize("name", ARTIFACTS)
def test_a_format_2_artifact_answers_bit_for_bit(name):
    expected = EXPECTED[name]
    spec, layout, _ = _spec(name)
    assert loads_state(blob(name))["format_version"] == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        served = artifacts.unpack(blob(name), spec.family, layout)
    stored = loads_state(loads_state(blob(name))["model"].tobytes())
    reloaded = loads_state(served.model.to_bytes())
    assert stored.keys() == reloaded.keys()
    for key, value in stored.items():
        if isinstance(value, np.ndarray):
            assert reloaded[key].dtype == value.dtype, key
            assert np.array_equal(reloaded[key], value), key
        else:
            assert reloaded[key] == value, key
    exact = False  # (module docstring)
    probe = sp.csr_matrix(np.array(expected["probe"]))
    for key, answer in expected["answers"].items():
        S, budget = json.loads(key)
        _same(_json(served.answer(probe, S, budget)), answer, (name, S, budget), exact)
    for budget, groups in expected["budget_sets"].items():
        assert served.budget_set(float(budget)) == groups, (name, budget)
    _same(_json(served.sequence()), expected["sequence"], (name,), exact)


@pytest.mark.parametrize("name", ARTIFACTS)
def test_a_version_warmed_before_it_is_served_answers_the_same(name):
    """Artifact.warm (answers made before a version is served) changes no answer; for the
    statistics families it makes the factor every later set extends."""
    expected = EXPECTED[name]
    spec, layout, _ = _spec(name)
    served = artifacts.unpack(blob(name), spec.family, layout)
    solver = getattr(served.model, "_subsets", None)
    if solver is not None:
        assert solver()._prefix is None
    assert served.warm() is served
    if solver is not None:
        assert solver()._prefix is not None
    probe = sp.csr_matrix(np.array(expected["probe"]))
    for key, answer in expected["answers"].items():
        S, budget = json.loads(key)
        _same(_json(served.answer(probe, S, budget)), answer, (name, S, budget), False)


@pytest.mark.parametrize("name", FOLDS)
def test_an_unversioned_fold_snapshot_loads_bit_for_bit(name):
    expected = EXPECTED[name]
    spec, layout, params = _spec(name)
    state = BatchFoldState(spec.family, layout, params)
    load_fold_blob(state, blob(name))
    assert (state.examples, state.applied_id) == (expected["examples"], expected["applied_id"])
    assert state.train_examples == expected["train_examples"]
    assert state.validation_examples == expected["validation_examples"]
    held = state.held_out_copy()
    assert (None if held is None else len(held[1])) == expected["held_out_rows"]
    stored = loads_state(blob(name))
    written = state.state_dict()
    for key, value in stored.items():
        if key in ("kind", "format_version", "svc_model"):
            continue
        if isinstance(value, np.ndarray):
            assert written[key].dtype == value.dtype and np.array_equal(written[key], value), key
        else:
            assert written[key] == value, key


@pytest.mark.parametrize("member, value", [
    ("version", float("inf")), ("version", -1), ("version", "x"), ("version", 2**60),
    ("created_at", float("nan")), ("examples_used", 2**64), ("trained_through", 7)])
def test_an_artifact_with_out_of_range_metadata_is_refused(member, value):
    """What a crafted version's metadata may not hold: it used to be published and then
    answer 500 (an infinite version number, ...)."""
    name = ARTIFACTS[0]
    spec, layout, _ = _spec(name)
    state = loads_state(blob(name))
    state["meta"][member] = value
    with pytest.raises(ValueError, match=f"meta.{member}"):
        artifacts.unpack(dumps_state(state), spec.family, layout)
