"""Errors and answers that say what to do: an untrained model's predictions say so, a batch
model waiting on its first retrain names the job, one content-type rule on every route
(415 naming the accepted types, with a hint for JSON sent as something else), online
parameter errors that name the parameter, pydantic's wording kept out, and 0/1 labels."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from tests.support.batch_api import create_batch

EXAMPLE = {"indices": [1, 2], "values": [1.0, 0.5]}
FORM = {"content-type": "application/x-www-form-urlencoded"}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    """One embedded app without a batch worker: a retrain stays queued."""
    settings = Settings(redis_url=None, data_dir=tmp_path_factory.mktemp("errors") / "data",
                        batch_worker=False, consumer_block_ms=20, api_keys="")
    with TestClient(create_app(settings)) as test_client:
        for name, budget in (("plain", 3), ("labels01", None)):
            body = {"name": name, "algorithm": "sofs" if budget else "ogd", "n_features": 10}
            if budget:
                body["budget"] = budget
            assert test_client.post("/v1/models", json=body).status_code == 201
        create_batch(test_client, name="house")
        yield test_client


def problem(response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    return response.json()


# ------------------------------------------------------------- answers with nothing behind
def test_an_untrained_online_model_says_its_predictions_mean_nothing(client):
    client.post("/v1/models", json={"name": "fresh", "algorithm": "ogd", "n_features": 10})
    answer = client.post("/v1/models/fresh/predict", json={"examples": [EXAMPLE]}).json()
    assert answer["scores"] == [0.0] and answer["examples_applied"] == 0
    assert "has learned from no examples yet" in answer["warnings"][0]
    assert "POST /v1/models/fresh/examples" in answer["warnings"][0]
    client.post("/v1/models/fresh/examples?wait=true",
                json={"examples": [{**EXAMPLE, "label": 1}, {**EXAMPLE, "label": -1}]})
    answer = client.post("/v1/models/fresh/predict", json={"examples": [EXAMPLE]}).json()
    assert answer["examples_applied"] == 2 and answer["warnings"] == []


def test_a_batch_model_waiting_on_its_first_retrain_names_the_job(client):
    client.post("/v1/models/house/examples", json={"examples": [
        {"indices": [0, 1], "values": [0.1, 0.2], "target": 1.0},
        {"indices": [0, 2], "values": [0.3, 0.1], "target": 2.0}]})
    job = client.post("/v1/models/house/retrain").json()
    assert job["status"] == "queued"
    for answer in (client.post("/v1/models/house/predict", json={"examples": [
                       {"indices": [0], "values": [1.0]}]}),
                   client.post("/v1/models/house/next", json={}),
                   client.get("/v1/models/house/sequence")):
        body = problem(answer, 409)
        assert f"its retrain (job '{job['id']}') is queued" in body["detail"], body
        assert f"GET /v1/models/house/jobs/{job['id']}" in body["detail"]
        assert "post examples" not in body["detail"]
        assert body["errors"][0]["job"] == job["id"]


def test_the_no_version_answer_follows_the_jobs():
    from service.batch.jobs import Job, JobStatus, no_version_error

    running = Job(id="j2", status=JobStatus.RUNNING, created_at=2.0, progress=0.4)
    queued = Job(id="j1", status=JobStatus.QUEUED, created_at=1.0)
    assert "job 'j2') is running, 40% done" in no_version_error("m", [queued, running]).detail
    failed = Job(id="j3", status=JobStatus.FAILED, created_at=3.0, error="too few examples")
    detail = no_version_error("m", [failed]).detail
    assert "last retrain (job 'j3') failed: too few examples" in detail
    assert "POST /v1/models/m/retrain" in detail
    assert "post examples and POST" in no_version_error("m", []).detail


# ------------------------------------------------------------- one content-type rule
@pytest.mark.parametrize(("path", "body"), [
    ("/v1/models", {"name": "x", "algorithm": "ogd", "n_features": 4}),
    ("/v1/models/plain/examples", {"examples": [{**EXAMPLE, "label": 1}]}),
    ("/v1/models/plain/predict", {"examples": [EXAMPLE]}),
    ("/v1/models/house/next", {"computed_groups": []}),
    ("/v1/models/plain/feedback", {"prediction_id": "p", "label": 1}),
    ("/v1/models/house/rollback", {"version": 1}),
])
@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "text/plain"])
def test_json_sent_as_another_type_is_a_415_that_says_how_to_send_it(client, path, body,
                                                                     content_type):
    answer = client.post(path, content=json.dumps(body),
                         headers={"content-type": content_type})
    detail = problem(answer, 415)["detail"]
    if path.endswith("/examples") and content_type == "text/plain":
        assert "a body of content type 'text/plain' is read as libsvm text" in detail
    else:
        assert f"content type {content_type!r} is not read here; send application/json" \
            in detail
    assert "the body looks like JSON: send it with Content-Type: application/json" in detail


def test_a_body_without_a_content_type_is_read_as_json(client):
    body = json.dumps({"name": "untyped", "algorithm": "ogd", "n_features": 4}).encode()
    assert client.post("/v1/models", content=body).status_code == 201
    body = json.dumps({"examples": [EXAMPLE]}).encode()
    assert client.post("/v1/models/untyped/predict", content=body).status_code == 200


def test_a_415_without_json_names_the_accepted_types_only(client):
    answer = client.post("/v1/models/plain/examples", content=b"a=1", headers=FORM)
    detail = problem(answer, 415)["detail"]
    assert "text/plain (libsvm)" in detail and "looks like JSON" not in detail
    libsvm = client.post("/v1/models/plain/examples", content=b"1 1:0.5\n",
                         headers={"content-type": "text/plain"})
    assert libsvm.status_code == 202, libsvm.text


# ------------------------------------------------------------- parameters and names
def test_an_unknown_online_parameter_is_named_with_the_known_ones(client):
    body = {"name": "p", "algorithm": "sofs", "n_features": 10, "params": {"rr": 1}}
    error = problem(client.post("/v1/models", json=body), 422)
    assert error["errors"][0]["field"] == "params.rr"
    assert error["detail"] == "field 'params.rr': unknown parameters ['rr'] for sofs; " \
                              "known: ['r']"
    assert "__init__" not in error["detail"]


@pytest.mark.parametrize("name", ["budget", "n_features"])
def test_a_model_field_given_as_a_parameter_says_where_it_goes(client, name):
    body = {"name": "p", "algorithm": "sofs", "n_features": 10, "params": {name: 3}}
    error = problem(client.post("/v1/models", json=body), 422)
    assert error["errors"][0]["field"] == f"params.{name}"
    assert f"{name} is a field of the model, not a parameter of sofs: give it beside " \
           "params" in error["detail"]
    assert "multiple values" not in error["detail"]


def test_validation_messages_are_in_words(client):
    both = {"name": "p", "algorithm": "ogd", "n_features": 10, "hash_bits": 4}
    detail = problem(client.post("/v1/models", json=both), 422)["detail"]
    assert "Value error" not in detail and "give exactly one of n_features" in detail
    bad_name = {"name": "-bad", "algorithm": "ogd", "n_features": 10}
    detail = problem(client.post("/v1/models", json=bad_name), 422)["detail"]
    assert "field 'name': must be 1 to 64 characters: ASCII letters, digits, '_', '.' " \
           "and '-', the first a letter or digit" in detail


# ------------------------------------------------------------- 0/1 labels
def test_zero_one_labels_are_read_with_zero_as_minus_one(client):
    ones = client.post("/v1/models/labels01/examples?wait=true",
                       json={"examples": [{**EXAMPLE, "label": 0}, {**EXAMPLE, "label": 1}]})
    assert ones.status_code == 202, ones.text
    text = client.post("/v1/models/labels01/examples?wait=true", content=b"0 1:1\n1 2:1\n",
                       headers={"content-type": "text/plain"})
    assert text.status_code == 202, text.text
    model = client.get("/v1/models/labels01").json()
    assert model["examples_applied"] == 4
    same = client.post("/v1/models", json={"name": "signed", "algorithm": "ogd",
                                           "n_features": 10})
    assert same.status_code == 201
    client.post("/v1/models/signed/examples?wait=true",
                json={"examples": [{**EXAMPLE, "label": -1}, {**EXAMPLE, "label": 1}]})
    client.post("/v1/models/signed/examples?wait=true", content=b"-1 1:1\n1 2:1\n",
                headers={"content-type": "text/plain"})
    weights = {m: client.get(f"/v1/models/{m}/features").json() for m in ("labels01", "signed")}
    assert weights["labels01"] == weights["signed"]


def test_mixing_minus_one_and_zero_is_refused(client):
    body = {"examples": [{**EXAMPLE, "label": -1}, {**EXAMPLE, "label": 1},
                         {**EXAMPLE, "label": 0}]}
    error = problem(client.post("/v1/models/plain/examples", json=body), 422)
    assert error["errors"][0] == {"item": 2, "field": "label", "message": (
        "label 0 mixes -1 and 0 in one batch: labels are -1/+1, or 0/1 with 0 read as -1, "
        "not both")}
    error = problem(client.post("/v1/models/plain/examples", json={"examples": [
        {**EXAMPLE, "label": 2}]}), 422)
    assert "label 2 is not -1 or +1 (labels are -1/+1, or 0/1" in error["detail"]


@pytest.mark.redis
def test_the_stream_producer_writes_zero_as_minus_one(redis_url):
    import redis

    from clients.stream import InvalidBatchError, StreamProducer
    from service import fbx1
    from service.storage import redis_keys

    producer = StreamProducer(redis_url, "ahead", require_model=False)
    indptr, indices, values = [0, 1, 2, 3], [1, 2, 3], [1.0, 1.0, 1.0]
    producer.add_batch(indptr, indices, values, [0, 1, 0])
    producer.add(indices=[4], values=[1.0], label=0)
    producer.flush()
    entries = redis.Redis.from_url(redis_url).xrange(redis_keys.log_key("ahead"))
    labels = [fbx1.decode_batch(fields[b"data"])[3].tolist() for _, fields in entries]
    assert labels == [[-1, 1, -1], [-1]]
    with pytest.raises(InvalidBatchError, match="label 0 mixes -1 and 0 in one batch"):
        producer.add_batch(indptr, indices, values, [-1, 1, 0])
