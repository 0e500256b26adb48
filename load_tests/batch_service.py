"""Batch-model load test: fold throughput, retrain time, publish latency across API processes.

Three measurements, each on seeded synthetic regression data whose features come in groups
of 10 (every example carries every group: the training data of an anytime model):

1. **Fold throughput** for D = 10, 100, 1000 features, log entries of 100 examples:

   * *in-process*: :meth:`BatchFoldState.apply_entry` over the entries (FBX1-decoded
     ``CSRBatch`` in, train / held-out split, two statistics updates) in examples/s, as a
     fraction of the floor, :meth:`SufficientStatistics.update` alone on the same per-entry
     batches, prepared beforehand as scipy CSR and as dense arrays, one update per entry,
     whichever form is faster: the same work minus the service. Passes alternate (floor,
     fold, floor, fold, ...); medians.
   * *end to end on Redis*: FBX1 entries (``targets=True``) XADDed to the model's log, a
     ``featurebudget worker`` process folds them; examples/s from the first fold the worker
     reports to the last (its ``featurebudget:{m}:status`` key, polled every 5 ms), and from
     the first XADD to the last example applied.

2. **Retrain time** for D = 2,000 features in 200 groups: ``AnytimeLinearModel(method=...)
   .fit_statistics`` on the statistics of the data (training part, with the held-out part
   as validation, split exactly as the service splits it), median of 3, for cs-g-omp and
   cs-g-fr; and the same data through the service (log -> worker fold -> ``POST /retrain``),
   the job's ``duration_seconds`` (fit + artifact + publish), median of 3.

3. **Publish latency**: two ``featurebudget serve`` processes on Redis plus one worker, a
   cs-g-omp model of 10 groups / 100 features; 20 times ``POST /retrain`` on API A, then
   both APIs polled (``GET /v1/models/{m}`` every 5 ms) until both serve the new version:
   time from the POST to the moment the second one does (p50, p99, max), next to the
   job's own queue wait and duration, so the notification part is visible. Meanwhile a
   client predicts at a fixed rate, alternating between the APIs: requests, errors and
   version regressions (a version lower than one the same API answered before).

Only loopback; servers on ports 18800-18801; the Redis db (13 by default) is flushed before
and after. Prints markdown tables and writes JSON::

    python load_tests/batch_service.py --out load_tests/batch_results.json
    python load_tests/batch_service.py --quick      # ~2 minutes, smaller sizes
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import _servers  # noqa: E402
from _harness import connect, create, wait_job, wait_served  # noqa: E402
from _servers import Child, wait_ready  # noqa: E402

from algorithms.anytime import AnytimeLinearModel, SufficientStatistics  # noqa: E402
from algorithms.sparse import CSRBatch  # noqa: E402
from clients import FeaturebudgetClient  # noqa: E402
from service import fbx1 as codec  # noqa: E402
from service.batch.spec import BatchLayout, split_params  # noqa: E402
from service.batch.worker.fold_state import BatchFoldState, held_out  # noqa: E402
from service.schemas import ModelCreate  # noqa: E402
from service.storage import redis_keys  # noqa: E402

ROWS = 100  # examples per log entry
GROUP_SIZE = 10
VALIDATION_FRACTION = 0.2  # the service's default
NO_POLICY = {"retrain_every_examples": None, "retrain_every_seconds": None}
PORTS = (18800, 18801)

# per D: (entries of the in-process passes, alternating rounds, entries sent end to end)
FOLD_SIZES = {"full": {10: (4000, 3, 20000), 100: (1000, 3, 4000), 1000: (25, 3, 100)},
              "quick": {10: (500, 2, 1500), 100: (250, 2, 750), 1000: (8, 2, 25)}}
RETRAIN = {"full": {"examples": 4000, "repeats": 3}, "quick": {"examples": 600, "repeats": 3}}
PUBLISH = {"full": {"examples": 2000, "publishes": 20}, "quick": {"examples": 1000,
                                                                  "publishes": 10}}


# ---------------------------------------------------------------------------- data
def group_specs(n_groups: int, costs=None) -> list[dict]:
    return [{"name": f"g{g}", "features": [f"g{g}_f{k}" for k in range(GROUP_SIZE)],
             "cost": 1.0 if costs is None else float(costs[g])} for g in range(n_groups)]


def grouped_data(n: int, D: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Correlated design: a latent factor per group (and one shared), sparse true weights."""
    rng = np.random.default_rng(seed)
    G = D // GROUP_SIZE
    latent = rng.standard_normal((n, G)) + 0.3 * rng.standard_normal((n, 1))
    X = 0.7 * np.repeat(latent, GROUP_SIZE, axis=1) + 0.7 * rng.standard_normal((n, D))
    w = 0.1 * rng.standard_normal(D) * (rng.random(D) < 0.2)
    y = X @ w + rng.standard_normal(n)
    return X, y


