"""Online feature selection on the SOFS paper's X1 data, side by side with peers.

Reports (one run, same data, same machine):
- test accuracy of PET (seed's mistake-driven and LIBSOL's hinge variant), FOFS and SOFS at
  B in {50, 100, 200, 400, 800}, and OGD / AROW, each tuned per B on a validation split of
  the training part; scikit-learn SGDClassifier (hinge, and l1 with its real non-zeros),
  River (Perceptron, LogisticRegression, on a subset), Vowpal Wabbit (one pass);
- training throughput on in-memory CSR (examples/s, non-zeros/s) against scikit-learn's
  ``partial_fit``: ours on the project's (validated) CSR batch, and from the same scipy
  matrix scikit-learn gets (conversion and validation included); with ``--libsol DIR``,
  LIBSOL's OGD, AROW, SOFS, FOFS and PET on the same rows in the same rounds
  (``benchmarks/libsol.py`` says how to build it);
- end to end from a libsvm file (parse + train) against ``load_svmlight_file`` +
  ``partial_fit`` and VW reading its own format;
- time per example as d grows 10^4 -> 10^6 -> 10^8 at fixed m (SOFS, FOFS, PET).

Usage: python benchmarks/online.py [--quick] [--samples N] [--libsol SOL_CHECKOUT]
Writes benchmarks/results/online.json and prints markdown tables.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import SelfTimed, best_time, best_times_interleaved, table, write_json  # noqa: E402
from libsol import ALGORITHMS as LIBSOL_ALGORITHMS  # noqa: E402
from libsol import TUNED as LIBSOL_TUNED  # noqa: E402
from libsol import prepare as prepare_libsol  # noqa: E402
from online_peers import run_river, run_sklearn, run_vw  # noqa: E402

from algorithms.datasets.online_synthetic import concatenate, make_task, make_x1, stream  # noqa: E402
from algorithms.online import LEARNERS  # noqa: E402
from algorithms.sparse import CSRBatch  # noqa: E402
from algorithms.sparse._prefetch import stream_ahead  # noqa: E402
from algorithms.sparse.libsvm import iter_libsvm, load_libsvm, write_libsvm  # noqa: E402

BUDGETS = [50, 100, 200, 400, 800]
GRIDS = {   # the paper's hyperparameters, searched on a validation split per B
    "pet": {"update_on": ["mistake"]},
    "pet-hinge": {"update_on": ["hinge"],   # LIBSOL's grid 2^-2..2^8 is densest near 1
                  "eta": [0.01, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 10.0], "power_t": [0.0, 0.5]},
    "fofs": {"eta": [0.005, 0.01, 0.05, 0.2, 1.0], "lam": [1e-4, 1e-3, 1e-2, 0.1, 0.5]},
    "sofs": {"r": [0.001, 0.01, 0.1, 1.0, 10.0]},
    "ogd": {"eta": [0.1, 1.0, 10.0, 100.0]},
    "arow": {"r": [0.01, 0.1, 1.0, 10.0, 100.0]},
}
LIBSOL = {  # LIBSOL's figures on the same X1 shape, shown beside ours in docs/benchmarks.md
    "sofs": {50: 0.638, 200: 0.988, 400: 0.987, 800: 0.986},
    "fofs": {50: 0.724, 200: 0.875, 400: 0.914, 800: 0.941},
    "pet-hinge": {50: 0.729, 200: 0.884, 400: 0.950, 800: 0.969},
}


def algorithm_of(variant: str) -> str:
    return variant.split("-")[0]


def grid(variant: str):
    space = GRIDS[variant]
    for values in itertools.product(*space.values()):
        yield dict(zip(space, values, strict=True))


def accuracy(learner, X: CSRBatch, y: np.ndarray) -> float:
    return float((learner.predict(X) == y).mean())


def fit(variant: str, budget: int | None, params: dict, X: CSRBatch, y: np.ndarray):
    cls = LEARNERS[algorithm_of(variant)]
    kwargs = dict(params, n_features=X.n_features)
    if cls.selects:
        kwargs["budget"] = budget
    return cls(**kwargs).partial_fit(X, y)


def fit_scipy(variant: str, budget: int | None, params: dict, X, y: np.ndarray):
    """``fit`` from a scipy CSR matrix, as a user holding one would call it."""
    cls = LEARNERS[algorithm_of(variant)]
    kwargs = dict(params, n_features=X.shape[1])
    if cls.selects:
        kwargs["budget"] = budget
    return cls(**kwargs).partial_fit(X, y)


def tune(variant, budget, train, y_train, valid, y_valid):
    scored = [(accuracy(fit(variant, budget, p, train, y_train), valid, y_valid), p)
              for p in grid(variant)]
    return max(scored, key=lambda item: item[0])


def run_ours(X, y, n_train, n_fit):
    """Tune on (first n_fit, rest of train), then refit on train and test."""
    train, test = X.row_slice(0, n_train), X.row_slice(n_train, X.n_rows)
    y_train, y_test = y[:n_train], y[n_train:]
    fit_part, valid = train.row_slice(0, n_fit), train.row_slice(n_fit, n_train)
    rows, chosen = [], {}
    for variant in GRIDS:
        budgets = BUDGETS if LEARNERS[algorithm_of(variant)].selects else [None]
        for budget in budgets:
            valid_acc, params = tune(variant, budget, fit_part, y[:n_fit], valid,
                                     y[n_fit:n_train])
            learner = fit(variant, budget, params, train, y_train)
            rows.append({"method": variant, "B": budget or "all", "params": params,
                         "valid_acc": valid_acc, "test_acc": accuracy(learner, test, y_test),
                         "nonzeros": len(learner.selected_features())})
            chosen[(variant, budget)] = params
            print(f"  {variant:10s} B={budget}: test {rows[-1]['test_acc']:.4f} {params}",
                  flush=True)
    return rows, chosen


def run_libsol(libsol):
    """LIBSOL's PET (hinge) and SOFS tuned per B like ours, on the same splits."""
    rows = []
    for variant in LIBSOL_TUNED:
        for budget in BUDGETS:
            params, valid_acc, test_acc = libsol.tune_and_test(variant, budget,
                                                               list(grid(variant)))
            rows.append({"method": f"libsol {variant}", "B": budget, "params": params,
                         "valid_acc": valid_acc, "test_acc": test_acc})
            print(f"  libsol {variant:10s} B={budget}: test {test_acc:.4f} {params}",
                  flush=True)
    return rows


