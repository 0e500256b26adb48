"""Small edges where the OpenAPI document, the answers' headers and the logs must say what the
service does: a body the schema allows is one the service can take, and what it refuses
everywhere the schema refuses too (empty examples, ``groups`` or ``task`` on an online
model, both names of one cost cap); the snapshot's body and answer are described; every
answer says ``nosniff`` and the pages carry a strict Content-Security-Policy; a 500 logs
its traceback once; ``/metrics`` can be keyed. (That the pages still render under the
policy: tests/service/batch/test_batch_page.py, in headless chromium.)"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
import re
import subprocess
import threading
import time

import httpx
import jsonschema_rs
import pytest
import uvicorn
import yaml
from fastapi.responses import StreamingResponse
from fastapi.testclient import TestClient
from pydantic import ValidationError

from service.api.docs import policy as docs_policy
from service.app import create_app
from service.batch.serving import model_pages, page
from service.batch.serving.requests import cost_cap
from service.errors import InputError
from service.schemas import ModelCreate
from service.settings import Settings
from tests.support.batch_api import create_batch, retrain
from tests.support.batch_data import DIABETES_GROUPS, diabetes, named_examples
from tests.support.ports import free_port
from tests.support.processes import DOCKER, binary, wait_until

GROUP = {"name": "g", "features": ["a", "b"], "cost": 1.0}
SNAPSHOT = "application/vnd.featurebudget.state"


@pytest.fixture(scope="module")
def document(tmp_path_factory) -> dict:
    return create_app(Settings(data_dir=tmp_path_factory.mktemp("doc") / "data")).openapi()


def body_validator(document: dict, path: str, method: str = "post"):
    content = document["paths"][path][method]["requestBody"]["content"]
    return jsonschema_rs.validator_for({**document, **content["application/json"]["schema"]})


# ---------------------------------------------------------------------------- the schema
def test_examples_without_features_or_label_are_outside_the_schema(document):
    examples = body_validator(document, "/v1/models/{model}/examples")
    predict = body_validator(document, "/v1/models/{model}/predict")
    for body in ({"examples": [{}]}, {"examples": [{"label": 1}]},
                 {"examples": [{"indices": [1], "label": 1}]}):
        assert not examples.is_valid(body), body
    assert not predict.is_valid({"examples": [{}]})
    assert not predict.is_valid({"examples": [{"values": [1.0]}]})
    for item in ({"indices": [], "values": [], "label": 1},
                 {"features": {"g": {"a": 1.0}}, "target": 2.5},
                 {"features": {}, "label": -1}):
        assert examples.is_valid({"examples": [item]}), item
        assert predict.is_valid({"examples": [item]}), item
    assert not examples.is_valid({"examples": [{"indices": [1], "values": [1.0],
                                                "label": None}]})


def test_one_cost_cap_under_one_name_in_the_schema_and_the_service(document):
    next_body = body_validator(document, "/v1/models/{model}/next")
    predict = body_validator(document, "/v1/models/{model}/predict")
    both = {"max_cost": 2.0, "budget": 2.0}
    assert not next_body.is_valid({"computed_groups": [], **both})
    assert next_body.is_valid({"computed_groups": [], "max_cost": 2.0})
    assert next_body.is_valid({"computed_groups": [], "budget": 2.0})
    examples = [{"indices": [], "values": []}]
    assert not predict.is_valid({"examples": examples, **both})
    assert not predict.is_valid({"examples": examples, "computed_groups": [], "budget": 1})
    assert predict.is_valid({"examples": examples, "max_cost": 1})
    with pytest.raises(InputError, match="not both"):
        cost_cap(both, required=False)


CREATIONS = [  # (body, what pydantic and the schema must both say)
    ({"algorithm": "sofs", "n_features": 10, "budget": 3}, True),
    ({"algorithm": "pet", "hash_bits": 10, "budget": 3}, True),
    ({"algorithm": "sofs", "n_features": 10, "groups": None, "task": None}, True),
    ({"algorithm": "sofs", "groups": [GROUP]}, False),  # groups on an online model
    ({"algorithm": "sofs", "n_features": 10, "groups": [GROUP]}, False),
    ({"algorithm": "ogd", "n_features": 10, "task": "regression"}, False),
    ({"algorithm": "ogd", "n_features": 10, "hash_bits": 4}, False),
    ({"algorithm": "ogd"}, False),
    ({"algorithm": "cs-g-omp", "groups": [GROUP]}, True),
    ({"algorithm": "gbfs", "groups": [GROUP], "task": "classification", "budget": None}, True),
    ({"algorithm": "cs-g-omp", "groups": [GROUP], "budget": 3}, False),
    ({"algorithm": "cs-g-omp", "groups": [GROUP], "n_features": 2}, False),
    ({"algorithm": "nvsd", "groups": []}, False),
    ({"algorithm": "nvsd"}, False),
]


@pytest.mark.parametrize(("body", "valid"), CREATIONS)
def test_the_creation_schema_says_what_the_service_takes(document, body, valid):
    body = {"name": "x", **body}
    schema = jsonschema_rs.validator_for({**document,
                                          "$ref": "#/components/schemas/ModelCreate"})
    try:
        ModelCreate(**body)
        accepted = True
    except ValidationError:
        accepted = False
    assert (accepted, schema.is_valid(body)) == (valid, valid)


def test_the_snapshot_body_and_answer_are_described(document):
    item = document["paths"]["/v1/models/{model}/snapshot"]
    for content in (item["put"]["requestBody"]["content"],
                    item["get"]["responses"]["200"]["content"]):
        assert set(content) == {SNAPSHOT}
        schema = content[SNAPSHOT]["schema"]
        assert schema["type"] == "string" and schema["format"] == "binary"
        assert "npz" in schema["description"]


# ---------------------------------------------------------------------------- the pages
def test_the_policy_admits_exactly_the_pages_style():
    """No style attribute, no script; the one <style> element's hash is in the policy."""
    rows = [{"groups": 0, "name": None, "cost": None, "cumulative_cost": 0.0,
             "answered_by": "anytime", "validation_error": 0.5},
            {"groups": 1, "name": "g", "cost": 1.0, "cumulative_cost": 1.0,
             "answered_by": "gbfs", "validation_error": 0.25}]
    pages = [page.sequence_page("m", "auto", "classification",
                                {"prefixes": rows, "version": 1, "created_at": 0.0}),
             model_pages.models_page([{"name": "m", "algorithm": "sofs",
                                       "examples_applied": 3}]),
             model_pages.notice_page("m", "no version yet", 409)]
    for text in pages:
        assert " style=" not in text and "<script" not in text.lower()
        (style,) = re.findall(r"<style>(.*?)</style>", text, flags=re.S)
        digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
        assert f"style-src 'sha256-{digest}'" in page.CONTENT_SECURITY_POLICY
    assert 'class="half-anytime"' in pages[0] and ".half-gbfs {" in pages[0]
    assert "default-src 'none'" in page.CONTENT_SECURITY_POLICY
    assert "unsafe" not in page.CONTENT_SECURITY_POLICY


