"""The ``featurebudget`` command line: the top-level parser over the commands of
:mod:`service.cli.process`, :mod:`service.cli.data`, :mod:`service.cli.batch_chores` and
:mod:`service.cli.model_chores`, and :func:`main`."""

from __future__ import annotations

import argparse

from service.cli.batch_chores import add_batch_chores
from service.cli.data import add_fit_statistics, add_load
from service.cli.model_chores import add_model_chores
from service.cli.next_groups import add_next
from service.cli.predict import add_predict
from service.cli.process import add_process_commands
from service.cli.remote import remote_options

DESCRIPTION = """The ``featurebudget`` command: ``serve`` (the API), ``worker`` (the batch worker),
``load`` (bulk libsvm loader), ``predict`` (score a file into a file), the daily chores
against a running service ``models list|create|show|delete`` and ``snapshot get|put``,
the batch-model chores ``retrain``, ``versions``, ``rollback``, ``next``, and ``fit-statistics`` (an
anytime model's statistics from files, on Dask)."""

_EXAMPLES = """examples:
  featurebudget serve --data-dir ./data                      # API + batch worker, embedded
  featurebudget worker --redis-url redis://127.0.0.1:6379/0  # batch worker against Redis
  featurebudget warmup                                       # compile the kernels ahead
  featurebudget models create spam --algorithm sofs --n-features 1000 --budget 10
  featurebudget models list                                  # every model, one line each
  featurebudget load train.svm --model spam --wait           # bulk-load a libsvm file
  featurebudget predict test.svm --model spam --out scores.jsonl  # score a file
  featurebudget snapshot get spam -o spam.fbstate            # download a model's state
  featurebudget retrain house --wait                         # retrain a batch model, wait
  featurebudget versions house                               # its stored versions
  featurebudget rollback house 3                             # serve version 3 again
  featurebudget next house examples.jsonl --max-cost 7       # next group per example
  featurebudget fit-statistics house shards/ --after-log-id end  # statistics from files

The client commands (models, snapshot, load, predict, retrain, versions, rollback, next) talk to
--url (default $FEATUREBUDGET_URL or http://127.0.0.1:8000) with --api-key (default
$FEATUREBUDGET_API_KEY). `featurebudget COMMAND --help` describes each command."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="featurebudget", description=DESCRIPTION,
                                     epilog=_EXAMPLES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    add_process_commands(commands)
    add_load(commands)
    options = remote_options()
    add_batch_chores(commands, options)
    add_next(commands, options)
    add_model_chores(commands, options)
    add_predict(commands, options)
    add_fit_statistics(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)
