"""Examples in (log append), predictions out, delayed feedback."""

from __future__ import annotations

import re

import orjson
from fastapi import APIRouter, Request, Response

from service import metrics
from service.api.deps import (
    AppSettings,
    KeyCheckedRoute,
    Manager,
    ReadAccess,
    WriteAccess,
    read_body,
    require_write,
)
from service.api.openapi import EXAMPLES_BODY, PREDICT_BODY, PREDICT_LINKS
from service.batch.host import BatchHost
from service.batch.ingest import parse_batch_body
from service.errors import (
    ConflictError,
    MalformedBodyError,
    NotFoundError,
    ServiceError,
    UnsupportedMediaTypeError,
    item_error,
)
from service.ingest import decode_bin, parse_json_body, parse_json_examples, parse_libsvm_body
from service.manager import RepeatedRequest
from service.priority import in_background
from service.schemas import ExamplesAccepted, FeedbackRequest, FeedbackResponse

router = APIRouter(prefix="/v1/models/{model}", tags=["examples"],
                   route_class=KeyCheckedRoute)
_IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,128}")
_BIG = 64 << 10  # parse bodies above this size in a worker thread


def _media_type(request: Request) -> str:
    return request.headers.get("content-type", "application/json").split(";")[0].strip().lower()


def _parse_examples(body: bytes, media_type: str, host):
    if isinstance(host, BatchHost):
        return parse_batch_body(body, media_type, host.layout, host.spec.task,
                                zero_based=host.spec.libsvm_zero_based)
    if media_type in ("application/json", "application/x-ndjson", ""):
        return parse_json_body(body, host.n_features, host.hasher), "json"
    if media_type in ("text/plain", "text/x-libsvm", "application/x-libsvm"):
        return parse_libsvm_body(body, host.n_features,
                                 zero_based=host.spec.libsvm_zero_based), "libsvm"
    if media_type in ("application/octet-stream", "application/x-featurebudget-batch"):
        return decode_bin(body, host.n_features, field="body", keep_raw=True), "bin"
    raise UnsupportedMediaTypeError(
        f"content type {media_type!r} is not supported; use application/json, text/plain "
        "(libsvm) or application/octet-stream (FBX1 binary)")


@router.post("/examples", status_code=202, response_model=ExamplesAccepted,
             openapi_extra=EXAMPLES_BODY,
             dependencies=[WriteAccess])
async def post_examples(model: str, request: Request, manager: Manager,
                        settings: AppSettings, wait: bool = False) -> dict:
    host = await manager.get(model)
    body = await read_body(request, settings.max_body_bytes)
    media_type = _media_type(request)
    try:
        if len(body) > _BIG:
            batch, fmt = await in_background(_parse_examples, body, media_type, host)
        else:
            batch, fmt = _parse_examples(body, media_type, host)
    except ServiceError:
        metrics.EXAMPLES_REJECTED.labels(host.name, "api").inc()
        raise
    key = request.headers.get("idempotency-key")
    if key is not None and not _IDEMPOTENCY_KEY.fullmatch(key):
        raise item_error("must be 1 to 128 visible ASCII characters", field="Idempotency-Key")
    repeated, accepted = False, len(batch)
    try:
        ids = await manager.append(host, [batch], fmt, idempotency_key=key)
    except RepeatedRequest as repeat:  # the first request's answer: its ids and count
        ids, repeated = repeat.ids, True
        if repeat.examples is not None:  # (None: a key stored by an earlier version)
            accepted = repeat.examples
    if wait:
        await manager.wait_applied(host, ids[-1])
    return {"model": host.name, "accepted": accepted, "log_ids": ids, "applied": wait,
            "repeated": repeated}


@router.post("/predict", dependencies=[ReadAccess], openapi_extra=PREDICT_BODY,
             responses={200: PREDICT_LINKS})  # online (PredictResponse) or batch answers
async def predict(model: str, request: Request, manager: Manager,
                  settings: AppSettings) -> Response:
    host = await manager.get(model)
    body = await read_body(request, settings.max_body_bytes)
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MalformedBodyError(f"body is not valid JSON: {exc}",
                            [{"field": "body", "message": str(exc)}]) from exc
    if not isinstance(document, dict) or not isinstance(document.get("examples"), list):
        raise item_error("body must be {\"examples\": [...]}", field="examples")
    if isinstance(host, BatchHost):  # never on the event loop (service/answers.py)
        payload = await request.app.state.answers.run(manager.batch.predict, host, document)
        return Response(orjson.dumps(payload), media_type="application/json")
    unknown = set(document) - {"examples", "return_prediction_ids"}
    if unknown:
        name = sorted(unknown)[0]
        hint = " (computed_groups and budget are for batch models)" \
            if name in ("computed_groups", "budget") else ""
        raise item_error(f"unknown fields {sorted(unknown)}{hint}", field=name)
    with_ids = document.get("return_prediction_ids", False)
    if not isinstance(with_ids, bool):
        raise item_error("must be true or false", field="return_prediction_ids")
    if with_ids:  # an id is only good for feedback, which writes
        await require_write(request)
    batch = parse_json_examples(document["examples"], host.n_features, host.hasher,
                                require_labels=False)
    scores, ids = await manager.predict(host, batch, with_ids)
    payload = {"model": host.name, "log_position": host.applied_id,
               "scores": scores.tolist(), "labels": [1 if s >= 0 else -1 for s in scores],
               "prediction_ids": ids}
    return Response(orjson.dumps(payload), media_type="application/json")


@router.post("/feedback", response_model=FeedbackResponse, dependencies=[WriteAccess])
async def post_feedback(model: str, body: FeedbackRequest, manager: Manager) -> dict:
    host = await manager.get(model)
    if isinstance(host, BatchHost):
        raise ConflictError(f"{model!r} is a batch model: post labelled examples to "
                            f"/v1/models/{model}/examples instead of feedback")
    result = await manager.feedback(host, body.prediction_id, body.label)
    if result is None:
        raise NotFoundError(f"no pending prediction {body.prediction_id!r} (unknown or expired)")
    return {"model": host.name, "prediction_id": body.prediction_id, **result}

