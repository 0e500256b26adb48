"""What the OpenAPI document says beyond the pydantic schemas: the problem+json error body
of every 4xx/5xx the API answers, and the request bodies the routes parse themselves (JSON,
libsvm text, FBX1 binary) so that ``/docs`` can try them."""

from __future__ import annotations

from service.schemas import PredictResponse

PROBLEM = {
    "type": "object",
    "description": "RFC 9457 problem details; errors name the item / line and the field",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string"}, "title": {"type": "string"},
        "status": {"type": "integer"}, "detail": {"type": "string"},
        "errors": {"type": "array", "items": {"type": "object", "properties": {
            "message": {"type": "string"}, "field": {"type": "string"},
            "item": {"type": "integer"}, "line": {"type": "integer"}}}},
    },
}
_MEANINGS = {
    400: "malformed body (not JSON, or cut short)",
    401: "an API key is required",
    403: "this API key may not do this",
    404: "no such model, job or prediction id",
    409: "valid, but in conflict with the model's state (e.g. no version yet, wrong family)",
    413: "body over FEATUREBUDGET_MAX_BODY_BYTES",
    415: "unsupported content type",
    422: "invalid input, naming the item / line and field",
    503: "storage unavailable, or fewer Redis replicas than FEATUREBUDGET_REDIS_MIN_REPLICAS "
         "confirmed the write (it may or may not be kept): retry after Retry-After with the "
         "same Idempotency-Key; or the model is out of service",
    504: "the examples were not applied within the wait timeout (they are in the log)",
    507: "over the process's model memory budget",
}
ERROR_RESPONSES = {status: {"description": text,
                            "content": {"application/problem+json": {"schema": PROBLEM}}}
                   for status, text in _MEANINGS.items()}

# an example has features (named, or indices with their values); one to learn from has its
# label (online, batch classification) or target (batch regression) too, not null
_FEATURES = {"anyOf": [{"required": ["features"]}, {"required": ["indices", "values"]}]}
_ANSWER = {"anyOf": [{"required": [k], "properties": {k: {"not": {"type": "null"}}}}
                     for k in ("label", "target")]}
_EXAMPLE = {"type": "object", **_FEATURES, "description": "online: {indices, values} or "
            "{features: {namespace: {name: value}}}; batch: {features: {group: "
            "{feature: value}}} or {indices, values}"}
_LABELLED = {"type": "object", "allOf": [_FEATURES, _ANSWER], "description": "online: "
             "{indices, values, label} or {features: {namespace: {name: value}}, label}; "
             "batch: {features: {group: {feature: value}}, target | label} or {indices, "
             "values, target | label}"}
# typed example bodies per kind of model (shown by /docs and /redoc; tests/service/
# test_openapi_examples.py posts each to a model of its kind): an online model with
# n_features >= 20 (no hash_bits); a batch model with the groups exam (bmi, bp) and lipids
# (s1, s2, s3)
_ONLINE_ROWS = [{"indices": [3, 17], "values": [1.0, 0.5], "label": 1},
                {"indices": [4], "values": [2.0], "label": -1}]  # (0-based indices)
_BATCH_ROW = {"features": {"exam": {"bmi": 0.31, "bp": -0.2}, "lipids": {
    "s1": 0.05, "s2": -0.4, "s3": 1.2}}}
_EXAMPLE_BODIES = {
    "online": {"summary": "online model: feature indices and values, labels +1 / -1",
               "value": {"examples": _ONLINE_ROWS}},
    "batch_regression": {"summary": "batch regression model: features by group, a target",
                         "value": {"examples": [{**_BATCH_ROW, "target": 151.0}]}},
    "batch_classification": {"summary": "batch classification model: features by group, "
                             "a label", "value": {"examples": [{**_BATCH_ROW, "label": 1}]}}}
_PREDICT_BODIES = {
    "online": {"summary": "online model, with ids to send feedback on", "value": {
        "examples": [{k: v for k, v in row.items() if k != "label"} for row in _ONLINE_ROWS],
        "return_prediction_ids": True}},
    "batch_max_cost": {"summary": "batch model: the longest prefix of groups within a cost",
                       "value": {"examples": [_BATCH_ROW], "max_cost": 5.0}},
    "batch_computed_groups": {"summary": "batch model: exactly the groups computed",
                              "value": {"examples": [{"features": {
                                  "exam": _BATCH_ROW["features"]["exam"]}}],
                                  "computed_groups": ["exam"]}}}
NEXT_BODIES = {
    "per_set": {"summary": "the next group to compute after exam, within a cost",
                "value": {"computed_groups": ["exam"], "max_cost": 5.0}},
    "per_example": {"summary": "each example's next group from the values it carries",
                    "value": {"examples": [{"features": {
                        "exam": _BATCH_ROW["features"]["exam"]}}], "exchange_rate": 0.1}}}
