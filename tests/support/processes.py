"""Service processes in tests: ``featurebudget serve`` on Redis, waiting for readiness or
any condition, and the external tools a test needs."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"


def wait_ready(url: str, process: subprocess.Popen, timeout: float = 120.0) -> None:
    """Poll ``/readyz`` until it answers 200; fail if the server exits or times out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert process.poll() is None, "server exited during start"
        time.sleep(0.05)
    raise AssertionError("server did not become ready")


def stop(process: subprocess.Popen, timeout: float = 30.0) -> None:
    """Terminate ``process``, killed if it has not exited within ``timeout`` seconds (a
    server still loading its kernels at start-up acts on SIGTERM only once started)."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout)


def serve_embedded(data_dir: Path, port: int, **settings: str) -> subprocess.Popen:
    """``featurebudget serve`` on loopback ``port`` with the embedded backend in
    ``data_dir`` (no Redis or storage URL from the environment), more
    ``FEATUREBUDGET_<NAME>`` settings; its output discarded."""
    env = dict(os.environ, FEATUREBUDGET_DATA_DIR=str(data_dir),
               **{f"FEATUREBUDGET_{name.upper()}": value for name, value in settings.items()})
    for name in ("FEATUREBUDGET_REDIS_URL", "FEATUREBUDGET_STORAGE_URL", "FEATUREBUDGET_URL"):
        env.pop(name, None)
    return subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port",
                             str(port), "--log-level", "warning"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@contextlib.contextmanager
def embedded_server(data_dir: Path, ports: range, *, timeout: float = 900.0,
                    **settings: str):
    """:func:`serve_embedded` on a free port of ``ports``, ready (``timeout``: a busy machine
    compiles its kernels first); yields its URL, stops it on exit."""
    port = free_port(ports)
    process = serve_embedded(data_dir, port, **settings)
    try:
        wait_ready(f"http://127.0.0.1:{port}", process, timeout=timeout)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(process)


def serve_on_redis(tmp_path: Path, redis_url: str, label: str,
                   **settings: str) -> tuple[subprocess.Popen, str]:
    """``featurebudget serve`` on a free loopback port and ``redis_url``, with more
    ``FEATUREBUDGET_<NAME>`` settings; its output in ``tmp_path/label.log``."""
    port = free_port()
    env = dict(os.environ, FEATUREBUDGET_REDIS_URL=redis_url,
               **{f"FEATUREBUDGET_{name.upper()}": value for name, value in settings.items()})
    process = subprocess.Popen(
        [sys.executable, "-m", "service.cli", "serve", "--port", str(port),
         "--log-level", "warning"], cwd=ROOT, env=env,
        stdout=open(tmp_path / f"{label}.log", "ab"), stderr=subprocess.STDOUT)  # noqa: SIM115
    return process, f"http://127.0.0.1:{port}"


def wait_until(predicate, what: str, timeout: float = 60.0, processes=()):
    """``predicate()``'s first truthy value, polled every 0.1 s; fails when one of
    ``processes`` exits or after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except (httpx.HTTPError, ValueError, KeyError):
            pass
        for process in processes:
            assert process.poll() is None, f"a process exited while waiting for {what}"
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def ready(url: str) -> bool:
    return httpx.get(f"{url}/readyz", timeout=2).status_code == 200


def binary(name: str) -> str:
    """A Prometheus tool: CI must have it (.ci/run installs Debian's package)."""
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"CI needs {name} (.ci/run installs Debian's prometheus package)")
        pytest.skip(f"no {name} on this machine (apt-get install prometheus)")
    return path
