"""A model's snapshot file in tests: its parts (:mod:`service.snapshot_file`) from the bytes
``GET /snapshot`` answers, and bytes again from parts (after a test edits one)."""

from __future__ import annotations

from typing import Any

from algorithms.serialization import dumps_state, loads_state
from service.snapshot_file import Snapshot, make_snapshot, open_snapshot


def snapshot_of(content: bytes) -> Snapshot:
    return open_snapshot(loads_state(content))


def snapshot_bytes(model: dict[str, Any], service: dict[str, Any]) -> bytes:
    return dumps_state(make_snapshot(model, service))
