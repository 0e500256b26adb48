"""Observability checked against the real components: a real Prometheus (Debian's
``prometheus``) scrapes a real service (``featurebudget serve --workers 2`` on Redis plus
``featurebudget worker``) under a short mixed load, with the repository's
docker/prometheus/prometheus.yml adapted to the test's loopback ports and its alert rules;
then every PromQL expression of every panel of the Grafana dashboard must return at least
one series with a number. Also: labelled counters exist at 0 from a model's creation."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
import redis
import yaml

from service import fbx1
from service.storage import redis_keys
from tests.support.batch_data import DIABETES_GROUPS, NO_POLICY, diabetes, named_examples
from tests.support.online import json_examples, libsvm_text
from tests.support.ports import free_ports
from tests.support.processes import DOCKER, ROOT, binary, ready, wait_until

DASHBOARD = DOCKER / "grafana/dashboards/featurebudget.json"
PORTS = range(18200, 18300)  # this suite's loopback ports for servers and Prometheus

# Panel expressions exempt from the required-series check, each with the reason. (The
# staleness histogram featurebudget_read_staleness_seconds is exported and observed by the
# API processes that do not fold a model, so its panel is checked like every other.)
NOT_REQUIRED: dict[str, str] = {}


def dashboard_expressions() -> list[tuple[str, str]]:
    """(panel title + refId, expr) of every target of every panel (rows' panels too), with
    the dashboard's ``$model`` variable at its "All" value, as Grafana sends them."""
    out = []

    def walk(panels):
        for panel in panels:
            walk(panel.get("panels", []))
            for target in panel.get("targets", []):
                expr = target["expr"].replace("$model", ".*")
                out.append((f"{panel['title']} [{target['refId']}]", expr))

    walk(json.loads(DASHBOARD.read_text())["panels"])
    return out


def prometheus_config(api: str, worker: str) -> dict:
    """docker/prometheus/prometheus.yml with the test's targets, a 1 s scrape and evaluation
    interval, and its rule files by absolute path."""
    config = yaml.safe_load((DOCKER / "prometheus/prometheus.yml").read_text())
    targets = {"featurebudget": api, "featurebudget-worker": worker}
    assert {job["job_name"] for job in config["scrape_configs"]} == set(targets)
    for job in config["scrape_configs"]:
        job["static_configs"] = [{"targets": [targets[job["job_name"]]]}]
        job["scrape_interval"] = "1s"
    config["global"].update(scrape_interval="1s", evaluation_interval="1s")
    config["rule_files"] = [str((DOCKER / "prometheus" / f).resolve())
                            for f in config.get("rule_files", [])]
    assert config["rule_files"], "prometheus.yml loads no alert rules"
    return config


class Processes:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.running: list[subprocess.Popen] = []

    def start(self, name: str, command: list[str], env: dict | None = None) -> subprocess.Popen:
        process = subprocess.Popen(command, cwd=ROOT, env=env,
                                   stdout=open(self.tmp_path / f"{name}.log", "ab"),  # noqa: SIM115
                                   stderr=subprocess.STDOUT)
        self.running.append(process)
        return process

    def stop(self) -> None:
        for process in reversed(self.running):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in reversed(self.running):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def log(self, name: str) -> str:
        return (self.tmp_path / f"{name}.log").read_text(errors="replace")


def query(prometheus: str, expr: str) -> list[dict]:
    response = httpx.get(f"{prometheus}/api/v1/query", params={"query": expr}, timeout=10)
    body = response.json()
    assert body["status"] == "success", f"{expr}: {body}"
    assert body["data"]["resultType"] == "vector", f"{expr}: {body['data']['resultType']}"
    return body["data"]["result"]


def numbers(series: list[dict]) -> list[float]:
    return [float(s["value"][1]) for s in series if math.isfinite(float(s["value"][1]))]


def metric_value(text: str, name: str, **labels) -> float | None:
    """A sample of the exposition text (labels in any order), or None."""
    for line in text.splitlines():
        match = re.match(rf"{name}\{{(.*)\}} (\S+)$", line)
        if match and all(f'{k}="{v}"' in match.group(1) for k, v in labels.items()):
            return float(match.group(2))
    return None


def steal_refused_snapshot(client: httpx.Client, store: redis.Redis, url: str, x1) -> None:
    """Make the owner of model spam write a snapshot while another process holds its lease
    (as after a pause longer than the lease): the fenced write is refused and counted."""
    X, y = x1
    key = redis_keys.lease_key("spam")
    for _attempt in range(3):
        # right after a renewal the owner trusts its lease for lease / 3 (5 s here)
        def fresh_heartbeat():
            raw = store.get(redis_keys.heartbeat_key("spam"))
            return raw is not None and time.time() - float(raw.split()[0]) < 1.5

        wait_until(fresh_heartbeat, "a fresh lease renewal", timeout=15)
        owner = store.get(key)
        store.set(key, b"test-intruder", px=15_000)
        try:
            rows = json_examples(X, y, 500, 560)  # >= SNAPSHOT_EVERY_EXAMPLES: a snapshot
            assert client.post(f"{url}/v1/models/spam/examples",
                               json={"examples": rows}).status_code == 202

            def refused():
                text = client.get(f"{url}/metrics").text
                return (metric_value(text, "featurebudget_snapshots_refused_total",
                                     model="spam") or 0) >= 1

            try:
                wait_until(refused, "a refused snapshot", timeout=3)
                return
            except AssertionError:
                continue
        finally:
            store.set(key, owner, px=15_000)  # the owner takes it back at its next renewal
    raise AssertionError("no snapshot was refused in 3 attempts")


@pytest.mark.redis
@pytest.mark.slow
def test_every_dashboard_query_returns_data_from_a_live_service(tmp_path, redis_url, x1):
    prometheus_bin = binary("prometheus")
    X, y = x1
    api_port, worker_port, prom_port = free_ports(3, PORTS)
    (tmp_path / "multiproc").mkdir()
    env = dict(os.environ, FEATUREBUDGET_REDIS_URL=redis_url,
               FEATUREBUDGET_DATA_DIR=str(tmp_path / "data"),
               PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "multiproc"),
               FEATUREBUDGET_LEASE_SECONDS="15", FEATUREBUDGET_SNAPSHOT_EVERY_EXAMPLES="50",
               FEATUREBUDGET_SNAPSHOT_EVERY_SECONDS="1", FEATUREBUDGET_CONSUMER_BLOCK_MS="50",
               FEATUREBUDGET_JOB_POLL_SECONDS="0.05", FEATUREBUDGET_VERSION_CHECK_SECONDS="0.2")
    env.pop("FEATUREBUDGET_BATCH_WORKER", None)
    worker_env = {k: v for k, v in env.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    processes = Processes(tmp_path)
    url = f"http://127.0.0.1:{api_port}"
    prometheus = f"http://127.0.0.1:{prom_port}"
    store = redis.Redis.from_url(redis_url)
    try:
        api = processes.start("api", [sys.executable, "-m", "service.cli", "serve", "--port",
                                      str(api_port), "--workers", "2"], env)
        worker = processes.start("worker", [sys.executable, "-m", "service.cli", "worker",
                                            "--metrics-port", str(worker_port)], worker_env)
        wait_until(lambda: ready(url), "the API", timeout=300, processes=[api, worker])
        wait_until(lambda: httpx.get(f"http://127.0.0.1:{worker_port}/metrics",
                                     timeout=2).status_code == 200, "the worker's metrics",
                   timeout=120, processes=[worker])
        config = tmp_path / "prometheus.yml"
        config.write_text(yaml.safe_dump(prometheus_config(f"127.0.0.1:{api_port}",
                                                           f"127.0.0.1:{worker_port}")))
        prom = processes.start("prometheus", [
            prometheus_bin, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{prom_port}"])
        wait_until(lambda: httpx.get(f"{prometheus}/-/ready", timeout=2).status_code == 200,
                   "Prometheus", timeout=60, processes=[prom])

        with httpx.Client(timeout=60) as client:
            Xd, yd = diabetes()
            for body in (
                    {"name": "spam", "algorithm": "sofs", "budget": 20, "n_features": 2000},
                    {"name": "quiet", "algorithm": "pet", "budget": 5, "n_features": 100},
                    {"name": "house", "algorithm": "cs-g-omp", "groups": DIABETES_GROUPS,
                     "params": NO_POLICY},
                    {"name": "window", "algorithm": "gbfs", "groups": DIABETES_GROUPS,
                     "params": {**NO_POLICY, "n_estimators": 3,
                                "window": {"kind": "reservoir", "size": 60}}}):
                assert client.post(f"{url}/v1/models", json=body).status_code == 201
            # Prometheus has scraped the new models' counters at 0 (from their creation), so
            # rate() and increase() (and the alerts) see their first increments
            for expr in ('featurebudget_snapshots_refused_total{model="spam"}',
                         'featurebudget_retrain_seconds_count{job="featurebudget-worker", '
                         'model="house"}'):
                wait_until(lambda expr=expr: numbers(query(prometheus, expr)) == [0.0],
                           f"{expr} at 0 in Prometheus", timeout=30)

            # ------------------------------------------------------------ online models
            examples = f"{url}/v1/models/spam/examples"
            # new connections for most requests: both API workers answer
            assert httpx.post(f"{examples}?wait=true", timeout=60,
                              json={"examples": json_examples(X, y, 0, 100)}).status_code == 202
            steal_refused_snapshot(client, store, url, x1)
            assert httpx.post(f"{examples}?wait=true", content=libsvm_text(X, y, 100, 200),
                              headers={"content-type": "text/plain"},
                              timeout=60).status_code == 202
            rows = X.row_slice(200, 300)
            blob = fbx1.encode_batch(rows.indptr, rows.indices, rows.values, y[200:300])
            assert httpx.post(f"{examples}?wait=true", content=blob, timeout=60,
                              headers={"content-type": "application/octet-stream"}
                              ).status_code == 202
            assert client.post(examples, json={"examples": [  # 2 examples, 1 request
                *json_examples(X, y, 0, 1),
                {"indices": [1], "values": [1.0], "label": 7}]}).status_code == 422
            for _ in range(2):  # the second one is a retry: not appended again
                assert client.post(examples, headers={"Idempotency-Key": "load-1"}, json={
                    "examples": json_examples(X, y, 300, 310)}).status_code == 202
            log = redis_keys.log_key("spam")  # producers writing the stream directly
            store.xadd(log, {b"fmt": b"libsvm", b"data": libsvm_text(X, y, 310, 360)})
            store.xadd(log, {b"fmt": b"json",
                             b"data": json.dumps({"examples": json_examples(X, y, 360, 400)})})
            store.xadd(log, {b"fmt": b"libsvm",  # a dead letter of 2 examples
                             b"data": b"not an example\nnor this one\n"})
            wait_until(lambda: (lambda info: info["log_position"] == info["log_end"])(
                client.get(f"{url}/v1/models/spam").json()), "spam drained", timeout=60)
            assert client.post(f"{url}/v1/models/spam/feedback", json={
                "prediction_id": "0" * 32, "label": 1}).status_code == 404

            # ------------------------------------------------------------ batch models
            for name in ("house", "window"):
                for start in range(0, 300, 100):
                    assert httpx.post(f"{url}/v1/models/{name}/examples?wait=true", json={
                        "examples": named_examples(Xd, yd, DIABETES_GROUPS, start, start + 100)},
                        timeout=60).status_code == 202
            job = client.post(f"{url}/v1/models/house/retrain").json()
            job = wait_until(lambda: (lambda j: j if j["status"] in ("succeeded", "failed")
                                      else None)(
                client.get(f"{url}/v1/models/house/jobs/{job['id']}").json()),
                "the retrain", timeout=120)
            assert job["status"] == "succeeded", job
            wait_until(lambda: all(  # every API worker serves version 1
                httpx.get(f"{url}/v1/models/house", timeout=10).json().get("version") == 1
                for _ in range(6)), "version 1 served", timeout=30)

            # ------------------------------------------------ steady traffic, both kinds
            # over several scrapes, so every rate of the last minute has increments
            until = time.monotonic() + 6
            row = 400
            while time.monotonic() < until:
                assert httpx.post(examples, timeout=30, json={
                    "examples": json_examples(X, y, row, row + 5)}).status_code == 202
                answer = httpx.post(f"{url}/v1/models/spam/predict", timeout=30, json={
                    "examples": json_examples(X, y, row, row + 2),
                    "return_prediction_ids": True}).json()
                for k, prediction_id in enumerate(answer["prediction_ids"]):
                    label = int(y[row]) if k == 0 else -answer["labels"][k]  # right, wrong
                    assert client.post(f"{url}/v1/models/spam/feedback", json={
                        "prediction_id": prediction_id, "label": label}).status_code == 200
                answer = httpx.post(f"{url}/v1/models/house/predict", timeout=30, json={
                    "examples": named_examples(Xd, None, DIABETES_GROUPS, 300, 304),
                    "budget": 3.0})
                assert answer.status_code == 200 and answer.json()["version"] == 1
                assert httpx.post(f"{url}/v1/models/window/examples", json={
                    "examples": named_examples(Xd, yd, DIABETES_GROUPS, 300, 302)},
                    timeout=30).status_code == 202
                row = 400 + (row + 5 - 400) % 150
                time.sleep(0.1)
            text = client.get(f"{url}/metrics").text

        # what the load did, as the API's /metrics says (so the panels are not only zeros)
        assert metric_value(text, "featurebudget_snapshots_refused_total", model="spam") >= 1
        assert metric_value(text, "featurebudget_deadletter_entries_total", model="spam") >= 1
        assert metric_value(text, "featurebudget_examples_repeated_total", model="spam") == 10
        assert metric_value(text, "featurebudget_feedback_total", model="spam",
                            outcome="unknown") == 1
        assert metric_value(text, "featurebudget_snapshots_refused_total", model="quiet") == 0
        for source in ("api", "stream"):  # one request / entry of 2 examples (an entry
            requests = metric_value(text, "featurebudget_rejected_requests_total",  # may be
                                    model="spam", source=source)  # read again after a lease
            assert requests == 1 or (source == "stream" and requests >= 1)  # moved)
            assert metric_value(text, "featurebudget_examples_rejected_total", model="spam",
                                source=source) == 2 * requests
        assert "_created" not in text

        # ------------------------------------------------------------ Prometheus
        pending = {expr: title for title, expr in dashboard_expressions()
                   if expr not in NOT_REQUIRED}
        last: dict[str, list] = {}
        deadline = time.monotonic() + 45
        while pending and time.monotonic() < deadline:
            for expr in list(pending):
                last[expr] = query(prometheus, expr)
                if numbers(last[expr]):
                    del pending[expr]
            if pending:
                time.sleep(1.0)
        assert not pending, "dashboard queries without data:\n" + "\n".join(
            f"  {title}: {expr} -> {last.get(expr)}" for expr, title in pending.items())

        # both targets scraped; every alert rule loaded and evaluated without error
        targets = httpx.get(f"{prometheus}/api/v1/targets", timeout=10).json()["data"]
        assert sorted((t["labels"]["job"], t["health"]) for t in targets["activeTargets"]) == [
            ("featurebudget", "up"), ("featurebudget-worker", "up")]
        groups = httpx.get(f"{prometheus}/api/v1/rules", timeout=10).json()["data"]["groups"]
        rules = {rule["name"]: rule for group in groups for rule in group["rules"]}
        alerts = yaml.safe_load((DOCKER / "prometheus/alerts.yml").read_text())
        names = {r["alert"] for g in alerts["groups"] for r in g["rules"]}
        assert set(rules) == names
        assert all(rule["health"] == "ok" for rule in rules.values()), rules
        # the refused snapshot is seen by its alert (the counter existed at 0 before it)
        firing = wait_until(lambda: [a for a in rules_alerts(prometheus)
                                     if a["labels"]["alertname"] ==
                                     "FeaturebudgetSnapshotRefused"], "the refusal alert",
                            timeout=20)
        assert {a["labels"]["model"] for a in firing} == {"spam"}

        # zero from creation: the unused model has every counter panel's series, at 0
        for expr in ('featurebudget_snapshots_refused_total{model="quiet"}',
                     'featurebudget_feedback_total{model="quiet", outcome="unknown"}',
                     'featurebudget_examples_rejected_total{model="quiet", source="stream"}',
                     'featurebudget_retrains_total{model="window", outcome="failed"}'):
            assert numbers(query(prometheus, f"sum({expr})")) == [0.0], expr  # (both jobs)
    finally:
        store.close()
        processes.stop()
    for name in ("api", "worker"):
        assert "Traceback" not in processes.log(name), processes.log(name)[-5000:]


def rules_alerts(prometheus: str) -> list[dict]:
    return httpx.get(f"{prometheus}/api/v1/alerts", timeout=10).json()["data"]["alerts"]


def test_counters_start_at_zero_when_a_model_is_created(client):
    """A counter never incremented has no series (the panel says "no data", increase()
    misses the first increment): every labelled counter of a new model exists at 0, and a
    deleted model's series go away. (Fresh names: the registry lives as long as the
    process, and other tests' models named m may have counted.)"""
    m, b = f"zero-{uuid.uuid4().hex[:8]}", f"zero-batch-{uuid.uuid4().hex[:8]}"
    assert client.post("/v1/models", json={"name": m, "algorithm": "sofs", "budget": 5,
                                           "n_features": 100}).status_code == 201
    assert client.post("/v1/models", json={"name": b, "algorithm": "cs-g-omp",
                                           "groups": DIABETES_GROUPS}).status_code == 201
    text = client.get("/metrics").text
    expected = [("featurebudget_snapshots_refused_total", {"model": m}),
                ("featurebudget_snapshots_total", {"model": m}),
                ("featurebudget_deadletter_entries_total", {"model": m}),
                ("featurebudget_examples_applied_total", {"model": m}),
                ("featurebudget_examples_repeated_total", {"model": m}),
                ("featurebudget_predictions_total", {"model": m}),
                ("featurebudget_predict_seconds_count", {"model": m}),
                ("featurebudget_update_seconds_count", {"model": m}),
                ("featurebudget_snapshot_seconds_count", {"model": m}),
                ("featurebudget_retrain_seconds_count", {"model": b}),
                ("featurebudget_snapshots_refused_total", {"model": b})]
    expected += [("featurebudget_examples_ingested_total", {"model": m, "format": f})
                 for f in ("json", "libsvm", "bin", "feedback")]
    expected += [("featurebudget_examples_rejected_total", {"model": name, "source": s})
                 for name in (m, b) for s in ("api", "stream")]
    expected += [("featurebudget_feedback_total", {"model": m, "outcome": o})
                 for o in ("correct", "wrong", "unknown")]
    expected += [("featurebudget_retrains_total", {"model": b, "algorithm": "cs-g-omp",
                                                   "outcome": o}) for o in ("succeeded", "failed")]
    for name, labels in expected:
        assert metric_value(text, name, **labels) == 0.0, (name, labels)
    assert metric_value(text, "featurebudget_model_info", model=m, kind="online",
                        algorithm="sofs") == 1.0
    assert metric_value(text, "featurebudget_model_info", model=b, kind="batch",
                        algorithm="cs-g-omp") == 1.0
    assert client.delete(f"/v1/models/{m}").status_code == 204
    text = client.get("/metrics").text
    assert f'model="{m}"' not in text
    assert metric_value(text, "featurebudget_snapshots_refused_total", model=b) == 0.0


def test_dashboard_expressions_are_many_and_distinct():
    """The required-series check above covers every panel: each panel has a query, and the
    dashboard covers what the operators watch (online and batch)."""
    panels = [p for p in json.loads(DASHBOARD.read_text())["panels"] if p["type"] != "row"]
    assert all(p.get("targets") for p in panels)
    expressions = [expr for _, expr in dashboard_expressions()]
    assert len(expressions) == len(set(expressions))
    text = "\n".join(expressions)
    for needle in ("featurebudget_examples_ingested_total", "featurebudget_examples_applied_total",
                   "featurebudget_learner_lag_seconds", "featurebudget_progressive_accuracy_ratio",
                   'kind="online"', 'kind="batch"', "featurebudget_examples_rejected_total",
                   "featurebudget_deadletter_entries_total", "featurebudget_selected_features",
                   "featurebudget_retrain_seconds_bucket", 'outcome="failed"',
                   "featurebudget_model_version", "featurebudget_read_staleness_seconds_bucket",
                   "featurebudget_snapshots_refused_total"):
        assert needle in text, needle
    assert set(NOT_REQUIRED) <= set(expressions)
