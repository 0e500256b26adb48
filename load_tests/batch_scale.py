"""Batch (anytime) models at real sizes: D = 500 / 2,000 / 5,000 / 10,000, embedded and Redis.

One ``cs-g-omp`` model per D, in groups of 50 features (D / 50 groups, costs drawn in
0.5..5), on each backend:

* ``embedded``: one ``featurebudget serve`` with a temporary data dir that folds and
  retrains batch models in-process (``FEATUREBUDGET_BATCH_WORKER=true``);
* ``redis``: one ``featurebudget serve`` and one ``featurebudget worker`` (which folds and
  retrains) on ``--redis-url`` (db 11 by default, flushed before, between and after).

Fresh processes for every D x backend (peak RSS per size). Data: seeded synthetic
regression rows, each carrying 4 of the groups drawn at random (200 non-zeros: a latent
factor per group plus noise), sparse true weights. Per D the model gets ``2·D + 1,000``
bulk rows, then the one-example and the 500-example entries (below); phases, in order:

1. **creation**: ``POST /v1/models``: 201, or the refusal (status and body: the service's
   reason). A refusal ends the row there ("refused"); anything else that goes wrong later
   (a crash, a timeout, a failed job) makes it a failure row.
2. **bulk REST libsvm**: the bulk rows as ``text/x-libsvm`` bodies of 1,000 rows (feature
   index = position in the concatenated groups, 1-based), up to 4 POSTs in flight; examples/s
   from the first POST to the moment ``GET /v1/models/{m}`` reports them all applied
   (``examples_applied``, polled every 20 ms).
3. **one-example entries**: 400 POSTs of one example each (FBX1 binary bodies with targets,
   up to 16 in flight, none waiting for its fold); examples/s from the first POST to all
   applied (and how long after the last 202). On Redis also one-example entries XADDed to
   the model's log in one pipeline (what the POSTs append, minus HTTP): the fold then reads
   them from a backlog, which isolates its own rate from the client's. The backlog holds
   the rows of the 500-example entries, one per entry (as many examples as phase 4, so
   the two rates span alike; 200-400 entries folded in tens of milliseconds, where the
   20 ms polling of ``examples_applied`` alone moved the rate by half).
4. **500-example entries**: 8 POSTs of 500 examples (FBX1), measured the same way. Goal: the
   one-example rate within 2x of this one.
   Next to 2-4, the floor: bare :meth:`SufficientStatistics.update` on the same rows in
   the same entries (one update per body / entry; 1,000-row chunks for the bulk rows), in
   this process before the servers start (each capped at ``--bare-seconds``).
5. **retrain -> served**: ``POST /retrain`` to the moment ``GET /v1/models/{m}`` serves
   the job's version; the job's queue wait and ``duration_seconds`` (and any other
   ``*_seconds`` it reports), the service's ``*_seconds`` histograms of the model
   (snapshot writes, retrains, publishes, whatever ``/metrics`` of the folding process
   has), and the bytes stored (data dir files or the model's Redis keys). The fold is
   configured to snapshot every ``2·D + 1,000`` examples so at least one snapshot is
   written during the run (``FEATUREBUDGET_SNAPSHOT_EVERY_EXAMPLES``; the time trigger stays
   at its default).
6. **cold budgeted predictions**: 30 requests back to back, each one example with a
   never-seen computed set of about half the groups (drawn at random, never a set asked
   before nor a set ``S ∪ {next_group}`` an earlier answer named): median and p99; meanwhile
   a thread polls ``GET /healthz`` every 5 ms on its own connection (p99 and max, from the
   send; also from the scheduled time). Goals at D = 2,000: median < 100 ms; ``/healthz``
   p99 < 10 ms and max < 50 ms.
7. **warm prediction**: one fixed set (half the groups), one warm-up request, then 500
   requests/s for 5 s with the open-loop raw asyncio client of ``predict_latency.py``
   (``RawPool``, its generator process): p50 / p99 / max, and how late the generator sent
   (its send lag). Goal: p99 < 5 ms. Then the floor: ``GET /healthz`` (no work)
   at the same rate, as long, with the same client.
8. **peak RSS** of the server (and worker) processes (``VmHWM``: the process's lifetime
   peak; and the RSS once ready, before the model), next to the service's own size estimate
   for the spec (``service.batch.spec.estimate_sizes`` / ``memory_bytes``, whichever exists,
   called defensively).

Every wait is bounded (``--phase-timeout``, 600 s by default: a phase that takes longer is
recorded as a timeout, the row as failed). Only loopback, ports 18850-18869. Prints a
markdown table (one row per D x backend) and writes JSON::

    python load_tests/batch_scale.py                      # all sizes, both backends
    python load_tests/batch_scale.py --quick              # D = 500, 2,000, embedded, small
    python load_tests/batch_scale.py --sizes 5000 --backends redis

Never imported by ``tests/``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import http.client
import json
import math
import os
import platform
import random
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import orjson
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "load_tests"))

import _servers  # noqa: E402
import predict_latency  # noqa: E402  (the open-loop generator: RawPool, _generate)
from _harness import applied, connect, create, inspect, metrics, wait_job  # noqa: E402
from _harness import wait_applied as harness_wait_applied  # noqa: E402
from _servers import Child, children_of, pick_port, rss_bytes, wait_ready  # noqa: E402
from batch_service import wait_owned  # noqa: E402

from algorithms.anytime import SufficientStatistics  # noqa: E402
from clients import FeaturebudgetClient, ServiceError  # noqa: E402
from service import fbx1 as codec  # noqa: E402
from service.storage import redis_keys  # noqa: E402

GROUP_SIZE = 50
GROUPS_PER_ROW = 4  # groups each synthetic row carries (200 non-zeros)
BULK_ROWS = 1000  # rows per bulk libsvm body
BLOCK_ROWS = 500  # rows per "500-example" entry
NO_POLICY = {"retrain_every_examples": None, "retrain_every_seconds": None}
PORTS = (18850, 18869)
REDIS_URL = "redis://127.0.0.1:6379/11"
HEALTHZ_EVERY_S = 0.005
WARM_RATE = 500.0

GOALS = {"cold_median_ms_at_2000": 100.0, "healthz_p99_ms": 10.0, "healthz_max_ms": 50.0,
         "warm_p99_ms": 5.0, "fold_ratio_max": 2.0}

MODES = {
    "full": {"sizes": (500, 2000, 5000, 10000), "backends": ("embedded", "redis"),
             "one_example": 400, "blocks": 8, "cold": 30, "warm_seconds": 5.0,
             "phase_timeout": 600.0, "bare_seconds": 60.0},
    "quick": {"sizes": (500, 2000), "backends": ("embedded",),
              "one_example": 200, "blocks": 4, "cold": 15, "warm_seconds": 2.0,
              "phase_timeout": 180.0, "bare_seconds": 10.0},
}


class PhaseTimeoutError(Exception):
    """A bounded wait ran out."""


# ============================================================================ data
def group_specs(D: int, seed: int) -> list[dict]:
    G = D // GROUP_SIZE
    costs = np.round(np.random.default_rng(seed).uniform(0.5, 5.0, G), 2)
    return [{"name": f"g{g}", "features": [f"g{g}_f{k}" for k in range(GROUP_SIZE)],
             "cost": float(costs[g])} for g in range(G)]


def make_rows(n: int, D: int, seed: int) -> tuple[sp.csr_matrix, np.ndarray]:
    """``n`` rows, each with ``GROUPS_PER_ROW`` groups drawn at random (all their features
    non-zero: 0.8 · a latent factor of the group + 0.6 · noise), sorted indices; targets
    from sparse true weights (30% non-zero) plus noise."""
    rng = np.random.default_rng(seed)
    G = D // GROUP_SIZE
    k = min(GROUPS_PER_ROW, G)
    chosen = np.sort(np.argsort(rng.random((n, G)), axis=1)[:, :k], axis=1)  # (n, k)
    cols = (chosen[:, :, None] * GROUP_SIZE + np.arange(GROUP_SIZE)).reshape(n, -1)
    latent = rng.standard_normal((n, k, 1))
    vals = (0.8 * latent + 0.6 * rng.standard_normal((n, k, GROUP_SIZE))).reshape(n, -1)
    w = rng.standard_normal(D) * (rng.random(D) < 0.3)
    y = (vals * w[cols]).sum(axis=1) + 0.5 * rng.standard_normal(n)
    nnz = cols.shape[1]
    X = sp.csr_matrix((vals.ravel(), cols.ravel(), np.arange(0, n * nnz + 1, nnz)),
                      shape=(n, D))
    return X, y


def libsvm_body(X: sp.csr_matrix, y: np.ndarray) -> bytes:
    lines = []
    for row in range(X.shape[0]):
        lo, hi = X.indptr[row], X.indptr[row + 1]
        pairs = " ".join(f"{i + 1}:{v:.6g}" for i, v in zip(X.indices[lo:hi].tolist(),
                                                           X.data[lo:hi].tolist(), strict=True))
        lines.append(f"{y[row]:.6g} {pairs}")
    return ("\n".join(lines) + "\n").encode()


def fbx1(X: sp.csr_matrix, y: np.ndarray) -> bytes:
    return codec.encode_batch(X.indptr.astype(np.int64), X.indices, X.data, y, targets=True)


def example_json(groups: list[dict], row: np.ndarray, ids: list[int]) -> dict:
    """A named example carrying the groups ``ids`` (values from the dense ``row``)."""
    return {"features": {groups[g]["name"]: {
        name: round(float(row[g * GROUP_SIZE + k]), 6)
        for k, name in enumerate(groups[g]["features"])} for g in ids}}


# ============================================================================ the floor
def bare_updates(D: int, parts: list[tuple[sp.csr_matrix, np.ndarray]], cap_s: float
                 ) -> dict:
    """``SufficientStatistics.update`` once per part (in order) on fresh statistics until
    all are done or ``cap_s`` passes: examples/s over the parts done."""
    stats = SufficientStatistics(D)
    stats.update(parts[0][0][:1], parts[0][1][:1])  # first-use costs out of the clock
    stats = SufficientStatistics(D)
    done = examples = 0
    t0 = time.perf_counter()
    for X, y in parts:
        stats.update(X, y)
        done += 1
        examples += X.shape[0]
        if time.perf_counter() - t0 > cap_s:
            break
    seconds = time.perf_counter() - t0
    del stats
    gc.collect()
    return {"updates": done, "of": len(parts), "examples": examples, "seconds": seconds,
            "examples_per_s": examples / seconds if seconds > 0 else None,
            "capped": done < len(parts)}


# ============================================================================ estimates
def service_estimate(body: dict) -> dict:
    """The service's own size (and fit time) estimate for the spec, whatever the functions
    are called by now (``service/batch/spec.py`` is being reworked): never raises."""
    out: dict = {}
    try:
        from service.batch import spec as bspec
        from service.schemas import ModelCreate

        spec = ModelCreate(**body)
        params = bspec.split_params(spec)
    except Exception as exc:  # noqa: BLE001 - reported
        return {"error": f"{type(exc).__name__}: {exc}"}
    estimate = getattr(bspec, "estimate_sizes", None)
    if callable(estimate):
        try:
            sizes = estimate(spec, params)
            parts = getattr(sizes, "parts", None)
            out["parts"] = {k: int(v) for k, v in (parts() if callable(parts) else
                                                   (parts or {})).items()}
            for name in ("peak_bytes", "stored_bytes", "total"):
                value = getattr(sizes, name, None)
                if isinstance(value, int | float):
                    out[name] = int(value)
        except Exception as exc:  # noqa: BLE001
            out["estimate_sizes_error"] = f"{type(exc).__name__}: {exc}"
    memory = getattr(bspec, "memory_bytes", None)
    if callable(memory):
        try:
            out["memory_bytes"] = int(memory(spec, params))
        except Exception as exc:  # noqa: BLE001
            out["memory_bytes_error"] = f"{type(exc).__name__}: {exc}"
    fit_seconds = getattr(bspec, "estimate_fit_seconds", None)
    if callable(fit_seconds):
        try:
            out["fit_seconds"] = float(fit_seconds(spec, params))
        except Exception as exc:  # noqa: BLE001
            out["fit_seconds_error"] = f"{type(exc).__name__}: {exc}"
    out["peak_estimate_bytes"] = out.get("peak_bytes", out.get("memory_bytes"))
    return out


# ============================================================================ processes
def vm_hwm(pid: int) -> int | None:
    """Peak resident set (``VmHWM``) of ``pid``, bytes; None once gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def process_tree(child: Child) -> list[int]:
    return [child.pid, *children_of(child.pid)]


