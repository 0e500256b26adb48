"""The ``featurebudget`` command: ``serve`` (the API), ``worker`` (the batch worker),
``load`` (bulk libsvm loader) and the batch-model chores ``retrain``, ``versions``,
``rollback``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    if args.redis_url:
        os.environ["FEATUREBUDGET_REDIS_URL"] = args.redis_url
    if args.data_dir:
        os.environ["FEATUREBUDGET_DATA_DIR"] = args.data_dir
    if args.workers > 1 and not os.environ.get("FEATUREBUDGET_REDIS_URL"):
        print("featurebudget serve: --workers > 1 needs Redis (FEATUREBUDGET_REDIS_URL); "
              "the embedded backend serves from one process", file=sys.stderr)
        return 2
    created = None
    if args.workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        created = tempfile.mkdtemp(prefix="fb-metrics-")  # /metrics across workers
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = created
    try:
        uvicorn.run("service.app:create_app", factory=True, host=args.host, port=args.port,
                    workers=args.workers, log_level=args.log_level)
    finally:
        if created:  # the directory this command made, and only that one
            import shutil

            shutil.rmtree(created, ignore_errors=True)
    return 0


def _worker(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from service.batch.runner import run_worker
    from service.settings import Settings

    if args.redis_url:
        os.environ["FEATUREBUDGET_REDIS_URL"] = args.redis_url
    if args.data_dir:
        os.environ["FEATUREBUDGET_DATA_DIR"] = args.data_dir
    settings = Settings()
    if not settings.redis_url:
        print("featurebudget worker: needs Redis (--redis-url or FEATUREBUDGET_REDIS_URL); on "
              "the embedded backend `featurebudget serve` runs the batch worker itself",
              file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(run_worker(settings, metrics_port=args.metrics_port))
    return 0


def _load(args: argparse.Namespace) -> int:
    from clients.loader import load_file

    result = load_file(args.file, args.model, via=args.via, url=args.url,
                       redis_url=args.redis_url, api_key=args.api_key,
                       batch_size=args.batch_size, wait=args.wait,
                       progress=not args.quiet)
    print(json.dumps(result))
    return 0


# ---------------------------------------------------------------------- batch-model chores
_RETRAIN_EXAMPLES = """examples:
  featurebudget retrain house                 # queue a retrain; prints the queued job
  featurebudget retrain house --wait          # progress bar on stderr, final job on stdout
  featurebudget retrain house --wait --url http://api:8000 --api-key s3cret --timeout 3600

With --wait the exit status is 1 when the job failed (its "error" says why) or did not
finish within --timeout."""

_VERSIONS_EXAMPLES = """examples:
  featurebudget versions house                # VERSION CREATED_AT EXAMPLES_USED CURRENT
  featurebudget versions house --json         # the raw metadata of every stored version
  FEATUREBUDGET_URL=http://api:8000 featurebudget versions house"""

_ROLLBACK_EXAMPLES = """examples:
  featurebudget rollback house 3              # serve version 3 again; prints the new current
  featurebudget rollback house 3 --url http://api:8000 --api-key s3cret

The exit status is 1 when the version does not exist (never did, or was pruned)."""

_EXAMPLES = """examples:
  featurebudget serve --data-dir ./data                      # API + batch worker, embedded
  featurebudget worker --redis-url redis://127.0.0.1:6379/0  # batch worker against Redis
  featurebudget load train.svm --model spam --wait           # bulk-load a libsvm file
  featurebudget retrain house --wait                         # retrain a batch model, wait
  featurebudget versions house                               # its stored versions
  featurebudget rollback house 3                             # serve version 3 again

The client commands (load, retrain, versions, rollback) talk to --url (default
$FEATUREBUDGET_URL or http://127.0.0.1:8000) with --api-key (default $FEATUREBUDGET_API_KEY).
`featurebudget COMMAND --help` describes each command."""


