"""The load tests' one harness: their servers (from :mod:`_servers`) and every control-plane
call through the project's own client (:class:`clients.FeaturebudgetClient`).

    api = start_api(18100, service_env(data_dir=tmp), tmp)   # serve + /readyz, or RuntimeError
    client = connect(api.url)
    create(client, {"name": "m", "algorithm": "cs-g-omp", "groups": [...]})
    client.post_examples("m", examples, wait=True)
    job = publish(client, "m")             # retrain, wait for the job and the served version
    text = metrics(api.url)                # /metrics of an API or a worker's metrics port
    api.stop()

Only set-up, waits and reads go through here: what a load test times (the open-loop
generators, the paced traffic, the ingestion it measures) stays on its raw clients.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path

from _servers import Child, serve, wait_ready

from clients import FeaturebudgetClient, ServiceError
from tests.support.models import create_from_body

__all__ = ["applied", "connect", "create", "inspect", "metrics", "publish", "ready",
           "start_api", "wait_applied", "wait_job", "wait_position", "wait_served"]


def start_api(port: int, env: dict, log_dir: str | Path | None = None, *, workers: int = 1,
              label: str | None = None, timeout: float = 240.0, poll: float = 0.2) -> Child:
    """``featurebudget serve`` on ``port`` once ``/readyz`` answers 200 (``startup_seconds``:
    how long that took); stopped again if it never does."""
    child = serve(port, env, log_dir, workers=workers, label=label)
    try:
        child.startup_seconds = wait_ready(child, timeout=timeout, poll=poll)
    except BaseException:
        child.stop()
        raise
    return child


def connect(url: str, *, timeout: float = 60.0) -> FeaturebudgetClient:
    """The client of the service at ``url`` (``client.http`` is its httpx.Client)."""
    return FeaturebudgetClient(url, timeout=timeout)


def create(client: FeaturebudgetClient, body: dict, *, replace: bool = False):
    """Create the model a ``POST /v1/models`` body describes (online or batch); ``replace``:
    delete one of that name first. ServiceError when the service refuses it."""
    return create_from_body(client, body, replace=replace)


def inspect(client: FeaturebudgetClient, model: str) -> dict:
    """The model's description without its selected features (``?features=false``)."""
    return client.get_model(model, features=False).raw


def applied(client: FeaturebudgetClient, model: str) -> int:
    """The model's ``examples_applied``."""
    return int(client.get_model(model, features=False).examples_applied)


def wait_applied(client: FeaturebudgetClient, model: str, target: int, timeout: float, *,
                 poll: float = 0.02, check: Callable[[], None] | None = None,
                 errors: tuple[type[BaseException], ...] = ()) -> float:
    """``time.perf_counter()`` when ``examples_applied >= target`` was first seen; TimeoutError
    after ``timeout`` s. ``check()`` runs before every poll (raise to give up); a poll that
    raises one of ``errors`` counts as not yet."""
    deadline = time.monotonic() + timeout
    last: int | str | None = None
    while time.monotonic() < deadline:
        if check is not None:
            check()
        try:
            last = applied(client, model)
        except errors as exc:  # a slow answer: keep waiting until the deadline
            last = type(exc).__name__
        if isinstance(last, int) and last >= target:
            return time.perf_counter()
        time.sleep(poll)
    raise TimeoutError(f"{target} examples not applied within {timeout:.0f} s "
                       f"(last seen: {last})")


def wait_position(client: FeaturebudgetClient, model: str, log_id: str, *,
                  timeout: float = 600.0, poll: float = 0.02) -> float:
    """``time.perf_counter()`` when the model's ``log_position`` reached ``log_id``."""
    from service.storage import id_key

    target = id_key(log_id)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        position = client.get_model(model, features=False).log_position
        if position and id_key(position) >= target:
            return time.perf_counter()
        time.sleep(poll)
    raise TimeoutError(f"{model}: {log_id} not applied")


def wait_job(client: FeaturebudgetClient, model: str, job_id: str, *, timeout: float = 300.0,
             poll: float = 0.02) -> dict:
    """The finished job (its JSON, ``finished_at`` set): succeeded, failed or cancelled;
    TimeoutError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        job = client.wait_for_job(model, job_id, timeout=max(0.0, deadline - time.monotonic()),
                                  poll=poll)
        if job.finished_at is not None:
            return job.raw
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{model}: job {job_id} not finished within {timeout} s: "
                               f"{job.raw}")
        time.sleep(poll)


def wait_served(clients: FeaturebudgetClient | Iterable[FeaturebudgetClient], model: str,
                version: int, *, timeout: float = 30.0, poll: float = 0.01,
                check: Callable[[dict], None] | None = None) -> float:
    """``time.perf_counter()`` once every client's API serves ``version`` of the model;
    ``check(description)`` runs on each answer (raise to give up). TimeoutError after
    ``timeout`` s."""
    pending = [clients] if isinstance(clients, FeaturebudgetClient) else list(clients)
    deadline = time.monotonic() + timeout
    while pending:
        doc = inspect(pending[0], model)
        if check is not None:
            check(doc)
        if doc.get("version") == version:
            pending.pop(0)
            continue
        if time.monotonic() > deadline:
            raise TimeoutError(f"{model}: version {version} not served within {timeout:.0f} s")
        time.sleep(poll)
    return time.perf_counter()


def publish(client: FeaturebudgetClient, model: str, *, timeout: float = 120.0,
            served_timeout: float = 30.0, poll: float = 0.02, served_poll: float = 0.01,
            check: Callable[[dict], None] | None = None) -> dict:
    """``POST /retrain``, wait for the job (RuntimeError unless it succeeded) and until the
    API serves its version: the job's JSON."""
    job = wait_job(client, model, client.retrain(model).id, timeout=timeout, poll=poll)
    if job.get("status") != "succeeded":
        raise RuntimeError(f"{model}: retrain job {job.get('status')}: {job.get('error')} "
                           f"({job})")
    wait_served(client, model, job["version"], timeout=served_timeout, poll=served_poll,
                check=check)
    return job


def metrics(url: str, *, timeout: float = 30.0) -> str:
    """``GET url/metrics`` (an API, or a batch worker's ``--metrics-port``)."""
    with FeaturebudgetClient(url, timeout=timeout) as client:
        return client.metrics()


def ready(url: str, *, timeout: float = 2.0) -> bool:
    """Whether ``url/readyz`` answers 200 now (a refused connection or a 503: False)."""
    import httpx

    try:
        with FeaturebudgetClient(url, timeout=timeout) as client:
            client.readyz()
        return True
    except (ServiceError, httpx.HTTPError):
        return False
