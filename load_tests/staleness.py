"""Read-your-writes across API processes: how soon every process answers from new examples.

Two ``featurebudget serve`` processes (ports 18840, 18841) on one Redis (db 10), a SOFS
model (n_features 20,000, budget 200; X1 data, 600 non-zeros per example). A writer posts
100-example JSON batches to one process at ``--rate`` batches per second (without
``?wait``); two watchers, one per process, ask ``GET /v1/models/m`` back to back and note
when each process first reports a ``log_position`` at or after each batch's log id.

Per process it reports the time from the post's acknowledgement to that process answering
from a state that includes the batch (p50 / p99 / max: this includes the fold's own apply
time), the server-side ``featurebudget_read_staleness_seconds`` histogram of the process
that does not fold the model (apply -> that process serving it), and the latency of
``?wait=true`` posts on each process (what read-your-writes costs a writer). It also
checks read-your-writes itself: after every ``?wait=true`` post, both processes are asked
at once and each must already report the batch (violations are counted).

    python load_tests/staleness.py              # 20 s of writes at 20 batches/s
    python load_tests/staleness.py --quick      # 5 s

Prints a markdown table and writes JSON (``--out``, default load_tests/staleness.json).
Only loopback; uses Redis db 10 (flushed at the start).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "load_tests"))

from _harness import connect, inspect, metrics, start_api  # noqa: E402
from _servers import pick_port, service_env  # noqa: E402

from algorithms.datasets.online_synthetic import make_x1  # noqa: E402
from service.storage import id_key  # noqa: E402

REDIS_URL = "redis://127.0.0.1:6379/10"
BATCH = 100


def examples(X, y, start: int, stop: int) -> list[dict]:
    out = []
    for row in range(start, stop):
        lo, hi = X.indptr[row], X.indptr[row + 1]
        out.append({"indices": X.indices[lo:hi].tolist(), "values": X.values[lo:hi].tolist(),
                    "label": int(y[row])})
    return out


def quantiles(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    ms = sorted(v * 1e3 for v in values)
    pick = lambda q: ms[min(len(ms) - 1, int(q * len(ms)))]  # noqa: E731
    return {"n": len(ms), "p50_ms": pick(0.5), "p99_ms": pick(0.99), "max_ms": ms[-1],
            "mean_ms": statistics.fmean(ms)}


def histogram(text: str, name: str, model: str) -> dict[float, float]:
    buckets = {}
    for line in text.splitlines():
        if line.startswith(f"{name}_bucket{{") and f'model="{model}"' in line:
            le = line.split('le="')[1].split('"')[0]
            buckets[float("inf") if le == "+Inf" else float(le)] = float(line.rsplit(" ", 1)[1])
    return buckets


def histogram_quantile(buckets: dict[float, float], q: float) -> float | None:
    """Upper bound of the bucket holding the q-quantile (what the histogram can say)."""
    if not buckets:
        return None
    total = max(buckets.values())
    for le in sorted(buckets):
        if buckets[le] >= q * total:
            return le
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--rate", type=float, default=20.0, help="batches per second")
    parser.add_argument("--out", default=str(ROOT / "load_tests" / "staleness.json"))
    args = parser.parse_args(argv)
    seconds = args.seconds or (5.0 if args.quick else 20.0)

    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()
    n_batches = int(seconds * args.rate)
    X, y, _ = make_x1(n_samples=2000 + (n_batches + max(10, n_batches // 4)) * BATCH, seed=7)
    work = Path(tempfile.mkdtemp(prefix="featurebudget-staleness-"))
    env = service_env(redis_url=REDIS_URL, lease_seconds=5)
    ports = [pick_port(18840, 18849)]
    ports.append(pick_port(18840, 18849, skip=tuple(ports)))
    servers = []
    try:
        for k, port in enumerate(ports):
            servers.append(start_api(port, env, work, label=f"api{k}"))
        control = [connect(s.url) for s in servers]
        clients = [c.http for c in control]  # the timed posts and reads stay raw
        control[0].create_model("m", algorithm="sofs", budget=200, n_features=X.n_features)
        for _ in range(3):  # both processes know the model and a first view exists
            control[1].post_examples("m", examples(X, y, 0, 10), wait=True)
        owner = [inspect(c, "m")["owner"] for c in control].index(True)
        writer = clients[1 - owner]  # post to the process that does not fold

        posted: list[tuple[tuple[int, int], float]] = []  # (log id, ack time)
        seen: list[dict[int, float]] = [{}, {}]  # per process: batch number -> first seen
        stop = threading.Event()

        def watch(k: int) -> None:
            with httpx.Client(base_url=servers[k].url, timeout=30) as client:
                while not stop.is_set():
                    position = client.get("/v1/models/m").json()["log_position"]
                    now = time.perf_counter()
                    key = id_key(position) if position else (-1, -1)
                    for number, (log_id, _) in enumerate(list(posted)):
                        if number not in seen[k] and key >= log_id:
                            seen[k][number] = now

        watchers = [threading.Thread(target=watch, args=(k,)) for k in range(2)]
        for thread in watchers:
            thread.start()
        row = 2000
        started = time.perf_counter()
        for number in range(n_batches):
            due = started + number / args.rate
            time.sleep(max(0.0, due - time.perf_counter()))
            answer = writer.post("/v1/models/m/examples",
                                 json={"examples": examples(X, y, row, row + BATCH)}).json()
            posted.append((id_key(answer["log_ids"][-1]), time.perf_counter()))
            row += BATCH
        deadline = time.perf_counter() + 30
        while time.perf_counter() < deadline and min(len(s) for s in seen) < n_batches:
            time.sleep(0.05)
        stop.set()
        for thread in watchers:
            thread.join()
        visible = [[seen[k][n] - posted[n][1] for n in seen[k]] for k in range(2)]

        # read-your-writes: ?wait=true on either process, then both asked at once
        waits: list[list[float]] = [[], []]
        violations = 0
        checks = 0
        for number in range(max(10, n_batches // 4)):
            k = number % 2
            t0 = time.perf_counter()
            answer = clients[k].post("/v1/models/m/examples?wait=true",
                                     json={"examples": examples(X, y, row, row + BATCH)})
            waits[k].append(time.perf_counter() - t0)
            target = id_key(answer.json()["log_ids"][-1])
            row += BATCH
            for client in clients:
                position = client.get("/v1/models/m").json()["log_position"]
                checks += 1
                violations += id_key(position) < target
        buckets = histogram(metrics(servers[1 - owner].url),
                            "featurebudget_read_staleness_seconds", "m")
        for client in control:
            client.close()
    finally:
        for server in servers:
            server.stop()

    roles = ["owner" if k == owner else "other" for k in range(2)]
    rows = []
    for k in range(2):
        rows.append({"process": roles[k], "measure": "post ack -> answers from it",
                     **quantiles(visible[k]), "missing": n_batches - len(visible[k])})
    for k in range(2):
        rows.append({"process": roles[k], "measure": "?wait=true post latency",
                     **quantiles(waits[k])})
    p50 = histogram_quantile(buckets, 0.5)
    p99 = histogram_quantile(buckets, 0.99)
    result = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
        "seconds": seconds, "rate_batches_per_s": args.rate, "examples_per_batch": BATCH,
        "rows": rows, "read_your_writes": {"checks": checks, "violations": violations},
        "server_staleness_other_process": {
            "count": max(buckets.values()) if buckets else 0,
            "p50_le_s": p50, "p99_le_s": p99},
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print("| process | measure | n | p50 ms | p99 ms | max ms |\n|---|---|---:|---:|---:|---:|")
    for r in rows:
        if r["n"]:
            print(f"| {r['process']} | {r['measure']} | {r['n']} | {r['p50_ms']:.2f} | "
                  f"{r['p99_ms']:.2f} | {r['max_ms']:.2f} |")
    print(f"\nread-your-writes: {violations} violations in {checks} reads right after "
          f"?wait=true; server histogram (apply -> other process serving): p50 <= {p50} s, "
          f"p99 <= {p99} s")
    print(f"wrote {args.out}")
    return 0 if violations == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