class _JobProgress:
    """A one-line stderr progress bar of a retrain job (its ``progress``, 0..1)."""

    def __init__(self, *, stream=None, enabled: bool = True) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.started = time.perf_counter()
        self.drawn = False

    def update(self, job) -> None:
        if not self.enabled:
            return
        fraction = min(1.0, max(0.0, float(job.progress or 0.0)))
        bar = "#" * int(30 * fraction)
        elapsed = time.perf_counter() - self.started
        self.stream.write(f"\r[{bar:<30}] {100 * fraction:5.1f}%  {job.status:<9}  "
                          f"{elapsed:6.1f} s")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False


def _remote(handler):
    """Run ``handler(client, args)`` with a client of ``--url``; a problem answer or an
    unreachable service is one line on stderr and exit status 1."""

    def run(args: argparse.Namespace) -> int:
        import httpx

        from clients.http import FeaturebudgetClient, ServiceError

        try:
            with FeaturebudgetClient(args.url, api_key=args.api_key) as client:
                return handler(client, args)
        except ServiceError as exc:
            print(f"featurebudget {args.command}: {exc}", file=sys.stderr)
        except TimeoutError as exc:
            print(f"featurebudget {args.command}: {exc}", file=sys.stderr)
        except httpx.HTTPError as exc:
            print(f"featurebudget {args.command}: cannot reach {args.url}: {exc}",
                  file=sys.stderr)
        return 1

    return run


@_remote
def _retrain(client, args: argparse.Namespace) -> int:
    job = client.retrain(args.model)
    if not args.wait:
        print(json.dumps(job.raw))
        return 0
    bar = _JobProgress(enabled=not args.quiet)
    try:
        job = client.wait_for_job(args.model, job.id, timeout=args.timeout, poll=args.poll,
                                  on_progress=bar.update)
    finally:
        bar.close()
    print(json.dumps(job.raw))
    return 0 if job.succeeded else 1


def _iso(timestamp) -> str:
    from datetime import UTC, datetime

    if timestamp is None:
        return "-"
    return datetime.fromtimestamp(float(timestamp), tz=UTC).isoformat(timespec="seconds")


@_remote
def _versions(client, args: argparse.Namespace) -> int:
    listing = client.versions(args.model)
    if args.json:
        print(json.dumps({"model": listing.model, "current": listing.current,
                          "versions": listing.versions}))
        return 0
    rows = [(str(v.get("version")), _iso(v.get("created_at")),
             "-" if v.get("examples_used") is None else str(v["examples_used"]),
             "*" if v.get("current") else "") for v in listing.versions]
    header = ("VERSION", "CREATED_AT", "EXAMPLES_USED", "CURRENT")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    for version, created, used, current in [header, *rows]:
        print(f"{version:>{widths[0]}}  {created:<{widths[1]}}  {used:>{widths[2]}}  "
              f"{current}".rstrip())
    if not rows:
        print(f"featurebudget versions: model {args.model!r} has no versions yet (POST "
              "examples, then `featurebudget retrain`)", file=sys.stderr)
    return 0


