"""/v1/models: create, list, inspect, delete; selected features."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Query, Response
from pydantic import Field

from service.api.create_body import CreateRoute
from service.api.deps import KeyCheckedRoute, Manager, ReadAccess, WriteAccess
from service.api.openapi import CREATE_LINKS, LIST_LINKS
from service.fold_cause import NO_WORKER, batch_workers
from service.schemas import BatchModelPublic, ModelCreate, ModelPublic, SelectedFeature

router = APIRouter(prefix="/v1/models", tags=["models"], route_class=KeyCheckedRoute)
AnyModel = ModelPublic | BatchModelPublic
_WARNINGS = ("what the model needs that is missing, e.g. a batch model on Redis with no "
             "`featurebudget worker` running")


class CreatedModel(ModelPublic):
    warnings: list[str] = Field(default_factory=list, description=_WARNINGS)


class CreatedBatchModel(BatchModelPublic):
    warnings: list[str] = Field(default_factory=list, description=_WARNINGS)


# (no docstring: it would be the OpenAPI description) called by CreateRoute, which reads
# and parses the body off the event loop when it is big
async def create_model(body: ModelCreate, manager: Manager) -> dict:
    host = await manager.create(body)
    return {**await host.describe(), "warnings": await _warnings(manager, host)}


async def _warnings(manager, host) -> list[str]:
    """A batch model on a shared backend that no live batch worker will fold."""
    if host.kind != "batch" or not manager.storage.shared or manager.batch.worker is not None:
        return []
    if await batch_workers(manager.storage, manager.settings):
        return []
    return [NO_WORKER]


router.add_api_route("", create_model, methods=["POST"], status_code=201,
                     response_model=CreatedModel | CreatedBatchModel,
                     dependencies=[WriteAccess],
                     responses={201: CREATE_LINKS}, route_class_override=CreateRoute)


@router.get("", dependencies=[ReadAccess], responses={200: LIST_LINKS})
async def list_models(manager: Manager) -> dict:
    # Each description waits on the backend (the log's end, the serving view's token):
    # concurrently, a hundred models cost a few round trips, not two hundred in a row.
    models = await asyncio.gather(*(host.describe(features=False)
                                    for host in manager.all_hosts()))
    return {"models": list(models)}


@router.get("/{model}", response_model=AnyModel, dependencies=[ReadAccess])
async def get_model(model: str, manager: Manager, features: bool = True) -> dict:
    return await (await manager.get(model)).describe(features=features)


@router.delete("/{model}", status_code=204, dependencies=[WriteAccess])
async def delete_model(model: str, manager: Manager) -> Response:
    await manager.delete(model)
    return Response(status_code=204)


@router.get("/{model}/features", response_model=list[SelectedFeature],
            dependencies=[ReadAccess])
async def get_features(model: str, manager: Manager) -> list:
    return await (await manager.get(model)).selected_features()


@router.get("/{model}/deadletters", dependencies=[ReadAccess])
async def get_deadletters(model: str, manager: Manager,
                          count: int = Query(100, ge=1, le=1000)) -> dict:
    host = await manager.get(model)
    return {"model": host.name,
            "entries": await manager.storage.read_deadletters(host.name, count)}
