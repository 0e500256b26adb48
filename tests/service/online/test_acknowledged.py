"""What is acknowledged is applied: every limit the fold enforces is checked before the append
(REST: JSON named and indexed forms, libsvm text, FBX1; and ``clients.StreamProducer``), so a
202 is never followed by a dead letter. Plus the small contract fixes of issue 32: a
malformed key list stops the service at start-up, the key check comes before the body is
read, and an idempotent repeat answers the first request's count."""

from __future__ import annotations

import time

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service import fbx1
from service.app import create_app
from service.storage import redis_keys
from tests.support.online import create


def _hashed(client, name="h", bits=12):
    create(client, name, algorithm="ogd", budget=None, n_features=None, hash_bits=bits)


def _applied(client, name="h") -> int:
    return client.get(f"/v1/models/{name}").json()["examples_applied"]


def _nothing_appended_nor_dead(client, name="h", log_end=None):
    assert client.get(f"/v1/models/{name}").json()["log_end"] == log_end
    assert client.get(f"/v1/models/{name}/deadletters").json()["entries"] == []


def test_a_name_longer_than_the_fold_takes_is_refused_before_the_append(client):
    _hashed(client)
    limit = fbx1.MAX_NAME_CHARS
    fits = "n" * (limit - len("w^"))  # "w^" + name: exactly the limit
    ok = client.post("/v1/models/h/examples?wait=true",
                     json={"examples": [{"features": {"w": {fits: 1.0}}, "label": 1}]})
    assert ok.status_code == 202 and ok.json()["applied"]
    assert _applied(client) == 1
    log_end = client.get("/v1/models/h").json()["log_end"]
    response = client.post("/v1/models/h/examples?wait=true", json={"examples": [
        {"features": {"w": {"short": 1.0}}, "label": 1},
        {"features": {"w": {"short": 1.0, fits + "x": 2.0}}, "label": -1}]})
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    (error,) = response.json()["errors"]
    assert error["item"] == 1 and error["field"].startswith("features.w.nnn")
    assert f"at most {limit:,} characters" in error["message"]
    assert len(response.text) < 4 * limit  # the name is not echoed whole
    _nothing_appended_nor_dead(client, log_end=log_end)
    assert _applied(client) == 1


def test_more_distinct_names_than_the_fold_takes_are_refused_before_the_append(client):
    _hashed(client, bits=20)
    # 121 examples x 1,000 distinct names: about 114,000 distinct hashed indices
    examples = [{"features": {"w": {f"f{k}_{j}": 1.0 for j in range(1000)}}, "label": 1}
                for k in range(121)]
    response = client.post("/v1/models/h/examples?wait=true", json={"examples": examples})
    assert response.status_code == 422, response.text[:500]
    (error,) = response.json()["errors"]
    assert f"{fbx1.MAX_NAMES:,}" in error["message"] and error["field"] == "features"
    assert 100 <= error["item"] <= 120
    _nothing_appended_nor_dead(client)
    # the same names over two requests: each is within the limit, each is applied
    for part in (examples[:60], examples[60:]):
        answer = client.post("/v1/models/h/examples?wait=true", json={"examples": part})
        assert answer.status_code == 202 and answer.json()["applied"]
    assert _applied(client) == 121
    assert client.get("/v1/models/h/deadletters").json()["entries"] == []


def test_an_entry_larger_than_the_log_takes_is_refused_before_the_append(client,
                                                                         monkeypatch):
    monkeypatch.setattr(fbx1, "MAX_ENTRY_BYTES", 4000)
    create(client, "m", algorithm="pet", budget=3, n_features=1000)
    row = {"indices": list(range(100)), "values": [1.0] * 100, "label": 1}  # 1,221 bytes
    assert client.post("/v1/models/m/examples?wait=true",
                       json={"examples": [row] * 3}).status_code == 202
    log_end = client.get("/v1/models/m").json()["log_end"]
    response = client.post("/v1/models/m/examples?wait=true", json={"examples": [row] * 4})
    assert response.status_code == 413, response.text
    assert "at most 4,000 bytes" in response.json()["detail"]
    assert response.headers["content-type"].startswith("application/problem+json")
    assert _applied(client, "m") == 3
    _nothing_appended_nor_dead(client, "m", log_end=log_end)