class Stack:
    """The processes of one backend: ``serve`` (+ ``worker`` on Redis)."""

    def __init__(self, backend: str, work: Path, redis_url: str, snapshot_every: int,
                 timeout: float, max_model_bytes: int | None = None) -> None:
        self.backend = backend
        self.work = work
        self.children: list[Child] = []
        data_dir = work / "data"
        data_dir.mkdir(exist_ok=True)
        self.data_dir = data_dir
        settings = {"snapshot_every_examples": snapshot_every}
        if max_model_bytes:
            settings["max_model_bytes"] = int(max_model_bytes)
        if backend == "embedded":
            env = _servers.service_env(data_dir=data_dir, batch_worker="true", **settings)
        else:
            env = _servers.service_env(redis_url=redis_url, data_dir=data_dir, **settings)
        try:
            self._start(backend, env, work, timeout)
        except BaseException:  # never leave a half-started stack running
            self.stop()
            raise
        self.ready_rss = self.rss_now()

    def _start(self, backend: str, env: dict, work: Path, timeout: float) -> None:
        port = pick_port(*PORTS)
        self.api = _servers.serve(port, env, work, label="serve")
        self.children.append(self.api)
        self.worker: Child | None = None
        self.metrics_url = self.api.url
        if backend == "redis":
            metrics_port = pick_port(*PORTS, skip=(port,))
            self.worker = _servers.worker(env, work, metrics_port=metrics_port)
            self.children.append(self.worker)
            self.metrics_url = f"http://127.0.0.1:{metrics_port}"
        started = time.monotonic()
        wait_ready(self.api, timeout=timeout)
        if self.worker is not None:  # its metrics endpoint answers once it runs
            deadline = time.monotonic() + timeout
            while True:
                if not self.worker.alive():
                    raise RuntimeError(f"worker exited:\n{self.worker.tail()}")
                try:
                    metrics(self.metrics_url, timeout=2)
                    break
                except (ServiceError, httpx.HTTPError):
                    pass
                if time.monotonic() > deadline:
                    raise PhaseTimeoutError(f"worker metrics not up within {timeout} s")
                time.sleep(0.2)
        self.startup_seconds = time.monotonic() - started

    def rss_now(self) -> dict[str, int | None]:
        return {c.label: sum(rss_bytes(p) or 0 for p in process_tree(c))
                for c in self.children}

    def peaks(self) -> dict[str, int | None]:
        return {c.label: sum(vm_hwm(p) or 0 for p in process_tree(c)) for c in self.children}

    def alive(self) -> list[str]:
        return [c.label for c in self.children if not c.alive()]

    def check_alive(self) -> None:
        dead = self.alive()
        if dead:
            tails = "\n".join(f"--- {c.label} ---\n{c.tail(15)}" for c in self.children
                              if c.label in dead)
            raise RuntimeError(f"process(es) exited: {dead}\n{tails}")

    def stop(self) -> dict[str, int | None]:
        codes = {}
        for child in reversed(self.children):
            codes[child.label] = child.stop(timeout=120)
        return codes

    def log_problems(self) -> dict[str, list[str]]:
        problems = {}
        for child in self.children:
            try:
                text = child.log_path.read_text(errors="replace")
            except OSError:
                continue
            lines = [ln for ln in text.splitlines() if "ERROR" in ln or "CRITICAL" in ln
                     or "Traceback" in ln or re.match(r"^[\w.]+(Error|Exception): ", ln)]
            if lines:
                problems[child.label] = lines[:10]
        return problems


