"""The app factory: ``create_app(settings)`` with a lifespan that opens storage, restores
the models (snapshot + replay), warms the numba kernels and starts the folds; on shutdown
it writes a final snapshot of each model and closes storage."""

from __future__ import annotations

import gc
import logging
import re
import time
from contextlib import asynccontextmanager

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from service import priority
from service.allocator import retain_freed_memory
from service.answers import AnswerPool
from service.api import batch, examples, health, models, snapshots
from service.api.docs import PATHS as DOC_PAGES
from service.api.docs import add_docs
from service.api.edge import RequestEdge
from service.api.http_metrics import HttpTally
from service.api.openapi import ERROR_RESPONSES
from service.batch.serving.page import CONTENT_SECURITY_POLICY
from service.errors import ServiceError
from service.kernel_warmup import warm_batch_kernels, warm_kernels
from service.manager import ModelManager
from service.schemas import validation_message
from service.settings import Settings
from service.storage import make_storage

log = logging.getLogger("featurebudget")
PROBLEM = "application/problem+json"
# the collector's thresholds once started: a young collection after 20,000 allocations, not
# 700 (parsing a JSON batch allocates ~100,000 objects that die young; each of CPython's
# default passes scanned those still alive, and a pass in a background thread holds the
# GIL while the scheduler runs other threads: measured pauses of 9-16 ms)
GC_THRESHOLDS = (20_000, 20, 20)


def problem(status: int, title: str, detail: str, errors: list | None = None,
            headers: dict | None = None) -> Response:
    """An RFC 9457 problem details response."""
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    if errors:
        body["errors"] = errors
    return Response(orjson.dumps(body), status_code=status, media_type=PROBLEM,
                    headers=headers)


class AnswerMiddleware:
    """The outermost of the app's middleware, for every HTTP answer:

    * headers: ``X-Content-Type-Options: nosniff`` on every answer, and the pages' strict
      ``Content-Security-Policy`` (service/batch/serving/page.py) on every answer but the
      interactive docs' (``exempt``: service/api/docs.py gives them their own);
    * every answer counted by route and status class, with its latency
      (:class:`service.api.http_metrics.HttpTally`; a 413 or a 500 too);
    * an unexpected error is answered here by the app's ``Exception`` handler (a
      problem+json 500 that logs the traceback once). Left to Starlette's outermost
      middleware it is answered too but then re-raised to the server, which logs the
      traceback a second time. An error after the answer began is logged and the request
      ends there (the server closes the connection).

    O(headers) per answer."""

    def __init__(self, app, *, handlers: dict, exempt: tuple[str | None, ...]) -> None:
        self.app = app
        self.handlers = handlers  # the app's exception handlers (by class), read per error
        self.exempt = frozenset(path for path in exempt if path)
        self.nosniff = [(b"x-content-type-options", b"nosniff")]
        self.headers = [*self.nosniff,
                        (b"content-security-policy", CONTENT_SECURITY_POLICY.encode())]
        self.http = HttpTally()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = self.nosniff if scope["path"] in self.exempt else self.headers
        started, status, begun = False, 500, time.perf_counter()

        async def answer(message) -> None:
            nonlocal started, status
            if message["type"] == "http.response.start":
                # (a message is a new dict per send; its header list may be shared)
                started, status = True, message["status"]
                message["headers"] = [*message.get("headers", ()), *extra]
            await send(message)

        try:
            await self.app(scope, receive, answer)
        except Exception as exc:
            if started:
                log.exception("unhandled error on %s %s after its answer began",
                              scope.get("method"), scope.get("path"))
                return
            response = await self.handlers[Exception](Request(scope, receive), exc)
            await response(scope, receive, answer)
        finally:
            self.http.record(scope, status, begun)


