"""The OpenAPI document describes what the API answers: problem+json for every error status,
the request bodies the routes parse themselves, one feature space per model; and a 405
lists every method of the path."""

from __future__ import annotations

from service.app import create_app
from service.settings import Settings


def spec(tmp_path) -> dict:
    return create_app(Settings(data_dir=tmp_path / "data")).openapi()


def test_every_error_status_is_a_documented_problem(tmp_path):
    document = spec(tmp_path)
    for path, item in document["paths"].items():
        if not path.startswith("/v1") and path != "/ui":
            continue
        for method, operation in item.items():
            for status in ("400", "401", "403", "404", "409", "413", "415", "422", "503"):
                response = operation["responses"].get(status)
                assert response is not None, (method, path, status)
                assert "application/problem+json" in response["content"], (method, path, status)


def test_examples_and_predict_bodies_are_declared(tmp_path):
    paths = spec(tmp_path)["paths"]
    examples = paths["/v1/models/{model}/examples"]["post"]["requestBody"]["content"]
    assert set(examples) == {"application/json", "text/plain", "application/octet-stream"}
    predict = paths["/v1/models/{model}/predict"]["post"]["requestBody"]["content"]
    properties = predict["application/json"]["schema"]["properties"]
    assert {"examples", "computed_groups", "budget", "return_prediction_ids"} <= set(properties)


def test_the_create_schema_says_exactly_one_feature_space(tmp_path):
    schema = spec(tmp_path)["components"]["schemas"]["ModelCreate"]
    assert len(schema["oneOf"]) == 3


def test_a_405_lists_every_method_of_the_path(client):
    response = client.put("/v1/models/m")
    assert response.status_code == 405
    allowed = {m.strip() for m in response.headers["allow"].split(",")}
    assert {"GET", "DELETE"} <= allowed
    assert response.headers["content-type"].startswith("application/problem+json")
