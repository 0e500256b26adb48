from __future__ import annotations

import io
import pickle
import zipfile

import numpy as np
import pytest

from algorithms.serialization import StateFormatError, dumps_state, loads_state


def test_round_trip_is_bit_exact():
    state = {"a": np.arange(7, dtype=np.int32), "b": np.array([0.1, np.nan, -0.0]),
             "x": 0.1 + 0.2, "name": "sofs", "params": {"budget": 3, "r": 1e-300},
             "flag": True, "none": None}
    back = loads_state(dumps_state(state))
    assert back["a"].dtype == np.int32 and back["a"].tolist() == list(range(7))
    assert back["b"].tobytes() == state["b"].tobytes()
    assert back["x"] == state["x"] and back["params"] == state["params"]
    assert back["name"] == "sofs" and back["flag"] is True and back["none"] is None


def test_object_arrays_are_refused_both_ways():
    with pytest.raises(StateFormatError, match="dtype"):
        dumps_state({"bad": np.array([object()], dtype=object)})
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("__meta__.json", '{"format": "featurebudget-state", "version": 1}')
        member = io.BytesIO()
        np.save(member, np.array([{"evil": 1}], dtype=object), allow_pickle=True)
        archive.writestr("evil.npy", member.getvalue())
    with pytest.raises(StateFormatError):
        loads_state(buffer.getvalue())


@pytest.mark.parametrize("data", [b"", b"not a zip", pickle.dumps({"a": 1})])
def test_garbage_is_refused(data):
    with pytest.raises(StateFormatError):
        loads_state(data)


def test_size_limit():
    with pytest.raises(StateFormatError, match="limit"):
        loads_state(dumps_state({"a": np.zeros(1000)}), max_bytes=100)
