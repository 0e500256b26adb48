"""A log entry's format, shared by the service and its producers (numpy only; clients import
it): the fields of an entry, the compact binary batch ``FBX1`` (:func:`encode_batch`,
:func:`decode_views`), format inference, the ``names`` field, and an entry's limits.

A stream entry has a field ``data``, an optional field ``fmt`` and, for hashed models, an
optional field ``names``: a JSON object ``{"<index>": "<namespace>^<name>"}`` naming the
hashed features of the entry (the API writes it for named features, so names are a fold
over the log like the weights).

* ``fmt=libsvm``: one or more ``label idx:val ...`` lines (``\\n``-separated), labels ±1;
  indices 1-based unless the model was created with ``libsvm_zero_based``.
* ``fmt=json``: one example object, a list of them, or ``{"examples": [...]}``; each is
  ``{"indices": [...], "values": [...], "label": ±1}`` (0-based) or
  ``{"features": {"namespace": {"name": value}}, "label": ±1}`` for hashed models.
* ``fmt=bin``: the compact binary batch below (what ``StreamProducer`` writes).

Without ``fmt`` the format is inferred (``FBX1`` magic -> bin, ``{``/``[`` -> json, else
libsvm).

Compact binary batch ``FBX1`` (little-endian)::

    offset 0   4s   magic b"FBX1"
    offset 4   u8   bytes per value: 4 (float32) or 8 (float64)
    offset 5   u8   flags: bit 0 set = targets are float64 (batch regression models)
    offset 6   u16  reserved (0)
    offset 8   u32  n, number of examples
    offset 12  u32  nnz, total non-zeros
    offset 16  u32[n]     non-zeros per example
               i32[nnz]   feature indices (0-based), example after example
               f32|f64[nnz] values
               i8[n]      labels, -1 or +1 (flag bit 0 clear)
               f64[n]     targets, finite     (flag bit 0 set)
"""

from __future__ import annotations

import struct

import numpy as np

MAGIC = b"FBX1"
_HEADER = struct.Struct("<4sBBHII")
HEADER_BYTES = _HEADER.size
FLAG_TARGETS = 1

# Limits of one log entry, checked before the append (the API, StreamProducer) and read by
# the fold (an entry past them would be a dead letter: acknowledged, never applied).
MAX_NAMES = 100_000  # distinct named indices per log entry (one request)
MAX_NAME_CHARS = 1024  # characters of one "namespace^name"
MAX_ENTRY_BYTES = 256 << 20  # data + names of one entry: under Redis's default bulk limit
# (512 MB) and the embedded log's record limit (service.storage.local.MAX_RECORD)


def batch_rows(data) -> int | None:
    """The example count in an ``FBX1`` payload's header (None when it is not one)."""
    view = memoryview(data).cast("B")
    if len(view) < HEADER_BYTES or bytes(view[:4]) != MAGIC:
        return None
    return _HEADER.unpack_from(view, 0)[4]


def encode_names(names: dict[int, str]) -> bytes:
    """The ``names`` field of an entry: ``{"index": "namespace^name"}`` as JSON."""
    import json

    return json.dumps({str(k): v for k, v in names.items()}, separators=(",", ":")).encode()


def decode_names(raw, n_features: int) -> dict[int, str]:
    """Parse and check a ``names`` field; WireFormatError when malformed."""
    import json

    try:
        document = json.loads(bytes(raw))
    except (ValueError, UnicodeDecodeError) as exc:
        raise WireFormatError(f"names is not a JSON object: {exc}") from exc
    if not isinstance(document, dict) or len(document) > MAX_NAMES:
        raise WireFormatError(f"names must be an object of at most {MAX_NAMES} entries")
    out = {}
    for key, value in document.items():
        if not (key.isdigit() and int(key) < n_features and isinstance(value, str)
                and len(value) <= MAX_NAME_CHARS):
            raise WireFormatError(f"names entry {key!r}: {value!r} is not index -> name")
        out[int(key)] = value
    return out


class WireFormatError(ValueError):
    """A binary batch whose layout is inconsistent."""


