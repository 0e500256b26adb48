"""The snapshot envelope (:mod:`service.snapshot_file`): the parts come back as they went
in, a flat snapshot of the earlier layout opens the same way, and a member of any type in
the envelope's places is refused by name or read as flat, never an unexpected error."""

from __future__ import annotations

import numpy as np
import pytest

from service.snapshot_file import SnapshotFormatError, make_snapshot, open_snapshot

MODEL = {"kind": "sofs", "format_version": 1, "weights": np.arange(3.0), "params": {"b": 2}}
SERVICE = {"log_id": "5-0", "model": {"name": "m"}, "artifact": np.arange(4, dtype=np.uint8)}


def test_the_parts_come_back_as_they_went_in():
    state = make_snapshot(MODEL, SERVICE)
    assert state["kind"] == "featurebudget-snapshot" and state["format_version"] == 1
    assert state["model.kind"] == "sofs" and state["service.log_id"] == "5-0"
    opened = open_snapshot(state)
    assert opened.model == MODEL and opened.service == SERVICE  # (the same objects)
    assert opened.field("log_id") == "service.log_id"


def test_a_flat_snapshot_opens_the_same_way():
    flat = {**MODEL, **{f"svc_{k}": v for k, v in SERVICE.items()}}
    opened = open_snapshot(flat)
    assert opened.model == MODEL and opened.service == SERVICE
    assert opened.field("log_id") == "svc_log_id"


@pytest.mark.parametrize("kind", [np.arange(3), None, 5, ["featurebudget-snapshot"], {}])
def test_a_kind_that_is_not_the_envelope_s_reads_as_flat(kind):
    opened = open_snapshot({"kind": kind, "format_version": 1, "model.kind": "sofs"})
    assert opened.prefix == "svc_" and opened.service == {}


@pytest.mark.parametrize("version", [2, 0, 1.0, True, "1", np.arange(2), None])
def test_another_format_version_is_refused_by_name(version):
    with pytest.raises(SnapshotFormatError) as refused:
        open_snapshot({"kind": "featurebudget-snapshot", "format_version": version})
    assert refused.value.field == "format_version"


def test_a_member_outside_the_envelope_is_refused_by_name():
    state = {**make_snapshot(MODEL, SERVICE), "weights": np.zeros(2)}
    with pytest.raises(SnapshotFormatError) as refused:
        open_snapshot(state)
    assert refused.value.field == "weights"