EXAMPLES_BODY = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": {"type": "object", "required": ["examples"], "properties": {
        "examples": {"type": "array", "items": _LABELLED, "minItems": 1}}},
        "examples": _EXAMPLE_BODIES},
    "text/plain": {"schema": {"type": "string", "description":
                              "libsvm lines: label index:value ... (1-based indices)"},
                   "example": "1 3:1.0 17:0.5\n-1 4:2.0\n"},
    "application/octet-stream": {"schema": {"type": "string", "format": "binary",
                                            "description": "an FBX1 batch (service.fbx1)"}},
}}}
PREDICT_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "required": ["examples"], "properties": {
        "examples": {"type": "array", "items": _EXAMPLE, "minItems": 1},
        "return_prediction_ids": {"type": "boolean", "description": "online models"},
        "computed_groups": {"type": "array", "items": {"type": "string"},
                            "description": "batch models: use exactly these groups"},
        "max_cost": {"type": "number", "minimum": 0,
                     "description": "batch models: the longest prefix within this cost"},
        "budget": {"type": "number", "minimum": 0, "deprecated": True,
                   "description": "batch models: deprecated alias of max_cost"}},
    "not": {"anyOf": [{"required": pair} for pair in (  # one selection, under one name
        ["max_cost", "budget"], ["computed_groups", "max_cost"], ["computed_groups", "budget"])]},
}, "examples": _PREDICT_BODIES}}}}


def body_schema(model, examples: dict | None = None) -> dict:
    """``openapi_extra`` declaring a JSON request body of the pydantic ``model``'s schema
    (for routes that read and check their body by hand), with named ``examples``."""
    media = {"schema": model.model_json_schema()}
    if examples:
        media["examples"] = examples
    return {"requestBody": {"required": False, "content": {"application/json": media}}}


SNAPSHOT_MEDIA = "application/vnd.featurebudget.state"
_STATE = {"type": "string", "format": "binary", "description": "a model's state: an .npz "
          "archive (a zip of .npy members, no pickles; the first member __meta__.json holds "
          "the scalars), as GET /snapshot writes it"}
SNAPSHOT_BODY = {"requestBody": {"required": True, "description": "a blob from GET /snapshot "
                                 "of a model of the same configuration (anything else: 422, "
                                 "nothing changed)",
                                 "content": {SNAPSHOT_MEDIA: {"schema": _STATE}}}}
SNAPSHOT_ANSWER = {200: {"description": "the model's state",
                         "content": {SNAPSHOT_MEDIA: {"schema": _STATE}}}}


def _link(path: str, method: str, description: str, **parameters: str) -> dict:
    pointer = path.replace("~", "~0").replace("/", "~1")
    return {"operationRef": f"#/paths/{pointer}/{method}", "description": description,
            "parameters": parameters}


_MODEL = "$response.body#/name"
_M = "/v1/models/{model}"
# OpenAPI links: which responses feed which calls (clients, /docs and stateful fuzzers
# follow them: create -> examples -> predict -> feedback, retrain -> its job)
CREATE_LINKS = {"links": {
    "GetModel": _link(_M, "get", "inspect the new model", model=_MODEL),
    "PostExamples": _link(f"{_M}/examples", "post", "post its examples", model=_MODEL),
    "Predict": _link(f"{_M}/predict", "post", "predict with it", model=_MODEL),
    "GetSnapshot": _link(f"{_M}/snapshot", "get", "download its state", model=_MODEL),
    "PutSnapshot": _link(f"{_M}/snapshot", "put", "restore its state", model=_MODEL),
    "GetFeatures": _link(f"{_M}/features", "get", "its selected features", model=_MODEL),
    "Retrain": _link(f"{_M}/retrain", "post", "retrain it (batch models)", model=_MODEL),
    "Versions": _link(f"{_M}/versions", "get", "its versions (batch models)", model=_MODEL),
    "DeleteModel": _link(_M, "delete", "delete it", model=_MODEL),
}}
_FIRST = "$response.body#/models/0/name"
LIST_LINKS = {"links": {
    "GetModel": _link(_M, "get", "inspect the first model listed", model=_FIRST),
    "PostExamples": _link(f"{_M}/examples", "post", "post its examples", model=_FIRST),
    "Predict": _link(f"{_M}/predict", "post", "predict with it", model=_FIRST),
    "GetSnapshot": _link(f"{_M}/snapshot", "get", "download its state", model=_FIRST),
    "Jobs": _link(f"{_M}/jobs", "get", "its retrain jobs (batch models)", model=_FIRST),
}}
_BATCH_PREDICTION = {
    "type": "object", "title": "BatchPredictResponse", "required": ["model", "predictions"],
    "description": "a batch model's answer: predictions (labels, probabilities) per example; "
    "groups_used, cost, expected_explained_variance, next_group scalars when every example "
    "had the same computed groups, else lists", "properties": {
        "model": {"type": "string"}, "version": {"type": ["integer", "null"]},
        "predictions": {"type": "array", "items": {"type": "number"}},
        "labels": {"type": "array", "items": {"type": "integer"}}}}
PREDICT_LINKS = {"links": {
    "Feedback": {**_link(f"{_M}/feedback", "post", "the true label of the first prediction",
                         model="$request.path.model"),
                 "requestBody": {"prediction_id": "$response.body#/prediction_ids/0",
                                 "label": 1}},
}, "content": {"application/json": {"schema": {"anyOf": [
    PredictResponse.model_json_schema(), _BATCH_PREDICTION]}}}}
RETRAIN_LINKS = {"links": {
    "GetJob": _link(f"{_M}/jobs/{{job_id}}", "get", "follow the queued job",
                    model="$request.path.model", job_id="$response.body#/id"),
}}
