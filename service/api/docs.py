"""The interactive API docs, ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc), served with
their scripts and styles from the package (``service/static``), so they work offline.

The assets are the unchanged files of the npm packages ``swagger-ui-dist`` (Apache-2.0) and
``redoc`` (MIT), their licences beside them (service/static/README.md). Each page has its
own Content-Security-Policy: scripts only from this server plus the page's one inline
script by its hash (Swagger UI's start-up call), connections to this server only (the
OpenAPI document); both UIs set inline styles, and ReDoc runs its search in a worker it
builds from a ``blob:`` URL.
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).resolve().parent.parent / "static"
ASSETS = "/static"  # where STATIC is mounted
DOCS, REDOC = "/docs", "/redoc"
PATHS = (DOCS, REDOC)  # pages with their own policy (AnswerMiddleware leaves them theirs)
_INLINE = re.compile(rb"<script>(.*?)</script>", re.S)


def policy(html: bytes) -> str:
    """The Content-Security-Policy of a docs page: its inline scripts allowed by hash,
    everything else from this server. O(page)."""
    hashes = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(body).digest()).decode()}'"
                      for body in _INLINE.findall(html))
    return (f"default-src 'none'; script-src 'self' {hashes}".rstrip() + "; "
            "style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; "
            "connect-src 'self'; worker-src 'self' blob:; base-uri 'none'; "
            "form-action 'none'; frame-ancestors 'none'")


def add_docs(app: FastAPI) -> None:
    """Mount the assets and add ``/docs`` and ``/redoc`` (for an app made with
    ``docs_url=None, redoc_url=None``). A page is built once per root path."""
    app.mount(ASSETS, StaticFiles(directory=STATIC), name="static")
    title = f"{app.title} API"
    pages: dict[tuple[str, str], tuple[bytes, dict[str, str]]] = {}

    def page(which: str, request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        built = pages.get((which, root))
        if built is None:
            assets, spec = f"{root}{ASSETS}", f"{root}{app.openapi_url}"
            favicon = f"{assets}/swagger-ui/favicon-32x32.png"
            if which == DOCS:
                html = get_swagger_ui_html(
                    openapi_url=spec, title=title, swagger_favicon_url=favicon,
                    swagger_js_url=f"{assets}/swagger-ui/swagger-ui-bundle.js",
                    swagger_css_url=f"{assets}/swagger-ui/swagger-ui.css")
            else:
                html = get_redoc_html(
                    openapi_url=spec, title=title, redoc_favicon_url=favicon,
                    redoc_js_url=f"{assets}/redoc/redoc.standalone.js", with_google_fonts=False)
            body = bytes(html.body)
            built = pages[(which, root)] = (body, {"Content-Security-Policy": policy(body)})
        return HTMLResponse(built[0], headers=built[1])

    @app.get(DOCS, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        return page(DOCS, request)

    @app.get(REDOC, include_in_schema=False)
    async def redoc_page(request: Request) -> HTMLResponse:
        return page(REDOC, request)