@njit(cache=True)
def _read_once(indptr, indices, values):
    """Sum every index and value: the memory traffic of one pass, with no learning. Four
    running sums, so that the loop is not bound by the latency of one floating-point add
    chain (with one sum it ran at half this speed: a latency, not a memory, limit)."""
    s0 = s1 = s2 = s3 = 0.0
    count = 0
    n = indptr[-1]
    full = n - n % 4
    for k in range(0, full, 4):
        s0 += values[k]
        s1 += values[k + 1]
        s2 += values[k + 2]
        s3 += values[k + 3]
        count += indices[k] + indices[k + 1] + indices[k + 2] + indices[k + 3]
    for k in range(full, n):
        s0 += values[k]
        count += indices[k]
    return (s0 + s1) + (s2 + s3) + count


@njit(cache=True)
def _gather_once(indptr, indices, values, weights):
    """One pass that reads the batch and gathers w[index] per entry, as every linear
    learner's score pass must (the stream prefetched per entry as our kernels do; four
    running sums); no learning."""
    s0 = s1 = s2 = s3 = 0.0
    n = np.uint64(indptr[-1])
    full = n - n % np.uint64(4)
    one, two, three = np.uint64(1), np.uint64(2), np.uint64(3)
    for k in range(np.uint64(0), full, np.uint64(4)):
        stream_ahead(indices, values, k)
        s0 += weights[np.uint32(indices[k])] * values[k]
        stream_ahead(indices, values, k + one)
        s1 += weights[np.uint32(indices[k + one])] * values[k + one]
        stream_ahead(indices, values, k + two)
        s2 += weights[np.uint32(indices[k + two])] * values[k + two]
        stream_ahead(indices, values, k + three)
        s3 += weights[np.uint32(indices[k + three])] * values[k + three]
    for k in range(full, n):
        s0 += weights[np.uint32(indices[k])] * values[k]
    return (s0 + s1) + (s2 + s3)


def throughput_budget(variant: str) -> int | None:
    """The throughput rows' B: 200 for the selectors, none for OGD and AROW."""
    return 200 if LEARNERS[algorithm_of(variant)].selects else None


