"""Predict latency under an open-loop load: batch (anytime) models warm and cold, SOFS online.

One ``featurebudget serve`` per backend (embedded: data dir under /tmp; Redis: db 10; port
18820) with

* a ``cs-g-omp`` batch model of 12 named, costed groups (100 features, group sizes 4..12,
  costs 0.5..5), trained on seeded synthetic regression data whose groups are correlated
  (a latent factor per group plus a shared one), and
* a ``sofs`` online model (n_features 20,000, budget 200) trained on X1 data
  (``algorithms.datasets.online_synthetic.make_x1``, 600 non-zeros per example).

The load generator is a process of its own (this file with ``--role generator``): an asyncio
client (uvloop when installed) that sends request ``k`` at ``t0 + k / rate`` whatever the
answers (open loop: it never waits for an answer before sending the next), over a pool of at
most 64 keep-alive connections (16 opened before the clock starts; a request waits for a free
one). The latency of a request is its answer time minus its *scheduled* send time, so
queueing anywhere (server, connection pool, the generator's own event loop) shows. One
example per request. Two clients, each scenario run with both by default (``--client``):

* ``httpx``: ``httpx.AsyncClient`` (httpcore's pool). It costs ~1 ms of CPU per request here,
  half a core at 500/s, and once more requests wait for a connection than the pool has, its
  pool spends time quadratic in the queue (encode/httpcore#1035, pydantic/httpx2#1075): a
  short stall then turns into seconds of queueing in the generator itself.
* ``raw``: a minimal HTTP/1.1 client on asyncio streams (``RawPool``, ~0.1 ms per request),
  the same pool discipline; what the service does when the generator costs little.

Scenarios, each ``--seconds`` long at ``--rate`` requests per second:

1. ``batch warm``: computed sets drawn (seeded) from a pool of 20 subsets of the 12 groups,
   after one unmeasured pass over the pool that fills the served version's caches.
2. ``batch cold``: every request a subset the served version was never asked before. The
   generator draws the 4,095 non-empty subsets without replacement and also skips each
   ``S ∪ {next_group}`` an earlier answer reported (that solve is cached by the answer's
   expected gain); the row reports how many requests were strictly cold. A fresh version
   (empty caches) is published before the scenario, and the scenario is cut into segments
   of at most 1,500 requests with a retrain (unmeasured) before each.
3. both again while a second process posts 100-example JSON batches to the batch model back
   to back and ``POST /retrain`` publishes a new version every 2 s (each publish empties the
   caches: the cold generator then starts its draw over, as the answers show the new
   version).
4. ``sofs idle``: one X1 example per request.
5. ``sofs, ingesting``: the same during full-rate ingestion into the SOFS model: another
   process posts 2,000-example bodies back to back (REST libsvm, REST binary FBX1) or, with
   ``--backend redis``, XADDs 2,000-example binary entries to the model's stream as fast as
   the fold applies them (at most 8 entries ahead). The row's ``background`` says how many
   examples per second were acknowledged and applied meanwhile.
6. the floor: ``GET /healthz`` (a route that does no work) at the same rate, idle, while
   the batch model ingests and retrains, and during the REST libsvm and FBX1 ingestion,
   i.e. what HTTP + the load generator cost here.

Per scenario: requests sent, answered (200), errors (non-200 or exceptions), the achieved
rate (answers per second from the first scheduled send to the last answer), p50 / p99 /
p99.9 / max latency in ms; also the generator's own send lag, the CPU (cores busy, from
/proc) of the server, the generator, the background writer and everything else on the
machine during the window, and the server's own ``featurebudget_predict_seconds`` histogram
for the window. Before each scenario it waits (``--quiet-wait``, bounded) for a second in
which other processes use under 0.35 cores, and for no other ``load_tests/`` or
``benchmarks/`` process. Prints a markdown table and writes JSON (``rows``)::

    python load_tests/predict_latency.py                 # both backends, 500 and 1,000/s
    python load_tests/predict_latency.py --quick         # 3 s per scenario, less training
    python load_tests/predict_latency.py --only online --backend redis --rate 500

By default every scenario runs at 500 and then 1,000 requests per second (``--rate``), on
the embedded backend and then on Redis (``--backend``), with the raw client; the table
marks each prediction row against its p99 objective (idle: 5 ms at 500/s, 10 ms at
1,000/s; while ingesting: 20 ms).

Only loopback. Never imported by ``tests/``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import gc
import json
import math
import os
import pickle
import platform
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _harness import connect, create, inspect, publish, start_api  # noqa: E402
from _proc import TICK, cpu_seconds, machine_busy_seconds  # noqa: E402
from _proc import run_role as run_async_role  # noqa: E402
from _servers import Child, service_env  # noqa: E402

PORT = 18820  # this test's range is 18820-18830
REDIS_URL = "redis://127.0.0.1:6379/10"  # --backend redis (flushed at the start)
INGEST_ROWS = 2000  # examples per body / stream entry of the online ingestion scenarios
GROUP_SIZES = (4, 5, 6, 7, 8, 9, 10, 11, 12, 12, 8, 8)  # 100 features in 12 groups
N_GROUPS = len(GROUP_SIZES)
BATCH_MODEL, ONLINE_MODEL = "latency_anytime", "latency_sofs"
NO_POLICY = {"retrain_every_examples": None, "retrain_every_seconds": None}
WARM_POOL = 20
COLD_SEGMENT_MAX = 1500  # requests per cold segment (a fresh version before each)
RETRAIN_EVERY_S = 2.0
TARGETS_MS = {"idle": {500: 5.0, 1000: 10.0}, "loaded": 20.0}  # p99 targets of predictions
CONNECTIONS = 64


# ============================================================================ data
def batch_groups(seed: int = 5) -> list[dict]:
    import numpy as np

    costs = np.round(np.random.default_rng(seed).uniform(0.5, 5.0, N_GROUPS), 2)
    out, f = [], 0
    for g, size in enumerate(GROUP_SIZES):
        out.append({"name": f"g{g}", "features": [f"f{f + k}" for k in range(size)],
                    "cost": float(costs[g])})
        f += size
    return out


def batch_data(n: int, seed: int):
    """Correlated groups: a latent factor per group and a shared one; sparse true weights."""
    import numpy as np

    rng = np.random.default_rng(seed)
    D = sum(GROUP_SIZES)
    owner = np.repeat(np.arange(N_GROUPS), GROUP_SIZES)
    latent = rng.standard_normal((n, N_GROUPS)) + 0.5 * rng.standard_normal((n, 1))
    X = 0.8 * latent[:, owner] + 0.6 * rng.standard_normal((n, D))
    w = rng.standard_normal(D) * (rng.random(D) < 0.3)
    y = X @ w + 0.5 * rng.standard_normal(n)
    return X, y


def group_fragments(groups: list[dict], row) -> list[bytes]:
    """``"g3": {"f20": 0.1, ...}`` per group, for one example (bodies are joined from these)."""
    import orjson

    out, f = [], 0
    for g in groups:
        size = len(g["features"])
        values = {name: round(float(v), 6) for name, v in zip(g["features"],
                                                              row[f:f + size], strict=True)}
        out.append(orjson.dumps(g["name"]) + b":" + orjson.dumps(values))
        f += size
    return out


def batch_examples_body(groups: list[dict], X, y) -> bytes:
    import orjson

    examples = []
    for row, target in zip(X, y, strict=True):
        features, f = {}, 0
        for g in groups:
            size = len(g["features"])
            features[g["name"]] = {name: round(float(v), 6) for name, v in
                                   zip(g["features"], row[f:f + size], strict=True)}
            f += size
        examples.append({"features": features, "target": round(float(target), 6)})
    return orjson.dumps({"examples": examples})


def libsvm_body(X, y, start: int, stop: int) -> bytes:
    lines = []
    for row in range(start, stop):
        lo, hi = X.indptr[row], X.indptr[row + 1]
        pairs = " ".join(f"{i + 1}:{v:.6g}" for i, v in zip(X.indices[lo:hi].tolist(),
                                                           X.values[lo:hi].tolist(), strict=True))
        lines.append(f"{int(y[row])} {pairs}")
    return ("\n".join(lines) + "\n").encode()


def online_predict_bodies(X, start: int, stop: int) -> list[bytes]:
    import orjson

    out = []
    for row in range(start, stop):
        lo, hi = X.indptr[row], X.indptr[row + 1]
        out.append(orjson.dumps({"examples": [{"indices": X.indices[lo:hi].tolist(),
                                               "values": X.values[lo:hi].tolist()}]}))
    return out


# ============================================================================ generator
def body_for(fragments: list[bytes], mask: int, names: list[bytes]) -> bytes:
    ids = [g for g in range(len(names)) if mask >> g & 1]
    return (b'{"examples":[{"features":{' + b",".join(fragments[g] for g in ids) +
            b'}}],"computed_groups":[' + b",".join(names[g] for g in ids) + b"]}")


class RawPool:
    """A minimal HTTP/1.1 keep-alive client on asyncio streams (``--client raw``): up to
    ``size`` connections, a request waits for a free one (FIFO), as in httpx's pool. Only
    what this test needs: fixed headers, Content-Length bodies, status + body back."""

    def __init__(self, url: str, size: int, timeout: float) -> None:
        hostport = url.split("://", 1)[1].rstrip("/")
        self.host, _, port = hostport.partition(":")
        self.port = int(port or 80)
        self.size, self.timeout = size, timeout
        self.idle: list = []
        self.used: set = set()  # connections that have carried a request
        self.waiters: collections.deque = collections.deque()
        self.opened = 0
        self.retries = 0

    async def _open(self):
        return await asyncio.open_connection(self.host, self.port)

    async def _acquire(self):
        while self.idle:
            conn = self.idle.pop()
            if conn[0].at_eof() or conn[1].is_closing():  # closed by the server meanwhile
                conn[1].close()
                self.opened -= 1
                continue
            return conn
        if self.opened < self.size:
            self.opened += 1
            try:
                return await self._open()
            except BaseException:
                self.opened -= 1
                raise
        future = asyncio.get_running_loop().create_future()
        self.waiters.append(future)
        return await future

    def _release(self, conn) -> None:
        while self.waiters:
            future = self.waiters.popleft()
            if not future.done():
                future.set_result(conn)
                return
        self.idle.append(conn)

    def _discard(self, conn) -> None:
        conn[1].close()
        self.used.discard(conn)
        self.opened -= 1
        if self.waiters:  # someone waits for a connection: open one for them
            async def refill() -> None:
                with contextlib.suppress(Exception):
                    self.opened += 1
                    try:
                        conn = await self._open()
                    except BaseException:
                        self.opened -= 1
                        raise
                    self._release(conn)
            asyncio.ensure_future(refill())

    async def request(self, method: str, path: str, body: bytes | None) -> tuple[int, bytes]:
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                "Content-Type: application/json\r\n"
                f"Content-Length: {0 if body is None else len(body)}\r\n\r\n").encode()
        for attempt in (0, 1):
            conn = await self._acquire()
            reader, writer = conn
            reused = conn in self.used
            try:
                writer.write(head + body if body else head)
                response = await asyncio.wait_for(self._read(reader), self.timeout)
                break
            except asyncio.IncompleteReadError as exc:
                self._discard(conn)
                # a kept-alive connection the server closed as it was reused (its idle
                # timeout): nothing was answered, send again once on another connection
                if attempt == 0 and reused and not exc.partial:
                    self.retries += 1
                    continue
                raise
            except BaseException:
                self._discard(conn)
                raise
        self.used.add(conn)
        status, content, close = response
        if close:
            self._discard(conn)
        else:
            self._release(conn)
        return status, content

    @staticmethod
    async def _read(reader) -> tuple[int, bytes, bool]:
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        lower = head.lower()
        at = lower.find(b"\r\ncontent-length:")
        if at < 0:
            raise RuntimeError("response without Content-Length")
        length = int(lower[at + 17:lower.index(b"\r\n", at + 2)])
        content = await reader.readexactly(length) if length else b""
        return status, content, b"\r\nconnection: close" in lower

    async def close(self) -> None:
        for _, writer in self.idle:
            writer.close()
        self.idle.clear()


class HttpxPool:
    """httpx.AsyncClient behind the same ``request`` call (the default client)."""

    def __init__(self, url: str, size: int, timeout: float) -> None:
        import httpx

        limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)
        self.client = httpx.AsyncClient(base_url=url, limits=limits,
                                        timeout=httpx.Timeout(timeout),
                                        headers={"content-type": "application/json"})

    async def request(self, method: str, path: str, body: bytes | None) -> tuple[int, bytes]:
        if body is None:
            response = await self.client.request(method, path)
        else:
            response = await self.client.request(method, path, content=body)
        return response.status_code, response.content

    async def close(self) -> None:
        await self.client.aclose()


async def _generate(spec: dict) -> dict:
    import orjson

    rate, n = float(spec["rate"]), int(spec["count"])
    mode = spec["mode"]  # "get" | "bodies" | "pool" | "cold"
    rng = random.Random(spec.get("seed", 0))
    names = [orjson.dumps(f"g{g}") for g in range(N_GROUPS)]
    fragments = spec.get("fragments") or []  # per example row: per group fragment
    group_index = {f"g{g}": g for g in range(N_GROUPS)}
    path = spec["path"]
    method = "GET" if mode == "get" else "POST"
    pool_class = RawPool if spec.get("client") == "raw" else HttpxPool
    pool = pool_class(spec["url"], int(spec.get("connections", CONNECTIONS)),
                      spec.get("timeout_s", 10.0))
    watch = {name: pid for name, pid in (spec.get("watch_pids") or {}).items() if pid}

    # cold-draw state (per served version, as the answers report it)
    cold = {"version": None, "order": [], "pos": 0, "touched": set(), "resets": 0,
            "exhausted": 0}

    def cold_reset(version) -> None:
        order = list(range(1, 1 << N_GROUPS))
        rng.shuffle(order)
        cold.update(version=version, order=order, pos=0, touched=set())

    def cold_next() -> tuple[int, bool]:
        order = cold["order"]
        while cold["pos"] < len(order):
            m = order[cold["pos"]]
            cold["pos"] += 1
            if m not in cold["touched"]:
                cold["touched"].add(m)
                return m, True
        cold["exhausted"] += 1
        return rng.randrange(1, 1 << N_GROUPS), False

    if mode == "cold":
        cold_reset(None)

    masks = [0] * n
    fresh = [True] * n
    answer_info: list = [None] * n  # (version, neighbour mask) for batch answers
    lags = [math.nan] * n
    latency = [math.nan] * n
    status = [0] * n
    done_at = [math.nan] * n
    errors: dict[str, int] = {}
    in_flight = [0]
    max_in_flight = [0]
    series: list = []  # every 100 ms: time, machine busy, CPU of the watched processes

    def make_request(k: int) -> bytes | None:
        if mode == "get":
            return None
        if mode == "bodies":
            bodies = spec["bodies"]
            return bodies[k % len(bodies)]
        if mode == "pool":
            m = spec["pool"][rng.randrange(len(spec["pool"]))]
        else:
            m, fresh[k] = cold_next()
        masks[k] = m
        return body_for(fragments[k % len(fragments)], m, names)

    def note_answer(k: int, content: bytes) -> None:
        if mode not in ("pool", "cold"):
            return
        try:
            doc = orjson.loads(content)
        except orjson.JSONDecodeError:
            return
        version = doc.get("version")
        nxt = doc.get("next_group")
        neighbour = None
        if isinstance(nxt, dict) and nxt.get("name") in group_index:
            neighbour = masks[k] | (1 << group_index[nxt["name"]])
        answer_info[k] = (version, neighbour)
        if mode == "cold":
            if version is not None and (cold["version"] is None or version > cold["version"]):
                if cold["version"] is not None:
                    cold["resets"] += 1
                cold_reset(version)  # a new version: empty caches, draw again
            elif version == cold["version"] and neighbour is not None:
                cold["touched"].add(neighbour)

    files = list(spec.get("watch_files") or [])
    events: dict[str, list[float]] = {name: [] for name in files}
    last_mtime: dict[str, int | None] = {}

    def mtime(name: str) -> int | None:
        try:
            return os.stat(name).st_mtime_ns
        except OSError:
            return None

    for name in files:
        last_mtime[name] = mtime(name)
    clock_offset = time.time() - time.perf_counter()  # wall clock -> perf_counter

    def sample() -> None:
        series.append((time.perf_counter(), machine_busy_seconds(), time.process_time(),
                       *[cpu_seconds(pid) for pid in watch.values()]))
        for name in files:  # snapshot / publish writes, as the files' mtimes show them
            now = mtime(name)
            if now is not None and now != last_mtime[name]:
                events[name].append(now / 1e9 - clock_offset)
                last_mtime[name] = now

    async def sampler(stop: asyncio.Event) -> None:
        for _ in range(1_000_000):
            sample()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.02)
            if stop.is_set():
                return

    try:
        # open connections before the clock starts
        await asyncio.gather(*[pool.request("GET", "/healthz", None) for _ in range(16)],
                             return_exceptions=True)
        for m in spec.get("warm_masks") or []:  # one unmeasured pass (fills the caches)
            await pool.request("POST", path, body_for(fragments[0], m, names))

        async def one(k: int, scheduled: float, body: bytes | None) -> None:
            started = time.perf_counter()
            lags[k] = started - scheduled
            in_flight[0] += 1
            max_in_flight[0] = max(max_in_flight[0], in_flight[0])
            try:
                code, content = await pool.request(method, path, body)
                end = time.perf_counter()
                status[k] = code
                if code == 200:
                    note_answer(k, content)
                else:
                    key = f"{code}: {content[:160].decode(errors='replace')}"
                    errors[key] = errors.get(key, 0) + 1
            except Exception as exc:  # noqa: BLE001 - counted and reported
                end = time.perf_counter()
                status[k] = -1
                key = f"{type(exc).__name__}: {str(exc)[:160]}"
                errors[key] = errors.get(key, 0) + 1
            finally:
                in_flight[0] -= 1
            latency[k] = end - scheduled
            done_at[k] = end
            remaining[0] -= 1
            if remaining[0] == 0:
                all_done.set()

        tasks = []
        remaining, all_done = [n], asyncio.Event()  # (asyncio.wait over every task: ~40 ms
        # of bookkeeping right after the last send, which made the last requests late)
        if not n:
            all_done.set()
        stop = asyncio.Event()
        server_pid = watch.get("server")
        threads0 = thread_cpu(server_pid) if server_pid else {}
        sampling = asyncio.ensure_future(sampler(stop))
        gc.collect()  # the generator's own collections would make it late: none while it runs
        gc.disable()
        t0 = time.perf_counter() + 0.05
        for k in range(n):
            scheduled = t0 + k / rate
            delay = scheduled - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.ensure_future(one(k, scheduled, make_request(k))))
        sent_end = time.perf_counter()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(all_done.wait(), spec.get("drain_s", 15.0))
        gc.enable()
        pending = [task for task in tasks if not task.done()]
        for task in pending:
            task.cancel()
        unfinished = len(pending)
        if unfinished:
            key = f"no answer {spec.get('drain_s', 15.0):g} s after the last send (cancelled)"
            errors[key] = unfinished
        stop.set()
        await sampling
        sample()
        threads1 = thread_cpu(server_pid) if server_pid else {}
    finally:
        await pool.close()
    # strictly cold: S not solved by this version for a request sent earlier (its own S or
    # the S ∪ {next} of its answer), in send order
    strict = None
    if mode == "cold":
        solved: dict = {}
        strict = 0
        for k in range(n):
            info = answer_info[k]
            if info is None:
                continue
            version, neighbour = info
            seen = solved.setdefault(version, set())
            if masks[k] not in seen:
                strict += 1
            seen.add(masks[k])
            if neighbour is not None:
                seen.add(neighbour)
    versions = sorted({i[0] for i in answer_info if i is not None and i[0] is not None})
    first, last = series[0], series[-1]
    span = last[0] - first[0]
    cpu = {"window_s": span, "machine_busy": (last[1] - first[1]) / span,
           "generator": (last[2] - first[2]) / span}
    for j, name in enumerate(watch):
        cpu[name] = (last[3 + j] - first[3 + j]) / span
    cpu["others"] = cpu["machine_busy"] - sum(v for k, v in cpu.items()
                                              if k not in ("window_s", "machine_busy"))
    return {"count": n, "rate": rate, "t0": t0, "sent_seconds": sent_end - t0,
            "lag_s": lags, "latency_s": latency, "status": status, "done_at": done_at,
            "errors": errors, "unfinished": unfinished, "cpu_per_s": cpu,
            "generator_cpu_s": last[2] - first[2], "series": series,
            "watched": list(watch), "client": spec.get("client", "httpx"),
            "file_events": {Path(k).parent.name + "/" + Path(k).name: v
                            for k, v in events.items()},
            "retries": getattr(pool, "retries", 0),
            "server_threads": thread_delta(threads0, threads1, span) if threads1 else {},
            "max_in_flight": max_in_flight[0], "strict_cold": strict,
            "fresh_draws": sum(fresh) if mode == "cold" else None,
            "cold_resets": cold["resets"] if mode == "cold" else None,
            "cold_exhausted": cold["exhausted"] if mode == "cold" else None,
            "versions": versions}


def generator_main(spec_path: str, out_path: str) -> int:
    return run_async_role(_generate, spec_path, out_path)


# ============================================================================ feeder
def feeder_main(spec_path: str, out_path: str) -> int:
    """POST bodies back to back (and ``POST /retrain`` every few seconds) until SIGTERM or
    the spec's hard limits (seconds, posts)."""
    import httpx

    with open(spec_path, "rb") as fh:
        spec = pickle.load(fh)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    deadline = time.monotonic() + float(spec["max_seconds"])
    out = {"posts": 0, "post_errors": 0, "examples": 0, "retrains_posted": 0,
           "retrain_errors": 0, "jobs": [], "error_samples": []}
    lock = threading.Lock()

    def streamer() -> None:  # XADD binary entries back to back (the Redis stream)
        import redis

        from clients.stream import StreamProducer

        client = redis.Redis.from_url(spec["redis_url"])
        producer = StreamProducer(client, spec["model"], batch_size=spec["examples_per_body"],
                                  pipeline_entries=1)
        from service.storage import id_key, redis_keys

        X, y = spec["stream_rows"]
        n, k = X.n_rows, 0
        applied_key = redis_keys.applied_key(spec["model"])
        while not stop.is_set() and time.monotonic() < deadline:
            # full rate, as fast as the fold applies: at most `backlog` entries ahead of it
            if len(producer.ids) >= spec["backlog"]:
                applied = client.get(applied_key)
                ahead = producer.ids[-spec["backlog"]]
                if applied is None or id_key(applied) < id_key(ahead):
                    time.sleep(0.002)
                    continue
            start = (k * spec["examples_per_body"]) % n
            stop_row = min(n, start + spec["examples_per_body"])
            part = X.row_slice(start, stop_row)
            try:
                producer.add_batch(part.indptr, part.indices, part.values, y[start:stop_row])
                producer.flush()
                ok = True
            except redis.RedisError as exc:
                ok = False
                if len(out["error_samples"]) < 5:
                    out["error_samples"].append(f"{type(exc).__name__}: {exc}")
            with lock:
                out["posts"] += 1
                out["post_errors"] += not ok
                out["examples"] += (stop_row - start) if ok else 0
            k += 1
        producer.ids.clear()
        client.close()

    def poster() -> None:
        if spec.get("stream_rows") is not None:
            return streamer()
        bodies = spec["bodies"]
        with httpx.Client(base_url=spec["url"], timeout=60) as client:
            k = 0
            while not stop.is_set() and time.monotonic() < deadline and \
                    k < spec["max_posts"]:
                try:
                    response = client.post(spec["path"], content=bodies[k % len(bodies)],
                                           headers={"content-type": spec["content_type"]})
                    ok = response.status_code == 202
                    if not ok and len(out["error_samples"]) < 5:
                        out["error_samples"].append(f"{response.status_code} "
                                                    f"{response.text[:200]}")
                except httpx.HTTPError as exc:
                    ok = False
                    if len(out["error_samples"]) < 5:
                        out["error_samples"].append(f"{type(exc).__name__}: {exc}")
                    time.sleep(0.05)
                with lock:
                    out["posts"] += 1
                    out["post_errors"] += not ok
                    out["examples"] += spec["examples_per_body"] if ok else 0
                k += 1

    def retrainer() -> None:
        every = spec.get("retrain_every_s")
        if not every:
            return
        with httpx.Client(base_url=spec["url"], timeout=30) as client:
            next_at = time.monotonic() + every
            for _ in range(int(spec["max_seconds"] / every) + 1):
                if stop.wait(max(0.0, next_at - time.monotonic())) or \
                        time.monotonic() > deadline:
                    return
                next_at += every
                try:
                    response = client.post(f"/v1/models/{spec['model']}/retrain")
                    if response.status_code == 202:
                        out["jobs"].append(response.json()["id"])
                        out["retrains_posted"] += 1
                    else:
                        out["retrain_errors"] += 1
                        if len(out["error_samples"]) < 5:
                            out["error_samples"].append(f"retrain {response.status_code} "
                                                        f"{response.text[:200]}")
                except httpx.HTTPError as exc:
                    out["retrain_errors"] += 1
                    if len(out["error_samples"]) < 5:
                        out["error_samples"].append(f"retrain {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=poster), threading.Thread(target=retrainer)]
    started, cpu0 = time.monotonic(), time.process_time()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=float(spec["max_seconds"]) + 90)
    out["seconds"] = time.monotonic() - started
    out["cpu_s"] = time.process_time() - cpu0
    with open(out_path, "wb") as fh:
        pickle.dump(out, fh)
    return 0


