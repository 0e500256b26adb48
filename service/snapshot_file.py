"""The snapshot file of a model, both kinds: one envelope over the library's state format
(:mod:`algorithms.serialization`, :mod:`algorithms.states`).

A snapshot is the state ``{kind: "featurebudget-snapshot", format_version: 1, model.*,
service.*}``:

- ``model.<member>``: the model's own state, every member of it (its own envelope
  ``model.kind`` / ``model.format_version`` included) under the prefix: an online learner's
  state, or a batch model's fold state;
- ``service.<member>``: what the service keeps beside it: ``service.model`` (the model's
  spec, JSON) always; an online model's ``service.log_id`` (the last log entry the state
  includes), ``service.progressive_examples`` / ``service.progressive_correct`` and
  ``service.feature_names`` (``[index, name]`` pairs); a batch model's exported snapshot
  ``service.artifact`` (the served version's artifact, bytes as uint8).

No other member is read: a snapshot with one is refused, naming it. The service's members
are checked by their readers (:func:`service.online.snapshot.parse_snapshot`, the batch
restore), each error naming the member as the file names it.

Snapshots written before this envelope were *flat*: the model's state with the service's
members beside it as ``svc_<member>`` (and an online model's ``svc_format_version``).
:func:`open_snapshot` reads both layouts the same way (``tests/states/flat-snapshots``).
O(members) either way; no array is copied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from algorithms.states import FORMAT_VERSION, KIND

SNAPSHOT_KIND = "featurebudget-snapshot"
SNAPSHOT_VERSION = 1
MODEL, SERVICE = "model.", "service."
FLAT = "svc_"  # the service's members before the envelope


class SnapshotFormatError(ValueError):
    """A snapshot whose envelope is not one this code reads; ``field`` names the member."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Snapshot:
    """A snapshot opened: the model's state, the service's members (names without prefix)
    and the prefix the file gave them (for errors that name a member as the file does)."""

    model: dict[str, Any]
    service: dict[str, Any]
    prefix: str

    def field(self, member: str) -> str:
        """The name of the service's ``member`` in the file."""
        return f"{self.prefix}{member}"


def make_snapshot(model: dict[str, Any], service: dict[str, Any]) -> dict[str, Any]:
    """The snapshot state of ``model`` (a state dict) and the service's members."""
    state: dict[str, Any] = {KIND: SNAPSHOT_KIND, FORMAT_VERSION: SNAPSHOT_VERSION}
    state.update((MODEL + key, value) for key, value in model.items())
    state.update((SERVICE + key, value) for key, value in service.items())
    return state


def open_snapshot(state: dict[str, Any]) -> Snapshot:
    """The parts of a snapshot state, of either layout (module docstring);
    SnapshotFormatError for a snapshot of another format version or with a member outside
    the envelope."""
    kind = state.get(KIND)  # (any member may hold an array: compare typed values only)
    if not (isinstance(kind, str) and kind == SNAPSHOT_KIND):  # flat: the model's own kind
        return Snapshot({k: v for k, v in state.items() if not k.startswith(FLAT)},
                        {k[len(FLAT):]: v for k, v in state.items() if k.startswith(FLAT)},
                        FLAT)
    version = state.get(FORMAT_VERSION)
    if isinstance(version, bool) or not isinstance(version, int) or \
            version != SNAPSHOT_VERSION:
        raise SnapshotFormatError(f"this code reads snapshots of format {SNAPSHOT_VERSION} "
                                  f"(and flat ones written before it), got {version!r}",
                                  FORMAT_VERSION)
    model, service = {}, {}
    for key, value in state.items():
        if key.startswith(MODEL):
            model[key[len(MODEL):]] = value
        elif key.startswith(SERVICE):
            service[key[len(SERVICE):]] = value
        elif key not in (KIND, FORMAT_VERSION):
            raise SnapshotFormatError(f"not a member of a snapshot: {key!r} (the model's "
                                      f"members are {MODEL}*, the service's {SERVICE}*)", key)
    return Snapshot(model, service, SERVICE)


__all__ = ["FLAT", "MODEL", "SERVICE", "SNAPSHOT_KIND", "SNAPSHOT_VERSION", "Snapshot",
           "SnapshotFormatError", "make_snapshot", "open_snapshot"]
