"""Capacity: what one ``featurebudget serve`` process carries, and 1 -> 2 -> 3 processes.

Real ``featurebudget serve`` processes on one Redis database (``--redis-url``, default
``redis://127.0.0.1:6379/7``, flushed before and after; db 15 is refused), loopback ports
18100-18199, default settings except snapshots every 20,000 examples or 5 s per model
(which bounds the logs the service keeps in Redis: a log is trimmed at its latest
snapshot). Placement is checked before every measurement: every model folded by exactly
one process, the one placement names (``service.placement.place`` over the members in
Redis) and the one holding its lease.

First the big model alone: one process, then a second and a third join (placement moves
nothing: one model, one folding process). Then the small models are created and measured
with the three processes, then after stopping one (its models move to the others), then
with one. Last, the big model once more, in the one process that now also holds the idle
small models. Per process count:

1. **idle**: the servers' CPU with every model created and nothing to do.
   The big model's measurements (3, 4 on it, ``GET /healthz``) come from the first part,
   the small models' (1, 2, 4 on them) from the second.
2. **many small models**: ``--small-models`` models (default 100; SOFS B = 20 and OGD in
   turn, d = 1,000, 20 non-zeros per example, X1-style data) fed by one loader process
   that XADDs binary entries (FBX1 of 100 examples, float32 values, the entries
   ``clients.StreamProducer`` writes) to every model's stream, keeping each stream
   ``--backlog`` entries ahead of its fold (it reads the ``applied`` keys, one MGET per
   round): the fold never waits for input and Redis never holds more than that. Rate =
   the growth of the models' ``examples_applied`` (inspect, ``GET /v1/models`` on every
   process; per model the highest) over the window, after a warm-up. Also per process: the
   models it folds (``owner`` in inspect), the ones placement names for it (the members in
   Redis through ``service.placement.place``) and the lease holders, and its share of the
   rate.
3. **one big model**: SOFS d = 20,000, B = 200, X1 data (600 non-zeros per example), 500
   examples per entry; the same loader and window. One model is folded by one process
   (the single writer): more processes do not make it faster.
4. **predicts**: a closed loop of ``--connections`` (default 12) keep-alive connections in
   total, spread evenly over the processes (as a load balancer would), one example per
   request, each connection sending its next request when the answer came: once over the
   small models (request k -> model k mod M, 20 non-zeros) and once to the big model (600
   non-zeros). Rate = answers per second; p50 / p99 latency. Processes that do not fold a
   model answer from its serving view (a token check in Redis per request). The same loop
   over ``GET /healthz`` (no work) is the floor of HTTP and the load generator.

After each ingest window the loader stops and the script waits until every model has
applied every example written to it (exactly once: the counts must be equal at the end).

Besides: the bare ``partial_fit`` rate of both configurations (one thread, this process)
and Redis alone: pipelined XADD of entries of the two sizes from Python (redis-py), and
``redis-benchmark`` XADD of a small entry's size, when installed. CPU (cores, from /proc,
sampled every 0.1 s) in every window: the servers, the load generator (loader or
predictor), redis-server (shared with whatever else uses it), this script and the rest of
the machine; the load generator's share of the busy CPU is what the measurement itself
took from the cores the servers had. Prints markdown tables (and the rows of the README's
table) and writes JSON::

    python load_tests/capacity.py            # full: 3 processes, ~6 minutes; capacity.json
    python load_tests/capacity.py --quick    # smoke: 2 processes, 20 models, ~1 minute
    python load_tests/capacity.py --redis-url redis://127.0.0.1:6379/7 --out /tmp/c.json

Only loopback. Never imported by ``tests/``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import math
import os
import pickle
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from _harness import connect, create, start_api  # noqa: E402
from _proc import cpu_seconds, machine_busy_seconds  # noqa: E402
from _proc import run_role as run_async_role  # noqa: E402
from _servers import Child, pick_port, service_env  # noqa: E402

from clients import FeaturebudgetClient  # noqa: E402

REDIS_URL = "redis://127.0.0.1:6379/7"
PORTS = (18100, 18199)
SMALL_D, SMALL_INFORMATIVE, SMALL_NOISE, SMALL_BUDGET = 1000, 10, 10, 20
SMALL_ROWS = 100  # examples per small entry
BIG_D, BIG_BUDGET, BIG_ROWS = 20_000, 200, 500
BIG_MODEL = "cap_big"
SETTINGS = {"snapshot_every_examples": 20_000, "snapshot_every_seconds": 5}


STARTED = time.monotonic()


def say(message: str) -> None:
    """Progress on stderr, with the seconds since the start."""
    print(f"[{time.monotonic() - STARTED:4.0f} s] {message}", file=sys.stderr, flush=True)


def small_name(i: int) -> str:
    return f"cap_s{i:03d}"


# ============================================================================ /proc
def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


class Sampler:
    """A thread that samples, every 0.1 s, the machine's busy CPU and the CPU of named
    processes (the set may change); :meth:`cores` gives the cores used between two
    wall-clock times."""

    def __init__(self) -> None:
        self.pids: dict[str, int] = {}
        self.samples: list[tuple[float, float, dict[str, float]]] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def watch(self, **pids: int | None) -> None:
        with self._lock:
            for name, pid in pids.items():
                if pid:
                    self.pids[name] = pid
                else:
                    self.pids.pop(name, None)

    def _sample(self) -> None:
        with self._lock:
            pids = dict(self.pids)
        self.samples.append((time.time(), machine_busy_seconds(),
                             {name: cpu_seconds(pid) for name, pid in pids.items()}))
        if len(self.samples) > 20_000:
            del self.samples[:10_000]

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self._sample()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def cores(self, t_a: float, t_b: float) -> dict[str, float]:
        """Cores busy per watched name between the samples nearest ``t_a`` and ``t_b``;
        ``machine``: all of it, ``others``: the machine less the watched processes."""
        self._sample()
        samples = list(self.samples)
        a = min(samples, key=lambda s: abs(s[0] - t_a))
        b = min(samples, key=lambda s: abs(s[0] - t_b))
        span = b[0] - a[0]
        if span <= 0:
            return {}
        out = {"machine": (b[1] - a[1]) / span}
        for name in b[2].keys() | a[2].keys():
            # the samples nearest the window that have this process (a process that exited
            # just before the window's end is read from its last sample)
            have = [s for s in samples if t_a - 1 <= s[0] <= t_b + 1
                    and not math.isnan(s[2].get(name, math.nan))]
            if not have:
                continue
            sa = min(have, key=lambda s: abs(s[0] - t_a))
            sb = min(have, key=lambda s: abs(s[0] - t_b))
            if sb[0] > sa[0]:
                out[name] = (sb[2][name] - sa[2][name]) / (sb[0] - sa[0])
        out["others"] = out["machine"] - sum(v for k, v in out.items() if k != "machine")
        return {k: round(v, 3) for k, v in out.items()}


# ============================================================================ data
def small_data(n: int, seed: int = 2):
    from algorithms.datasets.online_synthetic import make_x1

    X, y, _ = make_x1(n_samples=n, n_features=SMALL_D, n_informative=SMALL_INFORMATIVE,
                      n_noise=SMALL_NOISE, seed=seed)
    return X, y.astype(int)


def big_data(n: int, seed: int = 1):
    from algorithms.datasets.online_synthetic import make_x1

    X, y, _ = make_x1(n_samples=n, n_features=BIG_D, seed=seed)
    return X, y.astype(int)


def entries(X, y, rows: int) -> list[tuple[bytes, int]]:
    """FBX1 payloads of ``rows`` examples (float32 values, as StreamProducer writes)."""
    from service import fbx1

    out = []
    for start in range(0, X.n_rows - rows + 1, rows):
        part = X.row_slice(start, start + rows)
        out.append((fbx1.encode_batch(part.indptr, part.indices, part.values,
                                      y[start:start + rows], value_bytes=4), rows))
    return out


def predict_bodies(X, count: int) -> list[bytes]:
    import orjson

    out = []
    for row in range(count):
        lo, hi = X.indptr[row], X.indptr[row + 1]
        out.append(orjson.dumps({"examples": [{"indices": X.indices[lo:hi].tolist(),
                                               "values": X.values[lo:hi].tolist()}]}))
    return out


def bare_rate(algorithm: str, X, y, budget: int | None, seconds: float) -> float:
    """Examples/s of one learner's ``partial_fit`` over ``X`` (one thread, repeated passes)."""
    from algorithms.online import LEARNERS

    def make():
        kwargs = {"n_features": X.n_features}
        if budget is not None:
            kwargs["budget"] = budget
        return LEARNERS[algorithm](**kwargs)

    make().partial_fit(X.row_slice(0, min(X.n_rows, 1000)), y[:1000])  # compiled
    done, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        learner = make()
        learner.partial_fit(X, y)
        done += X.n_rows
    return done / (time.perf_counter() - started)