# ============================================================================ HTTP helpers
def wait_applied(client: FeaturebudgetClient, stack: Stack, model: str, target: int,
                 timeout: float, poll: float = 0.02) -> float:
    """perf_counter time at which ``examples_applied >= target`` was first seen (the
    harness's wait, the stack checked alive before every poll; a slow answer counts as not
    yet); PhaseTimeoutError after ``timeout``."""
    try:
        return harness_wait_applied(client, model, target, timeout, poll=poll,
                                    check=stack.check_alive,
                                    errors=(ServiceError, httpx.HTTPError))
    except TimeoutError as exc:
        raise PhaseTimeoutError(str(exc)) from None


async def _post_all(url: str, path: str, bodies: list[bytes], content_type: str,
                    concurrency: int, timeout: float) -> dict:
    """POST every body (at most ``concurrency`` in flight, none waiting for its fold)."""
    sem = asyncio.Semaphore(concurrency)
    errors: dict[str, int] = {}
    acked: list[float] = []
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=timeout, limits=limits,
                                 headers={"content-type": content_type}) as client:
        async def one(body: bytes) -> None:
            async with sem:
                try:
                    response = await client.post(path, content=body)
                    if response.status_code != 202:
                        key = f"{response.status_code}: {response.text[:200]}"
                        errors[key] = errors.get(key, 0) + 1
                    else:
                        acked.append(time.perf_counter())
                except Exception as exc:  # noqa: BLE001 - counted
                    key = f"{type(exc).__name__}: {str(exc)[:200]}"
                    errors[key] = errors.get(key, 0) + 1

        first = time.perf_counter()
        await asyncio.gather(*(one(b) for b in bodies))
    return {"first_post": first, "last_ack": max(acked) if acked else math.nan,
            "acked": len(acked), "errors": errors}


def fold_seconds(stack: Stack, model: str) -> float | None:
    """The folding process's ``featurebudget_update_seconds`` sum for the model: its time
    spent parsing and folding reads (None when unreadable)."""
    try:
        text = metrics(stack.metrics_url, timeout=30)
    except (ServiceError, httpx.HTTPError):
        return None
    entry = metric_seconds(text, model).get("featurebudget_update_seconds")
    return entry["sum"] if entry else None


def fold_phase(client: FeaturebudgetClient, stack: Stack, model: str, bodies: list[bytes],
               content_type: str, examples: int, concurrency: int, timeout: float) -> dict:
    """POST the bodies, wait until all are applied: examples/s end to end (first POST to
    all applied) and while folding (examples / the fold's own busy seconds, from the
    ``featurebudget_update_seconds`` histogram of the folding process)."""
    before = applied(client, model)
    busy0 = fold_seconds(stack, model)
    sent = asyncio.run(_post_all(str(client.http.base_url).rstrip("/"),
                                 f"/v1/models/{model}/examples", bodies, content_type,
                                 concurrency, timeout))
    if sent["errors"]:
        raise RuntimeError(f"POST /examples errors: {sent['errors']}")
    remaining = max(1.0, timeout - (time.perf_counter() - sent["first_post"]))
    done = wait_applied(client, stack, model, before + examples, remaining)
    seconds = done - sent["first_post"]
    busy1 = fold_seconds(stack, model)
    busy = busy1 - busy0 if busy0 is not None and busy1 is not None else None
    return {"posts": len(bodies), "examples": examples, "concurrency": concurrency,
            "post_seconds": sent["last_ack"] - sent["first_post"],
            "last_ack_to_applied_seconds": done - sent["last_ack"],
            "first_post_to_applied_seconds": seconds,
            "examples_per_s": examples / seconds,
            "fold_busy_seconds": busy,
            "fold_busy_examples_per_s": examples / busy if busy else None}


