"""Predictions straight to their code: ``POST /v1/models/{model}/predict`` without the router.

A prediction is the latency-critical request. Routed by FastAPI it also paid for the match
against every route, the dependency resolution and the exception-handling wrappers: about a
quarter of its CPU on the event loop (py-spy of a server answering 1,000 budgeted
predictions a second). :class:`PredictPath`, an ASGI middleware inside the body-size limit,
answers exactly that path and method itself with the route's own code
(:func:`service.api.examples.predict_response`) after the same key check, and renders an
error through the app's own exception handlers, so the answer, status and headers are what
the route gives. Every other request goes on to the app; the route stays registered (the
OpenAPI document, and the same answer for anything this does not match).
"""

from __future__ import annotations

from starlette.requests import Request

from service.api.deps import require_role
from service.api.examples import predict_response

_PREFIX, _SUFFIX = "/v1/models/", "/predict"


def model_of(path: str) -> str | None:
    """The ``{model}`` of ``/v1/models/{model}/predict`` (one non-empty path segment, as
    the route matches it), else None."""
    if not (path.startswith(_PREFIX) and path.endswith(_SUFFIX)):
        return None
    name = path[len(_PREFIX):-len(_SUFFIX)]
    return name if name and "/" not in name else None


class PredictPath:
    """ASGI middleware: ``POST /v1/models/{model}/predict`` answered here (module
    docstring), anything else passed to ``app``."""

    def __init__(self, app, *, handlers: dict) -> None:
        self.app = app
        self.handlers = handlers  # the app's exception handlers (by class), read per error

    async def __call__(self, scope, receive, send) -> None:
        name = None
        if scope["type"] == "http" and scope["method"] == "POST":
            path, root = scope["path"], scope.get("root_path", "")
            name = model_of(path[len(root):] if root and path.startswith(root) else path)
        if name is None:
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        state = request.app.state
        try:
            require_role(request, "read")
            response = await predict_response(request, state.manager, state.settings, name)
        except Exception as exc:  # rendered as the route's error would be
            response = await self._handled(request, exc)
        await response(scope, receive, send)

    async def _handled(self, request: Request, exc: Exception):
        for cls in type(exc).__mro__:
            handler = self.handlers.get(cls)
            if handler is not None:
                return await handler(request, exc)
        raise exc
