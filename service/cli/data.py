"""Data commands: ``load`` (bulk-load a libsvm file into a model, checked first) and
``fit-statistics`` (an anytime model's statistics from files, on Dask)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from service.storage import schemes


def _load(args: argparse.Namespace) -> int:
    from clients.loader import LoadError, load_file

    try:
        result = load_file(args.file, args.model, via=args.via, url=args.url,
                           redis_url=args.redis_url, api_key=args.api_key,
                           batch_size=args.batch_size, wait=args.wait,
                           progress=not args.quiet, check=args.check, skip=args.skip)
    except LoadError as exc:
        print(f"featurebudget load: {exc}", file=sys.stderr)
        return exc.status
    if result["repeated"]:
        print(f"featurebudget load: {result['repeated']:,} examples were appended by an "
              "earlier load of the same file and were not appended again", file=sys.stderr)
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
    from service.batch.offline.distributed_statistics import dask_client, fit_statistics
    from service.batch.offline.file_statistics import FileInputError
    from service.batch.offline.publish_statistics import END, PublishError, publish, target_of
    from service.settings import Settings

    if args.redis_url:
        schemes.set_url_env(args.redis_url)
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


def add_fit_statistics(commands) -> None:
    """``fit-statistics``."""
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


_LOAD_EXAMPLES = """examples:
  featurebudget load train.svm --model spam --wait      # check the file, load it, wait
  featurebudget load train.svm --model spam --skip 2000 # go on after the first 2,000
  featurebudget load big.svm --model spam --no-check    # stream without checking first
  featurebudget load train.svm --model spam --via stream --redis-url redis://127.0.0.1:6379/0

The whole file is checked first, as the model would take it (nothing is appended unless
every line passes); errors name the file's own line. Each chunk is appended under an
idempotency key of its content and place in the file, so running the same command again
after a failure appends only what is missing (within the service's idempotency retention,
a day by default); --skip N leaves out the file's first N examples. Exit status 2 for the
file (unreadable, a line the model refuses), 1 for the service (unknown model,
unreachable); the message says how many examples were appended before a failure."""


def add_load(commands) -> None:
    """``load``."""
    load = commands.add_parser(
        "load", help="bulk-load a libsvm file into a model (checked first)",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_LOAD_EXAMPLES,
        description="Append the examples of a libsvm FILE to model --model, BATCH_SIZE "
                    "per request\n(or per stream entry), after checking all of them.")
    load.add_argument("file", metavar="FILE", help="a libsvm file (label index:value ...)")
    load.add_argument("--model", required=True, help="the model to load into")
    load.add_argument("--via", choices=("rest", "stream"), default="rest",
                      help="rest: POST /examples to --url (default); stream: XADD to the "
                           "model's Redis stream at --redis-url (online models)")
    load.add_argument("--url", default=os.environ.get("FEATUREBUDGET_URL",
                                                      "http://127.0.0.1:8000"),
                      help="the service (default $FEATUREBUDGET_URL or "
                           "http://127.0.0.1:8000)")
    load.add_argument("--redis-url", default=schemes.redis_url_in_env(),
                      help="--via stream: the service's Redis (default "
                           "$FEATUREBUDGET_STORAGE_URL or $FEATUREBUDGET_REDIS_URL)")
    load.add_argument("--api-key", default=os.environ.get("FEATUREBUDGET_API_KEY"),
                      help="X-API-Key, a write key (default $FEATUREBUDGET_API_KEY)")
    load.add_argument("--batch-size", type=int, default=1000,
                      help="examples per request or stream entry (default 1000)")
    load.add_argument("--no-check", dest="check", action="store_false",
                      help="do not check the whole file first: append as it is read (a bad "
                           "line stops the load after the chunks before it)")
    load.add_argument("--skip", type=int, default=0, metavar="N",
                      help="leave out the file's first N examples (resume a load)")
    load.add_argument("--wait", action="store_true", help="return once everything is applied")
    load.add_argument("--quiet", action="store_true", help="no progress bar")
    load.set_defaults(handler=_load)
