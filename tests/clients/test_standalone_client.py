"""featurebudget-client installed alone: a clean virtual environment gets
``clients/featurebudget-client`` and pytest, nothing more; numba, scipy, fastapi, redis,
numpy and the server's packages are absent there, and the client's own tests pass in it
against a real ``featurebudget serve`` of this environment (embedded backend, a loopback
port of 18360-18379), then again in this environment, where numpy, pandas and scipy are
installed (the conversions run too)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.support.ports import free_port
from tests.support.processes import wait_ready

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "clients" / "featurebudget-client"
PORTS = range(18360, 18380)
ABSENT = ("numba", "scipy", "fastapi", "redis", "numpy", "pandas", "service", "algorithms",
          "clients")
FIND = "import importlib.util, json, sys; print(json.dumps([m for m in sys.argv[1:] if " \
       "importlib.util.find_spec(m)]))"


def _serve(tmp_path: Path) -> tuple[subprocess.Popen, str]:
    """``featurebudget serve`` of this environment on the embedded backend in ``tmp_path``
    (no setting of the caller's environment)."""
    port = free_port(PORTS)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("FEATUREBUDGET_") and k != "PROMETHEUS_MULTIPROC_DIR"}
    process = subprocess.Popen(
        [sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--data-dir",
         str(tmp_path / "data"), "--log-level", "warning"], cwd=ROOT, env=env,
        stdout=open(tmp_path / "serve.log", "ab"), stderr=subprocess.STDOUT)  # noqa: SIM115
    return process, f"http://127.0.0.1:{port}"


def _client_tests(python: Path | str, url: str, cwd: Path) -> str:
    """The client's own tests run by ``python`` against ``url``; their summary line."""
    env = dict(os.environ, FEATUREBUDGET_CLIENT_TEST_URL=url)
    done = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(CLIENT)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_the_client_installs_alone_and_passes_its_tests_against_a_real_server(tmp_path):
    started = time.monotonic()
    process, url = _serve(tmp_path)  # it starts while the environment is made
    try:
        venv = tmp_path / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                       timeout=120)
        python = venv / "bin" / "python"
        subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                        "--quiet", "--no-compile", str(CLIENT), "pytest"], check=True,
                       timeout=300, capture_output=True)
        installed = time.monotonic()
        found = subprocess.run([str(python), "-c", FIND, *ABSENT, "httpx"], cwd=tmp_path,
                               check=True, capture_output=True, text=True).stdout
        assert json.loads(found) == ["httpx"]  # nothing but the client's own dependency
        wait_ready(url, process, timeout=600)  # (kernels compiled on a cold cache)
        ready = time.monotonic()
        alone = _client_tests(python, url, tmp_path)
        assert "passed" in alone and "failed" not in alone
        assert "skipped" in alone  # the numpy / pandas / scipy conversions: not there
        here = _client_tests(sys.executable, url, tmp_path)
        assert "passed" in here and "skipped" not in here, here
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:  # still compiling its kernels at start-up
            process.kill()
            process.wait(30)
    print(f"client alone: {installed - started:.1f} s to make the environment and install, "
          f"{ready - started:.1f} s for the server to be ready, "
          f"{time.monotonic() - ready:.1f} s for both test runs ({alone}; {here})")
