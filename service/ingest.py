"""Parse and validate example batches (JSON, libsvm text, binary) into CSR batches.

Every parser returns an :class:`ExampleBatch` or raises :class:`~service.errors.InputError`
naming the item (JSON, 0-based) or line (libsvm, 1-based) and the field. A batch with one
bad item is rejected whole. Numbers are parsed by numba scanners (libsvm, JSON of the usual
shape) or orjson / numpy, and validated vectorized or in one numba pass, never element by
element through pydantic. The REST routes and the stream consumer call the same functions,
so a log entry is accepted or rejected the same way on both paths.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import orjson

from algorithms.sparse import CSRBatch
from algorithms.sparse._validate import MAX_ABS_VALUE
from algorithms.sparse.libsvm import LibsvmFormatError, line_of_row, parse_libsvm
from service import fbx1
from service._json import scan_examples
from service._kernels import (
    DUPLICATE,
    NEGATIVE,
    NOT_FINITE,
    OK,
    TOO_LARGE,
    check_copy_rows,
    check_rows,
)
from service.errors import InputError, MalformedBodyError, item_error


@dataclass
class ExampleBatch:
    """n examples: CSR arrays (int64 / int32 / float64), labels int8 (or None)."""

    X: CSRBatch
    labels: np.ndarray | None
    names: dict[int, str] = field(default_factory=dict)  # hashed index -> "namespace^name"
    raw: bytes | None = None  # the validated FBX1 payload it was decoded from, if any

    def __len__(self) -> int:
        return self.X.n_rows

    def encode(self) -> bytes:
        """The batch as an FBX1 payload: the one it came from when there is one (validated
        whole, so it decodes to this batch again), else a float64 encoding."""
        if self.raw is not None:
            return self.raw
        return fbx1.encode_batch(self.X.indptr, self.X.indices, self.X.values, self.labels,
                                 targets=self.labels.dtype.kind == "f")


# ---------------------------------------------------------------- vectorized validation

LABELS_RULE = "labels are -1/+1, or 0/1 with 0 read as -1"


def signed_labels_of(labels: np.ndarray, where: Callable[[int], dict]) -> np.ndarray:
    """Binary labels as -1 / +1 (same dtype): -1/+1 as they are, 0/1 with 0 read as -1;
    InputError at ``where(row)`` for any other label, or for a 0 in a batch that also holds
    -1 (two conventions mixed: more than two classes). O(n)."""
    labels = np.asarray(labels)
    bad = np.flatnonzero((labels != 1) & (labels != -1) & (labels != 0))
    if len(bad):
        raise item_error(f"label {labels[bad[0]].item()!r} is not -1 or +1 ({LABELS_RULE})",
                         field="label", **where(int(bad[0])))
    zeros = labels == 0
    if not zeros.any():
        return labels
    negative = labels == -1
    if negative.any():
        row = max(int(np.argmax(zeros)), int(np.argmax(negative)))
        raise item_error(f"label {labels[row].item()!r} mixes -1 and 0 in one batch: "
                         f"{LABELS_RULE}, not both", field="label", **where(row))
    return np.where(zeros, labels.dtype.type(-1), labels)


def validate_csr(indptr: np.ndarray, indices: np.ndarray, values: np.ndarray,
                 labels: np.ndarray | None, n_features: int, *, unit: str = "item",
                 base: int = 0) -> ExampleBatch:
    """Check a CSR batch against the model: index in [0, d), no duplicates per row,
    finite values, labels -1/+1 or 0/1 (:func:`signed_labels_of`). Errors name ``unit``
    number ``row + base``. O(nnz)."""

    def where(row: int) -> dict:
        return {unit: int(row) + base}

    n = len(indptr) - 1
    if n == 0:
        raise item_error("the batch holds no examples", field="examples")
    if labels is not None:
        labels = signed_labels_of(labels, where).astype(np.int8)
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    if len(indices):
        if indices.dtype != np.int32:  # beyond int32: negative or too large, say which
            indices = np.asarray(indices, dtype=np.int64)
            wide = np.flatnonzero((indices < 0) | (indices >= n_features))
            if len(wide):
                row = np.searchsorted(indptr, wide[0], side="right") - 1
                value = int(indices[wide[0]])
                message = f"negative feature index {value}" if value < 0 else \
                    f"feature index {value} >= dimension {n_features}"
                raise item_error(message, field="indices", **where(row))
            indices = indices.astype(np.int32)
        values = np.ascontiguousarray(values, dtype=np.float64)
        code, row, position = check_rows(indptr, indices, values, n_features, bounded=True)
        _raise_row_error(code, row, position, indices, n_features, where)
    X = CSRBatch(np.ascontiguousarray(indptr, dtype=np.int64),
                 np.ascontiguousarray(indices, dtype=np.int32),
                 np.ascontiguousarray(values, dtype=np.float64), int(n_features))
    return ExampleBatch(X, labels)


def _raise_row_error(code: int, row: int, position: int, indices: np.ndarray, n_features: int,
                     where: Callable[[int], dict]) -> None:
    """The problem found by a row-check kernel, as an :class:`InputError` (none when OK)."""
    if code == OK:
        return
    if code == NEGATIVE:
        raise item_error(f"negative feature index {int(indices[position])}",
                         field="indices", **where(row))
    if code == TOO_LARGE:
        raise item_error(f"feature index {int(indices[position])} >= dimension "
                         f"{n_features}", field="indices", **where(row))
    if code == NOT_FINITE:
        raise item_error("feature value is NaN, infinite or outside the valid range "
                         "|x| < 2^50 (about 1.1e15)", field="values", **where(row))
    if code == DUPLICATE:
        raise item_error("duplicate feature index", field="indices", **where(row))
    raise AssertionError(f"unknown row-check code {code}")


def decode_bin(data: bytes, n_features: int, *, field: str = "data",
               keep_raw: bool = False, targets: bool = False) -> ExampleBatch:
    """An ``FBX1`` payload -> validated batch: the layout checks of :mod:`service.fbx1`, then
    one fused pass that checks every row and copies the read-only wire views into the
    batch's own int32 / float64 arrays (no intermediate copies). Errors name the example
    (``item``, 0-based) like :func:`validate_csr`. ``keep_raw``: remember ``data`` so that
    appending the batch to the log writes it as it came (no re-encoding). ``targets``: the
    batch model's float64 targets (int8 labels are read as ±1.0); without it a payload with
    float targets is refused. O(nnz)."""
    try:
        indptr, indices, values, labels = fbx1.decode_views(data)
    except fbx1.WireFormatError as exc:
        raise item_error(str(exc), field=field) from exc
    if len(labels) == 0:
        raise item_error("the batch holds no examples", field="examples")
    if labels.dtype.kind == "f" and not targets:
        raise item_error("float64 targets (flag bit 0) are for batch regression models; an "
                         "online model needs int8 labels ±1", field=field)
    code, row, position, indices_out, values_out = check_copy_rows(indptr, indices, values,
                                                                   n_features)
    _raise_row_error(code, row, position, indices, n_features, lambda r: {"item": int(r)})
    return ExampleBatch(CSRBatch(indptr, indices_out, values_out, int(n_features)),
                        labels.astype(np.float64 if targets else np.int8),
                        raw=bytes(data) if keep_raw else None)


# ---------------------------------------------------------------- JSON

Hasher = Callable[[str, str], int]


def parse_json_body(body: bytes, n_features: int, hasher: Hasher | None, *,
                    require_labels: bool = True) -> ExampleBatch:
    """``{"examples": [...]}``, a bare list, or one example object -> batch.

    Bodies of the common shape (index/value lists, labels ±1) go through the numba scanner
    of :mod:`service._json` (no Python object per number); any other body, and any body
    the scanner takes but validation rejects, is parsed with orjson below, so what is
    accepted and every error message are the same either way."""
    if require_labels:
        arrays = scan_examples(body)
        if arrays is not None:
            with contextlib.suppress(InputError):  # the slow path names the problem
                return validate_csr(*arrays, n_features)
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MalformedBodyError(f"body is not valid JSON: {exc}",
                            [{"field": "body", "message": str(exc)}]) from exc
    return parse_json_examples(document, n_features, hasher, require_labels=require_labels)


def document_items(document) -> list:
    """The examples of ``{"examples": [...]}``, a bare list, or one example object."""
    if isinstance(document, dict) and "examples" in document:
        items = document["examples"]
        if not isinstance(items, list):
            raise item_error("must be a list of examples", field="examples")
        return items
    if isinstance(document, dict):
        return [document]
    if isinstance(document, list):
        return document
    raise item_error("expected an object or a list of examples", field="examples")


def parse_json_examples(document, n_features: int, hasher: Hasher | None, *,
                        require_labels: bool = True) -> ExampleBatch:
    items = document_items(document)
    if not items:
        raise item_error("the batch holds no examples", field="examples")
    n = len(items)
    lengths = np.zeros(n, dtype=np.int64)
    index_lists: list = []
    value_lists: list = []
    labels = np.zeros(n, dtype=np.int8)
    names: dict[int, str] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise item_error("must be an object", item=i)
        if require_labels:
            label = item.get("label")
            if label is None:
                raise item_error("is required", item=i, field="label")
            if isinstance(label, bool) or not isinstance(label, int | float) or \
                    label not in (-1, 0, 1):
                raise item_error(f"label {label!r} is not -1 or +1 ({LABELS_RULE})", item=i,
                                 field="label")
            labels[i] = int(label)  # (0 read as -1 by validate_csr)
        if "features" in item:
            indices, values = _hash_features(item["features"], i, hasher, names,
                                             for_log=require_labels)
            index_lists.append(np.array(indices, dtype=np.int64))
            value_lists.append(np.array(values, dtype=np.float64))
            lengths[i] = len(indices)
            continue
        indices, values = item.get("indices"), item.get("values")
        if not isinstance(indices, list):
            raise item_error("is required and must be a list of integers", item=i,
                             field="indices")
        if not isinstance(values, list):
            raise item_error("is required and must be a list of numbers", item=i,
                             field="values")
        if len(indices) != len(values):
            raise item_error(f"indices has {len(indices)} entries, values {len(values)}",
                             item=i, field="values")
        index_lists.append(_item_array(indices, i, "indices", integral=True))
        value_lists.append(_item_array(values, i, "values", integral=False))
        lengths[i] = len(indices)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    indices_array = np.concatenate(index_lists) if index_lists else np.zeros(0, np.int64)
    values_array = np.concatenate(value_lists) if value_lists else np.zeros(0)
    batch = validate_csr(indptr, indices_array, values_array,
                         labels if require_labels else None, n_features)
    batch.names = names
    return batch


def _item_array(numbers: list, item: int, field_name: str, *, integral: bool) -> np.ndarray:
    """One example's list -> int64 / float64 array (one C call), or an error naming it."""
    if not numbers:
        return np.zeros(0, dtype=np.int64 if integral else np.float64)
    try:
        array = np.array(numbers)
    except (ValueError, OverflowError):
        array = None
    kinds = "iu" if integral else "iuf"
    if array is not None and array.ndim == 1 and array.dtype.kind in kinds:
        return array.astype(np.int64 if integral else np.float64, copy=False)
    for position, x in enumerate(numbers):  # locate the first offending element
        ok = isinstance(x, int | float) and not isinstance(x, bool)
        if integral:
            ok = isinstance(x, int) and not isinstance(x, bool) and -2**63 <= x < 2**63
        if not ok:
            expected = "an integer" if integral else "a number"
            raise item_error(f"entry {position} is {x!r}, expected {expected}", item=item,
                             field=field_name)
    raise item_error("has an unsupported element type", item=item, field=field_name)