def entries_of(X: np.ndarray, y: np.ndarray) -> list[tuple[sp.csr_matrix, np.ndarray]]:
    return [(sp.csr_matrix(X[k:k + ROWS]), y[k:k + ROWS].copy())
            for k in range(0, len(y), ROWS)]


def fbx1(matrix: sp.csr_matrix, y: np.ndarray) -> bytes:
    return codec.encode_batch(matrix.indptr, matrix.indices, matrix.data, y, targets=True)


def spec_body(name: str, algorithm: str, groups: list[dict]) -> dict:
    return {"name": name, "algorithm": algorithm, "groups": groups, "params": dict(NO_POLICY)}


def percentile(values, q) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q))


# ---------------------------------------------------------------------------- processes
def child_env(redis_url: str, data_dir: str) -> dict:
    return _servers.service_env(redis_url=redis_url, data_dir=data_dir)


def start_api(port: int, env: dict, log_dir: str) -> Child:
    return _servers.serve(port, env, log_dir)


def start_worker(env: dict, log_dir: str) -> Child:
    return _servers.worker(env, log_dir)


def status_of(r, model: str) -> dict | None:
    raw = r.get(redis_keys.status_key(model))
    return json.loads(raw) if raw else None


def wait_owned(r, model: str, worker: Child, timeout: float = 240.0) -> None:
    """Until the worker process holds the model (it publishes the fold's status then)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = status_of(r, model)
        if status and str(status.get("owner", "")).endswith(":worker"):
            return
        if not worker.alive():
            raise RuntimeError(f"worker exited ({worker.process.returncode}):\n{worker.tail()}")
        time.sleep(0.05)
    raise RuntimeError(f"the worker did not take model {model!r} within {timeout} s:\n"
                       f"{worker.tail()}")


def create_model(client: FeaturebudgetClient, body: dict) -> None:
    create(client, body, replace=True)


def append(r, model: str, payloads: list[bytes], ids: list[str] | None = None) -> list[str]:
    key, out = redis_keys.log_key(model), []
    for k in range(0, len(payloads), 32):
        pipe = r.pipeline(transaction=False)
        for j, data in enumerate(payloads[k:k + 32]):
            pipe.xadd(key, {b"fmt": b"bin", b"data": data},
                      id=ids[k + j] if ids else "*")
        out += [i.decode() if isinstance(i, bytes) else i for i in pipe.execute()]
    return out


def wait_folded(r, model: str, total: int, worker: Child, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = status_of(r, model) or {}
        if status.get("examples", 0) >= total:
            return status
        dead = r.xlen(redis_keys.deadletter_key(model))
        if dead:
            raise RuntimeError(f"{model}: {dead} entries went to the dead letters: "
                               f"{r.xrange(redis_keys.deadletter_key(model), count=1)}")
        if not worker.alive():
            raise RuntimeError(f"worker exited:\n{worker.tail()}")
        time.sleep(0.05)
    raise TimeoutError(f"{model}: {total} examples not folded within {timeout} s "
                       f"(status {status_of(r, model)})")


# ---------------------------------------------------------------------------- 1. fold
def fold_in_process(D: int, n_entries: int, rounds: int, seed: int) -> dict:
    G = D // GROUP_SIZE
    spec = ModelCreate(name=f"fold_d{D}", algorithm="cs-g-omp", groups=group_specs(G),
                       params=dict(NO_POLICY))
    layout, params = BatchLayout(spec), split_params(spec)
    X, y = grouped_data(n_entries * ROWS, D, seed)
    entries = entries_of(X, y)
    del X
    batches = [(f"{k + 1}-0", CSRBatch.from_arrays(m.indptr.astype(np.int64), m.indices,
                                                  m.data, D), t)
               for k, (m, t) in enumerate(entries)]
    n = n_entries * ROWS

    def floor_pass() -> float:
        stats = SufficientStatistics(D)
        t0 = time.perf_counter()
        for matrix, target in entries:
            stats.update(matrix, target)
        return n / (time.perf_counter() - t0)

    dense = [(m.toarray(), t) for m, t in entries]

    def dense_pass() -> float:  # reference: the same update on dense ndarrays (BLAS path)
        stats = SufficientStatistics(D)
        t0 = time.perf_counter()
        for matrix, target in dense:
            stats.update(matrix, target)
        return n / (time.perf_counter() - t0)

    def fold_pass() -> float:
        state = BatchFoldState("anytime", layout, params)
        t0 = time.perf_counter()
        for entry_id, batch, target in batches:
            state.apply_entry(entry_id, batch, target)
        rate = n / (time.perf_counter() - t0)
        assert state.examples == n
        return rate

    warm = BatchFoldState("anytime", layout, params)  # first-use costs out of the clock
    for entry_id, batch, target in batches[:3]:
        warm.apply_entry(entry_id, batch, target)
        SufficientStatistics(D).update(entries[0][0], entries[0][1])
    floors, folds, denses = [], [], []
    for _ in range(rounds):
        floors.append(floor_pass())
        folds.append(fold_pass())
        denses.append(dense_pass())
    sparse, fold = float(np.median(floors)), float(np.median(folds))
    dense_rate = float(np.median(denses))
    floor = max(sparse, dense_rate)
    return {"entries": n_entries, "examples_per_pass": n, "rounds": rounds,
            "floor_update_per_s": floor, "apply_entry_per_s": fold,
            "fraction_of_floor": fold / floor, "sparse_update_per_s": sparse,
            "sparse_rates": floors, "fold_rates": folds,
            "dense_update_per_s": dense_rate, "dense_rates": denses}


def fold_end_to_end(client, r, redis_url: str, worker: Child, D: int, n_entries: int,
                    seed: int) -> dict:
    G = D // GROUP_SIZE
    name = f"fold_e2e_d{D}"
    base = min(n_entries, 500 if D <= 100 else n_entries)  # cycle a smaller set of entries
    X, y = grouped_data(base * ROWS, D, seed)
    payloads = [fbx1(m, t) for m, t in entries_of(X, y)]
    del X
    payloads = [payloads[k % base] for k in range(n_entries)]
    total = n_entries * ROWS
    create_model(client, spec_body(name, "cs-g-omp", group_specs(G)))
    wait_owned(r, name, worker)
    samples: list[tuple[float, int]] = []
    done = threading.Event()

    def poll() -> None:  # the worker's published counters, every 5 ms
        import redis

        pr = redis.Redis.from_url(redis_url, socket_timeout=5)
        last = -1
        while not done.is_set():
            status = status_of(pr, name) or {}
            examples = int(status.get("examples", 0))
            if examples != last:
                samples.append((time.perf_counter(), examples))
                last = examples
                if examples >= total:
                    return
            time.sleep(0.005)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    started = time.perf_counter()
    try:
        append(r, name, payloads)
        appended = time.perf_counter()
        wait_folded(r, name, total, worker, timeout=120 + total / 200)
    finally:
        done.set()
        poller.join(timeout=5)
    positive = [(t, k) for t, k in samples if k > 0]
    t_first, k_first = positive[0]
    t_last, k_last = positive[-1]
    client.delete_model(name)
    return {"entries": n_entries, "examples": total,
            "append_seconds": appended - started,
            "first_to_last_seconds": t_last - t_first,
            "examples_per_s": (k_last - k_first) / (t_last - t_first)
            if t_last > t_first else None,
            "append_to_last_per_s": total / (t_last - started),
            "status_updates_seen": len(positive)}


# ---------------------------------------------------------------------------- 2. retrain
def retrain_data(n: int, seed: int):
    D, G = 2000, 200
    X, y = grouped_data(n, D, seed)
    costs = np.round(np.random.default_rng(seed + 1).uniform(0.5, 2.0, G), 3)
    ids = [f"{k // ROWS + 1}-0" for k in range(0, n, ROWS)]
    held = np.concatenate([held_out(i, min(ROWS, n - k * ROWS), VALIDATION_FRACTION)
                           for k, i in enumerate(ids)])
    return X, y, costs, ids, held


def retrain_in_process(X, y, costs, held, repeats: int) -> dict:
    D, G = X.shape[1], len(costs)
    t0 = time.perf_counter()
    train = SufficientStatistics.from_data(X[~held], y[~held], D)
    validation = SufficientStatistics.from_data(X[held], y[held], D)
    stats_seconds = time.perf_counter() - t0
    groups = [np.arange(g * GROUP_SIZE, (g + 1) * GROUP_SIZE) for g in range(G)]
    out = {"statistics_seconds": stats_seconds, "train_examples": int(train.n),
           "validation_examples": int(validation.n), "methods": {}}
    for method in ("cs-g-omp", "cs-g-fr"):
        AnytimeLinearModel(groups=groups, costs=costs, method=method).fit_statistics(
            train, validation=validation)  # warm-up: kernels loaded, caches touched
        times = []
        for _ in range(repeats):
            model = AnytimeLinearModel(groups=groups, costs=costs, method=method)
            t0 = time.perf_counter()
            model.fit_statistics(train, validation=validation)
            times.append(time.perf_counter() - t0)
        out["methods"][method] = {"median_seconds": float(np.median(times)), "runs": times,
                                  "groups_sequenced": int(len(model.sequence_)),
                                  "final_train_ev": float(model.train_explained_variance_[-1])}
    return out


def retrain_service(client, r, worker: Child, X, y, costs, ids, repeats: int) -> dict:
    payloads = [fbx1(m, t) for m, t in entries_of(X, y)]
    out = {}
    for method in ("cs-g-omp", "cs-g-fr"):
        name = f"retrain_{method.replace('-', '_')}"
        create_model(client, spec_body(name, method, group_specs(len(costs), costs)))
        wait_owned(r, name, worker)
        t0 = time.perf_counter()
        append(r, name, payloads, ids)
        status = wait_folded(r, name, len(y), worker, timeout=600)
        fold_seconds = time.perf_counter() - t0
        runs = []
        for _ in range(repeats):
            posted_wall, posted = time.time(), time.perf_counter()
            job = wait_job(client, name, client.retrain(name).id)
            if job["status"] != "succeeded":
                raise RuntimeError(f"{name}: retrain job failed: {job}")
            wait_served(client, name, job["version"], timeout=60, poll=0.005)
            runs.append({"duration_seconds": job["duration_seconds"],
                         "artifact_bytes": int(r.strlen(redis_keys.artifact_key(name,
                                                                          job["version"]))),
                         "queue_seconds": job["started_at"] - posted_wall,
                         "post_to_served_seconds": time.perf_counter() - posted,
                         "examples_used": job["examples_used"],
                         "validation_examples": job["validation_examples"],
                         "version": job["version"]})
        client.delete_model(name)
        out[method] = {"median_duration_seconds":
                       float(np.median([x["duration_seconds"] for x in runs])),
                       "median_post_to_served_seconds":
                       float(np.median([x["post_to_served_seconds"] for x in runs])),
                       "artifact_bytes": runs[-1]["artifact_bytes"],
                       "fold_seconds": fold_seconds,
                       "fold_examples_per_s": len(y) / fold_seconds,
                       "status": status, "runs": runs}
    return out


# ---------------------------------------------------------------------------- 3. publish
class Predictor(threading.Thread):
    """Predicts one example at ``rate`` per second, alternating between the APIs."""

    def __init__(self, urls: list[str], model: str, example: dict, rate: float) -> None:
        super().__init__(daemon=True)
        self.urls, self.model, self.rate = urls, model, rate
        self.body = json.dumps({"examples": [example]}).encode()
        self.stop_event = threading.Event()
        self.requests = self.errors = self.regressions = self.cross_api_lower = 0
        self.error_samples: list[str] = []
        self.last = {u: 0 for u in urls}
        self.highest = 0
        self.versions_seen: set[int] = set()

    def run(self) -> None:
        import httpx  # the paced predictions this test measures: a raw client

        clients = {u: httpx.Client(base_url=u, timeout=10) for u in self.urls}
        start, k = time.perf_counter(), 0
        try:
            while not self.stop_event.is_set():
                delay = start + k / self.rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                url = self.urls[k % len(self.urls)]
                k += 1
                self.requests += 1
                try:
                    response = clients[url].post(
                        f"/v1/models/{self.model}/predict", content=self.body,
                        headers={"content-type": "application/json"})
                    if response.status_code != 200:
                        raise RuntimeError(f"{response.status_code} {response.text[:200]}")
                    version = int(response.json()["version"])
                except Exception as exc:  # noqa: BLE001 - counted and reported
                    self.errors += 1
                    if len(self.error_samples) < 5:
                        self.error_samples.append(f"{url}: {type(exc).__name__}: {exc}")
                    continue
                self.versions_seen.add(version)
                if version < self.last[url]:
                    self.regressions += 1
                if version < self.highest:
                    self.cross_api_lower += 1  # the other API swapped first: expected
                self.last[url] = max(self.last[url], version)
                self.highest = max(self.highest, version)
        finally:
            for client in clients.values():
                client.close()


def publish_latency(clients: list[FeaturebudgetClient], r, worker: Child, n: int, publishes: int,
                    rate: float, poll_s: float = 0.005) -> dict:
    name = "publish"
    a, b = clients
    X, y = grouped_data(n, 100, seed=7)
    create_model(a, spec_body(name, "cs-g-omp", group_specs(10)))
    wait_owned(r, name, worker)
    append(r, name, [fbx1(m, t) for m, t in entries_of(X, y)])
    wait_folded(r, name, n, worker, timeout=120)

    def versions() -> list[int | None]:
        return [c.get_model(name).version for c in clients]

    def publish_once(previous: int) -> dict:
        posted_wall, posted = time.time(), time.perf_counter()
        job_id = a.retrain(name).id
        seen: list[float | None] = [None, None]
        regressions = 0
        last = [previous, previous]
        deadline = posted + 30.0
        k = 0
        while None in seen:
            now = time.perf_counter()
            if now > deadline:
                job = a.job(name, job_id).raw
                raise TimeoutError(f"version after {previous} not served by both APIs "
                                   f"within 30 s: versions {versions()}, job {job}")
            for i, client in enumerate(clients):
                if seen[i] is None:
                    version = client.http.get(f"/v1/models/{name}").json().get(
                        "version") or 0  # (timed: the raw GET)
                    if version < last[i]:
                        regressions += 1
                    last[i] = max(last[i], version)
                    if version > previous:
                        seen[i] = time.perf_counter()
            k += 1
            delay = posted + k * poll_s - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        job = wait_job(a, name, job_id)
        if job["status"] != "succeeded":
            raise RuntimeError(f"retrain job failed: {job}")
        first, second = sorted(seen)
        return {"post_to_both_seconds": second - posted, "post_to_first_seconds": first - posted,
                "post_to_a_seconds": seen[0] - posted, "post_to_b_seconds": seen[1] - posted,
                "queue_seconds": job["started_at"] - posted_wall,
                "duration_seconds": job["duration_seconds"],
                "finished_to_both_seconds": (posted_wall + (second - posted)) -
                job["finished_at"],
                "version": job["version"], "poll_regressions": regressions}

    warm = publish_once(0)  # version 1: predictions need a served version
    example = {"features": {f"g{g}": {f"g{g}_f{k}": float(X[0, g * GROUP_SIZE + k])
                                      for k in range(GROUP_SIZE)} for g in range(10)}}
    predictor = Predictor([str(c.http.base_url).rstrip("/") for c in clients], name, example,
                          rate)
    predictor.start()
    time.sleep(0.5)
    runs = []
    try:
        previous = warm["version"]
        for _ in range(publishes):
            run = publish_once(previous)
            runs.append(run)
            previous = run["version"]
            time.sleep(0.1)
        time.sleep(0.5)
    finally:
        predictor.stop_event.set()
        predictor.join(timeout=15)
    a.delete_model(name)
    both = [x["post_to_both_seconds"] for x in runs]
    summary = {"publishes": len(runs), "poll_interval_s": poll_s,
               "p50_s": percentile(both, 50), "p99_s": percentile(both, 99),
               "max_s": max(both),
               "queue_p50_s": percentile([x["queue_seconds"] for x in runs], 50),
               "queue_max_s": max(x["queue_seconds"] for x in runs),
               "job_duration_p50_s": percentile([x["duration_seconds"] for x in runs], 50),
               "job_duration_max_s": max(x["duration_seconds"] for x in runs),
               "finished_to_both_p50_s":
               percentile([x["finished_to_both_seconds"] for x in runs], 50),
               "finished_to_both_max_s": max(x["finished_to_both_seconds"] for x in runs),
               "first_to_second_api_p50_s": percentile(
                   [x["post_to_both_seconds"] - x["post_to_first_seconds"] for x in runs], 50),
               "poll_regressions": sum(x["poll_regressions"] for x in runs)}
    summary["predictor"] = {"rate_per_s": rate, "requests": predictor.requests,
                            "errors": predictor.errors,
                            "version_regressions": predictor.regressions,
                            "lower_than_other_api": predictor.cross_api_lower,
                            "versions_seen": sorted(predictor.versions_seen),
                            "error_samples": predictor.error_samples}
    summary["runs"] = runs
    return summary


# ---------------------------------------------------------------------------- main
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (~2 minutes)")
    parser.add_argument("--out", default=str(ROOT / "load_tests" / "batch_results.json"))
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--predict-rate", type=float, default=100.0,
                        help="predictions per second during the publishes")
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "full"

    import redis

    r = redis.Redis.from_url(args.redis_url)
    r.flushdb()
    wall = time.perf_counter()
    results: dict = {"mode": mode, "rows_per_entry": ROWS, "group_size": GROUP_SIZE,
                     "validation_fraction": VALIDATION_FRACTION,
                     "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                 "redis": r.info("server").get("redis_version")},
                     "fold": {}}
    # in-process measurements first, with no service process competing for the cores
    for D, (n_entries, rounds, _) in FOLD_SIZES[mode].items():
        print(f"fold in-process D={D} ...", file=sys.stderr)
        results["fold"][str(D)] = {"in_process": fold_in_process(D, n_entries, rounds, D)}
    print("retrain in-process D=2000 ...", file=sys.stderr)
    cfg = RETRAIN[mode]
    X, y, costs, ids, held = retrain_data(cfg["examples"], seed=3)
    results["retrain"] = {"n_features": X.shape[1], "n_groups": len(costs),
                          "examples": len(y),
                          "in_process": retrain_in_process(X, y, costs, held,
                                                           cfg["repeats"])}

    log_dir = tempfile.mkdtemp(prefix="fb-batch-load-")
    env = child_env(args.redis_url, tempfile.mkdtemp(prefix="fb-batch-data-"))
    children: list[Child] = []
    clients: list[FeaturebudgetClient] = []
    try:
        apis = []
        for port in PORTS:
            apis.append(start_api(port, env, log_dir))
            children.append(apis[-1])
        worker = start_worker(env, log_dir)
        children.append(worker)
        t0 = time.perf_counter()
        for child, port in zip(apis, PORTS, strict=True):
            wait_ready(child, f"http://127.0.0.1:{port}")
        clients = [connect(f"http://127.0.0.1:{p}", timeout=60) for p in PORTS]
        results["startup_seconds"] = time.perf_counter() - t0
        for D, (_, _, n_entries) in FOLD_SIZES[mode].items():
            print(f"fold end to end D={D} ...", file=sys.stderr)
            results["fold"][str(D)]["end_to_end"] = fold_end_to_end(
                clients[0], r, args.redis_url, worker, D, n_entries, seed=100 + D)
        print("retrain via the service D=2000 ...", file=sys.stderr)
        results["retrain"]["service"] = retrain_service(clients[0], r, worker, X, y, costs,
                                                        ids, cfg["repeats"])
        del X
        print("publish latency ...", file=sys.stderr)
        pcfg = PUBLISH[mode]
        results["publish"] = publish_latency(clients, r, worker, pcfg["examples"],
                                             pcfg["publishes"], args.predict_rate)
    except BaseException:
        for child in children:
            print(f"--- {child.label} (log {child.log_path}) ---\n{child.tail()}",
                  file=sys.stderr)
        raise
    finally:
        for client in clients:
            client.close()
        codes = {}
        for child in reversed(children):
            codes[child.label] = child.stop()
        results["exit_codes"] = codes  # uvicorn re-raises SIGTERM after its shutdown: -15
        results["service_logs"] = log_dir
        problems = {}
        for child in children:
            text = child.log_path.read_text(errors="replace")
            lines = [ln for ln in text.splitlines() if "ERROR" in ln or "CRITICAL" in ln
                     or re.match(r"^[\w.]+(Error|Exception): ", ln)]
            if lines:
                problems[child.label] = lines[:10]
        results["service_log_problems"] = problems
        r.flushdb()
    results["wall_seconds"] = time.perf_counter() - wall
    print_tables(results)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"\nwrote {args.out} ({results['wall_seconds']:.0f} s)", file=sys.stderr)
    return 0


def print_tables(res: dict) -> None:
    print(f"\nFold of grouped examples ({GROUP_SIZE} features per group, every group present, "
          f"entries of {ROWS}, validation fraction {VALIDATION_FRACTION}):\n")
    print("| D | update alone, CSR (ex/s) | update alone, dense (ex/s) | apply_entry (ex/s) | "
          "fraction of the faster update | worker on Redis, first->last applied (ex/s) | "
          "XADD->last applied (ex/s) | examples (in-process pass / end to end) |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for D, row in res["fold"].items():
        a, e = row["in_process"], row.get("end_to_end") or {}
        rate = e.get("examples_per_s")
        print(f"| {D} | {a['sparse_update_per_s']:,.0f} | {a['dense_update_per_s']:,.0f} | "
              f"{a['apply_entry_per_s']:,.0f} | {a['fraction_of_floor']:.0%} | "
              f"{'-' if rate is None else f'{rate:,.0f}'} | "
              f"{e.get('append_to_last_per_s', 0):,.0f} | "
              f"{a['examples_per_pass']:,} / {e.get('examples', 0):,} |")
    rt = res["retrain"]
    print(f"\nRetrain from statistics, D = {rt['n_features']} in {rt['n_groups']} groups, "
          f"{rt['examples']} examples ({rt['in_process']['train_examples']} train / "
          f"{rt['in_process']['validation_examples']} held out), median of 3:\n")
    print("| method | fit_statistics in-process (s) | service job duration_seconds (s) | "
          "service POST -> served by the API (s) | artifact (MB) | worker fold of the log "
          "(ex/s) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for method, row in rt["in_process"]["methods"].items():
        s = rt.get("service", {}).get(method, {})
        print(f"| {method} | {row['median_seconds']:.3f} | "
              f"{s.get('median_duration_seconds', float('nan')):.3f} | "
              f"{s.get('median_post_to_served_seconds', float('nan')):.3f} | "
              f"{s.get('artifact_bytes', 0) / 1e6:.1f} | "
              f"{s.get('fold_examples_per_s', float('nan')):,.0f} |")
    p = res["publish"]
    q = p["predictor"]
    print(f"\nPublish latency, 2 API processes + 1 worker, cs-g-omp 10 groups / 100 features, "
          f"{p['publishes']} retrains, both APIs polled every {p['poll_interval_s'] * 1e3:.0f}"
          " ms:\n")
    print("| POST /retrain -> both APIs serve it | p50 s | p99 s | max s |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| total | {p['p50_s']:.3f} | {p['p99_s']:.3f} | {p['max_s']:.3f} |")
    runs = p["runs"]
    for label, key in (("queue wait (POST -> job started)", "queue_seconds"),
                       ("job duration_seconds", "duration_seconds"),
                       ("job finished -> both APIs serve it", "finished_to_both_seconds")):
        values = [x[key] for x in runs]
        print(f"| {label} | {percentile(values, 50):.3f} | {percentile(values, 99):.3f} | "
              f"{max(values):.3f} |")
    gaps = [x["post_to_both_seconds"] - x["post_to_first_seconds"] for x in runs]
    print(f"| first API -> second API | {percentile(gaps, 50):.3f} | "
          f"{percentile(gaps, 99):.3f} | {max(gaps):.3f} |")
    print(f"\nPredicting during the publishes ({q['rate_per_s']:.0f} req/s, alternating APIs): "
          f"{q['requests']} requests, {q['errors']} errors, {q['version_regressions']} version "
          f"regressions per API ({q['lower_than_other_api']} answers below the other API's "
          f"newest, while it swapped first); versions {min(q['versions_seen'], default=None)}"
          f"..{max(q['versions_seen'], default=None)}")
    if res.get("service_log_problems"):
        print(f"\nservice logs: {res['service_log_problems']}")


if __name__ == "__main__":
    sys.exit(main())
