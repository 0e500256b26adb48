"""Examples for batch models: named features per group, index/value lists, libsvm, FBX1.

A batch model's example is ``{"features": {"<group>": {"<feature>": value}}, "target": y}``
(``"label": ±1`` for classification; one of ``params.classes`` for a multi-class model,
kept as its class index: ``service.batch.classes``) or ``{"indices": [...], "values":
[...], "target": y}`` with indices into the concatenation of the groups' features. Every
check names the item and the field (``features.serum.s9``, ``target``); a batch with one
bad item is rejected whole. Parsed batches are :class:`~service.ingest.ExampleBatch`
with float64 targets, and log entries are FBX1 with the targets flag, so the fold reads
every source the same way.
"""

from __future__ import annotations

from itertools import accumulate

import numpy as np
import orjson
from numba import njit, types

from algorithms.sparse import CSRBatch
from algorithms.sparse._validate import MAX_ABS_VALUE, OK, check_rows
from algorithms.sparse.libsvm import line_of_row
from service import fbx1
from service.batch.spec import BatchLayout
from service.errors import InputError, MalformedBodyError, UnsupportedMediaTypeError, item_error
from service.ingest import (
    LABELS_RULE,
    ExampleBatch,
    decode_bin,
    document_items,
    entry_payload,
    parse_libsvm_body,
    signed_labels_of,
    validate_csr,
)
from service.priority import yield_to_predictions


def target_field(task: str) -> str:
    return "label" if task == "classification" else "target"


def parse_batch_items(items, layout: BatchLayout, task: str, *,
                      require_targets: bool = True) -> tuple[ExampleBatch, np.ndarray]:
    """A list of example objects -> (batch, present) where ``present`` (n, G) bool says which
    groups each example carries (named form: the groups named, even with no non-zero value;
    index form: the groups of its indices). O(total features)."""
    if not isinstance(items, list):
        raise item_error("must be a list of examples", field="examples")
    if not items:
        raise item_error("the batch holds no examples", field="examples")
    n = len(items)
    name = target_field(task)
    targets = np.zeros(n, dtype=np.float64)
    present = np.zeros((n, layout.n_groups), dtype=bool)
    lengths: list[int] = []
    index_parts: list[np.ndarray] = []
    value_parts: list[np.ndarray] = []
    indexed = False  # an example in the index form: its rows need the CSR checks
    for i, item in enumerate(items):
        if i % 16 == 15:  # (a body of many named examples is milliseconds of Python)
            yield_to_predictions()
        if not isinstance(item, dict):
            raise item_error("must be an object", item=i)
        if require_targets:
            targets[i] = _target(item, i, name, task) if layout.classes is None else \
                _class_target(item, i, layout)
        else:
            extra = {"target", "label"} & set(item)
            if extra and not isinstance(item.get(next(iter(extra))), int | float) and not (
                    layout.classes is not None and isinstance(item.get("label"), str)):
                raise item_error("must be a number", item=i, field=next(iter(extra)))
        unknown = set(item) - {"features", "indices", "values", "target", "label"}
        if unknown:
            raise item_error(f"unknown fields {sorted(unknown)}", item=i,
                             field=sorted(unknown)[0])
        if "features" in item:
            if "indices" in item or "values" in item:
                raise item_error("give features or indices/values, not both", item=i,
                                 field="features")
            indices, values = _named(item["features"], i, layout, present[i])
        else:
            indices, values = _indexed(item, i, layout.n_features)
            indexed = True
            if len(indices):
                present[i, np.unique(layout.group_of[indices])] = True
        index_parts.append(indices)
        value_parts.append(values)
        lengths.append(len(indices))
    indptr = np.fromiter(accumulate(lengths, initial=0), dtype=np.int64, count=n + 1)
    indices, values = np.concatenate(index_parts), np.concatenate(value_parts)
    if indexed:
        batch = validate_csr(indptr, indices, values, None, layout.n_features)
    else:  # named: every index looked up in the layout (in range, unique), every value checked
        batch = ExampleBatch(CSRBatch(indptr, indices.astype(np.int32), values,
                                      layout.n_features), None)
    if require_targets and task == "classification" and layout.classes is None:
        targets = signed_labels_of(targets, lambda row: {"item": row})
    batch.labels = targets if require_targets else None
    return batch, present


