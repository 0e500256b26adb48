"""Shared route dependencies: the manager, settings, API-key roles, bounded body reading.

The dependencies are coroutines: FastAPI runs a plain ``def`` dependency in its thread pool,
one hop per dependency per request (a prediction had a dozen), where these run inline.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request, Response
from fastapi.routing import APIRoute

from service.api.media import request_media_type, require_json
from service.errors import BodyTooLargeError
from service.manager import ModelManager
from service.settings import Settings


async def get_manager(request: Request) -> ModelManager:
    return request.app.state.manager


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


Manager = Annotated[ModelManager, Depends(get_manager)]
AppSettings = Annotated[Settings, Depends(get_settings)]


def presented_key(request: Request) -> str | None:
    """The API key a request presents (X-API-Key, or Authorization: Bearer), or None."""
    key = request.headers.get("x-api-key")
    if key:
        return key
    authorization = request.headers.get("authorization", "")
    if authorization.lower().startswith("bearer "):
        return authorization[7:].strip()
    return None


def check_key(roles: dict[str, str], request: Request, role: str) -> None:
    """The one API-key check: with ``roles`` configured (key -> "read" | "write"), 401
    without a valid key, 403 for a read key on a write ``role``. O(headers)."""
    if not roles:
        return
    key = presented_key(request)
    if key is None or key not in roles:
        raise HTTPException(401, "a valid API key is required (X-API-Key or Bearer)",
                            headers={"WWW-Authenticate": "Bearer"})
    if role == "write" and roles[key] != "write":
        raise HTTPException(403, "this API key may only read and predict")


def require_role(request: Request, role: str) -> None:
    """:func:`check_key` against the app's configured keys."""
    check_key(request.app.state.key_roles, request, role)


async def require_read(request: Request) -> None:
    require_role(request, "read")


async def require_write(request: Request) -> None:
    require_role(request, "write")


ReadAccess = Depends(require_read)
WriteAccess = Depends(require_write)


class KeyCheckedRoute(APIRoute):
    """A route whose API-key check (its ``ReadAccess`` / ``WriteAccess`` dependency) runs
    first, before its body is read: FastAPI decodes a declared JSON body before it runs the
    dependencies, so a malformed body was answered 400 to a request without a valid key.
    Now every route answers 401 / 403 first. (The dependency stays: it is cheap, and
    documents the route.) Then a declared JSON body of another content type is answered
    415, as the routes that read their body themselves answer it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        calls = {getattr(d, "dependency", None) for d in self.dependencies}
        role = "write" if require_write in calls else "read" if require_read in calls else None
        json_body = self.body_field is not None  # a body FastAPI decodes as JSON
        if role is None and not json_body:
            return handler

        async def checked(request: Request) -> Response:
            if role is not None:
                require_role(request, role)
            if json_body:  # 415 for another content type (service.api.media)
                require_json(request_media_type(request), await request.body())
            return await handler(request)

        return checked


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, or BodyTooLargeError once it passes ``limit`` bytes. (A declared
    Content-Length over the limit is answered before routing, by
    :class:`service.api.edge.RequestEdge`.)"""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLargeError(f"body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
