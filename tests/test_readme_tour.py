"""The README's tour, walked as a new user walks it, and its data files.

The blocks of the tour carry a marker on the line before their fence: ``<!-- tour -->`` (run
in the second terminal, in order) or ``<!-- tour: background -->`` (a terminal of its own
that keeps a service running; it names its ``--port``). The walk happens in an empty
temporary folder holding only ``examples/`` and ``.venv`` (a link to the running
interpreter's environment: no new one is built), with a PATH and environment without
featurebudget's settings:

- the first terminal: the serving part of the README's first command
  (``.venv/bin/featurebudget serve``) as a background process, on a free port given by
  ``FEATUREBUDGET_PORT``;
- the second terminal: one bash script of every ``tour`` block in order (Python blocks
  through ``python -``), with ``FEATUREBUDGET_URL`` set as the README says, starting each
  ``tour: background`` block as a background job and waiting for its ``/readyz``.

The README's ports (8000, 8001) and Redis URL are replaced by the test's (the ports of
18406-18419 nothing listens on; ``FEATUREBUDGET_TEST_REDIS_URL``, flushed). Without Redis the
blocks that name ``redis://`` are left out.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.ports import free_ports
from tests.test_docs_snippets import DOC_REDIS_URL, TEST_REDIS_URL, _redis_available, fenced_blocks

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SETUP = ('python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/featurebudget serve\n'
         '.venv/bin/pip install -e ".[test]" && .venv/bin/python -m pytest -q\n')
PORTS = range(18406, 18420)
_MARKER = re.compile(r"^<!--\s*tour(?::\s*(\w+))?\s*-->$")


def tour_steps(text: str) -> list[tuple[str, str, int, str]]:
    """(kind "run" | "background", language, line, code) of the marked blocks, in order."""
    lines = text.splitlines()
    steps = []
    for block in fenced_blocks(text):
        before = next((lines[k].strip() for k in range(block.line - 2, -1, -1)
                       if lines[k].strip()), "")
        marker = _MARKER.match(before)
        if marker:
            steps.append((marker.group(1) or "run", block.language, block.line, block.code))
    return steps


def _for_the_test(code: str, first: int, second: int) -> str:
    code = re.sub(r"(localhost|127\.0\.0\.1):8000\b", f"127.0.0.1:{first}", code)
    code = re.sub(r"(localhost|127\.0\.0\.1):8001\b", f"127.0.0.1:{second}", code)
    code = re.sub(r"--port 8001\b", f"--port {second}", code)
    return code.replace(DOC_REDIS_URL, TEST_REDIS_URL)


def tour_script(steps, first: int, second: int) -> str:
    """The second terminal as one bash script (fails at the first failing command)."""
    parts = ["set -euo pipefail"]
    for kind, language, line, code in steps:
        code = _for_the_test(code, first, second)
        parts.append(f"echo '--- README.md line {line}' >&2")
        if kind == "background":
            port = re.search(r"--port (\d+)", code)
            assert port, f"README.md line {line}: a background block names its --port"
            parts.append(f"( {code.strip()}\n) > background-{line}.log 2>&1 &")
            parts.append(f"for i in $(seq 1200); do curl -sf http://127.0.0.1:{port.group(1)}"
                         f"/readyz > /dev/null && break; sleep 0.25; done")
            parts.append(f"curl -sf http://127.0.0.1:{port.group(1)}/readyz > /dev/null")
        elif language in ("python", "py"):
            parts.append(f"python - <<'TOUR_PYTHON'\n{code}TOUR_PYTHON")
        else:
            parts.append(code.rstrip("\n"))
    return "\n".join(parts) + "\n"


def _clean_environment(first: int) -> dict[str, str]:
    venv_bin = str(Path(sys.prefix) / "bin")
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p and Path(p).resolve() != Path(venv_bin).resolve())
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("FEATUREBUDGET_", "PROMETHEUS_")) and key != "VIRTUAL_ENV"}
    env.update(PATH=path, FEATUREBUDGET_URL=f"http://127.0.0.1:{first}")
    return env


def _stop(process: subprocess.Popen) -> None:
    """End ``process`` and everything in the session made for it here (the background
    jobs of a script that has exited too): SIGTERM, then SIGKILL after 30 s."""
    for sig, grace in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            process.poll()
            try:
                os.killpg(process.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
    process.wait(10)


def test_the_setup_commands_are_the_two_documented_ones():
    text = README.read_text()
    setup = next(b for b in fenced_blocks(text) if b.language == "bash")
    assert setup.code == SETUP
    tour = text[text.index("## A five-minute tour"):]
    assert "FEATUREBUDGET_PORT" in tour and "FEATUREBUDGET_URL" in tour   # what the walk sets


def test_the_shipped_examples_are_what_the_script_writes(tmp_path):
    subprocess.run([sys.executable, str(ROOT / "examples" / "make_examples.py"), str(tmp_path)],
                   check=True, capture_output=True, timeout=120)
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == ["patients.jsonl", "test.svm", "train.svm"]
    for name in written:
        shipped = ROOT / "examples" / name
        assert shipped.read_bytes() == (tmp_path / name).read_bytes(), name
        assert shipped.stat().st_size < 16_000   # a few KB


@pytest.mark.slow
def test_the_readme_tour_runs_as_written(tmp_path):
    import httpx

    if not (Path(sys.prefix) / "bin" / "activate").exists():
        pytest.skip("the tests do not run in a virtual environment (no bin/activate)")
    steps = tour_steps(README.read_text())
    assert [kind for kind, *_ in steps].count("background") >= 1 and len(steps) >= 7
    needs_redis = any("redis://" in code for *_, code in steps)
    if needs_redis and not _redis_available():
        steps = [step for step in steps if "redis://" not in step[3]]
    redis_client = None
    if any("redis://" in code for *_, code in steps):
        import redis

        redis_client = redis.Redis.from_url(TEST_REDIS_URL)
        redis_client.flushdb()
    walk = tmp_path / "clone"
    walk.mkdir()
    (walk / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    shutil.copytree(ROOT / "examples", walk / "examples",
                    ignore=shutil.ignore_patterns("__pycache__"))
    first, second = free_ports(2, PORTS)
    env = _clean_environment(first)
    serve = SETUP.splitlines()[0].split("&&")[-1].strip()
    assert serve == ".venv/bin/featurebudget serve"
    terminal_1 = subprocess.Popen(  # noqa: S603 - the README's own command
        ["bash", "-c", serve], cwd=walk, env=dict(env, FEATUREBUDGET_PORT=str(first)),
        stdout=open(tmp_path / "terminal-1.log", "wb"), stderr=subprocess.STDOUT,  # noqa: SIM115
        start_new_session=True)
    terminal_2 = None
    try:
        deadline = time.monotonic() + 600
        while True:
            assert terminal_1.poll() is None, (tmp_path / "terminal-1.log").read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{first}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the first command's service did not start"
            time.sleep(0.25)
        (walk / "tour.sh").write_text(tour_script(steps, first, second))
        terminal_2 = subprocess.Popen(["bash", "tour.sh"], cwd=walk, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        output, _ = terminal_2.communicate(timeout=900)
        output = output.decode(errors="replace")
        assert terminal_2.returncode == 0, output[-6000:]
    finally:
        for process in (terminal_2, terminal_1):
            if process is not None:
                _stop(process)
        if redis_client is not None:
            redis_client.flushdb()
            redis_client.close()
    assert (walk / "spam.fbstate").stat().st_size > 0
    assert len((walk / "spam-scores.jsonl").read_text().splitlines()) == 60
    assert len((walk / "patients.csv").read_text().splitlines()) == 41   # a header, 40 rows
    assert "--- README.md line" in output and "Traceback" not in output