def backlog_phase(client: FeaturebudgetClient, stack: Stack, redis_client, model: str,
                  payloads: list[bytes], timeout: float) -> dict:
    """Redis only: the one-example FBX1 entries XADDed to the model's log in one pipeline
    (what ``POST /examples`` appends, minus HTTP), so the fold reads them from a backlog:
    examples/s from the first XADD to all applied, and on the fold's busy time."""
    before = applied(client, model)
    busy0 = fold_seconds(stack, model)
    key = redis_keys.log_key(model)
    t0 = time.perf_counter()
    pipe = redis_client.pipeline(transaction=False)
    for data in payloads:
        pipe.xadd(key, {b"fmt": b"bin", b"data": data})
    pipe.execute()
    appended = time.perf_counter()
    done = wait_applied(client, stack, model, before + len(payloads), timeout)
    busy1 = fold_seconds(stack, model)
    busy = busy1 - busy0 if busy0 is not None and busy1 is not None else None
    return {"entries": len(payloads), "examples": len(payloads),
            "xadd_seconds": appended - t0, "first_xadd_to_applied_seconds": done - t0,
            "examples_per_s": len(payloads) / (done - t0), "fold_busy_seconds": busy,
            "fold_busy_examples_per_s": len(payloads) / busy if busy else None}


def metric_seconds(text: str, model: str) -> dict:
    """The model's ``featurebudget_*_seconds`` histograms / summaries: count, sum, mean and
    the smallest bucket bound holding all observations (an upper bound of the max)."""
    out: dict[str, dict] = {}
    label = f'model="{model}"'
    for line in text.splitlines():
        if line.startswith("#") or label not in line or "_seconds" not in line:
            continue
        name, _, value = line.rpartition(" ")
        base = name.split("{", 1)[0]
        try:
            number = float(value)
        except ValueError:
            continue
        for suffix in ("_count", "_sum", "_bucket"):
            if base.endswith(suffix):
                family = base[:-len(suffix)]
                entry = out.setdefault(family, {"count": 0.0, "sum": 0.0, "buckets": {}})
                if suffix == "_bucket":
                    le = re.search(r'le="([^"]+)"', name)
                    if le:
                        entry["buckets"][le.group(1)] = number
                else:
                    entry[suffix[1:]] = number
    for entry in out.values():
        count = entry["count"]
        entry["mean"] = entry["sum"] / count if count else None
        bound = None
        for le, seen in sorted(entry.pop("buckets").items(),
                               key=lambda kv: math.inf if kv[0] == "+Inf" else float(kv[0])):
            if count and seen >= count:
                bound = le
                break
        entry["max_at_most"] = bound
    return out


def stored_bytes(stack: Stack, model: str, redis_client) -> dict:
    """What the backend holds for the model: files >= 1 MB (embedded) or keys (Redis)."""
    if stack.backend == "embedded":
        files = {}
        for path in stack.data_dir.rglob("*"):
            if path.is_file() and model in str(path):
                size = path.stat().st_size
                if size >= 1 << 20:
                    files[str(path.relative_to(stack.data_dir))] = size
        return {"files": files, "total": sum(files.values())}
    blobs: dict[str, int] = {}  # chunked values (``...:<n>`` keys) summed per blob
    count = 0
    for key in redis_client.scan_iter(match=f"{redis_keys.KEY_PREFIX}:{{{model}}}:*", count=1000):
        try:
            size = int(redis_client.memory_usage(key, samples=0) or 0)
        except Exception:  # noqa: BLE001
            size = 0
        count += 1
        name = key.decode() if isinstance(key, bytes) else key
        name = re.sub(r":\d+$", "", name.split("}:", 1)[-1])
        blobs[name] = blobs.get(name, 0) + size
    big = {k: v for k, v in sorted(blobs.items(), key=lambda kv: -kv[1]) if v >= 1 << 20}
    return {"keys": count, "blobs_over_1mb": big, "total": sum(blobs.values())}


# ============================================================================ predictions
class HealthPoller(threading.Thread):
    """``GET /healthz`` every ``every`` s on one keep-alive connection (http.client); the
    latency from the send and from the scheduled time (a late request is sent at once)."""

    def __init__(self, port: int, every: float = HEALTHZ_EVERY_S) -> None:
        super().__init__(daemon=True)
        self.port, self.every = port, every
        self.stop_event = threading.Event()
        self.from_send: list[float] = []
        self.from_schedule: list[float] = []
        self.errors: dict[str, int] = {}

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        t0, k = time.perf_counter(), 0
        while not self.stop_event.is_set():
            scheduled = t0 + k * self.every
            delay = scheduled - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            k += 1
            sent = time.perf_counter()
            try:
                conn.request("GET", "/healthz")
                response = conn.getresponse()
                response.read()
                end = time.perf_counter()
                if response.status != 200:
                    raise RuntimeError(f"status {response.status}")
            except Exception as exc:  # noqa: BLE001 - counted
                key = f"{type(exc).__name__}: {str(exc)[:100]}"
                self.errors[key] = self.errors.get(key, 0) + 1
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
                continue
            self.from_send.append(end - sent)
            self.from_schedule.append(end - scheduled)
        conn.close()

    def summary(self) -> dict:
        def ms(values, q):
            return float(np.percentile(values, q)) * 1e3 if values else None

        return {"requests": len(self.from_send), "every_ms": self.every * 1e3,
                "p50_ms": ms(self.from_send, 50), "p99_ms": ms(self.from_send, 99),
                "max_ms": max(self.from_send) * 1e3 if self.from_send else None,
                "from_schedule_p99_ms": ms(self.from_schedule, 99),
                "from_schedule_max_ms": max(self.from_schedule) * 1e3
                if self.from_schedule else None,
                "errors": self.errors}