def _shown(text: str, limit: int = 48) -> str:
    """``text`` for an error message: its first ``limit`` characters and how many more."""
    return text if len(text) <= limit else f"{text[:limit]}...(+{len(text) - limit})"


def _hash_features(features, item: int, hasher: Hasher | None, names: dict[int, str], *,
                   for_log: bool = True) -> tuple[list[int], list[float]]:
    """One item's named features -> (hashed indices, values); its names join ``names``.
    ``for_log``: the names go in the log entry, so the limits the fold reads them with
    (:data:`service.fbx1.MAX_NAME_CHARS`, :data:`service.fbx1.MAX_NAMES`) are checked here,
    before the append (the fold would refuse the whole entry), as the names are read: in
    pieces of ``_HASH_CHUNK`` names hashed at once, stopping at the first name or piece over
    a limit, so a refused item costs O(MAX_NAMES + _HASH_CHUNK), not O(its names)."""
    if hasher is None:
        raise item_error("named features need a model created with hash_bits", item=item,
                         field="features")
    if not isinstance(features, dict):
        raise item_error("must be an object {namespace: {name: value}}", item=item,
                         field="features")
    merged: dict[int, float] = {}
    for namespace, group in features.items():
        if not isinstance(group, dict):
            raise item_error("must be an object {name: value}", item=item,
                             field=f"features.{namespace}")
        pairs = iter(group.items())
        while chunk := list(itertools.islice(pairs, _HASH_CHUNK)):
            for name, value in chunk:
                _check_named(namespace, name, value, item, for_log)
            for (name, value), index in zip(chunk, _indices(hasher, namespace, chunk),
                                            strict=True):
                merged[index] = merged.get(index, 0.0) + float(value)  # collisions add up
                if index not in names:  # (as VW)
                    names[index] = f"{namespace}^{name}"
            if for_log and len(names) > fbx1.MAX_NAMES:
                raise item_error(
                    f"the request names more than {fbx1.MAX_NAMES:,} distinct features "
                    f"(hashed indices) by this item; at most {fbx1.MAX_NAMES:,} per "
                    "request: send fewer examples per request", item=item, field="features")
    return list(merged), list(merged.values())


