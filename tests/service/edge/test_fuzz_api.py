"""Fuzzing the HTTP API of a real ``featurebudget serve`` (bounded here; ``load_tests/fuzz.py``
runs the same suites for minutes): schemathesis over the OpenAPI document, stateless and
stateful, and hypothesis bodies the document cannot describe (libsvm, FBX1, JSON examples,
snapshot blobs). No 5xx; every 4xx a problem+json naming what is wrong; no rejected request
changes a model (see ``tests/support/fuzzing.py`` for the checks)."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from tests.support.fuzzing import Answer, Fuzzer, differences, zip_members, zip_of
from tests.support.processes import ROOT, wait_ready
from tests.support.zips import zip_with

pytestmark = pytest.mark.slow
SEED = 2026
LIMITS = {"FEATUREBUDGET_MAX_MODEL_BYTES": str(16 << 20),  # fuzzed creations stay small
          "FEATUREBUDGET_MAX_TOTAL_MODEL_BYTES": str(256 << 20),
          "FEATUREBUDGET_WAIT_TIMEOUT_SECONDS": "10"}


def loopback_port() -> int:
    import socket

    for port in range(18100, 18200):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 18100-18199")


class Service:
    def __init__(self, tmp_path, redis_url: str | None = None) -> None:
        self.port = loopback_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("FEATUREBUDGET_")}
        env.update(LIMITS, FEATUREBUDGET_DATA_DIR=str(tmp_path / "data"))
        if redis_url:
            env.update(FEATUREBUDGET_REDIS_URL=redis_url, FEATUREBUDGET_BATCH_WORKER="true")
        self.log_path = tmp_path / "server.log"
        self.log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "service.cli", "serve", "--port", str(self.port),
             "--log-level", "warning"], cwd=ROOT, env=env, stdout=self.log,
            stderr=subprocess.STDOUT)
        try:
            wait_ready(self.url, self.process, timeout=300)  # a cold numba cache compiles
        except BaseException:
            self.process.kill()
            self.process.wait()
            self.log.close()
            raise

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)
        self.log.close()

    def tracebacks(self) -> list[str]:
        text = self.log_path.read_text(errors="replace")
        return [chunk[:1500] for chunk in text.split("Traceback")[1:]]


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    running = Service(tmp_path_factory.mktemp("fuzz"))
    yield running
    running.stop()


@pytest.fixture(scope="module")
def fuzzer(service):
    engine = Fuzzer(service.url, seed=SEED)
    engine.setup()
    return engine


def run(fuzzer: Fuzzer, suite, *args) -> None:
    """Run one suite; fail with every failure it found (kind, where, reproduction)."""
    before = sum(fuzzer._failure_counts.values())
    stored = len(fuzzer.failures)
    suite(*args)
    found = sum(fuzzer._failure_counts.values()) - before
    assert found == 0, "\n\n".join(
        f"{f['kind']} at {f['where']}: {f['message'][:600]}\n  {f['reproduce'][:400]}"
        for f in fuzzer.failures[stored:]) or fuzzer.failure_counts()


def answered(fuzzer: Fuzzer, where: str, status: int) -> int:
    return fuzzer.operations.get(where, {}).get(status, 0)


# ---------------------------------------------------------------------------- the checks
class _Fake:
    def __init__(self, status: int, content_type: str, body: bytes) -> None:
        self.status_code, self.content = status, body
        self.headers = {"content-type": content_type}


def test_the_checks_flag_what_they_name():
    """The fuzzer is not vacuous: a 5xx, a 4xx that is not a problem, or a problem that
    names nothing are failures; a good problem is not."""
    engine = Fuzzer("http://127.0.0.1:9")  # never contacted: no state check below
    engine.check("t", "here", _Fake(500, "application/problem+json", b"{}"), None, [], "")
    engine.check_problem("here", Answer(_Fake(404, "application/json", b'{"detail": "x"}')), "")
    engine.check_problem("here", Answer(_Fake(422, "application/problem+json",
                                              b'{"title": "t", "status": 422, "detail": "d"}')),
                         "")
    engine.check_problem("here", Answer(_Fake(404, "application/problem+json",
                                              b'{"title": "t", "status": 404, "detail": ""}')),
                         "")
    kinds = [f["kind"] for f in engine.failures]
    assert kinds == ["500", "4xx not problem+json",
                     "422 without errors naming the field, item or line",
                     "4xx problem without title / status / detail"]
    good = (b'{"title": "Invalid input", "status": 422, "detail": "item 0: bad", '
            b'"errors": [{"message": "bad", "item": 0}]}')
    engine.check_problem("here", Answer(_Fake(422, "application/problem+json", good)), "")
    assert len(engine.failures) == 4


def test_a_state_difference_is_in_the_members_not_the_zip_times():
    from algorithms.serialization import dumps_state, loads_state

    blob = dumps_state({"w": np.arange(4.0), "n": 3})
    members = zip_members(blob)
    buffer = io.BytesIO()  # the same members, written at another time
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=(1990, 1, 1, 0, 0, 0)), data)
    retimed = buffer.getvalue()
    assert retimed != blob and loads_state(retimed)["n"] == 3
    same = {"models": ["m"], "m": {"a": 1}, "m:snapshot": blob}
    assert differences(same, {**same, "m:snapshot": retimed}) == []
    changed = dumps_state({"w": np.arange(4.0) + 1, "n": 3})
    assert differences(same, {**same, "m:snapshot": changed}) == ["m:snapshot members ['w']"]
    assert differences(same, {**same, "m": {"a": 2}}) == ["m fields ['a']"]
    assert differences(same, {**same, "models": ["m", "x"]}) == ["models: ['x'] appeared, [] went"]
    assert loads_state(zip_of(list(members.items())))["n"] == 3  # what mutations start from
    assert loads_state(zip_with(members))["n"] == 3


# ---------------------------------------------------------------------------- the suites
def test_schemathesis_every_operation_positive_and_negative(fuzzer):
    run(fuzzer, fuzzer.run_schema, 20, SEED)
    stats = fuzzer.stats
    assert stats["schema positive"]["2xx"] >= 30 and stats["schema positive"]["4xx"] >= 100
    assert stats["schema negative"]["4xx"] >= 50
    assert answered(fuzzer, "POST /v1/models/{model}/examples", 202) >= 1
    assert answered(fuzzer, "POST /v1/models/{model}/predict", 200) >= 1
    assert answered(fuzzer, "PUT /v1/models/{model}/snapshot", 422) >= 1


def test_schemathesis_stateful_along_the_links(fuzzer):
    """create -> examples -> predict -> feedback, retrain -> job, snapshot, delete."""
    run(fuzzer, fuzzer.run_stateful, 30, 10, SEED)
    assert fuzzer.scenarios >= 30
    assert answered(fuzzer, "POST /v1/models", 201) >= 5
    assert fuzzer.stats["stateful"]["2xx"] >= 30 and fuzzer.stats["stateful"]["4xx"] >= 30


def test_undeclared_methods_answer_405_with_allow(fuzzer):
    run(fuzzer, fuzzer.run_methods)
    assert fuzzer.stats["methods"]["4xx"] >= 50


@pytest.mark.parametrize(("suite", "cases"), [("libsvm", 300), ("fbx1", 300), ("json", 250),
                                               ("snapshots", 300)])
def test_bodies_the_document_cannot_describe(fuzzer, suite, cases):
    """Valid bodies built by the strategies are accepted (with the right count), broken
    ones are refused whole, and nothing refused changes the model."""
    run(fuzzer, getattr(fuzzer, f"run_{suite}"), cases, SEED)
    counts = fuzzer.stats[suite.rstrip("s")]
    assert counts["2xx"] >= cases // 20 and counts["4xx"] >= cases // 4, counts


def test_the_server_logged_no_unexpected_error(fuzzer, service):
    """After all of it: ready, and no traceback in the server's log (an error in a
    background fold would not show as a 5xx)."""
    import httpx

    assert httpx.get(f"{service.url}/readyz", timeout=10).status_code == 200
    assert service.tracebacks() == []


@pytest.mark.redis
def test_the_same_on_redis(tmp_path, redis_url):
    running = Service(tmp_path, redis_url)
    try:
        engine = Fuzzer(running.url, seed=SEED + 1)
        engine.setup()
        run(engine, engine.run_schema, 5, SEED)
        run(engine, engine.run_stateful, 8, 8, SEED)
        for suite in ("libsvm", "fbx1", "snapshots"):
            run(engine, getattr(engine, f"run_{suite}"), 60, SEED)
        assert engine.stats["schema positive"]["2xx"] >= 10
    finally:
        running.stop()
    assert running.tracebacks() == []
