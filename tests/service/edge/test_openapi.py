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


def test_what_the_fuzzer_found_the_document_did_not_say(tmp_path):
    """/metrics is text, /readyz may answer 503, PUT /snapshot takes a body, /predict answers
    a batch model's shape too, and a null feature space counts as absent (as the API
    reads it)."""
    import jsonschema_rs

    document = spec(tmp_path)
    paths = document["paths"]
    assert set(paths["/metrics"]["get"]["responses"]["200"]["content"]) == {"text/plain"}
    assert "503" in paths["/readyz"]["get"]["responses"]
    assert paths["/v1/models/{model}/snapshot"]["put"]["requestBody"]["required"]
    answers = paths["/v1/models/{model}/predict"]["post"]["responses"]["200"]["content"]
    predict = jsonschema_rs.validator_for(answers["application/json"]["schema"])
    assert predict.is_valid({"model": "m", "log_position": "3", "scores": [0.5],
                             "labels": [1], "prediction_ids": None})
    assert predict.is_valid({"model": "b", "version": 2, "predictions": [1.5],
                             "groups_used": ["g"], "cost": 1.0, "next_group": None})
    create = jsonschema_rs.validator_for({**document,
                                          "$ref": "#/components/schemas/ModelCreate"})
    assert create.is_valid({"name": "x", "algorithm": "ogd", "n_features": 3, "groups": None})
    assert not create.is_valid({"name": "x", "algorithm": "ogd", "groups": None})
    assert not create.is_valid({"name": "x", "algorithm": "ogd", "n_features": 3,
                                "hash_bits": 4})


def test_links_lead_from_a_created_model_to_its_calls(tmp_path):
    paths = spec(tmp_path)["paths"]
    links = paths["/v1/models"]["post"]["responses"]["201"]["links"]
    assert links["PostExamples"]["operationRef"] == "#/paths/~1v1~1models~1{model}~1examples/post"
    assert links["Predict"]["parameters"] == {"model": "$response.body#/name"}
    feedback = paths["/v1/models/{model}/predict"]["post"]["responses"]["200"]["links"]
    assert feedback["Feedback"]["requestBody"]["prediction_id"] == \
        "$response.body#/prediction_ids/0"
    job = paths["/v1/models/{model}/retrain"]["post"]["responses"]["202"]["links"]["GetJob"]
    assert job["parameters"]["job_id"] == "$response.body#/id"
    for link in [*links.values(), *feedback.values(), job]:  # every link names a real operation
        _, _, path, method = link["operationRef"].split("/")
        assert method in paths[path.replace("~1", "/").replace("~0", "~")]
