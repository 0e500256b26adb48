"""The ``featurebudget`` command: ``serve`` (the API), ``worker`` (the batch worker),
``load`` (bulk libsvm loader), the daily chores against a running service ``models
list|create|show|delete`` and ``snapshot get|put``, the batch-model chores ``retrain``,
``versions``, ``rollback``, and ``fit-statistics`` (an anytime model's statistics from
files, on Dask)."""

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

    from service.startup import warm_all

    started = clock.perf_counter()
    failures = warm_all(report=None if args.quiet else
                        lambda line: print(f"warmup: {line}", file=sys.stderr, flush=True))
    print(json.dumps({"seconds": round(clock.perf_counter() - started, 1),
                      "retrain_failed": failures}))
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


_FIT_STATISTICS_EXAMPLES = """examples:
  # shards of libsvm files on a LocalCluster of 2 worker processes; the log folds on after
  # its end at the moment of publishing (the files replace what the log held)
  featurebudget fit-statistics house data/part-*.svm --after-log-id end --workers 2
  # a running Dask cluster, Parquet shards, entries after 1700000000000-0 folded on top
  featurebudget fit-statistics house /shared/house/ --scheduler tcp://10.0.0.5:8786 \\
      --after-log-id 1700000000000-0 --redis-url redis://10.0.0.2:6379/0 --retrain
  # add the files' statistics to the fold's own state (its position stays)
  featurebudget fit-statistics house history.svm --merge --data-dir ./data
  # compute and print only; --workers 0 computes in this process (no Dask needed)
  featurebudget fit-statistics house data/ --after-log-id end --workers 0 --dry-run

Publishing writes the model's fold snapshot: on Redis it needs the model's lease (stop its
batch workers first; they take it up from the published statistics), on the embedded
backend the data directory (stop `featurebudget serve` first). Rows are held out for
validation by a hash of the file name and the row's position (--validation-fraction,
default the model's). Prints one JSON object; exit status 1 when publishing was refused,
2 for files that cannot be read as the model's examples."""


