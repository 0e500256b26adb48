"""Chaos test: kill parts of a running deployment while a producer streams and clients
predict, then check that nothing acknowledged was lost, nothing was applied twice, and that
each outage showed in ``/readyz`` and in the metrics.

The deployment: a private ``redis-server`` (port 6391 by default, its own temporary
directory, ``--appendonly yes --appendfsync always``; never the shared server on 6379),
``featurebudget serve --workers 2`` and ``featurebudget worker`` (the batch worker) on it.
Models: ``chaos_online`` (SOFS, d = 5,000, B = 50) and ``chaos_batch`` (cs-g-omp, 5 groups
of 4 features, no automatic retrains).

Traffic for the whole run:

* a REST producer posts 40-example FBX1 bodies to ``chaos_online``, each with its own
  ``Idempotency-Key``, retrying a body (same key) until it is acknowledged (202);
* a stream producer XADDs 10-example FBX1 entries with targets to ``chaos_batch``'s log,
  retrying on connection errors; an entry is acknowledged when XADD answers its id;
* a client predicts one example at a time (``chaos_online``);
* a probe opens a new connection to ``/readyz`` every 0.2 s (either worker answers) and
  reads the API's ``/metrics`` and the batch worker's (``--metrics-port``) every second.

Faults, in order, with ``--settle`` seconds of traffic between them:

1. ``api-worker``: SIGKILL the uvicorn worker that folds ``chaos_online`` (the pid in its
   lease); uvicorn starts a new one, the other worker takes the fold over when the lease
   (``FEATUREBUDGET_LEASE_SECONDS``, 2 s here) expires;
2. ``redis``: SIGKILL redis-server, restart it ``--redis-down`` seconds later from its AOF;
3. ``batch-worker``: SIGKILL ``featurebudget worker``, restart it 2 s later.

Then the producers stop, the models drain, the processes stop cleanly (final snapshots)
and the checks run: every acknowledged body / entry is in the log, byte for byte; every REST
body is in the log exactly once; ``chaos_online``'s learner equals one ``partial_fit`` over
its log, ``chaos_batch``'s fold state one pass of the fold over its log (so no entry was
applied twice or skipped): counts, integers and shapes exactly, floats within ``RTOL``
(1e-9) of the array's largest magnitude, since the service folds in blocks whose sums run in
another order (seen: at most 3e-14 relative; one missing example of n moves them by ~1/n).
Per fault: how long ``/readyz`` answered 503 and with what status, the longest gap between
two increases of ``featurebudget_examples_applied_total`` (online, API) and
``featurebudget_statistics_examples`` (batch, worker; metrics are read every second, so 1 s
is no gap), the highest
``featurebudget_learner_lag_seconds``, the scrapes of the worker's metrics that failed, the
clients' answers.
Prints a table and writes JSON; exit status 1 when a check fails.

    python load_tests/chaos.py                    # about 2 minutes
"""

from __future__ import annotations

import argparse
import collections
import json
import platform
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _harness import connect, create, inspect, ready, start_api  # noqa: E402
from _servers import RedisServer, children_of, pick_port, service_env, worker  # noqa: E402

from algorithms.online import LEARNERS  # noqa: E402
from algorithms.serialization import loads_state  # noqa: E402
from service import fbx1  # noqa: E402
from service.batch.spec import BatchLayout, split_params  # noqa: E402
from service.batch.worker.fold_state import BatchFoldState  # noqa: E402
from service.batch.worker.ingest import parse_batch_entry  # noqa: E402
from service.ingest import parse_entry  # noqa: E402
from service.schemas import ModelCreate  # noqa: E402
from service.snapshot_file import open_snapshot  # noqa: E402
from service.storage import redis_keys  # noqa: E402
from tests.support.online import concat  # noqa: E402

ONLINE = {"name": "chaos_online", "algorithm": "sofs", "n_features": 5000, "budget": 50}
GROUPS = [{"name": f"g{g}", "features": [f"g{g}_{k}" for k in range(4)], "cost": 1.0 + g}
          for g in range(5)]
BATCH = {"name": "chaos_batch", "algorithm": "cs-g-omp", "groups": GROUPS,
         "params": {"retrain_every_examples": None, "retrain_every_seconds": None}}
