"""GET / PUT /v1/models/{m}/snapshot: download or restore a model (safe format)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from service.api.deps import (
    AppSettings,
    KeyCheckedRoute,
    Manager,
    ReadAccess,
    WriteAccess,
    read_body,
)
from service.api.openapi import SNAPSHOT_ANSWER, SNAPSHOT_BODY, SNAPSHOT_MEDIA
from service.schemas import SnapshotRestored

router = APIRouter(prefix="/v1/models/{model}", tags=["snapshots"],
                   route_class=KeyCheckedRoute)
MEDIA_TYPE = SNAPSHOT_MEDIA


class StateResponse(Response):
    media_type = MEDIA_TYPE


@router.get("/snapshot", dependencies=[ReadAccess], response_class=StateResponse,
            responses=SNAPSHOT_ANSWER)
async def get_snapshot(model: str, manager: Manager) -> Response:
    host = await manager.get(model)
    blob = await host.export_snapshot()
    return Response(blob, media_type=MEDIA_TYPE, headers={
        "Content-Disposition": f'attachment; filename="{host.name}.fbstate"'})


@router.put("/snapshot", response_model=SnapshotRestored, dependencies=[WriteAccess],
            openapi_extra=SNAPSHOT_BODY)
async def put_snapshot(model: str, request: Request, manager: Manager,
                       settings: AppSettings) -> dict:
    host = await manager.get(model)
    blob = await read_body(request, settings.max_body_bytes)
    return await host.restore_snapshot(blob)