@_remote
def _rollback(client, args: argparse.Namespace) -> int:
    print(json.dumps(client.rollback(args.model, args.version)))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="featurebudget", description=__doc__,
                                     epilog=_EXAMPLES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the HTTP API (embedded backend by "
                                              "default; Redis with FEATUREBUDGET_REDIS_URL)")
    serve.add_argument("--host", default=os.environ.get("FEATUREBUDGET_HOST", "127.0.0.1"))
    serve.add_argument("--port", type=int, default=int(os.environ.get("FEATUREBUDGET_PORT",
                                                                      "8000")))
    serve.add_argument("--workers", type=int, default=1)
    serve.add_argument("--data-dir", default=None,
                       help="embedded backend directory (default ./data or "
                            "FEATUREBUDGET_DATA_DIR)")
    serve.add_argument("--redis-url", default=None)
    serve.add_argument("--log-level", default="info")
    serve.set_defaults(handler=_serve)

    worker = commands.add_parser("worker", help="run the batch worker against Redis: fold "
                                                "batch models' logs, retrain, publish versions")
    worker.add_argument("--redis-url", default=None)
    worker.add_argument("--data-dir", default=None)
    worker.add_argument("--metrics-port", type=int,
                        default=int(os.environ.get("FEATUREBUDGET_WORKER_METRICS_PORT", "9101")),
                        help="Prometheus metrics of the worker (0 = none)")
    worker.add_argument("--log-level", default="info")
    worker.set_defaults(handler=_worker)

    load = commands.add_parser("load", help="bulk-load a libsvm file into a model")
    load.add_argument("file")
    load.add_argument("--model", required=True)
    load.add_argument("--via", choices=("rest", "stream"), default="rest")
    load.add_argument("--url", default=os.environ.get("FEATUREBUDGET_URL",
                                                      "http://127.0.0.1:8000"))
    load.add_argument("--redis-url", default=os.environ.get("FEATUREBUDGET_REDIS_URL"))
    load.add_argument("--api-key", default=os.environ.get("FEATUREBUDGET_API_KEY"))
    load.add_argument("--batch-size", type=int, default=1000)
    load.add_argument("--wait", action="store_true", help="return once everything is applied")
    load.add_argument("--quiet", action="store_true", help="no progress bar")
    load.set_defaults(handler=_load)

    remote = argparse.ArgumentParser(add_help=False)
    remote.add_argument("--url", default=os.environ.get("FEATUREBUDGET_URL",
                                                        "http://127.0.0.1:8000"),
                        help="the service (default $FEATUREBUDGET_URL or "
                             "http://127.0.0.1:8000)")
    remote.add_argument("--api-key", default=os.environ.get("FEATUREBUDGET_API_KEY"),
                        help="X-API-Key (default $FEATUREBUDGET_API_KEY)")
    raw = argparse.RawDescriptionHelpFormatter

    retrain = commands.add_parser(
        "retrain", parents=[remote], formatter_class=raw, epilog=_RETRAIN_EXAMPLES,
        help="queue a retrain of a batch model (--wait: follow it to the end)",
        description="Queue a retrain of batch model MODEL on everything appended so far.")
    retrain.add_argument("model", metavar="MODEL", help="the batch model's name")
    retrain.add_argument("--wait", action="store_true",
                         help="poll the job (progress bar on stderr), then print the final "
                              "job; exit status 1 if it failed")
    retrain.add_argument("--timeout", type=float, default=600.0,
                         help="with --wait: give up after this many seconds (default 600)")
    retrain.add_argument("--poll", type=float, default=0.2,
                         help="with --wait: seconds between polls (default 0.2)")
    retrain.add_argument("--quiet", action="store_true", help="no progress bar")
    retrain.set_defaults(handler=_retrain)

    versions = commands.add_parser(
        "versions", parents=[remote], formatter_class=raw, epilog=_VERSIONS_EXAMPLES,
        help="list the stored versions of a batch model",
        description="A table of batch model MODEL's stored versions, newest first: version,\n"
                    "creation time (ISO 8601, UTC), training examples used and a * on the\n"
                    "current one.")
    versions.add_argument("model", metavar="MODEL", help="the batch model's name")
    versions.add_argument("--json", action="store_true", help="print the raw JSON instead")
    versions.set_defaults(handler=_versions)

    rollback = commands.add_parser(
        "rollback", parents=[remote], formatter_class=raw, epilog=_ROLLBACK_EXAMPLES,
        help="make a stored version of a batch model current again",
        description="Serve stored version VERSION of batch model MODEL again (every API\n"
                    "process switches to it); prints {\"model\", \"current\"}.")
    rollback.add_argument("model", metavar="MODEL", help="the batch model's name")
    rollback.add_argument("version", metavar="VERSION", type=int,
                          help="a stored version (see `featurebudget versions MODEL`)")
    rollback.set_defaults(handler=_rollback)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
