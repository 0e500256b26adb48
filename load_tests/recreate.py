"""Delete and create again under one name, while examples stream in: nothing acknowledged is
lost, every process serves the new model.

Two API processes (``serve``) and one batch worker on a private Redis. Each round creates
the model through process A (online ``pet`` or batch ``cs-g-omp``, alternately), streams
examples valid under both of the round's layouts into process B from a thread, deletes the
model and creates it again through A, wider or narrower, a few milliseconds apart while the
stream goes on, then stops the stream and checks the model created last:

- every example B acknowledged (202) after that creation is applied: the model's
  ``examples_applied`` equals the acknowledged count whose log ids are in its log;
- no dead letters; B answered only 202, 404 (between the delete and the create) or 409 (a
  request validated against the deleted model is refused, nothing written);
- A and B describe the same incarnation and layout; both answer ``/readyz`` 200.

    python load_tests/recreate.py                 # 20 rounds (about a minute)
    python load_tests/recreate.py --rounds 5 --json recreate.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import connect, create, inspect, start_api  # noqa: E402
from _servers import RedisServer, free_port, service_env, worker  # noqa: E402

from clients import FeaturebudgetClient, ServiceError  # noqa: E402


def spec(round_: int, wide: bool) -> dict:
    """Round ``round_``'s model: online (even rounds) or batch, narrow or wide (the
    examples touch only what both widths have: features 0-4 / group a0)."""
    if round_ % 2 == 0:
        return {"name": "m", "algorithm": "pet", "n_features": 12 if wide else 6, "budget": 3}
    groups = [{"name": "a0", "features": ["x0", "x1"], "cost": 1}]
    if wide:
        groups.append({"name": "a1", "features": ["x2", "x3"], "cost": 2})
    return {"name": "m", "algorithm": "cs-g-omp", "groups": groups,
            "params": {"retrain_every_examples": None, "retrain_every_seconds": None}}


def body(batch: bool, n: int = 20) -> dict:
    if batch:
        return {"examples": [{"features": {"a0": {"x0": float(i % 7), "x1": 1.0}},
                              "target": float(i % 3)} for i in range(n)]}
    return {"examples": [{"indices": [i % 5], "values": [1.0], "label": 1 - 2 * (i % 2)}
                         for i in range(n)]}


class Stream(threading.Thread):
    """Posts examples to ``url`` back to back; records each answer's status, ids and
    example count."""

    def __init__(self, url: str, batch: bool) -> None:
        super().__init__(daemon=True)
        self.url, self.batch = url, batch
        self.stop = threading.Event()
        self.answers: list[tuple[float, int, list[str], int]] = []

    def run(self) -> None:
        payload = body(self.batch)
        with httpx.Client(timeout=30) as client:
            while not self.stop.is_set():
                response = client.post(f"{self.url}/v1/models/m/examples", json=payload)
                ids = response.json().get("log_ids", []) if response.status_code == 202 else []
                self.answers.append((time.time(), response.status_code, ids,
                                     len(payload["examples"])))


def readyz_status(client: FeaturebudgetClient) -> int:
    """``/readyz``'s status code (200, or the refusal's)."""
    try:
        client.readyz()
        return 200
    except ServiceError as exc:
        return exc.status


def one_round(round_: int, a: FeaturebudgetClient, b: FeaturebudgetClient,
              redis_url: str) -> dict:
    import redis

    first, second = spec(round_, wide=round_ % 4 >= 2), spec(round_, wide=round_ % 4 < 2)
    batch = first["algorithm"] != "pet"
    create(a, first)
    # B must serve the first model before the stream starts (it follows the store at once)
    for _ in range(200):
        try:
            inspect(b, "m")
            break
        except ServiceError:
            time.sleep(0.01)
    stream = Stream(str(b.http.base_url).rstrip("/"), batch)
    stream.start()
    time.sleep(0.3)
    started = time.perf_counter()
    a.delete_model("m")
    create(a, second)
    recreated_ms = (time.perf_counter() - started) * 1e3
    time.sleep(1.0)
    stream.stop.set()
    stream.join()
    # everything acknowledged into the new model's log must be applied there
    client = redis.Redis.from_url(redis_url)
    first_id = client.xrange("featurebudget:{m}:examples", count=1)
    client.close()
    first_key = tuple(map(int, first_id[0][0].decode().split("-"))) if first_id else None
    acknowledged = sum(n for _, status, ids, n in stream.answers if status == 202 and first_key
                       and tuple(map(int, ids[0].split("-"))) >= first_key)
    statuses = sorted({status for _, status, _, _ in stream.answers})
    deadline = time.monotonic() + 60
    while True:
        info = inspect(a, "m")
        if info["log_end"] is None or info["log_position"] == info["log_end"]:
            break
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    other = inspect(b, "m")
    letters = a.deadletters("m")
    ready = [readyz_status(c) for c in (a, b)]
    row = {"round": round_, "model": first["algorithm"],
           "from": first.get("n_features") or len(first["groups"]),
           "to": second.get("n_features") or len(second["groups"]),
           "recreated_ms": round(recreated_ms, 1), "posts": len(stream.answers),
           "statuses": statuses, "acknowledged": acknowledged,
           "applied": info["examples_applied"], "dead_letters": len(letters),
           "same_incarnation": info.get("incarnation") == other.get("incarnation"),
           "same_layout": info["n_features"] == other["n_features"], "ready": ready}
    row["ok"] = bool(row["applied"] == acknowledged and not letters and
                     set(statuses) <= {202, 404, 409} and row["same_incarnation"] and
                     row["same_layout"])
    a.delete_model("m")
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(free_port(), Path(tmp) / "redis", appendonly=False)
        server.start()
        env = service_env(redis_url=server.url, data_dir=Path(tmp) / "data", trim_log="false",
                          lease_seconds=3)
        children = []
        try:
            children.append(start_api(free_port(), env, tmp, label="api-a"))
            children.append(start_api(free_port(), env, tmp, label="api-b"))
            children.append(worker(env, tmp))
            a, b = (connect(child.url, timeout=30) for child in children[:2])
            rows = []
            print(f"{'round':>5} {'model':>9} {'layout':>7} {'ms':>6} {'posts':>6} "
                  f"{'acked':>6} {'applied':>7} {'dead':>4} {'statuses':>9} ok")
            for round_ in range(args.rounds):
                row = one_round(round_, a, b, server.url)
                rows.append(row)
                layout = f"{row['from']}->{row['to']}"
                print(f"{row['round']:>5} {row['model']:>9} {layout:>7} "
                      f"{row['recreated_ms']:>6} {row['posts']:>6} {row['acknowledged']:>6} "
                      f"{row['applied']:>7} {row['dead_letters']:>4} "
                      f"{','.join(map(str, row['statuses'])):>9} {row['ok']}", flush=True)
        finally:
            for child in children:
                child.stop()
            server.stop()
    ok = all(r["ok"] for r in rows)
    print(f"{sum(r['ok'] for r in rows)} of {len(rows)} rounds lost nothing and converged")
    if args.json:
        args.json.write_text(json.dumps({"rounds": rows, "ok": ok}, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