def cold_predictions(client: httpx.Client, stack: Stack, model: str, groups: list[dict],
                     rows: np.ndarray, count: int, seen: set, seed: int,
                     timeout: float) -> dict:
    """``count`` one-example predictions back to back, each with a never-seen set of half
    the groups, while a thread polls /healthz every 5 ms."""
    rng = random.Random(seed)
    G = len(groups)
    half = max(1, G // 2)
    index = {g["name"]: i for i, g in enumerate(groups)}
    port = int(str(client.base_url).rstrip("/").rsplit(":", 1)[1])
    poller = HealthPoller(port)
    latencies, failures, answers = [], {}, []
    deadline = time.monotonic() + timeout
    poller.start()
    time.sleep(0.2)  # a baseline of idle polls
    try:
        for k in range(count):
            if time.monotonic() > deadline:
                raise PhaseTimeoutError(f"{k} of {count} cold predictions within {timeout:.0f} s")
            stack.check_alive()
            for _ in range(1000):
                ids = frozenset(rng.sample(range(G), half))
                if ids not in seen:
                    break
            seen.add(ids)
            chosen = sorted(ids)
            body = orjson.dumps({"examples": [example_json(groups, rows[k % len(rows)],
                                                           chosen)],
                                 "computed_groups": [groups[g]["name"] for g in chosen]})
            t0 = time.perf_counter()
            try:
                response = client.post(f"/v1/models/{model}/predict", content=body,
                                       headers={"content-type": "application/json"},
                                       timeout=max(1.0, deadline - time.monotonic()))
            except httpx.TimeoutException as exc:
                raise PhaseTimeoutError(f"cold prediction {k}: no answer within the phase's "
                                   f"{timeout:.0f} s") from exc
            seconds = time.perf_counter() - t0
            if response.status_code != 200:
                key = f"{response.status_code}: {response.text[:200]}"
                failures[key] = failures.get(key, 0) + 1
                continue
            latencies.append(seconds)
            doc = response.json()
            nxt = doc.get("next_group")
            if isinstance(nxt, dict) and nxt.get("name") in index:  # S ∪ {next} is cached
                seen.add(ids | {index[nxt["name"]]})
            answers.append({"groups": len(chosen), "version": doc.get("version"),
                            "next": (nxt or {}).get("name") if isinstance(nxt, dict) else None})
        time.sleep(0.1)
    finally:
        poller.stop_event.set()
        poller.join(timeout=150)
    ms = [x * 1e3 for x in latencies]
    return {"requests": count, "answered": len(latencies), "groups_per_set": half,
            "errors": failures,
            "median_ms": float(np.median(ms)) if ms else None,
            "p99_ms": float(np.percentile(ms, 99)) if ms else None,
            "max_ms": max(ms) if ms else None, "latencies_ms": [round(x, 2) for x in ms],
            "healthz": poller.summary()}


def warm_predictions(client: httpx.Client, stack: Stack, model: str, groups: list[dict],
                     row: np.ndarray, ids: list[int], seconds: float, work: Path,
                     timeout: float) -> dict:
    """One fixed set: a warm-up request, then ``WARM_RATE`` requests/s for ``seconds`` with
    predict_latency's open-loop raw client (its generator process); then the floor, ``GET
    /healthz`` (no work) at the same rate and for as long with the same client."""
    body = orjson.dumps({"examples": [example_json(groups, row, ids)],
                         "computed_groups": [groups[g]["name"] for g in ids]})
    path = f"/v1/models/{model}/predict"
    response = client.post(path, content=body, headers={"content-type": "application/json"},
                           timeout=timeout)
    if response.status_code != 200:
        raise RuntimeError(f"warm-up prediction: {response.status_code} {response.text[:300]}")
    count = max(1, int(round(WARM_RATE * seconds)))
    spec = {"url": stack.api.url, "path": path, "rate": WARM_RATE, "count": count,
            "mode": "bodies", "bodies": [body], "client": "raw",
            "connections": predict_latency.CONNECTIONS, "timeout_s": 10.0, "drain_s": 15.0,
            "watch_pids": {"server": stack.api.pid}}
    process = predict_latency.run_role("generator", spec, work, f"warm-{model}",
                                       timeout=seconds + 120)
    generated = predict_latency.collect(process, f"warm {model}")
    row_summary = predict_latency.summarize("warm", generated, seconds)
    keep = ("sent", "answered", "errors", "achieved_rate_per_s", "p50_ms", "p99_ms",
            "p999_ms", "max_ms", "send_lag_p50_ms", "send_lag_p99_ms", "send_lag_max_ms",
            "max_in_flight", "error_kinds", "cpu_per_s", "client", "loop")
    floor_spec = dict(spec, path="/healthz", mode="get", bodies=None)
    process = predict_latency.run_role("generator", floor_spec, work, f"floor-{model}",
                                       timeout=seconds + 120)
    floor = predict_latency.summarize("floor", predict_latency.collect(process, "floor"),
                                      seconds)
    return {"rate_per_s": WARM_RATE, "seconds": seconds, "groups": len(ids),
            **{k: row_summary.get(k) for k in keep},
            "healthz_floor": {k: floor.get(k) for k in keep}}


# ============================================================================ one D x backend
def run_case(D: int, backend: str, data: dict, cfg: dict, args, redis_client) -> dict:
    """Every phase for one D on one backend; a dict with ``outcome`` ok / refused / failed."""
    timeout = cfg["phase_timeout"]
    model = f"scale_d{D}"
    groups = data["groups"]
    body = {"name": model, "algorithm": "cs-g-omp", "task": "regression", "groups": groups,
            "params": dict(NO_POLICY)}
    row: dict = {"D": D, "backend": backend, "groups": len(groups), "outcome": "ok",
                 "max_model_bytes": args.max_model_bytes, "phases": {}, "failures": []}
    row["estimate"] = service_estimate(body)
    if redis_client is not None:
        redis_client.flushdb()
    work = Path(tempfile.mkdtemp(prefix=f"fb-scale-{backend}-{D}-", dir="/tmp"))
    stack: Stack | None = None
    client: FeaturebudgetClient | None = None
    phase = "start"

    def fail(name: str, exc: BaseException) -> None:
        kind = "timeout" if isinstance(exc, PhaseTimeoutError | TimeoutError |
                                       httpx.TimeoutException) else "error"
        row["outcome"] = "failed"
        row["failures"].append({"phase": name, "kind": kind,
                                "error": f"{type(exc).__name__}: {str(exc)[:1500]}"})
        print(f"  {backend} D={D}: {name} {kind}: {str(exc)[:300]}", file=sys.stderr)

    try:
        stack = Stack(backend, work, args.redis_url, snapshot_every=data["n_bulk"],
                      timeout=min(timeout, 300.0), max_model_bytes=args.max_model_bytes)
        row["startup_seconds"] = stack.startup_seconds
        row["ready_rss_bytes"] = stack.ready_rss
        client = connect(stack.api.url, timeout=min(timeout, 120.0))

        phase = "create"
        t0 = time.perf_counter()
        try:
            create(client, body)
        except ServiceError as exc:
            row["phases"]["create"] = {"status": exc.status, "seconds": time.perf_counter() - t0,
                                       "body": exc.problem}
            if 400 <= exc.status < 500 or exc.status == 507:
                row["outcome"] = "refused"
                return row
            raise RuntimeError(f"POST /v1/models: {exc}") from exc
        row["phases"]["create"] = {"status": 201, "seconds": time.perf_counter() - t0}
        if stack.worker is not None:
            wait_owned(redis_client, model, stack.worker, timeout=min(timeout, 120.0))

        phase = "bulk"
        print(f"  {backend} D={D}: bulk libsvm ({data['n_bulk']:,} rows) ...", file=sys.stderr)
        row["phases"][phase] = fold_phase(client, stack, model, data["bulk_bodies"],
                                          "text/x-libsvm", data["n_bulk"], 4, timeout)
        phase = "one_example"
        print(f"  {backend} D={D}: {len(data['one_bodies'])} one-example entries ...",
              file=sys.stderr)
        row["phases"][phase] = fold_phase(client, stack, model, data["one_bodies"],
                                          "application/octet-stream",
                                          len(data["one_bodies"]), 16, timeout)
        if stack.backend == "redis":
            phase = "one_example_backlog"
            print(f"  {backend} D={D}: {len(data['backlog_bodies'])} one-example entries from a "
                  "backlog (XADD) ...", file=sys.stderr)
            row["phases"][phase] = backlog_phase(client, stack, redis_client, model,
                                                 data["backlog_bodies"], timeout)
        phase = "block_500"
        print(f"  {backend} D={D}: {len(data['block_bodies'])} 500-example entries ...",
              file=sys.stderr)
        row["phases"][phase] = fold_phase(client, stack, model, data["block_bodies"],
                                          "application/octet-stream",
                                          BLOCK_ROWS * len(data["block_bodies"]), 4, timeout)

        phase = "retrain"
        print(f"  {backend} D={D}: retrain ...", file=sys.stderr)
        posted_wall, posted = time.time(), time.perf_counter()
        job = wait_job(client, model, client.retrain(model).id, timeout=timeout)
        if job.get("status") != "succeeded":
            raise RuntimeError(f"retrain job {job.get('status')}: {job.get('error')}")
        remaining = max(1.0, timeout - (time.perf_counter() - posted))
        deadline = time.monotonic() + remaining
        while True:
            stack.check_alive()
            doc = inspect(client, model)
            if doc.get("version") == job["version"]:
                break
            if doc.get("serving_error"):
                raise RuntimeError(f"serving error: {doc['serving_error']}")
            if time.monotonic() > deadline:
                raise PhaseTimeoutError(f"version {job['version']} not served within "
                                   f"{timeout:.0f} s of the POST")
            time.sleep(0.01)
        served = time.perf_counter()
        extra = {k: v for k, v in job.items()
                 if (k.endswith("_seconds") and k != "duration_seconds") or
                 isinstance(v, dict)}
        row["phases"][phase] = {
            "post_to_served_seconds": served - posted,
            "queue_seconds": (job["started_at"] - posted_wall) if job.get("started_at")
            else None,
            "job_duration_seconds": job.get("duration_seconds"),
            "finished_to_served_seconds": (posted_wall + (served - posted)) -
            job["finished_at"] if job.get("finished_at") else None,
            "examples_used": job.get("examples_used"),
            "validation_examples": job.get("validation_examples"),
            "version": job["version"], "job_extra": extra}

        phase = "cold_predict"
        print(f"  {backend} D={D}: {cfg['cold']} cold predictions ...", file=sys.stderr)
        G = len(groups)
        warm_ids = list(range(0, G, 2))[:max(1, G // 2)]  # the warm set, never used cold
        seen = {frozenset(warm_ids)}
        row["phases"][phase] = cold_predictions(client.http, stack, model, groups,
                                                data["predict_rows"], cfg["cold"], seen,
                                                seed=D + 7, timeout=timeout)

        phase = "warm_predict"
        print(f"  {backend} D={D}: warm predictions at {WARM_RATE:.0f}/s ...", file=sys.stderr)
        row["phases"][phase] = warm_predictions(client.http, stack, model, groups,
                                                data["predict_rows"][0], warm_ids,
                                                cfg["warm_seconds"], work, timeout)
    except Exception as exc:  # noqa: BLE001 - the row records it
        fail(phase, exc)
        if stack is not None and stack.alive():
            row["dead_processes"] = stack.alive()
    finally:
        if stack is not None:
            try:
                text = metrics(stack.metrics_url, timeout=30)
                row["service_seconds"] = metric_seconds(text, model)
            except Exception as exc:  # noqa: BLE001
                row["service_seconds"] = {"error": f"{type(exc).__name__}: {exc}"}
            try:
                row["stored"] = stored_bytes(stack, model, redis_client)
            except Exception as exc:  # noqa: BLE001
                row["stored"] = {"error": f"{type(exc).__name__}: {exc}"}
            row["peak_rss_bytes"] = stack.peaks()
            if client is not None:
                with contextlib.suppress(Exception):
                    client.delete_model(model)
                client.close()
            row["exit_codes"] = stack.stop()
            row["log_problems"] = stack.log_problems()
            if row["outcome"] == "failed":
                row["log_tails"] = {c.label: c.tail(20) for c in stack.children}
        if redis_client is not None:
            redis_client.flushdb()
        if args.keep_logs:
            row["work_dir"] = str(work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    estimate = row["estimate"].get("peak_estimate_bytes")
    peaks = row.get("peak_rss_bytes") or {}
    if estimate and peaks:
        total = sum(v or 0 for v in peaks.values())
        ready = sum(v or 0 for v in (row.get("ready_rss_bytes") or {}).values())
        row["rss_vs_estimate"] = {"peak_rss_bytes": total, "ready_rss_bytes": ready,
                                  "estimate_bytes": estimate,
                                  "peak_over_estimate": total / estimate,
                                  "model_part_over_estimate": (total - ready) / estimate}
    return row


def prepare(D: int, cfg: dict) -> dict:
    """The rows of one D (seeded) and their bodies."""
    G = D // GROUP_SIZE
    n_bulk = 2 * D + 1000
    n_one, n_blocks = cfg["one_example"], cfg["blocks"]
    n_predict = max(cfg["cold"], 1)
    X, y = make_rows(n_bulk + n_one + n_blocks * BLOCK_ROWS, D, seed=D)
    bulk = [(X[k:min(k + BULK_ROWS, n_bulk)], y[k:min(k + BULK_ROWS, n_bulk)])
            for k in range(0, n_bulk, BULK_ROWS)]
    one = [(X[n_bulk + k:n_bulk + k + 1], y[n_bulk + k:n_bulk + k + 1]) for k in range(n_one)]
    base = n_bulk + n_one
    blocks = [(X[base + k * BLOCK_ROWS:base + (k + 1) * BLOCK_ROWS],
               y[base + k * BLOCK_ROWS:base + (k + 1) * BLOCK_ROWS]) for k in range(n_blocks)]
    rng = np.random.default_rng(D + 1)  # dense rows for predictions: every feature set
    predict_rows = 0.8 * np.repeat(rng.standard_normal((n_predict, G)), GROUP_SIZE, axis=1) + \
        0.6 * rng.standard_normal((n_predict, D))
    return {"groups": group_specs(D, seed=D + 2), "n_bulk": n_bulk,
            "nnz_per_row": int(X.indptr[1] - X.indptr[0]),
            "bulk": bulk, "one": one, "blocks": blocks,
            "bulk_bodies": [libsvm_body(a, b) for a, b in bulk],
            "one_bodies": [fbx1(a, b) for a, b in one],
            # the rows of the 500-example entries again, one per entry: the backlog folds
            # as many examples as the 500-example phase, so both rates span alike
            "backlog_bodies": [fbx1(a[k:k + 1], b[k:k + 1]) for a, b in blocks
                               for k in range(a.shape[0])],
            "block_bodies": [fbx1(a, b) for a, b in blocks],
            "predict_rows": predict_rows}


# ============================================================================ main
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="D = 500 and 2,000, embedded only, small counts (minutes)")
    parser.add_argument("--sizes", help="comma-separated D values (multiples of 50)")
    parser.add_argument("--backends", help="comma-separated: embedded, redis")
    parser.add_argument("--out", default=str(ROOT / "load_tests" / "batch_scale.json"))
    parser.add_argument("--redis-url", default=REDIS_URL,
                        help="the Redis db this test may flush (default db 11)")
    parser.add_argument("--phase-timeout", type=float, default=None,
                        help="seconds any one phase may take (default 600, --quick 180)")
    parser.add_argument("--bare-seconds", type=float, default=None,
                        help="cap of each bare SufficientStatistics.update measurement")
    parser.add_argument("--max-model-bytes", type=float, default=None,
                        help="FEATUREBUDGET_MAX_MODEL_BYTES of the service processes (default: "
                        "the service's own); rows record it")
    parser.add_argument("--append", action="store_true",
                        help="add this run's rows to those already in --out")
    parser.add_argument("--keep-logs", action="store_true",
                        help="keep each case's temporary directory (service logs)")
    args = parser.parse_args(argv)
    if args.max_model_bytes is not None:
        args.max_model_bytes = int(args.max_model_bytes)
    mode = "quick" if args.quick else "full"
    cfg = dict(MODES[mode])
    if args.sizes:
        cfg["sizes"] = tuple(int(s) for s in args.sizes.split(",") if s.strip())
        if any(D < GROUP_SIZE or D % GROUP_SIZE for D in cfg["sizes"]):
            parser.error(f"--sizes must be multiples of {GROUP_SIZE}")
    if args.backends:
        cfg["backends"] = tuple(b.strip() for b in args.backends.split(",") if b.strip())
        if set(cfg["backends"]) - {"embedded", "redis"}:
            parser.error("--backends: embedded and/or redis")
    if args.phase_timeout is not None:
        cfg["phase_timeout"] = float(args.phase_timeout)
    if args.bare_seconds is not None:
        cfg["bare_seconds"] = float(args.bare_seconds)

    redis_client = None
    if "redis" in cfg["backends"]:
        import redis

        redis_client = redis.Redis.from_url(args.redis_url, socket_timeout=120)
        redis_client.flushdb()
    wall = time.perf_counter()
    results: dict = {
        "mode": mode, "config": {k: list(v) if isinstance(v, tuple) else v
                                 for k, v in cfg.items()},
        "goals": GOALS, "group_size": GROUP_SIZE, "groups_per_row": GROUPS_PER_ROW,
        "bulk_rows_per_body": BULK_ROWS, "block_rows": BLOCK_ROWS,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(),
                    "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")},
        "command": "python load_tests/batch_scale.py " + " ".join(sys.argv[1:] if argv is None
                                                                   else argv),
        "bare": {}, "rows": []}
    if redis_client is not None:
        results["machine"]["redis"] = redis_client.info("server").get("redis_version")
    previous: dict = {}
    if args.append and Path(args.out).exists():
        previous = json.loads(Path(args.out).read_text())
        earlier = previous.get("runs") or [{k: previous.get(k) for k in
                                            ("command", "mode", "config", "wall_seconds")}]
        results["runs"] = [*earlier, {"command": results["command"], "mode": mode,
                                      "config": results["config"]}]
        results["rows"] = list(previous.get("rows", []))
        results["bare_earlier"] = previous.get("bare", {})
    try:
        for D in cfg["sizes"]:
            print(f"D={D}: data ...", file=sys.stderr)
            data = prepare(D, cfg)
            print(f"D={D}: bare SufficientStatistics.update ...", file=sys.stderr)
            cap = cfg["bare_seconds"]
            bare = {"bulk": bare_updates(D, data["bulk"], cap),
                    "one_example": bare_updates(D, data["one"], cap),
                    "block_500": bare_updates(D, data["blocks"], cap)}
            results["bare"][str(D)] = bare
            for backend in cfg["backends"]:
                print(f"D={D} {backend} ...", file=sys.stderr)
                row = run_case(D, backend, data, cfg, args, redis_client)
                row["examples"] = {"bulk": data["n_bulk"], "one_example": len(data["one"]),
                                   "block_500": BLOCK_ROWS * len(data["blocks"]),
                                   "nnz_per_row": data["nnz_per_row"]}
                row["bare"] = bare
                results["rows"].append(row)
                Path(args.out).write_text(json.dumps(results, indent=2, default=str))
            del data
            gc.collect()
    finally:
        if redis_client is not None:
            redis_client.flushdb()
        results["wall_seconds"] = time.perf_counter() - wall
        if results.get("runs"):
            results["runs"][-1]["wall_seconds"] = results["wall_seconds"]
        Path(args.out).write_text(json.dumps(results, indent=2, default=str))
    print_table(results)
    print(f"\nwrote {args.out} ({results['wall_seconds']:.0f} s)", file=sys.stderr)
    return 0 if all(r["outcome"] != "failed" for r in results["rows"]) else 1


# ============================================================================ report
def _f(value, spec: str = ",.0f", none: str = "-") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return none
    return format(value, spec)


def _rate(value) -> str:
    """Examples/s: no decimals, one below 10."""
    if isinstance(value, int | float) and math.isfinite(value) and value < 10:
        return _f(value, ".1f")
    return _f(value)


def _mark(ok: bool | None) -> str:
    return "" if ok is None else (" ok" if ok else " NO")


def outcome_text(row: dict, width: int = 200) -> str:
    p = row["phases"]
    if row["outcome"] == "refused":
        body = p.get("create", {}).get("body")
        reason = body.get("detail", body) if isinstance(body, dict) else body
        return f"refused ({p['create']['status']}): {str(reason)[:width]}"
    if row["outcome"] == "failed":
        f0 = row["failures"][0]
        return f"FAILED at {f0['phase']} ({f0['kind']})"
    return "ok"


def fold_ratio(row: dict) -> tuple[float | None, bool]:
    """500-example over one-example entries, end to end (first POST -> all applied), and
    whether the one-example side was bound by the client: everything applied within
    100 ms of the last 202 (the fold kept up with the POSTs)."""
    p = row["phases"]
    one, block = p.get("one_example", {}), p.get("block_500", {})
    if not (one.get("examples_per_s") and block.get("examples_per_s")):
        return None, False
    bound = (one.get("last_ack_to_applied_seconds") or math.inf) < 0.1
    return block["examples_per_s"] / one["examples_per_s"], bound


def print_table(res: dict) -> None:
    g = res["goals"]
    print(f"\nAnytime (cs-g-omp) models in groups of {res['group_size']} features, rows of "
          f"{res['groups_per_row']} groups ({res['groups_per_row'] * res['group_size']} "
          f"non-zeros), 2·D + 1,000 bulk rows + one-example + 500-example entries. Goals: "
          f"cold median < {g['cold_median_ms_at_2000']:.0f} ms at D = 2,000; /healthz p99 < "
          f"{g['healthz_p99_ms']:.0f} ms and max < {g['healthz_max_ms']:.0f} ms during cold "
          f"predictions; warm p99 < {g['warm_p99_ms']:.0f} ms at {WARM_RATE:.0f}/s; one-example "
          f"fold within {g['fold_ratio_max']:.0f}x of 500-example entries.\n")
    print("Fold rates in examples/s: end to end (first POST -> all applied) / while folding "
          "(examples over the fold's busy seconds) / bare `SufficientStatistics.update` on "
          "the same entries. 500-ex / 1-ex: the end-to-end rates; (c): the one-example "
          "side was bound by the client (all applied within 100 ms of the last 202).\n")
    print("| D | backend | outcome | bulk libsvm | 1-example entries | 500-example entries | "
          "500-ex / 1-ex | retrain -> served s (job s) | snapshot s (n) | cold p50 / p99 ms "
          "| /healthz p99 / max ms | warm p99 ms (/healthz floor p99; send lag p99) "
          "| peak RSS (over ready) / estimate GB |")
    print("| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
          "| ---: |")
    for row in res["rows"]:
        p, bare = row["phases"], row.get("bare", {})
        D = row["D"]

        def fold(name: str, p=p, bare=bare) -> str:
            phase = p.get(name, {})
            floor = bare.get(name, {}).get("examples_per_s")
            return (f"{_rate(phase.get('examples_per_s'))} / "
                    f"{_rate(phase.get('fold_busy_examples_per_s'))} / {_rate(floor)}")

        ratio, client_bound = fold_ratio(row)
        rt = p.get("retrain", {})
        snap = (row.get("service_seconds") or {}).get("featurebudget_snapshot_seconds") or {}
        cold = p.get("cold_predict", {})
        hz = cold.get("healthz", {})
        warm = p.get("warm_predict", {})
        floor = warm.get("healthz_floor") or {}
        cold_goal = (cold.get("median_ms") < g["cold_median_ms_at_2000"]) \
            if D == 2000 and cold.get("median_ms") is not None else None
        hz_goal = (hz["p99_ms"] < g["healthz_p99_ms"] and hz["max_ms"] < g["healthz_max_ms"]) \
            if hz.get("p99_ms") is not None else None
        warm_goal = None
        if warm.get("p99_ms") is not None:
            warm_goal = warm["p99_ms"] < g["warm_p99_ms"] and not warm.get("errors")
        estimate = row.get("estimate", {}).get("peak_estimate_bytes")
        peak = sum(v or 0 for v in (row.get("peak_rss_bytes") or {}).values())
        ready = sum(v or 0 for v in (row.get("ready_rss_bytes") or {}).values())
        snap_text = (f"{snap['sum'] / snap['count']:.2f} ({snap['count']:.0f})"
                     if snap.get("count") else "- (0)")
        ratio_ok = None if ratio is None else ratio <= g["fold_ratio_max"]
        limit = row.get("max_model_bytes")
        backend = row["backend"] + (f" (limit {limit / 1e9:g} GB)" if limit else "")
        if row["outcome"] == "refused":  # the reason follows the table
            peak = estimate = None
        outcome = f"refused ({p['create']['status']})" if row["outcome"] == "refused" \
            else outcome_text(row)
        print(f"| {D:,} | {backend} | {outcome} | {fold('bulk')} | "
              f"{fold('one_example')} | {fold('block_500')} | "
              f"{_f(ratio, '.1f')}{_mark(ratio_ok)}{' (c)' if client_bound else ''} | "
              f"{_f(rt.get('post_to_served_seconds'), '.2f')} "
              f"({_f(rt.get('job_duration_seconds'), '.2f')}) | {snap_text} | "
              f"{_f(cold.get('median_ms'), '.1f')} / {_f(cold.get('p99_ms'), '.1f')}"
              f"{_mark(cold_goal)} | {_f(hz.get('p99_ms'), '.1f')} / "
              f"{_f(hz.get('max_ms'), '.1f')}{_mark(hz_goal)} | "
              f"{_f(warm.get('p99_ms'), '.2f')} ({_f(floor.get('p99_ms'), '.2f')}; "
              f"{_f(warm.get('send_lag_p99_ms'), '.2f')}){_mark(warm_goal)} | "
              f"{_f(peak / 1e9 if peak else None, '.2f')} "
              f"({'+' if peak else ''}{_f((peak - ready) / 1e9 if peak else None, '.2f')}) / "
              f"{_f(estimate / 1e9 if estimate else None, '.2f')} |")
    backlog = [r for r in res["rows"] if r["phases"].get("one_example_backlog")]
    if backlog:
        print("\nRedis: one-example entries XADDed in one pipeline (a backlog the fold reads in "
              "blocks; the rows of the 500-example entries, one per entry), against the "
              "500-example entries; end to end and over the fold's busy seconds:\n")
        print("| D | backlog, end to end (ex/s) | backlog, while folding (ex/s) | "
              "500-example entries, end to end (ex/s) | 500-example, while folding (ex/s) | "
              "ratio end to end | ratio while folding |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for row in backlog:
            b = row["phases"]["one_example_backlog"]
            blocks = row["phases"].get("block_500", {})
            block, block_busy = blocks.get("examples_per_s"), \
                blocks.get("fold_busy_examples_per_s")
            ratio = block / b["examples_per_s"] if block and b.get("examples_per_s") else None
            busy = block_busy / b["fold_busy_examples_per_s"] \
                if block_busy and b.get("fold_busy_examples_per_s") else None
            print(f"| {row['D']:,} | {_f(b.get('examples_per_s'))} | "
                  f"{_f(b.get('fold_busy_examples_per_s'))} | {_f(block)} | {_f(block_busy)} | "
                  f"{_f(ratio, '.1f')}{_mark(None if ratio is None else ratio <= 2.0)} | "
                  f"{_f(busy, '.1f')}{_mark(None if busy is None else busy <= 2.0)} |")
    for row in res["rows"]:
        for failure in row.get("failures", []):
            print(f"\n{row['backend']} D={row['D']}: {failure['phase']} {failure['kind']}: "
                  f"{failure['error'][:600]}")
        if row["outcome"] == "refused":
            limit = row.get("max_model_bytes")
            where = row["backend"] + (f" (limit {limit / 1e9:g} GB)" if limit else "")
            print(f"\n{where} D={row['D']}: {outcome_text(row, 2000)}")
        if row.get("log_problems"):
            print(f"\n{row['backend']} D={row['D']} service log problems: "
                  f"{json.dumps(row['log_problems'])[:800]}")


if __name__ == "__main__":
    sys.exit(main())
