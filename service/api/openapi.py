"""What the OpenAPI document says beyond the pydantic schemas: the problem+json error body
of every 4xx/5xx the API answers, and the request bodies the routes parse themselves (JSON,
libsvm text, FBX1 binary) so that ``/docs`` can try them."""

from __future__ import annotations

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
    503: "storage unavailable (retry after Retry-After), or the model is out of service",
    504: "the examples were not applied within the wait timeout (they are in the log)",
    507: "over the process's model memory budget",
}
ERROR_RESPONSES = {status: {"description": text,
                            "content": {"application/problem+json": {"schema": PROBLEM}}}
                   for status, text in _MEANINGS.items()}

_EXAMPLE = {"type": "object", "description": "online: {indices, values, label} or "
            "{features: {namespace: {name: value}}, label}; batch: {features: {group: "
            "{feature: value}}, target | label} or {indices, values, target | label}"}
EXAMPLES_BODY = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": {"type": "object", "required": ["examples"], "properties": {
        "examples": {"type": "array", "items": _EXAMPLE}}}},
    "text/plain": {"schema": {"type": "string", "description":
                              "libsvm lines: label index:value ... (1-based indices)"}},
    "application/octet-stream": {"schema": {"type": "string", "format": "binary",
                                            "description": "an FBX1 batch (service.wire)"}},
}}}
PREDICT_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "required": ["examples"], "properties": {
        "examples": {"type": "array", "items": _EXAMPLE, "minItems": 1},
        "return_prediction_ids": {"type": "boolean", "description": "online models"},
        "computed_groups": {"type": "array", "items": {"type": "string"},
                            "description": "batch models: use exactly these groups"},
        "budget": {"type": "number", "minimum": 0,
                   "description": "batch models: the longest prefix within this cost"}}}}}}}