def encode_batch(indptr, indices, values, labels, *, value_bytes: int = 8,
                 targets: bool = False) -> bytes:
    """Encode a CSR batch with labels (int8 ±1) or, with ``targets``, float64 targets as an
    ``FBX1`` payload. O(nnz)."""
    if value_bytes not in (4, 8):
        raise ValueError("value_bytes must be 4 or 8")
    indptr = np.asarray(indptr, dtype=np.int64)
    lengths = np.diff(indptr).astype("<u4")
    n, nnz = len(lengths), int(indptr[-1] - indptr[0])
    vdtype = "<f4" if value_bytes == 4 else "<f8"
    parts = [
        _HEADER.pack(MAGIC, value_bytes, FLAG_TARGETS if targets else 0, 0, n, nnz),
        lengths.tobytes(),
        np.asarray(indices, dtype="<i4")[indptr[0]:indptr[0] + nnz].tobytes(),
        np.asarray(values, dtype=vdtype)[indptr[0]:indptr[0] + nnz].tobytes(),
        np.asarray(labels).astype("<f8" if targets else "<i1").tobytes(),
    ]
    return b"".join(parts)


def decode_views(data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Decode an ``FBX1`` payload without copying its arrays -> (indptr int64, indices
    int32, values float32|float64, labels int8 | targets float64), the last three read-only
    views of ``data`` (targets when the header's flag bit 0 is set).

    Checks the layout only (sizes, label set); feature validity is checked by the caller
    against the model. Raises :class:`WireFormatError`. O(n) plus no copy of the non-zeros.
    """
    if len(data) < HEADER_BYTES:
        raise WireFormatError("binary batch shorter than its 16-byte header")
    magic, value_bytes, flags, _, n, nnz = _HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise WireFormatError("binary batch does not start with the magic FBX1")
    if value_bytes not in (4, 8):
        raise WireFormatError(f"binary batch has value width {value_bytes}, expected 4 or 8")
    if flags & ~FLAG_TARGETS:
        raise WireFormatError(f"binary batch has unknown flags {flags:#x}")
    label_bytes = 8 if flags & FLAG_TARGETS else 1
    expected = HEADER_BYTES + 4 * n + 4 * nnz + value_bytes * nnz + label_bytes * n
    if len(data) != expected:
        raise WireFormatError(
            f"binary batch of n={n}, nnz={nnz} must be {expected} bytes, got {len(data)}")
    offset = HEADER_BYTES
    lengths = np.frombuffer(data, dtype="<u4", count=n, offset=offset)
    offset += 4 * n
    indices = np.frombuffer(data, dtype="<i4", count=nnz, offset=offset)
    offset += 4 * nnz
    vdtype = "<f4" if value_bytes == 4 else "<f8"
    values = np.frombuffer(data, dtype=vdtype, count=nnz, offset=offset)
    offset += value_bytes * nnz
    labels = np.frombuffer(data, dtype="<f8" if label_bytes == 8 else "<i1", count=n,
                           offset=offset)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    if indptr[-1] != nnz:
        raise WireFormatError(f"row lengths sum to {int(indptr[-1])}, header says nnz={nnz}")
    if label_bytes == 8:
        bad = np.flatnonzero(~(np.abs(labels) < 2.0 ** 50))
        if len(bad):
            raise WireFormatError(f"example {int(bad[0])}: target is NaN, infinite or "
                                  "outside |y| < 2^50")
        return indptr, indices, values, labels
    bad = np.flatnonzero((labels != 1) & (labels != -1))
    if len(bad):
        raise WireFormatError(f"example {int(bad[0])}: label {int(labels[bad[0]])} is not -1 or +1")
    return indptr, indices, values, labels


def decode_batch(data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Decode an ``FBX1`` payload -> (indptr int64, indices int32, values float64, labels int8),
    arrays of their own (see :func:`decode_views`; targets stay float64). Raises
    :class:`WireFormatError`. O(nnz).
    """
    indptr, indices, values, labels = decode_views(data)
    return (indptr, indices.astype(np.int32), values.astype(np.float64),
            labels.astype(np.float64 if labels.dtype.kind == "f" else np.int8))


def infer_format(data) -> str:
    """The format of an entry without an explicit ``fmt`` field (``data``: any buffer)."""
    view = memoryview(data).cast("B")
    if bytes(view[:4]) == MAGIC:
        return "bin"
    start = 0
    while start < len(view) and view[start] in b" \t\r\n":
        start += 1
    if bytes(view[start:start + 1]) in (b"{", b"["):
        return "json"
    return "libsvm"