def throughput(X, y, n_train, chosen, libsol=None):
    """Training examples/s on in-memory CSR, ours at B=200 vs scikit-learn partial_fit (and
    LIBSOL's learners with the same hyperparameters when ``libsol`` is given), all timed in
    interleaved rounds (``best_times_interleaved``)."""
    from sklearn.linear_model import SGDClassifier
    train, y_train = X.row_slice(0, n_train), y[:n_train]
    scipy_train = train.to_scipy()

    def sklearn_run():
        SGDClassifier(loss="hinge", random_state=0).partial_fit(scipy_train, y_train,
                                                                classes=[-1, 1])
    weights = np.ones(train.n_features)
    runs = {"sklearn": sklearn_run,
            "ceiling": lambda: _read_once(train.indptr, train.indices, train.values),
            "gather": lambda: _gather_once(train.indptr, train.indices, train.values, weights)}
    for variant in GRIDS:
        budget = throughput_budget(variant)
        params = chosen[(variant, budget)]
        fit(variant, budget, params, train.row_slice(0, 100), y_train[:100])   # warm JIT
        runs[variant] = lambda v=variant, b=budget, p=params: fit(v, b, p, train, y_train)
        # the same fit from the scipy matrix scikit-learn gets: conversion and validation in
        runs[f"{variant} from scipy"] = (lambda v=variant, b=budget, p=params:
                                         fit_scipy(v, b, p, scipy_train, y_train))
    libsol_accuracy = {}
    if libsol is not None:
        for variant in LIBSOL_ALGORITHMS:
            budget = throughput_budget(variant)

            def libsol_run(v=variant, b=budget, p=chosen[(variant, budget)]):
                seconds, libsol_accuracy[v] = libsol.run(v, b, p)
                return SelfTimed(seconds)
            runs[f"libsol {variant}"] = libsol_run
    _read_once(train.indptr[:2], train.indices, train.values)
    _gather_once(train.indptr[:2], train.indices, train.values, weights)
    seconds = best_times_interleaved(runs)
    base, ceiling, gather = seconds["sklearn"], seconds["ceiling"], seconds["gather"]
    rows = [{"method": "ceiling: read the CSR once (indices + values, no learning)",
             "examples_per_s": n_train / ceiling, "nonzeros_per_s": train.nnz / ceiling,
             "vs_sklearn": base / ceiling,
             "GB_per_s": (train.indices.nbytes + train.values.nbytes) / ceiling / 1e9},
            {"method": "gather floor: read the CSR and gather w[index] per entry (a score "
                       "pass alone, no learning)",
             "examples_per_s": n_train / gather, "nonzeros_per_s": train.nnz / gather,
             "vs_sklearn": base / gather},
            {"method": "sklearn SGD partial_fit (hinge)",
             "examples_per_s": n_train / base, "nonzeros_per_s": train.nnz / base,
             "vs_sklearn": 1.0}]
    for variant in GRIDS:
        budget = throughput_budget(variant)
        ours, from_scipy = seconds[variant], seconds[f"{variant} from scipy"]
        rows.append({"method": f"{variant} (B={budget or 'all'})",
                     "examples_per_s": n_train / ours, "nonzeros_per_s": train.nnz / ours,
                     "vs_sklearn": base / ours,
                     "from_scipy_examples_per_s": n_train / from_scipy,
                     "from_scipy_vs_sklearn": base / from_scipy})
        if variant in libsol_accuracy:
            rows[-1]["vs_libsol"] = seconds[f"libsol {variant}"] / ours
    for variant in libsol_accuracy:
        budget = throughput_budget(variant)
        theirs = seconds[f"libsol {variant}"]
        rows.append({"method": f"LIBSOL {LIBSOL_ALGORITHMS[variant]} (B={budget or 'all'}), "
                               "learning alone on batches in memory",
                     "examples_per_s": n_train / theirs, "nonzeros_per_s": train.nnz / theirs,
                     "vs_sklearn": base / theirs, "test_acc": libsol_accuracy[variant]})
    return rows


