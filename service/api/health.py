"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import weakref

import orjson
from fastapi import APIRouter, Request, Response
from fastapi.responses import PlainTextResponse

from service import metrics
from service.api.deps import AppSettings, Manager, require_role
from service.api.openapi import ERROR_RESPONSES

router = APIRouter(tags=["health"])
ORPHANS_EVERY = 30.0  # seconds between two looks (a SCAN of every key) for orphan streams
READY_EVERY = 5.0  # seconds between two readiness checks of a process (its gauge)
_orphans: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # storage -> (when, names)


async def orphan_streams(storage) -> list[str]:
    """The models named by a log stream that no model reads (a producer wrote to a name
    that does not exist): at most one look per ``ORPHANS_EVERY`` s (a SCAN, then the
    model list); the gauge follows. On a storage error, the last answer."""
    when, names = _orphans.get(storage, (-math.inf, []))
    if time.monotonic() - when < ORPHANS_EVERY:
        return names
    try:
        streams = await storage.stream_models()
        names = sorted(streams - set(await storage.load_models())) if streams else []
    except Exception:  # (readiness reports the storage itself)
        return names
    _orphans[storage] = (time.monotonic(), names)
    metrics.ORPHAN_STREAMS.set(len(names))
    return names


@router.get("/healthz")
async def healthz() -> dict:
    return {"status": "ok"}


async def readiness(manager) -> tuple[int, dict]:
    """What ``/readyz`` answers (status code, body); sets ``featurebudget_ready``. One
    storage ping and one read of the models' heartbeats."""
    backend = manager.storage.kind
    try:
        await manager.storage.ping()
    except Exception as exc:  # storage unreachable
        body = {"status": "unavailable", "backend": backend,
                "detail": f"storage unreachable: {exc}"}
        return _ready(503, body)
    if not manager.restored:
        return _ready(503, {"status": "starting", "backend": backend,
                            "detail": "models are being restored"})
    stale = await manager.unfolded_models()
    if stale:
        return _ready(503, {"status": "degraded", "backend": backend,
                            "detail": "; ".join(stale), "unfolded": stale})
    if manager.failed:
        return _ready(503, {"status": "degraded", "backend": backend, "detail": "; ".join(
            f"{k}: {v}" for k, v in manager.failed.items())})
    unserved = manager.serving_errors()
    if unserved:
        body = {"status": "degraded", "backend": backend,
                "detail": "; ".join(f"{k}: cannot serve {v}" for k, v in unserved.items()),
                "serving_errors": unserved}
        return _ready(503, body)
    body = {"status": "ready", "backend": backend, "models": len(manager.all_hosts())}
    orphans = await orphan_streams(manager.storage)
    if orphans:  # reported, not failing readiness: the service itself is fine
        body["orphan_streams"] = orphans
        body["detail"] = (f"log streams with no model to read them: {', '.join(orphans)} "
                          "(a producer writes to a model that does not exist)")
    return _ready(200, body)


def _ready(status: int, body: dict) -> tuple[int, dict]:
    metrics.READY.labels(body["backend"]).set(1 if status == 200 else 0)
    return status, body


async def watch_readiness(manager, every: float = READY_EVERY) -> None:
    """Keep this process's ``featurebudget_ready`` current (every ``every`` s, until
    cancelled), whichever process a scrape or probe reaches."""
    while True:
        with contextlib.suppress(Exception):  # (a failure is the next look's answer)
            await readiness(manager)
        await asyncio.sleep(every)


@router.get("/readyz", responses={503: {"description": "storage unreachable, models being "
                                          "restored, or a model not folded (detail says "
                                          "which)",
                                          "content": {"application/json": {}}}})
async def readyz(manager: Manager) -> Response:
    status, body = await readiness(manager)
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


@router.get("/metrics", response_class=PlainTextResponse,
            responses={401: {**ERROR_RESPONSES[401], "description": "with "
                             "FEATUREBUDGET_METRICS_KEY_REQUIRED: an API key is required"}})
async def get_metrics(request: Request, settings: AppSettings, manager: Manager) -> Response:
    """Prometheus text; open unless ``FEATUREBUDGET_METRICS_KEY_REQUIRED`` (then a key of
    either role)."""
    if settings.metrics_key_required:
        require_role(request, "read")
    await orphan_streams(manager.storage)  # (the gauge, at most once per ORPHANS_EVERY)
    data, content_type = metrics.render()
    return Response(data, media_type=content_type)
