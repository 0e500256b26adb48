"""Soak test: mixed traffic against ``featurebudget serve --workers 2`` on Redis for minutes,
sampling the memory of every server process, the learners' lag and the errors.

Two online models (``soak_sofs``: SOFS, d = 10,000, B = 100, index/value examples;
``soak_hashed``: PET over 2^16 hashed named features) and ``soak_copy`` (the configuration
of ``soak_sofs``, fed only by restores). Traffic, each stream paced on a fixed schedule from
its own thread (keep-alive clients; connections land on either worker):

* REST ingest: 50-example bodies, JSON / libsvm / FBX1 in turn, to both models;
* stream ingest: 50-example FBX1 entries XADDed to the models' Redis streams;
* predict: one example per request, a fifth of them asking for a prediction id;
* feedback: the true label of every prediction id, a second later;
* snapshots: ``GET /snapshot`` of each model in turn, and every ``--restore-seconds`` a
  ``PUT /snapshot`` of ``soak_sofs``'s state into ``soak_copy`` (only the worker folding
  ``soak_copy`` can restore it: the other answers 503 with ``Retry-After`` and closes the
  connection; the client retries, up to 10 times, on a new connection; counted apart).

Every ``--sample-seconds``: the RSS of the uvicorn supervisor and of each worker (/proc),
the learners' lag per model (entries delivered-not-acknowledged + not yet delivered to the
consumer group, from ``XINFO GROUPS``; and seconds: the age of the oldest entry after the
last applied one), the requests and errors so far. After the traffic stops the models must
drain, and each must have applied exactly the examples that were acknowledged.

Verdicts: RSS flat (each process's RSS at the end within max(``--rss-bound-mib``, 10%) of
its RSS after the warm-up, the first quarter of the run), lag bounded (never more than
``--lag-bound-seconds`` behind), zero errors, nothing lost or applied twice. Writes JSON and
a PNG of the curves (``--plot``; needs matplotlib, ``pip install -e ".[load]"``; without it
the script says so and writes the JSON only) and prints a table. Exit status 1 when a
verdict fails.

    python load_tests/soak.py                 # 3 minutes
    python load_tests/soak.py --minutes 30    # the full run

Redis: db 12 of 127.0.0.1:6379 by default, flushed before and after; the server listens on
the first free port of 18100-18199.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import platform
import queue
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _harness import connect, create, inspect, metrics, start_api  # noqa: E402
from _servers import children_of, pick_port, rss_bytes, service_env  # noqa: E402

from clients import FeaturebudgetClient  # noqa: E402
from service import fbx1  # noqa: E402
from service.storage import redis_keys  # noqa: E402

MODELS = {
    "soak_sofs": {"name": "soak_sofs", "algorithm": "sofs", "n_features": 10_000, "budget": 100},
    "soak_hashed": {"name": "soak_hashed", "algorithm": "pet", "hash_bits": 16, "budget": 100,
                    "params": {"update_on": "hinge"}},
    "soak_copy": {"name": "soak_copy", "algorithm": "sofs", "n_features": 10_000, "budget": 100},
}
FED = ("soak_sofs", "soak_hashed")
BATCH = 50  # examples per ingest request / stream entry
NNZ = 30
WORDS = [f"w{k}" for k in range(5000)]


# ---------------------------------------------------------------------------- data
class Data:
    """Seeded examples labelled by a fixed linear rule, pre-encoded in every form."""

    def __init__(self, seed: int, pool: int = 120) -> None:
        rng = np.random.default_rng(seed)
        d = MODELS["soak_sofs"]["n_features"]
        self.w = rng.standard_normal(d)
        self.word_w = {word: float(rng.standard_normal()) for word in WORDS}
        self.json_sofs, self.libsvm_sofs, self.bin_sofs = [], [], []
        self.json_hashed = []
        for _ in range(pool):
            indices, values, labels = self.rows(rng, BATCH)
            examples = [{"indices": i.tolist(), "values": v.tolist(), "label": int(y)}
                        for i, v, y in zip(indices, values, labels, strict=True)]
            self.json_sofs.append(orjson.dumps({"examples": examples}))
            lines = [" ".join([str(int(y))] + [f"{a + 1}:{b:.6g}" for a, b in zip(i, v,
                                                                                  strict=True)])
                     for i, v, y in zip(indices, values, labels, strict=True)]
            self.libsvm_sofs.append(("\n".join(lines) + "\n").encode())
            indptr = np.arange(0, (BATCH + 1) * NNZ, NNZ)
            self.bin_sofs.append(fbx1.encode_batch(indptr, np.concatenate(indices),
                                                   np.concatenate(values),
                                                   labels.astype(np.int8), value_bytes=4))
            named = []
            for _ in range(BATCH):
                words = rng.choice(WORDS, 8, replace=False)
                score = sum(self.word_w[str(word)] for word in words)
                named.append({"features": {"text": {str(word): 1.0 for word in words}},
                              "label": 1 if score >= 0 else -1})
            self.json_hashed.append(orjson.dumps({"examples": named}))
        self.predict_pool = []
        indices, values, labels = self.rows(rng, pool * 4)
        for i, v, y in zip(indices, values, labels, strict=True):
            self.predict_pool.append(({"indices": i.tolist(), "values": v.tolist()}, int(y)))

    def rows(self, rng, n: int):
        d = len(self.w)
        indices = [np.sort(rng.choice(d, NNZ, replace=False)).astype(np.int32)
                   for _ in range(n)]
        values = [(rng.standard_normal(NNZ) / math.sqrt(NNZ)).astype(np.float32)
                  .astype(np.float64) for _ in range(n)]
        labels = np.array([1 if float(self.w[i] @ v) >= 0 else -1
                           for i, v in zip(indices, values, strict=True)])
        return indices, values, labels


# ---------------------------------------------------------------------------- traffic
class Traffic:
    """The traffic threads and what they count."""

    def __init__(self, url: str, redis_url: str, data: Data, args) -> None:
        self.url, self.redis_url, self.data, self.args = url, redis_url, data, args
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.requests: collections.Counter = collections.Counter()
        self.errors: collections.Counter = collections.Counter()  # (kind, status) -> n
        self.retried: collections.Counter = collections.Counter()
        self.acknowledged = collections.Counter()  # model -> examples acknowledged
        self.error_samples: list[str] = []
        self.pending: queue.Queue = queue.Queue()
        self.threads: list[threading.Thread] = []

    def count(self, kind: str, response: httpx.Response | None, error: str = "") -> bool:
        ok = response is not None and response.status_code < 300
        with self.lock:
            self.requests[kind] += 1
            if not ok:
                status = response.status_code if response is not None else "exception"
                self.errors[f"{kind} {status}"] += 1
                if len(self.error_samples) < 20:
                    text = response.text[:200] if response is not None else error
                    self.error_samples.append(f"{kind} {status}: {text}")
        return ok

    def paced(self, rate: float, step) -> None:
        """Call ``step(k)`` ``rate`` times a second on a fixed schedule until stopped."""
        with httpx.Client(base_url=self.url, timeout=30) as client:
            started, k = time.monotonic(), 0
            while not self.stop.is_set():
                delay = started + k / rate - time.monotonic()
                if delay > 0:
                    self.stop.wait(delay)
                    if self.stop.is_set():
                        break
                try:
                    step(client, k)
                except httpx.HTTPError as exc:
                    self.count(step.__name__, None, f"{type(exc).__name__}: {exc}")
                k += 1

    def start(self) -> None:
        args, data = self.args, self.data

        def ingest(client, k):
            model = FED[k % 2]
            if model == "soak_hashed":
                body, media = data.json_hashed[k % len(data.json_hashed)], "application/json"
            else:
                form = (k // 2) % 3
                pool = (data.json_sofs, data.libsvm_sofs, data.bin_sofs)[form]
                body = pool[(k // 6) % len(pool)]
                media = ("application/json", "text/plain", "application/octet-stream")[form]
            response = client.post(f"/v1/models/{model}/examples", content=body,
                                   headers={"content-type": media})
            if self.count("ingest", response):
                with self.lock:
                    self.acknowledged[model] += response.json()["accepted"]

        def stream(_client, k):
            import redis

            if not hasattr(stream, "r"):
                stream.r = redis.Redis.from_url(self.redis_url)
            try:
                stream.r.xadd(redis_keys.log_key("soak_sofs"),
                              {b"fmt": b"bin", b"data": data.bin_sofs[k % len(data.bin_sofs)]})
            except redis.RedisError as exc:
                self.count("stream", None, f"{type(exc).__name__}: {exc}")
                return
            with self.lock:
                self.requests["stream"] += 1
                self.acknowledged["soak_sofs"] += BATCH

        def predict(client, k):
            example, label = data.predict_pool[k % len(data.predict_pool)]
            with_ids = k % 5 == 0
            response = client.post("/v1/models/soak_sofs/predict", content=orjson.dumps(
                {"examples": [example], "return_prediction_ids": with_ids}),
                headers={"content-type": "application/json"})
            if self.count("predict", response) and with_ids:
                self.pending.put((time.monotonic() + 1.0,
                                  response.json()["prediction_ids"][0], label))

        def feedback(client, _k):
            while not self.stop.is_set():
                try:
                    due, prediction_id, label = self.pending.get(timeout=0.2)
                except queue.Empty:
                    continue
                self.stop.wait(max(0.0, due - time.monotonic()))
                response = client.post("/v1/models/soak_sofs/feedback",
                                       json={"prediction_id": prediction_id, "label": label})
                if self.count("feedback", response):
                    with self.lock:
                        self.acknowledged["soak_sofs"] += 1

        def snapshot(client, k):
            model = FED[k % 2]
            self.count("snapshot_get", client.get(f"/v1/models/{model}/snapshot"))
            if k % max(1, round(args.restore_seconds / args.snapshot_seconds)) == 0 and k:
                blob = client.get("/v1/models/soak_sofs/snapshot").content
                for attempt in range(10):  # a 503 closes the connection: the retry may
                    response = client.put("/v1/models/soak_copy/snapshot", content=blob)
                    if response.status_code != 503 or attempt == 9:  # reach the other worker
                        break
                    with self.lock:
                        self.retried["snapshot_put 503"] += 1
                    self.stop.wait(float(response.headers.get("retry-after", "1")))
                self.count("snapshot_put", response)

        ingest.__name__, stream.__name__, predict.__name__ = "ingest", "stream", "predict"
        feedback.__name__, snapshot.__name__ = "feedback", "snapshot_get"
        for step, rate in ((ingest, args.ingest_rate), (stream, args.stream_rate),
                           (predict, args.predict_rate), (feedback, 1.0),
                           (snapshot, 1.0 / args.snapshot_seconds)):
            if step is feedback:
                thread = threading.Thread(target=self._feedback_loop, args=(feedback,))
            else:
                thread = threading.Thread(target=self.paced, args=(rate, step))
            thread.daemon = True
            thread.start()
            self.threads.append(thread)

    def _feedback_loop(self, feedback) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as client:
            try:
                feedback(client, 0)
            except httpx.HTTPError as exc:
                self.count("feedback", None, str(exc))

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)


# ---------------------------------------------------------------------------- sampling
def processes(root: int) -> dict[int, str]:
    """pid -> role of the serve process tree (supervisor, workers, helpers)."""
    out = {root: "supervisor"}
    frontier = [root]
    while frontier:
        pid = frontier.pop()
        for child in children_of(pid):
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            out[child] = "worker" if b"spawn_main" in cmdline else "helper"
            frontier.append(child)
    return out


def lag(r, model: str) -> tuple[int, float]:
    """(entries not yet applied, seconds the oldest of them has waited)."""
    key = redis_keys.log_key(model)
    entries = 0
    try:
        for group in r.xinfo_groups(key):
            if group["name"] in (redis_keys.CONSUMER_GROUP, redis_keys.CONSUMER_GROUP.encode()):
                entries = int(group.get("lag") or 0) + int(group.get("pending") or 0)
    except Exception:  # noqa: BLE001 - no stream / group yet
        return 0, 0.0
    applied = r.get(redis_keys.applied_key(model))
    start = f"({applied.decode()}" if applied else "-"
    oldest = r.xrange(key, min=start, max="+", count=1)
    if not oldest:
        return entries, 0.0
    ms = int(oldest[0][0].decode().split("-")[0])
    return entries, max(0.0, time.time() - ms / 1000)


def sample(server_pid: int, r, traffic: Traffic, started: float) -> dict:
    rss = {}
    for pid, role in sorted(processes(server_pid).items()):
        value = rss_bytes(pid)
        if value is not None:
            rss[f"{role} {pid}"] = value
    with traffic.lock:
        requests = sum(traffic.requests.values())
        errors = sum(traffic.errors.values())
    lags = {model: lag(r, model) for model in FED}
    return {"t": time.monotonic() - started, "rss": rss, "requests": requests,
            "errors": errors, "lag_entries": {m: v[0] for m, v in lags.items()},
            "lag_seconds": {m: v[1] for m, v in lags.items()}}


def drain(client: FeaturebudgetClient, timeout: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        infos = {m: inspect(client, m) for m in FED}
        if all(i["log_end"] is not None and i["log_position"] == i["log_end"]
               for i in infos.values()) or time.monotonic() > deadline:
            return infos
        time.sleep(0.2)


# ---------------------------------------------------------------------------- report
def verdicts(results: dict, args) -> dict:
    samples = results["samples"]
    warm = [s for s in samples if s["t"] >= results["seconds"] / 4]
    warm_start = warm[0] if warm else samples[0]
    end = samples[-1]
    rss = {}
    for name in end["rss"]:
        if name not in warm_start["rss"]:
            continue
        start_mib, end_mib = warm_start["rss"][name] / 2**20, end["rss"][name] / 2**20
        points = [(s["t"], s["rss"][name] / 2**20) for s in warm if name in s["rss"]]
        slope = float(np.polyfit([p[0] for p in points], [p[1] for p in points], 1)[0] * 60) \
            if len(points) > 2 else 0.0
        bound = max(args.rss_bound_mib, 0.10 * start_mib)
        rss[name] = {"after_warmup_mib": start_mib, "end_mib": end_mib,
                     "peak_mib": max(s["rss"].get(name, 0) for s in samples) / 2**20,
                     "growth_mib": end_mib - start_mib, "bound_mib": bound,
                     "slope_mib_per_min": slope, "flat": end_mib - start_mib <= bound}
    max_lag = max((max(s["lag_seconds"].values()) for s in samples), default=0.0)
    max_entries = max((max(s["lag_entries"].values()) for s in samples), default=0)
    lost = {m: {"acknowledged": results["acknowledged"].get(m, 0),
                "applied": results["final"][m]["examples_applied"]} for m in FED}
    return {
        "rss_flat": all(row["flat"] for row in rss.values()) and bool(rss),
        "rss": rss,
        "lag_bounded": max_lag <= args.lag_bound_seconds and results["drained"],
        "max_lag_seconds": max_lag, "max_lag_entries": max_entries,
        "lag_bound_seconds": args.lag_bound_seconds,
        "zero_errors": results["errors_total"] == 0,
        "exactly_once": all(v["acknowledged"] == v["applied"] for v in lost.values()),
        "examples": lost,
    }


def plot(results: dict, path: Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ("matplotlib is not installed (pip install -e \".[load]\"): JSON only, "
                "no plot")
    samples = results["samples"]
    t = [s["t"] / 60 for s in samples]
    figure, (top, middle, bottom) = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    for name in sorted({n for s in samples for n in s["rss"]}):
        top.plot(t, [s["rss"].get(name, math.nan) / 2**20 for s in samples], label=name)
    top.set_ylabel("RSS (MiB)")
    top.legend(fontsize=7)
    top.set_title(f"soak: {results['minutes']:g} min, serve --workers 2 on Redis")
    for model in FED:
        middle.plot(t, [s["lag_seconds"][model] for s in samples], label=f"{model} (s)")
    middle.set_ylabel("lag (s behind)")
    twin = middle.twinx()
    for model in FED:
        twin.plot(t, [s["lag_entries"][model] for s in samples], linestyle=":",
                  label=f"{model} (entries)")
    twin.set_ylabel("lag (entries)")
    middle.legend(fontsize=7, loc="upper left")
    twin.legend(fontsize=7, loc="upper right")
    during = [s for s in samples if not s.get("after_drain")]
    rates = [0.0] + [(b["requests"] - a["requests"]) / max(1e-9, b["t"] - a["t"])
                     for a, b in zip(during, during[1:], strict=False)]
    bottom.plot(t[:len(rates)], rates, label="requests/s (during the traffic)")
    bottom.plot(t, [s["errors"] for s in samples], label="errors (cumulative)")
    bottom.set_ylabel("requests/s, errors")
    bottom.set_xlabel("minutes")
    bottom.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return None


def print_report(results: dict) -> None:
    v = results["verdicts"]
    yes = {True: "yes", False: "NO"}
    print(f"\nsoak: {results['minutes']:g} min of traffic, serve --workers 2 on Redis "
          f"({results['redis_url']}), {results['requests_total']:,} requests, "
          f"{results['errors_total']} errors\n")
    print("| traffic | requests | errors |")
    print("| --- | ---: | ---: |")
    for kind, n in sorted(results["requests"].items()):
        errors = sum(c for k, c in results["errors"].items() if k.startswith(kind + " "))
        print(f"| {kind} | {n:,} | {errors} |")
    print("\n| process | RSS after warm-up MiB | end MiB | peak MiB | growth MiB | bound MiB "
          "| slope MiB/min | flat |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | :---: |")
    for name, row in v["rss"].items():
        print(f"| {name} | {row['after_warmup_mib']:.1f} | {row['end_mib']:.1f} | "
              f"{row['peak_mib']:.1f} | {row['growth_mib']:+.1f} | {row['bound_mib']:.1f} | "
              f"{row['slope_mib_per_min']:+.2f} | {yes[row['flat']]} |")
    print("\n| verdict | value | met |")
    print("| --- | --- | :---: |")
    print(f"| RSS flat (growth after warm-up <= bound) | see above | {yes[v['rss_flat']]} |")
    print(f"| lag bounded (<= {v['lag_bound_seconds']:g} s, drained at the end) | max "
          f"{v['max_lag_seconds']:.2f} s, {v['max_lag_entries']} entries | "
          f"{yes[v['lag_bounded']]} |")
    print(f"| zero errors | {results['errors_total']} | {yes[v['zero_errors']]} |")
    applied = ", ".join(f"{m} {e['applied']:,} of {e['acknowledged']:,}"
                        for m, e in v["examples"].items())
    print(f"| applied = acknowledged | {applied} | {yes[v['exactly_once']]} |")
    if results["retried"]:
        print(f"\nretried as answered (503 Retry-After): {dict(results['retried'])}")
    for line in results["error_samples"]:
        print(f"  error: {line}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/12")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--ingest-rate", type=float, default=10.0, help="REST bodies/s")
    parser.add_argument("--stream-rate", type=float, default=10.0, help="stream entries/s")
    parser.add_argument("--predict-rate", type=float, default=40.0)
    parser.add_argument("--snapshot-seconds", type=float, default=2.0)
    parser.add_argument("--restore-seconds", type=float, default=20.0)
    parser.add_argument("--sample-seconds", type=float, default=5.0)
    parser.add_argument("--rss-bound-mib", type=float, default=32.0)
    parser.add_argument("--lag-bound-seconds", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(ROOT / "load_tests" / "soak_results.json"))
    parser.add_argument("--plot", default=str(ROOT / "load_tests" / "soak.png"))
    args = parser.parse_args(argv)

    import redis

    r = redis.Redis.from_url(args.redis_url)
    r.flushdb()
    random.seed(args.seed)
    data = Data(args.seed)
    work = Path(tempfile.mkdtemp(prefix="fb-soak-"))
    env = service_env(redis_url=args.redis_url, data_dir=work / "data",
                      snapshot_every_seconds=10)
    server = None
    results: dict = {"minutes": args.minutes, "workers": args.workers,
                     "redis_url": args.redis_url, "rates": {
                         "ingest_bodies_per_s": args.ingest_rate, "examples_per_body": BATCH,
                         "stream_entries_per_s": args.stream_rate,
                         "predict_per_s": args.predict_rate,
                         "snapshot_get_every_s": args.snapshot_seconds,
                         "snapshot_put_every_s": args.restore_seconds},
                     "machine": {"python": platform.python_version()}}
    code = 1
    try:
        server = start_api(pick_port(18100, 18199), env, work, workers=args.workers)
        results["startup_seconds"] = server.startup_seconds
        with connect(server.url) as client:
            for body in MODELS.values():
                create(client, body)
            traffic = Traffic(server.url, args.redis_url, data, args)
            started = time.monotonic()
            traffic.start()
            samples = []
            deadline = started + 60 * args.minutes
            while time.monotonic() < deadline:
                time.sleep(min(args.sample_seconds, max(0.0, deadline - time.monotonic())))
                samples.append(sample(server.pid, r, traffic, started))
                last = samples[-1]
                print(f"{last['t']:6.0f} s  requests {last['requests']:,}  errors "
                      f"{last['errors']}  lag {max(last['lag_seconds'].values()):.2f} s  RSS "
                      f"{', '.join(f'{v / 2**20:.0f}' for v in last['rss'].values())} MiB",
                      file=sys.stderr)
            traffic.finish()
            seconds = time.monotonic() - started
            final = drain(client)
            results["drained"] = all(i["log_position"] == i["log_end"] for i in final.values())
            samples.append({**sample(server.pid, r, traffic, started), "after_drain": True})
            metrics_text = metrics(server.url)
        results.update(
            seconds=seconds, samples=samples, final=final,
            requests=dict(traffic.requests), requests_total=sum(traffic.requests.values()),
            errors=dict(traffic.errors), errors_total=sum(traffic.errors.values()),
            retried=dict(traffic.retried), error_samples=traffic.error_samples,
            acknowledged=dict(traffic.acknowledged),
            deadletters={m: r.xlen(redis_keys.deadletter_key(m)) for m in FED},
            metrics_lines=[line for line in metrics_text.splitlines()
                           if line.startswith(("featurebudget_examples_applied_total",
                                               "featurebudget_examples_ingested_total"))])
        results["verdicts"] = verdicts(results, args)
        code = 0 if all(results["verdicts"][k] for k in ("rss_flat", "lag_bounded",
                                                          "zero_errors", "exactly_once")) else 1
    finally:
        if server is not None:
            results["server_exit_code"] = server.stop(timeout=60)
        r.flushdb()
    note = plot(results, Path(args.plot))
    if note:
        print(note, file=sys.stderr)
        results["plot"] = None
    else:
        results["plot"] = str(args.plot)
    print_report(results)
    Path(args.out).write_text(json.dumps(results, indent=1))
    print(f"\nwrote {args.out}" + ("" if note else f" and {args.plot}"), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