@pytest.mark.redis
def test_the_stream_producer_writes_nothing_the_fold_would_refuse(redis_url, make_settings,
                                                                  backend):
    if backend != "redis":
        pytest.skip("the Redis stream")
    import redis

    from clients.stream import InvalidBatchError, StreamProducer

    connection = redis.Redis.from_url(redis_url)
    key = redis_keys.log_key("m")
    with TestClient(create_app(make_settings())) as client:
        create(client, "m", algorithm="pet", budget=3, n_features=10)
        narrow = StreamProducer(connection, "m", batch_size=2, value_bytes=4)
        wide = StreamProducer(connection, "m", batch_size=2, value_bytes=8)
        one = np.array([0, 1])
        refused = [  # (producer, indptr, indices, values, labels, example, field)
            (wide, [0, 1, 2], [3, 10], [1.0, 1.0], [1, 1], 1, "indices"),  # = dimension
            (wide, [0, 2], [4, 4], [1.0, 1.0], [1], 0, "indices"),  # duplicate
            (wide, one, [2**32 + 3], [1.0], [1], 0, "indices"),  # int32 would wrap to 3
            (wide, one, [-1], [1.0], [1], 0, "indices"),
            (wide, [0, 1, 2, 3], [1, 2, 3], [1.0, 1.0, 2.0**50], [1, 1, 1], 2, "values"),
            (narrow, one, [1], [2.0**50 - 1], [1], 0, "values"),  # float32: 2^50
            (wide, one, [1], [1.0], [255], 0, "label"),  # int8 would wrap to -1
            (wide, one, [1], [1.0], [2], 0, "label"),  # 0 is read as -1 (0/1 labels)
        ]
        for producer, indptr, indices, values, labels, item, field in refused:
            for write in (producer.add_batch,
                          lambda *a, p=producer: p.write_once("k", *a)):
                with pytest.raises(InvalidBatchError) as caught:
                    write(np.asarray(indptr), np.asarray(indices), np.asarray(values),
                          np.asarray(labels))
                error = caught.value.errors[0]
                assert (error["item"], error["field"]) == (item, field), caught.value
                assert "nothing was written" in str(caught.value)
            if len(labels) == 1:  # add(): cheap checks at once, the fold's parser per entry
                with pytest.raises(InvalidBatchError):
                    producer.add(indices, values, labels[0])
                    producer.flush()
        with pytest.raises(InvalidBatchError) as caught:
            wide.add_libsvm(b"1 3:1\n-1 11:1\n")  # 1-based: 11 is index 10 = dimension
        assert caught.value.errors[0]["line"] == 2
        with pytest.raises(InvalidBatchError, match="targets"):  # an online model
            StreamProducer(connection, "m", targets=True).add_batch(one, [1], [1.0], [0.5])
        assert connection.xlen(key) == 0
        wide.add(np.array([1, 2]), np.array([1.0, -1.0]), 1)
        wide.add_batch(np.array([0, 1, 3]), np.array([9, 0, 9]),
                       np.array([2.0**50 - 1, 1.0, 1.0]), np.array([-1, 1]))
        narrow.add_batch(one, [2], [2.0**49], [1])
        wide.add_libsvm(b"1 10:1\n")
        (last,) = wide.write_once("k", one, [5], [1.0], [-1])[0]
        narrow.flush()
        wide.flush()
        deadline = time.monotonic() + 30
        while client.get("/v1/models/m").json()["examples_applied"] < 6:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert client.get("/v1/models/m").json()["examples_applied"] == 6
        assert client.get("/v1/models/m/deadletters").json()["entries"] == []
    connection.close()


# ---------------------------------------------------------------- property: 202 => applied

BITS = 6  # a hashed model of 64 features: names collide, indices reach the dimension
_VALUES = st.one_of(  # mostly within |x| < 2^50, often at its edge, sometimes past it
    st.floats(-1.1e15, 1.1e15, allow_nan=False),
    st.sampled_from([0.0, 1.0, -2.5, 5e-324, 2.0**50 - 1, -(2.0**50 - 1), 2.0**49, 1.1e15,
                     2.0**50, -(2.0**50), 1.2e15]))
_LABELS = st.sampled_from([1, -1] * 6 + [0, 2])
_INDICES = st.one_of(st.integers(0, (1 << BITS) - 1),
                     st.sampled_from([0, (1 << BITS) - 1, (1 << BITS) - 1, 1 << BITS, -1]))


