"""A snapshot restored while examples stream in replaces the model as of the log's end at
that moment: the examples appended before it and not yet applied are superseded (none of
them is kept), every example appended after it is applied."""

from __future__ import annotations

import threading

from service.storage import id_key
from tests.support.batch_api import create_batch
from tests.support.batch_data import DIABETES_GROUPS, diabetes, named_examples
from tests.support.snapshots import snapshot_of


def test_a_batch_restore_during_ingestion_keeps_nothing_superseded(batch_client):
    client = batch_client
    X, y = diabetes()
    create_batch(client)
    first = {"examples": named_examples(X, y, DIABETES_GROUPS, 0, 50)}
    assert client.post("/v1/models/d/examples?wait=true", json=first).status_code == 202
    snapshot = client.get("/v1/models/d/snapshot").content
    assert snapshot_of(snapshot).model["examples"] == 50
    acked: list[tuple[str, int]] = []
    stop = threading.Event()

    def stream() -> None:
        k = 0
        while not stop.is_set():
            rows = named_examples(X, y, DIABETES_GROUPS, 50 + k % 300, 55 + k % 300)
            response = client.post("/v1/models/d/examples", json={"examples": rows})
            assert response.status_code == 202, response.text
            acked.append((response.json()["log_ids"][0], 5))
            k += 5

    producer = threading.Thread(target=stream)
    producer.start()
    try:
        while len(acked) < 20:
            threading.Event().wait(0.01)
        restored = client.put("/v1/models/d/snapshot", content=snapshot)
        assert restored.status_code == 200, restored.text
        while len(acked) < 40:
            threading.Event().wait(0.01)
    finally:
        stop.set()
        producer.join()
    position = id_key(restored.json()["log_position"])
    after = sum(n for log_id, n in acked if id_key(log_id) > position)
    last = max(acked, key=lambda a: id_key(a[0]))[0]
    client.post("/v1/models/d/examples?wait=true", json={"examples": named_examples(
        X, y, DIABETES_GROUPS, 400, 401)})
    described = client.get("/v1/models/d").json()
    assert id_key(described["log_position"]) > id_key(last)
    assert described["examples_applied"] == 50 + after + 1
