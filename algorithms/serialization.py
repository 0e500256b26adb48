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
        archive.writestr(_member(_META), json.dumps(header, allow_nan=True))
        for key, array in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.ascontiguousarray(array), allow_pickle=False)
            archive.writestr(_member(f"{key}.npy"), member.getvalue())
    return buffer.getvalue()


def _member(name: str) -> zipfile.ZipInfo:
    """A member dated 1980-01-01 (the zip epoch), not the clock: one state is always
    the same bytes, whenever it is written."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.external_attr = 0o600 << 16
    return info


MAX_MEMBERS = 4096


def loads_state(data: bytes, *, max_bytes: int = 1 << 34) -> dict[str, Any]:
    """Parse bytes written by :func:`dumps_state`; raises :class:`StateFormatError` for
    anything else, never another exception.

    Only what :func:`dumps_state` writes is accepted: uncompressed, unencrypted members,
    the metadata first, then ``<key>.npy`` arrays of numeric dtypes whose declared shape
    matches their bytes. Sizes are checked before anything is allocated: the arrays may
    not add up to more than ``max_bytes``. O(size of the archive)."""
    if len(data) > max_bytes + (1 << 20):
        raise StateFormatError(f"state is {len(data)} bytes, more than the limit {max_bytes}")
    try:
        return _loads(data, max_bytes)
    except StateFormatError:
        raise
    except Exception as exc:  # a malformed archive of any kind: say what, never crash
        raise StateFormatError(f"state archive is malformed: {type(exc).__name__}: "
                               f"{exc}") from exc


def _loads(data: bytes, max_bytes: int) -> dict[str, Any]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise StateFormatError("state is not a featurebudget state archive") from exc
    with archive:
        infos = archive.infolist()
        if not infos or infos[0].filename != _META:
            raise StateFormatError("state archive has no metadata header")
        if len(infos) > MAX_MEMBERS:
            raise StateFormatError(f"state archive has {len(infos)} members, more than "
                                   f"{MAX_MEMBERS}")
        total, seen = 0, set()
        for info in infos:
            if info.compress_type != zipfile.ZIP_STORED:
                raise StateFormatError(f"member {info.filename!r} is compressed; states are "
                                       "stored uncompressed")
            if info.flag_bits & 0x1:
                raise StateFormatError(f"member {info.filename!r} is encrypted")
            if info.filename in seen:
                raise StateFormatError(f"member {info.filename!r} appears twice")
            seen.add(info.filename)
            total += info.file_size
            if total > max_bytes:
                raise StateFormatError(f"state members exceed the size limit of {max_bytes} "
                                       "bytes")
        _check_disjoint(infos, len(data))
        try:
            header = json.loads(archive.read(_META))
        except ValueError as exc:
            raise StateFormatError("state metadata is not valid JSON") from exc
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise StateFormatError("state metadata has the wrong format tag")
        if header.get("version") != VERSION:
            raise StateFormatError(f"unsupported state version {header.get('version')!r}")
        values = header.get("values", {})
        if not isinstance(values, dict):
            raise StateFormatError("state metadata 'values' is not an object")
        state: dict[str, Any] = dict(values)
        for info in infos[1:]:
            name = info.filename
            if not name.endswith(".npy") or "/" in name or name[:-4] in state:
                raise StateFormatError(f"unexpected member {name!r} in state archive")
            state[name[: -len(".npy")]] = _read_npy(name, archive.read(name))
    return state


def _check_disjoint(infos: list[zipfile.ZipInfo], size: int) -> None:
    """Stored members each take their own bytes of the archive: a directory whose entries
    point at overlapping data (a few MB read as GBs, member after member) is refused.
    O(members log members)."""
    end = 0
    for info in sorted(infos, key=lambda i: i.header_offset):
        if info.file_size != info.compress_size:
            raise StateFormatError(f"member {info.filename!r} declares two sizes")
        start = info.header_offset + 30 + len(info.orig_filename.encode()) + \
            len(info.extra)  # the local header, before the data
        if info.header_offset < end or start + info.compress_size > size:
            raise StateFormatError(f"member {info.filename!r} overlaps another or runs "
                                   "past the archive")
        end = start + info.compress_size


def _read_npy(name: str, raw: bytes) -> np.ndarray:
    """One ``.npy`` member: header checked against its bytes, then a copy of the data."""
    stream = io.BytesIO(raw)
    try:
        major, _ = np.lib.format.read_magic(stream)
        if major == 1:
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
        elif major in (2, 3):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(stream)
        else:
            raise ValueError(f"unknown .npy version {major}")
    except Exception as exc:
        raise StateFormatError(f"member {name!r} is not a plain numeric array: {exc}") from exc
    if dtype.kind not in _ALLOWED_KINDS or dtype.hasobject:
        raise StateFormatError(f"member {name!r} has unsupported dtype {dtype}")
    count = 1
    for n in shape:
        if not isinstance(n, int) or n < 0:
            raise StateFormatError(f"member {name!r} declares the shape {shape}")
        count *= n
    offset = stream.tell()
    if count * dtype.itemsize != len(raw) - offset:
        raise StateFormatError(f"member {name!r} declares {shape} of {dtype} "
                               f"({count * dtype.itemsize} bytes) but holds "
                               f"{len(raw) - offset}")
    array = np.frombuffer(raw, dtype=dtype, count=count, offset=offset)
    order = "F" if fortran else "C"
    return array.reshape(shape, order=order).copy(order="C")
