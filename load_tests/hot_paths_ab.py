"""The service's hot paths, measured for two checkouts in turn on the same machine (a
refactoring's "behaviour and speed unchanged", before / after in one run):

- online ingestion: 20,000 X1 examples (d = 20,000, 600 non-zeros) posted as REST libsvm
  bodies of 500 to a SOFS model (B = 200), embedded backend, until applied (examples/s);
- online ``/predict``: 1,500 one-example requests in a row (p50 / p99 of the last 1,200);
- batch fold: 400 one-example JSON entries to a cs-g-omp model of 4 groups x 50 features,
  until applied (entries/s).

In-process (FastAPI's TestClient), so the figures are relative, for comparing checkouts.

    git worktree add /tmp/before <commit>
    python load_tests/hot_paths_ab.py /tmp/before . --rounds 3
"""
import json
import os
import subprocess
import sys
from pathlib import Path


def measure(root: str) -> dict:
    sys.path.insert(0, root)
    os.chdir(root)
    import tempfile
    import time

    import numpy as np
    from fastapi.testclient import TestClient

    from algorithms.datasets.online_synthetic import make_x1
    from service.app import create_app
    from service.settings import Settings

    out = {}
    X, y, _ = make_x1(n_samples=20000, n_features=20000, seed=3)
    X = X.to_scipy()
    lines = []
    for i in range(X.shape[0]):
        row = X.getrow(i)
        pairs = " ".join(f"{j + 1}:{v:.6g}" for j, v in zip(row.indices, row.data, strict=True))
        lines.append(f"{int(y[i])} {pairs}")
    bodies = ["\n".join(lines[k:k + 500]).encode() for k in range(0, len(lines), 500)]
    libsvm = {"content-type": "text/plain"}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=tmp, snapshot_every_seconds=3600, consumer_block_ms=20,
                            batch_worker=True, job_poll_seconds=0.05)
        with TestClient(create_app(settings)) as c:
            c.post("/v1/models", json={"name": "s", "algorithm": "sofs", "n_features": 20000,
                                        "budget": 200}).raise_for_status()
            started = time.perf_counter()
            for body in bodies[:-1]:
                c.post("/v1/models/s/examples", content=body, headers=libsvm)
            c.post("/v1/models/s/examples?wait=true", content=bodies[-1],
                   headers=libsvm).raise_for_status()
            out["online_ingest_examples_per_s"] = round(
                len(lines) / (time.perf_counter() - started))
            one = {"indices": X.getrow(0).indices.tolist(), "values": X.getrow(0).data.tolist()}
            latencies = []
            for _ in range(1500):
                t0 = time.perf_counter()
                c.post("/v1/models/s/predict", json={"examples": [one]})
                latencies.append(time.perf_counter() - t0)
            ms = np.array(latencies[300:]) * 1e3
            out["predict_p50_ms"] = round(float(np.percentile(ms, 50)), 3)
            out["predict_p99_ms"] = round(float(np.percentile(ms, 99)), 3)
            groups = [{"name": f"g{j}", "features": [f"f{j}_{i}" for i in range(50)],
                       "cost": 1} for j in range(4)]
            c.post("/v1/models", json={"name": "b", "algorithm": "cs-g-omp", "groups": groups,
                                        "params": {"retrain_every_examples": None,
                                                   "retrain_every_seconds": None}}
                   ).raise_for_status()
            rng = np.random.default_rng(0)
            entries = [{"examples": [{"features": {
                g["name"]: {f: float(rng.standard_normal()) for f in g["features"]}
                for g in groups}, "target": 1.0}]} for _ in range(400)]
            started = time.perf_counter()
            for entry in entries[:-1]:
                c.post("/v1/models/b/examples", json=entry)
            c.post("/v1/models/b/examples?wait=true", json=entries[-1]).raise_for_status()
            out["batch_one_example_entries_per_s"] = round(
                400 / (time.perf_counter() - started))
    return out


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description="hot paths of two checkouts, in turn")
    parser.add_argument("checkouts", nargs="+", help="repository roots")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # (a child: measure this root)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one)))
        return 0
    rows = []
    for round_ in range(args.rounds):
        for root in args.checkouts:
            root = str(Path(root).resolve())
            done = subprocess.run([sys.executable, __file__, root, "--one", root],
                                  capture_output=True, text=True, check=True)
            row = {"round": round_, "checkout": root,
                   **json.loads(done.stdout.strip().splitlines()[-1])}
            rows.append(row)
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
