"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import PlainTextResponse

from service import metrics
from service.api.deps import Manager

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict:
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "storage unreachable, models being "
                                          "restored, or a model not folded (detail says "
                                          "which)",
                                          "content": {"application/json": {}}}})
async def readyz(manager: Manager) -> Response:
    import orjson

    try:
        await manager.storage.ping()
    except Exception as exc:  # storage unreachable
        body = {"status": "unavailable", "backend": manager.storage.kind,
                "detail": f"storage unreachable: {exc}"}
        return Response(orjson.dumps(body), status_code=503, media_type="application/json")
    if not manager.restored:
        body = {"status": "starting", "backend": manager.storage.kind,
                "detail": "models are being restored"}
        return Response(orjson.dumps(body), status_code=503, media_type="application/json")
    stale = await manager.unfolded_models()
    if stale:
        body = {"status": "degraded", "backend": manager.storage.kind,
                "detail": "; ".join(stale), "unfolded": stale}
        return Response(orjson.dumps(body), status_code=503, media_type="application/json")
    if manager.failed:
        body = {"status": "degraded", "backend": manager.storage.kind,
                "detail": "; ".join(f"{k}: {v}" for k, v in manager.failed.items())}
        return Response(orjson.dumps(body), status_code=503, media_type="application/json")
    body = {"status": "ready", "backend": manager.storage.kind,
            "models": len(manager.all_hosts())}
    return Response(orjson.dumps(body), media_type="application/json")


@router.get("/metrics", response_class=PlainTextResponse)
async def get_metrics() -> Response:
    data, content_type = metrics.render()
    return Response(data, media_type=content_type)
