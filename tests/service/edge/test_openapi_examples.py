"""The example bodies of the OpenAPI document (what /docs and /redoc show for POST
/examples, /predict and /next) are typed, and each is accepted by a model of its kind:
posted as it stands, no 400, 415 or 422."""

from __future__ import annotations

from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings

ONLINE = {"name": "spam", "algorithm": "sofs", "n_features": 100, "budget": 5}
GROUPS = [{"name": "exam", "features": ["bmi", "bp"], "cost": 2.0},
          {"name": "lipids", "features": ["s1", "s2", "s3"], "cost": 3.0}]
BATCH = {"regression": {"name": "house", "algorithm": "cs-g-omp", "groups": GROUPS},
         "classification": {"name": "ward", "algorithm": "cs-g-omp", "groups": GROUPS,
                            "task": "classification"}}


def bodies(document: dict, path: str, media: str = "application/json") -> dict:
    content = document["paths"][path]["post"]["requestBody"]["content"][media]
    assert content["schema"], path
    return {name: example["value"] for name, example in content["examples"].items()}


def test_every_example_body_is_accepted_by_a_model_of_its_kind(tmp_path):
    with TestClient(create_app(Settings(data_dir=tmp_path / "data"))) as client:
        for body in (ONLINE, *BATCH.values()):
            assert client.post("/v1/models", json=body).status_code == 201, body
        document = client.get("/openapi.json").json()
        model = {"online": "spam", "batch_regression": "house",
                 "batch_classification": "ward", "batch_max_cost": "house",
                 "batch_computed_groups": "house", "per_set": "house",
                 "per_example": "house"}
        seen = []
        for route in ("examples", "predict", "next"):
            examples = bodies(document, f"/v1/models/{{model}}/{route}")
            assert examples, route
            for name, body in examples.items():
                answer = client.post(f"/v1/models/{model[name]}/{route}", json=body)
                # accepted as a body; a batch model without a version answers 409
                assert answer.status_code in (200, 202, 409), (route, name, answer.text)
                seen.append((route, name))
        assert {n for r, n in seen if r == "examples"} == {
            "online", "batch_regression", "batch_classification"}
        libsvm = document["paths"]["/v1/models/{model}/examples"]["post"]["requestBody"][
            "content"]["text/plain"]["example"]
        assert client.post("/v1/models/spam/examples", content=libsvm, headers={
            "content-type": "text/plain"}).status_code == 202