# ============================================================================ harness
def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """CPU seconds of each thread of ``pid``: tid -> (name, seconds)."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            raw = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        name = raw[raw.index("(") + 1:raw.rindex(")")]
        fields = raw.rsplit(")", 1)[1].split()
        out[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / TICK)
    return out


def thread_delta(before: dict, after: dict, span: float) -> dict[str, float]:
    """Cores used per thread name (threads of one name summed; the main thread is
    ``main``) between two :func:`thread_cpu` readings."""
    out: dict[str, float] = {}
    for tid, (name, seconds) in after.items():
        label = "main (event loop)" if tid == min(after) else name
        used = seconds - before.get(tid, (name, 0.0))[1]
        out[label] = out.get(label, 0.0) + used / span
    return {k: round(v, 3) for k, v in sorted(out.items(), key=lambda kv: -kv[1]) if v > 0}


def start_server(data_dir: str, log_dir: str, redis_url: str | None = None) -> Child:
    """``featurebudget serve`` on PORT, embedded backend in ``data_dir`` (or on
    ``redis_url``), once ready (``startup_seconds``: how long that took)."""
    env = service_env(redis_url=redis_url, data_dir=data_dir, batch_worker="true")
    return start_api(PORT, env, log_dir, label="serve", timeout=240)


def run_role(role: str, spec: dict, work: Path, label: str, timeout: float
             ) -> subprocess.Popen:
    label = re.sub(r"[^A-Za-z0-9.-]+", "_", label)
    spec_path, out_path = work / f"{label}.spec.pkl", work / f"{label}.out.pkl"
    with open(spec_path, "wb") as fh:
        pickle.dump(spec, fh)
    out_path.unlink(missing_ok=True)
    process = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--role", role,
                                "--spec", str(spec_path), "--result", str(out_path)],
                               cwd=ROOT)
    process.out_path = out_path  # type: ignore[attr-defined]
    process.limit = timeout  # type: ignore[attr-defined]
    return process


def collect(process: subprocess.Popen, label: str) -> dict:
    try:
        code = process.wait(timeout=process.limit)  # type: ignore[attr-defined]
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)
        raise RuntimeError(f"{label}: no result within {process.limit} s") from None
    if code != 0:
        raise RuntimeError(f"{label}: exit status {code}")
    with open(process.out_path, "rb") as fh:  # type: ignore[attr-defined]
        return pickle.load(fh)


def stop_process(process: subprocess.Popen, label: str) -> dict | None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=90)
    except subprocess.TimeoutExpired:
        print(f"{label}: no exit 90 s after SIGTERM, killing", file=sys.stderr)
        process.kill()
        process.wait(timeout=30)
        return None
    try:
        with open(process.out_path, "rb") as fh:  # type: ignore[attr-defined]
            return pickle.load(fh)
    except OSError:
        return None


def applied_examples(client, model: str) -> int | None:
    """The model's examples applied, as its inspect says."""
    try:
        return int(inspect(client, model)["examples_applied"])
    except Exception:  # noqa: BLE001 - reported as missing
        return None