def end_to_end(X, y, rows_in_file, chosen, workdir: Path, vw_timing):
    from sklearn.datasets import load_svmlight_file
    from sklearn.linear_model import SGDClassifier
    part, labels = X.row_slice(0, rows_in_file), y[:rows_in_file]
    path = workdir / "train.svm"
    write_libsvm(path, part, labels, precision=7)
    size_mb = path.stat().st_size / 1e6
    params = chosen[("sofs", 200)]

    def ours():   # the next chunk is parsed in a background thread while SOFS learns
        learner = LEARNERS["sofs"](n_features=X.n_features, budget=200, **params)
        for batch, targets in iter_libsvm(path, n_features=X.n_features):
            learner.partial_fit(batch, targets)

    def ours_whole_file():
        batch, targets = load_libsvm(path, n_features=X.n_features)
        LEARNERS["sofs"](n_features=X.n_features, budget=200, **params).partial_fit(batch,
                                                                                   targets)

    def parse_only():
        load_libsvm(path, n_features=X.n_features)

    def sklearn_e2e():
        data, targets = load_svmlight_file(str(path), n_features=X.n_features)
        data.indices = data.indices.astype(np.int32)   # SGDClassifier refuses int64 indices
        data.indptr = data.indptr.astype(np.int32)
        SGDClassifier(loss="hinge").partial_fit(data, targets, classes=[-1, 1])

    ours()
    seconds = best_time(ours, 2)
    whole_seconds = best_time(ours_whole_file, 2)
    parse_seconds = best_time(parse_only, 2)
    sk_seconds = best_time(sklearn_e2e, 1)
    rows = [{"method": "featurebudget iter_libsvm -> SOFS (B=200), pipelined",
             "examples_per_s": rows_in_file / seconds, "seconds": seconds},
            {"method": "featurebudget load_libsvm, then SOFS (B=200)",
             "examples_per_s": rows_in_file / whole_seconds, "seconds": whole_seconds},
            {"method": "featurebudget load_libsvm (parse only)",
             "examples_per_s": rows_in_file / parse_seconds, "seconds": parse_seconds,
             "MB_per_s": size_mb / parse_seconds},
            {"method": "sklearn load_svmlight_file + SGD partial_fit",
             "examples_per_s": rows_in_file / sk_seconds, "seconds": sk_seconds}]
    # The same rows written exactly (write_libsvm's default, shortest repr: 16-17 digits)
    exact_path = workdir / "train_exact.svm"
    write_libsvm(exact_path, part, labels)
    exact_mb = exact_path.stat().st_size / 1e6
    exact_seconds = best_time(lambda: load_libsvm(exact_path, n_features=X.n_features), 2)
    sk_exact_seconds = best_time(lambda: load_svmlight_file(str(exact_path),
                                                            n_features=X.n_features), 1)
    rows += [{"method": f"featurebudget load_libsvm (parse only), exact values ({exact_mb:.0f} MB)",
              "examples_per_s": rows_in_file / exact_seconds, "seconds": exact_seconds,
              "MB_per_s": exact_mb / exact_seconds},
             {"method": "sklearn load_svmlight_file (parse only), exact values",
              "examples_per_s": rows_in_file / sk_exact_seconds, "seconds": sk_exact_seconds,
              "MB_per_s": exact_mb / sk_exact_seconds}]
    if "vw_file_seconds" in vw_timing:
        n_train = vw_timing["n_train"]
        rows.append({"method": "vowpal wabbit -d (own format, logistic)",
                     "examples_per_s": n_train / vw_timing["vw_file_seconds"],
                     "seconds": vw_timing["vw_file_seconds"]})
    return rows, size_mb


@njit(cache=True)
def _touch_state(indptr, indices, values, state):
    """Per row, sum x_j mu_j + x_j^2 Sigma_j from a (d, 2) state, then write both back
    nudged: the reads and writes of SOFS's (and AROW's) step on its O(d) state, without the
    learning; the memory floor of a step at that d."""
    total = 0.0
    for row in range(len(indptr) - 1):
        lo, hi = np.uint64(indptr[row]), np.uint64(indptr[row + 1])
        mean, variance = 0.0, 0.0   # two sums, as SOFS's margin and confidence
        for k in range(lo, hi):
            stream_ahead(indices, values, k)   # as the learners do
            j, x = np.uint32(indices[k]), values[k]
            mean += x * state[j, 0]
            variance += x * x * state[j, 1]
        total += mean + variance
        nudge = 1e-12 / (1.0 + abs(total))
        for k in range(lo, hi):
            j, x = np.uint32(indices[k]), values[k]
            state[j, 0] += nudge * x
            state[j, 1] -= nudge * x * x
    return total