# ============================================================================ loader
def loader_main(spec_path: str, out_path: str) -> int:
    """XADD binary entries to every model's stream, each at most ``backlog`` entries ahead
    of its fold, until SIGTERM or ``max_seconds``."""
    import redis

    from service.storage import id_key, redis_keys

    with open(spec_path, "rb") as fh:
        spec = pickle.load(fh)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    client = redis.Redis.from_url(spec["redis_url"])
    models: list[str] = spec["models"]
    payloads: list[tuple[bytes, int]] = spec["payloads"]
    backlog = int(spec["backlog"])
    keys = [redis_keys.log_key(m) for m in models]
    applied_keys = [redis_keys.applied_key(m) for m in models]
    pending = [collections.deque() for _ in models]  # (id key, rows) not applied yet
    written = [0] * len(models)
    applied = [0] * len(models)
    position = list(range(len(models)))  # models start at different payloads
    samples: list[tuple[float, int, int]] = []
    rounds = idle_rounds = entries_written = 0
    last_sample = 0.0
    deadline = time.monotonic() + float(spec["max_seconds"])
    fields = {b"fmt": b"bin", b"data": b""}
    while not stop.is_set() and time.monotonic() < deadline:
        rounds += 1
        for i, value in enumerate(client.mget(applied_keys)):
            if value is not None:
                at, queue = id_key(value), pending[i]
                while queue and queue[0][0] <= at:
                    applied[i] += queue.popleft()[1]
        pipe = client.pipeline(transaction=False)
        order = []
        for i, queue in enumerate(pending):
            for _ in range(backlog - len(queue)):
                payload, rows = payloads[position[i] % len(payloads)]
                position[i] += 1
                fields[b"data"] = payload
                pipe.xadd(keys[i], dict(fields))
                order.append((i, rows))
        if order:
            for (i, rows), entry_id in zip(order, pipe.execute(), strict=True):
                pending[i].append((id_key(entry_id), rows))
                written[i] += rows
            entries_written += len(order)
        else:
            idle_rounds += 1
            time.sleep(0.002)
        now = time.time()
        if now - last_sample >= 0.1:
            samples.append((now, sum(applied), sum(written), time.process_time()))
            last_sample = now
    client.close()
    out = {"models": models, "written": written, "applied_seen": applied,
           "entries_written": entries_written, "rounds": rounds, "idle_rounds": idle_rounds,
           "samples": samples, "cpu_s": time.process_time()}
    with open(out_path, "wb") as fh:
        pickle.dump(out, fh)
    return 0


