"""The rates behind the event loop's one offload rule (:func:`service.priority.offload`).

Each kind of work the service decides to run inline or on a thread is timed here on this
machine, at sizes around the loop's budget, with the code the service runs: a create body
parsed and validated, a serving view decoded, a learner allocated, a batch encoded for the
log, an embedded-log append, an online learner's scores. Prints each rate beside the one in
``service.priority.RATES`` and the size the budget lets run inline; ``--json PATH`` writes
them. Median of ``--repeats`` timings per kind (after one warm-up call).

    python benchmarks/offload_rates.py [--repeats 15] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from algorithms.online import LEARNERS  # noqa: E402
from algorithms.sparse import CSRBatch  # noqa: E402
from algorithms.sparse.hashing import FeatureHasher  # noqa: E402
from service import priority  # noqa: E402
from service.api.create_body import parse_create  # noqa: E402
from service.ingest import (  # noqa: E402
    ExampleBatch,
    decode_bin,
    parse_json_body,
    parse_libsvm_body,
)
from service.online.view import ServingView, decode  # noqa: E402
from service.settings import Settings  # noqa: E402
from service.storage.local import LocalLog  # noqa: E402


def _median_seconds(function, repeats: int) -> float:
    function()  # warm-up: numba compiles, caches fill
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _batch(rows: int, nnz_per_row: int, n_features: int, seed: int = 0) -> ExampleBatch:
    rng = np.random.default_rng(seed)
    indices = np.sort(rng.choice(n_features, (rows, nnz_per_row)), axis=1)
    indices = np.array([np.unique(r)[:nnz_per_row] for r in indices], dtype=object)
    indptr = np.zeros(rows + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(r) for r in indices])
    flat = np.concatenate(list(indices)).astype(np.int32)
    X = CSRBatch(indptr, flat, rng.standard_normal(len(flat)), n_features)
    return ExampleBatch(X, np.where(rng.random(rows) < 0.5, 1, -1).astype(np.int8))


def create_body(repeats: int) -> tuple[float, float]:
    """(bytes, seconds) of a batch model's create body of about 256 KiB."""
    groups = [{"name": f"group{g}", "cost": 1.0 + g % 7,
               "features": [f"g{g}_feature_{i}" for i in range(40)]} for g in range(300)]
    body = json.dumps({"name": "rates", "algorithm": "cs-g-omp", "groups": groups}).encode()
    settings = Settings()
    return len(body), _median_seconds(
        lambda: parse_create(body, "application/json", settings), repeats)


def view_decode(repeats: int) -> tuple[float, float]:
    """(bytes, seconds) of a serving view of 4,096 weights, each with its feature's name,
    decoded and checked."""
    n, D = 4096, 1 << 20
    rng = np.random.default_rng(1)
    indices = np.sort(rng.choice(D, n, replace=False)).astype(np.int64)
    view = ServingView("5-0", time.time(), 100, 100, 100, 50, indices,
                       rng.standard_normal(n),
                       {int(i): f"namespace^feature_{i}" for i in indices})
    blob = view.encode()
    return len(blob), _median_seconds(lambda: decode(blob, D), repeats)


def learner_bytes(repeats: int) -> tuple[float, float]:
    """(bytes, seconds) of a SOFS learner over 2^20 features allocated."""
    D = 1 << 20
    cls = LEARNERS["sofs"]
    size = cls.memory_bytes(n_features=D, budget=1000)
    return size, _median_seconds(lambda: cls(n_features=D, budget=1000), repeats)


def encode_nnz(repeats: int) -> tuple[float, float]:
    """(non-zeros, seconds) of 4,000 examples of 50 non-zeros encoded for the log."""
    batch = _batch(4000, 50, 1 << 20)
    return batch.X.nnz, _median_seconds(batch.encode, repeats)


def append_bytes(repeats: int) -> tuple[float, float]:
    """(bytes, seconds) of a 1 MiB record appended to an embedded log (no fsync)."""
    data = bytes(np.random.default_rng(2).integers(0, 256, 1 << 20, dtype=np.uint8))
    with tempfile.TemporaryDirectory() as directory:
        log = LocalLog(Path(directory), segment_bytes=1 << 30, fsync=False)
        seconds = _median_seconds(lambda: log.append([("bin", data)]), repeats)
        log.close()
    return len(data), seconds