def scaling(n, dimensions, rounds=3):
    """Time per example at fixed m = 600 as d grows (B = 200), and the memory floor of a
    step on an O(d) state like SOFS's (``_touch_state``). Each round times every (d,
    method) once, in turn, and the best of the rounds counts, so that the machine's drift
    does not go into the ratios across d."""
    methods = ("state_floor", "sofs", "fofs", "pet")
    data = {}
    for d in dimensions:
        X, y = concatenate(stream(make_task(d, 200, 400, seed=7), n, seed=7))
        data[d] = (X.normalized(), y)
    X, y = data[dimensions[0]]
    _touch_state(X.indptr[:2], X.indices, X.values, np.ones((dimensions[0], 2)))
    for name in methods[1:]:   # compile
        LEARNERS[name](n_features=dimensions[0], budget=200).partial_fit(X.row_slice(0, 50),
                                                                         y[:50])
    best = {}
    for _ in range(rounds):
        for d in dimensions:
            X, y = data[d]
            for name in methods:
                if name == "state_floor":
                    state = np.ones((d, 2))   # written: its pages are in memory, as SOFS's
                    start = time.perf_counter()
                    _touch_state(X.indptr, X.indices, X.values, state)
                else:
                    state = LEARNERS[name](n_features=d, budget=200)
                    start = time.perf_counter()
                    state.partial_fit(X, y)
                seconds = time.perf_counter() - start
                del state
                best[d, name] = min(best.get((d, name), float("inf")), seconds)
    rows = []
    for d in dimensions:
        row = {"d": f"{d:.0e}"}
        for name in methods:
            row[f"{name}_us_per_example"] = best[d, name] / n * 1e6
            row[f"{name}_vs_smallest_d"] = best[d, name] / best[dimensions[0], name]
        rows.append(row)
        print(f"  d={d:.0e}: {row}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 samples, small scaling run")
    parser.add_argument("--samples", type=int, default=None)
    parser.add_argument("--libsol", type=Path, default=None, metavar="SOL_CHECKOUT",
                        help="a built github.com/LIBOL/SOL checkout: time its learners too")
    args = parser.parse_args()
    n = args.samples or (20_000 if args.quick else 100_000)
    n_train = int(0.8 * n)
    n_fit = int(0.8 * n_train)
    print(f"X1: generating {n} x 20,000 (200 informative + 400 noise per sample)", flush=True)
    X, y, _ = make_x1(n_samples=n, seed=0)
    X = X.normalized()
    results = {"samples": n, "train": n_train, "validation": n_train - n_fit}
    print("accuracy (tuned per B on a validation split):", flush=True)
    ours, chosen = run_ours(X, y, n_train, n_fit)
    peers = run_sklearn(X, y, n_train) + run_river(X, y, n_train, 2000 if args.quick else 5000)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        vw_rows, vw_timing = run_vw(X, y, n_train, workdir)
        vw_timing["n_train"] = n_train
        peers += vw_rows
        libsol = None
        if args.libsol is not None:
            print("LIBSOL: compiling the harness, converting the data", flush=True)
            libsol = prepare_libsol(args.libsol, workdir, {
                "fit": (X.row_slice(0, n_fit), y[:n_fit]),
                "valid": (X.row_slice(n_fit, n_train), y[n_fit:n_train]),
                "train": (X.row_slice(0, n_train), y[:n_train]),
                "test": (X.row_slice(n_train, X.n_rows), y[n_train:])})
            ours += run_libsol(libsol)
        print("throughput:", flush=True)
        speed = throughput(X, y, n_train, chosen, libsol)
        e2e, size_mb = end_to_end(X, y, min(n_train, 20_000), chosen, workdir, vw_timing)
    print("scaling in d:", flush=True)
    dims = [10**4, 10**6] if args.quick else [10**4, 10**6, 10**8]
    scale = scaling(5_000 if args.quick else 20_000, dims)
    accuracy_table = []
    for variant in list(GRIDS) + [f"libsol {v}" for v in LIBSOL_TUNED if args.libsol]:
        row = {"method": variant}
        for r in ours:
            if r["method"] == variant:
                row[f"B={r['B']}"] = r["test_acc"]
        accuracy_table.append(row)
    results.update(ours=ours, peers=peers, throughput=speed, end_to_end=e2e,
                   libsvm_file_mb=size_mb, scaling=scale, libsol_reference=LIBSOL)
    path = write_json("online", results)
    print(table(accuracy_table, ["method"] + [f"B={b}" for b in BUDGETS] + ["B=all"],
                "Test accuracy on X1 (one pass, tuned per B)"))
    print(table(peers, ["method", "test_acc", "nonzeros", "examples_per_s"], "Peers"))
    print(table(speed, ["method", "examples_per_s", "nonzeros_per_s", "vs_sklearn",
                        "from_scipy_examples_per_s", "from_scipy_vs_sklearn", "vs_libsol",
                        "test_acc"],
                "Training throughput, in-memory CSR (ours: the project's CSR batch, and from "
                "the scipy matrix scikit-learn gets)"))
    print(table(e2e, ["method", "examples_per_s", "seconds", "MB_per_s"],
                f"End to end from a libsvm file ({size_mb:.0f} MB)"))
    print(table(scale, ["d"] + [f"{a}_{k}" for a in ("state_floor", "sofs", "fofs", "pet")
                                for k in ("us_per_example", "vs_smallest_d")],
                "Time per example vs dimension (m = 600, B = 200)"))
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
