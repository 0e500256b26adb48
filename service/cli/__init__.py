"""The ``featurebudget`` command, split by role: process commands (``serve``, ``worker``,
``warmup``: :mod:`service.cli.process`), data commands (``load``, ``fit-statistics``:
:mod:`service.cli.data`) and remote chores against a running service (``models``,
``snapshot``: :mod:`service.cli.model_chores`; ``retrain``, ``versions``, ``rollback``:
:mod:`service.cli.batch_chores`). ``main`` is the console entry point."""

from service.cli.parser import build_parser, main

__all__ = ["build_parser", "main"]
