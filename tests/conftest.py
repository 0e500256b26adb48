"""Fixtures for every test: the process environment's service variables restored after each
test (a command run in-process, ``main(["serve", "--redis-url", ...])``, sets them for the
processes it starts; a later test's child processes must not inherit them)."""

from __future__ import annotations

import os

import pytest

_SERVICE_VARIABLES = ("FEATUREBUDGET_", "PROMETHEUS_MULTIPROC_DIR")


@pytest.fixture(autouse=True)
def _restore_service_environment():
    before = {k: v for k, v in os.environ.items() if k.startswith(_SERVICE_VARIABLES)}
    yield
    for key in [k for k in os.environ if k.startswith(_SERVICE_VARIABLES)]:
        if key not in before:
            del os.environ[key]
    os.environ.update(before)
