"""Remote chores of batch models: ``retrain`` (``--wait``: follow the job, ``--cancel``),
``versions`` and ``rollback``."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

from service.cli.remote import remote

_RETRAIN_EXAMPLES = """examples:
  featurebudget retrain house                 # queue a retrain; one line names the job
  featurebudget retrain house --wait          # progress bar on stderr, a summary on stdout
  featurebudget retrain house --wait --json   # the final job as JSON on stdout (scripts)
  featurebudget retrain house --wait --url http://api:8000 --api-key s3cret --timeout 3600
  featurebudget retrain house --cancel 3f2a9c0d1e4b5a6f   # stop a queued or running job

With --wait the exit status is 1 when the job failed (its "error" says why), was
cancelled, or did not finish within --timeout. --cancel stops a queued job at once and a
running one at its next progress step; with --wait it follows the job until it has
stopped (exit status 0 once it is "cancelled", 1 if it finished first)."""

_VERSIONS_EXAMPLES = """examples:
  featurebudget versions house                # VERSION CREATED_AT EXAMPLES_USED HELD_OUT
                                              # and the held-out figure, * on the current
  featurebudget versions house --json         # the raw metadata of every stored version
  FEATUREBUDGET_URL=http://api:8000 featurebudget versions house"""

_ROLLBACK_EXAMPLES = """examples:
  featurebudget rollback house 3              # serve version 3 again; prints the new current
  featurebudget rollback house 3 --url http://api:8000 --api-key s3cret

The exit status is 1 when the version does not exist (never did, or was pruned)."""

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


def _job_line(model: str, job, figure: tuple[str, str] | None = None) -> str:
    """One line saying how a retrain job of ``model`` stands or ended. O(1)."""
    took = "" if job.duration_seconds is None else f" in {job.duration_seconds:.1f} s"
    head = f"{model}: retrain job {job.id} {job.status}"
    if job.status == "succeeded":
        held = "" if job.validation_examples is None else \
            f", {job.validation_examples:,} held out"
        used = "" if job.examples_used is None else \
            f" ({job.examples_used:,} training examples{held})"
        said = "" if figure is None else f"; held-out {figure[0]} {figure[1]}"
        return f"{head}{took}: version {job.version}{used}{said}"
    if job.status == "failed":
        return f"{head}{took}: {job.error or 'no reason recorded'}"
    if job.status in ("queued", "running"):
        return f"{head} (its status: GET /v1/models/{model}/jobs/{job.id})"
    return f"{head}{took}"


@remote
def _retrain(client, args: argparse.Namespace) -> int:
    job = (client.cancel_job(args.model, args.cancel) if args.cancel
           else client.retrain(args.model))
    if args.wait:
        bar = _JobProgress(enabled=not args.quiet)
        try:
            job = client.wait_for_job(args.model, job.id, timeout=args.timeout,
                                      poll=args.poll, on_progress=bar.update)
        finally:
            bar.close()
    if args.json:
        print(json.dumps(job.raw))
    else:
        figure = None
        if job.succeeded:
            meta = next((v for v in client.versions(args.model).versions
                         if v.get("version") == job.version), {})
            figure = held_out_figure(meta)
        print(_job_line(args.model, job, figure))
    if not args.wait:
        return 0
    if args.cancel:
        return 0 if job.status == "cancelled" else 1
    return 0 if job.succeeded else 1


# a version's held-out figure, by the preference of its task: (metric, label)
_FIGURES = {"classification": (("error", "error"), ("log_loss", "log-loss"),
                               ("explained_variance", "explained variance")),
            "regression": (("explained_variance", "explained variance"), ("rmse", "RMSE"))}


def held_out_figure(meta: dict) -> tuple[str, str] | None:
    """(label, value) of the held-out figure a version's metadata recorded for its whole
    trained sequence (the sequence's last prefix), the task's first of error, log-loss,
    explained variance (classification) or explained variance, RMSE (regression); None
    when it recorded none. Reads ``metrics.validation_<metric>`` (a number or one per
    prefix) and ``metrics.validation.<metric>``. O(1)."""
    metrics = meta.get("metrics")
    if not isinstance(metrics, dict):
        return None
    nested = metrics.get("validation") if isinstance(metrics.get("validation"), dict) else {}
    for metric, label in _FIGURES.get(meta.get("task"), _FIGURES["regression"]):
        value = metrics.get(f"validation_{metric}", nested.get(metric))
        if isinstance(value, list):
            value = value[-1] if value else None
        if isinstance(value, int | float) and not isinstance(value, bool) and \
                math.isfinite(value):
            return label, f"{value:.4f}"
    return None


