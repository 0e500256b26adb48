"""Examples in (log append), predictions out, delayed feedback."""

from __future__ import annotations

import re

import orjson
from fastapi import APIRouter, Query, Request, Response

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
from service.api.media import example_format, request_media_type, require_json
from service.api.openapi import EXAMPLES_BODY, PREDICT_BODY, PREDICT_LINKS
from service.errors import MalformedBodyError, NotFoundError, ServiceError, item_error
from service.ingest import examples_in
from service.manager import RepeatedRequest
from service.priority import loop_seconds, offload, predicting
from service.schemas import ExamplesAccepted, FeedbackRequest, FeedbackResponse

router = APIRouter(prefix="/v1/models/{model}", tags=["examples"],
                   route_class=KeyCheckedRoute)
_IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,128}")
_PARSE_RATE = {"json": "parse_json", "libsvm": "parse_libsvm", "bin": "parse_bin"}


def _media_type(request: Request) -> str:
    return request.headers.get("content-type", "application/json").split(";")[0].strip().lower()


@router.post("/examples", status_code=202, response_model=ExamplesAccepted,
             openapi_extra=EXAMPLES_BODY, dependencies=[WriteAccess],
             responses={200: {"model": ExamplesAccepted,
                              "description": "with dry_run=true: the body checked as an "
                                             "append would check it; nothing appended"}})
async def post_examples(model: str, request: Request, response: Response, manager: Manager,
                        settings: AppSettings, wait: bool = False,
                        dry_run: bool = Query(False, description=(
                            "check the body as it would be appended and append nothing "
                            "(200, empty log_ids)"))) -> dict:
    host = await manager.get(model)
    body = await read_body(request, settings.max_body_bytes)
    media_type = _media_type(request)
    fmt = None
    try:
        fmt = example_format(media_type, body)  # 415: a type it does not read, JSON as libsvm
        cost = loop_seconds(_PARSE_RATE[fmt], len(body))
        batch, fmt = await offload(host.parse_examples, body, media_type, cost=cost)
    except ServiceError:  # the body's examples counted (none for a 415; big: in a thread)
        count = 0 if fmt is None else await offload(examples_in, body, fmt, cost=cost)
        metrics.count_rejected(host.name, "api", count)
        raise
    key = request.headers.get("idempotency-key")
    if key is not None and not _IDEMPOTENCY_KEY.fullmatch(key):
        raise item_error("must be 1 to 128 visible ASCII characters", field="Idempotency-Key")
    if dry_run:  # parsed and checked as an append would be; nothing is appended
        response.status_code = 200
        return {"model": host.name, "accepted": len(batch), "log_ids": [], "applied": False}
    repeated, accepted = False, len(batch)
    try:
        ids = await manager.append(host, [batch], fmt, idempotency_key=key)
    except RepeatedRequest as repeat:  # the first request's answer: its ids and count
        ids, repeated = repeat.ids, True
        if repeat.examples is not None:  # (None: a key stored by an earlier version)
            accepted = repeat.examples
    if wait:
        await host.wait_applied(ids[-1])
    return {"model": host.name, "accepted": accepted, "log_ids": ids, "applied": wait,
            "repeated": repeated}


@router.post("/predict", dependencies=[ReadAccess], openapi_extra=PREDICT_BODY,
             responses={200: PREDICT_LINKS})  # online (PredictResponse) or batch answers
async def predict(model: str, request: Request, manager: Manager,
                  settings: AppSettings) -> Response:
    return await predict_response(request, manager, settings, model)


async def predict_response(request: Request, manager, settings, model: str) -> Response:
    """``POST /v1/models/{model}/predict`` once its key is checked: the route's body, and
    what :class:`service.api.edge.RequestEdge` answers without the router."""
    host = await manager.get(model)
    body = await read_body(request, settings.max_body_bytes)
    require_json(request_media_type(request), body)
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MalformedBodyError(f"body is not valid JSON: {exc}",
                            [{"field": "body", "message": str(exc)}]) from exc
    if not isinstance(document, dict) or not isinstance(document.get("examples"), list):
        raise item_error("body must be {\"examples\": [...]}", field="examples")
    with predicting():
        payload = await host.predict(document, lambda: require_write(request))
    return Response(orjson.dumps(payload), media_type="application/json")


@router.post("/feedback", response_model=FeedbackResponse, dependencies=[WriteAccess])
async def post_feedback(model: str, body: FeedbackRequest, manager: Manager) -> dict:
    host = await manager.get(model)
    result = await host.feedback(body.prediction_id, body.label or -1)  # (0 read as -1)
    if result is None:
        raise NotFoundError(f"no pending prediction {body.prediction_id!r} (unknown or expired)")
    return {"model": host.name, "prediction_id": body.prediction_id, **result}

