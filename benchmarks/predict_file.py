"""Scoring a libsvm file: ``featurebudget predict`` through the service beside the floor of
scoring it in one process (the ``vw -t`` way: parse, predict, write; no HTTP), same file,
same model, same run.

    python benchmarks/predict_file.py --out benchmarks/predict_file.json   # 1,000,000 rows
    python benchmarks/predict_file.py --rows 20000                          # a smoke run

One ``featurebudget serve`` (embedded backend, a private data directory, a loopback port of
``--port``) holds a PET model (d = ``--features``, B = 100) trained by ``featurebudget load``
on 20,000 rows of the generator; the test file is ``--rows`` rows of the same generator
(``--nnz`` non-zeros a row: one index in each of ``nnz`` equal slices of the dimension,
values N(0, 1) written with 7 significant digits, label the sign of a fixed w . x).

- ``featurebudget predict FILE --model m --out OUT.jsonl --quiet`` (the default chunks of
  1,000 examples, one request each; JSON-lines records) in its own process: wall time and
  peak RSS (``wait4``) of that process;
- the floor, in its own process: the model's snapshot (``GET /snapshot``) restored as a
  learner, ``iter_libsvm`` chunks of 16 MB, ``decision_function``, one score a line
  written: wall time (the snapshot restore excluded) and peak RSS.

Both outputs are compared score for score (largest absolute difference).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from algorithms.sparse.csr import CSRBatch  # noqa: E402
from algorithms.sparse.libsvm import write_libsvm  # noqa: E402

TRAIN_ROWS = 20_000
CHUNK = 100_000


def write_rows(path: Path, rows: int, d: int, nnz: int, seed: int) -> None:
    """``rows`` rows of the generator of the module docstring, written in chunks."""
    rng = np.random.default_rng(seed)
    w = np.random.default_rng(0).normal(size=d)
    width = d // nnz
    with open(path, "wb") as handle:
        for start in range(0, rows, CHUNK):
            n = min(CHUNK, rows - start)
            indices = (np.arange(nnz) * width + rng.integers(0, width, size=(n, nnz)))
            values = rng.normal(size=(n, nnz))
            labels = np.where((w[indices] * values).sum(axis=1) >= 0, 1, -1)
            batch = CSRBatch.from_arrays(np.arange(0, n * nnz + 1, nnz), indices.ravel(),
                                         values.ravel(), d)
            write_libsvm(handle, batch, labels, precision=7)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (/proc)."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measured(argv: list[str], env: dict | None = None) -> tuple[float, int, float, str]:
    """(wall seconds, peak RSS bytes, CPU seconds of that process, stdout) of ``argv`` run
    to its end; RuntimeError with its stderr when it fails."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        child = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=ROOT)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if child.returncode:
            raise RuntimeError(f"{argv[:4]} exited {child.returncode}: "
                               f"{err.read().decode()[-2000:]}")
        return (seconds, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime,
                out.read().decode())


def floor(snapshot: str, path: str, out: str) -> None:
    """The in-process scorer (run as ``--floor SNAPSHOT FILE OUT``); prints its seconds."""
    from algorithms.sparse.libsvm import iter_libsvm, parse_libsvm
    from service.online.snapshot import parse_snapshot

    learner, _ = parse_snapshot(Path(snapshot).read_bytes())
    learner.decision_function(parse_libsvm(b"1 1:1\n", learner.n_features)[0])  # (compiled)
    started, cpu = time.perf_counter(), time.process_time()
    rows = 0
    with open(out, "w") as handle:
        for X, _ in iter_libsvm(path, learner.n_features):
            scores = learner.decision_function(X)
            handle.write("\n".join(map(repr, scores.tolist())) + "\n")
            rows += len(scores)
    print(json.dumps({"rows": rows, "seconds": time.perf_counter() - started,
                      "cpu_seconds": time.process_time() - cpu}))


