"""The real service on a real loopback socket, for tests that go through HTTP clients (the
CLI, the documentation's snippets): uvicorn in a thread on the first free port of
18300-18399 (or of ``FEATUREBUDGET_TEST_PORTS=FIRST-LAST``)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator

import uvicorn

from service.app import create_app
from service.settings import Settings
from tests.support.ports import free_port

_FIRST, _, _LAST = os.environ.get("FEATUREBUDGET_TEST_PORTS", "18300-18399").partition("-")
PORTS = range(int(_FIRST), int(_LAST) + 1)


@contextlib.contextmanager
def live_server(settings: Settings, *, start_timeout: float = 120.0,
                ports: range = PORTS) -> Iterator[str]:
    """Serve ``create_app(settings)`` on 127.0.0.1 (the first free port of ``ports``) until
    the block ends; yields its URL."""
    for _attempt in range(5):  # another test may take the port between probe and bind
        port = free_port(ports)
        config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=port,
                                log_level="warning", lifespan="on")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
        thread.start()
        deadline = time.monotonic() + start_timeout
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        if server.started:
            break
        server.should_exit = True
        thread.join(30)
        if time.monotonic() >= deadline:
            raise RuntimeError("the service did not start within "
                               f"{start_timeout} s on port {port}")
    else:
        raise RuntimeError("the service could not bind a loopback port")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        if thread.is_alive():
            raise RuntimeError(f"the service on port {port} did not shut down")