def encode_bin(X, y, start: int, stop: int) -> bytes:
    """Rows ``start:stop`` as one FBX1 body (float32 values, as StreamProducer writes)."""
    from service import fbx1

    part = X.row_slice(start, stop)
    return fbx1.encode_batch(part.indptr, part.indices, part.values, y[start:stop],
                             value_bytes=4)


def predict_histogram(client, model: str) -> dict:
    """``featurebudget_predict_seconds`` of one model: buckets (le -> count), sum, count."""
    text = client.metrics()
    out = {"buckets": {}, "sum": 0.0, "count": 0.0}
    label = f'model="{model}"'
    for line in text.splitlines():
        if not line.startswith("featurebudget_predict_seconds") or label not in line:
            continue
        name, value = line.rsplit(" ", 1)
        if name.startswith("featurebudget_predict_seconds_bucket"):
            le = re.search(r'le="([^"]+)"', name).group(1)
            out["buckets"][le] = float(value)
        elif name.startswith("featurebudget_predict_seconds_sum"):
            out["sum"] = float(value)
        elif name.startswith("featurebudget_predict_seconds_count"):
            out["count"] = float(value)
    return out


def histogram_delta(before: dict, after: dict) -> dict | None:
    count = after["count"] - before["count"]
    if count <= 0:
        return None
    share = {le: (after["buckets"].get(le, 0) - before["buckets"].get(le, 0)) / count
             for le in ("0.0005", "0.001", "0.0025", "0.005", "0.01")}
    return {"requests": int(count), "mean_ms": 1e3 * (after["sum"] - before["sum"]) / count,
            "share_le_ms": {f"{float(le) * 1e3:g}": round(v, 5) for le, v in share.items()}}