# ============================================================================ predictor
async def _predict(spec: dict) -> dict:
    from predict_latency import RawPool

    urls, total = spec["urls"], int(spec["connections"])
    per_url = [total // len(urls) + (1 if j < total % len(urls) else 0)
               for j in range(len(urls))]
    pools = [RawPool(url, size, 10.0) for url, size in zip(urls, per_url, strict=True)]
    requests = spec["requests"]  # (method, path, body)
    assignment = [j for j, size in enumerate(per_url) for _ in range(size)]
    # open the connections before the clock starts
    await asyncio.gather(*[pools[j].request("GET", "/healthz", None) for j in assignment])
    latencies: list[float] = []
    per_url_answers = [0] * len(urls)
    errors: dict[str, int] = {}
    t_start = time.perf_counter() + float(spec["warmup_s"])
    t_end = t_start + float(spec["seconds"])
    clock = {}

    async def connection(c: int) -> None:
        pool, k = pools[assignment[c]], c
        while True:
            started = time.perf_counter()
            if started >= t_end:
                return
            method, path, body = requests[k % len(requests)]
            k += total
            try:
                code, content = await pool.request(method, path, body)
            except Exception as exc:  # noqa: BLE001 - counted
                code, content = -1, f"{type(exc).__name__}: {exc}".encode()
            if started < t_start:
                continue
            if code == 200:
                latencies.append(time.perf_counter() - started)
                per_url_answers[assignment[c]] += 1
            else:
                key = f"{code}: {content[:120].decode(errors='replace')}"
                errors[key] = errors.get(key, 0) + 1

    async def stamps() -> None:
        await asyncio.sleep(max(0.0, t_start - time.perf_counter()))
        clock["start"], clock["cpu_start"] = time.time(), time.process_time()
        await asyncio.sleep(max(0.0, t_end - time.perf_counter()))
        clock["end"], clock["cpu_end"] = time.time(), time.process_time()

    await asyncio.gather(stamps(), *[connection(c) for c in range(total)])
    for pool in pools:
        await pool.close()
    return {"latencies_s": latencies, "answers_per_url": per_url_answers, "errors": errors,
            "connections_per_url": per_url, "seconds": float(spec["seconds"]), **clock}


def predictor_main(spec_path: str, out_path: str) -> int:
    return run_async_role(_predict, spec_path, out_path)


# ============================================================================ harness
def run_role(role: str, spec: dict, work: Path, label: str) -> subprocess.Popen:
    spec_path, out_path = work / f"{label}.spec.pkl", work / f"{label}.out.pkl"
    with open(spec_path, "wb") as fh:
        pickle.dump(spec, fh)
    out_path.unlink(missing_ok=True)
    process = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--role", role,
                                "--spec", str(spec_path), "--result", str(out_path)],
                               cwd=ROOT)
    process.out_path = out_path  # type: ignore[attr-defined]
    return process


def finish(process: subprocess.Popen, label: str, *, terminate: bool,
           timeout: float = 120.0) -> dict:
    if terminate and process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)
        raise RuntimeError(f"{label}: no result within {timeout:.0f} s") from None
    if code != 0:
        raise RuntimeError(f"{label}: exit status {code}")
    with open(process.out_path, "rb") as fh:  # type: ignore[attr-defined]
        return pickle.load(fh)


def member_pid(member: str) -> int | None:
    """The pid in a process id ``host:pid:hex``."""
    parts = member.rsplit(":", 2)
    try:
        return int(parts[1]) if len(parts) == 3 else None
    except ValueError:
        return None


class Cluster:
    """The serve processes on one Redis database, and what they say about the models."""

    def __init__(self, redis_url: str, work: Path, models: list[str]) -> None:
        import redis

        self.redis_url = redis_url
        self.redis = redis.Redis.from_url(redis_url)
        self.work = work
        self.models = models
        self.servers: list[Child] = []
        self.clients: list[FeaturebudgetClient] = []
        self.stopped: list[Child] = []

    def start(self) -> float:
        used = tuple(int(s.url.rsplit(":", 1)[1]) for s in self.servers + self.stopped)
        port = pick_port(*PORTS, skip=used)
        env = service_env(redis_url=self.redis_url, data_dir=self.work / "data", **SETTINGS)
        server = start_api(port, env, self.work, label=f"serve-{len(self.servers) + 1}",
                           timeout=240)
        self.servers.append(server)
        self.clients.append(connect(server.url, timeout=60))
        return server.startup_seconds

    def listing(self) -> list[dict[str, dict]]:
        """Per process: model name -> its inspect (``GET /v1/models``)."""
        out = []
        for client in self.clients:
            out.append({m.name: m.raw for m in client.list_models()})
        return out

    def applied(self, listing: list[dict[str, dict]] | None = None) -> dict[str, int]:
        """Per model, the highest ``examples_applied`` any process reports."""
        listing = listing if listing is not None else self.listing()
        return {m: max(int(p[m]["examples_applied"]) for p in listing if m in p)
                for m in self.models}

    def placement(self, listing: list[dict[str, dict]] | None = None) -> dict:
        """Per process (1-based): models placed on it, folded by it (inspect ``owner``),
        leases it holds; ``converged``: every model folded by exactly one process, the one
        placement names and the lease names."""
        from service.placement import place
        from service.storage import redis_keys

        listing = listing if listing is not None else self.listing()
        members = sorted(m.decode() for m in self.redis.hgetall(redis_keys.members_key("online")))
        placed = place(list(self.models), members)
        holders = self.redis.mget([redis_keys.lease_key(m) for m in self.models])
        index = {s.pid: k for k, s in enumerate(self.servers)}
        n = len(self.servers)
        per = [{"placed": 0, "folding": 0, "leases": 0, "models": []} for _ in range(n)]
        ok = len(members) == n
        for model, holder in zip(self.models, holders, strict=True):
            owners = [k for k, p in enumerate(listing) if p.get(model, {}).get("owner")]
            where = index.get(member_pid(placed.get(model, "")))
            lease = index.get(member_pid(holder.decode())) if holder else None
            if where is not None:
                per[where]["placed"] += 1
            if lease is not None:
                per[lease]["leases"] += 1
            for k in owners:
                per[k]["folding"] += 1
                per[k]["models"].append(model)
            ok = ok and owners == [where] and lease == where
        return {"members": len(members), "per_process": per, "converged": ok}

    def converge(self, timeout: float = 90.0) -> tuple[float, dict]:
        started = time.monotonic()
        while True:
            state = self.placement()
            if state["converged"]:
                return time.monotonic() - started, state
            if time.monotonic() - started > timeout:
                counts = [{k: v for k, v in p.items() if k != "models"}
                          for p in state["per_process"]]
                raise RuntimeError(f"placement did not converge within {timeout:.0f} s: "
                                   f"{counts}")
            time.sleep(0.5)

    def stop_last(self, timeout: float = 60.0) -> dict:
        """SIGTERM the newest process (it hands its models over as it stops; SIGKILL after
        ``timeout``): its exit status and how long it took."""
        server, client = self.servers.pop(), self.clients.pop()
        client.close()
        self.stopped.append(server)
        started = time.monotonic()
        code = server.stop(timeout=timeout)
        return {"exit_code": code, "seconds": round(time.monotonic() - started, 2)}

    def stop(self) -> list[dict]:
        stops = []
        while self.servers:
            stops.append(self.stop_last())
        return stops