_HASH_CHUNK = 4096  # named features hashed at once (one numba call)


def _check_named(namespace: str, name: str, value, item: int, for_log: bool) -> None:
    """InputError unless ``value`` is a plain finite number and (``for_log``) the name fits
    the log's :data:`service.fbx1.MAX_NAME_CHARS`."""
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            not abs(value) < MAX_ABS_VALUE:
        raise item_error(f"value {value!r} is not a finite number with |x| < 2^50",
                         item=item, field=f"features.{namespace}.{name}")
    chars = len(namespace) + 1 + len(name)
    if for_log and chars > fbx1.MAX_NAME_CHARS:
        raise item_error(
            f"feature name of {chars:,} characters (namespace^name); at most "
            f"{fbx1.MAX_NAME_CHARS:,} characters", item=item,
            field=f"features.{_shown(namespace)}.{_shown(name)}")


def _indices(hasher: Hasher, namespace: str, chunk: list) -> list[int]:
    """The hashed indices of ``chunk``'s names: at once where the hasher can
    (``FeatureHasher.indices``), else one call each."""
    many = getattr(hasher, "indices", None)
    if many is not None:
        return many(namespace, [name for name, _ in chunk]).tolist()
    return [hasher(namespace, name) for name, _ in chunk]


# ---------------------------------------------------------------- libsvm text