def _target(item: dict, i: int, name: str, task: str) -> float:
    other = "target" if name == "label" else "label"
    value = item.get(name)
    if value is None:
        hint = f" ({other!r} is for {'regression' if other == 'target' else 'classification'}" \
               " models)" if other in item else ""
        raise item_error(f"is required{hint}", item=i, field=name)
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            not abs(value) < MAX_ABS_VALUE:
        raise item_error(f"{value!r} is not a finite number with |y| < 2^50", item=i,
                         field=name)
    if task == "classification" and value not in (-1, 0, 1):
        raise item_error(f"label {value!r} is not -1 or +1 ({LABELS_RULE})", item=i,
                         field=name)
    return float(value)  # (a label 0 is read as -1 by parse_batch_items)


def _class_target(item: dict, i: int, layout: BatchLayout) -> float:
    """A multi-class example's label as its class index (service.batch.classes)."""
    if "label" not in item:
        hint = " ('target' is for regression models)" if "target" in item else ""
        raise item_error(f"is required{hint}", item=i, field="label")
    return layout.classes.index_of(item["label"], i)


_PLAIN_NUMBERS = frozenset({int, float})


def _named(features, i: int, layout: BatchLayout, present: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray]:
    """``{group: {feature: value}}`` -> (indices, values), marking the groups in
    ``present``. The usual example (known names, plain numbers) goes through C-level
    list and type passes and one vectorized bound check; anything else through
    :func:`_named_checked`, which names the problem. O(features)."""
    if isinstance(features, dict):
        indices: list[int] = []
        values: list = []
        groups: list[int] = []
        try:
            for group_name, group in features.items():
                g = layout.group_index[group_name]
                if type(group) is not dict:
                    break
                names = layout.feature_index[g]
                indices += [names[feature] for feature in group]
                values += group.values()
                groups.append(g)
            else:
                if _PLAIN_NUMBERS.issuperset(map(type, values)):
                    out = np.array(values, dtype=np.float64)
                    if (np.abs(out) < MAX_ABS_VALUE).all():
                        present[groups] = True
                        return np.array(indices, dtype=np.int64), out
        except (KeyError, TypeError, OverflowError):
            pass
    return _named_checked(features, i, layout, present)