METRICS = re.compile(r'^(featurebudget_examples_applied_total|featurebudget_learner_lag_seconds|'
                     r'featurebudget_statistics_examples)\{model="([^"]+)"\} ([0-9.e+-]+)$')


# ---------------------------------------------------------------------------- traffic
class Run:
    """The producers, the predicting client and the probes; what they saw, by time."""

    def __init__(self, url: str, redis_url: str, seed: int, worker_metrics: str) -> None:
        self.url, self.redis_url, self.worker_metrics = url, redis_url, worker_metrics
        self.rng = np.random.default_rng(seed)
        self.started = time.monotonic()
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.rest_acked: dict[int, str] = {}  # body number -> log id
        self.rest_bodies: list[bytes] = []
        self.stream_acked: dict[str, bytes] = {}  # entry id -> payload
        self.counts: collections.Counter = collections.Counter()
        self.events: list[tuple[float, str, str]] = []  # (t, what, status)
        self.readyz: list[tuple[float, int, str]] = []
        self.metrics: list[tuple[float, dict]] = []
        self.threads: list[threading.Thread] = []
        self.w = self.rng.standard_normal(ONLINE["n_features"])

    def t(self) -> float:
        return time.monotonic() - self.started

    def note(self, what: str, status) -> None:
        with self.lock:
            self.counts[f"{what} {status}"] += 1
            self.events.append((self.t(), what, str(status)))

    def online_body(self) -> bytes:
        n, m, d = 40, 20, ONLINE["n_features"]
        indices = np.concatenate([np.sort(self.rng.choice(d, m, replace=False))
                                  for _ in range(n)]).astype(np.int32)
        values = self.rng.standard_normal(n * m) / np.sqrt(m)
        scores = (self.w[indices] * values).reshape(n, m).sum(axis=1)
        labels = np.where(scores >= 0, 1, -1).astype(np.int8)
        return fbx1.encode_batch(np.arange(0, (n + 1) * m, m), indices, values, labels,
                                 value_bytes=8)

    def batch_entry(self) -> bytes:
        n, D = 10, sum(len(g["features"]) for g in GROUPS)
        X = self.rng.standard_normal((n, D))
        y = X @ np.linspace(-1, 1, D) + 0.1 * self.rng.standard_normal(n)
        indptr = np.arange(0, (n + 1) * D, D)
        return fbx1.encode_batch(indptr, np.tile(np.arange(D, dtype=np.int32), n),
                                 X.ravel(), y, targets=True)

    def rest_producer(self, rate: float) -> None:
        k = 0
        with httpx.Client(base_url=self.url, timeout=10) as client:
            while not self.stop.is_set():
                body = self.online_body()
                with self.lock:
                    self.rest_bodies.append(body)
                while True:  # the same body and key until acknowledged
                    try:
                        response = client.post(
                            "/v1/models/chaos_online/examples", content=body,
                            headers={"content-type": "application/octet-stream",
                                     "idempotency-key": f"chaos-{k}"})
                        status = response.status_code
                    except httpx.HTTPError as exc:
                        status, response = type(exc).__name__, None
                    self.note("ingest", status)
                    if response is not None and status == 202:
                        with self.lock:
                            self.rest_acked[k] = response.json()["log_ids"][0]
                        break
                    if self.stop.wait(0.2):
                        return  # stopped while this body was unacknowledged
                k += 1
                self.stop.wait(1.0 / rate)

    def stream_producer(self, rate: float) -> None:
        import redis

        client = redis.Redis.from_url(self.redis_url, socket_timeout=5)
        while not self.stop.is_set():
            payload = self.batch_entry()
            while not self.stop.is_set():
                try:
                    entry_id = client.xadd(redis_keys.log_key("chaos_batch"),
                                           {b"fmt": b"bin", b"data": payload})
                except redis.RedisError as exc:
                    self.note("xadd", type(exc).__name__)
                    self.stop.wait(0.2)
                    continue
                self.note("xadd", "ok")
                with self.lock:
                    self.stream_acked[entry_id.decode()] = payload
                break
            self.stop.wait(1.0 / rate)

    def predictor(self, rate: float) -> None:
        example = {"indices": [1, 7, 300], "values": [0.5, -1.0, 0.25]}
        with httpx.Client(base_url=self.url, timeout=5) as client:
            while not self.stop.is_set():
                try:
                    status = client.post("/v1/models/chaos_online/predict",
                                         json={"examples": [example]}).status_code
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                self.note("predict", status)
                self.stop.wait(1.0 / rate)

    def prober(self) -> None:
        last_metrics = 0.0
        while not self.stop.is_set():
            try:  # a new connection each time: either worker answers
                response = httpx.get(f"{self.url}/readyz", timeout=2)
                status = response.json().get("status", "") if response.content else ""
                self.readyz.append((self.t(), response.status_code, status))
            except (httpx.HTTPError, ValueError) as exc:
                self.readyz.append((self.t(), 0, type(exc).__name__))
            if time.monotonic() - last_metrics >= 1.0:
                last_metrics = time.monotonic()
                values: dict = {}
                for source, url in (("api", self.url), ("worker", self.worker_metrics)):
                    try:
                        text = httpx.get(f"{url}/metrics", timeout=2).text
                    except httpx.HTTPError:
                        values[f"{source} /metrics unreachable"] = 1.0
                        continue
                    for line in text.splitlines():
                        match = METRICS.match(line)
                        if match:
                            values[f"{match.group(1)}|{match.group(2)}"] = float(match.group(3))
                self.metrics.append((self.t(), values))
            self.stop.wait(0.2)

    def start(self, args) -> None:
        for target, arguments in ((self.rest_producer, (args.rest_rate,)),
                                  (self.stream_producer, (args.stream_rate,)),
                                  (self.predictor, (args.predict_rate,)), (self.prober, ())):
            thread = threading.Thread(target=target, args=arguments, daemon=True)
            thread.start()
            self.threads.append(thread)

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=30)


