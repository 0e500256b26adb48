"""X2 of the SOFS paper at its full scale: 1,000,000 examples x 1,000,000,000 dimensions.

    python benchmarks/x2.py --vw --out benchmarks/x2.json   # the paper's scale and Vowpal
                                            # Wabbit (-b 30) on 1/10 of it: 16 min, 17 GB peak
    python benchmarks/x2.py --scale 0.1 --no-tune   # 100,000 rows, the same d and parameters
    python benchmarks/x2.py --quick         # a smoke run: 4,000 rows at d = 10^9 (~1 min)

The generator of ``algorithms.datasets.online_synthetic`` (Wu, Hoi et al., after FGM): every row
has the 500 informative features plus 500 noise dimensions drawn from the other d - 500,
values N(0, 1), w* ~ U(0, 1), y = sign(w* . x*) of the noise-free row; rows scaled to unit
norm as for X1; streamed in chunks of 10,000 rows (never a dense array); the first 90% of
the rows (by position) train, the last 10% test. One pass of SOFS, OGD and AROW at B = 500
(the paper's comparison; OGD and AROW keep every feature) and of PET (hinge updates) and
FOFS at B = 500.

Each learner runs in its own process (so its peak RSS is its own), with the generator in a
second thread feeding a queue of two chunks: "learning" is the time inside ``partial_fit``,
"end to end" the wall time of the pass with generation overlapped, "allocate" the
constructor (the dense learners' 8 or 16 bytes per feature, page faults included); before
them, one process writes as much memory once, so that the host's first touch of a freshly
booted virtual machine's memory is not charged to the first learner.
Hyperparameters are tuned on a smaller draw of the same generator (a tenth of the rows and
of d, so that each noise dimension is drawn as often as at full scale; another seed): the
best validation accuracy on its last 10%; ``--quick`` uses the fallback values below.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import queue
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from algorithms.datasets.online_synthetic import make_task, stream  # noqa: E402
from algorithms.online import LEARNERS  # noqa: E402
from algorithms.sparse import concat_batches  # noqa: E402
from benchmarks._report import machine, table, write_json  # noqa: E402
from benchmarks.online_peers import write_vw  # noqa: E402

D, ROWS, INFORMATIVE, NOISE, BUDGET, CHUNK = 10**9, 10**6, 500, 500, 500, 10_000
METHODS = {   # method -> (learner, fixed arguments)
    "sofs": ("sofs", {"budget": BUDGET}),
    "ogd": ("ogd", {}),
    "arow": ("arow", {}),
    "pet": ("pet", {"budget": BUDGET, "update_on": "hinge"}),
    "fofs": ("fofs", {"budget": BUDGET}),
}
GRIDS = {
    "sofs": {"r": [0.001, 0.003, 0.01, 0.1, 1.0]},
    "ogd": {"eta": [1.0, 10.0, 30.0, 100.0]},
    "arow": {"r": [0.003, 0.01, 0.03, 0.1, 1.0]},
    "pet": {"eta": [0.005, 0.02, 0.1, 0.5], "power_t": [0.0, 0.5]},
    "fofs": {"eta": [0.001, 0.003, 0.01, 0.05], "lam": [1e-3, 1e-2, 0.1]},
}
FALLBACK = {   # what tuning picked at full scale (used by --quick and --no-tune)
    "sofs": {"r": 0.001}, "ogd": {"eta": 100.0}, "arow": {"r": 0.1},
    "pet": {"eta": 0.1, "power_t": 0.0}, "fofs": {"eta": 0.001, "lam": 0.1},
}


def chunks(d: int, rows: int, seed: int, chunk: int):
    """The X2 stream: ``(task, iterator of (CSRBatch rows scaled to unit norm, labels))``."""
    task = make_task(d, INFORMATIVE, NOISE, seed=seed)
    return task, ((X.normalized(), y) for X, y in stream(task, rows, chunk, seed=seed))


def prefetched(iterator, depth: int = 2):
    """Iterate ``iterator`` on a second thread, ``depth`` items ahead (the generator's NumPy
    calls and the learners' numba kernels release the GIL, so the two overlap)."""
    items: queue.Queue = queue.Queue(maxsize=depth)
    done = object()

    def produce():
        try:
            for item in iterator:
                items.put(item)
        except BaseException as exc:  # noqa: BLE001 -- re-raised in the consumer
            items.put(exc)
        items.put(done)

    threading.Thread(target=produce, daemon=True).start()
    while (item := items.get()) is not done:
        if isinstance(item, BaseException):
            raise item
        yield item


def progress(label: str, done: int, total: int, started: float) -> None:
    if sys.stderr.isatty() or os.environ.get("X2_PROGRESS"):
        width = 30
        filled = int(width * done / max(total, 1))
        sys.stderr.write(f"\r  {label:5s} [{'#' * filled}{'.' * (width - filled)}] "
                         f"{done:,}/{total:,} rows, {time.perf_counter() - started:6.1f} s")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def make_learner(method: str, d: int, params: dict):
    if method == "floor":
        return GatherFloor(n_features=d)
    name, fixed = METHODS[method]
    return LEARNERS[name](n_features=d, **fixed, **params)


class GatherFloor:
    """The floor of a dense learner at this d: read the (mu, Sigma) pair of every non-zero
    from a (d, 2) float64 array, as AROW and SOFS do first, and learn nothing."""

    selects = False
    budget = None

    def __init__(self, *, n_features: int) -> None:
        self.coefficients = np.zeros((n_features, 2))
        self.coefficients[:, 1] = 1.0
        self.total = 0.0

    @staticmethod
    def memory_bytes(*, n_features: int, budget=None) -> int:
        return 16 * n_features

    def partial_fit(self, X, y) -> None:
        self.total += _gather(X.indptr, X.indices, X.values, self.coefficients)

    def predict(self, X) -> np.ndarray:
        return np.ones(X.n_rows, dtype=np.int8)

    def selected_features(self) -> np.ndarray:
        return np.empty(0, dtype=np.int64)


@njit(cache=True, nogil=True)
def _gather(indptr, indices, values, coefficients):
    total = 0.0
    for row in range(len(indptr) - 1):
        for k in range(indptr[row], indptr[row + 1]):
            total += values[k] * coefficients[indices[k], 0] + coefficients[indices[k], 1]
    return total


def warm_up(method: str, params: dict) -> None:
    """Load the learner's compiled kernels (numba's cache) outside the timed pass."""
    d = 1 << 22   # above 2^21 the selectors' feature map is a hash, as at full scale
    _, data = chunks(d, 20, 0, 20)
    X, y = next(data)
    learner = make_learner(method, d, params)
    learner.partial_fit(X, y)
    learner.predict(X)


def run_pass(method: str, params: dict, d: int, rows: int, seed: int, chunk: int) -> dict:
    """One pass over the first 90% of the stream, then the test accuracy on the rest."""
    task, data = chunks(d, rows, seed, chunk)
    n_train = rows * 9 // 10
    warm_up(method, params)
    started = time.perf_counter()
    learner = make_learner(method, d, params)
    allocate = time.perf_counter() - started
    learn = score = 0.0
    correct = seen = 0
    wall = time.perf_counter()
    train_wall = None
    for X, y in prefetched(data):
        fit_rows = min(max(n_train - seen, 0), X.n_rows)
        if fit_rows:
            t = time.perf_counter()
            learner.partial_fit(X.row_slice(0, fit_rows), y[:fit_rows])
            learn += time.perf_counter() - t
        seen += X.n_rows
        if seen >= n_train and train_wall is None:
            train_wall = time.perf_counter() - wall
        if fit_rows < X.n_rows:
            t = time.perf_counter()
            predicted = learner.predict(X.row_slice(fit_rows, X.n_rows))
            score += time.perf_counter() - t
            correct += int((predicted == y[fit_rows:]).sum())
        progress(method, seen, rows, wall)
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024   # of the pass
    selected = learner.selected_features()   # OGD and AROW: O(non-zeros) more, not counted
    return {"method": method, "params": params, "d": d, "rows": rows, "train_rows": n_train,
            "accuracy": correct / max(rows - n_train, 1),
            "seconds": learn, "end_to_end_seconds": train_wall,
            "allocate_seconds": allocate, "test_seconds": score,
            "selected": int(len(selected)),
            "informative_selected": int(np.isin(selected, task.informative).sum()),
            "memory_bytes": type(learner).memory_bytes(n_features=d, budget=learner.budget),
            "peak_rss_bytes": peak_rss}


def tune(method: str, d: int, rows: int, seed: int, chunk: int) -> dict:
    """Best validation accuracy over ``GRIDS[method]`` on one in-memory draw."""
    _, data = chunks(d, rows, seed, chunk)
    parts = list(data)
    X = concat_batches([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    n_fit = rows * 9 // 10
    space = GRIDS[method]
    scored = []
    for values in itertools.product(*space.values()):
        params = dict(zip(space, values, strict=True))
        learner = make_learner(method, d, params)
        learner.partial_fit(X.row_slice(0, n_fit), y[:n_fit])
        accuracy = float((learner.predict(X.row_slice(n_fit, rows)) == y[n_fit:]).mean())
        scored.append({"params": params, "valid_accuracy": accuracy})
        del learner
    best = max(scored, key=lambda s: s["valid_accuracy"])
    return {"method": method, "d": d, "rows": rows, "seed": seed, "grid": scored, **best}


def run_vw(d: int, rows: int, seed: int, chunk: int, bits: int) -> dict:
    """Vowpal Wabbit (logistic, its defaults, ``-b bits``), one pass over the same rows read
    from its text format, timed by itself (writing the files is not timed)."""
    import vowpalwabbit

    _, data = chunks(d, rows, seed, chunk)
    n_train = rows * 9 // 10
    with tempfile.TemporaryDirectory(prefix="x2-vw-") as tmp:
        train, test, model = Path(tmp, "train.vw"), Path(tmp, "test.vw"), Path(tmp, "m.vw")
        parts = list(data)
        X = concat_batches([p[0] for p in parts])
        y = np.concatenate([p[1] for p in parts])
        del parts
        write_vw(train, X.row_slice(0, n_train), y[:n_train])
        write_vw(test, X.row_slice(n_train, rows), y[n_train:])
        labels = y[n_train:]
        del X, y
        started = time.perf_counter()
        vowpalwabbit.Workspace(f"-d {train} -b {bits} --loss_function logistic --quiet "
                               f"-f {model}").finish()
        seconds = time.perf_counter() - started
        predictions = Path(tmp, "p.txt")
        vowpalwabbit.Workspace(f"-t -i {model} -d {test} -p {predictions} --quiet").finish()
        scores = np.loadtxt(predictions)
    return {"method": f"vw -b {bits}", "d": d, "rows": rows, "train_rows": n_train,
            "accuracy": float((np.where(scores >= 0, 1, -1) == labels).mean()),
            "seconds": seconds, "selected": None, "informative_selected": None,
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def in_child(job: dict) -> dict:
    """Run ``job`` in a fresh interpreter (its own peak RSS); its JSON answer."""
    done = subprocess.run([sys.executable, __file__, "--child", json.dumps(job)],
                          stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        return {"method": job["method"], "error": f"exit status {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def touch(n_bytes: int) -> dict:
    """Write ``n_bytes`` of memory once. A freshly booted virtual machine pays its host for
    the first touch of each page (here about 3 s per GB, and slower random access until
    then), which would otherwise fall on whichever learner runs first."""
    started = time.perf_counter()
    np.ones(n_bytes // 8)
    return {"method": "touch", "bytes": n_bytes, "seconds": time.perf_counter() - started}


def child(job: dict) -> dict:
    kind = job.pop("kind")
    if kind == "touch":
        return touch(job["n_bytes"])
    if kind == "tune":
        return tune(**job)
    if kind == "vw":
        job.pop("method")
        return run_vw(**job)
    return run_pass(**job)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0,
                        help="fraction of the 10^6 rows (d stays 10^9): 1, 0.1, 0.01")
    parser.add_argument("--quick", action="store_true",
                        help="4,000 rows at d = 10^9, fallback hyperparameters (smoke test)")
    parser.add_argument("--methods", help="comma-separated, of floor (reads the pairs "
                        f"and learns nothing), {', '.join(METHODS)}; default all (--quick: "
                        "all but the floor)")
    parser.add_argument("--d", type=int, default=D)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-tune", action="store_true", help="use the fallback values")
    parser.add_argument("--vw", action="store_true",
                        help="add Vowpal Wabbit (-b 30) on a 1/10 subset of the rows")
    parser.add_argument("--vw-bits", type=int, default=30)
    parser.add_argument("--out", type=Path, help="write the JSON here (default "
                        "benchmarks/results/x2[_scale].json)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child)), default=float))
        return

    rows = 4_000 if args.quick else int(round(ROWS * args.scale))
    chunk = 1_000 if args.quick else CHUNK
    chosen = args.methods or ",".join(METHODS if args.quick else ["floor", *METHODS])
    methods = [m.strip() for m in chosen.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS) - {"floor"})
    if unknown:
        parser.error(f"unknown methods {unknown}; known: {sorted(METHODS)}")
    print(f"X2: {rows:,} rows x {args.d:,} dimensions, {INFORMATIVE} informative + {NOISE} "
          f"noise non-zeros per row, B = {BUDGET}; {os.cpu_count()} CPUs", flush=True)
    load_before = os.getloadavg()
    tuned = {}
    for method in methods:
        if args.quick or args.no_tune or method == "floor":
            tuned[method] = {"params": FALLBACK.get(method, {}), "tuned": False}
            continue
        result = in_child({"kind": "tune", "method": method, "d": max(args.d // 10, 10_000),
                           "rows": max(rows // 10, 10_000), "seed": args.seed + 1,
                           "chunk": CHUNK})
        tuned[method] = {**result, "tuned": True}
        print(f"  tuned {method}: {result.get('params')} (validation "
              f"{result.get('valid_accuracy', float('nan')):.4f})", flush=True)
    dense = [m for m in methods if m == "floor" or not LEARNERS[METHODS[m][0]].selects]
    if dense and not args.quick:
        warmed = in_child({"kind": "touch", "method": "touch", "n_bytes": 16 * args.d})
        print(f"  touched {16 * args.d / 1e9:.1f} GB once in {warmed.get('seconds', 0):.1f} s "
              "(the host's first touch of the machine's memory)", flush=True)
    results = []
    for method in methods:
        row = in_child({"kind": "pass", "method": method, "params": tuned[method]["params"],
                        "d": args.d, "rows": rows, "seed": args.seed, "chunk": chunk})
        results.append(row)
        print(f"  {method}: {json.dumps(row, default=float)}", flush=True)
    if args.vw:
        vw_rows = max(rows // 10, 1_000)
        row = in_child({"kind": "vw", "method": "vw", "d": args.d, "rows": vw_rows,
                        "seed": args.seed, "chunk": min(chunk, vw_rows),
                        "bits": args.vw_bits})
        results.append(row)
        print(f"  vw: {json.dumps(row, default=float)}", flush=True)

    shown = [{**r, "examples_per_s": r["train_rows"] / r["seconds"] if r.get("seconds")
              else None, "peak_rss_gb": r.get("peak_rss_bytes", 0) / 1e9,
              "state_gb": r.get("memory_bytes", 0) / 1e9} for r in results]
    print(table(shown, ["method", "rows", "accuracy", "selected", "informative_selected",
                        "seconds", "end_to_end_seconds", "allocate_seconds",
                        "examples_per_s", "state_gb", "peak_rss_gb", "error"],
                title=f"X2, {rows:,} x {args.d:,}, one pass, B = {BUDGET}"))
    payload = {"d": args.d, "n_rows": rows, "n_informative": INFORMATIVE, "n_noise": NOISE,
               "budget": BUDGET, "quick": args.quick, "scale": args.scale,
               "load_average_before": load_before, "load_average_after": os.getloadavg(),
               "tuning": tuned, "rows": results}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        payload = {"machine": machine(), "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
                   **payload}
        args.out.write_text(json.dumps(payload, indent=2, default=float))
        print(f"wrote {args.out}")
    else:
        name = "x2_quick" if args.quick else ("x2" if args.scale == 1 else f"x2_{args.scale:g}")
        print(f"wrote {write_json(name, payload)}")


if __name__ == "__main__":
    main()