def _iso(timestamp) -> str:
    from datetime import UTC, datetime

    if timestamp is None:
        return "-"
    return datetime.fromtimestamp(float(timestamp), tz=UTC).isoformat(timespec="seconds")


@remote
def _versions(client, args: argparse.Namespace) -> int:
    listing = client.versions(args.model)
    if args.json:
        print(json.dumps({"model": listing.model, "current": listing.current,
                          "versions": listing.versions}))
        return 0
    figures = [held_out_figure(v) for v in listing.versions]
    label = next((f[0] for f in figures if f is not None), "figure")
    rows = [(str(v.get("version")), _iso(v.get("created_at")), _count(v, "examples_used"),
             _count(v, "validation_examples"),
             f[1] if f is not None and f[0] == label else "-",
             "*" if v.get("current") else "")
            for v, f in zip(listing.versions, figures, strict=True)]
    header = ("VERSION", "CREATED_AT", "EXAMPLES_USED", "HELD_OUT",
              "HELD_OUT_" + label.upper().replace(" ", "_").replace("-", "_"), "CURRENT")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    for row in [header, *rows]:
        cells = [f"{row[0]:>{widths[0]}}", f"{row[1]:<{widths[1]}}",
                 *(f"{cell:>{width}}" for cell, width in zip(row[2:-1], widths[2:],
                                                             strict=True)), row[-1]]
        print("  ".join(cells).rstrip())
    if not rows:
        print(f"featurebudget versions: model {args.model!r} has no versions yet (POST "
              "examples, then `featurebudget retrain`)", file=sys.stderr)
    return 0


def _count(meta: dict, key: str) -> str:
    return "-" if meta.get(key) is None else str(meta[key])


@remote
def _rollback(client, args: argparse.Namespace) -> int:
    print(json.dumps(client.rollback(args.model, args.version)))
    return 0


def add_batch_chores(commands, options: argparse.ArgumentParser) -> None:
    """``retrain``, ``versions`` and ``rollback``."""
    raw = argparse.RawDescriptionHelpFormatter

    retrain = commands.add_parser(
        "retrain", parents=[options], formatter_class=raw, epilog=_RETRAIN_EXAMPLES,
        help="queue a retrain of a batch model (--wait: follow it to the end)",
        description="Queue a retrain of batch model MODEL on everything appended so far.")
    retrain.add_argument("model", metavar="MODEL", help="the batch model's name")
    retrain.add_argument("--wait", action="store_true",
                         help="poll the job (progress bar on stderr), then print how it "
                              "ended; exit status 1 if it failed")
    retrain.add_argument("--timeout", type=float, default=600.0,
                         help="with --wait: give up after this many seconds (default 600)")
    retrain.add_argument("--poll", type=float, default=0.2,
                         help="with --wait: seconds between polls (default 0.2)")
    retrain.add_argument("--quiet", action="store_true", help="no progress bar")
    retrain.add_argument("--json", action="store_true",
                         help="print the job as JSON (the API's answer) instead of a line")
    retrain.add_argument("--cancel", metavar="JOB_ID", default=None,
                         help="cancel job JOB_ID of MODEL instead (DELETE /jobs/JOB_ID): a "
                              "queued job at once, a running one at its next progress step")
    retrain.set_defaults(handler=_retrain)

    versions = commands.add_parser(
        "versions", parents=[options], formatter_class=raw, epilog=_VERSIONS_EXAMPLES,
        help="list the stored versions of a batch model",
        description="A table of batch model MODEL's stored versions, newest first: version,\n"
                    "creation time (ISO 8601, UTC), training examples used, examples held\n"
                    "out, the held-out figure the version recorded for its whole sequence\n"
                    "(error for classification where recorded, else explained variance;\n"
                    "RMSE for nvsd)\n"
                    "and a * on the current one.")
    versions.add_argument("model", metavar="MODEL", help="the batch model's name")
    versions.add_argument("--json", action="store_true", help="print the raw JSON instead")
    versions.set_defaults(handler=_versions)

    rollback = commands.add_parser(
        "rollback", parents=[options], formatter_class=raw, epilog=_ROLLBACK_EXAMPLES,
        help="make a stored version of a batch model current again",
        description="Serve stored version VERSION of batch model MODEL again (every API\n"
                    "process switches to it); prints {\"model\", \"current\"}.")
    rollback.add_argument("model", metavar="MODEL", help="the batch model's name")
    rollback.add_argument("version", metavar="VERSION", type=int,
                          help="a stored version (see `featurebudget versions MODEL`)")
    rollback.set_defaults(handler=_rollback)
