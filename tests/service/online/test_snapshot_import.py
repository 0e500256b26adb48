"""PUT /snapshot is complete and atomic: a blob is parsed and checked whole (off the event
loop) before anything changes; another configuration, a bad service member, a compressed
or malformed archive is a 422 naming the problem, never a 5xx, and the model stays as it
was."""

from __future__ import annotations

import io
import random
import tracemalloc
import zipfile

import numpy as np
import pytest

from algorithms.serialization import dumps_state, loads_state
from tests.support.online import create, json_examples
from tests.support.snapshots import snapshot_of
from tests.support.zips import zip_with


def trained(client, x1, name="m", **extra) -> bytes:
    X, y = x1
    create(client, name, **extra)
    response = client.post(f"/v1/models/{name}/examples?wait=true",
                           json={"examples": json_examples(X, y, 0, 110)})
    assert response.status_code == 202
    return client.get(f"/v1/models/{name}/snapshot").content


def unchanged(client, before: dict, name="m") -> None:
    after = client.get(f"/v1/models/{name}").json()
    for key in ("examples_applied", "log_position", "n_selected", "budget", "updates"):
        assert after[key] == before[key], key


def edited(blob: bytes, changes: dict) -> bytes:
    state = loads_state(blob)
    state.update(changes)
    return dumps_state(state)


def flat(blob: bytes) -> bytes:
    """The same snapshot in the layout before the envelope: the learner's members with the
    service's beside them as ``svc_*``."""
    snapshot = snapshot_of(blob)
    return dumps_state({**snapshot.model, "svc_format_version": 1,
                        **{f"svc_{k}": v for k, v in snapshot.service.items()}})


SERVICE_CHANGES = [  # (member, value), each refused, naming the member
    ("progressive_examples", "x"),
    ("progressive_examples", -5),
    ("progressive_examples", 2**64),  # broke the view
    ("format_version", 7),
    ("format_version", np.arange(2)),
    ("progressive_correct", 10**6),
    ("feature_names", [[1, 2, 3]]),
    ("feature_names", [[10**9, "far"]]),
    ("feature_names", "names"),
    ("log_id", "not-an-id"),
    ("feature_names", np.arange(4)),  # arrays: a 500 until fixed
    ("log_id", np.arange(3)),
]


@pytest.mark.parametrize("layout", ["envelope", "flat"])
@pytest.mark.parametrize(("member", "value"), SERVICE_CHANGES)
def test_a_bad_member_is_refused_and_nothing_changes(client, x1, layout, member, value):
    blob = trained(client, x1)
    before = client.get("/v1/models/m").json()
    if layout == "flat":
        blob, field = flat(blob), f"svc_{member}"
    else:
        field = f"service.{member}"
    response = client.put("/v1/models/m/snapshot", content=edited(blob, {field: value}))
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["field"] == field
    unchanged(client, before)


@pytest.mark.parametrize(("change", "field"), [
    ({"model.n_examples": float("inf")}, "body"),
    ({"format_version": 2}, "format_version"),
    ({"extra": 1}, "extra"),
    ({"service.extra": 1}, "service.extra"),
])
def test_a_bad_snapshot_member_is_refused_and_nothing_changes(client, x1, change, field):
    blob = trained(client, x1)
    before = client.get("/v1/models/m").json()
    response = client.put("/v1/models/m/snapshot", content=edited(blob, change))
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["field"] == field
    unchanged(client, before)


def test_a_flat_snapshot_restores_as_the_envelope_does(client, x1):
    blob = trained(client, x1)
    before = client.get("/v1/models/m").json()
    assert client.put("/v1/models/m/snapshot", content=flat(blob)).status_code == 200
    unchanged(client, before)
    assert snapshot_of(client.get("/v1/models/m/snapshot").content).service == \
        snapshot_of(blob).service