@st.composite
def _bodies(draw, name_chars: int):
    """(content type, body bytes, examples in it) for one POST /examples, near the limits:
    names around ``name_chars`` characters, enough of them to pass the per-request limit,
    values around 2^50, indices around [0, d)."""
    n = draw(st.integers(1, 4))
    form = draw(st.sampled_from(["named", "indexed", "named", "libsvm", "named", "fbx1-8",
                                 "fbx1-4"]))
    labels = [draw(_LABELS) for _ in range(n)]
    if form == "named":  # "namespace^name" of about name_chars characters, often exactly
        items = []
        edgy = draw(st.booleans())  # values near 2^50 (their sums may pass it), or small
        for label in labels:
            features: dict = {}
            for _ in range(draw(st.integers(1, 2))):
                namespace = draw(st.text("ab^é", max_size=3))
                group = features.setdefault(namespace, {})
                room = name_chars - len(namespace) - 1  # name characters that just fit
                for _ in range(draw(st.integers(0, 8))):
                    size = draw(st.sampled_from([room, room + 1, room - 1, 1, 0]))
                    group[draw(st.text("abcé", min_size=size, max_size=size))] = \
                        draw(_VALUES if edgy else st.floats(-1e6, 1e6))
            items.append({"features": features, "label": label})
        return "application/json", orjson.dumps({"examples": items}), n
    rows = []
    for _ in range(n):
        row = draw(st.lists(st.tuples(_INDICES, _VALUES), max_size=5, unique_by=lambda p: p[0]))
        if row and draw(st.integers(0, 9)) == 0:  # now and then an index twice
            row.append(row[0])
        rows.append(row)
    if form == "indexed":
        items = [{"indices": [i for i, _ in row], "values": [v for _, v in row], "label": label}
                 for row, label in zip(rows, labels, strict=True)]
        return "application/json", orjson.dumps({"examples": items}), n
    if form == "libsvm":
        lines = [" ".join([str(label)] + [f"{i + 1}:{v!r}" for i, v in row])
                 for row, label in zip(rows, labels, strict=True)]
        return "text/plain", ("\n".join(lines) + "\n").encode(), n
    indptr = np.cumsum([0] + [len(row) for row in rows])
    body = fbx1.encode_batch(indptr, [i for row in rows for i, _ in row],
                             [v for row in rows for _, v in row], labels,
                             value_bytes=8 if form == "fbx1-8" else 4)
    return "application/octet-stream", body, n