def _fit_statistics(args: argparse.Namespace) -> int:
    from service.batch.distributed_statistics import dask_client, fit_statistics
    from service.batch.file_statistics import FileInputError
    from service.batch.publish_statistics import END, PublishError, publish, target_of
    from service.settings import Settings

    if args.redis_url:
        os.environ["FEATUREBUDGET_REDIS_URL"] = args.redis_url
    if args.data_dir:
        os.environ["FEATUREBUDGET_DATA_DIR"] = args.data_dir
    if (args.after_log_id is None) == (not args.merge):
        print("featurebudget fit-statistics: give --after-log-id (end, start or a log id) or "
              "--merge", file=sys.stderr)
        return 2
    settings = Settings()
    try:
        target = target_of(settings, args.model, free=not args.dry_run)
        spec = target.spec
        fraction = target.params.validation_fraction if args.validation_fraction is None \
            else args.validation_fraction
        options = dict(task=spec.task, zero_based=spec.libsvm_zero_based,
                       validation_fraction=fraction, columns=target.layout.feature_names,
                       target_column=args.target_column, fmt=args.format,
                       block_bytes=int(args.block_mb * (1 << 20)),
                       split_every=args.split_every)
        if args.workers == 0 and not args.scheduler:
            statistics = fit_statistics(args.files, target.n_features, **options)
        else:
            with dask_client(args.scheduler, args.workers) as client:
                statistics = fit_statistics(args.files, target.n_features, client=client,
                                            **options)
        out = {"model": args.model, **statistics.summary()}
        if not args.dry_run:
            after = {"end": END, "start": None}.get(args.after_log_id, args.after_log_id)
            out.update(publish(settings, args.model, statistics, after_log_id=after,
                               merge=args.merge, retrain=args.retrain))
        out["published"] = not args.dry_run
    except PublishError as exc:
        print(f"featurebudget fit-statistics: {exc}", file=sys.stderr)
        return 1
    except (FileInputError, ValueError, RuntimeError, OSError) as exc:
        print(f"featurebudget fit-statistics: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(out))
    return 0


def _add_fit_statistics(commands) -> None:
    command = commands.add_parser(
        "fit-statistics", formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_FIT_STATISTICS_EXAMPLES,
        help="compute an anytime model's statistics from files on Dask and publish them",
        description="Compute the sufficient statistics of the rows of FILE... (libsvm or\n"
                    "Parquet; directories of them) on a dask.distributed cluster (one task\n"
                    "per partition, merged by a tree reduction) and publish them as the fold\n"
                    "state of anytime model MODEL: the log folds on after --after-log-id.")
    command.add_argument("model", metavar="MODEL", help="an anytime batch model")
    command.add_argument("files", metavar="FILE", nargs="+",
                         help="libsvm / Parquet files or directories of them")
    where = command.add_mutually_exclusive_group()
    where.add_argument("--after-log-id", metavar="ID",
                       help="'end' (the log's end when publishing), 'start', or a log id: "
                            "the fold goes on with the entries after it")
    where.add_argument("--merge", action="store_true",
                       help="add to the fold's own statistics; its log position stays")
    command.add_argument("--validation-fraction", type=float, default=None,
                         help="rows held out by the files' hash rule (default: the model's "
                              "validation_fraction)")
    command.add_argument("--retrain", action="store_true",
                         help="queue a retrain job on the published statistics")
    command.add_argument("--dry-run", action="store_true",
                         help="compute and print; publish nothing")
    command.add_argument("--scheduler", default=os.environ.get("DASK_SCHEDULER_ADDRESS"),
                         help="a Dask scheduler address (default $DASK_SCHEDULER_ADDRESS); "
                              "without it, a LocalCluster of --workers processes")
    command.add_argument("--workers", type=int, default=None,
                         help="LocalCluster worker processes (default: the CPU count; 0: "
                              "compute in this process without Dask)")
    command.add_argument("--format", choices=("auto", "libsvm", "parquet"), default="auto",
                         help="auto: .parquet / .pq are Parquet, anything else libsvm")
    command.add_argument("--target-column", default=None,
                         help="Parquet: the target column (default target, or label for "
                              "classification); the other columns are named as features")
    command.add_argument("--block-mb", type=float, default=64.0,
                         help="libsvm bytes per partition, in MiB (default 64)")
    command.add_argument("--split-every", type=int, default=4,
                         help="partitions merged per node of the merge tree (default 4)")
    command.add_argument("--redis-url", default=None,
                         help="the model's Redis (default $FEATUREBUDGET_REDIS_URL)")
    command.add_argument("--data-dir", default=None,
                         help="the embedded backend's directory (default "
                              "$FEATUREBUDGET_DATA_DIR or ./data)")
    command.set_defaults(handler=_fit_statistics)


# ---------------------------------------------------------------------- batch-model chores
_RETRAIN_EXAMPLES = """examples:
  featurebudget retrain house                 # queue a retrain; prints the queued job
  featurebudget retrain house --wait          # progress bar on stderr, final job on stdout
  featurebudget retrain house --wait --url http://api:8000 --api-key s3cret --timeout 3600
  featurebudget retrain house --cancel 3f2a9c0d1e4b5a6f   # stop a queued or running job

With --wait the exit status is 1 when the job failed (its "error" says why), was
cancelled, or did not finish within --timeout. --cancel stops a queued job at once and a
running one at its next progress step; with --wait it follows the job until it has
stopped (exit status 0 once it is "cancelled", 1 if it finished first)."""

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
  featurebudget warmup                                       # compile the kernels ahead
  featurebudget models create spam --algorithm sofs --n-features 1000 --budget 10
  featurebudget models list                                  # every model, one line each
  featurebudget load train.svm --model spam --wait           # bulk-load a libsvm file
  featurebudget snapshot get spam -o spam.fbstate            # download a model's state
  featurebudget retrain house --wait                         # retrain a batch model, wait
  featurebudget versions house                               # its stored versions
  featurebudget rollback house 3                             # serve version 3 again
  featurebudget fit-statistics house shards/ --after-log-id end  # statistics from files

The client commands (models, snapshot, load, retrain, versions, rollback) talk to --url
(default $FEATUREBUDGET_URL or http://127.0.0.1:8000) with --api-key (default
$FEATUREBUDGET_API_KEY). `featurebudget COMMAND --help` describes each command."""


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

        name = " ".join(filter(None, (args.command, getattr(args, "action", None))))
        try:
            with FeaturebudgetClient(args.url, api_key=args.api_key) as client:
                return handler(client, args)
        except ServiceError as exc:
            print(f"featurebudget {name}: {exc}", file=sys.stderr)
        except TimeoutError as exc:
            print(f"featurebudget {name}: {exc}", file=sys.stderr)
        except httpx.HTTPError as exc:
            print(f"featurebudget {name}: cannot reach {args.url}: {exc}", file=sys.stderr)
        except (OSError, UsageError) as exc:  # a file that cannot be read or written
            print(f"featurebudget {name}: {exc}", file=sys.stderr)
            return 2
        return 1

    return run


@_remote
def _retrain(client, args: argparse.Namespace) -> int:
    job = (client.cancel_job(args.model, args.cancel) if args.cancel
           else client.retrain(args.model))
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
    if args.cancel:
        return 0 if job.status == "cancelled" else 1
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


# ---------------------------------------------------------------------- daily chores
class UsageError(ValueError):
    """A command-line value the service would never accept (exit status 2)."""


_MODELS_EXAMPLES = """examples:
  featurebudget models list                       # NAME ALGORITHM FAMILY EXAMPLES ACCURACY VERSION
  featurebudget models list --json                # the raw JSON of every model
  featurebudget models create spam --algorithm sofs --n-features 1000 --budget 10 --param r=1.0
  featurebudget models show spam                  # configuration, counters, selected features
  featurebudget models delete spam                # the model, its log and its snapshots
  FEATUREBUDGET_URL=http://api:8000 FEATUREBUDGET_API_KEY=s3cret featurebudget models list

`featurebudget models ACTION --help` describes each action."""

_CREATE_EXAMPLES = """examples:
  # an online learner over plain 0-based indices: SOFS, 1,000 features, at most 10 weights
  featurebudget models create spam --algorithm sofs --n-features 1000 --budget 10 --param r=1.0
  # hashed named features (2^20 slots), PET with the hinge update
  featurebudget models create clicks --algorithm pet --hash-bits 20 --budget 100 \\
      --param update_on=hinge
  # a batch model over costed feature groups (NAME=FEATURE,FEATURE,...:COST)
  featurebudget models create diabetes --algorithm cs-g-omp \\
      --group demographics=age,sex:1 --group exam=bmi,bp:2 \\
      --param validation_fraction=0.2 --param retrain_every_examples=1000
  # groups from a JSON file: [{"name": ..., "features": [...], "cost": ...}, ...]
  featurebudget models create house --algorithm gbfs --task classification --groups-file g.json

--param KEY=VALUE takes VALUE as JSON when it parses (1.0, null, true, "x", [1, 2]) and as
a string otherwise; --params '{"r": 1.0}' sets several at once. Prints the created model."""

_SNAPSHOT_EXAMPLES = """examples:
  featurebudget snapshot get spam                     # writes ./spam.fbstate
  featurebudget snapshot get spam -o /backup/spam.fbstate
  featurebudget snapshot get spam -o - > spam.fbstate # to stdout
  featurebudget snapshot put spam spam.fbstate        # restore (same configuration only)
  featurebudget snapshot put spam - < spam.fbstate    # from stdin

A snapshot is the model's state in the service's safe format (a zip of .npy arrays and JSON,
never unpickled). `put` replaces the model's state with the file's; the service refuses a
snapshot of another configuration (algorithm, dimension, budget, hyperparameters)."""


def _param(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise UsageError(f"--param {text!r}: expected KEY=VALUE")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def _group(text: str) -> dict:
    head, sep, cost = text.rpartition(":")
    name, eq, features = head.partition("=")
    if not sep or not eq or not name or not features:
        raise UsageError(f"--group {text!r}: expected NAME=FEATURE,FEATURE,...:COST")
    try:
        value = float(cost)
    except ValueError:
        raise UsageError(f"--group {text!r}: the cost {cost!r} is not a number") from None
    return {"name": name, "features": [f for f in features.split(",") if f], "cost": value}


def _read_input(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    with open(path, "rb") as handle:
        return handle.read()


def _model_row(info) -> tuple[str, ...]:
    accuracy = info.progressive_accuracy
    return (info.name, info.algorithm, info.family or "online", str(info.examples_applied),
            "-" if accuracy is None else f"{accuracy:.4f}",
            "-" if info.version is None else str(info.version))


@_remote
def _models_list(client, args: argparse.Namespace) -> int:
    models = client.list_models()
    if args.json:
        print(json.dumps({"models": [m.raw for m in models]}))
        return 0
    header = ("NAME", "ALGORITHM", "FAMILY", "EXAMPLES", "ACCURACY", "VERSION")
    rows = [header, *(_model_row(m) for m in models)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for row in rows:
        print("  ".join(f"{cell:<{w}}" for cell, w in zip(row, widths, strict=True)).rstrip())
    if not models:
        print("featurebudget models list: no models yet (`featurebudget models create`)",
              file=sys.stderr)
    return 0


@_remote
def _models_create(client, args: argparse.Namespace) -> int:
    params: dict = {}
    if args.params:
        try:
            params.update(json.loads(args.params))
        except ValueError as exc:
            raise UsageError(f"--params is not a JSON object: {exc}") from None
    params.update(dict(_param(p) for p in args.param))
    groups = [_group(g) for g in args.group]
    if args.groups_file:
        try:
            groups += json.loads(_read_input(args.groups_file))
        except ValueError as exc:
            raise UsageError(f"--groups-file {args.groups_file}: not JSON: {exc}") from None
    if groups:
        if args.n_features is not None or args.hash_bits is not None or args.budget is not None:
            raise UsageError("a model with groups is a batch model: no --n-features, "
                             "--hash-bits or --budget")
        info = client.create_batch_model(args.name, algorithm=args.algorithm, groups=groups,
                                         task=args.task or "regression", params=params)
    else:
        if args.task is not None:
            raise UsageError("--task is for batch models (give --group or --groups-file)")
        info = client.create_model(args.name, algorithm=args.algorithm,
                                   n_features=args.n_features, hash_bits=args.hash_bits,
                                   budget=args.budget, params=params,
                                   libsvm_zero_based=args.zero_based)
    print(json.dumps(info.raw, indent=2))
    return 0


@_remote
def _models_show(client, args: argparse.Namespace) -> int:
    print(json.dumps(client.get_model(args.name).raw, indent=2))
    return 0


@_remote
def _models_delete(client, args: argparse.Namespace) -> int:
    client.delete_model(args.name)
    print(json.dumps({"model": args.name, "deleted": True}))
    return 0


@_remote
def _snapshot_get(client, args: argparse.Namespace) -> int:
    blob = client.get_snapshot(args.name)
    target = args.output or f"{args.name}.fbstate"
    if target == "-":
        sys.stdout.buffer.write(blob)
        sys.stdout.buffer.flush()
        return 0
    tmp = f"{target}.part"
    with open(tmp, "wb") as handle:  # a complete file or none under the target's name
        handle.write(blob)
    os.replace(tmp, target)
    print(json.dumps({"model": args.name, "file": target, "bytes": len(blob)}))
    return 0


@_remote
def _snapshot_put(client, args: argparse.Namespace) -> int:
    print(json.dumps(client.put_snapshot(args.name, _read_input(args.file))))
    return 0


def _add_chores(commands, remote: argparse.ArgumentParser) -> None:
    raw = argparse.RawDescriptionHelpFormatter
    models = commands.add_parser(
        "models", formatter_class=raw, epilog=_MODELS_EXAMPLES,
        help="list, create, show or delete models of a running service",
        description="The models of the service at --url.")
    actions = models.add_subparsers(dest="action", required=True, metavar="ACTION")

    listing = actions.add_parser(
        "list", parents=[remote], formatter_class=raw, epilog=_MODELS_EXAMPLES,
        help="every model, one line each",
        description="A table of every model: name, algorithm, family (online, anytime,\n"
                    "gbfs, nvsd), examples applied, progressive accuracy (online models)\n"
                    "and the served version (batch models).")
    listing.add_argument("--json", action="store_true", help="print the raw JSON instead")
    listing.set_defaults(handler=_models_list)

    create = actions.add_parser(
        "create", parents=[remote], formatter_class=raw, epilog=_CREATE_EXAMPLES,
        help="create a model (online: --n-features or --hash-bits; batch: --group)",
        description="Create model NAME. Online learners (pet, fofs, sofs, ogd, arow) take\n"
                    "exactly one of --n-features and --hash-bits; batch models (cs-g-omp,\n"
                    "cs-g-fr, doubling, no-whiten, single, group-lasso, gbfs, nvsd) take\n"
                    "feature groups with costs.")
    create.add_argument("name", metavar="NAME", help="the model's name")
    create.add_argument("--algorithm", required=True,
                        help="pet, fofs, sofs, ogd, arow, cs-g-omp, cs-g-fr, doubling, "
                             "no-whiten, single, group-lasso, gbfs or nvsd")
    create.add_argument("--n-features", type=int, help="online: the dimension (0-based "
                                                       "indices)")
    create.add_argument("--hash-bits", type=int, help="online: hash named features into "
                                                      "2^BITS slots")
    create.add_argument("--budget", type=int, help="online selectors: the most non-zero "
                                                   "weights kept")
    create.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="a hyperparameter (repeatable; VALUE as JSON when it parses)")
    create.add_argument("--params", metavar="JSON", help="hyperparameters as a JSON object")
    create.add_argument("--zero-based", action="store_true",
                        help="online: libsvm bodies use 0-based indices")
    create.add_argument("--group", action="append", default=[],
                        metavar="NAME=FEATURE,...:COST", help="batch: a feature group "
                        "(repeatable, in order)")
    create.add_argument("--groups-file", metavar="FILE",
                        help="batch: a JSON list of {name, features, cost} ('-' = stdin)")
    create.add_argument("--task", choices=("regression", "classification"),
                        help="batch: the task (default regression)")
    create.set_defaults(handler=_models_create)

    show = actions.add_parser(
        "show", parents=[remote], formatter_class=raw, epilog=_MODELS_EXAMPLES,
        help="one model as JSON", description="Model NAME as the service describes it: "
        "configuration, log position,\ncounters, selected features (online) or served "
        "version (batch).")
    show.add_argument("name", metavar="NAME")
    show.set_defaults(handler=_models_show)

    delete = actions.add_parser(
        "delete", parents=[remote], formatter_class=raw, epilog=_MODELS_EXAMPLES,
        help="delete a model with its log, snapshots and versions",
        description="Delete model NAME: its configuration, log, snapshots and versions.")
    delete.add_argument("name", metavar="NAME")
    delete.set_defaults(handler=_models_delete)

    snapshot = commands.add_parser(
        "snapshot", formatter_class=raw, epilog=_SNAPSHOT_EXAMPLES,
        help="download or restore a model's state",
        description="Download (get) or restore (put) the state of a model.")
    verbs = snapshot.add_subparsers(dest="action", required=True, metavar="ACTION")
    get = verbs.add_parser(
        "get", parents=[remote], formatter_class=raw, epilog=_SNAPSHOT_EXAMPLES,
        help="download a model's state to a file",
        description="Download the state of model NAME (online: the learner; batch: the fold\n"
                    "state and the current version); prints {model, file, bytes}.")
    get.add_argument("name", metavar="NAME")
    get.add_argument("-o", "--output", metavar="FILE",
                     help="where to write it (default NAME.fbstate; '-' = stdout)")
    get.set_defaults(handler=_snapshot_get)
    put = verbs.add_parser(
        "put", parents=[remote], formatter_class=raw, epilog=_SNAPSHOT_EXAMPLES,
        help="restore a model's state from a file",
        description="Replace the state of model NAME with FILE's; prints what the service\n"
                    "answers ({model, examples_applied, log_position, version}).")
    put.add_argument("name", metavar="NAME")
    put.add_argument("file", metavar="FILE", help="a snapshot file ('-' = stdin)")
    put.set_defaults(handler=_snapshot_put)


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

    warmup = commands.add_parser(
        "warmup", help="compile every numba kernel the service runs into numba's cache "
                       "(NUMBA_CACHE_DIR; the image runs it at build time)",
        description="Run the service once in-process on a throw-away embedded data directory "
                    "(every online learner and batch algorithm), so that later starts load "
                    "the compiled kernels instead of compiling them.")
    warmup.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    warmup.set_defaults(handler=_warmup)

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
    retrain.add_argument("--cancel", metavar="JOB_ID", default=None,
                         help="cancel job JOB_ID of MODEL instead (DELETE /jobs/JOB_ID): a "
                              "queued job at once, a running one at its next progress step")
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
    _add_chores(commands, remote)
    _add_fit_statistics(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
