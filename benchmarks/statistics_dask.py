"""Statistics of sharded libsvm files: one pass in this process vs a Dask LocalCluster.

``python benchmarks/statistics_dask.py`` (10^7 rows; ``--rows 100000`` for a smoke run).
Generates seeded shards once (cached under ``--data-dir``): D = 200, exactly ``--nnz``
(default 25, a density of 12.5%) non-zeros per row at uniformly random positions, values
with four significant digits, targets from a fixed linear model plus noise; fixed-width
tokens (``" 017:-3.141"``), 284 bytes per row at the defaults. Then times
``fit_statistics`` (validation fraction 0.2, 64 MiB partitions, merge tree of fan-in 4) in
this process (BLAS and the parser on one thread) and on the LocalClusters of 1 and 2 worker
processes that ``fit-statistics --workers N`` starts (``dask_client``: one thread each;
started before timing, kernels loaded), interleaved in rounds, best of each, with the CPU
seconds the executor's processes used (on a shared machine, CPU seconds / wall seconds is
the number of cores the run obtained, and the busiest process's CPU seconds the wall time
the run would take with a free core per process). Checks that every run gives the same
bits. Prints a table, writes JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._report import machine, table  # noqa: E402
from service.batch.offline.distributed_statistics import dask_client, fit_statistics  # noqa: E402

D = 200
ROWS_PER_CHUNK = 100_000


def _digits(values: np.ndarray, width: int) -> np.ndarray:
    """(m, width) ASCII digits of non-negative integers, zero-padded."""
    out = np.empty((*values.shape, width), dtype=np.uint8)
    rest = values.astype(np.int64)
    for k in range(width - 1, -1, -1):
        out[..., k] = 48 + rest % 10
        rest //= 10
    return out


def chunk_bytes(rng: np.random.Generator, weights: np.ndarray, m: int, nnz: int) -> bytes:
    """``m`` fixed-width libsvm lines: label ``±dddd.dd``, tokens `` iii:±d.ddd``."""
    idx = np.sort(rng.random((m, D)).argpartition(nnz, axis=1)[:, :nnz], axis=1)
    raw = rng.integers(-9999, 10000, size=(m, nnz))
    values = raw / 1000.0
    y = (values * weights[idx]).sum(axis=1) + rng.standard_normal(m)
    cents = np.clip(np.rint(y * 100), -999999, 999999).astype(np.int64)
    line = 8 + 11 * nnz + 1
    out = np.empty((m, line), dtype=np.uint8)
    out[:, 0] = np.where(cents < 0, ord("-"), ord("+"))
    whole = _digits(np.abs(cents) // 100, 4)
    out[:, 1:5] = whole
    out[:, 5] = ord(".")
    out[:, 6:8] = _digits(np.abs(cents) % 100, 2)
    tokens = out[:, 8:8 + 11 * nnz].reshape(m, nnz, 11)
    tokens[:, :, 0] = ord(" ")
    tokens[:, :, 1:4] = _digits(idx + 1, 3)
    tokens[:, :, 4] = ord(":")
    tokens[:, :, 5] = np.where(raw < 0, ord("-"), ord("+"))
    tokens[:, :, 6] = 48 + np.abs(raw) // 1000
    tokens[:, :, 7] = ord(".")
    tokens[:, :, 8:11] = _digits(np.abs(raw) % 1000, 3)
    out[:, -1] = ord("\n")
    return out.tobytes()


def make_shards(directory: Path, rows: int, shards: int, nnz: int, seed: int) -> list[str]:
    """Seeded shards, reused when the manifest matches."""
    directory.mkdir(parents=True, exist_ok=True)
    manifest = directory / "manifest.json"
    wanted = {"rows": rows, "shards": shards, "nnz": nnz, "seed": seed, "D": D}
    paths = [str(directory / f"part-{k:04d}.svm") for k in range(shards)]
    if manifest.exists() and json.loads(manifest.read_text()) == wanted and \
            all(os.path.exists(p) for p in paths):
        return paths
    weights = np.random.default_rng(seed).standard_normal(D)
    started = time.perf_counter()
    for k, path in enumerate(paths):
        rng = np.random.default_rng([seed, k])
        count = rows // shards + (k < rows % shards)
        with open(path + ".part", "wb") as handle:
            for a in range(0, count, ROWS_PER_CHUNK):
                handle.write(chunk_bytes(rng, weights, min(ROWS_PER_CHUNK, count - a), nnz))
        os.replace(path + ".part", path)
    manifest.write_text(json.dumps(wanted))
    print(f"generated {rows:,} rows in {shards} shards under {directory} "
          f"({time.perf_counter() - started:.0f} s)", flush=True)
    return paths


def _cpu() -> float:
    """CPU seconds this process has used (all its threads)."""
    return time.process_time()


def _cpu_of(client) -> list[float]:
    """CPU seconds of this process, or of each worker process of ``client``."""
    return [_cpu()] if client is None else sorted(client.run(_cpu).values())


def _warm() -> int:
    """Load the parser's kernels in a worker (before timing)."""
    from algorithms.sparse.libsvm import parse_libsvm

    parse_libsvm(b"1 1:1\n", n_features=1, threads=1)
    return os.getpid()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--nnz", type=int, default=25, help="non-zeros per row (<= 200)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=None,
                        help="interleaved rounds (default 3, 1 from 10^7 rows on)")
    parser.add_argument("--block-mb", type=float, default=64.0)
    parser.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(),
                                                           "featurebudget-bench"))
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" /
                                             "statistics_dask.json"))
    args = parser.parse_args(argv)
    from threadpoolctl import threadpool_limits

    directory = Path(args.data_dir) / f"statistics-{args.rows}-{args.shards}-{args.nnz}-" \
                                      f"{args.seed}"
    paths = make_shards(directory, args.rows, args.shards, args.nnz, args.seed)
    size = sum(os.path.getsize(p) for p in paths)
    rounds = args.rounds or (1 if args.rows >= 10_000_000 else 3)
    options = dict(validation_fraction=0.2, block_bytes=int(args.block_mb * (1 << 20)))
    _warm()
    load_before = os.getloadavg()
    clients, stack = {}, contextlib.ExitStack()
    for n in (1, 2):  # the clusters fit-statistics --workers N starts
        started = time.perf_counter()
        clients[n] = stack.enter_context(dask_client(workers=n, host="127.0.0.1"))
        clients[n].run(_warm)
        print(f"LocalCluster of {n}: up in {time.perf_counter() - started:.1f} s", flush=True)
    runs: dict[str, list[float]] = {"in-process": [], "1 worker": [], "2 workers": []}
    cpu: dict[str, list[list[float]]] = {name: [] for name in runs}  # per process
    results = {}
    try:
        for _ in range(rounds):
            for name in runs:
                client = None if name == "in-process" else clients[int(name[0])]
                with threadpool_limits(1):
                    used = _cpu_of(client)
                    started = time.perf_counter()
                    stats = fit_statistics(paths, D, client=client, **options)
                    runs[name].append(time.perf_counter() - started)
                    cpu[name].append([b - a for a, b in zip(used, _cpu_of(client),
                                                            strict=True)])
                results[name] = stats
                print(f"{name}: {runs[name][-1]:.2f} s, CPU s per process "
                      f"{[round(c, 2) for c in cpu[name][-1]]}", flush=True)
    finally:
        stack.close()
    load_after = os.getloadavg()
    reference = results["in-process"]
    same = all(r.train.mxx.tobytes() == reference.train.mxx.tobytes() and
               r.validation.mxy.tobytes() == reference.validation.mxy.tobytes()
               for r in results.values())
    best = {name: min(times) for name, times in runs.items()}
    at = {name: times.index(best[name]) for name, times in runs.items()}
    rows = [{"executor": name, "seconds": best[name], "rows/s": args.rows / best[name],
             "MB/s": size / 1e6 / best[name],
             "speed-up vs in-process": best["in-process"] / best[name],
             "CPU s": sum(cpu[name][at[name]]),
             "CPU s, busiest process": max(cpu[name][at[name]]),
             "cores obtained": sum(cpu[name][at[name]]) / best[name]} for name in runs]
    print(table(rows, ["executor", "seconds", "rows/s", "MB/s", "speed-up vs in-process",
                       "CPU s", "CPU s, busiest process", "cores obtained"],
                f"Statistics of D = {D} over {args.rows:,} rows ({args.nnz} non-zeros per "
                f"row, {size / 1e9:.2f} GB in {args.shards} files, "
                f"{reference.partitions} partitions)"))
    print(f"\nsame bits in every run: {same}; load average before {load_before[0]:.2f}, "
          f"after {load_after[0]:.2f} on {os.cpu_count()} CPUs")
    payload = {"machine": machine(), "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
               "rows": args.rows, "D": D, "nnz_per_row": args.nnz, "density": args.nnz / D,
               "shards": args.shards, "bytes": size, "partitions": reference.partitions,
               "rounds": rounds, "validation_fraction": 0.2,
               "train_examples": int(reference.train.n),
               "validation_examples": int(reference.validation.n),
               "seconds": runs, "cpu_seconds": cpu, "best": rows, "same_bits": same,
               "load_average_before": load_before, "load_average_after": load_after}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=2))
    print(f"wrote {out}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