def run(args) -> dict:
    from clients.http import FeaturebudgetClient
    from load_tests._servers import rss_bytes, serve, service_env, wait_ready

    work = Path(args.work_dir or tempfile.mkdtemp(prefix="predict-file-"))
    work.mkdir(parents=True, exist_ok=True)
    train, test = work / "train.svm", work / "test.svm"
    write_rows(train, TRAIN_ROWS, args.features, args.nnz, seed=1)
    write_rows(test, args.rows, args.features, args.nnz, seed=2)
    env = service_env(data_dir=work / "data")
    api = serve(args.port, env, log_dir=work)
    cli = [sys.executable, "-m", "service.cli"]
    try:
        wait_ready(api, timeout=900)
        with FeaturebudgetClient(api.url) as client:
            client.create_model("m", algorithm="pet", n_features=args.features, budget=100)
        subprocess.run([*cli, "load", str(train), "--model", "m", "--url", api.url, "--wait",
                        "--quiet"], check=True, cwd=ROOT, env=env, capture_output=True)
        with FeaturebudgetClient(api.url) as client:
            (work / "m.fbstate").write_bytes(client.get_snapshot("m"))
        out = work / "scores.jsonl"
        service_cpu = cpu_seconds(api.pid)
        seconds, rss, cli_cpu, stdout = measured([*cli, "predict", str(test), "--model", "m",
                                                  "--out", str(out), "--url", api.url,
                                                  "--quiet"], env)
        service_cpu = cpu_seconds(api.pid) - service_cpu
        cli_result = json.loads(stdout)
        service_rss = rss_bytes(api.pid)
    finally:
        api.stop()
    floor_out = work / "floor.txt"
    floor_seconds, floor_rss, floor_cpu, stdout = measured(
        [sys.executable, __file__, "--floor", str(work / "m.fbstate"), str(test),
         str(floor_out)])
    floor_result = json.loads(stdout)
    served = np.array([json.loads(line)["score"] for line in open(out)])
    local = np.loadtxt(floor_out)
    assert len(served) == len(local) == args.rows == cli_result["examples"]
    return {
        "rows": args.rows, "features": args.features, "nnz": args.nnz,
        "file_mb": round(test.stat().st_size / 1e6, 1), "model": "pet B=100",
        "predict_cli": {"command": "featurebudget predict FILE --model m --out OUT.jsonl "
                                   "--quiet", "batch_size": 1000,
                        "wall_seconds": round(seconds, 2),
                        "rows_per_second": round(args.rows / seconds),
                        "scoring_rows_per_second": round(cli_result["examples_per_second"]),
                        "peak_rss_mb": round(rss / 1e6, 1),
                        "cpu_us_per_row": round(1e6 * cli_cpu / args.rows, 2),
                        "service_cpu_us_per_row": round(1e6 * service_cpu / args.rows, 2),
                        "service_rss_mb_after": round((service_rss or 0) / 1e6, 1)},
        "in_process_floor": {"wall_seconds": round(floor_seconds, 2),
                             "rows_per_second": round(args.rows / floor_seconds),
                             "scoring_rows_per_second": round(args.rows /
                                                              floor_result["seconds"]),
                             "cpu_us_per_row": round(1e6 * floor_cpu / args.rows, 2),
                             "scoring_cpu_us_per_row": round(
                                 1e6 * floor_result["cpu_seconds"] / args.rows, 2),
                             "peak_rss_mb": round(floor_rss / 1e6, 1)},
        "max_abs_score_difference": float(np.max(np.abs(served - local))),
        "host": {"cpus": os.cpu_count(), "load_average_1min_at_end": os.getloadavg()[0],
                 "python": platform.python_version(),
                 "machine": platform.machine()},
    }


def table(result: dict) -> str:
    """The markdown table of docs/benchmarks.md."""
    cli, floor = result["predict_cli"], result["in_process_floor"]
    return "\n".join([
        "| | rows/s | CPU µs per row | peak RSS |", "| --- | ---: | ---: | ---: |",
        f"| `featurebudget predict` (wall, end to end) | {cli['rows_per_second']:,} | "
        f"{cli['cpu_us_per_row']:.1f} (the CLI) + {cli['service_cpu_us_per_row']:.1f} (the "
        f"service) | {cli['peak_rss_mb']:.0f} MB (the CLI) |",
        f"| in-process floor (wall, end to end) | {floor['rows_per_second']:,} | "
        f"{floor['cpu_us_per_row']:.2f} | {floor['peak_rss_mb']:.0f} MB |",
        f"| in-process floor, the scoring loop alone | {floor['scoring_rows_per_second']:,} "
        f"| {floor['scoring_cpu_us_per_row']:.2f} | |"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=1000)
    parser.add_argument("--nnz", type=int, default=20)
    parser.add_argument("--port", type=int, default=18390)
    parser.add_argument("--work-dir", default=None, help="default: a new temporary folder")
    parser.add_argument("--out", default=None, help="write the results JSON here")
    parser.add_argument("--floor", nargs=3, metavar=("SNAPSHOT", "FILE", "OUT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.floor:
        floor(*args.floor)
        return
    result = run(args)
    text = json.dumps(result, indent=2)
    print(text)
    print(table(result))
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
