"""States written before the one envelope (``algorithms/states.py``) still load and answer
exactly as they did: every model family's ``to_bytes``, an online snapshot of the service,
the batch artifacts and fold snapshots it stores. The states in ``tests/states/legacy`` were
written by the code of commit 08758a9 (``make_fixtures.py`` there); ``expected.json`` holds
what each answered then."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from algorithms.registry import model_from_bytes, model_from_state
from algorithms.serialization import loads_state
from algorithms.states import state_kind

FOLDER = Path(__file__).parent / "states" / "legacy"
EXPECTED = json.loads((FOLDER / "expected.json").read_text())


def blob(name: str) -> bytes:
    return (FOLDER / f"{name}.state").read_bytes()


def load(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # loading an old state is not a deprecated call
        return model_from_bytes(blob(name))


def test_every_fixture_is_checked():
    names = {path.stem for path in FOLDER.glob("*.state")}
    assert names == set(EXPECTED)
    assert len(names) == 22


def test_old_states_have_no_envelope_and_are_read_as_version_0():
    for name in EXPECTED:
        if name.startswith(("artifact-", "fold-")):
            continue
        state = loads_state(blob(name))
        assert "format_version" not in state, name
        kind, version = state_kind(state)
        assert version == 0 and kind is not None, name


@pytest.mark.parametrize("learner", ["pet", "fofs", "sofs", "ogd", "arow"])
def test_online_learners_resume_bit_for_bit(learner):
    expected = EXPECTED[f"online-{learner}"]
    model = load(f"online-{learner}")
    assert model.kind == learner
    probe = np.array(expected["probe"])
    assert model.decision_function(probe).tolist() == expected["scores"]
    assert model.progressive_fit(probe, expected["probe_y"]).tolist() == \
        expected["resumed_scores"]
    again = model_from_state(model.state_dict())   # and it saves in today's envelope
    assert again.state_dict()["format_version"] == 1


def test_an_online_learner_over_the_cuckoo_map_resumes():
    expected = EXPECTED["online-fofs-hashed"]
    model = load("online-fofs-hashed")
    rows = np.array(expected["probe_rows"])
    probe = sp.csr_matrix((expected["probe_values"], (rows, expected["probe_cols"])),
                          shape=(rows.max() + 1, expected["n_features"]))
    assert model.decision_function(probe).tolist() == expected["scores"]


def test_a_service_snapshot_of_an_online_model_loads():
    from service.online.snapshot import parse_snapshot
    from service.schemas import ModelSpec

    expected = EXPECTED["service-online-snapshot"]
    spec = ModelSpec(**expected["spec"])
    learner, extra = parse_snapshot(blob("service-online-snapshot"), spec)
    assert learner.decision_function(np.array(expected["probe"])).tolist() == \
        expected["scores"]
    assert extra["log_id"] == "1700000000000-3"
    assert extra["progressive_examples"] == 40 and extra["progressive_correct"] == 31
    assert extra["feature_names"] == {0: "first", 3: "fourth"}


def test_the_anytime_model_answers_as_before():
    expected = EXPECTED["anytime-linear-model"]
    model = load("anytime-linear-model")
    probe = np.array(expected["probe"])
    assert model.max_cost == 30.0 and model.sequence_.tolist() == expected["sequence"]
    assert model.predict(probe).tolist() == expected["full"]
    assert model.predict(probe, max_cost=5.0).tolist() == expected["budget_5"]
    # a set's solve extends the sequence's factor now: the same answer to rounding
    np.testing.assert_allclose(model.predict(probe, computed_groups=[0, 2]),
                               expected["groups_02"], rtol=1e-12, atol=1e-12)
    assert model.next_group([0]) == expected["next_after_0"]
    assert model.next_group([], max_cost=4.0) == expected["next_budget"]


def test_sufficient_statistics_load():
    expected = EXPECTED["anytime-sufficient-statistics"]
    stats = load("anytime-sufficient-statistics")
    assert (stats.n, stats.mean_y, stats.myy) == (expected["n"], expected["mean_y"],
                                                  expected["myy"])
    assert stats.mean_x.tolist() == expected["mean_x"]


def test_gbfs_answers_as_before():
    grouped, expected = load("gbfs-grouped"), EXPECTED["gbfs-grouped"]
    probe = np.array(expected["probe"])
    assert grouped.decision_function(probe).tolist() == expected["scores"]
    # then: computed=[0, 1], the features of group 0
    assert grouped.decision_function(probe, computed_groups=[0]).tolist() == \
        expected["scores_groups_0"]
    assert grouped.next_group(set()) == expected["next_after_none"]
    assert grouped.selected_groups_.tolist() == expected["selected_groups"]
    plain, expected = load("gbfs-squared"), EXPECTED["gbfs-squared"]
    assert plain.feature_penalty == 0.1 and plain.reg_lambda == 1.0
    assert plain.predict(probe).tolist() == expected["predictions"]
    assert plain.predict(probe, computed_groups=[1]).tolist() == expected["computed_1"]
    assert plain.selected_features_.tolist() == expected["selected"]


def test_nvsd_answers_as_before():
    model, expected = load("nvsd"), EXPECTED["nvsd"]
    # (to 1e-12: the set solves run in numba kernels since, the last bits may differ)
    np.testing.assert_allclose(model.predict(np.array(expected["probe"])),
                               expected["predictions"], rtol=1e-12, atol=1e-12)
    assert model.support_.tolist() == expected["support"]
    unfitted = load("nvsd-unfitted")
    params = dict(EXPECTED["nvsd-unfitted"]["params"])
    params["l1_ratio"] = params.pop("mu")
    assert unfitted.get_params() == params


def test_relaxed_nvsd_answers_as_before():
    model, expected = load("relaxed-nvsd"), EXPECTED["relaxed-nvsd"]
    probe = np.array(expected["probe"])
    # (to 1e-9: the kernel ridge solves go through LAPACK, whose last bits vary by build and
    # machine: 1.3e-11 relative on an answer near cancellation, measured on one of them)
    np.testing.assert_allclose(model.predict(probe), expected["predictions"], rtol=1e-9,
                               atol=1e-10)
    # then: computed=[0], the variable 0 (the lasso's units are the variables)
    np.testing.assert_allclose(model.predict(probe, computed_groups=[0]),
                               expected["computed_0"], rtol=1e-9, atol=1e-10)
    assert model.next_group([]) == expected["next_unit_none"]
    assert model.support_.tolist() == expected["support"]
    assert model.l1_ratio_ == expected["mu_"]
    assert model.model_.state_dict()["kind"] == "subset-kernel-ridge"


ARTIFACTS = ["artifact-cs-g-omp-default", "artifact-gbfs-default", "artifact-nvsd-default",
             "artifact-nvsd-plain"]


def _layout(expected):
    from service.batch.spec import BatchLayout, split_params
    from service.schemas import ModelSpec

    spec = ModelSpec(**expected["spec"])
    return spec, BatchLayout(spec), split_params(spec)


def _same_answer(got, want, where) -> None:
    """Equal answers; numbers to 1e-12 relative (an anytime set's solve extends the
    sequence's factor now, which may change the last bits)."""
    if isinstance(want, float) and isinstance(got, float):
        assert got == pytest.approx(want, rel=1e-12, abs=1e-12), where
    elif isinstance(want, dict) and isinstance(got, dict):
        assert got.keys() == want.keys(), where
        for key in want:
            _same_answer(got[key], want[key], (*where, key))
    elif isinstance(want, list) and isinstance(got, list):
        assert len(got) == len(want), where
        for a, b in zip(got, want, strict=True):
            _same_answer(a, b, where)
    else:
        assert got == want, where


@pytest.mark.parametrize("name", ARTIFACTS)
def test_a_stored_batch_artifact_answers_as_before(name):
    from service.batch import artifact as artifacts

    expected = EXPECTED[name]
    spec, layout, _ = _layout(expected)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        served = artifacts.unpack(blob(name), spec.family, layout)
    probe = sp.csr_matrix(np.array(expected["probe"]))
    for key, answer in expected["answers"].items():
        S = json.loads(key)
        budget = 2.5 if S == [0] else None
        got = json.loads(json.dumps(served.answer(probe, S, budget)))
        _same_answer(got, answer, (name, S))
    assert _without_added(json.loads(json.dumps(served.sequence())),
                          expected["sequence"]) == expected["sequence"]


ADDED = {"splits", "splits_on_groups"}  # sequence-row fields added since (GBFS split counts)


def _without_added(got, want):
    """``got`` without the fields in ``ADDED`` that ``want`` (as recorded then) lacks."""
    if isinstance(got, dict) and isinstance(want, dict):
        return {k: _without_added(v, want.get(k)) for k, v in got.items()
                if k in want or k not in ADDED}
    if isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
        return [_without_added(a, b) for a, b in zip(got, want, strict=True)]
    return got


@pytest.mark.parametrize("name", [a.replace("artifact-", "fold-") for a in ARTIFACTS])
def test_a_stored_fold_snapshot_loads(name):
    from service.batch.worker.fold_state import BatchFoldState
    from service.batch.worker.fold_worker import load_fold_blob

    expected = EXPECTED[name]
    spec, layout, params = _layout(expected)
    state = BatchFoldState(spec.family, layout, params)
    load_fold_blob(state, blob(name))
    assert (state.examples, state.applied_id) == (expected["examples"], expected["applied_id"])
    assert state.train_examples == expected["train_examples"]
    assert state.validation_examples == expected["validation_examples"]
