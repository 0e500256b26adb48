"""The ``featurebudget`` command: ``serve`` (the API) and ``load`` (bulk libsvm loader)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    if args.redis_url:
        os.environ["FEATUREBUDGET_REDIS_URL"] = args.redis_url
    if args.data_dir:
        os.environ["FEATUREBUDGET_DATA_DIR"] = args.data_dir
    if args.workers > 1:
        if not os.environ.get("FEATUREBUDGET_REDIS_URL"):
            print("featurebudget serve: --workers > 1 needs Redis (FEATUREBUDGET_REDIS_URL); "
                  "the embedded backend serves from one process", file=sys.stderr)
            return 2
        if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):  # /metrics across workers
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="fb-metrics-")
    uvicorn.run("service.app:create_app", factory=True, host=args.host, port=args.port,
                workers=args.workers, log_level=args.log_level)
    return 0


def _load(args: argparse.Namespace) -> int:
    from clients.loader import load_file

    result = load_file(args.file, args.model, via=args.via, url=args.url,
                       redis_url=args.redis_url, api_key=args.api_key,
                       batch_size=args.batch_size, wait=args.wait,
                       progress=not args.quiet)
    print(json.dumps(result))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="featurebudget", description=__doc__)
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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