def _allowed(app: FastAPI, request: Request) -> list[str]:
    """The methods the app answers at the request's path (from its OpenAPI paths, so every
    route counts, wherever it was included)."""
    table = getattr(app.state, "allowed_methods", None)
    if table is None:
        table = []
        for path, item in app.openapi()["paths"].items():
            pattern = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(path))
            table.append((re.compile(f"^{pattern}$"), {m.upper() for m in item}))
        app.state.allowed_methods = table
    methods: set[str] = set()
    for regex, verbs in table:
        if regex.match(request.url.path):
            methods |= verbs
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        retain_freed_memory(settings.malloc_retain_bytes)  # in every worker process
        priority.configure(settings.background_nice, settings.gil_switch_interval_ms)
        from service.startup import model_summary

        starting = time.perf_counter()
        storage = make_storage(settings)
        log.info("featurebudget starting on the %s", storage.description)
        await storage.open()
        app.state.answers = AnswerPool(settings.answer_threads, settings.answer_queue)
        manager = ModelManager(storage, settings, app.state.answers)
        app.state.manager = manager
        import asyncio

        started = time.perf_counter()
        log.warning("loading the numba kernels (compiled and cached on the first start, "
                    "about two minutes of one core; seconds after that)")
        await asyncio.to_thread(warm_kernels)
        if manager.batch.worker is not None:
            await asyncio.to_thread(warm_batch_kernels)
        log.warning("kernels ready in %.1f s", time.perf_counter() - started)
        await manager.start()
        # everything loaded so far (modules, numba dispatchers, models) lives as long as the
        # process: out of the collector's way, so full collections scan only what requests
        # make (they took ~100 ms over ~180,000 start-up objects, stalling predictions)
        gc.collect()
        gc.freeze()
        gc.set_threshold(*GC_THRESHOLDS)
        log.info("featurebudget ready in %.1f s on the %s: %s", time.perf_counter() - starting,
                 storage.description,
                 model_summary(list(manager.hosts), list(manager.batch.hosts),
                               list(manager.failed)))
        watcher = asyncio.create_task(health.watch_readiness(manager), name="readiness")
        try:
            yield
        finally:
            watcher.cancel()
            app.state.answers.close()
            await manager.stop()
            await storage.close()

    app = FastAPI(title="featurebudget", version="1", lifespan=lifespan, docs_url=None,
                  redoc_url=None)  # (served from the package: add_docs)
    app.state.settings = settings
    app.state.key_roles = settings.key_roles()
    app.add_middleware(RequestEdge, limit=settings.max_body_bytes,
                       key_roles=app.state.key_roles, handlers=app.exception_handlers)
    app.add_middleware(AnswerMiddleware, handlers=app.exception_handlers,
                       exempt=DOC_PAGES)
    for router in (models.router, examples.router, batch.router, snapshots.router, batch.ui):
        app.include_router(router, responses=ERROR_RESPONSES)
    app.include_router(health.router)
    add_docs(app)

    @app.exception_handler(ServiceError)
    async def service_error(request: Request, exc: ServiceError) -> Response:
        return problem(exc.status, exc.title, exc.detail, exc.errors, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        errors = []
        for error in exc.errors():
            location = [str(part) for part in error.get("loc", ()) if part != "body"]
            if error.get("type") == "json_invalid":  # loc holds a character position
                location = []
            errors.append({"field": ".".join(location) or "body",
                           "message": validation_message(error)})
        detail = "; ".join(f"field {e['field']!r}: {e['message']}" for e in errors)
        status = 400 if any(e.get("type") == "json_invalid" for e in exc.errors()) else 422
        return problem(status, "Invalid input", detail, errors)

    @app.exception_handler(OSError)
    @app.exception_handler(RedisConnectionError)
    @app.exception_handler(RedisTimeoutError)
    async def storage_error(request: Request, exc: Exception) -> Response:
        """The log or snapshot store failed (disk full, directory gone, Redis down): 503,
        so clients retry; nothing was acknowledged."""
        log.error("storage error on %s %s: %s: %s", request.method, request.url.path,
                  type(exc).__name__, exc)
        return problem(503, "Storage unavailable", f"{type(exc).__name__}: {exc}",
                       headers={"Retry-After": "1"})

    @app.exception_handler(ClientDisconnect)
    async def client_gone(request: Request, exc: ClientDisconnect) -> Response:
        """The client closed the connection before its body arrived: nothing to answer."""
        log.info("client disconnected during %s %s", request.method, request.url.path)
        return problem(400, "Client disconnected", "the request body was cut short")

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> Response:
        """Anything else: a problem+json 500 without internals (the traceback is logged,
        once: ``AnswerMiddleware`` answers with this, and the error goes no further).
        ``Connection: close``: what the failed request left unread on the connection is
        not read, so a client must not send its next request on it."""
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem(500, "Internal server error",
                       "the server failed to handle the request; see its log",
                       headers={"Connection": "close"})

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        titles = {400: "Malformed request body", 401: "Unauthorized", 403: "Forbidden",
                  404: "Not found", 405: "Method not allowed"}
        headers = getattr(exc, "headers", None)
        if exc.status_code == 405:  # every method of every route at this path
            headers = {**(headers or {}), "Allow": ", ".join(_allowed(app, request))}
        detail, errors = str(exc.detail), None
        if exc.status_code == 400 and exc.__cause__ is not None:  # FastAPI could not decode
            cause = f"{type(exc.__cause__).__name__}: {exc.__cause__}"  # the body (not UTF-8)
            detail, errors = f"{detail}: {cause}", [{"field": "body", "message": cause}]
        return problem(exc.status_code, titles.get(exc.status_code, "Error"), detail, errors,
                       headers=headers)

    return app
