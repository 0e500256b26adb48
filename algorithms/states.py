"""One envelope for every model's state (the registry that loads any of them is
``algorithms.registry``, above the model families; this module imports none of them).

A *state* is a flat ``dict`` (the form ``algorithms.serialization`` writes: one archive
member per array, the rest JSON). Every state the package writes has the same envelope,
two members:

- ``kind`` (str): what the state is, a key of :func:`state_kinds` (``"pet"``,
  ``"gbfs"``, ``"anytime-linear-model"``, ...), the ``kind`` of the class that reads it;
- ``format_version`` (int >= 1): the layout of that kind's payload, raised by the kind's
  class when its layout changes;

and the *payload*: every other member, the model's own (parameters, counters, fitted
arrays). A model nested in another's state (RelaxedNVSD's refits) is stored under a prefix
(``model.kind``, ``model.alpha``, ...) with its own envelope.

States written before the envelope (format version 0) named themselves in four ways,
``"algorithm": "pet"`` (online learners), ``"algorithm": "GBFS"``, ``"class": "NVSD"``
(and ``RelaxedNVSD``, ``SubsetKernelRidge``) and ``"kind": "anytime-..."`` without a
version; :func:`open_envelope` reads them as version 0, and each class upgrades its own
version-0 payload (renamed parameters), so snapshots and artifacts stored by the service
before the envelope still load.

Content checks are each class's ``from_state_dict`` (a ValueError naming the member).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

KIND = "kind"
FORMAT_VERSION = "format_version"
ENVELOPE = (KIND, FORMAT_VERSION)

# (member, value) that named a state before the envelope -> its kind
_UNVERSIONED = {
    ("algorithm", "GBFS"): "gbfs",
    ("class", "NVSD"): "nvsd",
    ("class", "RelaxedNVSD"): "relaxed-nvsd",
    ("class", "SubsetKernelRidge"): "subset-kernel-ridge",
    ("kind", "anytime-linear-model"): "anytime-linear-model",
    ("kind", "anytime-sufficient-statistics"): "anytime-sufficient-statistics",
}
_ONLINE_KINDS = ("pet", "fofs", "sofs", "ogd", "arow")  # "algorithm": name, version 0


def envelope(kind: str, format_version: int, payload: Mapping[str, Any]) -> dict[str, Any]:
    """The state ``{kind, format_version, **payload}``; the payload may not use the
    envelope's member names."""
    clash = [key for key in ENVELOPE if key in payload]
    if clash:
        raise ValueError(f"a {kind!r} payload may not hold the envelope members {clash}")
    return {KIND: kind, FORMAT_VERSION: int(format_version), **payload}


def state_kind(state: Any) -> tuple[str | None, int | None]:
    """``(kind, format version)`` of ``state``: from its envelope, or from the member that
    named it before the envelope (version 0); ``(None, None)`` when it names nothing
    known. Never raises."""
    if not isinstance(state, Mapping):
        return None, None
    kind, version = state.get(KIND), state.get(FORMAT_VERSION)
    if FORMAT_VERSION in state:
        if isinstance(kind, str) and isinstance(version, int) and not isinstance(version, bool):
            return kind, version
        return None, None
    for member in ("algorithm", "class", "kind"):
        value = state.get(member)
        if isinstance(value, str):
            if (member, value) in _UNVERSIONED:
                return _UNVERSIONED[member, value], 0
            if member == "algorithm" and value in _ONLINE_KINDS:
                return value, 0
    return None, None


def open_envelope(state: Any, kind: str, versions: tuple[int, ...]
                  ) -> tuple[int, dict[str, Any]]:
    """``(format version, payload)`` of a state of ``kind``, the payload being the state
    less its envelope (or less the member that named a version-0 state). ValueError when
    ``state`` is not a dict, is of another kind, or of a version not in ``versions`` (0:
    the layout before the envelope)."""
    if not isinstance(state, Mapping):
        raise ValueError(f"state must be a dict, got {type(state).__name__}")
    found, version = state_kind(state)
    if found != kind:
        named = found if found is not None else describe(state)
        raise ValueError(f"state is for {named!r}, not {kind!r}")
    if version not in versions or (version == 0 and FORMAT_VERSION in state):
        readable = [v for v in versions if v]
        raise ValueError(f"{kind!r} state has format_version {state.get(FORMAT_VERSION)!r}; "
                         f"this code reads {readable}"
                         + (" and states written before the envelope" if 0 in versions
                            else ""))
    if version == 0:
        named_by = next(member for member in ("algorithm", "class", "kind")
                        if state_kind({member: state.get(member)})[0] == kind)
        return 0, {key: value for key, value in state.items() if key != named_by}
    return version, {key: value for key, value in state.items() if key not in ENVELOPE}


def describe(state: Mapping) -> Any:
    """What ``state`` calls itself (its ``kind``, ``algorithm`` or ``class``), or None."""
    for member in (KIND, "algorithm", "class"):
        if member in state:
            return state[member]
    return None


def renamed(payload: dict[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """``payload`` with each member ``old`` of ``names`` renamed to ``names[old]`` (a
    version-0 payload's parameters under their new names)."""
    return {names.get(key, key): value for key, value in payload.items()}


__all__ = ["ENVELOPE", "FORMAT_VERSION", "KIND", "describe", "envelope", "open_envelope",
           "renamed", "state_kind"]