def _named_checked(features, i: int, layout: BatchLayout, present: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(features, dict):
        raise item_error("must be an object {group: {feature: value}}", item=i,
                         field="features")
    indices: list[int] = []
    values: list[float] = []
    for group_name, group in features.items():
        g = layout.group_index.get(group_name)
        if g is None:
            raise item_error(f"unknown group {group_name!r}; this model has "
                             f"{layout.group_names}", item=i, field=f"features.{group_name}")
        if not isinstance(group, dict):
            raise item_error("must be an object {feature: value}", item=i,
                             field=f"features.{group_name}")
        present[g] = True
        names = layout.feature_index[g]
        for feature, value in group.items():
            index = names.get(feature)
            if index is None:
                raise item_error(f"group {group_name!r} has no feature {feature!r}", item=i,
                                 field=f"features.{group_name}.{feature}")
            if isinstance(value, bool) or not isinstance(value, int | float) or \
                    not abs(value) < MAX_ABS_VALUE:
                raise item_error(f"value {value!r} is not a finite number with |x| < 2^50",
                                 item=i, field=f"features.{group_name}.{feature}")
            indices.append(index)
            values.append(float(value))
    return np.array(indices, dtype=np.int64), np.array(values, dtype=np.float64)


def _indexed(item: dict, i: int, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    indices, values = item.get("indices"), item.get("values")
    if not isinstance(indices, list):
        raise item_error("is required (or features) and must be a list of integers", item=i,
                         field="indices")
    if not isinstance(values, list) or len(values) != len(indices):
        raise item_error(f"must be a list of {len(indices)} numbers (one per index)", item=i,
                         field="values")
    for position, x in enumerate(indices):
        if isinstance(x, bool) or not isinstance(x, int):
            raise item_error(f"entry {position} is {x!r}, expected an integer", item=i,
                             field="indices")
        if not 0 <= x < n_features:
            raise item_error(f"feature index {x} is outside [0, {n_features})", item=i,
                             field="indices")
    for position, x in enumerate(values):
        if isinstance(x, bool) or not isinstance(x, int | float) or not abs(x) < MAX_ABS_VALUE:
            raise item_error(f"entry {position} is {x!r}, expected a finite number with "
                             "|x| < 2^50", item=i, field="values")
    return np.array(indices, dtype=np.int64), np.array(values, dtype=np.float64)


def parse_batch_document(document, layout: BatchLayout, task: str, *,
                         require_targets: bool = True) -> tuple[ExampleBatch, np.ndarray]:
    """``{"examples": [...]}``, a bare list, or one example object."""
    return parse_batch_items(document_items(document), layout, task,
                             require_targets=require_targets)


def _json(body: bytes):
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MalformedBodyError(f"body is not valid JSON: {exc}",
                                 [{"field": "body", "message": str(exc)}]) from exc


def _libsvm(data, layout: BatchLayout, task: str, zero_based: bool) -> ExampleBatch:
    if layout.classes is not None:  # class indices 0..K-1
        batch = parse_libsvm_body(data, layout.n_features, zero_based=zero_based, targets=True)
        layout.classes.check_indices(batch.labels,
                                     lambda row: {"line": line_of_row(data, row)})
        return batch
    if task == "classification":  # labels ±1, as for online models
        batch = parse_libsvm_body(data, layout.n_features, zero_based=zero_based)
        batch.labels = batch.labels.astype(np.float64)
        return batch
    return parse_libsvm_body(data, layout.n_features, zero_based=zero_based, targets=True)


def _binary(data, layout: BatchLayout, task: str, keep_raw: bool) -> ExampleBatch:
    batch = decode_bin(data, layout.n_features, field="data", keep_raw=keep_raw, targets=True)
    if layout.classes is not None:
        layout.classes.check_indices(batch.labels)
    elif task == "classification":
        bad = np.flatnonzero((batch.labels != 1.0) & (batch.labels != -1.0))
        if len(bad):
            raise item_error(f"label {batch.labels[bad[0]]!r} is not -1 or +1",
                             item=int(bad[0]), field="label")
    return batch


def parse_batch_body(body: bytes, media_type: str, layout: BatchLayout, task: str, *,
                     zero_based: bool = False) -> tuple[ExampleBatch, str]:
    """A POST /examples body of a batch model -> (batch with targets, format)."""
    if media_type in ("application/json", "application/x-ndjson", ""):
        return parse_batch_document(_json(body), layout, task)[0], "json"
    if media_type in ("text/plain", "text/x-libsvm", "application/x-libsvm"):
        return _libsvm(body, layout, task, zero_based), "libsvm"
    if media_type in ("application/octet-stream", "application/x-featurebudget-batch"):
        return _binary(body, layout, task, keep_raw=True), "bin"
    raise UnsupportedMediaTypeError(
        f"content type {media_type!r} is not supported; use application/json, text/plain "
        "(libsvm) or application/octet-stream (FBX1 binary)")


def parse_batch_entry(fields: dict, layout: BatchLayout, task: str, *,
                      zero_based: bool = False) -> ExampleBatch:
    """A log / stream entry of a batch model -> batch with float64 targets."""
    data, fmt = entry_payload(fields)
    if fmt == "bin":
        return _binary(data, layout, task, keep_raw=False)
    if fmt == "json":
        return parse_batch_document(_json(bytes(data)), layout, task)[0]
    if fmt == "libsvm":
        return _libsvm(bytes(data), layout, task, zero_based)
    raise item_error(f"unknown format {fmt!r} (expected bin, json or libsvm)", field="fmt")


def parse_batch_entries(fields: list[dict], layout: BatchLayout, task: str
                        ) -> tuple[ExampleBatch, list[int]] | None:
    """Several log entries parsed together: ``(one batch of all their rows in order, rows
    per entry)`` when every entry is FBX1 with targets and every check passes, else None
    (the caller then parses entry by entry, which names the problem and rejects only the
    entries at fault). What is accepted is exactly what :func:`parse_batch_entry` accepts.

    One-example entries are cheap this way: per entry only the 16-byte header is read in
    Python (``struct``); the payloads are joined once and one kernel copies every entry's
    row lengths, indices, values and targets into the block's arrays, then the rows and the
    targets are checked once for the whole block. O(entries + nnz)."""
    if not fields:
        return None
    payloads, heads = [], np.empty((len(fields), 4), dtype=np.int64)
    offset = 0
    for k, entry in enumerate(fields):
        data = entry.get(b"data", entry.get("data"))
        fmt = entry.get(b"fmt", entry.get("fmt"))
        if data is None or fmt not in (b"bin", "bin") or isinstance(data, str):
            return None
        size = len(data) if isinstance(data, bytes | bytearray) else memoryview(data).nbytes
        if size < fbx1.HEADER_BYTES:
            return None
        magic, value_bytes, flags, _, n, nnz = fbx1._HEADER.unpack_from(data, 0)
        if magic != fbx1.MAGIC or value_bytes not in (4, 8) or flags != fbx1.FLAG_TARGETS \
                or n < 1 or size != fbx1.HEADER_BYTES + 4 * n + (4 + value_bytes) * nnz + 8 * n:
            return None
        heads[k] = (offset, n, nnz, value_bytes)
        payloads.append(data)
        offset += size
    buffer = np.frombuffer(b"".join(payloads), dtype=np.uint8)
    rows, total = int(heads[:, 1].sum()), int(heads[:, 2].sum())
    indptr = np.empty(rows + 1, dtype=np.int64)
    indices = np.empty(total, dtype=np.int32)
    values = np.empty(total, dtype=np.float64)
    targets = np.empty(rows, dtype=np.float64)
    if not _gather_fbx1(buffer, heads, indptr, indices, values, targets):
        return None  # row lengths that do not sum to a header's nnz
    if not np.all(np.abs(targets) < MAX_ABS_VALUE):
        return None
    if layout.classes is not None:
        if not layout.classes.indices_ok(targets):
            return None
    elif task == "classification" and not np.all((targets == 1.0) | (targets == -1.0)):
        return None
    if check_rows(indptr, indices, values, layout.n_features, bounded=True)[0] != OK:
        return None
    batch = ExampleBatch(CSRBatch(indptr, indices, values, int(layout.n_features)), targets)
    return batch, heads[:, 1].tolist()


_READ_ONLY_BYTES = types.Array(types.uint8, 1, "C", readonly=True)


@njit(types.boolean(_READ_ONLY_BYTES, types.int64[:, ::1], types.int64[::1], types.int32[::1],
                    types.float64[::1], types.float64[::1]), cache=True, nogil=True)
def _gather_fbx1(buffer, heads, indptr, indices, values, targets) -> bool:
    """Copy the FBX1 payloads at ``heads[k] = (offset, n, nnz, value bytes)`` of
    ``buffer`` (little-endian, flag bit 0: float64 targets) into one block's arrays;
    False when an entry's row lengths do not sum to its nnz. O(bytes)."""
    row = 0
    at = 0
    indptr[0] = 0
    for k in range(heads.shape[0]):
        base, n, nnz, width = heads[k, 0], heads[k, 1], heads[k, 2], heads[k, 3]
        o = base + 16
        lengths = buffer[o:o + 4 * n].view(np.uint32)
        o += 4 * n
        start = at
        for r in range(n):
            at += lengths[r]
            indptr[row + r + 1] = at
        if at - start != nnz:
            return False
        indices[start:at] = buffer[o:o + 4 * nnz].view(np.int32)
        o += 4 * nnz
        if width == 8:
            values[start:at] = buffer[o:o + 8 * nnz].view(np.float64)
        else:
            source = buffer[o:o + 4 * nnz].view(np.float32)
            for j in range(nnz):
                values[start + j] = source[j]
        o += width * nnz
        targets[row:row + n] = buffer[o:o + 8 * n].view(np.float64)
        row += n
    return True


__all__ = ["InputError", "parse_batch_body", "parse_batch_document", "parse_batch_entries",
           "parse_batch_entry", "parse_batch_items", "target_field"]