# ---------------------------------------------------------------------------- a live server
@contextlib.contextmanager
def serving(app):
    """``app`` under uvicorn on a loopback port, in a thread, uvicorn's loggers left to
    propagate (``log_config=None``), as a root handler such as caplog sees them."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_config=None, lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 600  # a cold numba cache compiles at start-up
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(60)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    app = create_app(Settings(data_dir=tmp_path_factory.mktemp("live") / "data",
                              batch_worker=True, job_poll_seconds=0.05,
                              version_check_seconds=0.2, snapshot_every_seconds=3600))

    async def boom():
        raise RuntimeError("an internal detail")

    async def boom_later():
        async def chunks():
            yield b"first"
            raise RuntimeError("after the answer began")

        return StreamingResponse(chunks())

    app.add_api_route("/boom", boom)
    app.add_api_route("/boom-later", boom_later)
    with serving(app) as url, httpx.Client(base_url=url, timeout=120) as client:
        create_batch(client, "d")
        X, y = diabetes()
        client.post("/v1/models/d/examples?wait=true",
                    json={"examples": named_examples(X, y, DIABETES_GROUPS, 0, 200)}
                    ).raise_for_status()
        assert retrain(client, "d")["status"] == "succeeded"
        client.post("/v1/models", json={"name": "o", "algorithm": "sofs", "n_features": 10,
                                        "budget": 3}).raise_for_status()
        yield client


def test_empty_examples_are_refused_by_the_service_too(live):
    deadline = time.monotonic() + 30  # the retrained version reaches the API's host
    while live.post("/v1/models/d/next", json={}).status_code == 409:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    for path in ("/v1/models/o/examples", "/v1/models/o/predict", "/v1/models/d/examples",
                 "/v1/models/d/predict"):
        response = live.post(path, json={"examples": [{}]})
        assert response.status_code == 422, (path, response.text)
        assert response.headers["content-type"].startswith("application/problem+json")
        assert response.json()["errors"][0]["item"] == 0
    response = live.post("/v1/models/d/next", json={"max_cost": 2.0, "budget": 2.0})
    assert response.status_code == 422 and "not both" in response.text


def test_every_answer_says_nosniff_and_the_pages_carry_the_policy(live):
    for path in ("/ui", "/v1/models/d/sequence.html", "/v1/models", "/healthz", "/metrics",
                 "/v1/models/none", "/openapi.json"):
        response = live.get(path)
        assert response.headers["x-content-type-options"] == "nosniff", path
        assert response.headers["content-security-policy"] == \
            page.CONTENT_SECURITY_POLICY, path
    html_page = live.get("/v1/models/d/sequence.html")
    assert html_page.status_code == 200 and html_page.headers["content-type"].startswith(
        "text/html")
    for path in ("/docs", "/redoc"):  # their own policy, for their own scripts
        docs = live.get(path)
        assert docs.headers["x-content-type-options"] == "nosniff"
        assert docs.headers.get_list("content-security-policy") == [docs_policy(docs.content)]
    boom = live.get("/boom")
    assert boom.status_code == 500 and boom.headers["x-content-type-options"] == "nosniff"


def tracebacks(records) -> list[logging.LogRecord]:
    return [r for r in records if r.exc_info and isinstance(r.exc_info[1], RuntimeError)]


def test_a_500_logs_its_traceback_once(live, caplog):
    caplog.set_level(logging.INFO)
    response = live.get("/boom")
    assert response.status_code == 500
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "internal detail" not in response.text
    time.sleep(0.3)  # (the server's own log, were there one, follows the answer)
    logged = tracebacks(caplog.records)
    assert len(logged) == 1, [(r.name, r.getMessage()) for r in caplog.records]
    assert logged[0].name == "featurebudget" and "GET /boom" in logged[0].getMessage()
    assert live.get("/healthz").status_code == 200


def test_an_error_after_the_answer_began_is_logged_once(live, caplog):
    caplog.set_level(logging.INFO)
    with pytest.raises(httpx.HTTPError):  # the answer is cut short
        live.get("/boom-later").read()
    time.sleep(0.3)
    logged = tracebacks(caplog.records)
    assert len(logged) == 1, [(r.name, r.getMessage()) for r in caplog.records]
    assert "after its answer began" in logged[0].getMessage()


# ---------------------------------------------------------------------------- /metrics keys
def test_metrics_may_be_keyed(tmp_path):
    keys = "admin-key,dash-key:read"
    settings = Settings(data_dir=tmp_path / "data", api_keys=keys, metrics_key_required=True)
    with TestClient(create_app(settings)) as client:
        refused = client.get("/metrics")
        assert refused.status_code == 401
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert client.get("/metrics", headers={"X-API-Key": "dash-key"}).status_code == 200
        answered = client.get("/metrics", headers={"Authorization": "Bearer admin-key"})
        assert answered.status_code == 200 and "featurebudget" in answered.text
        assert client.get("/metrics", headers={"X-API-Key": "nope"}).status_code == 401
        assert client.get("/healthz").status_code == 200  # health stays open
    with TestClient(create_app(Settings(data_dir=tmp_path / "open", api_keys=keys))) as client:
        assert client.get("/metrics").status_code == 200  # the default: open


def test_a_keyed_metrics_setting_without_keys_stops_the_start(monkeypatch, tmp_path):
    monkeypatch.setenv("FEATUREBUDGET_METRICS_KEY_REQUIRED", "true")
    monkeypatch.delenv("FEATUREBUDGET_API_KEYS", raising=False)
    with pytest.raises(ValidationError, match="needs FEATUREBUDGET_API_KEYS"):
        Settings(data_dir=tmp_path)
    monkeypatch.setenv("FEATUREBUDGET_API_KEYS", "k:read")
    assert Settings(data_dir=tmp_path).metrics_key_required is True


def test_a_real_prometheus_scrapes_keyed_metrics_with_the_documented_credentials(tmp_path):
    """docker/prometheus/prometheus.yml's API job plus ``authorization: {credentials_file}``
    (docs/operations.md) scrapes a keyed /metrics; the same job without it is refused."""
    prometheus = binary("prometheus")
    config = yaml.safe_load((DOCKER / "prometheus/prometheus.yml").read_text())
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "featurebudget"]
    key_file = tmp_path / "featurebudget.key"
    key_file.write_text("dash-key\n")
    settings = Settings(data_dir=tmp_path / "data", api_keys="admin-key,dash-key:read",
                        metrics_key_required=True)
    with serving(create_app(settings)) as url:
        target = url.removeprefix("http://")
        keyed = {**job, "scrape_interval": "1s", "static_configs": [{"targets": [target]}],
                 "authorization": {"credentials_file": str(key_file)}}
        plain = {**job, "job_name": "without-key", "scrape_interval": "1s",
                 "static_configs": [{"targets": [target]}]}
        config_file = tmp_path / "prometheus.yml"
        config_file.write_text(yaml.safe_dump({"global": {"scrape_interval": "1s"},
                                               "scrape_configs": [keyed, plain]}))
        port = free_port()
        process = subprocess.Popen(
            [prometheus, f"--config.file={config_file}", f"--web.listen-address=127.0.0.1:{port}",
             f"--storage.tsdb.path={tmp_path / 'tsdb'}"], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        try:
            def up() -> dict | None:
                answer = httpx.get(f"http://127.0.0.1:{port}/api/v1/query",
                                   params={"query": "up"}, timeout=5).json()
                found = {s["metric"]["job"]: s["value"][1] for s in answer["data"]["result"]}
                return found if len(found) == 2 else None

            assert wait_until(up, "both jobs scraped", timeout=60, processes=[process]) == \
                {"featurebudget": "1", "without-key": "0"}
        finally:
            process.terminate()
            process.wait(30)