def redis_alone(redis_url: str, payloads: list[tuple[bytes, int]], seconds: float,
                sampler: Sampler, redis_pid: int | None) -> dict:
    """Pipelined XADD (16 entries a round trip) of these payloads to a scratch stream,
    capped with an exact MAXLEN (at most ~32 MB held), for ``seconds``."""
    import redis

    client = redis.Redis.from_url(redis_url)
    key = "featurebudget:capacity:redis-alone"
    size = len(payloads[0][0])
    maxlen = max(8, (32 << 20) // size)
    client.delete(key)
    sampler.watch(redis=redis_pid)
    n = entries_done = 0
    t_a, cpu_a = time.time(), time.process_time()
    while time.time() - t_a < seconds:
        pipe = client.pipeline(transaction=False)
        for _ in range(16):
            payload, rows = payloads[n % len(payloads)]
            n += 1
            pipe.xadd(key, {b"fmt": b"bin", b"data": payload}, maxlen=maxlen,
                      approximate=False)
            entries_done += 1
        pipe.execute()
    t_b, cpu_b = time.time(), time.process_time()
    client.delete(key)
    client.close()
    rows = payloads[0][1]
    cores = sampler.cores(t_a, t_b)
    span = t_b - t_a
    return {"entry_bytes": size, "examples_per_entry": rows,
            "entries_per_s": entries_done / span, "examples_per_s": entries_done * rows / span,
            "megabytes_per_s": entries_done * size / span / 1e6,
            "client_cores": (cpu_b - cpu_a) / span, "redis_cores": cores.get("redis"),
            "cores": cores}


def redis_benchmark(redis_url: str, size: int, requests: int) -> dict | None:
    """``redis-benchmark`` XADD of a ``size``-byte field (MAXLEN 1000), pipelined by 16."""
    import shutil

    if shutil.which("redis-benchmark") is None:
        return None
    url = urlparse(redis_url)
    db = (url.path or "/0").strip("/") or "0"
    key = "featurebudget:capacity:redis-benchmark"
    argv = ["redis-benchmark", "-h", url.hostname or "127.0.0.1", "-p", str(url.port or 6379),
            "--dbnum", db, "-n", str(requests), "-c", "4", "-P", "16", "-q",
            "XADD", key, "MAXLEN", "1000", "*", "fmt", "bin", "data", "x" * size]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": str(exc)}
    finally:
        import redis

        with contextlib.suppress(Exception):
            redis.Redis.from_url(redis_url).delete(key)
    text = done.stdout.replace("\r", "\n")
    found = re.findall(r"([\d.]+) requests per second", text)
    if not found:
        return {"error": (done.stdout + done.stderr)[-300:]}
    rate = float(found[-1])
    return {"command": " ".join(argv[:-1]) + f" <{size} bytes>", "entries_per_s": rate,
            "megabytes_per_s": rate * size / 1e6}


def redis_pid_of(client) -> int | None:
    """redis-server's pid, when it runs on this machine (its CPU is read from /proc)."""
    try:
        pid = int(client.info("server")["process_id"])
    except Exception:  # noqa: BLE001
        return None
    return pid if Path(f"/proc/{pid}/stat").exists() else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 2 processes, 20 small models, 2 s windows (~1 minute)")
    parser.add_argument("--out", default=None,
                        help="write the JSON here (default: load_tests/capacity.json, or "
                        "/tmp/capacity-quick.json with --quick)")
    parser.add_argument("--redis-url", default=REDIS_URL,
                        help="a Redis database of this test's own: it is flushed before "
                        f"and after (default {REDIS_URL}; db 15 is the test suite's)")
    parser.add_argument("--processes", type=int, default=None,
                        help="measure 1..N serve processes (default 3, --quick 2)")
    parser.add_argument("--small-models", type=int, default=None,
                        help="models of the many-small-models load (default 100, --quick 20)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="measured window per ingest measurement (default 15, --quick 2)")
    parser.add_argument("--predict-seconds", type=float, default=None,
                        help="measured window per predict measurement (default 8, --quick 1.5)")
    parser.add_argument("--connections", type=int, default=12,
                        help="closed-loop predict connections in total, spread over the "
                        "processes (default 12)")
    parser.add_argument("--backlog", type=int, default=8,
                        help="entries the loader keeps unapplied per stream (default 8)")
    parser.add_argument("--role", choices=("loader", "predictor"), help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role == "loader":
        return loader_main(args.spec, args.result)
    if args.role == "predictor":
        return predictor_main(args.spec, args.result)

    url = urlparse(args.redis_url)
    db = (url.path or "").strip("/")
    if url.scheme not in ("redis", "rediss") or not db.isdigit():
        parser.error("--redis-url must be redis://host:port/<db> with an explicit database")
    if int(db) == 15:
        parser.error("db 15 is the test suite's; give this test a database of its own")
    quick = args.quick
    n_processes = args.processes or (2 if quick else 3)
    n_small = args.small_models or (20 if quick else 100)
    seconds = args.seconds or (2.0 if quick else 15.0)
    predict_seconds = args.predict_seconds or (1.5 if quick else 8.0)
    warmup = 0.6 if quick else 3.0
    idle_seconds = 0.5 if quick else 3.0
    out_path = Path(args.out) if args.out else (
        Path("/tmp/capacity-quick.json") if quick else HERE / "capacity.json")
    if not (1 <= n_processes <= 8 and 1 <= n_small <= 1000):
        parser.error("--processes must be in 1..8 and --small-models in 1..1000")

    import numpy as np
    import redis

    wall = time.monotonic()
    results: dict = {
        "mode": "quick" if quick else "full",
        "command": "python load_tests/capacity.py" + (" --quick" if quick else ""),
        "started_at": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
        "load_average_before": loadavg(),
        "uptime_before": subprocess.run(["uptime"], capture_output=True,
                                        text=True).stdout.strip(),
        "redis_url": args.redis_url, "settings": {f"FEATUREBUDGET_{k.upper()}": v
                                                  for k, v in SETTINGS.items()},
        "small": {"models": n_small, "algorithms": ["sofs", "ogd"], "n_features": SMALL_D,
                  "budget_sofs": SMALL_BUDGET, "nnz_per_example": SMALL_INFORMATIVE +
                  SMALL_NOISE, "examples_per_entry": SMALL_ROWS},
        "big": {"model": BIG_MODEL, "algorithm": "sofs", "n_features": BIG_D,
                "budget": BIG_BUDGET, "nnz_per_example": 600, "examples_per_entry": BIG_ROWS},
        "windows": {"ingest_s": seconds, "ingest_warmup_s": warmup,
                    "predict_s": predict_seconds, "idle_s": idle_seconds,
                    "connections": args.connections, "backlog_entries": args.backlog},
        "runs": []}
    say("preparing data ...")
    Xs, ys = small_data(5000 if quick else 20_000)
    Xb, yb = big_data(4000 if quick else 10_000)
    small_entries = entries(Xs, ys, SMALL_ROWS)
    big_entries = entries(Xb, yb, BIG_ROWS)
    small_predicts = predict_bodies(Xs, 500)
    big_predicts = predict_bodies(Xb, 200)
    results["small"]["entry_bytes"] = len(small_entries[0][0])
    results["big"]["entry_bytes"] = len(big_entries[0][0])
    bare_s = 0.3 if quick else 2.0
    results["bare_partial_fit_examples_per_s"] = {
        "small sofs": bare_rate("sofs", Xs, ys, SMALL_BUDGET, bare_s),
        "small ogd": bare_rate("ogd", Xs, ys, None, bare_s),
        "big sofs": bare_rate("sofs", Xb, yb, BIG_BUDGET, bare_s)}
    del Xb

    control = redis.Redis.from_url(args.redis_url)
    control.flushdb()
    redis_pid = redis_pid_of(control)
    sampler = Sampler()
    sampler.watch(harness=os.getpid(), redis=redis_pid)
    say("Redis alone ...")
    results["redis_alone"] = {
        "small entries, redis-py": redis_alone(args.redis_url, small_entries,
                                               0.5 if quick else 3.0, sampler, redis_pid),
        "big entries, redis-py": redis_alone(args.redis_url, big_entries,
                                             0.5 if quick else 3.0, sampler, redis_pid),
        "small entries, redis-benchmark": redis_benchmark(
            args.redis_url, len(small_entries[0][0]), 5000 if quick else 50_000)}

    work = Path(tempfile.mkdtemp(prefix="fb-capacity-", dir="/tmp"))
    smalls = [small_name(i) for i in range(n_small)]
    cluster = Cluster(args.redis_url, work, [BIG_MODEL])
    written_total = dict.fromkeys([*smalls, BIG_MODEL], 0)
    running: list[subprocess.Popen] = []

    def server_pids() -> dict[str, int | None]:
        pids: dict[str, int | None] = {f"serve-{k + 1}": None for k in range(n_processes)}
        pids.update({f"serve-{k + 1}": s.pid for k, s in enumerate(cluster.servers)})
        return pids

    def summarize_cores(cores: dict, generator: float | None = None) -> dict:
        if generator is not None:  # the generator's own count (exact), not /proc samples
            cores = dict(cores, generator=round(generator, 3))
            cores["others"] = round(cores["machine"] - sum(
                v for k, v in cores.items() if k not in ("machine", "others")), 3)
        servers = sum(v for k, v in cores.items() if k.startswith("serve-"))
        busy = cores.get("machine") or math.nan
        gen = cores.get("generator", 0.0)
        return {"servers": round(servers, 3), "generator": gen,
                "redis": cores.get("redis"), "harness": cores.get("harness"),
                "others": cores.get("others"), "machine": busy,
                "generator_share_of_busy": round(gen / busy, 3) if busy else None,
                "per_process": cores}

    def drain(label: str, timeout: float = 90.0) -> dict:
        """Wait until every model applied every example written to it."""
        started = time.monotonic()
        while True:
            applied = cluster.applied()
            behind = {m: written_total[m] - applied[m] for m in cluster.models
                      if applied[m] != written_total[m]}
            if not behind:
                return {"seconds": round(time.monotonic() - started, 2), "exact": True}
            if any(v < 0 for v in behind.values()):
                return {"seconds": round(time.monotonic() - started, 2), "exact": False,
                        "applied_minus_written": {m: -v for m, v in behind.items()}}
            if time.monotonic() - started > timeout:
                say(f"  {label}: NOT drained within {timeout:.0f} s: "
                    f"{dict(list(behind.items())[:10])}")
                return {"seconds": round(time.monotonic() - started, 2), "exact": False,
                        "timed_out": True, "behind": behind}
            time.sleep(0.2)

    def ingest(label: str, names: list[str], payloads: list[tuple[bytes, int]]) -> dict:
        say(f"  {label} ...")
        loader = run_role("loader", {"redis_url": args.redis_url, "models": names,
                                     "payloads": payloads, "backlog": args.backlog,
                                     "max_seconds": warmup + seconds + 60},
                          work, f"loader-{label}")
        running.append(loader)
        sampler.watch(generator=loader.pid, **server_pids())
        time.sleep(warmup)
        t_a, listing_a = time.time(), cluster.listing()  # GET /v1/models, every process
        listing_s = [time.time() - t_a]
        t_a += listing_s[0] / 2
        time.sleep(seconds)
        t_b, listing_b = time.time(), cluster.listing()
        listing_s.append(time.time() - t_b)
        t_b += listing_s[1] / 2
        result = finish(loader, label, terminate=True)
        running.remove(loader)
        samples = result["samples"]  # (time, applied seen, written, loader CPU seconds)
        s_a = min(samples, key=lambda s: abs(s[0] - t_a))
        s_b = min(samples, key=lambda s: abs(s[0] - t_b))
        own = (s_b[3] - s_a[3]) / (s_b[0] - s_a[0]) if s_b[0] > s_a[0] else None
        cores = summarize_cores(sampler.cores(t_a, t_b), own)
        sampler.watch(generator=None)
        for name, rows in zip(result["models"], result["written"], strict=True):
            written_total[name] += rows
        drained = drain(label)
        span = t_b - t_a
        a, b = cluster.applied(listing_a), cluster.applied(listing_b)
        total = sum(b[m] - a[m] for m in names)
        per_process = []
        for listing in listing_b:
            mine = [m for m in names if listing.get(m, {}).get("owner")]
            per_process.append({"models": len(mine),
                                "examples_per_s": sum(b[m] - a[m] for m in mine) / span})
        loader_rate = (s_b[1] - s_a[1]) / (s_b[0] - s_a[0]) if s_b[0] > s_a[0] else math.nan
        models_moving = sum(b[m] > a[m] for m in names)
        row = {"examples_per_s": total / span, "window_s": span,
               "loader_seen_applied_per_s": loader_rate, "models": len(names),
               "models_applying_in_window": models_moving, "per_process": per_process,
               "entries_written": result["entries_written"],
               "loader_idle_rounds": result["idle_rounds"], "drain": drained,
               "listing_s": [round(x, 3) for x in listing_s], "cores": cores}
        redis_cores = cores.get("redis")
        if redis_cores and total:
            row["redis_cpu_us_per_example"] = 1e6 * redis_cores * span / total
        say(f"    {row['examples_per_s']:,.0f} examples/s applied ({models_moving}/"
            f"{len(names)} models moving); cores: servers {cores['servers']:.2f}, "
            f"loader {cores['generator']:.2f}, redis {redis_cores}, others "
            f"{cores['others']}")
        return row

    def predicts(label: str, requests: list[tuple[str, str, bytes | None]]) -> dict:
        say(f"  {label} ...")
        gen = run_role("predictor", {"urls": [s.url for s in cluster.servers],
                                     "connections": args.connections, "requests": requests,
                                     "warmup_s": warmup / 2, "seconds": predict_seconds},
                       work, f"predictor-{label}")
        running.append(gen)
        sampler.watch(generator=gen.pid, **server_pids())
        result = finish(gen, label, terminate=False, timeout=predict_seconds + 120)
        running.remove(gen)
        span = result["end"] - result["start"]
        own = (result["cpu_end"] - result["cpu_start"]) / span
        cores = summarize_cores(sampler.cores(result["start"], result["end"]), own)
        sampler.watch(generator=None)
        lat = np.asarray(result["latencies_s"]) * 1e3
        row = {"predicts_per_s": len(lat) / span, "window_s": span,
               "p50_ms": float(np.percentile(lat, 50)) if len(lat) else math.nan,
               "p99_ms": float(np.percentile(lat, 99)) if len(lat) else math.nan,
               "max_ms": float(lat.max()) if len(lat) else math.nan,
               "errors": sum(result["errors"].values()), "error_kinds": result["errors"],
               "answers_per_process_per_s": [x / span for x in result["answers_per_url"]],
               "connections_per_process": result["connections_per_url"],
               "generator_cpu_ms_per_request": 1e3 * own * span / max(1, len(lat)),
               "loop": result["loop"], "cores": cores}
        say(f"    {row['predicts_per_s']:,.0f} /s, p50 {row['p50_ms']:.2f} ms, p99 "
            f"{row['p99_ms']:.2f} ms, errors {row['errors']}; cores: servers "
            f"{cores['servers']:.2f}, generator {cores['generator']:.2f}, others "
            f"{cores['others']}")
        return row

    def placed(run: dict) -> None:
        run["converge_s"], state = cluster.converge()
        run["placement"] = [{"placed": p["placed"], "folding": p["folding"],
                             "leases": p["leases"], "folds_big_model": BIG_MODEL in p["models"]}
                            for p in state["per_process"]]
        run["all_folded_as_placed"] = state["converged"]
        say(f"  placement converged in {run['converge_s']:.1f} s: models folded per "
            f"process {[p['folding'] for p in run['placement']]}")

    small_requests = [("POST", f"/v1/models/{smalls[k % n_small]}/predict",
                       small_predicts[k % len(small_predicts)]) for k in range(max(500, n_small))]
    big_requests = [("POST", f"/v1/models/{BIG_MODEL}/predict", body) for body in big_predicts]
    floor_requests = [("GET", "/healthz", None)]
    by_n: dict[int, dict] = {}
    try:
        # 1. one big model, the only model: 1 -> N processes (joins)
        for n in range(1, n_processes + 1):
            say(f"{n} process{'es' if n > 1 else ''}: starting serve-{n} ...")
            run: dict = {"processes": n, "startup_s": cluster.start()}
            if n == 1:
                cluster.clients[0].create_model(
                    BIG_MODEL, algorithm="sofs", n_features=BIG_D, budget=BIG_BUDGET)
            run["big_alone"] = {}
            placed(run["big_alone"])
            run["big"] = ingest(f"big-{n}", [BIG_MODEL], big_entries)
            run["predict_big"] = predicts(f"predict-big-{n}", big_requests)
            run["healthz"] = predicts(f"healthz-{n}", floor_requests)
            by_n[n] = run
        # 2. the small models too: N -> 1 processes (each stop hands its models over)
        client = cluster.clients[0]
        for i, name in enumerate(smalls):
            body = {"name": name, "algorithm": "sofs" if i % 2 == 0 else "ogd",
                    "n_features": SMALL_D}
            if i % 2 == 0:
                body["budget"] = SMALL_BUDGET
            create(client, body)
        cluster.models = sorted([*smalls, BIG_MODEL])
        for n in range(n_processes, 0, -1):
            if len(cluster.servers) > n:
                say(f"{n} process{'es' if n > 1 else ''}: stopping serve-{n + 1} ...")
                by_n[n]["stop_of_next"] = stop = cluster.stop_last()
                say(f"  serve-{n + 1} stopped in {stop['seconds']:.1f} s (exit status "
                    f"{stop['exit_code']})")
            else:
                say(f"{n} process{'es' if n > 1 else ''}: {n_small} small models ...")
            run = by_n[n]
            placed(run)
            sampler.watch(**server_pids())
            t_a = time.time()
            time.sleep(idle_seconds)
            run["idle_cores"] = summarize_cores(sampler.cores(t_a, time.time()))
            run["small"] = ingest(f"small-{n}", smalls, small_entries)
            run["predict_small"] = predicts(f"predict-small-{n}", small_requests)
            run["all_folded_as_placed_after"] = cluster.placement()["converged"]
        # 3. the big model again, now among the idle small models (one process)
        say(f"1 process: the big model among {n_small} idle models ...")
        results["big_among_idle"] = ingest("big-among-idle", [BIG_MODEL], big_entries)
        results["runs"] = [by_n[n] for n in sorted(by_n)]
        final = cluster.applied()
        results["exactly_once"] = {
            "examples_written": sum(written_total.values()),
            "examples_applied": sum(final.values()),
            "models_equal": sum(final[m] == written_total[m] for m in cluster.models),
            "models": len(cluster.models)}
    except BaseException as exc:
        for server in cluster.stopped + cluster.servers:
            print(f"--- {server.label} (log {server.log_path}) ---\n{server.tail()}",
                  file=sys.stderr)
        results["error"] = repr(exc)
        results["runs"] = [by_n[n] for n in sorted(by_n)]
        with contextlib.suppress(Exception):  # what was measured, for the post-mortem
            out_path.with_suffix(".failed.json").write_text(
                json.dumps(results, indent=1, default=float))
        raise
    finally:
        for process in running:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)
        results["final_stops"] = cluster.stop()
        problems: dict[str, int] = {}  # "serve-k: line" -> how many times
        for server in cluster.stopped:
            text = server.log_path.read_text(errors="replace") if server.log_path else ""
            for line in text.splitlines():
                if any(w in line for w in ("ERROR", "CRITICAL", "Traceback", "refused",
                                           "failed")):
                    key = f"{server.label}: {line.strip()[:200]}"
                    problems[key] = problems.get(key, 0) + 1
        results["service_log_problems"] = problems
        sampler.stop()
        with contextlib.suppress(Exception):
            control.flushdb()
        results["work_dir"] = str(work)
    results["load_average_after"] = loadavg()
    results["uptime_after"] = subprocess.run(["uptime"], capture_output=True,
                                             text=True).stdout.strip()
    results["wall_seconds"] = time.monotonic() - wall
    results["on_paper"] = on_paper(results)
    print_tables(results)
    out_path.write_text(json.dumps(results, indent=1, default=float))
    print(f"\nwrote {out_path} ({results['wall_seconds']:.0f} s; logs in {work})",
          file=sys.stderr)
    return 0


def on_paper(res: dict) -> dict:
    """The figures the README's cluster arithmetic uses: one process's rate over many
    models, one model's rate (its single writer), and Redis's CPU per example folded (from
    the fastest window of each kind: the one least diluted by constant overheads)."""
    runs = res["runs"]
    small = max(runs, key=lambda r: r["small"]["examples_per_s"])["small"]
    big = max(runs, key=lambda r: r["big"]["examples_per_s"])["big"]
    redis_small = small.get("redis_cpu_us_per_example")
    redis_big = big.get("redis_cpu_us_per_example")
    return {
        "per_process_small_examples_per_s": runs[0]["small"]["examples_per_s"],
        "best_small_examples_per_s": small["examples_per_s"],
        "one_model_examples_per_s": big["examples_per_s"],
        "redis_cpu_us_per_example_small": redis_small,
        "redis_cpu_us_per_example_big": redis_big,
        # a shard is one redis-server thread: one core at the Redis cost per example seen
        "per_shard_examples_per_s_small": 1e6 / redis_small if redis_small else None,
        "per_shard_examples_per_s_big": 1e6 / redis_big if redis_big else None,
    }


def _k(x: float) -> str:
    return f"{x / 1000:,.0f}k" if x >= 10_000 else f"{x:,.0f}"


def print_tables(res: dict) -> None:
    cpus = res["machine"]["cpus"]
    small, big = res["small"], res["big"]
    print(f"\nCapacity on {cpus} cores ({res['mode']}; load average before "
          f"{res['load_average_before']}, after {res['load_average_after']}). Small models: "
          f"{small['models']} x SOFS B = {small['budget_sofs']} / OGD, d = "
          f"{small['n_features']:,}, {small['nnz_per_example']} non-zeros, "
          f"{small['examples_per_entry']} examples per entry. Big model: SOFS d = "
          f"{big['n_features']:,}, B = {big['budget']}, {big['nnz_per_example']} non-zeros, "
          f"{big['examples_per_entry']} per entry. Predicts: closed loop, "
          f"{res['windows']['connections']} connections over the processes, one example per "
          "request.\n")
    print("| processes | small models: examples/s | models folded per process (examples/s) | "
          "big model: examples/s (folded by) | predicts/s small (p50 / p99 ms) | predicts/s "
          "big (p50 / p99 ms) | GET /healthz/s (floor) |")
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for run in res["runs"]:
        ps, pb, hz = run["predict_small"], run["predict_big"], run["healthz"]
        folded = " / ".join(f"{p['folding']} ({_k(q['examples_per_s'])})" for p, q in
                            zip(run["placement"], run["small"]["per_process"], strict=True))
        where = [k + 1 for k, p in enumerate(run["big_alone"]["placement"])
                 if p["folds_big_model"]]
        print(f"| {run['processes']} | {run['small']['examples_per_s']:,.0f} | {folded}"
              f"{'' if run['all_folded_as_placed'] else ' (NOT as placed)'} | "
              f"{run['big']['examples_per_s']:,.0f} (process {where}) | "
              f"{ps['predicts_per_s']:,.0f} ({ps['p50_ms']:.1f} / {ps['p99_ms']:.1f}) | "
              f"{pb['predicts_per_s']:,.0f} ({pb['p50_ms']:.1f} / {pb['p99_ms']:.1f}) | "
              f"{hz['predicts_per_s']:,.0f} |")
    print("\nCPU in each window, cores of the machine's "
          f"{cpus}: servers (per process) / load generator / redis-server / everything else; "
          "the generator's share of the busy CPU.\n")
    print("| processes | measurement | servers | per process | generator | redis | others | "
          "generator share |")
    print("| ---: | --- | ---: | --- | ---: | ---: | ---: | ---: |")
    for run in res["runs"]:
        c = run["idle_cores"]
        print(f"| {run['processes']} | idle ({res['small']['models'] + 1} models) | "
              f"{c['servers']:.2f} | | - | {c['redis']} | {c['others']} | - |")
        for key, label in (("small", "small models ingest"), ("big", "big model ingest"),
                           ("predict_small", "predict small"), ("predict_big", "predict big"),
                           ("healthz", "GET /healthz")):
            c = run[key]["cores"]
            per = " / ".join(f"{c['per_process'].get(f'serve-{k + 1}', math.nan):.2f}"
                             for k in range(run["processes"]))
            share = c["generator_share_of_busy"]
            print(f"| {run['processes']} | {label} | {c['servers']:.2f} | {per} | "
                  f"{c['generator']:.2f} | {c['redis'] if c['redis'] is not None else '-'} | "
                  f"{c['others']} | " + (f"{share:.0%} |" if share is not None else "- |"))
    among = res.get("big_among_idle")
    if among:
        c = among["cores"]
        print(f"\nThe big model again, 1 process, among the {res['small']['models']} small "
              f"models (idle): {among['examples_per_s']:,.0f} examples/s (servers "
              f"{c['servers']:.2f} cores, loader {c['generator']:.2f}, others {c['others']}); "
              f"alone with 1 process: {res['runs'][0]['big']['examples_per_s']:,.0f}.")
    print("\nRedis alone (pipelined XADD, exact MAXLEN; the shared redis-server):")
    for label, r in res["redis_alone"].items():
        if r is None or "error" in r:
            print(f"- {label}: {r}")
            continue
        extra = (f", client {r['client_cores']:.2f} / redis {r['redis_cores']} cores"
                 if "client_cores" in r else "")
        examples = (f" = {r['examples_per_s']:,.0f} examples/s" if "examples_per_s" in r
                    else "")
        print(f"- {label}: {r['entries_per_s']:,.0f} entries/s{examples}, "
              f"{r['megabytes_per_s']:,.0f} MB/s{extra}")
    bare = res["bare_partial_fit_examples_per_s"]
    print("- bare partial_fit, one thread: " + ", ".join(f"{k} {v:,.0f}/s"
                                                         for k, v in bare.items()))
    paper = res["on_paper"]
    print(f"- Redis CPU per example folded (fastest window): small "
          f"{paper['redis_cpu_us_per_example_small'] or math.nan:.2f} us, big "
          f"{paper['redis_cpu_us_per_example_big'] or math.nan:.2f} us -> one shard (one core) "
          f"~{paper['per_shard_examples_per_s_small'] or math.nan:,.0f} / "
          f"{paper['per_shard_examples_per_s_big'] or math.nan:,.0f} examples/s")
    once = res.get("exactly_once")
    if once:
        print(f"- every model applied exactly what was written to it: "
              f"{once['models_equal']}/{once['models']} models, "
              f"{once['examples_applied']:,} of {once['examples_written']:,} examples")
    stops = [(r["processes"] + 1, r["stop_of_next"]) for r in res["runs"]
             if "stop_of_next" in r]
    if stops:
        print("- SIGTERM of a process that folds models, until it exited: " + ", ".join(
            f"serve-{k} {x['seconds']:.1f} s (exit status {x['exit_code']})" for k, x in stops))
    for run in res["runs"]:
        for key in ("small", "big"):
            drained = run.get(key, {}).get("drain", {})
            if drained and not drained.get("exact"):
                print(f"- {run['processes']} processes, {key}: not drained: {drained}")
    if res.get("service_log_problems"):
        print("- service log lines (count):")
        for line, count in list(res["service_log_problems"].items())[:12]:
            print(f"  - {count} x {line}")
    print("\nREADME rows (processes | small models examples/s | big model examples/s | "
          "predicts/s small / big | load generator's share of the busy CPU):\n")
    for run in res["runs"]:
        shares = [run[k]["cores"]["generator_share_of_busy"] for k in
                  ("small", "big", "predict_small")]
        print(f"| {run['processes']} | {run['small']['examples_per_s']:,.0f} | "
              f"{run['big']['examples_per_s']:,.0f} | "
              f"{run['predict_small']['predicts_per_s']:,.0f} / "
              f"{run['predict_big']['predicts_per_s']:,.0f} | "
              + " / ".join(f"{x:.0%}" if x is not None else "-" for x in shares) + " |")


if __name__ == "__main__":
    sys.exit(main())