def parse_libsvm_body(body: bytes, n_features: int, *, zero_based: bool = False,
                      require_labels: bool = True, targets: bool = False) -> ExampleBatch:
    """``label idx:val ...`` lines -> batch (the numba parser of ``algorithms.sparse``);
    errors name the 1-based line. ``targets``: keep the first column as float64 targets
    (batch models) instead of checking labels ±1."""
    try:
        X, labels = parse_libsvm(body, n_features=n_features, zero_based=zero_based)
    except LibsvmFormatError as exc:
        field = "label" if "label" in exc.reason else (
            "values" if "value" in exc.reason else "indices")
        raise item_error(f"column {exc.column}: {exc.reason}", line=exc.line,
                         field=field) from exc
    if X.n_rows == 0:
        raise item_error("the batch holds no examples", field="body")
    values = X.values
    if len(values) and not (values.max() < MAX_ABS_VALUE and values.min() > -MAX_ABS_VALUE):
        bad = int(np.flatnonzero(~(np.abs(values) < MAX_ABS_VALUE))[0])
        row = int(np.searchsorted(X.indptr, bad, side="right") - 1)
        raise item_error(f"feature value {float(values[bad])!r} is outside the valid range "
                         "|x| < 2^50 (about 1.1e15)", line=line_of_row(body, row),
                         field="values")
    if targets:
        bad = np.flatnonzero(~(np.abs(labels) < MAX_ABS_VALUE))
        if len(bad):
            raise item_error("target is NaN, infinite or outside |y| < 2^50",
                             line=line_of_row(body, int(bad[0])), field="target")
        return ExampleBatch(X, np.asarray(labels, dtype=np.float64))
    if require_labels:
        labels = signed_labels_of(labels, lambda row: {"line": line_of_row(body, row)})
    return ExampleBatch(X, labels.astype(np.int8) if require_labels else None)


