"""Remote chores of every model: ``models list|create|show|delete`` and
``snapshot get|put``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap

from service.cli.remote import UsageError, read_input, remote

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


def _model_row(info) -> tuple[str, ...]:
    accuracy = info.progressive_accuracy
    return (info.name, info.algorithm, info.family or "online", str(info.examples_applied),
            "-" if accuracy is None else f"{accuracy:.4f}",
            "-" if info.version is None else str(info.version))


@remote
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


@remote
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
            groups += json.loads(read_input(args.groups_file))
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


@remote
def _models_show(client, args: argparse.Namespace) -> int:
    print(json.dumps(client.get_model(args.name).raw, indent=2))
    return 0


@remote
def _models_delete(client, args: argparse.Namespace) -> int:
    client.delete_model(args.name)
    print(json.dumps({"model": args.name, "deleted": True}))
    return 0


@remote
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


@remote
def _snapshot_put(client, args: argparse.Namespace) -> int:
    print(json.dumps(client.put_snapshot(args.name, read_input(args.file))))
    return 0


class RegistryHelp(argparse.RawDescriptionHelpFormatter):
    """Raw descriptions whose ``{online}``, ``{batch}``, ``{algorithms}`` and
    ``{families}`` are the algorithms and families of the registries, read when the help
    is printed (importing them costs seconds: the other commands do not pay it)."""

    def _names(self) -> dict[str, str]:
        from service.batch.families import FAMILIES
        from service.schemas import batch_algorithms, online_algorithms

        online, batch = online_algorithms(), batch_algorithms()
        every = [*online, *batch]
        return {"families": ", ".join(["online", *FAMILIES]), "online": ", ".join(online),
                "batch": textwrap.fill(", ".join(batch), 66),
                "algorithms": ", ".join(every[:-1]) + " or " + every[-1]}

    def _fill(self, text: str) -> str:
        keys = [key for key in ("online", "batch", "algorithms", "families")
                if f"{{{key}}}" in text]
        if keys:
            names = self._names()
            for key in keys:
                text = text.replace(f"{{{key}}}", names[key])
        return text

    def _format_text(self, text: str) -> str:
        return super()._format_text(self._fill(text))

    def _get_help_string(self, action: argparse.Action) -> str | None:
        return None if action.help is None else self._fill(action.help)


def add_model_chores(commands, options: argparse.ArgumentParser) -> None:
    """``models`` and ``snapshot``."""
    raw = argparse.RawDescriptionHelpFormatter
    models = commands.add_parser(
        "models", formatter_class=raw, epilog=_MODELS_EXAMPLES,
        help="list, create, show or delete models of a running service",
        description="The models of the service at --url.")
    actions = models.add_subparsers(dest="action", required=True, metavar="ACTION")

    listing = actions.add_parser(
        "list", parents=[options], formatter_class=RegistryHelp, epilog=_MODELS_EXAMPLES,
        help="every model, one line each",
        description="A table of every model: name, algorithm, family ({families}),\n"
                    "examples applied, progressive accuracy (online models) and the served\n"
                    "version (batch models).")
    listing.add_argument("--json", action="store_true", help="print the raw JSON instead")
    listing.set_defaults(handler=_models_list)

    create = actions.add_parser(
        "create", parents=[options], formatter_class=RegistryHelp, epilog=_CREATE_EXAMPLES,
        help="create a model (online: --n-features or --hash-bits; batch: --group)",
        description="Create model NAME. Online learners ({online}) take\n"
                    "exactly one of --n-features and --hash-bits; batch models\n"
                    "({batch}) take feature groups with costs.")
    create.add_argument("name", metavar="NAME", help="the model's name")
    create.add_argument("--algorithm", required=True, help="{algorithms}")
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
        "show", parents=[options], formatter_class=raw, epilog=_MODELS_EXAMPLES,
        help="one model as JSON", description="Model NAME as the service describes it: "
        "configuration, log position,\ncounters, selected features (online) or served "
        "version (batch).")
    show.add_argument("name", metavar="NAME", help="the model to describe")
    show.set_defaults(handler=_models_show)

    delete = actions.add_parser(
        "delete", parents=[options], formatter_class=raw, epilog=_MODELS_EXAMPLES,
        help="delete a model with its log, snapshots and versions",
        description="Delete model NAME: its configuration, log, snapshots and versions.")
    delete.add_argument("name", metavar="NAME", help="the model to delete")
    delete.set_defaults(handler=_models_delete)

    snapshot = commands.add_parser(
        "snapshot", formatter_class=raw, epilog=_SNAPSHOT_EXAMPLES,
        help="download or restore a model's state",
        description="Download (get) or restore (put) the state of a model.")
    verbs = snapshot.add_subparsers(dest="action", required=True, metavar="ACTION")
    get = verbs.add_parser(
        "get", parents=[options], formatter_class=raw, epilog=_SNAPSHOT_EXAMPLES,
        help="download a model's state to a file",
        description="Download the state of model NAME (online: the learner; batch: the fold\n"
                    "state and the current version); prints {model, file, bytes}.")
    get.add_argument("name", metavar="NAME", help="the model whose state to download")
    get.add_argument("-o", "--output", metavar="FILE",
                     help="where to write it (default NAME.fbstate; '-' = stdout)")
    get.set_defaults(handler=_snapshot_get)
    put = verbs.add_parser(
        "put", parents=[options], formatter_class=raw, epilog=_SNAPSHOT_EXAMPLES,
        help="restore a model's state from a file",
        description="Replace the state of model NAME with FILE's; prints what the service\n"
                    "answers ({model, examples_applied, log_position, version}).")
    put.add_argument("name", metavar="NAME", help="the model whose state to replace")
    put.add_argument("file", metavar="FILE", help="a snapshot file ('-' = stdin)")
    put.set_defaults(handler=_snapshot_put)
