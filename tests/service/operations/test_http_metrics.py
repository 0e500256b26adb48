"""What /metrics says about requests: rejected examples counted as examples (and the
rejected requests apart), HTTP requests by route template and status class with their
latency, the readiness gauge following /readyz, and no ``*_created`` series."""

from __future__ import annotations

import uuid

from service import fbx1
from service.ingest import entry_examples
from tests.service.operations.test_prometheus import metric_value
from tests.support.online import json_examples, libsvm_text

GOOD = {"indices": [1, 5], "values": [1.0, 0.5]}


def value(client, name: str, **labels) -> float:
    return metric_value(client.get("/metrics").text, name, **labels) or 0.0


def create(client, name: str) -> None:
    assert client.post("/v1/models", json={"name": name, "algorithm": "sofs", "budget": 5,
                                           "n_features": 2000}).status_code == 201


def test_rejected_examples_are_counted_as_examples_and_requests_apart(client, x1):
    X, y = x1
    name = f"rejects-{uuid.uuid4().hex[:8]}"
    create(client, name)
    url = f"/v1/models/{name}/examples"
    bad = [*json_examples(X, y, 0, 2), {"indices": [1], "values": [1.0], "label": 7}]
    assert client.post(url, json={"examples": bad}).status_code == 422
    lines = libsvm_text(X, y, 0, 4).splitlines()
    lines[2] = b"3" + lines[2][lines[2].index(b" "):]  # line 3: label 3
    assert client.post(url, content=b"\n".join(lines) + b"\n",
                       headers={"content-type": "text/plain"}).status_code == 422
    assert client.post(url, content=b"{not json", headers={
        "content-type": "application/json"}).status_code == 400  # how many: unknown
    assert value(client, "featurebudget_examples_rejected_total", model=name,
                 source="api") == 3 + 4
    assert value(client, "featurebudget_rejected_requests_total", model=name,
                 source="api") == 3
    assert value(client, "featurebudget_examples_rejected_total", model=name,
                 source="stream") == 0


def test_a_rejected_entry_counts_the_examples_it_holds(x1):
    X, y = x1
    rows = X.row_slice(0, 5)
    blob = fbx1.encode_batch(rows.indptr, rows.indices, rows.values, y[:5])
    assert entry_examples({b"fmt": b"bin", b"data": blob}) == 5
    assert entry_examples({b"data": blob}) == 5  # format inferred
    assert entry_examples({b"fmt": b"libsvm", b"data": b"+1 1:2\n\nnot an example\n"}) == 2
    assert entry_examples({b"fmt": b"json", b"data": b'{"examples": [{}, {}, {}]}'}) == 3
    assert entry_examples({b"fmt": b"json", b"data": b"[{"}) == 0
    assert entry_examples({b"fmt": b"json"}) == 0  # no data at all


def test_http_requests_by_route_template_and_status_class(client, x1):
    name = f"http-{uuid.uuid4().hex[:8]}"
    predict = "/v1/models/{model}/predict"
    before = {
        "predict": value(client, "featurebudget_http_requests_total", route=predict,
                         method="POST", status="2xx"),
        "timed": value(client, "featurebudget_http_request_seconds_count", route=predict,
                       method="POST"),
        "missing": value(client, "featurebudget_http_requests_total",
                         route="/v1/models/{model}", method="GET", status="4xx"),
        "unmatched": value(client, "featurebudget_http_requests_total", route="unmatched",
                           method="GET", status="4xx"),
        "created": value(client, "featurebudget_http_requests_total", route="/v1/models",
                         method="POST", status="2xx")}
    create(client, name)
    for _ in range(3):  # answered by the predict fast path, no route runs
        assert client.post(f"/v1/models/{name}/predict",
                           json={"examples": [GOOD]}).status_code == 200
    assert client.get("/v1/models/no-such-model").status_code == 404
    assert client.get(f"/nothing/here/{name}").status_code == 404
    text = client.get("/metrics").text
    after = {
        "predict": metric_value(text, "featurebudget_http_requests_total", route=predict,
                                method="POST", status="2xx"),
        "timed": metric_value(text, "featurebudget_http_request_seconds_count", route=predict,
                              method="POST"),
        "missing": metric_value(text, "featurebudget_http_requests_total",
                                route="/v1/models/{model}", method="GET", status="4xx"),
        "unmatched": metric_value(text, "featurebudget_http_requests_total",
                                  route="unmatched", method="GET", status="4xx"),
        "created": metric_value(text, "featurebudget_http_requests_total", route="/v1/models",
                                method="POST", status="2xx")}
    assert {k: after[k] - before[k] for k in before} == {
        "predict": 3, "timed": 3, "missing": 1, "unmatched": 1, "created": 1}
    # the routes' templates, never the names clients send
    assert name not in "".join(line for line in text.splitlines()
                               if line.startswith("featurebudget_http_"))
    assert "_created" not in text  # no *_created family beside the counters


def test_readiness_gauge_follows_readyz(client):
    manager = client.app.state.manager
    backend = manager.storage.kind
    assert client.get("/readyz").status_code == 200
    assert value(client, "featurebudget_ready", backend=backend) == 1
    manager.failed["ghost"] = "its snapshot could not be read"  # as a failed restore leaves
    try:
        assert client.get("/readyz").json()["status"] == "degraded"
        assert value(client, "featurebudget_ready", backend=backend) == 0
    finally:
        del manager.failed["ghost"]
    assert client.get("/readyz").status_code == 200
    assert value(client, "featurebudget_ready", backend=backend) == 1
