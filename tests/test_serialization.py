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


def test_one_state_is_always_the_same_bytes(monkeypatch):
    state = {"a": np.arange(3), "name": "sofs"}
    first = dumps_state(state)
    later = zipfile.time.time() + 86_400 * 400  # a year and more later
    monkeypatch.setattr(zipfile.time, "time", lambda: later)
    assert dumps_state(state) == first
    with zipfile.ZipFile(io.BytesIO(first)) as archive:
        assert {info.date_time for info in archive.infolist()} == {(1980, 1, 1, 0, 0, 0)}


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


# ---------------------------------------------------------------- the one envelope
def test_every_state_kind_writes_the_envelope_and_loads_through_one_registry():
    from algorithms.registry import model_kinds, state_kinds

    kinds = state_kinds()
    assert set(model_kinds()) < set(kinds)
    for kind, cls in kinds.items():
        assert cls.kind == kind and isinstance(cls.format_version, int)


def test_envelope_and_open_envelope():
    from algorithms.states import envelope, open_envelope, state_kind

    state = envelope("gbfs", 1, {"loss": "squared"})
    assert state == {"kind": "gbfs", "format_version": 1, "loss": "squared"}
    assert open_envelope(state, "gbfs", (0, 1)) == (1, {"loss": "squared"})
    with pytest.raises(ValueError, match="envelope members"):
        envelope("gbfs", 1, {"kind": "x"})
    # the discriminators of the states written before the envelope: version 0
    for old, kind in [({"algorithm": "sofs"}, "sofs"), ({"algorithm": "GBFS"}, "gbfs"),
                      ({"class": "NVSD"}, "nvsd"), ({"class": "RelaxedNVSD"}, "relaxed-nvsd"),
                      ({"class": "SubsetKernelRidge"}, "subset-kernel-ridge"),
                      ({"kind": "anytime-linear-model"}, "anytime-linear-model")]:
        assert state_kind({**old, "x": 1}) == (kind, 0)
        assert open_envelope({**old, "x": 1}, kind, (0, 1)) == (0, {"x": 1})
        with pytest.raises(ValueError, match="format_version"):
            open_envelope(old, kind, (1,))


@pytest.mark.parametrize("state", [
    None, 3, "gbfs", [], {}, {"kind": "gbfs"}, {"kind": 3, "format_version": 1},
    {"kind": "gbfs", "format_version": "1"}, {"kind": "gbfs", "format_version": True},
    {"kind": "gbfs", "format_version": 0}, {"kind": "gbfs", "format_version": 2},
    {"algorithm": "gbfs"}, {"class": ["NVSD"]}, {"kind": "nope", "format_version": 1}])
def test_a_state_that_is_not_one_is_refused_with_a_value_error(state):
    from algorithms.registry import model_from_state

    with pytest.raises(ValueError):
        model_from_state(state)


@pytest.mark.parametrize("data", [b"", b"not a zip", pickle.dumps({"a": 1}),
                                  dumps_state({"kind": "pet"})])
def test_model_from_bytes_refuses_garbage(data):
    from algorithms.registry import model_from_bytes

    with pytest.raises(ValueError):
        model_from_bytes(data)


def test_members_that_overlap_are_refused():
    """A member whose stored data runs over the next member (the overlapping-members zip
    bomb: each member read in full, a few MB of body read as GBs) is refused before
    anything is read."""
    import struct

    blob = bytearray(dumps_state({"a": np.arange(1000, dtype=np.float64),
                                  "b": np.arange(1000, dtype=np.float64)}))
    infos = zipfile.ZipFile(io.BytesIO(bytes(blob))).infolist()
    first, second = (i for i in infos if i.filename in ("a.npy", "b.npy"))
    data_start = first.header_offset + 30 + len(first.filename) + len(first.extra)
    spans = second.header_offset + 30 + len(second.filename) + second.compress_size \
        - data_start  # a's data now covers b's header and data too
    struct.pack_into("<II", blob, first.header_offset + 18, spans, spans)  # local header
    directory = bytes(blob).rindex(b"PK\x01\x02" , 0, bytes(blob).rindex(b"PK\x05\x06"))
    while True:  # a's central directory entry
        name_length = struct.unpack_from("<H", blob, directory + 28)[0]
        if bytes(blob[directory + 46:directory + 46 + name_length]) == b"a.npy":
            break
        directory = bytes(blob).rindex(b"PK\x01\x02", 0, directory)
    struct.pack_into("<II", blob, directory + 20, spans, spans)
    with pytest.raises(StateFormatError, match="overlaps"):
        loads_state(bytes(blob))