def test_a_snapshot_of_another_configuration_is_refused(client, x1):
    blob = trained(client, x1, "big", budget=50)
    create(client, "small", budget=2)
    before = client.get("/v1/models/small").json()
    response = client.put("/v1/models/small/snapshot", content=blob)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "budget"
    unchanged(client, before, "small")
    create(client, "other_r", params={"r": 0.5})
    response = client.put("/v1/models/other_r/snapshot", content=edited(
        blob, {"model.params": {**snapshot_of(blob).model["params"], "budget": 20}}))
    assert response.status_code == 422 and response.json()["errors"][0]["field"] == "params.r"


def test_a_declared_huge_dimension_is_refused_before_allocating(client, x1):
    blob = trained(client, x1)
    params = {**snapshot_of(blob).model["params"], "n_features": 2**31 - 1}
    tracemalloc.start()   # numpy's buffers are traced too
    try:
        response = client.put("/v1/models/m/snapshot",
                              content=edited(blob, {"model.params": params}))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert response.status_code == 422 and response.json()["errors"][0]["field"] == "n_features"
    assert peak < 64 << 20  # nothing of 2^31 features was allocated (that would be 34 GB)


def test_compressed_members_and_bombs_are_refused(client, x1):
    blob = trained(client, x1)
    before = client.get("/v1/models/m").json()
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    deflated = zip_with(members, zipfile.ZIP_DEFLATED)
    bomb = zip_with({**members, "extra.npy": b"\0" * (256 << 20)}, zipfile.ZIP_DEFLATED)
    assert len(bomb) < (2 << 20)
    for body in (deflated, bomb):
        response = client.put("/v1/models/m/snapshot", content=body)
        assert response.status_code == 422, response.text[:300]
    assert "compressed" in response.json()["detail"]
    unchanged(client, before)


def test_a_declared_shape_larger_than_its_bytes_is_refused(client, x1):
    blob = trained(client, x1)
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    name = next(n for n in members if n.endswith(".npy"))
    raw = members[name]
    header_end = raw.index(b"\n") + 1
    header = raw[:header_end].decode("latin-1")
    huge = header.replace("'shape': (", "'shape': (100000000000, ", 1)
    huge = huge[:-1].rstrip() + " " * max(0, len(header) - len(huge) - 1) + "\n"
    members[name] = huge.encode("latin-1") + raw[header_end:]
    response = client.put("/v1/models/m/snapshot", content=zip_with(members))
    assert response.status_code == 422, response.text


def test_mutated_snapshots_never_answer_5xx(client, x1):
    blob = trained(client, x1)
    before = client.get("/v1/models/m").json()
    rng = random.Random(5)
    statuses = set()
    for case in range(150):
        body = bytearray(blob)
        kind = case % 3
        if kind == 0:  # flip bytes
            for _ in range(rng.randint(1, 8)):
                body[rng.randrange(len(body))] ^= 1 << rng.randrange(8)
        elif kind == 1:  # cut
            body = body[:rng.randrange(len(body))]
        else:  # splice a chunk elsewhere
            a, b = sorted(rng.sample(range(len(body)), 2))
            body = body[:a] + body[b:] + body[a:b]
        response = client.put("/v1/models/m/snapshot", content=bytes(body))
        statuses.add(response.status_code)
        assert response.status_code in (200, 422), (case, response.status_code, response.text)
        if response.status_code == 422:
            assert response.headers["content-type"].startswith("application/problem+json")
    assert statuses >= {422}
    client.put("/v1/models/m/snapshot", content=blob)
    after = client.get("/v1/models/m").json()
    assert after["n_selected"] == before["n_selected"]
    assert client.get("/healthz").status_code == 200


def test_the_regular_round_trip_still_restores(client, x1):
    blob = trained(client, x1)
    create(client, "copy")
    response = client.put("/v1/models/copy/snapshot", content=blob)
    assert response.status_code == 200, response.text
    a = client.get("/v1/models/m").json()["selected_features"]
    b = client.get("/v1/models/copy").json()["selected_features"]
    assert a == b and np.isfinite([f["weight"] for f in a]).all()