# ---------------------------------------------------------------------------- faults
def api_workers(server) -> list[int]:
    out = []
    for pid in children_of(server.pid):
        try:
            if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.append(pid)
        except OSError:
            pass
    return out


def owner_pid(r, model: str) -> int | None:
    value = r.get(redis_keys.lease_key(model))
    if not value:
        return None
    parts = value.decode().split(":")
    return int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else None


def wait_for(predicate, timeout: float, step: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except Exception:  # noqa: BLE001 - e.g. Redis still down
            pass
        time.sleep(step)
    return False


def summarize_window(run: Run, name: str, start: float, end: float) -> dict:
    """What the probes and clients saw between ``start`` and ``end`` (seconds of the run)."""
    probes = [(t, code, status) for t, code, status in run.readyz if start <= t < end]
    not_ready = [(t, code, status) for t, code, status in probes if code != 200]
    spans, current = [], None
    for t, code, _status in probes:
        if code != 200 and current is None:
            current = t
        elif code == 200 and current is not None:
            spans.append(t - current)
            current = None
    if current is not None:
        spans.append(end - current)
    counts = collections.Counter(f"{what} {status}" for t, what, status in run.events
                                 if start <= t < end)
    window = [(t, v) for t, v in run.metrics if start <= t < end]
    stalls = {}
    lag = {}
    for model in ("chaos_online", "chaos_batch"):
        key = ("featurebudget_examples_applied_total" if model == "chaos_online"
               else "featurebudget_statistics_examples") + f"|{model}"  # (worker's gauge)
        longest, grew_at, last = 0.0, None, None  # the longest gap between two increases
        for t, values in window:
            value = values.get(key)
            if value is None:
                continue
            if last is None or value > last:
                if grew_at is not None:
                    longest = max(longest, t - grew_at)
                grew_at, last = t, value
        if grew_at is not None:
            longest = max(longest, end - grew_at)
        stalls[model] = round(longest, 1) if last is not None else None
        lags = [v.get(f"featurebudget_learner_lag_seconds|{model}") for _, v in window]
        lags = [x for x in lags if x is not None]
        lag[model] = round(max(lags), 2) if lags else None
    unreachable = sum(1 for _, v in window if "worker /metrics unreachable" in v)
    return {"fault": name, "start_s": round(start, 1), "end_s": round(end, 1),
            "worker_metrics_unreachable_scrapes": unreachable,
            "readyz_probes": len(probes), "readyz_not_200": len(not_ready),
            "readyz_not_ready_seconds": round(max(spans, default=0.0), 1),
            "readyz_statuses": sorted({f"{code} {status}" for _, code, status in not_ready}),
            "applied_stall_seconds": stalls, "max_learner_lag_seconds": lag,
            "client_answers": dict(sorted(counts.items()))}


# ---------------------------------------------------------------------------- checks
def online_oracle(entries) -> tuple[dict, int]:
    batch = concat([parse_entry(fields, ONLINE["n_features"], None) for _, fields in entries])
    learner = LEARNERS["sofs"](n_features=ONLINE["n_features"], budget=ONLINE["budget"])
    learner.partial_fit(batch.X, batch.labels.astype(np.float64))
    return learner.state_dict(), len(batch)


def batch_oracle(entries) -> dict:
    spec = ModelCreate(**BATCH)
    state = BatchFoldState(spec.family, BatchLayout(spec), split_params(spec))
    for entry_id, fields in entries:
        batch = parse_batch_entry(fields, state.layout, spec.task)
        state.apply_entry(entry_id.decode(), batch.X, batch.labels)
    return state.state_dict()


RTOL = 1e-9  # floats: |x - y| <= RTOL * the array's largest magnitude (summation order)


def _differs(left, right, rtol: float) -> bool:
    """Whether two state values differ: floats within ``rtol`` of the larger magnitude in
    either array (NaN only where NaN, infinities equal), anything else exactly. O(size)."""
    if isinstance(left, np.ndarray) or isinstance(right, np.ndarray) or \
            isinstance(left, float) or isinstance(right, float):
        left, right = np.asarray(left), np.asarray(right)
        if left.shape != right.shape:
            return True
        if left.dtype.kind != "f" or right.dtype.kind != "f":
            return left.dtype != right.dtype or not np.array_equal(left, right)
        finite = np.isfinite(left)
        if not np.array_equal(finite, np.isfinite(right)) or \
                not np.array_equal(left[~finite], right[~finite], equal_nan=True):
            return True
        if not finite.any():
            return False
        x, y = left[finite].astype(np.float64), right[finite].astype(np.float64)
        scale = max(float(np.abs(x).max()), float(np.abs(y).max()))
        return bool(np.any(np.abs(x - y) > rtol * scale))
    return left != right


def same(a: dict, b: dict, skip=(), rtol: float = RTOL) -> list[str]:
    """Keys whose values differ (but those starting with one of ``skip``): counts,
    integers, strings and shapes exactly, floats within ``rtol`` of the array's largest
    magnitude. O(state size)."""
    keys = {k for k in [*a, *b] if not k.startswith(skip)}
    return [key for key in sorted(keys) if _differs(a.get(key), b.get(key), rtol)]


def checks(run: Run, r) -> dict:
    online = r.xrange(redis_keys.log_key("chaos_online"))
    by_id = {e.decode(): fields for e, fields in online}
    lost_rest = [k for k, log_id in run.rest_acked.items()
                 if log_id not in by_id or by_id[log_id][b"data"] != run.rest_bodies[k]]
    payloads = collections.Counter(bytes(fields[b"data"]) for _, fields in online)
    twice_rest = sum(1 for k in run.rest_acked if payloads[run.rest_bodies[k]] > 1)
    batch_log = r.xrange(redis_keys.log_key("chaos_batch"))
    batch_ids = {e.decode(): fields for e, fields in batch_log}
    lost_stream = [i for i, payload in run.stream_acked.items()
                   if i not in batch_ids or batch_ids[i][b"data"] != payload]
    expected, n_online = online_oracle(online)
    served = open_snapshot(loads_state(r.hget(redis_keys.snapshot_key("chaos_online"),
                                              b"state"))).model
    folded = open_snapshot(loads_state(r.hget(redis_keys.snapshot_key("chaos_batch"),
                                              b"state"))).model
    expected_batch = batch_oracle(batch_log)
    return {
        "online": {"acknowledged_bodies": len(run.rest_acked), "log_entries": len(online),
                   "acknowledged_lost": len(lost_rest), "bodies_in_log_twice": twice_rest,
                   "examples_in_log": n_online, "examples_applied": int(served["n_examples"]),
                   "state_differs_from_one_partial_fit": same(served, expected)},
        "batch": {"acknowledged_entries": len(run.stream_acked), "log_entries": len(batch_log),
                  "acknowledged_lost": len(lost_stream),
                  "examples_in_log": sum(int(np.frombuffer(bytes(f[b"data"])[8:12], "<u4")[0])
                                         for _, f in batch_log),
                  "examples_folded": int(folded.get("examples", -1)),
                  "state_differs_from_one_pass": same(folded, expected_batch)},
    }


def passed(result: dict) -> bool:
    o, b = result["checks"]["online"], result["checks"]["batch"]
    faults_seen = all(f["readyz_not_200"] > 0 for f in result["faults"])
    return (o["acknowledged_lost"] == 0 and o["bodies_in_log_twice"] == 0
            and not o["state_differs_from_one_partial_fit"]
            and o["examples_applied"] == o["examples_in_log"]
            and b["acknowledged_lost"] == 0 and not b["state_differs_from_one_pass"]
            and b["examples_folded"] == b["examples_in_log"] and faults_seen
            and all(result["recovered"].values()))


def print_report(result: dict) -> None:
    print(f"\nchaos: {result['seconds']:.0f} s of traffic on serve --workers 2 + worker, "
          f"private Redis {result['redis']} (AOF always)\n")
    print("| fault | /readyz not ready (longest, s) | /readyz answers | longest gap "
          "between applied increases (s) online / batch | max learner lag (s) online | "
          "worker /metrics down (scrapes) | client answers |")
    print("| --- | ---: | --- | ---: | ---: | ---: | --- |")
    for f in result["faults"]:
        stall, lag = f["applied_stall_seconds"], f["max_learner_lag_seconds"]
        answers = ", ".join(f"{k}: {v}" for k, v in f["client_answers"].items())
        print(f"| {f['fault']} | {f['readyz_not_ready_seconds']} | "
              f"{'; '.join(f['readyz_statuses']) or '-'} | {stall['chaos_online']} / "
              f"{stall['chaos_batch']} | {lag['chaos_online']} | "
              f"{f['worker_metrics_unreachable_scrapes']} | {answers} |")
    o, b = result["checks"]["online"], result["checks"]["batch"]
    print("\n| check | chaos_online (REST, Idempotency-Key) | chaos_batch (stream) |")
    print("| --- | --- | --- |")
    print(f"| acknowledged | {o['acknowledged_bodies']:,} bodies | "
          f"{b['acknowledged_entries']:,} entries |")
    print(f"| log entries | {o['log_entries']:,} | {b['log_entries']:,} |")
    print(f"| acknowledged but lost | {o['acknowledged_lost']} | {b['acknowledged_lost']} |")
    print(f"| body in the log twice | {o['bodies_in_log_twice']} | - |")
    print(f"| examples in log / applied | {o['examples_in_log']:,} / "
          f"{o['examples_applied']:,} | {b['examples_in_log']:,} / {b['examples_folded']:,} |")
    online_diff = o["state_differs_from_one_partial_fit"] or "yes"
    batch_diff = b["state_differs_from_one_pass"] or "yes"
    print(f"| state = one pass over the log (counts exact, floats within rtol {RTOL:g}) | "
          f"{online_diff} | {batch_diff} |")
    print(f"\nrecovered: {result['recovered']}; verdict: "
          f"{'PASS' if result['passed'] else 'FAIL'}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis-port", type=int, default=6391)
    parser.add_argument("--settle", type=float, default=20.0,
                        help="seconds of traffic before the first fault and after each")
    parser.add_argument("--redis-down", type=float, default=5.0)
    parser.add_argument("--rest-rate", type=float, default=20.0)
    parser.add_argument("--stream-rate", type=float, default=20.0)
    parser.add_argument("--predict-rate", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(ROOT / "load_tests" / "chaos_results.json"))
    args = parser.parse_args(argv)
    if args.redis_port == 6379:
        parser.error("6379 is the shared Redis: chaos kills the server it uses")

    import redis

    work = Path(tempfile.mkdtemp(prefix="fb-chaos-"))
    redis_server = RedisServer(args.redis_port, work / "redis")
    redis_server.start()
    redis_url = f"{redis_server.url}/0"
    r = redis.Redis.from_url(redis_url, socket_timeout=5)
    env = service_env(redis_url=redis_url, data_dir=work / "data", lease_seconds=2,
                      snapshot_every_seconds=1, snapshot_every_examples=2000,
                      trim_log="false", consumer_block_ms=50, autoclaim_idle_ms=1000,
                      job_poll_seconds=0.1)
    api_port = pick_port(18100, 18199)
    metrics_port = pick_port(18100, 18199, skip=(api_port,))
    try:
        api = start_api(api_port, env, work, workers=2)
    except BaseException:
        redis_server.stop()
        raise
    batch_worker = worker(env, work, metrics_port=metrics_port)
    result: dict = {"redis": f"127.0.0.1:{args.redis_port}", "workdir": str(work),
                    "machine": {"python": platform.python_version()}, "faults": [],
                    "recovered": {}}
    try:
        with connect(api.url, timeout=30) as client:
            create(client, ONLINE)
            create(client, BATCH)
        wait_for(lambda: owner_pid(r, "chaos_online") is not None, 30)
        run = Run(api.url, redis_url, args.seed, f"http://127.0.0.1:{metrics_port}")
        run.start(args)
        time.sleep(args.settle)

        # 1. an API worker
        start = run.t()
        victim = owner_pid(r, "chaos_online")
        before = set(api_workers(api))
        if victim not in before:
            victim = sorted(before)[0]
        import os
        import signal

        os.kill(victim, signal.SIGKILL)
        result["recovered"]["api-worker respawned"] = wait_for(
            lambda: len(set(api_workers(api)) - {victim}) == 2, 60)
        result["recovered"]["api-worker fold taken over"] = wait_for(
            lambda: owner_pid(r, "chaos_online") not in (None, victim), 60)
        time.sleep(args.settle)
        result["faults"].append({**summarize_window(run, "SIGKILL the API worker folding "
                                                          "chaos_online", start, run.t()),
                                 "killed_pid": victim})

        # 2. Redis itself
        start = run.t()
        redis_server.kill()
        time.sleep(args.redis_down)
        redis_server.start()
        result["recovered"]["redis back, ready"] = wait_for(lambda: ready(api.url), 60)
        time.sleep(args.settle)
        result["faults"].append(summarize_window(run, f"SIGKILL redis-server, restart after "
                                                      f"{args.redis_down:g} s (AOF)",
                                                 start, run.t()))

        # 3. the batch worker
        start = run.t()
        batch_worker.kill()
        time.sleep(2.0)
        batch_worker.start()
        result["recovered"]["batch worker folding again"] = wait_for(lambda: ready(api.url), 60)
        time.sleep(args.settle)
        result["faults"].append(summarize_window(run, "SIGKILL featurebudget worker, restart "
                                                      "after 2 s", start, run.t()))

        run.finish()
        result["seconds"] = run.t()
        result["client_answers"] = dict(sorted(run.counts.items()))

        def drained() -> bool:
            with connect(api.url, timeout=10) as client:
                infos = [inspect(client, m) for m in ("chaos_online", "chaos_batch")]
            return all(i["log_end"] and i["log_position"] == i["log_end"] for i in infos)

        result["recovered"]["drained"] = wait_for(drained, 120, 0.2)
        result["exit_codes"] = {"worker": batch_worker.stop(timeout=60),
                                "serve": api.stop(timeout=60)}  # final snapshots
        result["checks"] = checks(run, r)
        result["passed"] = passed(result)
    finally:
        batch_worker.stop(timeout=30)
        api.stop(timeout=30)
        redis_server.stop()
    print_report(result)
    Path(args.out).write_text(json.dumps(result, indent=1, default=str))
    print(f"\nwrote {args.out} (logs in {work})", file=sys.stderr)
    return 0 if result.get("passed") else 1


if __name__ == "__main__":
    sys.exit(main())
