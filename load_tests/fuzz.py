"""Fuzz the API of a real ``featurebudget serve`` for minutes: the suites of
``tests/support/fuzzing.py`` (the test suite runs them bounded, ``tests/service/edge/test_fuzz_api.py``)
in rounds, each round with new seeds, until ``--minutes`` are spent:

* ``schema``: schemathesis over the OpenAPI document, every operation, positive and
  negative data (the ``model`` path parameter often one of the fixture models);
* ``stateful``: schemathesis's state machine along the document's links (create ->
  examples -> predict -> feedback, retrain -> job, snapshot, delete);
* ``methods``: every undeclared method of every path (405, ``Allow``);
* ``libsvm``, ``fbx1``, ``json``: example bodies built valid, built near the edges of the
  format, and mutated bytes of valid ones;
* ``snapshots``: ``PUT /snapshot`` with real snapshots broken in their bytes, zip members,
  zip headers, ``.npy`` headers and payloads, and decoded values;
* ``--restores N``: N snapshots of fitted batch models of every family changed inside
  (the fold state, the artifact's metadata and members, the model's arrays: scaled to
  1e308 or 1e-300, NaN, infinite, shortened, emptied, retyped), one or two changes each:
  each is refused with a 4xx and every answer unchanged, or accepted and every route
  (predictions, next group, sequence, page, versions, the model) answers 2xx with finite
  numbers (``tests/support/restores.py``).

Checked on every answer: no 5xx and no connection error; a 4xx is problem+json with title,
status and detail (a 400 / 422 also with ``errors`` naming the field, item or line); a 4xx
changed nothing (the models, the target model's inspect output, snapshot, versions, jobs);
the schemathesis conformance checks; valid bodies accepted with the right count. Prints a
table and writes JSON (per suite and per operation: answers by status; every failure with a
reproduction). Exit status 1 when something failed.

    python load_tests/fuzz.py --minutes 30                  # embedded backend
    python load_tests/fuzz.py --minutes 30 --backend redis  # db 12 of 127.0.0.1:6379, flushed
    python load_tests/fuzz.py --suites '' --restores 10000  # the restores campaign alone

The server listens on the first free port of 18100-18199 (data under a temporary
directory), with 16 MiB per model and 256 MiB for all models, so fuzzed creations stay small
(64 MiB and 1 GiB with ``--restores``, whose classification models keep held-out rows).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _servers import pick_port, serve, service_env, wait_ready  # noqa: E402

from tests.support.fuzzing import Fuzzer  # noqa: E402
from tests.support.restores import campaign  # noqa: E402

# cases per suite and round (a round takes about a minute on the 2-core machine)
ROUND = {"schema": 20, "stateful": 20, "methods": 1, "libsvm": 400, "fbx1": 400,
         "json": 300, "snapshots": 400}
SUITE_STATS = {"schema": ("schema positive", "schema negative"), "stateful": ("stateful",),
               "methods": ("methods",), "libsvm": ("libsvm",), "fbx1": ("fbx1",),
               "json": ("json",), "snapshots": ("snapshot",)}


def run_round(fuzzer: Fuzzer, round_: int, seed: int, deadline: float, only: list[str],
              seconds: dict) -> None:
    for suite in only:
        if time.monotonic() > deadline:
            return
        size = ROUND[suite]
        started = time.monotonic()
        if suite == "schema":
            fuzzer.run_schema(size, seed + round_)
        elif suite == "stateful":
            fuzzer.run_stateful(size, 10, seed + round_)
        elif suite == "methods":
            if round_ == 0:
                fuzzer.run_methods()
        else:
            getattr(fuzzer, f"run_{suite}")(size, seed + round_)
        seconds[suite] = seconds.get(suite, 0.0) + time.monotonic() - started
        print(f"round {round_} {suite}: {time.monotonic() - started:.1f} s, "
              f"{sum(fuzzer._failure_counts.values())} failures so far", file=sys.stderr)


def table(results: dict) -> str:
    lines = ["| suite | cases | 2xx | 4xx | 5xx | connection errors | failures | seconds |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for suite, row in results["suites"].items():
        lines.append(f"| {suite} | {row['cases']:,} | {row['2xx']:,} | {row['4xx']:,} | "
                     f"{row['5xx']:,} | {row['error']:,} | {row['failures']:,} | "
                     f"{row['seconds']:.0f} |")
    total = results["total"]
    lines.append(f"| **total** | {total['cases']:,} | {total['2xx']:,} | {total['4xx']:,} | "
                 f"{total['5xx']:,} | {total['error']:,} | {total['failures']:,} | "
                 f"{total['seconds']:.0f} |")
    return "\n".join(lines)


def summarize(fuzzer: Fuzzer, args, seconds: dict, elapsed: float, rounds: int) -> dict:
    summary = fuzzer.summary()
    suites = {}
    for suite, names in SUITE_STATS.items():
        counts = {k: sum(summary["stats"].get(n, {}).get(k, 0) for n in names)
                  for k in ("cases", "2xx", "4xx", "5xx", "error")}
        counts["failures"] = fuzzer.suite_failures[suite]
        counts["seconds"] = seconds.get(suite, 0.0)
        if counts["cases"] or counts["error"] or counts["failures"]:
            suites[suite] = counts
    total = {k: sum(row[k] for row in suites.values())
             for k in ("cases", "2xx", "4xx", "5xx", "error", "seconds")}
    total["failures"] = sum(fuzzer.suite_failures.values())
    return {"backend": args.backend, "minutes": args.minutes, "seed": args.seed,
            "rounds": rounds, "elapsed_seconds": elapsed, "suites": suites, "total": total,
            "operations": summary["operations"], "failures": summary["failures"],
            "failure_counts": summary["failure_counts"],
            "machine": {"python": platform.python_version()}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--backend", choices=("local", "redis"), default="local")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/12",
                        help="with --backend redis: a database of its own (flushed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--suites", default=",".join(ROUND),
                        help=f"comma-separated, of {','.join(ROUND)}")
    parser.add_argument("--ports", default="18100-18199",
                        help="the server's port: the first free one of this range")
    parser.add_argument("--restores", type=int, default=0,
                        help="mutated batch snapshots to PUT after the timed suites")
    parser.add_argument("--out", default=str(ROOT / "load_tests" / "fuzz_results.json"))
    args = parser.parse_args(argv)
    only = [s for s in args.suites.split(",") if s]
    unknown = set(only) - set(ROUND)
    if unknown:
        parser.error(f"unknown suites {sorted(unknown)}")

    redis_url = args.redis_url if args.backend == "redis" else None
    if redis_url:
        import redis

        redis.Redis.from_url(redis_url).flushdb()
    work = Path(tempfile.mkdtemp(prefix="fb-fuzz-"))
    env = service_env(redis_url=redis_url, data_dir=work / "data",
                      max_model_bytes=(64 if args.restores else 16) << 20,
                      max_total_model_bytes=(1024 if args.restores else 256) << 20,
                      wait_timeout_seconds=10, **({"batch_worker": "true"} if redis_url else {}))
    low, high = (int(p) for p in args.ports.split("-"))
    server = serve(pick_port(low, high), env, work)
    failed = True
    try:
        wait_ready(server)
        fuzzer = Fuzzer(server.url, seed=args.seed,
                        log=lambda message: print(message, file=sys.stderr))
        fuzzer.setup()
        seconds: dict[str, float] = {}
        started = time.monotonic()
        deadline = started + 60 * args.minutes
        rounds = 0
        while only and time.monotonic() < deadline:
            run_round(fuzzer, rounds, args.seed * 1000, deadline, only, seconds)
            rounds += 1
        results = summarize(fuzzer, args, seconds, time.monotonic() - started, rounds)
        if args.restores:
            restores = campaign(server.url, args.restores, args.seed,
                                log=lambda message: print(message, file=sys.stderr))
            results["restores"] = restores
            results["total"]["failures"] += restores["counts"]["failures"]
        tracebacks = server.tail(10_000).count("Traceback")
        results["server_tracebacks"] = tracebacks
        failed = bool(results["total"]["failures"] or tracebacks)
    finally:
        code = server.stop()
        if redis_url:
            import redis

            redis.Redis.from_url(redis_url).flushdb()
    results["server_exit_code"] = code
    print(f"\nfuzzing for {results['elapsed_seconds'] / 60:.1f} min on the {args.backend} backend "
          f"({rounds} rounds, seed {args.seed}); server log {server.log_path}\n")
    print(table(results))
    if results["failures"]:
        print("\nfailures (first of each kind):")
        for failure in results["failures"]:
            print(f"- {failure['kind']} at {failure['where']}: {failure['message'][:300]}\n"
                  f"  {failure['reproduce'][:300]}")
    if "restores" in results:
        counts = results["restores"]["counts"]
        print(f"\nrestores: {counts['mutations']:,} mutated snapshots, "
              f"{counts.get('refused', 0):,} refused (4xx, nothing changed), "
              f"{counts.get('accepted', 0):,} accepted (every route 2xx and finite), "
              f"{counts.get('5xx', 0):,} x 5xx, {counts['failures']:,} failures, "
              f"{counts['seconds']:.0f} s")
        for failure in results["restores"]["failures"][:10]:
            print(f"- {failure[:300]}")
    print(f"\nserver tracebacks in its log: {results['server_tracebacks']}")
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