def test_any_body_answered_202_is_applied_in_full(make_settings, monkeypatch):
    """Whatever the body (every format, near every limit the fold reads entries with), a
    202 means every example of it is applied once, and nothing goes to the dead letters; a
    refusal appends nothing. The name limits are made small (the edge and the fold read
    the same constants) so that generated bodies cross them."""
    monkeypatch.setattr(fbx1, "MAX_NAMES", 10)
    monkeypatch.setattr(fbx1, "MAX_NAME_CHARS", 12)
    with TestClient(create_app(make_settings())) as client:
        _hashed(client, bits=BITS)
        seen = {"accepted": 0, "refused": 0, "named accepted": 0, "named refused": 0}

        @settings(max_examples=100, deadline=None, derandomize=True, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
        @given(_bodies(fbx1.MAX_NAME_CHARS))
        def check(case):
            media_type, body, n = case
            before = client.get("/v1/models/h").json()
            response = client.post("/v1/models/h/examples?wait=true", content=body,
                                   headers={"content-type": media_type})
            after = client.get("/v1/models/h").json()
            named = b'"features"' in body
            outcome = "accepted" if response.status_code == 202 else "refused"
            seen[outcome] += 1
            seen[f"named {outcome}"] += named
            if response.status_code == 202:
                assert response.json()["applied"] and response.json()["accepted"] == n
                assert after["examples_applied"] == before["examples_applied"] + n
            else:
                assert response.status_code in (400, 422), response.text
                assert response.headers["content-type"].startswith("application/problem+json")
                assert after["log_end"] == before["log_end"]
                assert after["examples_applied"] == before["examples_applied"]
            assert client.get("/v1/models/h/deadletters").json()["entries"] == []

        check()
        assert min(seen.values()) >= 5, seen


# ---------------------------------------------------------------- small contract fixes

def test_an_idempotent_repeat_reports_the_first_requests_count(make_settings):
    settings_ = make_settings()
    first_body = {"examples": [{"indices": [1], "values": [1.0], "label": 1}] * 3}
    other_body = {"examples": [{"indices": [2], "values": [1.0], "label": -1}] * 5}
    key = {"idempotency-key": "order-1"}
    with TestClient(create_app(settings_)) as client:
        create(client, "m", algorithm="pet", budget=3, n_features=10)
        first = client.post("/v1/models/m/examples?wait=true", json=first_body, headers=key)
        assert first.status_code == 202 and first.json()["accepted"] == 3
        again = client.post("/v1/models/m/examples?wait=true", json=other_body, headers=key)
        assert again.status_code == 202, again.text
        assert again.json()["repeated"] and again.json()["log_ids"] == first.json()["log_ids"]
        assert again.json()["accepted"] == 3  # what the key appended, not this body's 5
        assert _applied(client, "m") == 3
    with TestClient(create_app(settings_)) as client:  # after a restart too
        again = client.post("/v1/models/m/examples", json=other_body, headers=key).json()
        assert again["repeated"] and again["accepted"] == 3


def test_the_key_check_comes_before_the_body_is_read(make_settings):
    """401 (no or an unknown key) and 403 (a read key on a write route) before 400 (a body
    that is not JSON) or 422, on every route that takes a body or writes."""
    with TestClient(create_app(make_settings(api_keys="w,r:read"))) as client:
        writer, reader = {"x-api-key": "w"}, {"x-api-key": "r"}
        create_body = {"name": "m", "algorithm": "pet", "budget": 3, "n_features": 10}
        assert client.post("/v1/models", json=create_body, headers=writer).status_code == 201
        broken = b'{"name": '
        routes = [("POST", "/v1/models"), ("POST", "/v1/models/m/examples"),
                  ("POST", "/v1/models/m/feedback"), ("POST", "/v1/models/m/rollback"),
                  ("POST", "/v1/models/m/retrain"), ("PUT", "/v1/models/m/snapshot"),
                  ("DELETE", "/v1/models/m")]
        for method, path in routes:
            for headers, status in [({}, 401), ({"x-api-key": "nope"}, 401), (reader, 403)]:
                response = client.request(method, path, content=broken, headers={
                    **headers, "content-type": "application/json"})
                assert response.status_code == status, (method, path, headers, response.text)
                assert response.headers["content-type"].startswith("application/problem+json")
        for path in ("/v1/models/m/predict", "/v1/models/m/next"):  # read routes
            response = client.post(path, content=broken,
                                   headers={"content-type": "application/json"})
            assert response.status_code == 401, (path, response.text)
        # with a valid key the body is read: the malformed one is a 400 naming the body
        for path in ("/v1/models", "/v1/models/m/feedback"):
            response = client.post(path, content=broken, headers={
                **writer, "content-type": "application/json"})
            assert response.status_code == 400 and response.json()["errors"][0]["field"] == "body"


def test_a_typo_in_a_key_role_stops_serve_at_start_up(tmp_path, monkeypatch):
    from pydantic import ValidationError

    from service.settings import Settings

    for value, reason in [("t:reed", "entry 1 has the role 'reed'"),
                          ("a, :read", "entry 2 has no key"),
                          ("a:read,a", "entry 2 repeats the key")]:
        with pytest.raises(ValidationError, match=reason) as caught:
            Settings(api_keys=value)
        assert "t:reed" not in str(caught.value)  # named by position, never echoed
    assert Settings(api_keys="admin, viewer:READ ,w:write,x:ro").key_roles() == {
        "admin": "write", "viewer": "read", "w": "write", "x": "read"}
    import os
    import subprocess
    import sys

    from tests.support.processes import ROOT

    env = {k: v for k, v in os.environ.items() if not k.startswith("FEATUREBUDGET_")}
    env.update(FEATUREBUDGET_API_KEYS="secret-admin,t:reed",
               FEATUREBUDGET_DATA_DIR=str(tmp_path / "data"))
    done = subprocess.run([sys.executable, "-m", "service.cli", "serve", "--port", "0"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert "FEATUREBUDGET_API_KEYS entry 2 has the role 'reed'" in output, output[-2000:]
    assert "secret-admin" not in output
    assert not (tmp_path / "data").exists()  # stopped before it opened anything
