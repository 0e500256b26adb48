"""Per-example ``POST /next`` latency under an open-loop load, embedded and Redis backends.

One ``featurebudget serve`` per backend (embedded: data dir under /tmp; Redis: ``--redis``,
flushed first) with a ``gbfs`` classifier of 16 named groups (4 features each, costs 1..4)
trained on ``--rows`` seeded synthetic rows, a fifth of them held out: with the default
25,000 rows the version keeps 5,000 held-out rows, the per-example policy's window. The
first per-example request starts the policy's build; the script polls until it is built
and reports how long that took (``build_s``, as the service measured it from outside).

The load: one example per request, its computed set drawn (seeded) from 0..8 of the 16
groups, with ``max_cost`` / ``exchange_rate`` varied, 400 distinct bodies; request ``k`` is
sent at ``t0 + k / rate`` whatever the answers (open loop) by an asyncio client on raw
HTTP/1.1 streams (``RawPool`` of ``predict_latency.py``, up to 64 keep-alive connections),
after one unmeasured closed-loop pass over the bodies (the version's per-set figures that
the fallback reads are computed then).
Latency = answer time - scheduled send time, so queueing anywhere shows; the generator's
own lag (send time - scheduled time) is reported beside it. Then the floor: ``GET
/healthz`` at the same rate. Prints a markdown table and writes JSON::

    python load_tests/next_latency.py                      # both backends, 500/s, 10 s
    python load_tests/next_latency.py --backend local --seconds 5 --rows 10000

Only loopback. Never imported by ``tests/``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import platform
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "load_tests"))

from _harness import connect, create, start_api, wait_job, wait_served  # noqa: E402
from _proc import cpu_seconds  # noqa: E402
from _servers import service_env  # noqa: E402
from predict_latency import RawPool  # noqa: E402

MODEL = "next_gbfs"
N_GROUPS, PER_GROUP = 16, 4
TARGET_P99_MS = 2.0


def groups() -> list[dict]:
    return [{"name": f"g{g}", "features": [f"f{g}_{k}" for k in range(PER_GROUP)],
             "cost": float(1 + g % 4)} for g in range(N_GROUPS)]


def data(n: int, seed: int):
    """A context feature (g0's first) says which block, g1 or g2, carries the label; the
    other groups add a little (the per-example policy's gate keeps it on these rows)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, N_GROUPS * PER_GROUP))
    w = 0.1 * rng.standard_normal(X.shape[1])
    s = np.where(X[:, 0] > 0, X[:, 4:8].sum(axis=1), X[:, 8:12].sum(axis=1)) + X[:, 16:] @ w[16:]
    y = np.where(s + 0.3 * rng.standard_normal(n) > 0, 1, -1)
    return X, y


def example(row, keep) -> dict:
    return {"features": {f"g{g}": {f"f{g}_{k}": round(float(row[g * PER_GROUP + k]), 6)
                                   for k in range(PER_GROUP)} for g in keep}}


def bodies(count: int, seed: int) -> list[bytes]:
    import orjson

    X, _ = data(count, seed + 1)
    rng = random.Random(seed)
    out = []
    for i in range(count):
        keep = sorted(rng.sample(range(N_GROUPS), rng.randint(0, 8)))
        body = {"examples": [example(X[i], keep)]}
        if not keep:
            body["computed_groups"] = []
        if i % 3 == 1:
            body["max_cost"] = 20.0
        if i % 4 == 2:
            body["exchange_rate"] = 0.005
        out.append(orjson.dumps(body))
    return out


# =========================================================================== load
async def open_loop(url: str, path: str, rate: float, count: int, payloads,
                    server_pid: int | None = None) -> dict:
    pool = RawPool(url, 64, 10.0)
    await asyncio.gather(*[pool.request("GET", "/healthz", None) for _ in range(16)],
                         return_exceptions=True)
    method = "GET" if payloads is None else "POST"
    latency, lag = [math.nan] * count, [math.nan] * count
    errors: dict[str, int] = {}
    policies: dict[str, int] = {}
    tasks = []

    async def one(k: int, scheduled: float) -> None:
        lag[k] = time.perf_counter() - scheduled
        body = None if payloads is None else payloads[k % len(payloads)]
        try:
            code, content = await pool.request(method, path, body)
        except Exception as exc:  # noqa: BLE001 (counted, the load goes on)
            errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
            return
        latency[k] = time.perf_counter() - scheduled
        if code != 200:
            errors[str(code)] = errors.get(str(code), 0) + 1
        elif payloads is not None:
            answer = json.loads(content)["answers"][0]
            kind = answer["policy"] + (" (building)" if answer["policy_building"] else "")
            policies[kind] = policies.get(kind, 0) + 1

    t0 = time.perf_counter() + 0.05
    cpu0 = cpu_seconds(server_pid)
    for k in range(count):
        scheduled = t0 + k / rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(one(k, scheduled)))
    await asyncio.gather(*tasks)
    end = time.perf_counter()
    server_cpu = cpu_seconds(server_pid) - cpu0
    await pool.close()
    done = sorted(v * 1e3 for v in latency if not math.isnan(v))
    lags = sorted(v * 1e3 for v in lag)

    def pct(values, q):
        return values[min(len(values) - 1, int(q * len(values)))] if values else math.nan

    return {"sent": count, "answered": len(done), "errors": errors, "policies": policies,
            "achieved_rate_per_s": len(done) / (end - t0), "p50_ms": pct(done, 0.5),
            "p99_ms": pct(done, 0.99), "p999_ms": pct(done, 0.999),
            "max_ms": done[-1] if done else math.nan, "send_lag_p99_ms": pct(lags, 0.99),
            "send_lag_max_ms": lags[-1] if lags else math.nan,
            "server_cpu_ms_per_request": 1e3 * server_cpu / count}


# ======================================================================= set-up
def prepare(url: str, rows: int) -> dict:
    """Create, load and train the model; start the policy's build and wait for it."""
    client = connect(url, timeout=600)
    spec = {"name": MODEL, "algorithm": "gbfs", "task": "classification",
            "groups": groups(), "params": {"n_estimators": 100, "max_depth": 3,
                                           "window": {"kind": "newest", "size": rows},
                                           "retrain_every_examples": None,
                                           "retrain_every_seconds": None}}
    create(client, spec)
    X, y = data(rows, 0)
    every = list(range(N_GROUPS))
    for start in range(0, rows, 2000):
        chunk = [{**example(X[i], every), "label": int(y[i])}
                 for i in range(start, min(rows, start + 2000))]
        client.post_examples(MODEL, chunk, wait=True)
    started = time.monotonic()
    job = wait_job(client, MODEL, client.retrain(MODEL).id, timeout=600, poll=0.5)
    if job["status"] != "succeeded":
        raise RuntimeError(f"retrain: {job}")
    fit_s = time.monotonic() - started
    wait_served(client, MODEL, job["version"], timeout=600, poll=0.05)
    probe = [example(X[0], [0])]
    started = time.monotonic()
    while True:
        answer = client.next_groups(MODEL, probe)[0]
        if not answer["policy_building"]:
            break
        time.sleep(0.1)
    build_s = time.monotonic() - started
    client.close()
    return {"fit_s": fit_s, "build_s": build_s, "policy": answer["policy"],
            "version": job["version"], "validation_examples": job.get("validation_examples")}


def warm_up(url: str, path: str, payloads) -> dict:
    """One closed-loop pass over the bodies (each sent when the last is answered): the
    version's caches (figures of the sets the per-set fallback reads) fill; its times."""
    import httpx

    times = []
    with httpx.Client(base_url=url, timeout=600,
                      headers={"content-type": "application/json"}) as client:
        for body in payloads:
            started = time.perf_counter()
            response = client.post(path, content=body)
            times.append(time.perf_counter() - started)
            if response.status_code != 200:
                raise RuntimeError(f"warm-up: {response.status_code} {response.text[:300]}")
    times.sort()
    return {"requests": len(times), "p50_ms": 1e3 * times[len(times) // 2],
            "max_ms": 1e3 * times[-1], "total_s": sum(times)}


def run_backend(backend: str, args) -> dict:
    import redis

    work = Path(tempfile.mkdtemp(prefix="next-latency-"))
    redis_url = args.redis if backend == "redis" else None
    if redis_url:
        redis.Redis.from_url(redis_url).flushdb()
    env = service_env(redis_url=redis_url, data_dir=work / "data", batch_worker="true")
    try:
        server = start_api(args.port, env, work)  # (started and ready)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    try:
        setup = prepare(server.url, args.rows)
        count = int(args.rate * args.seconds)
        payloads = bodies(400, 7)
        path = f"/v1/models/{MODEL}/next"
        setup["warm_up"] = warm_up(server.url, path, payloads)
        pid = server.pid
        rows = {"next, 1 example": asyncio.run(open_loop(server.url, path, args.rate, count,
                                                         payloads, pid)),
                "healthz (floor)": asyncio.run(open_loop(server.url, "/healthz", args.rate,
                                                         count, None, pid))}
    finally:
        server.stop()
        if server.process.poll() is None:  # (not gone after SIGTERM and the wait)
            server.kill()
        shutil.rmtree(work, ignore_errors=True)
        if redis_url:
            redis.Redis.from_url(redis_url).flushdb()
    return {"backend": backend, "setup": setup, "rows": rows}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("local", "redis", "both"), default="both")
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rows", type=int, default=25_000)
    parser.add_argument("--port", type=int, default=18420)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/7")
    parser.add_argument("--out", default=str(ROOT / "load_tests" / "next_latency.json"))
    args = parser.parse_args(argv)
    backends = ("local", "redis") if args.backend == "both" else (args.backend,)
    results = {"rate_per_s": args.rate, "seconds": args.seconds, "rows": args.rows,
               "machine": {"cpus": __import__("os").cpu_count(),
                           "python": platform.python_version()},
               "runs": [run_backend(b, args) for b in backends]}
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"\nPer-example POST /next, one example per request, open loop at "
          f"{args.rate:g}/s for {args.seconds:g} s, gbfs 16 groups; latency = answer - "
          f"scheduled send (ms); p99 target < {TARGET_P99_MS:g} ms.\n")
    print("| backend | scenario | sent | answered | errors | p50 | p99 | p99.9 | max | "
          "generator lag p99 / max | server CPU ms / request | policy (build s) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for run in results["runs"]:
        for label, r in run["rows"].items():
            print(f"| {run['backend']} | {label} | {r['sent']} | {r['answered']} | "
                  f"{sum(r['errors'].values())} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
                  f"{r['p999_ms']:.2f} | {r['max_ms']:.1f} | {r['send_lag_p99_ms']:.2f} / "
                  f"{r['send_lag_max_ms']:.1f} | {r['server_cpu_ms_per_request']:.2f} | "
                  f"{run['setup']['policy']} "
                  f"({run['setup']['build_s']:.1f}) |")
    print(f"\nwrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
