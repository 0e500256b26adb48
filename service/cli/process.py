"""Process commands: ``serve`` (the HTTP API), ``worker`` (the batch worker) and ``warmup``
(compile every kernel into numba's cache)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from service.storage import schemes


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    if args.redis_url:
        schemes.set_url_env(args.redis_url)
    if args.data_dir:
        os.environ["FEATUREBUDGET_DATA_DIR"] = args.data_dir
    if args.workers > 1 and not schemes.shared_in_env():
        print("featurebudget serve: --workers > 1 needs Redis (FEATUREBUDGET_STORAGE_URL); "
              "the embedded backend serves from one process", file=sys.stderr)
        return 2
    created = None
    if args.workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        created = tempfile.mkdtemp(prefix="fb-metrics-")  # /metrics across workers
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = created
    try:
        uvicorn.run("service.app:create_app", factory=True, host=args.host, port=args.port,
                    workers=args.workers, log_level=args.log_level,
                    log_config=_log_config(args.log_level))
    finally:
        if created:  # the directory this command made, and only that one
            import shutil

            shutil.rmtree(created, ignore_errors=True)
    return 0


def _log_config(level: str) -> dict:
    """uvicorn's logging configuration plus the service's own ``featurebudget`` loggers at
    ``level`` (start-up lines: backend, models restored, time to ready), in every worker."""
    import copy

    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["featurebudget"] = {"handlers": ["default"], "level": level.upper(),
                                          "propagate": False}
    return config


def _warmup(args: argparse.Namespace) -> int:
    """Compile every numba kernel into the cache (the image runs this at build time)."""
    import time as clock

    from service.warmup import warm_all

    started = clock.perf_counter()
    failures = warm_all(report=None if args.quiet else
                        lambda line: print(f"warmup: {line}", file=sys.stderr, flush=True))
    print(json.dumps({"seconds": round(clock.perf_counter() - started, 1),
                      "retrain_failed": failures}))
    return 0


def _worker(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from service.batch.worker.runner import run_worker
    from service.settings import Settings
    from service.storage import make_storage

    if args.redis_url:
        schemes.set_url_env(args.redis_url)
    if args.data_dir:
        os.environ["FEATUREBUDGET_DATA_DIR"] = args.data_dir
    settings = Settings()
    if not make_storage(settings).shared:  # (constructed, not opened)
        print("featurebudget worker: needs Redis (--redis-url or FEATUREBUDGET_STORAGE_URL); on "
              "the embedded backend `featurebudget serve` runs the batch worker itself",
              file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(run_worker(settings, metrics_port=args.metrics_port))
    return 0


_LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
_LEVELS_HELP = f"{', '.join(_LOG_LEVELS[:-1])} or {_LOG_LEVELS[-1]}"
_SERVE_EXAMPLES = """examples:
  featurebudget serve                                  # embedded backend in ./data, port 8000
  featurebudget serve --data-dir /var/lib/fb --port 8080 --host 0.0.0.0
  featurebudget serve --redis-url redis://127.0.0.1:6379/0 --workers 4  # beside a worker"""
_WORKER_EXAMPLES = """examples:
  featurebudget worker --redis-url redis://127.0.0.1:6379/0
  FEATUREBUDGET_REDIS_URL=redis://redis:6379/0 featurebudget worker --metrics-port 0"""


def add_process_commands(commands) -> None:
    """``serve``, ``worker`` and ``warmup``."""
    serve = commands.add_parser(
        "serve", help="run the HTTP API (embedded backend by default; Redis with --redis-url)",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_SERVE_EXAMPLES,
        description="Serve the HTTP API (and /ui, /metrics, /docs). On the embedded backend "
                    "this process\nalso folds the logs and runs the batch worker; on Redis, "
                    "run `featurebudget worker`\nbeside it for batch models.")
    serve.add_argument("--host", metavar="ADDRESS",
                       default=os.environ.get("FEATUREBUDGET_HOST", "127.0.0.1"),
                       help="address to listen on (default $FEATUREBUDGET_HOST or 127.0.0.1; "
                            "0.0.0.0 for every interface)")
    serve.add_argument("--port", type=int, default=int(os.environ.get("FEATUREBUDGET_PORT",
                                                                      "8000")),
                       help="TCP port (default $FEATUREBUDGET_PORT or 8000)")
    serve.add_argument("--workers", type=int, default=1, metavar="N",
                       help="API processes (default 1; more than 1 needs --redis-url)")
    serve.add_argument("--data-dir", default=None, metavar="DIR",
                       help="embedded backend directory (default $FEATUREBUDGET_DATA_DIR or "
                            "./data)")
    serve.add_argument("--redis-url", default=None, metavar="URL",
                       help="serve from Redis instead of the embedded backend, e.g. "
                            "redis://127.0.0.1:6379/0 (default $FEATUREBUDGET_STORAGE_URL or "
                            "$FEATUREBUDGET_REDIS_URL)")
    serve.add_argument("--log-level", default="info", type=str.lower, choices=_LOG_LEVELS,
                       metavar="LEVEL", help=f"log level of the server and the service: "
                                             f"{_LEVELS_HELP} (default info)")
    serve.set_defaults(handler=_serve)

    worker = commands.add_parser(
        "worker", help="run the batch worker against Redis: fold batch models' logs, "
                       "retrain, publish versions",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_WORKER_EXAMPLES,
        description="Fold the batch models' logs, run their retrain jobs and publish the "
                    "versions the\nAPI processes serve (Redis only: on the embedded backend "
                    "`featurebudget serve`\ndoes this itself). Run one or more beside the API.")
    worker.add_argument("--redis-url", default=None, metavar="URL",
                        help="the API's Redis, e.g. redis://127.0.0.1:6379/0 (default "
                             "$FEATUREBUDGET_STORAGE_URL or $FEATUREBUDGET_REDIS_URL)")
    worker.add_argument("--data-dir", default=None, metavar="DIR",
                        help="not used by the worker (it keeps everything in Redis); "
                             "accepted so that serve and worker can share their options")
    worker.add_argument("--metrics-port", type=int, metavar="PORT",
                        default=int(os.environ.get("FEATUREBUDGET_WORKER_METRICS_PORT", "9101")),
                        help="port of the worker's Prometheus /metrics (default "
                             "$FEATUREBUDGET_WORKER_METRICS_PORT or 9101; 0: none)")
    worker.add_argument("--log-level", default="info", type=str.lower, choices=_LOG_LEVELS,
                        metavar="LEVEL", help=f"log level: {_LEVELS_HELP} (default info)")
    worker.set_defaults(handler=_worker)

    warmup = commands.add_parser(
        "warmup", help="compile every numba kernel the service runs into numba's cache "
                       "(NUMBA_CACHE_DIR; the image runs it at build time)",
        description="Run the service once in-process on a throw-away embedded data directory "
                    "(every online learner and batch algorithm), so that later starts load "
                    "the compiled kernels instead of compiling them.")
    warmup.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    warmup.set_defaults(handler=_warmup)