# ---------------------------------------------------------------- stream entries

def entry_payload(fields: dict) -> tuple:
    """``(data, format)`` of a log / stream entry (``fmt`` inferred when absent)."""
    data = fields.get(b"data", fields.get("data"))
    if data is None:
        raise item_error("entry has no 'data' field", field="data")
    if isinstance(data, str):
        data = data.encode()
    fmt = fields.get(b"fmt", fields.get("fmt"))
    fmt = fmt.decode() if isinstance(fmt, bytes) else (fmt or fbx1.infer_format(data))
    return data, fmt


def examples_in(data, fmt: str | None) -> int:
    """How many examples a rejected body or entry holds, as far as it says: the items of a
    JSON document, the non-blank lines of libsvm text, the count in an FBX1 header; 0 when
    it cannot be read (for the rejected-examples counter; only on the error path). O(size)."""
    if fmt == "bin":
        return fbx1.batch_rows(data) or 0
    if fmt == "libsvm":
        return sum(1 for line in bytes(data).splitlines() if line.strip())
    if fmt == "json":
        try:
            return len(document_items(orjson.loads(bytes(data))))
        except (orjson.JSONDecodeError, InputError):
            return 0
    return 0


def entry_examples(fields: dict) -> int:
    """:func:`examples_in` of a rejected log / stream entry (0 when it has no data)."""
    try:
        return examples_in(*entry_payload(fields))
    except InputError:
        return 0


def parse_entry(fields: dict, n_features: int, hasher: Hasher | None, *,
                zero_based: bool = False) -> ExampleBatch:
    """A log / stream entry (fields ``data`` and optional ``fmt``) -> batch. ``data`` may be
    any buffer (the Redis reader gives big values as uint8 arrays)."""
    data, fmt = entry_payload(fields)
    if fmt == "bin":
        batch = decode_bin(data, n_features)
        raw_names = fields.get(b"names", fields.get("names"))
        if raw_names is not None:
            try:
                batch.names = fbx1.decode_names(raw_names, n_features)
            except fbx1.WireFormatError as exc:
                raise item_error(str(exc), field="names") from exc
        return batch
    if fmt == "json":
        return parse_json_body(bytes(data), n_features, hasher)
    if fmt == "libsvm":
        return parse_libsvm_body(data, n_features, zero_based=zero_based)
    raise item_error(f"unknown format {fmt!r} (expected bin, json or libsvm)", field="fmt")
