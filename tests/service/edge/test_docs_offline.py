"""The interactive docs work offline: a real headless Chromium that can reach nothing but
loopback (every other host unresolvable, every other connection sent to a dead proxy)
loads ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) from a running ``featurebudget
serve`` without a console error (a script or style from a CDN, or one the page's
Content-Security-Policy refuses, would be one) and finds the API's routes rendered."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.api.docs import STATIC
from tests.service.batch.test_batch_page import browse
from tests.support.ports import free_port
from tests.support.processes import ROOT, serve_embedded, wait_ready

# ReDoc's sidebar link "API docs by Redocly" shows a logo from the vendor's CDN, which the
# page's policy blocks (reported on the console; the image hides itself): not a request
REDOC_LOGO = "Loading the image 'https://cdn.redoc.ly/redoc/logo-mini.svg' violates"
OFFLINE = ("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
           "--proxy-server=http://127.0.0.1:9", "--virtual-time-budget=20000")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("docs")
    port = free_port()
    process = serve_embedded(tmp_path / "data", port)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, process)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def offline_dump(url: str, tmp_path: Path) -> str:
    """The page's DOM as an offline Chromium built it; fails on any console error."""
    result = browse(url, tmp_path, *OFFLINE, "--dump-dom", width=1200)
    assert result.returncode == 0, result.stderr[-2000:]
    console = [line for line in result.stderr.splitlines() if ("CONSOLE" in line
               or "Uncaught" in line or "Failed to load resource" in line)
               and REDOC_LOGO not in line]
    assert not console, console
    return result.stdout


def test_swagger_ui_renders_offline(server, tmp_path):
    dom = offline_dump(f"{server}/docs", tmp_path)
    assert 'class="swagger-ui' in dom
    assert "/v1/models/{model}/predict" in dom  # the document was read and rendered
    assert "opblock" in dom


def test_redoc_renders_offline(server, tmp_path):
    dom = offline_dump(f"{server}/redoc", tmp_path)
    assert "/v1/models/{model}/predict" in dom
    assert "redoc-wrap" in dom or "api-content" in dom


def test_the_browser_reaches_nothing_but_loopback(tmp_path):
    """What makes the checks above offline: a script from a CDN does not load (so a page
    that needs one renders nothing)."""
    page = tmp_path / "cdn.html"
    page.write_text('<html><body><p id="x">?</p><script src="https://cdn.jsdelivr.net/npm/'
                    'swagger-ui-dist@5/swagger-ui-bundle.js"></script><script>document.'
                    'getElementById("x").textContent = typeof SwaggerUIBundle;</script>'
                    '</body></html>')
    assert '<p id="x">undefined</p>' in offline_dump(page.as_uri(), tmp_path)


def test_the_assets_ship_with_their_licences_and_in_the_wheel():
    for folder, licence in (("swagger-ui", "Apache License"), ("redoc", "MIT License")):
        assert licence in (STATIC / folder / "LICENSE").read_text()
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data = project["tool"]["setuptools"]["package-data"]["service"]
    shipped = {p.relative_to(STATIC.parent).as_posix() for pattern in data
               for p in STATIC.parent.glob(pattern) if p.is_file()}
    on_disk = {p.relative_to(STATIC.parent).as_posix() for p in STATIC.rglob("*")
               if p.is_file()}
    assert on_disk and on_disk <= shipped, on_disk - shipped


def test_the_docs_pages_allow_scripts_from_this_server_only(server):
    import httpx

    for path in ("/docs", "/redoc"):
        response = httpx.get(f"{server}{path}")
        policies = response.headers.get_list("content-security-policy")
        assert len(policies) == 1, policies
        script = next(d for d in policies[0].split(";") if d.strip().startswith("script-src"))
        assert set(script.split()[1:]) - {"'self'"} <= {w for w in script.split()
                                                         if w.startswith("'sha256-")}
        assert "http" not in response.text.replace(server, "")  # no absolute URL elsewhere