def publish_version(client, model: str) -> int:
    """POST /retrain, wait for the job and until the API serves its version."""
    return int(publish(client, model, timeout=120.0, served_timeout=30.0)["version"])


def other_benchmarks() -> list[str]:
    """Other load tests / benchmarks running on this machine (pgrep), not ours."""
    try:
        out = subprocess.run(["pgrep", "-af", "load_tests/|benchmarks/"], capture_output=True,
                             text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    mine = {os.getpid(), os.getppid()}
    lines = []
    for line in out.splitlines():
        pid = int(line.split(None, 1)[0])
        if pid in mine or "pgrep" in line or "predict_latency" in line:
            continue
        lines.append(line)
    return lines


def wait_machine_quiet(max_wait: float) -> list[str]:
    deadline = time.monotonic() + max_wait
    others = other_benchmarks()
    while others and time.monotonic() < deadline:
        print(f"waiting for other benchmarks to finish: {others}", file=sys.stderr)
        time.sleep(10)
        others = other_benchmarks()
    return others


def wait_cpu_quiet(exclude_pids: list[int], max_wait: float, threshold: float = 0.35
                   ) -> float:
    """Wait (at most ``max_wait`` s) for a second in which the machine, less the processes
    ``exclude_pids``, is busy under ``threshold`` cores (other people's tests share these 2
    cores); returns the last second's figure."""
    deadline = time.monotonic() + max_wait
    busy = math.nan
    for _ in range(int(max_wait) + 2):
        m0, p0 = machine_busy_seconds(), sum(cpu_seconds(p) for p in exclude_pids)
        t0 = time.monotonic()
        time.sleep(1.0)
        span = time.monotonic() - t0
        busy = (machine_busy_seconds() - m0 - (sum(cpu_seconds(p) for p in exclude_pids)
                                                - p0)) / span
        if busy < threshold or time.monotonic() > deadline:
            break
    return busy


def stalls(part: dict, threshold_s: float = 0.03, gap_s: float = 0.5) -> list[dict]:
    """Runs of requests slower than ``threshold_s`` (answered or not), each with the
    snapshot / publish file writes seen within 300 ms before to 100 ms after its start."""
    rate, t0 = part["rate"], part["t0"]
    slow = [k for k, (lat, code) in enumerate(zip(part["latency_s"], part["status"],
                                                  strict=True))
            if code != 200 or not lat <= threshold_s]
    runs: list[list[int]] = []
    for k in slow:
        if runs and (k - runs[-1][-1]) / rate <= gap_s:
            runs[-1].append(k)
        else:
            runs.append([k])
    out = []
    for run in runs:
        start = t0 + run[0] / rate
        near = sorted({name for name, times in part.get("file_events", {}).items()
                       for t in times if start - 0.3 <= t <= start + 0.1})
        worst = max((part["latency_s"][k] for k in run if part["status"][k] == 200),
                    default=math.nan)
        out.append({"at_s": round(start - t0, 3), "requests": len(run),
                    "worst_ms": round(worst * 1e3, 1), "writes_near": near})
    return out


def summarize(label: str, gen: dict, seconds: float) -> dict:
    import numpy as np

    status = np.asarray(gen["status"])
    latency = np.asarray(gen["latency_s"], dtype=float)
    ok = status == 200
    answered = int(ok.sum())
    lat_ms = latency[ok] * 1e3
    if "_merged_rate" in gen:  # segments: answers over the sum of the segments' spans
        achieved = gen["_merged_rate"]
    else:
        done = np.asarray(gen["done_at"], dtype=float)[ok]
        span = (float(np.nanmax(done)) - gen["t0"]) if answered else math.nan
        achieved = answered / span if answered and span > 0 else math.nan
    lags = np.asarray(gen["lag_s"], dtype=float) * 1e3

    def pct(q):
        return float(np.percentile(lat_ms, q)) if answered else math.nan

    row = {"scenario": label, "sent": int(gen["count"]), "answered": answered,
           "errors": int(gen["count"] - answered),
           "achieved_rate_per_s": achieved,
           "send_rate_per_s": gen["count"] / gen["sent_seconds"] if gen["sent_seconds"]
           else math.nan,
           "p50_ms": pct(50), "p99_ms": pct(99), "p999_ms": pct(99.9),
           "max_ms": float(lat_ms.max()) if answered else math.nan,
           "send_lag_p50_ms": float(np.nanpercentile(lags, 50)),
           "send_lag_p99_ms": float(np.nanpercentile(lags, 99)),
           "send_lag_max_ms": float(np.nanmax(lags)),
           "max_in_flight": gen["max_in_flight"], "unfinished": gen["unfinished"],
           "error_kinds": gen["errors"], "generator_cpu_s": gen["generator_cpu_s"],
           "cpu_per_s": {k: round(v, 3) for k, v in gen["cpu_per_s"].items()},
           "seconds": seconds, "client": gen.get("client"), "loop": gen.get("loop")}
    if answered:
        row["over_10ms"] = int((lat_ms > 10).sum())
        row["over_100ms"] = int((lat_ms > 100).sum())
    if gen.get("strict_cold") is not None:
        row.update(strict_cold=gen["strict_cold"], fresh_draws=gen["fresh_draws"],
                   cold_resets=gen["cold_resets"], cold_exhausted=gen["cold_exhausted"])
    if gen.get("versions"):
        row["versions_answered"] = [gen["versions"][0], gen["versions"][-1],
                                    len(gen["versions"])]
    return row


def merge(parts: list[dict]) -> dict:
    """Concatenate generator results of cold segments (latencies, statuses, counters)."""
    out = dict(parts[0])
    for key in ("lag_s", "latency_s", "status"):
        out[key] = [v for p in parts for v in p[key]]
    out["count"] = sum(p["count"] for p in parts)
    out["sent_seconds"] = sum(p["sent_seconds"] for p in parts)
    out["generator_cpu_s"] = sum(p["generator_cpu_s"] for p in parts)
    out["unfinished"] = sum(p["unfinished"] for p in parts)
    out["max_in_flight"] = max(p["max_in_flight"] for p in parts)
    errors: dict = {}
    for p in parts:
        for k, v in p["errors"].items():
            errors[k] = errors.get(k, 0) + v
    out["errors"] = errors
    for key in ("strict_cold", "fresh_draws", "cold_resets", "cold_exhausted"):
        if parts[0].get(key) is not None:
            out[key] = sum(p[key] for p in parts)
    out["versions"] = sorted({v for p in parts for v in p["versions"]})
    total = sum(p["cpu_per_s"]["window_s"] for p in parts)
    out["cpu_per_s"] = {k: sum(p["cpu_per_s"][k] * p["cpu_per_s"]["window_s"]
                               for p in parts) / total for k in parts[0]["cpu_per_s"]}
    out["cpu_per_s"]["window_s"] = total
    # achieved rate over the segments: answers / sum of segment spans
    spans, answered = 0.0, 0
    for p in parts:
        ok = [d for d, s in zip(p["done_at"], p["status"], strict=True) if s == 200]
        if ok:
            spans += max(ok) - p["t0"]
            answered += len(ok)
    out["_merged_rate"] = answered / spans if spans else math.nan
    out["done_at"], out["t0"] = [], 0.0
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 s per scenario, less training")
    parser.add_argument("--out", default=str(ROOT / "load_tests" / "predict_latency.json"))
    parser.add_argument("--rate", default="500,1000",
                        help="requests per second; a comma-separated list runs every "
                        "scenario at each rate (default 500,1000)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="per scenario (default 10, --quick 3)")
    parser.add_argument("--client", choices=("httpx", "raw", "both"), default="raw",
                        help="load generator's HTTP client: a minimal asyncio-streams "
                        "HTTP/1.1 client (default), httpx.AsyncClient, or each scenario with "
                        "both")
    parser.add_argument("--quiet-wait", type=float, default=120.0,
                        help="before each scenario wait up to this many seconds for a second "
                        "in which other processes use under 0.35 cores")
    parser.add_argument("--only", choices=("all", "online"), default="all",
                        help="online: only the SOFS scenarios (idle, and while ingesting "
                        f"{INGEST_ROWS}-example bodies at full rate)")
    parser.add_argument("--backend", choices=("local", "redis", "both"), default="both",
                        help="local: the embedded backend `featurebudget serve` starts by "
                        f"default; redis: the service on {REDIS_URL}, and an ingestion "
                        "scenario over the binary stream; both (default): local, then redis")
    parser.add_argument("--scenarios", default=None,
                        help="only the scenarios whose name contains one of these "
                        "'|'-separated strings (e.g. 'batch cold|sofs idle')")
    parser.add_argument("--role", choices=("generator", "feeder"), help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role == "generator":
        return generator_main(args.spec, args.result)
    if args.role == "feeder":
        return feeder_main(args.spec, args.result)

    try:
        rates = [float(r) for r in str(args.rate).split(",") if r.strip()]
    except ValueError:
        parser.error("--rate takes numbers separated by commas")
    seconds = args.seconds if args.seconds is not None else (3.0 if args.quick else 10.0)
    if not (0 < seconds <= 120) or not rates or not all(0 < r <= 5000 for r in rates):
        parser.error("--seconds must be in (0, 120] and each --rate in (0, 5000]")
    if args.backend == "both":
        return run_backends(argv, args.out)

    import numpy as np
    import orjson

    from algorithms.datasets.online_synthetic import make_x1

    count = max(1, int(round(rates[0] * seconds)))
    n_batch_train = 1500 if args.quick else 4000
    n_online_train = 5000 if args.quick else 20000
    wall = time.monotonic()
    others = wait_machine_quiet(600)
    if others:
        print(f"other benchmarks still running after 10 minutes: {others}", file=sys.stderr)

    print("preparing data ...", file=sys.stderr)
    groups = batch_groups()
    Xb, yb = batch_data(n_batch_train + 2000, seed=11)
    train_bodies = [batch_examples_body(groups, Xb[k:k + 100], yb[k:k + 100])
                    for k in range(0, n_batch_train, 100)]
    stream_bodies = [batch_examples_body(groups, Xb[k:k + 100], yb[k:k + 100])
                     for k in range(n_batch_train, n_batch_train + 2000, 100)]
    fragments = [group_fragments(groups, Xb[n_batch_train + k]) for k in range(200)]
    Xo, yo, _ = make_x1(n_samples=n_online_train + 2200, n_features=20_000, seed=1)
    yo = np.asarray(yo).astype(int)
    online_train = [libsvm_body(Xo, yo, k, min(k + 1000, n_online_train))
                    for k in range(0, n_online_train, 1000)]
    online_stream = [libsvm_body(Xo, yo, k, k + INGEST_ROWS)  # full-rate ingestion bodies
                     for k in range(0, n_online_train - INGEST_ROWS + 1, INGEST_ROWS)]
    online_binary = [encode_bin(Xo, yo, k, k + INGEST_ROWS)
                     for k in range(0, n_online_train - INGEST_ROWS + 1, INGEST_ROWS)]
    stream_rows = (Xo.row_slice(0, n_online_train), yo[:n_online_train].copy())
    online_bodies = online_predict_bodies(Xo, n_online_train + 2000, n_online_train + 2200)
    del Xo
    redis_url = REDIS_URL if args.backend == "redis" else None
    if redis_url:
        import redis

        redis.Redis.from_url(redis_url).flushdb()
    pool_rng = random.Random(3)
    warm_pool = pool_rng.sample(range(1, 1 << N_GROUPS), WARM_POOL)

    results: dict = {
        "mode": "quick" if args.quick else "full", "backend": args.backend,
        "rates_per_s": rates, "seconds_per_scenario": seconds,
        "targets_p99_ms": TARGETS_MS, "connections": CONNECTIONS,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
        "batch_model": {"algorithm": "cs-g-omp", "groups": N_GROUPS,
                        "features": sum(GROUP_SIZES), "group_sizes": list(GROUP_SIZES),
                        "costs": [g["cost"] for g in groups],
                        "train_examples": n_batch_train},
        "online_model": {"algorithm": "sofs", "n_features": 20_000, "budget": 200,
                         "train_examples": n_online_train, "nnz_per_example": 600},
        "other_benchmarks_at_start": others, "rows": []}
    work = Path(tempfile.mkdtemp(prefix="fb-predict-latency-", dir="/tmp"))
    data_dir = work / "data"
    data_dir.mkdir()
    server: Child | None = None
    feeders: list[subprocess.Popen] = []
    generators: list[subprocess.Popen] = []
    client = None
    try:
        print("starting featurebudget serve (the first start compiles numba kernels, "
              "~30 s) ...", file=sys.stderr)
        server = start_server(str(data_dir), str(work), redis_url)
        results["startup_seconds"] = server.startup_seconds
        client = connect(server.url, timeout=120)
        for body in ({"name": BATCH_MODEL, "algorithm": "cs-g-omp", "task": "regression",
                      "groups": groups, "params": dict(NO_POLICY)},
                     {"name": ONLINE_MODEL, "algorithm": "sofs", "n_features": 20_000,
                      "budget": 200}):
            create(client, body, replace=True)
        print("training ...", file=sys.stderr)
        for body in train_bodies:
            client.post_examples(BATCH_MODEL, orjson.loads(body)["examples"], wait=True)
        for body in online_train:
            client.post_libsvm(ONLINE_MODEL, body, wait=True)
        results["batch_model"]["first_version"] = publish_version(client, BATCH_MODEL)
        sequence = client.sequence(BATCH_MODEL)
        results["batch_model"]["sequence"] = [p.get("name") for p in sequence["prefixes"][1:]]
        results["batch_model"]["validation_ev_full"] = \
            sequence["prefixes"][-1].get("validation_explained_variance")

        base = {"url": server.url, "rate": rates[0], "count": count, "timeout_s": 10.0,
                "drain_s": 15.0}
        batch_path = f"/v1/models/{BATCH_MODEL}/predict"
        gen_limit = seconds + 60

        def measure(label: str, spec: dict, feeder: dict | None = None,
                    histogram_model: str | None = None, segments: int = 1,
                    before_segment=None, client_kind: str = "httpx") -> dict:
            label = f"{label} @{base['rate']:g}/s [{client_kind}]"
            quiet = wait_machine_quiet(300)
            if quiet:
                print(f"{label}: other benchmarks running: {quiet}", file=sys.stderr)
            others_before = wait_cpu_quiet([server.pid, os.getpid()], args.quiet_wait)
            print(f"{label} ... (machine busy with other work before: {others_before:.2f} "
                  "cores)", file=sys.stderr)
            hist0 = predict_histogram(client, histogram_model) if histogram_model else None
            applied0 = applied_examples(client, feeder["model"]) if feeder else None
            feed = None
            if feeder is not None:
                feed = run_role("feeder", {**feeder, "url": server.url,
                                           "max_seconds": seconds * segments + 60},
                                work, f"feeder-{label}", seconds + 120)
                feeders.append(feed)
                time.sleep(2.0)  # the background load reaches steady state first
            started = time.monotonic()
            parts = []
            per = [count // segments + (1 if i < count % segments else 0)
                   for i in range(segments)]
            watch = {"server": server.pid, "feeder": feed.pid if feed is not None else None,
                     "harness": os.getpid()}
            models_dir = data_dir / "models"
            watch_files = [str(models_dir / BATCH_MODEL / "snapshot.fbs"),
                           str(models_dir / ONLINE_MODEL / "snapshot.fbs"),
                           str(models_dir / BATCH_MODEL / "version")]
            for i, n in enumerate(per):
                if before_segment is not None:
                    before_segment(i)
                gen = run_role("generator", {**base, **spec, "count": n, "client": client_kind,
                                             "watch_pids": watch,
                                             "watch_files": watch_files,
                                             "seed": zlib.crc32(f"{label}/{i}".encode())},
                               work, f"gen-{label}-{i}", gen_limit)
                generators.append(gen)
                parts.append(collect(gen, label))
                generators.remove(gen)
            elapsed = time.monotonic() - started
            feed_out = None
            if feed is not None:
                feed_out = stop_process(feed, f"feeder-{label}")
                feeders.remove(feed)
            hist1 = predict_histogram(client, histogram_model) if histogram_model else None
            applied1 = applied_examples(client, feeder["model"]) if feeder else None
            gen = parts[0] if len(parts) == 1 else merge(parts)
            row = summarize(label, gen, seconds)
            row.update(rate_per_s=base["rate"], backend=args.backend)
            if len(parts) > 1:
                row["segments"] = len(parts)
            row["wall_s"] = elapsed
            row["others_before_cores"] = others_before
            row["stalls_over_30ms"] = [x for p in parts for x in stalls(p)][:50]
            row["file_writes"] = {name: sum(len(p["file_events"].get(name, ())) for p in parts)
                                  for name in parts[0]["file_events"]}
            row["client_resends"] = sum(p.get("retries", 0) for p in parts)
            row["server_threads_cores"] = parts[-1].get("server_threads", {})
            if hist0 is not None:
                row["server_predict_seconds"] = histogram_delta(hist0, hist1)
            if feed_out is not None:
                jobs = []
                for job_id in feed_out.get("jobs", [])[:100]:
                    with contextlib.suppress(Exception):  # a missing job: left out
                        jobs.append(client.job(feeder["model"], job_id).raw)
                succeeded = [j for j in jobs if j.get("status") == "succeeded"]
                feed_out["jobs_succeeded"] = len(succeeded)
                feed_out["jobs_failed"] = sum(j.get("status") == "failed" for j in jobs)
                if succeeded:
                    feed_out["job_duration_p50_s"] = float(np.median(
                        [j["duration_seconds"] for j in succeeded]))
                    feed_out["job_queue_max_s"] = max(j["started_at"] - j["created_at"]
                                                      for j in succeeded if j["started_at"])
                feed_out.pop("jobs", None)
                feed_out["examples_per_s"] = feed_out["examples"] / feed_out["seconds"] \
                    if feed_out["seconds"] else math.nan
                if applied0 is not None and applied1 is not None:  # learned meanwhile
                    feed_out["applied_per_s"] = (applied1 - applied0) / elapsed
                row["background"] = feed_out
            with open(work / f"raw-{re.sub(r'[^A-Za-z0-9]+', '_', label)}.json", "w") as fh:
                json.dump({"label": label, "watched": parts[0]["watched"],
                           "parts": [{k: p[k] for k in ("t0", "latency_s", "lag_s", "status",
                                                        "series", "file_events")}
                                     for p in parts]}, fh)
            results["rows"].append(row)
            cpu = row["cpu_per_s"]
            print(f"  p50 {row['p50_ms']:.2f} ms, p99 {row['p99_ms']:.2f} ms, errors "
                  f"{row['errors']}; CPU/s server {cpu.get('server', 0):.2f}, generator "
                  f"{cpu['generator']:.2f}, others {cpu['others']:.2f}", file=sys.stderr)
            return row

        batch_feeder = {"path": f"/v1/models/{BATCH_MODEL}/examples",
                        "content_type": "application/json", "bodies": stream_bodies,
                        "examples_per_body": 100, "max_posts": 100_000,
                        "model": BATCH_MODEL, "retrain_every_s": RETRAIN_EVERY_S}
        online_feeder = {"path": f"/v1/models/{ONLINE_MODEL}/examples",
                         "content_type": "text/plain", "bodies": online_stream,
                         "examples_per_body": INGEST_ROWS, "max_posts": 100_000,
                         "model": ONLINE_MODEL, "retrain_every_s": None}
        binary_feeder = {**online_feeder, "content_type": "application/octet-stream",
                         "bodies": online_binary}
        stream_feeder = {**online_feeder, "bodies": None, "stream_rows": stream_rows,
                         "redis_url": redis_url, "backlog": 8}
        warm_spec = {"mode": "pool", "path": batch_path, "pool": warm_pool,
                     "warm_masks": warm_pool, "fragments": fragments}
        cold_spec = {"mode": "cold", "path": batch_path, "fragments": fragments}
        sofs_spec = {"mode": "bodies", "path": f"/v1/models/{ONLINE_MODEL}/predict",
                     "bodies": online_bodies}
        healthz = {"mode": "get", "path": "/healthz"}
        versions: list[int] = []

        def fresh_version(_i: int) -> None:
            versions.append(publish_version(client, BATCH_MODEL))

        clients = ("httpx", "raw") if args.client == "both" else (args.client,)
        plan = [  # the floor first: HTTP + the load generator, no work in the route
            ("healthz idle (floor)", healthz, {}),
            ("batch warm, idle", warm_spec, {"histogram_model": BATCH_MODEL}),
            ("batch cold, idle", cold_spec, {"histogram_model": BATCH_MODEL,
                                             "segments": "per rate",
                                             "before_segment": fresh_version}),
            ("batch warm, ingest + retrain/2s", warm_spec,
             {"feeder": batch_feeder, "histogram_model": BATCH_MODEL}),
            ("batch cold, ingest + retrain/2s", cold_spec,
             {"feeder": batch_feeder, "histogram_model": BATCH_MODEL}),
            ("healthz, ingest + retrain/2s (floor)", healthz, {"feeder": batch_feeder}),
            ("sofs idle", sofs_spec, {"histogram_model": ONLINE_MODEL}),
            ("sofs, ingesting REST libsvm", sofs_spec,
             {"feeder": online_feeder, "histogram_model": ONLINE_MODEL}),
            ("sofs, ingesting REST binary", sofs_spec,
             {"feeder": binary_feeder, "histogram_model": ONLINE_MODEL}),
            ("healthz, ingesting REST libsvm (floor)", healthz, {"feeder": online_feeder}),
            ("healthz, ingesting REST binary (floor)", healthz, {"feeder": binary_feeder}),
        ]
        if redis_url:
            plan.append(("sofs, ingesting binary stream", sofs_spec,
                         {"feeder": stream_feeder, "histogram_model": ONLINE_MODEL}))
        if args.only == "online":
            plan = [p for p in plan if p[0].startswith(("sofs", "healthz, ingesting REST"))]
        if args.scenarios:
            wanted = [w for w in args.scenarios.split("|") if w]
            plan = [p for p in plan if any(w in p[0] for w in wanted)]
        for rate in rates:
            count = max(1, int(round(rate * seconds)))
            segments = max(1, math.ceil(count / COLD_SEGMENT_MAX))
            base.update(rate=rate, count=count)
            for label, spec, options in plan:
                if options.get("segments") == "per rate":
                    options = {**options, "segments": segments}
                for kind in clients:
                    measure(label, spec, client_kind=kind, **options)
        results["cold_idle_versions"] = versions
        results["final_batch_model"] = client.get_model(BATCH_MODEL).raw
        results["final_online_position"] = inspect(client, ONLINE_MODEL).get("log_position")
    except BaseException:
        if server is not None:
            print(f"--- serve (log {server.log_path}) ---\n{server.tail()}", file=sys.stderr)
        raise
    finally:
        for process in generators:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)
        for feed in feeders:
            stop_process(feed, "feeder")
        if client is not None:
            client.close()
        if server is not None:
            results["exit_code"] = server.stop()
            text = server.log_path.read_text(errors="replace")
            results["service_log_problems"] = [
                ln for ln in text.splitlines() if "ERROR" in ln or "CRITICAL" in ln
                or re.match(r"^[\w.]+(Error|Exception): ", ln)][:20]
        shutil.rmtree(data_dir, ignore_errors=True)
        results["work_dir"] = str(work)
    results["wall_seconds"] = time.monotonic() - wall
    print_table(results)
    Path(args.out).write_text(json.dumps(results, indent=2, default=float))
    print(f"\nwrote {args.out} ({results['wall_seconds']:.0f} s; raw latencies in {work})",
          file=sys.stderr)
    return 0


def target_of(label: str, rate: float) -> float | None:
    """The p99 objective of a prediction scenario (ms): idle, 5 at 500/s and 10 at 1,000/s
    (the higher one between); while ingesting (and retraining), 20. None for the floors."""
    if not label.startswith(("batch", "sofs")):
        return None
    if "idle" in label:
        return TARGETS_MS["idle"][500] if rate <= 500 else TARGETS_MS["idle"][1000]
    return TARGETS_MS["loaded"]


def run_backends(argv, out: str) -> int:
    """``--backend both``: this script once per backend (local, then redis), then one JSON
    with both runs (``backends``) and both tables."""
    argv = list(sys.argv[1:] if argv is None else argv)
    merged: dict = {"backends": {}}
    for backend in ("local", "redis"):
        part = f"{out}.{backend}.json"
        code = main([*argv, "--backend", backend, "--out", part])
        if code:
            return code
        merged["backends"][backend] = json.loads(Path(part).read_text())
        Path(part).unlink()
    Path(out).write_text(json.dumps(merged, indent=2, default=float))
    print("\n## both backends")
    for backend, res in merged["backends"].items():
        print(f"\n### {backend}")
        print_table(res)
    print(f"\nwrote {out}", file=sys.stderr)
    return 0


def print_table(res: dict) -> None:
    rates = ", ".join(f"{r:g}" for r in res["rates_per_s"])
    print(f"\nOpen-loop predict latency, {res['backend']} backend, {rates} req/s for "
          f"{res['seconds_per_scenario']:g} s per scenario, one example per request, "
          f"{res['machine']['cpus']} CPUs; latency = answer time - scheduled send time (ms). "
          "Objectives (p99 of predictions): idle < 5 ms at 500/s and < 10 ms at 1,000/s; "
          "< 20 ms while ingesting (and retraining). CPU: cores busy on average over the "
          "window: server / load generator / background writer / everything else on the "
          "machine (other people's jobs).\n")
    print("| scenario | sent | answered | errors | achieved /s | p50 | p99 | p99.9 | max | "
          "p99 target | CPU srv / gen / bg / other |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
    for row in res["rows"]:
        cpu = row["cpu_per_s"]
        target = target_of(row["scenario"], row.get("rate_per_s", 500.0))
        if target is None:
            verdict = "-"
        else:
            verdict = f"< {target:g} ({'yes' if row['p99_ms'] < target else 'NO'})"
        print(f"| {row['scenario']} | {row['sent']} | {row['answered']} | {row['errors']} | "
              f"{row['achieved_rate_per_s']:.0f} | {row['p50_ms']:.2f} | {row['p99_ms']:.2f} "
              f"| {row['p999_ms']:.2f} | {row['max_ms']:.1f} | {verdict} | "
              f"{cpu.get('server', math.nan):.2f} / {cpu['generator']:.2f} / "
              f"{cpu.get('feeder', 0):.2f} / {cpu['others']:.2f} |")
    for row in res["rows"]:
        extra = [f"generator send lag p99 {row['send_lag_p99_ms']:.2f} ms, max "
                 f"{row['send_lag_max_ms']:.1f} ms, most in flight {row['max_in_flight']}"]
        if row.get("strict_cold") is not None:
            extra.append(f"strictly cold {row['strict_cold']}/{row['answered']}, draws over "
                         f"after a new version {row['cold_resets']}, pool exhausted "
                         f"{row['cold_exhausted']}")
        if row.get("versions_answered"):
            lo, hi, k = row["versions_answered"]
            extra.append(f"versions {lo}..{hi} ({k})")
        if row.get("server_predict_seconds"):
            s = row["server_predict_seconds"]
            extra.append(f"server-side predict mean {s['mean_ms']:.3f} ms, <=1 ms "
                         f"{s['share_le_ms']['1']:.1%}, <=5 ms {s['share_le_ms']['5']:.1%}")
        if row.get("background"):
            b = row["background"]
            applied = b.get("applied_per_s")
            extra.append(f"background {b['examples_per_s']:,.0f} examples/s acknowledged"
                         + (f", {applied:,.0f}/s applied" if applied is not None else "") + ", "
                         f"{row['cpu_per_s'].get('feeder', math.nan):.2f} CPU/s "
                         f"({b['post_errors']} errors), retrains {b['retrains_posted']} "
                         f"posted / {b.get('jobs_succeeded', 0)} published")
        runs = row.get("stalls_over_30ms") or []
        if runs:
            shown = ", ".join(f"{x['at_s']:.1f} s: {x['worst_ms']:.0f} ms"
                              + (f" ({'+'.join(x['writes_near'])})" if x["writes_near"]
                                 else "") for x in runs[:6])
            extra.append(f"stalls (runs of requests over 30 ms) {len(runs)}: {shown}"
                         + (" ..." if len(runs) > 6 else ""))
        threads = row.get("server_threads_cores") or {}
        if threads:
            extra.append("server threads (cores) " + ", ".join(
                f"{k} {v:.2f}" for k, v in list(threads.items())[:4]))
        writes = {k: v for k, v in (row.get("file_writes") or {}).items() if v}
        if writes:
            extra.append(f"file writes {writes}")
        if row.get("client_resends"):
            extra.append(f"resent on a connection the server had closed "
                         f"{row['client_resends']}")
        if row["error_kinds"]:
            extra.append(f"errors {row['error_kinds']}")
        print(f"- {row['scenario']}: " + "; ".join(extra))
    if res.get("service_log_problems"):
        print(f"\nservice log problems: {res['service_log_problems']}")


if __name__ == "__main__":
    sys.exit(main())
