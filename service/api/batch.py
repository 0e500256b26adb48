"""Batch models: retrain jobs, versions, rollback, the next group, the trained sequence."""

from __future__ import annotations

import numpy as np
import orjson
from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse

from service.api.deps import (
    AppSettings,
    KeyCheckedRoute,
    Manager,
    ReadAccess,
    WriteAccess,
    read_body,
)
from service.api.media import request_media_type, require_json
from service.api.openapi import ERROR_RESPONSES, NEXT_BODIES, RETRAIN_LINKS, body_schema
from service.batch.serving.model_pages import models_page, notice_page
from service.batch.serving.page import sequence_page
from service.errors import MalformedBodyError, ServiceError, item_error
from service.priority import predicting
from service.schemas import (
    JobList,
    JobPublic,
    NextAnswers,
    NextRequest,
    NextResponse,
    RollbackDone,
    RollbackRequest,
    VersionList,
)

router = APIRouter(prefix="/v1/models/{model}", tags=["batch models"],
                   route_class=KeyCheckedRoute)


@router.post("/retrain", status_code=202, dependencies=[WriteAccess],
             responses={202: RETRAIN_LINKS}, response_model=JobPublic,
             response_model_exclude_unset=True)
async def retrain(model: str, manager: Manager) -> dict:
    """Queue a retrain on everything appended so far; 202 with the job."""
    return await (await manager.get(model)).retrain()


@router.get("/jobs", dependencies=[ReadAccess], response_model=JobList,
            response_model_exclude_unset=True)
async def list_jobs(model: str, manager: Manager) -> dict:
    host = await manager.get(model)
    return {"model": host.name, "jobs": await host.jobs()}


@router.get("/jobs/{job_id}", dependencies=[ReadAccess], response_model=JobPublic,
            response_model_exclude_unset=True)
async def get_job(model: str, job_id: str, manager: Manager) -> dict:
    return await (await manager.get(model)).job(job_id)


@router.delete("/jobs/{job_id}", status_code=202, dependencies=[WriteAccess],
               response_model=JobPublic, response_model_exclude_unset=True)
async def cancel_job(model: str, job_id: str, manager: Manager) -> dict:
    """Cancel a retrain job: a queued one at once (``status`` "cancelled"), a running one at
    its fit's next progress step (``cancel_requested``: true; it then ends "cancelled" and
    publishes nothing); 409 for a job that already succeeded or failed."""
    return await (await manager.get(model)).cancel_job(job_id)


@router.get("/versions", dependencies=[ReadAccess], response_model=VersionList)
async def list_versions(model: str, manager: Manager) -> dict:
    return await (await manager.get(model)).versions()


@router.post("/rollback", dependencies=[WriteAccess], response_model=RollbackDone)
async def rollback(model: str, body: RollbackRequest, manager: Manager) -> dict:
    return await (await manager.get(model)).rollback(body.version)


@router.post("/next", dependencies=[ReadAccess], response_model=NextResponse | NextAnswers,
             openapi_extra=body_schema(NextRequest, NEXT_BODIES))
async def next_group(model: str, request: Request, manager: Manager,
                     settings: AppSettings) -> dict:
    """The group to compute next given ``computed_groups`` (and a ``max_cost``; ``budget``
    is its deprecated alias); with ``examples`` (and an optional ``exchange_rate``), one
    answer per example from the values it carries. The body is read and checked by hand
    (the same problem details as ``/predict``); its schema is
    :class:`~service.schemas.NextRequest`."""
    host = await manager.get(model)
    body = await read_body(request, settings.max_body_bytes)
    require_json(request_media_type(request), body)
    try:
        document = orjson.loads(body) if body.strip() else {}
    except orjson.JSONDecodeError as exc:
        raise MalformedBodyError(f"body is not valid JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise item_error("body must be an object", field="body")
    with predicting():
        answer = await host.next_group(document)
    if "answers" in answer:  # built in NextAnswers' shape: written as is (0.3 ms less)
        return Response(orjson.dumps(answer, default=_plain), media_type="application/json")
    return answer


def _plain(value):
    """A numpy scalar as the Python number orjson writes (TypeError for anything else)."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON")


@router.get("/sequence", dependencies=[ReadAccess])
async def sequence(model: str, manager: Manager) -> Response:
    host = await manager.get(model)
    payload = {"model": host.name, **await host.sequence()}
    return Response(orjson.dumps(payload), media_type="application/json")


@router.get("/acquisition", dependencies=[ReadAccess])
async def acquisition(model: str, manager: Manager) -> dict:
    """What the served version's per-example next-group policy does on its held-out rows:
    episodes from no group computed at a few exchange rates (first and second choices,
    mean cost, held-out loss and metric at the stop) and the gate's verdict. The first
    request starts computing it on a background thread (and the policy, if no per-example
    ``/next`` has): ``state`` "building" until it is "ready"; "none" with a ``reason``
    for a version without a policy."""
    return await (await manager.get(model)).acquisition()


def _notice(status: int) -> dict:
    """404/409 of the page: problem+json, or for a browser (Accept naming text/html) a page
    saying why there is no curve and what to do."""
    response = ERROR_RESPONSES[status]
    return {**response, "content": {**response["content"],
                                    "text/html": {"schema": {"type": "string"}}}}


@router.get("/sequence.html", response_class=HTMLResponse, dependencies=[ReadAccess],
            responses={404: _notice(404), 409: _notice(409)})
async def sequence_html(model: str, manager: Manager, request: Request) -> HTMLResponse:
    """The anytime curve and the sequence of the served version, as a page; without one
    (no version yet, an online model, an unknown name) the API's problem+json, or for a
    browser (its Accept names text/html) a page saying why and what to do, with the same
    status."""
    try:
        host = await manager.get(model)
        if host.kind == "batch":
            await host.require_version()
        rows = await host.sequence()
        policy = await host.acquisition()
    except ServiceError as exc:
        if "text/html" not in request.headers.get("accept", ""):
            raise
        return HTMLResponse(notice_page(model, exc.detail, exc.status),
                            status_code=exc.status)
    return HTMLResponse(sequence_page(host.name, host.family, host.spec.task, rows,
                                      policy=policy))


ui = APIRouter(tags=["pages"], route_class=KeyCheckedRoute)


@ui.get("/ui", response_class=HTMLResponse, dependencies=[ReadAccess])
async def models_ui(manager: Manager) -> HTMLResponse:
    """Every model, with a link to each batch model's curve."""
    models = [await host.describe(features=False) for host in manager.all_hosts()]
    return HTMLResponse(models_page(models))