def scores_nnz(repeats: int) -> tuple[float, float]:
    """(non-zeros, seconds) of 1,000 examples of 50 non-zeros scored by a trained SOFS
    learner and by its serving view (the slower of the two)."""
    D = 1 << 20
    learner = LEARNERS["sofs"](n_features=D, budget=1000)
    train = _batch(2000, 50, D, seed=3)
    learner.partial_fit(train.X, train.labels)
    weights = learner.coef_ if hasattr(learner, "coef_") else None
    batch = _batch(1000, 50, D, seed=4)
    seconds = _median_seconds(lambda: learner.decision_function(batch.X), repeats)
    if weights is not None:
        dense = np.asarray(weights).ravel()
        nz = np.flatnonzero(dense)
        view = ServingView("1-0", time.time(), 1, 1, 1, 1, nz.astype(np.int64), dense[nz])
        seconds = max(seconds, _median_seconds(lambda: view.decision_function(batch.X),
                                               repeats))
    return batch.X.nnz, seconds


def _example_bodies() -> dict[str, bytes]:
    """2,000 examples of 20 non-zeros as JSON (named features, the slower path: each
    name hashed), libsvm text and FBX1."""
    batch = _batch(2000, 20, 1 << 20, seed=5)
    X, labels = batch.X, batch.labels
    rows = [(X.indices[X.indptr[i]:X.indptr[i + 1]].tolist(),
             X.values[X.indptr[i]:X.indptr[i + 1]].tolist(), int(labels[i]))
            for i in range(X.n_rows)]
    document = {"examples": [{"features": {"words": {f"w{a}": b for a, b in zip(i, v, strict=True)}},
                              "label": y} for i, v, y in rows]}
    text = "\n".join(f"{y} " + " ".join(f"{a + 1}:{b!r}" for a, b in zip(i, v, strict=True))
                     for i, v, y in rows)
    return {"json": json.dumps(document).encode(), "libsvm": text.encode(),
            "bin": batch.encode()}


def _parse(fmt: str):
    def measure(repeats: int) -> tuple[float, float]:  # (bytes, seconds) of one body
        body, D = _example_bodies()[fmt], 1 << 20
        hasher = FeatureHasher(20)
        parse = {"json": lambda: parse_json_body(body, D, hasher),
                 "libsvm": lambda: parse_libsvm_body(body, D),
                 "bin": lambda: decode_bin(body, D, field="body", keep_raw=True)}[fmt]
        return len(body), _median_seconds(parse, repeats)
    return measure


KINDS = {"parse_json": _parse("json"), "parse_libsvm": _parse("libsvm"),
         "parse_bin": _parse("bin"), "create_body": create_body, "view_decode": view_decode,
         "learner_bytes": learner_bytes, "encode_nnz": encode_nnz,
         "append_bytes": append_bytes, "scores_nnz": scores_nnz}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    budget = priority.LOOP_BUDGET_S
    rows = []
    print(f"loop budget {budget * 1e3:g} ms (service.priority.LOOP_BUDGET_S)")
    print(f"{'work':<14} {'size':>12} {'ms':>8} {'rate/s':>12} {'in RATES':>12} "
          f"{'inline up to':>14}")
    for kind, measure in KINDS.items():
        amount, seconds = measure(args.repeats)
        rate = amount / seconds
        rows.append({"work": kind, "amount": amount, "seconds": seconds, "rate": rate,
                     "rate_in_service": priority.RATES[kind],
                     "inline_up_to": budget * priority.RATES[kind]})
        print(f"{kind:<14} {amount:>12,.0f} {seconds * 1e3:>8.3f} {rate:>12.3g} "
              f"{priority.RATES[kind]:>12.3g} {budget * priority.RATES[kind]:>14,.0f}")
    if args.json is not None:
        args.json.write_text(json.dumps({"loop_budget_s": budget, "rates": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
