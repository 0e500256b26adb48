"""What the remote chores share: the ``--url`` / ``--api-key`` options, the runner that
turns a service's problem or an unreachable service into one line on stderr, and
:class:`UsageError`."""

from __future__ import annotations

import argparse
import os
import sys

WHERE = ("is `featurebudget serve` running there? To use another service, pass --url URL "
         "or set FEATUREBUDGET_URL")


class UsageError(ValueError):
    """A command-line value the service would never accept (exit status 2)."""


def remote(handler):
    """Run ``handler(client, args)`` with a client of ``--url``; a problem answer or an
    unreachable service is one line on stderr and exit status 1."""

    def run(args: argparse.Namespace) -> int:
        import httpx

        from clients.http import FeaturebudgetClient, ServiceError

        name = " ".join(filter(None, (args.command, getattr(args, "action", None))))
        try:
            with FeaturebudgetClient(args.url, api_key=args.api_key) as client:
                return handler(client, args)
        except ServiceError as exc:
            print(f"featurebudget {name}: {exc}", file=sys.stderr)
        except TimeoutError as exc:
            print(f"featurebudget {name}: {exc}", file=sys.stderr)
        except httpx.HTTPError as exc:
            print(f"featurebudget {name}: cannot reach {args.url}: {exc} ({WHERE})",
                  file=sys.stderr)
        except (OSError, UsageError) as exc:  # a file that cannot be read or written
            print(f"featurebudget {name}: {exc}", file=sys.stderr)
            return 2
        return 1

    return run


def read_input(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    with open(path, "rb") as handle:
        return handle.read()


def remote_options() -> argparse.ArgumentParser:
    """The parent parser of every remote chore: ``--url`` and ``--api-key``."""
    remote = argparse.ArgumentParser(add_help=False)
    remote.add_argument("--url", default=os.environ.get("FEATUREBUDGET_URL",
                                                        "http://127.0.0.1:8000"),
                        help="the service (default $FEATUREBUDGET_URL or "
                             "http://127.0.0.1:8000)")
    remote.add_argument("--api-key", default=os.environ.get("FEATUREBUDGET_API_KEY"),
                        help="X-API-Key (default $FEATUREBUDGET_API_KEY)")
    return remote
