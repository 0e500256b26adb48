"""Safe, compact serialization of model state (never pickle).

A *state* is a flat ``dict[str, value]`` where each value is a numpy array of a
numeric or boolean dtype, or a JSON scalar (str, int, float, bool, None), or a
JSON-able list/dict of scalars. ``dumps_state`` writes an ``.npz`` archive (zip of
``.npy`` members) whose first member ``__meta__.json`` holds the non-array values;
``loads_state`` reads it back with ``allow_pickle=False``. Floats in the metadata are
written with ``repr`` precision by ``json``, so the round trip is bit-exact.
"""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import numpy as np

FORMAT = "featurebudget-state"
VERSION = 1
_META = "__meta__.json"
_ALLOWED_KINDS = set("biuf")  # bool, signed, unsigned, float (no object, no strings)


class StateFormatError(ValueError):
    """Raised when a serialized state is malformed or unsafe."""


def dumps_state(state: dict[str, Any]) -> bytes:
    """Serialize ``state`` to bytes. O(total array bytes)."""
    meta: dict[str, Any] = {}
    arrays: dict[str, np.ndarray] = {}
    for key, value in state.items():
        if key == _META or "/" in key:
            raise StateFormatError(f"invalid state key {key!r}")
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in _ALLOWED_KINDS:
                raise StateFormatError(f"array {key!r} has unsupported dtype {value.dtype}")
            arrays[key] = value
        elif isinstance(value, np.generic):
            meta[key] = value.item()
        else:
            meta[key] = value
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        header = {"format": FORMAT, "version": VERSION, "values": meta}
        archive.writestr(_META, json.dumps(header, allow_nan=True))
        for key, array in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.ascontiguousarray(array), allow_pickle=False)
            archive.writestr(f"{key}.npy", member.getvalue())
    return buffer.getvalue()


def loads_state(data: bytes, *, max_bytes: int = 1 << 34) -> dict[str, Any]:
    """Parse bytes written by :func:`dumps_state`; raises :class:`StateFormatError`."""
    if len(data) > max_bytes:
        raise StateFormatError(f"state is {len(data)} bytes, more than the limit {max_bytes}")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise StateFormatError("state is not a featurebudget state archive") from exc
    with archive:
        names = archive.namelist()
        if not names or names[0] != _META:
            raise StateFormatError("state archive has no metadata header")
        try:
            header = json.loads(archive.read(_META))
        except ValueError as exc:
            raise StateFormatError("state metadata is not valid JSON") from exc
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise StateFormatError("state metadata has the wrong format tag")
        if header.get("version") != VERSION:
            raise StateFormatError(f"unsupported state version {header.get('version')!r}")
        state: dict[str, Any] = dict(header.get("values", {}))
        total = 0
        for name in names[1:]:
            info = archive.getinfo(name)
            total += info.file_size
            if total > max_bytes:
                raise StateFormatError("state arrays exceed the size limit")
            if not name.endswith(".npy") or "/" in name:
                raise StateFormatError(f"unexpected member {name!r} in state archive")
            try:
                array = np.lib.format.read_array(io.BytesIO(archive.read(name)),
                                                 allow_pickle=False)
            except ValueError as exc:
                raise StateFormatError(f"member {name!r} is not a plain numeric array") from exc
            if array.dtype.kind not in _ALLOWED_KINDS:
                raise StateFormatError(f"member {name!r} has unsupported dtype {array.dtype}")
            state[name[: -len(".npy")]] = array
    return state
