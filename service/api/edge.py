"""The request edge: one ASGI layer between the outermost middleware (headers, metrics,
unexpected errors: ``service.app.AnswerMiddleware``) and the router, for every HTTP request.

In order, O(headers) before anything is read:

1. **Body size.** A declared ``Content-Length`` over ``max_body_bytes`` is answered before
   the body is read: 413, or 401 first when API keys are configured and the request has no
   valid one (a client learns nothing of the limits without a key). A body without a
   declared length is bounded where it is read (``service.api.deps.read_body``).
2. **The predictions' short path.** ``POST /v1/models/{model}/predict`` is answered here,
   with the route's own code (:func:`service.api.examples.predict_response`) after the same
   key check (:func:`service.api.deps.check_key`), without the router. A prediction is
   the latency-critical request: routed by FastAPI it also paid for the match against every
   route, the dependency resolution and the exception-handling wrappers, about a quarter of
   its CPU on the event loop (py-spy of a server answering 1,000 budgeted predictions a
   second). The route stays registered (the OpenAPI document, and the same answer for
   anything this does not match).
3. Everything else goes on to the router, whose routes check their keys first
   (``service.api.deps.KeyCheckedRoute``).

An error raised here is rendered by the app's own exception handlers, so the answer, status
and headers are the ones the route would give.
"""

from __future__ import annotations

from starlette.requests import Request

from service.api.deps import check_key
from service.api.examples import predict_response
from service.errors import BodyTooLargeError

_PREFIX, _SUFFIX = "/v1/models/", "/predict"


def model_of(path: str) -> str | None:
    """The ``{model}`` of ``/v1/models/{model}/predict`` (one non-empty path segment, as
    the route matches it), else None."""
    if not (path.startswith(_PREFIX) and path.endswith(_SUFFIX)):
        return None
    name = path[len(_PREFIX):-len(_SUFFIX)]
    return name if name and "/" not in name else None


def declared_length(scope) -> int | None:
    """The request's declared ``Content-Length`` (digits only), else None."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length" and value.isdigit():
            return int(value)
    return None


class RequestEdge:
    """ASGI middleware: the body-size limit and the predictions' short path (module
    docstring); ``short_predict=False`` leaves predictions to the router."""

    def __init__(self, app, *, limit: int, key_roles: dict[str, str], handlers: dict,
                 short_predict: bool = True) -> None:
        self.app = app
        self.limit = limit
        self.key_roles = key_roles
        self.handlers = handlers  # the app's exception handlers (by class), read per error
        self.short_predict = short_predict

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        size = declared_length(scope)
        if size is not None and size > self.limit:
            request = Request(scope, receive)
            try:
                check_key(self.key_roles, request, "read")  # any valid key sees the limit
                raise BodyTooLargeError(f"body of {size} bytes is over the limit of "
                                        f"{self.limit} bytes")
            except Exception as exc:
                response = await self._handled(request, exc)
            await response(scope, receive, send)
            return
        name = None
        if self.short_predict and scope["method"] == "POST":
            path, root = scope["path"], scope.get("root_path", "")
            name = model_of(path[len(root):] if root and path.startswith(root) else path)
        if name is None:
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        state = request.app.state
        try:
            check_key(self.key_roles, request, "read")
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
